#!/usr/bin/env bash
# tests/cli_grpo.sh: `fimi train` with train.objective = grpo on
# configs/tiny-cpu-grpo.ini, made small (tests/lib_grpo.sh: 2 tasks x 4
# rollouts a step, 48 tokens an episode, a 10-step SFT warm start). The
# plumbing, not the learning: metrics.jsonl has the per-step GRPO fields
# (docs/grpo.md, "Running GRPO"; with one train rank rank_rollouts is [8]
# and time_exchange 0) and validation + val_* at train.eval_every;
# step 1's ratio is 1 and nothing is clipped; OUT/best links to the first
# step with the highest validation and survives keep_last; stop at step 2 +
# --resume equals the straight run (weights bitwise, metrics minus timing);
# grpo.updates_per_batch = 2 reuses each batch once (fresh_rollouts, no
# rollout time on reuse steps) and a resume inside a batch warns and samples
# a fresh one; grpo.max_draws = 4 keeps the first draw's statistics and
# replaces groups without signal from further draws; grpo.kl_coef > 0 logs kl 0 at step 1 and > 0 after the first
# update that moved the weights; reward_mean is the mean of strict_total
# (grpo.reward = strict) or total (set); --dry-run prints the GRPO plan and
# the rollout memory (and the rollouts every rank holds); config errors name
# the key. Usage: cli_grpo.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
source "$SRC/tests/lib_grpo.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
require_python json
D="$WORK/tiny-grpo"
prepare_tiny_grpo "$D"
run() {  # run OUT_DIR [more args...]
  local out="$1"; shift
  "$FIMI" "${GRPO_ARGS[@]}" --set train.out_dir="$out" "$@"
}
# 4 steps, validation every 2, a checkpoint every step, only the last kept
# (plus the best).
A=(--set train.steps=4 --set train.eval_every=2 --set train.save_every=1 --set train.keep_last=1)

expect_ok "grpo 4 steps" run "$WORK/a" "${A[@]}"
cat "$WORK/out"
expect_true "4 metric lines" test "$(wc -l <"$WORK/a/metrics.jsonl")" = 4
expect_true "per-step GRPO fields; validation and val_* at steps 2 and 4; step 1 ratio 1, nothing clipped" "$PY" -c '
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = ["loss", "grad_norm", "reward_mean", "reward_std", "seq", "seq_frac", "db", "comm", "judge", "total",
        "strict_total", "zero_variance_groups", "all_fail_groups", "all_pass_groups", "clip_fraction", "kl",
        "ratio_mean", "fresh_rollouts", "gen_tokens", "turns", "tool_calls", "tool_errors", "malformed", "failed",
        "end_stop", "end_transfer", "end_out_of_scope", "end_turn_budget", "end_token_budget", "end_context",
        "end_malformed", "end_failed", "time_prefill", "time_decode", "time_env", "time_rollout", "time_update", "gen_tokens_per_s"]
for r in rows:
    missing = [k for k in keys if k not in r]
    assert not missing, (r["step"], missing)
    assert sum(r[k] for k in r if k.startswith("end_")) == 8, r  # B x G rollouts, one end each
    # one train rank: it played them all and exchanged nothing
    assert r["rank_rollouts"] == [8] and r["time_exchange"] == 0, r
    assert r["rank_decode_tokens"][0] > 0 and r["rank_prefill_tokens"][0] > 0, r
    assert r["fresh_rollouts"] is True and r["time_rollout"] > 0 and r["gen_tokens_per_s"] > 0, r
    assert r["kl"] == 0 and 0 <= r["clip_fraction"] <= 1, r
    for k in keys[:-1]:
        assert r[k] is not None and (isinstance(r[k], bool) or math.isfinite(r[k])), (k, r[k])
val = [r["step"] for r in rows if "validation" in r]
assert val == [2, 4], val
for r in rows:
    assert ("val_reward_mean" in r) == ("validation" in r), r["step"]
    if "validation" in r:
        assert r["validation"] == r["val_reward_mean"], r
        assert sum(r[k] for k in r if k.startswith("val_end_")) == 2, r  # grpo.val_tasks = 2
        assert r["val_rank_rollouts"] == [2], r
r1 = rows[0]
assert abs(r1["ratio_mean"] - 1) < 1e-5 and r1["clip_fraction"] == 0, r1
print("step 1 ratio_mean", r1["ratio_mean"], "grad_norm", [r["grad_norm"] for r in rows])' "$WORK/a/metrics.jsonl"
expect_true "reward_mean is the mean strict_total (grpo.reward = strict)" "$PY" -c '
import json, sys
for r in map(json.loads, open(sys.argv[1])):
    assert abs(r["reward_mean"] - r["strict_total"]) < 1e-12, r' "$WORK/a/metrics.jsonl"
