#!/usr/bin/env bash
# bench/blas_compare.sh: the CPU backend on each BLAS candidate, side by side
# in one run, to choose the library and the kernel set on evidence
# (docs/benchmarks.md, "BLAS libraries and kernels").
#
# Variants (each row of the tables):
#   openblas-detected  Debian's OpenBLAS, the kernels it picks by itself
#   openblas-generic   the same forced to its SSE3 Prescott kernels: what an
#                      OpenBLAS older than the processor falls back to
#   openblas-fimi      what fimi runs when OpenBLAS picked Prescott
#                      (FIMI_BLAS_ASSUME_CORE=Prescott: fimi's own choice)
#   openblas-haswell   forced to its AVX2 kernels
#   blis               Debian's BLIS (libblis-openmp-dev), runtime-dispatched
#   openblas-new       a newer OpenBLAS: the PyPI wheel scipy-openblas32
#                      (pthreads build), linked with FIMI_BLAS=scipy-openblas
# Measures (the same inputs for every variant):
#   sgemm   bench_sgemm: GFLOP/s at the small-10m shapes; geometric means
#           over the projections at N = 1 (batch-1 decode), N = 16 and 64
#           (batched decode) and N = 2048 (training: forward and backward)
#   sft     bench_train_step small-10m, batch 8 x 256: tokens/s (mean)
#   dpo     `fimi train` DPO, small-10m with a 2,048-entry vocabulary, 8
#           pairs a step (bench/cpu_dpo_step.sh's data): median tokens/s
#   decode  bench_rollout --generate: generated tokens/s at batch 1, 16, 64
#           (32 new tokens, chunked prefill included, greedy)
# The two extra builds (build-blis/, build-openblas-new/ beside BUILD_DIR)
# hold only what the bench needs; the wheel is unpacked into .deps/.
#
# Usage: bench/blas_compare.sh BUILD_DIR [THREADS]
# Env:   VARIANTS (default: all six, space-separated), ROUNDS (default 1:
#        each variant runs once per round, variants alternating)
set -euo pipefail
build=$(cd "${1:?usage: blas_compare.sh BUILD_DIR [THREADS]}" && pwd)
threads=${2:-2}
src=$(cd "$(dirname "$0")/.." && pwd)
variants=${VARIANTS:-"openblas-detected openblas-generic openblas-fimi openblas-haswell blis openblas-new"}
rounds=${ROUNDS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads BLIS_NUM_THREADS=$threads
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
unset OPENBLAS_CORETYPE FIMI_BLAS_DETECTED FIMI_BLAS_ASSUME_CORE
targets=(fimi bench_sgemm bench_train_step bench_rollout)

extra_build() {  # extra_build DIR CMAKE_ARGS...: only the bench's targets
  local dir=$1; shift
  mkdir -p "$dir"
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFIMI_CUDA=OFF "$@" >"$dir/bench-cmake.log" 2>&1 ||
    { cat "$dir/bench-cmake.log" >&2; return 1; }
  cmake --build "$dir" -j"$threads" --target "${targets[@]}" >"$dir/bench-build.log" 2>&1 ||
    { tail -20 "$dir/bench-build.log" >&2; return 1; }
}
case " $variants " in *" blis "*)
  dpkg-query -W -f='${Status}' libblis-openmp-dev 2>/dev/null | grep -q "install ok installed" || {
    echo "blas_compare.sh: installing libblis-openmp-dev" >&2
    sudo_=""; [ "$(id -u)" -ne 0 ] && sudo_=sudo
    $sudo_ apt-get install -y -qq libblis-openmp-dev >/dev/null
  }
  extra_build "$build-blis" -DFIMI_BLAS=blis ;;
esac
case " $variants " in *" openblas-new "*)
  wheel_dir=$src/.deps/scipy-openblas32
  if [ ! -f "$wheel_dir/scipy_openblas32/include/cblas.h" ]; then
    mkdir -p "$wheel_dir"
    python3 -m pip download -q --no-deps --only-binary=:all: scipy-openblas32 -d "$wheel_dir" >&2
    python3 -m zipfile -e "$wheel_dir"/scipy_openblas32-*.whl "$wheel_dir"
  fi
  extra_build "$build-openblas-new" -DFIMI_BLAS=scipy-openblas -DFIMI_BLAS_ROOT="$wheel_dir/scipy_openblas32" ;;
