#!/usr/bin/env bash
# tests/mpi/dpo_world_test.sh: `fimi train` with train.objective = dpo
# (configs/tiny-cpu-dpo.ini) across MPI ranks on ZeRO-3, one pair per unit
# (dpo/objective.h, DpoModelOps). 12 steps run plainly, under mpirun -np 1
# with dist.zero3, -np 2 and -np 3 (3 does not divide the 8 pairs of a
# micro-batch: dummy units); checks per-step losses, the DPO metrics and eval
# losses agree with the plain run within 1e-5 (relative) and the final
# weights within 1e-5. Also: the reference pass across ranks (rank 0 writes
# the datasets' ref_logp_*; a fresh copy without them), units of 3 pairs
# (dist.unit_size) at -np 2, dpo.reference = model
# at -np 2 (same first step as precomputed), and stop + resume at -np 2 equal
# to the straight run bitwise. Usage: dpo_world_test.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
source "$SRC/tests/mpi/lib_mpi_train.sh"
CONFIG="$SRC/configs/tiny-cpu-dpo.ini"
ARGS=(train --config "$CONFIG" --set train.init="$D/init" --set data.eval="$D/eval.h5" --set train.progress=false
      --set train.steps=12 --set train.save_every=0 --set train.eval_every=6)

make_tiny_tokenizer "$D"
tokenize_tiny dpo "$D"
expect_ok "init" "$FIMI" init --config "$CONFIG" --tokenizer "$D/tokenizer.json" --out "$D/init"
cp "$D/train.h5" "$D/train-noref.h5"

expect_ok "plain run (adds the reference log-probs)" "$FIMI" "${ARGS[@]}" --set data.train="$D/train.h5" \
  --set train.out_dir="$WORK/plain"
expect_ok "-np 1, dist.zero3" "$MPIEXEC" --oversubscribe -np 1 "$FIMI" "${ARGS[@]}" --set data.train="$D/train.h5" \
  --set train.out_dir="$WORK/np1" --set dist.zero3=true
for np in 2 3; do
  expect_ok "mpirun -np $np" "$MPIEXEC" --oversubscribe -np "$np" "$FIMI" "${ARGS[@]}" --set data.train="$D/train.h5" \
    --set train.out_dir="$WORK/np$np"
  expect_true "-np $np: ZeRO-3 reported" grep -q "ZeRO-3 across $np ranks" "$WORK/out"
done
expect_ok "-np 2, units of 3 pairs" "$MPIEXEC" --oversubscribe -np 2 "$FIMI" "${ARGS[@]}" --set data.train="$D/train.h5" \
  --set train.out_dir="$WORK/np2u3" --set dist.unit_size=3
cp "$D/train-noref.h5" "$D/train-np2ref.h5"
expect_ok "-np 2 runs the reference pass itself" "$MPIEXEC" --oversubscribe -np 2 "$FIMI" "${ARGS[@]}" \
  --set data.train="$D/train-np2ref.h5" --set train.out_dir="$WORK/np2ref"
expect_ok "-np 2 with dpo.reference = model" "$MPIEXEC" --oversubscribe -np 2 "$FIMI" "${ARGS[@]}" \
  --set data.train="$D/train-noref.h5" --set dpo.reference=model --set train.out_dir="$WORK/np2model"

cat >"$WORK/compare.py" <<'PYEOF'
import json, sys, os
import numpy as np
from safetensors.numpy import load_file
work, steps = sys.argv[1], 12
keys = ["loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "logps/chosen",
        "logps/rejected", "eval_loss", "tokens"]
def rows(run):
    r = [json.loads(l) for l in open(os.path.join(work, run, "metrics.jsonl"))]
    assert [x["step"] for x in r] == list(range(1, steps + 1)), run
    return r
def close(a, b):
    return (a is None) == (b is None) and (a is None or abs(a - b) <= 1e-5 * max(1.0, abs(b)))
ref = rows("plain")
assert abs(ref[0]["loss"] - np.log(2)) < 1e-6, ref[0]  # step 1: policy == reference
assert ref[-1]["loss"] < 0.5 * ref[0]["loss"], [x["loss"] for x in ref]  # it learns
w_ref = load_file(os.path.join(work, "plain", "step_000012", "model.safetensors"))
for run in ["np1", "np2", "np3", "np2ref", "np2u3"]:
    worst_metric = 0.0
    for a, b in zip(rows(run), ref):
        for k in keys:
            assert close(a.get(k), b.get(k)), (run, a["step"], k, a.get(k), b.get(k))
            if b.get(k) is not None: worst_metric = max(worst_metric, abs(a[k] - b[k]) / max(1.0, abs(b[k])))
    w = load_file(os.path.join(work, run, "step_000012", "model.safetensors"))
    worst = max(float(np.max(np.abs(w[k] - w_ref[k]))) / max(1.0, float(np.max(np.abs(w_ref[k])))) for k in w)
    assert worst <= 1e-5, (run, worst)
    print(f"{run}: max metric diff {worst_metric:.2e}, max weight diff {worst:.2e}")
m = rows("np2model")
assert abs(m[0]["loss"] - np.log(2)) < 1e-6 and abs(m[0]["rewards/margins"]) < 1e-6, m[0]
print("np2model: step 1 loss", m[0]["loss"])
PYEOF
expect_ok "losses, DPO metrics and final weights agree within 1e-5" "$PY" "$WORK/compare.py" "$WORK"
cat "$WORK/out" "$WORK/err"

expect_ok "-np 2 stops at step 6" "$MPIEXEC" --oversubscribe -np 2 "$FIMI" "${ARGS[@]}" --set data.train="$D/train.h5" \
  --set train.out_dir="$WORK/resume" --set train.save_every=3 --set train.stop_at_step=6
expect_ok "-np 2 resumes" "$MPIEXEC" --oversubscribe -np 2 "$FIMI" "${ARGS[@]}" --set data.train="$D/train.h5" \
  --resume "$WORK/resume" --set train.save_every=3
expect_true "stop + resume at -np 2 equals the straight run, bitwise" \
  cmp "$WORK/resume/step_000012/model.safetensors" "$WORK/np2/step_000012/model.safetensors"
cli_summary
