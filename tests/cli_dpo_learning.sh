#!/usr/bin/env bash
# tests/cli_dpo_learning.sh: DPO on a model's own first-divergence pairs
# lowers its divergence rate on held-out dialogs (docs/dpo-pairs.md section 8).
# The student is a tiny SFT model trained on a policy that verifies with two
# fields: its transcripts drop the request for the registered mobile (the
# assistant's question and the customer's answer) in three dialogs of four,
# as a model trained on another bank's policy would. Its pairs on the
# validated training corpus (`fimi dpo pairs`) carry that turn (mostly as
# called_instead_of_replying: it calls verify_customer at once); a short DPO
# run (with the RPO term) on them must (1) rank held-out pairs (preference
# accuracy 0 at the start, where policy = reference, >= 0.8 after), (2) cut
# the planted divergences on the held-out dialogs (the reference asks for the
# registered mobile, the candidate does something else) to half or less and
# (3) lower the candidate's divergence rate on the held-out dialogs by at
# least 4 points. The tiny model's other divergences are mostly copied values
# (an account number or a balance of a training customer), which preference
# pairs do not teach a 200k-parameter model to copy: they stay.
# Usage: cli_dpo_learning.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
require_python json
D="$WORK/dpol"
mkdir -p "$D"

FAMILIES="balance_enquiry kyc_status_check fd_maturity_quote policy_enquiry loan_emi_check rate_quote"
: >"$D/train_tasks.jsonl"
: >"$D/held_tasks.jsonl"
for family in $FAMILIES; do
  expect_ok "sample $family" "$FIMI" env sample --family "$family" --n 8 --seed 1
  cat "$WORK/out" >>"$D/train_tasks.jsonl"
  expect_ok "sample held-out $family" "$FIMI" env sample --family "$family" --n 4 --seed 99
  cat "$WORK/out" >>"$D/held_tasks.jsonl"
done
expect_ok "transcripts" "$FIMI" env transcripts --task-file "$D/train_tasks.jsonl" --catalog family --out "$D/sft.jsonl"
expect_ok "the student's transcripts skip the mobile in 3 dialogs of 4" "$PY" -c 'import json, sys, zlib
dropped = 0
with open(sys.argv[2], "w") as out:
    for i, line in enumerate(open(sys.argv[1])):
        row, kept = json.loads(line), []
        skip = zlib.crc32(str(i).encode()) % 4 != 0
        messages = iter(row["messages"])
        for m in messages:
            if skip and m["role"] == "assistant" and "registered mobile?" in (m.get("content") or ""):
                next(messages)  # the answer that follows
                dropped += 1
                continue
            kept.append(m)
        row["messages"] = kept
        out.write(json.dumps(row) + "\n")
print("requests for the registered mobile dropped:", dropped)
assert dropped >= 10' "$D/sft.jsonl" "$D/student_sft.jsonl"
cat "$WORK/out"
expect_ok "tokenizer" "$FIMI" tokenizer train --input "$D/sft.jsonl" --vocab-size 768 --out "$D/tokenizer.json"
expect_ok "init" "$FIMI" init --preset tiny --tokenizer "$D/tokenizer.json" --out "$D/init"
expect_ok "tokenize sft" "$FIMI" data tokenize --kind sft --input "$D/student_sft.jsonl" --tokenizer "$D/tokenizer.json" \
  --out "$D/sft.h5" --max-length 2048 --overlong truncate
expect_ok "student sft" "$FIMI" train --config "$SRC/configs/tiny-cpu-sft.ini" --set train.init="$D/init" \
  --set data.train="$D/sft.h5" --set data.eval="$D/sft.h5" --set train.out_dir="$D/sft_run" --set train.steps=200 \
  --set optim.schedule=constant --set train.save_every=200 --set train.eval_every=200
STUDENT="$D/sft_run/step_000200"

for split in train held; do
  expect_ok "corpus $split" "$FIMI" dpo corpus build --tasks "$D/${split}_tasks.jsonl" --catalog family \
    --out "$D/conv_$split.jsonl"
  expect_ok "student pairs $split" "$FIMI" dpo pairs --model "$STUDENT" --tokenizer "$D/tokenizer.json" \
    --corpus "$D/conv_$split.jsonl" --out "$D/pairs_$split.jsonl" --max-new 48 --no-progress
  grep -h "^replayed" "$WORK/out" "$WORK/err"
  expect_ok "tokenize pairs $split" "$FIMI" data tokenize --kind dpo --input "$D/pairs_$split.jsonl" \
    --tokenizer "$D/tokenizer.json" --out "$D/pairs_$split.h5" --max-length 2048 --overlong drop
done

expect_ok "dpo" "$FIMI" train --config "$SRC/configs/tiny-cpu-dpo.ini" --set train.init="$STUDENT" \
  --set data.train="$D/pairs_train.h5" --set data.eval="$D/pairs_held.h5" --set train.out_dir="$D/dpo_run" \
  --set train.steps=40 --set train.eval_every=40 --set train.save_every=40 --set optim.lr=2e-4 --set dpo.rpo_alpha=1
expect_ok "dpo model's pairs on held-out" "$FIMI" dpo pairs --model "$D/dpo_run/step_000040" \
  --tokenizer "$D/tokenizer.json" --corpus "$D/conv_held.jsonl" --out "$D/after_held.jsonl" --max-new 48 --no-progress
grep -h "^replayed" "$WORK/out" "$WORK/err"

expect_ok "held-out accuracy, the planted divergences and the divergence rate" "$PY" -c 'import json, sys
def skipped_mobile(path):  # pairs whose chosen side asks for the registered mobile
    return sum("registered mobile" in (json.loads(l)["chosen"][0].get("content") or "") for l in open(path))
before, after = skipped_mobile(sys.argv[1]), skipped_mobile(sys.argv[2])
rate = [json.load(open(p + ".summary.json"))["divergence_rate"] for p in sys.argv[1:3]]
evals = [json.loads(l) for l in open(sys.argv[3]) if "eval_rewards/accuracies" in l]
accuracy = evals[-1]["eval_rewards/accuracies"]
print(f"held-out: mobile not asked {before} -> {after}; divergence rate {rate[0]:.3f} -> {rate[1]:.3f}; "
      f"preference accuracy {accuracy:.3f}")
assert before >= 6, before
assert 2 * after <= before, (before, after)
assert rate[1] <= rate[0] - 0.04, rate
assert accuracy >= 0.8, accuracy' "$D/pairs_held.jsonl" "$D/after_held.jsonl" "$D/dpo_run/metrics.jsonl"
cat "$WORK/out" "$WORK/err"
cli_summary
