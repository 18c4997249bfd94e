#!/usr/bin/env bash
# tests/mpi/grpo_world_test.sh: `fimi train` with train.objective = grpo
# across MPI ranks with env ranks (dist.env_ranks = 2: the last 2 ranks
# serve episodes, rl/env_mpi.c), on the tiny run of tests/lib_grpo.sh
# (4 steps of 2 tasks x 4 rollouts, validation at steps 2 and 4).
# - -np 3 (1 train rank + 2 env ranks) against the in-process run: the same
#   rollouts and rewards (metrics.jsonl minus timing, every field equal) and
#   the same final weights, bitwise; the env ranks played all 32 episodes.
# - -np 4 (2 train ranks under ZeRO-3 + 2 env ranks) against the in-process
#   dist.zero3 = true run (the same units of dist.unit_size rollouts: the
#   plain path's whole-micro-batch GEMMs round differently): with clipping
#   off (train.max_grad_norm = 0) the weights are bitwise equal and every
#   metric but grad_norm equal (its sum over shards differs in the last bits,
#   parallel/zero3.h: within 1e-12 relative); with clipping active the clip scale
#   inherits those last bits, so, as in train_world_test.sh and
#   dpo_world_test.sh, the weights agree within 1e-5 and the metrics within
#   1e-5 relative.
# - the rollouts really are split across the 2 train ranks: each env rank
#   served only its train rank's 16 episodes, and metrics' rank_rollouts is
#   [4, 4] a step ([1, 1] for validation), with the per-rank prefill and
#   decode tokens adding up to the in-process run's (each rank between 20%
#   and 80% of them over the run).
# - -np 4 stopped at step 2 and resumed ends with the straight run's weights
#   (bitwise) and metrics.
# - -np 2 (2 train ranks, episodes in process) equals the in-process
#   dist.zero3 run bitwise too; -np 3 (3 train ranks, in process: 2 groups
#   cannot go whole to 3 ranks, so single rollouts are split, 2 + 3 + 3, and
#   a group's prompt is prefilled on two ranks) gives step 1's rollouts, the
#   validation at step 0 and the work totals of the one-rank run.
# - prints the environment's share of the step time (sum of time_env over the
#   sum of step times, tokens / tokens_per_s) in process and on env ranks.
# Usage: grpo_world_test.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
source "$SRC/tests/mpi/lib_mpi_train.sh"
source "$SRC/tests/lib_grpo.sh"
prepare_tiny_grpo "$D"
ARGS=("${GRPO_ARGS[@]}" --set train.steps=4 --set train.eval_every=2 --set train.max_grad_norm=0)
ENV2=(--set dist.env_ranks=2)

expect_ok "in-process run" "$FIMI" "${ARGS[@]}" --set train.out_dir="$WORK/plain"
expect_ok "-np 3, 2 env ranks" "$MPIEXEC" --oversubscribe -np 3 "$FIMI" "${ARGS[@]}" "${ENV2[@]}" \
  --set train.out_dir="$WORK/np3"
expect_true "-np 3: the env ranks played 16 + 16 episodes" sh -c \
  "grep -q 'env rank 0: 16 episodes' '$WORK/err' && grep -q 'env rank 1: 16 episodes' '$WORK/err'"
expect_true "-np 3: weights == in-process (bitwise)" cmp "$WORK/plain/step_000004/model.safetensors" \
  "$WORK/np3/step_000004/model.safetensors"
expect_true "-np 3: metrics (rollouts, rewards, losses, validation) == in-process, minus timing" test \
  "$(grpo_metrics_without_timing "$WORK/np3/metrics.jsonl")" = "$(grpo_metrics_without_timing "$WORK/plain/metrics.jsonl")"

expect_ok "in-process dist.zero3" "$FIMI" "${ARGS[@]}" --set dist.zero3=true --set train.out_dir="$WORK/z"
expect_ok "-np 4, 2 train + 2 env ranks" "$MPIEXEC" --oversubscribe -np 4 "$FIMI" "${ARGS[@]}" "${ENV2[@]}" \
  --set train.out_dir="$WORK/np4"
expect_true "-np 4: ZeRO-3 across 2 ranks" grep -q "ZeRO-3 across 2 ranks" "$WORK/out"
expect_true "-np 4: each env rank served only its train rank's 16 of the 32 episodes" sh -c \
  "grep -q 'env rank 0: 16 episodes' '$WORK/err' && grep -q 'env rank 1: 16 episodes' '$WORK/err'"