esac

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fimi=$build/cmd/fimi
# DPO data and reference log-probs once (as bench/cpu_dpo_step.sh).
(cd "$src" && "$fimi" tokenizer train --input tests/interop/tokenizer_corpus.txt docs/*.md --vocab-size 2048 \
  --out "$dir/tok.json" >/dev/null)
"$fimi" data tokenize --kind dpo --input "$src/configs/data/tiny-dpo-train.jsonl" --tokenizer "$dir/tok.json" \
  --out "$dir/train.h5" >/dev/null
"$fimi" init --preset small-10m --tokenizer "$dir/tok.json" --out "$dir/init" >/dev/null
dpo_args=(train --config "$src/configs/tiny-cpu-dpo.ini" --set train.init="$dir/init" --set data.train="$dir/train.h5"
          --set data.eval= --set train.save_every=0 --set train.eval_every=0 --set train.progress=false
          --set train.micro_batch=8 --set train.grad_accum=1 --log-level warn)
"$fimi" "${dpo_args[@]}" --set train.steps=1 --set train.out_dir="$dir/ref" >/dev/null
"$build/bench/bench_rollout" --preset small-10m --export "$dir/gen" --tasks 64 >/dev/null 2>&1

variant_env() {  # variant_env NAME: prints "BUILD_DIR ENV..." for the variant
  case $1 in
    openblas-detected) echo "$build" ;;
    openblas-generic) echo "$build OPENBLAS_CORETYPE=Prescott" ;;
    openblas-fimi) echo "$build FIMI_BLAS_ASSUME_CORE=Prescott" ;;
    openblas-haswell) echo "$build OPENBLAS_CORETYPE=Haswell" ;;
    blis) echo "$build-blis" ;;
    openblas-new) echo "$build-openblas-new" ;;
    *) echo "blas_compare.sh: unknown variant $1" >&2; return 1 ;;
  esac
}

results=$dir/results.jsonl
for ((r = 0; r < rounds; r++)); do
  for v in $variants; do
    read -r vb venv <<<"$(variant_env "$v")" || true
    run() { env ${venv:-} "$@"; }
    kernels=$(run "$vb/cmd/fimi" info 2>/dev/null | sed -n 's/^BLAS: //p')
    sgemm=$(run "$vb/bench/bench_sgemm" --seconds 0.3 --threads "$threads" --json 2>/dev/null | python3 -c '
import json, math, sys
rows = [json.loads(l) for l in sys.stdin]
def gm(xs): return math.exp(sum(map(math.log, xs)) / len(xs))
pick = lambda n: [r["fwd_gflops"] for r in rows if r["N"] == n and r["gemm"] != "lm_head"]
train = [x for r in rows if r["N"] == 2048 for x in (r["fwd_gflops"], r["bwd_gflops"])]
print(json.dumps({"n1": gm(pick(1)), "n16": gm(pick(16)), "n64": gm(pick(64)), "n2048": gm(train)}))')
    sft=$(run "$vb/bench/bench_train_step" --preset small-10m --batch 8 --seq 256 --steps 4 --threads "$threads" --json 2>/dev/null |
      python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["tokens_per_s"])')
    rm -rf "$dir/dpo"
    run "$vb/cmd/fimi" "${dpo_args[@]}" --set train.init="$dir/ref/step_000001" --set train.steps=6 \
      --set train.out_dir="$dir/dpo" >/dev/null 2>&1
    dpo=$(python3 -c 'import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
print(statistics.median(r["tokens_per_s"] for r in rows))' "$dir/dpo/metrics.jsonl")
    decode=""
    for b in 1 16 64; do
      decode+="$(run "$vb/bench/bench_rollout" --generate "$dir/gen" --batch "$b" --new 32 --rounds 1 --way prefill \
        --row-invariant 0 --greedy 2>/dev/null | python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["tokens_per_s"])') "
    done
    python3 -c 'import json, sys
v, k, s, sft, dpo, dec = sys.argv[1:7]
print(json.dumps({"variant": v, "blas": k, "sgemm": json.loads(s), "sft": float(sft), "dpo": float(dpo),
                  "decode": [float(x) for x in dec.split()]}))' "$v" "$kernels" "$sgemm" "$sft" "$dpo" "$decode" >>"$results"
    echo "round $((r + 1)): $v done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
done

python3 - "$results" "$threads" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"CPU: {cpu}, {sys.argv[2]} threads; medians over rounds")
print("| variant | BLAS, kernels | sgemm N=1 | N=16 | N=64 | N=2048 fwd+bwd | SFT tok/s | DPO tok/s | decode b1 | b16 | b64 |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
order = list(dict.fromkeys(r["variant"] for r in rows))
for v in order:
    rs = [r for r in rows if r["variant"] == v]
    med = lambda f: statistics.median(f(r) for r in rs)
    blas = rs[0]["blas"].split(" (")[0]
    print(f"| {v} | {blas} | {med(lambda r: r['sgemm']['n1']):.1f} | {med(lambda r: r['sgemm']['n16']):.1f} | "
          f"{med(lambda r: r['sgemm']['n64']):.1f} | {med(lambda r: r['sgemm']['n2048']):.1f} | "
          f"{med(lambda r: r['sft']):.0f} | {med(lambda r: r['dpo']):.0f} | "
          + " | ".join(f"{med(lambda r, i=i: r['decode'][i]):.0f}" for i in range(3)) + " |")
PY
