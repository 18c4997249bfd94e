#!/usr/bin/env bash
# tests/cli_dpo.sh: `fimi train` with train.objective = dpo end to end on
# configs/tiny-cpu-dpo.ini: tokenizer -> data tokenize --kind dpo -> init ->
# train. The first run adds ref_logp_chosen/ref_logp_rejected to both
# datasets (the initial model's sums: step 1 has loss ln 2 and zero rewards);
# metrics.jsonl carries TRL's DPO metrics; accuracy and margins rise and the
# held-out accuracy reaches 0.9; --resume from its step-10 checkpoint equals
# the 20 straight steps;
# dpo.reference = model gives the same first step as the precomputed pass;
# the divergence monitor warns in the log (every run has a low threshold,
# so the 20-step run shows it); the 40-GPU config parses (--dry-run); config
# errors. Usage: cli_dpo.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
require_python json  # h5py and numpy too, when there, for the reference values
CONFIG="$SRC/configs/tiny-cpu-dpo.ini"
D="$WORK/tiny-dpo"
mkdir -p "$D"
train() {  # train OUT_DIR [more args...]  (the monitor only logs: metrics do not depend on it)
  local out="$1"; shift
  "$FIMI" train --config "$CONFIG" --set train.init="$D/init" --set data.train="$D/train.h5" \
    --set data.eval="$D/eval.h5" --set train.out_dir="$out" --set train.progress=false \
    --set dpo.monitor_margin=1.0 --set dpo.monitor_window=3 "$@"
}

make_tiny_tokenizer "$D"
tokenize_tiny dpo "$D"
expect_ok "init" "$FIMI" init --config "$CONFIG" --tokenizer "$D/tokenizer.json" --out "$D/init"
cp "$D/train.h5" "$D/train-noref.h5"

expect_ok "train 20 steps" train "$WORK/a"
cat "$WORK/out"
expect_true "reference pass logged" grep -q "wrote ref_logp_chosen and ref_logp_rejected" "$WORK/err"
# The divergence monitor: margins above 1.0 for 3 steps warn in the log.
expect_true "monitor warning logged" grep -q "DPO margin .* has stayed above 1.0 for 3 steps" "$WORK/err"
for f in train eval; do
  expect_ok "fimi data info $f.h5" "$FIMI" data info --json "$D/$f.h5"
  expect_true "$f.h5 lists ref_logp_chosen and ref_logp_rejected" "$PY" -c 'import json, sys
assert sorted(json.load(open(sys.argv[1]))["ref"]) == ["ref_logp_chosen", "ref_logp_rejected"]' "$WORK/out"
done
if has_python h5py numpy; then
  echo "reference log-probs checked with fimi data info and h5py ($PY): shapes, finite, negative"
  expect_true "ref_logp_* in both files, finite, negative" "$PY" -c 'import h5py, numpy as np, sys
for p in sys.argv[1:]:
    f = h5py.File(p); c, r = f["ref_logp_chosen"][()], f["ref_logp_rejected"][()]
    assert c.shape == r.shape == (len(f["prompt/offsets"]) - 1,), (c.shape, r.shape)
    assert np.isfinite(c).all() and (c < 0).all() and (r < 0).all()' "$D/train.h5" "$D/eval.h5"
else
  echo "reference log-probs checked with fimi data info only (names); their values not read: no h5py/numpy in $PY"
fi
expect_true "20 metric lines" test "$(wc -l <"$WORK/a/metrics.jsonl")" = 20
expect_true "DPO metrics: step 1 at ln 2 with zero rewards, accuracy and margins rise" "$PY" -c 'import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = ["rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "logps/chosen",
        "logps/rejected", "rewards/chosen_change", "rewards/rejected_change"]
assert all(k in r for r in rows for k in keys), rows[0].keys()
r0 = rows[0]
assert abs(r0["loss"] - math.log(2)) < 1e-3 and abs(r0["rewards/chosen"]) < 1e-3 and abs(r0["rewards/rejected"]) < 1e-3, r0
acc = [r["rewards/accuracies"] for r in rows]; mar = [r["rewards/margins"] for r in rows]
assert sum(acc[-5:]) / 5 > 0.9 and sum(mar[-5:]) / 5 > 1.0, (acc, mar)
assert rows[-1]["loss"] < 0.3 and rows[-1]["skipped"] == 0, rows[-1]
ev = [r for r in rows if "eval_loss" in r]
assert [r["step"] for r in ev] == [10, 20], ev
assert ev[-1]["eval_rewards/accuracies"] >= 0.9 and ev[-1]["eval_loss"] < math.log(2), ev[-1]
print(acc, mar)' "$WORK/a/metrics.jsonl"
expect_true "checkpoint at step 20" test -f "$WORK/a/step_000020/DONE"

# Resume from the straight run's step-10 checkpoint (save_every 10; a run
# stopped there with train.stop_at_step saves the same, cli_train.sh checks
# that path) == the straight run's steps 11-20; the reference values now
# come from the files. metrics.jsonl is cut back to step 10 on resume.
mkdir -p "$WORK/b"
cp -r "$WORK/a/step_000010" "$WORK/a/metrics.jsonl" "$WORK/b/"
expect_ok "resume from step 10" train "$WORK/b" --resume "$WORK/b"
expect_true "no second reference pass" sh -c "! grep -q 'reference pass' '$WORK/err'"
expect_true "resumed at step 10" grep -q "step_000010" "$WORK/err"
# The *_change metrics too: the step-1 baseline travels in trainer_state.json.
expect_true "resumed metrics == straight (the *_change metrics included)" test \
  "$(metrics_without_timing "$WORK/b/metrics.jsonl")" = "$(metrics_without_timing "$WORK/a/metrics.jsonl")"
expect_true "the checkpoint keeps the DPO baseline" grep -q baseline_rewards_chosen \
  "$WORK/b/step_000010/trainer_state.json"
expect_true "resumed weights == straight (bitwise)" cmp "$WORK/a/step_000020/model.safetensors" \
  "$WORK/b/step_000020/model.safetensors"

# A frozen reference model instead of precomputed values: same step 1.
expect_ok "reference = model" train "$WORK/m" --set dpo.reference=model --set train.steps=2 \
  --set data.train="$D/train-noref.h5" --set data.eval=
expect_true "no reference pass with reference = model" sh -c "! grep -q 'reference pass' '$WORK/err'"
expect_true "reference model: step 1 loss ln 2, rewards exactly 0" "$PY" -c 'import json, math, sys
r = json.loads(open(sys.argv[1]).readline())
assert abs(r["loss"] - math.log(2)) < 1e-9 and r["rewards/chosen"] == 0 and r["rewards/rejected"] == 0, r' \
  "$WORK/m/metrics.jsonl"

# Configs.
expect_ok "the 40-GPU DPO config (paper Table 4) parses" "$FIMI" train --config "$SRC/configs/dpo-40gpu.ini" --dry-run
expect_true "plan names sigmoid, beta 0.1, lr 5e-07, save_every 90" sh -c "grep -q 'loss sigmoid, beta 0.1' '$WORK/out' && grep -q 'lr 5e-07 (cosine' '$WORK/out' && grep -q 'save_every 90' '$WORK/out'"
expect_fail "bad loss" "dpo.loss" train "$WORK/d" --set dpo.loss=kto
expect_fail "bad beta" "beta" train "$WORK/d" --set dpo.beta=0
expect_fail "bad reference" "dpo.reference" train "$WORK/d" --set dpo.reference=teacher
expect_fail "missing dataset" "data.train" train "$WORK/d" --set data.train="$D/missing.h5"
cli_summary