expect_true "-np 4, no clipping: weights == in-process dist.zero3 (bitwise)" cmp "$WORK/z/step_000004/model.safetensors" \
  "$WORK/np4/step_000004/model.safetensors"

expect_ok "-np 4: stop at step 2" "$MPIEXEC" --oversubscribe -np 4 "$FIMI" "${ARGS[@]}" "${ENV2[@]}" \
  --set train.out_dir="$WORK/np4r" --set train.stop_at_step=2
expect_ok "-np 4: resume" "$MPIEXEC" --oversubscribe -np 4 "$FIMI" "${ARGS[@]}" "${ENV2[@]}" \
  --set train.out_dir="$WORK/np4r" --resume "$WORK/np4r"
expect_true "-np 4: resumed weights == straight (bitwise)" cmp "$WORK/np4/step_000004/model.safetensors" \
  "$WORK/np4r/step_000004/model.safetensors"
expect_ok "-np 2, 2 train ranks, episodes in process" "$MPIEXEC" --oversubscribe -np 2 "$FIMI" "${ARGS[@]}" \
  --set train.out_dir="$WORK/np2"
expect_true "-np 2: weights == in-process dist.zero3 (bitwise)" cmp "$WORK/z/step_000004/model.safetensors" \
  "$WORK/np2/step_000004/model.safetensors"
expect_ok "-np 3, 3 train ranks, episodes in process" "$MPIEXEC" --oversubscribe -np 3 "$FIMI" "${ARGS[@]}" \
  --set train.steps=1 --set train.out_dir="$WORK/np3t"

# Clipping active (a max norm below the gradients): the same runs again.
CLIP=(--set train.max_grad_norm=0.05)
expect_ok "in-process dist.zero3, clipping" "$FIMI" "${ARGS[@]}" "${CLIP[@]}" --set dist.zero3=true \
  --set train.out_dir="$WORK/zc"
expect_ok "-np 4, clipping" "$MPIEXEC" --oversubscribe -np 4 "$FIMI" "${ARGS[@]}" "${CLIP[@]}" "${ENV2[@]}" \
  --set train.out_dir="$WORK/np4c"

cat >"$WORK/compare.py" <<'PYEOF'
import json, os, sys
import numpy as np
from safetensors.numpy import load_file
work = sys.argv[1]
timing = {"tokens_per_s", "elapsed", "time_prefill", "time_decode", "time_env", "time_rollout", "time_update",
          "gen_tokens_per_s", "time_exchange"}
work_fields = ["rank_rollouts", "rank_prefill_tokens", "rank_decode_tokens"]
work_fields += ["val_" + k for k in work_fields]
def rows(run, steps=4):
    r = [json.loads(l) for l in open(os.path.join(work, run, "metrics.jsonl"))]
    assert [x["step"] for x in r] == list(range(1, steps + 1)), run
    return r
def compare(run, ref, rel):  # every non-timing field; grad_norm and loss (sums over ranks) to their last bits (and with rel > 0 all floats) within rel
    worst = 0.0
    for a, b in zip(rows(run), rows(ref)):
        assert sorted(a) == sorted(b), (run, set(a) ^ set(b))
        for k in a:
            if k in timing or k in work_fields: continue
            x, y = a[k], b[k]
            if (k in ("grad_norm", "loss") or rel > 1e-12) and isinstance(x, float) and not isinstance(x, bool):
                d = abs(x - y) / max(1.0, abs(y))
                assert d <= max(rel, 1e-12), (run, a["step"], k, x, y)
                worst = max(worst, d)
            else:
                assert x == y, (run, a["step"], k, x, y)
    return worst
def weights(run, ref):
    w, r = (load_file(os.path.join(work, x, "step_000004", "model.safetensors")) for x in (run, ref))
    assert sorted(w) == sorted(r)
    return max(float(np.max(np.abs(w[k] - r[k]))) / max(1.0, float(np.max(np.abs(r[k])))) for k in w)
