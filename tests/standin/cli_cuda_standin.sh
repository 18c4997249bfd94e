#!/usr/bin/env bash
# tests/standin/cli_cuda_standin.sh: `fimi train / score / generate --device
# cuda` end to end without a GPU, on fimi_standin (the fimi CLI linked with
# the host stand-in of the CUDA op layer, tests/standin/CMakeLists.txt), on a
# small Gemma 3 model with head_dim 64 (the CUDA attention needs 64/128/256):
#   a. train --device cuda: the loss falls, and each step's loss is within a
#      bf16 tolerance of the same run with --device cpu (same binary);
#   b. stop at step 6 + --resume on cuda == 12 straight on cuda (bitwise);
#   c. a cuda checkpoint resumes on --device cpu and runs to the end;
#   d. cuda.attention=cudnn and model.recompute=true: bitwise the default's
#      final weights (the stand-in's cuDNN attention is fimi's);
#   e. score --device cuda within 5e-2 of --device cpu; greedy generate gives
#      the cpu's tokens;
#   DPO on cuda learns and follows the cpu run;
#   f. cuda.attention=cudnn on a softcapped gemma2 model fails naming
#      attn_logit_softcapping;
#   g. eval --device cuda plays the cpu's episodes (tasks, trials, seeds);
#   h. dpo pairs --device cuda replays the cpu's turns; its scores follow;
#   i. Gemma 4 (head dims 64/512): train, score and generate on cuda follow
#      the cpu; cudnn refused for its 512-wide heads (recompute and the
#      rest: test_gemma_cuda_standin).
# Usage: cli_cuda_standin.sh PATH/TO/fimi_standin
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
source "$SRC/tests/lib_cli.sh"
require_python json
# Two threads at most: the test machines are shared (results do not depend on it).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
CONFIG="$SRC/configs/tiny-cpu-sft.ini"
D="$WORK/data"
mkdir -p "$D"
STEPS=12
train() {  # train OUT_DIR [more args...]: 12 steps of micro-batch 4 from $D/init
  local out="$1"; shift
  "$FIMI" train --config "$CONFIG" --set train.init="$D/init" --set data.train="$D/train.h5" \
    --set data.eval="$D/eval.h5" --set train.out_dir="$out" --set train.progress=false \
    --set train.steps=$STEPS --set train.micro_batch=4 --set train.eval_every=6 --set train.save_every=6 \
    --set train.keep_last=2 "$@"
}
last="step_0000$STEPS"