# OUT/best: the first step with the highest validation; keep_last 1 prunes
# every other checkpoint but the last.
expect_true "OUT/best links to the best validation step, which survives keep_last 1" "$PY" -c '
import json, os, sys
out = sys.argv[1]
val = [(r["validation"], -r["step"]) for r in map(json.loads, open(os.path.join(out, "metrics.jsonl"))) if "validation" in r]
best = -max(val)[1]
target = os.readlink(os.path.join(out, "best"))
assert target == "step_%06d" % best, (target, val)
dirs = sorted(d for d in os.listdir(out) if d.startswith("step_"))
assert dirs == sorted({"step_%06d" % best, "step_000004"}), dirs
assert os.path.isfile(os.path.join(out, target, "DONE"))
print("best", target, "dirs", dirs)' "$WORK/a"
expect_true "trainer_state.json keeps the best validation" grep -q '"best_eval_step"' "$WORK/a/step_000004/trainer_state.json"

# Stop at step 2, resume: the same weights and metrics as the straight run.
expect_ok "grpo stops at step 2" run "$WORK/b" "${A[@]}" --set train.stop_at_step=2
expect_true "stopped at step 2" test -f "$WORK/b/step_000002/DONE" -a ! -e "$WORK/b/step_000003"
expect_ok "grpo resumes" run "$WORK/b" "${A[@]}" --resume "$WORK/b"
expect_true "resumed weights == straight (bitwise)" cmp "$WORK/a/step_000004/model.safetensors" \
  "$WORK/b/step_000004/model.safetensors"
expect_true "resumed metrics == straight (minus timing)" test "$(grpo_metrics_without_timing "$WORK/b/metrics.jsonl")" = \
  "$(grpo_metrics_without_timing "$WORK/a/metrics.jsonl")"
expect_true "resumed OUT/best == straight" test "$(readlink "$WORK/b/best")" = "$(readlink "$WORK/a/best")"

# Two optimizer steps per batch of rollouts.
K=(--set grpo.updates_per_batch=2 --set train.steps=4 --set train.eval_every=0)
expect_ok "updates_per_batch 2" run "$WORK/k" "${K[@]}"
expect_true "updates_per_batch 2: fresh rollouts on odd steps only, reused batches keep their rewards" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["fresh_rollouts"] for r in rows] == [True, False, True, False], rows
for fresh, reuse in [(rows[0], rows[1]), (rows[2], rows[3])]:
    for k in ["reward_mean", "reward_std", "total", "strict_total", "gen_tokens", "tokens", "loss_tokens", "end_token_budget"]:
        assert fresh[k] == reuse[k], (k, fresh[k], reuse[k])
    assert reuse["time_rollout"] == 0 and reuse["time_env"] == 0 and reuse["gen_tokens_per_s"] == 0, reuse
    assert fresh["time_rollout"] > 0, fresh
    # After an update that moved the weights the reused rollouts are off-policy.
    if fresh["grad_norm"] > 0: assert reuse["ratio_mean"] != 1.0, (fresh, reuse)' "$WORK/k/metrics.jsonl"
expect_ok "updates_per_batch 2: stop at step 1 (inside a batch)" run "$WORK/k1" "${K[@]}" --set train.stop_at_step=1
expect_ok "updates_per_batch 2: resume inside a batch" run "$WORK/k1" "${K[@]}" --resume "$WORK/k1"
expect_true "resume inside a batch warns" grep -q "inside a batch of grpo.updates_per_batch = 2" "$WORK/err"
expect_true "resume inside a batch samples a fresh batch at step 2" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["fresh_rollouts"] for r in rows] == [True, True, True, False], rows
assert all(r["tokens"] > 0 and r["reward_mean"] > 0 for r in rows), rows' "$WORK/k1/metrics.jsonl"

# The KL penalty to the initial model.
expect_ok "kl_coef 0.1" run "$WORK/kl" --set grpo.kl_coef=0.1 --set train.steps=4 --set train.eval_every=0
expect_true "kl 0 at step 1, > 0 on every step after the first update that moved the weights" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows[0]["kl"] == 0, rows[0]
moved = [i for i, r in enumerate(rows[:-1]) if r["grad_norm"] > 0]
assert moved, "no step had a gradient: the test data gives no signal"
assert all(r["kl"] > 0 for r in rows[moved[0] + 1:]), [(r["step"], r["kl"]) for r in rows]
print("kl", [r["kl"] for r in rows])' "$WORK/kl/metrics.jsonl"

# grpo.reward = set: the same first rollouts, reward_mean now the mean total.
expect_ok "reward set" run "$WORK/set" --set grpo.reward=set --set train.steps=1 --set train.eval_every=0
expect_true "reward set: reward_mean is the mean total; step 1 rollouts as with strict" "$PY" -c '
import json, sys
s = json.loads(open(sys.argv[1]).readline()); a = json.loads(open(sys.argv[2]).readline())
assert abs(s["reward_mean"] - s["total"]) < 1e-12, s
for k in ["total", "strict_total", "seq", "seq_frac", "gen_tokens", "tokens"]:
    assert s[k] == a[k], (k, s[k], a[k])