def split_work(run, ref, ranks, want_rollouts, steps=4, whole_groups=True):
    # Per-rank work: rank_rollouts as the split rule says, the token counts
    # summing to the one-rank run's, each rank doing a fair share of them.
    # A group cut between ranks has its prompt prefilled on each of them.
    share = {}
    for a, b in zip(rows(run, steps), rows(ref)[:steps]):
        for k in work_fields:
            if k not in a: continue
            if k.endswith("rank_rollouts"):
                assert a[k] == want_rollouts[k.startswith("val_")], (run, a["step"], k, a[k])
            if k not in b: continue  # validation at a step the reference did not validate
            x, y = a[k], b[k]
            assert len(x) == ranks and len(y) == 1, (run, a["step"], k, x, y)
            if whole_groups or "prefill" not in k or k.startswith("val_"):
                assert sum(x) == y[0], (run, a["step"], k, x, y)
            else:
                assert sum(x) > y[0], (run, a["step"], k, x, y)
            if not k.endswith("rank_rollouts") and not k.startswith("val_"):
                share[k] = [s + v for s, v in zip(share.get(k, [0] * ranks), x)]
    for k, per_rank in share.items():
        assert min(per_rank) > 0.2 * sum(per_rank) and max(per_rank) < 0.8 * sum(per_rank), (run, k, per_rank)
    return share
plain = rows("plain")
assert any(r["grad_norm"] > 0 for r in plain), "no step had a gradient: the test data gives no signal"
assert all(r["rank_rollouts"] == [8] for r in plain), [r["rank_rollouts"] for r in plain]
print(f"np4 vs z (no clipping): grad_norm diff {compare('np4', 'z', 0.0):.1e}, weight diff {weights('np4', 'z'):.1e}")
share = split_work("np4", "z", 2, {False: [4, 4], True: [1, 1]})
compare("np4r", "np4", 0.0)  # resumed: every field but timing (and grad_norm's last bits) equal
assert [r["rank_rollouts"] for r in rows("np4r")] == [r["rank_rollouts"] for r in rows("np4")]
print("np4: per train rank, over the 4 steps: " + ", ".join(f"{k} {v}" for k, v in share.items() if "val_" not in k))
print(f"np2 vs z (no clipping): grad_norm diff {compare('np2', 'z', 0.0):.1e}")
split_work("np2", "z", 2, {False: [4, 4], True: [1, 1]})
# 3 train ranks: step 1's rollouts (made by the initial weights) and the
# step-0 validation equal the one-rank run's; 8 rollouts split 2 + 3 + 3,
# step 1's validation (the last step) 2 rollouts 0 + 1 + 1.
rollout_fields = ["reward_mean", "reward_std", "seq", "seq_frac", "db", "comm", "judge", "total", "strict_total",
                  "gen_tokens", "turns", "tool_calls", "tool_errors", "malformed", "failed", "zero_variance_groups",
                  "all_fail_groups", "all_pass_groups", "validation_start"]
a, b = rows("np3t", 1)[0], rows("z")[0]
for k in rollout_fields + [k for k in a if k.startswith("end_")]:
    assert a[k] == b[k], ("np3t", k, a[k], b[k])
split_work("np3t", "z", 3, {False: [2, 3, 3], True: [0, 1, 1]}, steps=1, whole_groups=False)
print(f"np3t: step 1 rank_rollouts {a['rank_rollouts']}, rank_decode_tokens {a['rank_decode_tokens']}")
zc = rows("zc")
clipped = [r["step"] for r in zc if r["clipped"]]
assert clipped, [(r["step"], r["grad_norm"]) for r in zc]
m, w = compare("np4c", "zc", 1e-5), weights("np4c", "zc")
assert w <= 1e-5, w
print(f"np4c vs zc (clipped at steps {clipped}): max metric diff {m:.1e}, max weight diff {w:.1e}")
for run in ["plain", "np3"]:
    r = rows(run)
    env = sum(x["time_env"] for x in r)
    step = sum(x["tokens"] / x["tokens_per_s"] for x in r)
    print(f"{run}: env share of step time {env / step:.1%} (time_env {env:.3f} s of {step:.3f} s in 4 steps; "
          f"rollouts {sum(x['time_rollout'] for x in r) / step:.1%})")
PYEOF
expect_ok "ZeRO-3 comparisons and the env share" "$PY" "$WORK/compare.py" "$WORK"
cat "$WORK/out" "$WORK/err"
cli_summary