make_tiny_tokenizer "$D"
tokenize_tiny sft "$D"
write_gemma3_head_dim64 "$D/gemma3.json"
# The same shape as gemma2 with its softcaps (attention 50, final 30).
cat >"$D/gemma2.json" <<'EOF'
{"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "vocab_size": 600, "hidden_size": 128,
 "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
 "head_dim": 64, "query_pre_attn_scalar": 64, "sliding_window": 8, "max_position_embeddings": 2048,
 "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}
EOF
expect_ok "init gemma3 head_dim 64" "$FIMI" init --config "$CONFIG" --set model.config_json="$D/gemma3.json" \
  --tokenizer "$D/tokenizer.json" --out "$D/init"
expect_true "init has head_dim 64" "$PY" -c 'import json, sys
c = json.load(open(sys.argv[1])); assert c["head_dim"] == 64 and c["vocab_size"] == 600, c' "$D/init/config.json"
expect_ok "init gemma2 softcapped" "$FIMI" init --config "$CONFIG" --set model.config_json="$D/gemma2.json" \
  --tokenizer "$D/tokenizer.json" --out "$D/init2"

# a. cuda vs cpu, 12 steps each.
expect_ok "train --device cpu" train "$WORK/cpu" --device cpu
expect_ok "train --device cuda" train "$WORK/cuda" --device cuda
cat "$WORK/out"
expect_true "cuda: $STEPS metric lines" test "$(wc -l <"$WORK/cuda/metrics.jsonl")" = $STEPS
expect_true "cuda: train loss falls by more than 2 nats" "$PY" -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first = sum(r["loss"] for r in rows[:3]) / 3; last = sum(r["loss"] for r in rows[-3:]) / 3
print(first, last); assert first - last > 2.0 and rows[-1]["skipped"] == 0' "$WORK/cuda/metrics.jsonl"
# Tolerance 1e-2 relative per step: the GPU path keeps bf16 weights (stochastic
# rounding) and bf16 activations with fp32 accumulation, the CPU fp32
# throughout. One bf16 rounding is 2^-9 = 2e-3 relative; on this 2-layer model
# it averages out in the loss (mean over ~130 tokens): measured 4.4e-4 (ASan
# build) and 5.4e-4 (Release) at most over 12 steps (the loss falls 6.4 ->
# 3.3), so 1e-2 leaves a wide margin for drift while a wrong kernel (off by a
# whole term) moves the loss by far more.
expect_true "cuda step losses within 1e-2 relative of cpu" "$PY" -c 'import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]; b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
rel = [abs(x - y) / abs(x) for x, y in zip(a, b)]
print("max relative loss difference cuda vs cpu: %.3g" % max(rel))
assert len(a) == len(b) == int(sys.argv[3]) and max(rel) < 1e-2, rel' \
  "$WORK/cpu/metrics.jsonl" "$WORK/cuda/metrics.jsonl" $STEPS
"$PY" -c 'import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]; b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
print("max relative loss difference cuda vs cpu: %.3g" % max(abs(x - y) / abs(x) for x, y in zip(a, b)))' \
  "$WORK/cpu/metrics.jsonl" "$WORK/cuda/metrics.jsonl" 2>/dev/null
for f in DONE config.json model.safetensors tokenizer.json optimizer.h5 trainer_state.json; do
  expect_true "cuda checkpoint has $f" test -f "$WORK/cuda/$last/$f"
done

# b. 6 + --resume on cuda == 12 straight on cuda.
expect_ok "cuda: train to step 6" train "$WORK/res" --device cuda --set train.stop_at_step=6
expect_true "cuda: stopped at 6" test -f "$WORK/res/step_000006/DONE" -a ! -e "$WORK/res/$last"
expect_ok "cuda: resume" train "$WORK/res" --device cuda --resume "$WORK/res"
expect_true "cuda: resumed metrics == straight" test "$(metrics_without_timing "$WORK/res/metrics.jsonl")" = \
  "$(metrics_without_timing "$WORK/cuda/metrics.jsonl")"
expect_true "cuda: resumed weights == straight (bitwise)" cmp "$WORK/cuda/$last/model.safetensors" \
  "$WORK/res/$last/model.safetensors"

# c. a cuda checkpoint (step 6) resumes on the cpu and runs to the end.
expect_ok "cuda -> cpu: train to step 6 on cuda" train "$WORK/x" --device cuda --set train.stop_at_step=6
expect_ok "cuda -> cpu: resume on cpu" train "$WORK/x" --device cpu --resume "$WORK/x"
expect_true "cuda -> cpu: ran to the end" test -f "$WORK/x/$last/DONE"
expect_true "cuda -> cpu: $STEPS metric lines, loss falling" "$PY" -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in rows] == list(range(1, int(sys.argv[2]) + 1)), rows
assert rows[-1]["loss"] < rows[0]["loss"] - 2.0 and rows[-1]["skipped"] == 0' "$WORK/x/metrics.jsonl" $STEPS

# d. cuda.attention=cudnn and model.recompute=true: bitwise the default.
expect_ok "cuda: cuda.attention=cudnn" train "$WORK/cudnn" --device cuda --set cuda.attention=cudnn
expect_true "cudnn weights == fimi attention weights (bitwise)" cmp "$WORK/cuda/$last/model.safetensors" \
  "$WORK/cudnn/$last/model.safetensors"
expect_ok "cuda: model.recompute=true" train "$WORK/recompute" --device cuda --set model.recompute=true
expect_true "recompute weights == default weights (bitwise)" cmp "$WORK/cuda/$last/model.safetensors" \
  "$WORK/recompute/$last/model.safetensors"
expect_true "recompute metrics == default" test "$(metrics_without_timing "$WORK/recompute/metrics.jsonl")" = \
  "$(metrics_without_timing "$WORK/cuda/metrics.jsonl")"

# e. score and generate on the trained model, cuda against cpu.
M="$WORK/cuda/$last"
IDS="$("$FIMI" tokenizer encode --tokenizer "$D/tokenizer.json" --add-special \
  --text "The balance of account 5012 is Rs 1685.")"