print("set", s["reward_mean"], "strict", a["reward_mean"])' "$WORK/set/metrics.jsonl" "$WORK/a/metrics.jsonl"

# Dynamic sampling: further draws replace the groups without signal.
expect_ok "max_draws 4" run "$WORK/ds" --set grpo.max_draws=4 --set train.steps=2 --set train.eval_every=0
expect_true "max_draws 4: the first draw as without it, then groups without signal replaced from up to 3 more" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
plain = [json.loads(l) for l in open(sys.argv[2])]
assert all(r["draws"] == 1 and abs(r["signal_groups"] - (1 - r["zero_variance_groups"])) < 1e-12 for r in plain), plain
for k in ["reward_mean", "total", "strict_total", "gen_tokens", "zero_variance_groups", "all_fail_groups"]:
    assert rows[0][k] == plain[0][k], (k, rows[0][k], plain[0][k])  # statistics of the first draw
for r in rows:
    assert 1 <= r["draws"] <= 4 and r["rank_rollouts"] == [8 * r["draws"]], r
    assert r["signal_groups"] >= 1 - r["zero_variance_groups"], r
    assert r["signal_groups"] == 1 or r["draws"] == 4, r  # stops when full, or at max_draws
    assert (r["draws"] > 1) == (r["zero_variance_groups"] > 0), r
print("draws", [r["draws"] for r in rows], "signal", [r["signal_groups"] for r in rows],
      "first draw", [1 - r["zero_variance_groups"] for r in rows])' "$WORK/ds/metrics.jsonl" "$WORK/a/metrics.jsonl"
cat "$WORK/out"

# --dry-run.
expect_ok "dry run" run "$WORK/dry" --dry-run
expect_true "dry run prints the grpo plan and the rollout memory" sh -c "grep -q 'grpo: 2 tasks x 4 rollouts a step' '$WORK/out' && grep -q 'rollout memory per train rank' '$WORK/out' && grep -q 'every rank holds all 8' '$WORK/out'"
expect_true "dry run wrote nothing" test ! -e "$WORK/dry"

# Errors name the key.
expect_fail "B x G != micro_batch x grad_accum" "train.micro_batch (4) x train.grad_accum (3)" run "$WORK/e" \
  --set train.grad_accum=3
expect_fail "B x G mismatch in --dry-run" "grpo.tasks_per_step x grpo.group_size" run "$WORK/e" \
  --set train.micro_batch=3 --dry-run
expect_fail "group_size 1" "grpo.group_size" run "$WORK/e" --set grpo.group_size=1 --set train.micro_batch=2 \
  --set train.grad_accum=1
expect_fail "unknown grpo.reward" "grpo.reward: unknown value 'best'" run "$WORK/e" --set grpo.reward=best
expect_fail "unknown grpo.loss_aggregation" "grpo.loss_aggregation 'mean'" run "$WORK/e" --set grpo.loss_aggregation=mean
expect_fail "unknown env.catalog" "env.catalog: unknown value 'some'" run "$WORK/e" --set env.catalog=some
expect_fail "missing env.tasks file" "env.tasks: $D/missing.jsonl" run "$WORK/e" --set env.tasks="$D/missing.jsonl"
expect_fail "no env.tasks" "env.tasks must name a task file" run "$WORK/e" --set env.tasks=
expect_fail "missing env.val_tasks file" "env.val_tasks" run "$WORK/e" --set env.val_tasks="$D/missing.jsonl"
expect_fail "grpo.context above the model's positions" "grpo.context 4096 exceeds the model's max_position_embeddings" \
  run "$WORK/e" --set grpo.context=4096
expect_fail "updates_per_batch 0" "grpo.updates_per_batch" run "$WORK/e" --set grpo.updates_per_batch=0
expect_fail "max_draws 0" "grpo.max_draws must be in [1, 64]" run "$WORK/e" --set grpo.max_draws=0
# --device cuda: a CPU-only build refuses the device, a CUDA build finds no
# GPU here (GRPO on the GPU: tests/standin/test_rollout_cuda_standin.c).
checks=$((checks + 1))
if run "$WORK/e" --device cuda >"$WORK/out" 2>"$WORK/err"; then
  echo "FAIL: --device cuda: succeeded but should fail"; failures=$((failures + 1))
elif ! grep -qE "built without CUDA|train.objective grpo runs on --device cpu only|no CUDA device" "$WORK/err"; then
  echo "FAIL: --device cuda: unclear message:"; cat "$WORK/err"; failures=$((failures + 1))
fi
expect_true "no run directory from the failed runs" test ! -e "$WORK/e/metrics.jsonl"
cli_summary
