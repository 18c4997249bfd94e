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
#   dist/zero3.h: within 1e-12 relative); with clipping active the clip scale
#   inherits those last bits, so, as in train_world_test.sh and
#   dpo_world_test.sh, the weights agree within 1e-5 and the metrics within
#   1e-5 relative.
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
expect_true "-np 4: each env rank served its train rank's 32 episodes" sh -c \
  "grep -q 'env rank 0: 32 episodes' '$WORK/err' && grep -q 'env rank 1: 32 episodes' '$WORK/err'"
expect_true "-np 4, no clipping: weights == in-process dist.zero3 (bitwise)" cmp "$WORK/z/step_000004/model.safetensors" \
  "$WORK/np4/step_000004/model.safetensors"

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
timing = {"tokens_per_s", "elapsed", "time_prefill", "time_decode", "time_env", "time_rollout", "time_update", "gen_tokens_per_s"}
def rows(run):
    r = [json.loads(l) for l in open(os.path.join(work, run, "metrics.jsonl"))]
    assert [x["step"] for x in r] == [1, 2, 3, 4], run
    return r
def compare(run, ref, rel):  # every non-timing field; grad_norm (and with rel > 0 all floats) within rel
    worst = 0.0
    for a, b in zip(rows(run), rows(ref)):
        assert sorted(a) == sorted(b), (run, set(a) ^ set(b))
        for k in a:
            if k in timing: continue
            x, y = a[k], b[k]
            if (k == "grad_norm" or rel > 1e-12) and isinstance(x, float) and not isinstance(x, bool):
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
plain = rows("plain")
assert any(r["grad_norm"] > 0 for r in plain), "no step had a gradient: the test data gives no signal"
print(f"np4 vs z (no clipping): grad_norm diff {compare('np4', 'z', 0.0):.1e}, weight diff {weights('np4', 'z'):.1e}")
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