expect_true "tokenized a scoring text" test -n "$IDS"
expect_ok "score --device cpu" "$FIMI" score --device cpu --model "$M" --ids "$IDS"
cp "$WORK/out" "$WORK/score_cpu.json"
expect_ok "score --device cuda" "$FIMI" score --device cuda --model "$M" --ids "$IDS"
cp "$WORK/out" "$WORK/score_cuda.json"
# 5e-2 absolute: the GPU forward is bf16 (weights and activations, fp32
# accumulation): ~1e-2 on log-probs (cmd_score.c, tests/gpu/test_gpu_model.c).
expect_true "score: cuda log-probs within 5e-2 of cpu" "$PY" -c 'import json, sys
a = json.load(open(sys.argv[1]))["logprobs"]; b = json.load(open(sys.argv[2]))["logprobs"]
d = max(abs(x - y) for x, y in zip(a, b))
print("max |logprob cuda - cpu|: %.3g over %d tokens" % (d, len(a)))
assert len(a) == len(b) == len(sys.argv[3].split(",")) - 1 and d < 5e-2 and all(x < 0 for x in b), (a, b)' \
  "$WORK/score_cpu.json" "$WORK/score_cuda.json" "$IDS"
gen() {  # gen DEVICE: greedy, 16 tokens after a text prompt, as JSON
  "$FIMI" generate --device "$1" --model "$M" --prompt "What is the balance of account 5012?" --chat \
    --temperature 0 --max-new 16 --no-stop --json
}
expect_ok "generate --device cpu" gen cpu
cp "$WORK/out" "$WORK/gen_cpu.json"
expect_ok "generate --device cuda" gen cuda
cp "$WORK/out" "$WORK/gen_cuda.json"
cat "$WORK/gen_cuda.json"
# Greedy decoding on the stand-in gives the cpu's tokens exactly: the top
# logit leads the runner-up by far more than the bf16 error here. (On a real
# GPU a near-tie could legitimately flip; this model and prompt have none.)
expect_true "generate: cuda tokens == cpu tokens (16 of them)" "$PY" -c 'import json, sys
a, b = (json.load(open(p))["completions"][0] for p in sys.argv[1:3])
print(a, b); assert len(b["generated"]) == 16 and a == b' "$WORK/gen_cpu.json" "$WORK/gen_cuda.json"

# DPO (configs/tiny-cpu-dpo.ini) on cuda against cpu, each with its own copy
# of the datasets: the first run writes ref_logp_* into them. The reference
# pass runs on the CPU in fp32 on both devices (cmd_train.c ensure_reference),
# so on cuda step 1 compares the bf16 policy with the fp32 reference: its loss
# is ln 2 only to bf16 accuracy (measured 4e-4 off), not to 1e-3 of exactly
# zero rewards as on the cpu.
DPO_CONFIG="$SRC/configs/tiny-cpu-dpo.ini"
tokenize_tiny dpo "$D" dpo-
for dev in cpu cuda; do
  mkdir -p "$D/dpo-$dev"
  cp "$D/dpo-train.h5" "$D/dpo-$dev/train.h5"
  cp "$D/dpo-eval.h5" "$D/dpo-$dev/eval.h5"
  expect_ok "dpo: train --device $dev" "$FIMI" train --config "$DPO_CONFIG" --set train.init="$D/init" \
    --set data.train="$D/dpo-$dev/train.h5" --set data.eval="$D/dpo-$dev/eval.h5" \
    --set train.out_dir="$WORK/dpo-$dev" --set train.progress=false --set train.steps=$STEPS \
    --set train.micro_batch=4 --set train.eval_every=6 --set train.save_every=6 --device "$dev"
done
# Losses lie in [0, ln 2] here and fall to ~3e-3: 1e-2 absolute per step
# (measured 4e-4 at most) and margins within 5% (bf16 log-prob sums).
expect_true "dpo: cuda learns (accuracy 1, margins > 1) and follows the cpu run" "$PY" -c 'import json, math, sys
a = [json.loads(l) for l in open(sys.argv[1])]; b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == int(sys.argv[3])
assert abs(b[0]["loss"] - math.log(2)) < 2e-3, b[0]
assert sum(r["rewards/accuracies"] for r in b[-5:]) / 5 > 0.9 and sum(r["rewards/margins"] for r in b[-5:]) / 5 > 1.0
d = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b))
m = max(abs(x["rewards/margins"] - y["rewards/margins"]) / max(abs(x["rewards/margins"]), 1.0) for x, y in zip(a, b))
print("dpo: max |loss cuda - cpu| %.3g, max margin difference %.3g" % (d, m)); assert d < 1e-2 and m < 5e-2' \
  "$WORK/dpo-cpu/metrics.jsonl" "$WORK/dpo-cuda/metrics.jsonl" $STEPS

