#!/usr/bin/env bash
# tests/cli_blas.sh: which BLAS kernels fimi runs, and who chose them
# (kernels/cpu/blas.h, docs/decisions.md "BLAS kernels"). FIMI_BLAS_ASSUME_CORE
# makes fimi treat OpenBLAS's own pick as Prescott (the SSE3 fallback of an
# OpenBLAS older than the processor), so the replacement runs on any x86 CPU
# with AVX2 or AVX-512:
# - fimi info names the library, the kernels and their threads;
# - with the fallback, fimi restarts itself on the CPU's kernels (SkylakeX or
#   Haswell), says so once on stderr, and info says fimi chose them;
# - a user's OPENBLAS_CORETYPE wins: nothing restarts, nothing is said;
# - three SFT steps on the replaced kernels equal three on the fallback ones
#   (Prescott forced by the user) within 1e-5 relative (loss, grad norm:
#   only the GEMMs' summation order differs), and metrics.jsonl's step-1
#   line records the BLAS, its kernels and who chose them.
# Usage: cli_blas.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
require_python json
unset OPENBLAS_CORETYPE FIMI_BLAS_DETECTED FIMI_BLAS_ASSUME_CORE

expect_ok "fimi info" "$FIMI" info
expect_true "info names the BLAS, its kernels and threads" grep -qE "^BLAS: [A-Za-z]+ [0-9.]+, kernels [A-Za-z0-9]+ \(.*\), [0-9]+ threads?$" "$WORK/out"

flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
want=""
case " $flags " in
  *" avx512f "*) want=SkylakeX ;;
  *" avx2 "*" fma "* | *" fma "*" avx2 "*) want=Haswell ;;
esac
if ! grep -q "OpenBLAS" "$WORK/out" || [ -z "$want" ]; then
  echo "SKIPPED: the kernel choice needs OpenBLAS and an x86 CPU with AVX2+FMA or AVX-512F"
  cli_summary
  exit $([ "$failures" -eq 0 ] && echo 77 || echo 1)
fi

expect_ok "info on the fallback kernels" env FIMI_BLAS_ASSUME_CORE=Prescott "$FIMI" info
expect_true "fimi chose $want" grep -qF "kernels $want (chosen by fimi; the library picked Prescott)" "$WORK/out"
expect_true "said once on stderr" test "$(grep -c "OPENBLAS_CORETYPE=$want" "$WORK/err")" = 1
expect_ok "a user's OPENBLAS_CORETYPE wins" env FIMI_BLAS_ASSUME_CORE=Prescott OPENBLAS_CORETYPE=Prescott "$FIMI" info
expect_true "the user's kernels run" grep -qF "kernels Prescott (set by OPENBLAS_CORETYPE)" "$WORK/out"
expect_true "nothing said" test ! -s "$WORK/err"
expect_ok "rank 1 of a job says nothing" env FIMI_BLAS_ASSUME_CORE=Prescott OMPI_COMM_WORLD_RANK=1 "$FIMI" info
expect_true "rank 1 still runs $want" grep -qF "kernels $want (chosen by fimi" "$WORK/out"
expect_true "rank 1: nothing said" test ! -s "$WORK/err"

# The same three SFT steps on both kernel sets.
CONFIG="$SRC/configs/tiny-cpu-sft.ini"
D="$WORK/blas"
mkdir -p "$D"
make_tiny_tokenizer "$D"
tokenize_tiny sft "$D"
expect_ok "init" "$FIMI" init --config "$CONFIG" --tokenizer "$D/tokenizer.json" --out "$D/init"
train() {  # train OUT_DIR [VAR=VALUE...]: 3 steps, nothing saved, in that environment
  local out="$1"; shift
  env "$@" "$FIMI" train --config "$CONFIG" --set train.init="$D/init" --set data.train="$D/train.h5" --set data.eval= \
    --set train.out_dir="$out" --set train.progress=false --set train.steps=3 --set train.save_every=0 \
    --set train.eval_every=0
}
expect_ok "3 steps on the user's Prescott kernels" train "$WORK/generic" OPENBLAS_CORETYPE=Prescott
expect_true "train logs the BLAS first" grep -qF "BLAS: " "$WORK/err"
expect_ok "3 steps on fimi's $want kernels" train "$WORK/fimi" FIMI_BLAS_ASSUME_CORE=Prescott
expect_true "loss and grad norm equal within 1e-5" "$PY" -c 'import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]; b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 3, (len(a), len(b))
for x, y in zip(a, b):
    for k in ("loss", "grad_norm"):
        print(k, x[k], y[k]); assert abs(x[k] - y[k]) <= 1e-5 * max(1.0, abs(x[k])), (k, x[k], y[k])
assert a[1]["loss"] != a[0]["loss"]  # the weights moved: the steps compare trained states too' "$WORK/generic/metrics.jsonl" "$WORK/fimi/metrics.jsonl"
expect_true "metrics.jsonl step 1 records the BLAS and who chose it" "$PY" -c 'import json, sys
g = json.loads(open(sys.argv[1]).readline())["run"]; f = json.loads(open(sys.argv[2]).readline())["run"]
print(g, f)
assert g["blas_kernels"] == "Prescott" and g["blas_chosen_by"] == "user", g
assert f["blas_kernels"] == sys.argv[3] and f["blas_chosen_by"] == "fimi" and f["blas_detected"] == "Prescott", f
assert g["blas"].startswith("OpenBLAS ") and g["blas_threads"] >= 1' "$WORK/generic/metrics.jsonl" "$WORK/fimi/metrics.jsonl" "$want"
cli_summary