# f. errors.
expect_fail "cudnn on a softcapped model" "attn_logit_softcapping" \
  "$FIMI" train --config "$CONFIG" --set train.init="$D/init2" --set data.train="$D/train.h5" \
  --set data.eval="$D/eval.h5" --set train.out_dir="$WORK/softcap" --set train.progress=false \
  --set train.steps=2 --set train.micro_batch=4 --device cuda --set cuda.attention=cudnn
expect_ok "the softcapped model trains on cuda with fimi attention" \
  "$FIMI" train --config "$CONFIG" --set train.init="$D/init2" --set data.train="$D/train.h5" \
  --set data.eval="$D/eval.h5" --set train.out_dir="$WORK/softcap2" --set train.progress=false \
  --set train.steps=2 --set train.micro_batch=4 --set train.save_every=2 --device cuda
expect_fail "unknown cuda.attention" "cuda.attention: unknown value 'flash'" train "$WORK/d" --device cuda \
  --set cuda.attention=flash

# g. fimi eval --device cuda: the held-out harness on the GPU rollout policy
# (cmd/rollout_cuda.c) plays the same episodes as on the cpu: same tasks,
# trials and simulator seeds, every episode played to an end reason with
# sampled tokens; and sampled (not greedy) so the streams are exercised.
expect_ok "eval tasks" "$FIMI" env sample --family balance_enquiry --n 2 --seed 3 --out "$WORK/eval_tasks.jsonl"
for dev in cpu cuda; do
  expect_ok "eval --device $dev" "$FIMI" eval --device "$dev" --model "$M" --tasks "$WORK/eval_tasks.jsonl" \
    --trials 2 --set eval.temperature=1.0 --set grpo.max_turn_tokens=12 --set grpo.max_episode_tokens=24 \
    --set env.catalog=family --out "$WORK/eval_$dev.json"
done
expect_true "eval: cuda episodes are the cpu's episodes, each played" "$PY" -c 'import json, sys
a, b = (json.load(open(p))["episodes"] for p in sys.argv[1:3])
key = lambda e: (e["task_id"], e["trial"], e["env_seed"])
assert len(a) == len(b) == 4 and [key(e) for e in a] == [key(e) for e in b]
assert all(e["generated_tokens"] > 0 and e["end"] != "failed" and e["tokens"] > e["generated_tokens"] for e in b), b
assert sum(x["tokens"] for x in a) > 0' "$WORK/eval_cpu.json" "$WORK/eval_cuda.json"

# h. fimi dpo pairs --device cuda: the candidate's turns and both sides'
# scores on the GPU decoder (cmd/dpo_decoder_cuda.c), against the cpu's.
# Greedy, so the turns are the cpu's unless bf16 flips a near-tie; the
# scores are sums of ~10-60 log-probs of the bf16 model: within 5% + 0.5.
expect_ok "dpo corpus for pairs" "$FIMI" dpo corpus build --tasks "$WORK/eval_tasks.jsonl" --catalog family \
  --out "$WORK/conv.jsonl"
for dev in cpu cuda; do
  expect_ok "dpo pairs --device $dev" "$FIMI" dpo pairs --device "$dev" --model "$M" --corpus "$WORK/conv.jsonl" \
    --out "$WORK/pairs_$dev.jsonl" --max-new 12 --no-progress
done
expect_true "dpo pairs: cuda replays the cpu's turns, its scores follow the cpu's" "$PY" -c 'import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
sa, sb = (json.load(open(p + ".summary.json")) for p in sys.argv[1:3])
assert sa["turns"] == sb["turns"] > 0 and sb["pairs"] > 0 and sb["constructions"]["reference"]["scored"] > 0
ka = {(p["dialog"], p["turn"]): p for p in a}
same = [(ka[(q["dialog"], q["turn"])], q) for q in b if (q["dialog"], q["turn"]) in ka]
assert len(same) >= 0.8 * max(len(a), len(b)), (len(a), len(b), len(same))
scored = [(p, q) for p, q in same if "logp_chosen" in p and "logp_chosen" in q]
assert len(scored) >= len(same) // 2, (len(scored), len(same))
for p, q in scored:
    assert abs(p["logp_chosen"] - q["logp_chosen"]) <= 0.05 * abs(p["logp_chosen"]) + 0.5, (p["logp_chosen"], q["logp_chosen"])
print("pairs cpu %d cuda %d, same turns %d" % (len(a), len(b), len(same)))' "$WORK/pairs_cpu.jsonl" "$WORK/pairs_cuda.jsonl"
# i. Gemma 4 (tiny-g4 widened to head dims 64 and 512: per-layer inputs, kv
# sharing, keys as values, partial rope) trains, scores and generates on
# cuda as on the cpu; cuda.attention=cudnn is refused for its 512 heads.
# (Bitwise recompute and the other model checks: test_gemma_cuda_standin.)
# Skipped in test.sh's sanitizer run (FIMI_SANITIZED=1), where the same GPU
# model code runs under ASan in test_gemma_cuda_standin and this section
# would add about a minute.
if [ "${FIMI_SANITIZED:-0}" != 1 ]; then
expect_ok "init tiny-g4" "$FIMI" init --config "$CONFIG" --set model.preset=tiny-g4 --tokenizer "$D/tokenizer.json" \
  --out "$D/g4-narrow"
expect_ok "tiny-g4 config with head dims 64 / 512" "$PY" -c 'import json, sys
c = json.load(open(sys.argv[1])); c["head_dim"] = 64
for v in c["per_layer_config"].values(): v["head_dim"] = 512
json.dump(c, open(sys.argv[2], "w"))' "$D/g4-narrow/config.json" "$D/gemma4.json"
expect_ok "init gemma4 hd 64/512" "$FIMI" init --config "$CONFIG" --set model.config_json="$D/gemma4.json" \
  --tokenizer "$D/tokenizer.json" --out "$D/init4"
train4() {  # train4 OUT_DIR [more args...]: as train, 6 steps from $D/init4 (fewer: its 512-wide heads cost)
  local out="$1"; shift
  train "$out" --set train.init="$D/init4" --set train.steps=6 "$@"
}
expect_ok "gemma4: train --device cpu" train4 "$WORK/g4cpu" --device cpu
expect_ok "gemma4: train --device cuda" train4 "$WORK/g4cuda" --device cuda
# 2e-2 relative (measured 8.7e-3 at most over 12 steps): twice (a)'s bound, since Gemma 4 scales scores by 1 and at the
# init's q_norm gains of 1 its softmaxes are sharp, which amplifies bf16
# roundings (tests/model_compare.h); a wrong op moves the loss by far more.
expect_true "gemma4: cuda step losses within 2e-2 relative of cpu, loss falls" "$PY" -c 'import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]; b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
rel = [abs(x - y) / abs(x) for x, y in zip(a, b)]
print("gemma4: max relative loss difference cuda vs cpu: %.3g (loss %.3f -> %.3f)" % (max(rel), b[0], b[-1]))
assert len(a) == len(b) == 6 and max(rel) < 2e-2 and b[-1] < b[0] - 0.2, rel' \
  "$WORK/g4cpu/metrics.jsonl" "$WORK/g4cuda/metrics.jsonl"
expect_fail "gemma4: cudnn refused for head dim 512" "head dim 512" train4 "$WORK/g4cudnn" --device cuda \
  --set cuda.attention=cudnn
M4="$WORK/g4cuda/step_000006"
for dev in cpu cuda; do
  expect_ok "gemma4: score --device $dev" "$FIMI" score --device "$dev" --model "$M4" --ids "$IDS"
  cp "$WORK/out" "$WORK/g4score_$dev.json"
  expect_ok "gemma4: generate --device $dev" "$FIMI" generate --device "$dev" --model "$M4" \
    --prompt "What is the balance of account 5012?" --chat --temperature 0 --max-new 8 --no-stop --json
  cp "$WORK/out" "$WORK/g4gen_$dev.json"
done
expect_true "gemma4: score cuda within 5e-2 of cpu" "$PY" -c 'import json, sys
a = json.load(open(sys.argv[1]))["logprobs"]; b = json.load(open(sys.argv[2]))["logprobs"]
d = max(abs(x - y) for x, y in zip(a, b))
print("gemma4: max |logprob cuda - cpu|: %.3g over %d tokens" % (d, len(a)))
assert len(a) == len(b) > 1 and d < 5e-2, (a, b)' "$WORK/g4score_cpu.json" "$WORK/g4score_cuda.json"
expect_true "gemma4: greedy generate on cuda gives the cpu's tokens" "$PY" -c 'import json, sys
a, b = (json.load(open(p))["completions"][0] for p in sys.argv[1:3])
print(a, b); assert len(b["generated"]) == 8 and a == b' "$WORK/g4gen_cpu.json" "$WORK/g4gen_cuda.json"
fi

cli_summary
