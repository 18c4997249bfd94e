#!/usr/bin/env bash
# bench/cpu_dpo_step.sh: DPO training-step throughput and peak memory per
# rank of `fimi train` on the CPU backend, one process vs ZeRO-3 across MPI
# ranks, side by side in one run. Builds nothing: uses an existing build.
# Data: configs/data/tiny-dpo-train.jsonl (48 pairs, rows of ~110 tokens)
# tokenized with a VOCAB-entry tokenizer trained on the test corpus and docs/;
# model: PRESET with that vocabulary. A first 1-step run adds the reference
# log-probs, so the timed runs do not include the reference pass.
# Runs (same data order, same steps): plain (OMP threads = THREADS), ZeRO-3 at
# world 1 (dist.zero3, THREADS threads), and mpirun -np 2 (THREADS/2 threads
# per rank, so every run uses the same cores). Prints per run: median over
# steps 2..STEPS of tokens/s and pairs/s, and each rank's peak RSS
# (/usr/bin/time %M) next to the ZeRO-3 formula of `fimi train --dry-run`
# (parallel/zero3.h) for a unit of one pair of the longest rows.
#
# Usage: bench/cpu_dpo_step.sh BUILD_DIR [PRESET] [STEPS] [MICRO_BATCH] [VOCAB] [THREADS]
# Env:   UNIT (default 1): dist.unit_size, pairs per ZeRO-3 forward/backward.
set -euo pipefail
build=${1:?usage: cpu_dpo_step.sh BUILD_DIR [PRESET] [STEPS] [MICRO_BATCH] [VOCAB] [THREADS]}
preset=${2:-small-10m}
steps=${3:-6}
micro=${4:-8}
vocab=${5:-2048}
threads=${6:-2}
src=$(cd "$(dirname "$0")/.." && pwd)
fimi=$(cd "$build" && pwd)/cmd/fimi
[ -x "$fimi" ] || { echo "cpu_dpo_step.sh: $fimi not found" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || { echo "cpu_dpo_step.sh: needs /usr/bin/time" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$src"
"$fimi" tokenizer train --input tests/interop/tokenizer_corpus.txt docs/*.md --vocab-size "$vocab" \
  --out "$dir/tok.json" >/dev/null
"$fimi" data tokenize --kind dpo --input configs/data/tiny-dpo-train.jsonl --tokenizer "$dir/tok.json" \
  --out "$dir/train.h5" >/dev/null
"$fimi" init --preset "$preset" --tokenizer "$dir/tok.json" --out "$dir/init" >/dev/null
args=(train --config configs/tiny-cpu-dpo.ini --set train.init="$dir/init" --set data.train="$dir/train.h5"
      --set data.eval= --set train.save_every=0 --set train.eval_every=0 --set train.progress=false
      --set train.micro_batch="$micro" --set train.grad_accum=1)
unit=${UNIT:-1}
OMP_NUM_THREADS=$threads "$fimi" "${args[@]}" --set train.steps=1 --set train.out_dir="$dir/ref" >/dev/null
# The longest pair row (prompt + longer response), for the formula's unit.
longest=$("$fimi" data info "$dir/train.h5" | awk '/^  prompt/ {p=$NF} /^  (chosen|rejected)/ {if ($NF>r) r=$NF} END {print p+r-1}')
params=$("$fimi" info "$dir/init" 2>/dev/null | awk '/parameters/ && !done {for (i=1;i<=NF;i++) if ($i ~ /^[0-9,]+$/) {gsub(",","",$i); print $i; done=1; break}}')

summarize() {  # summarize NAME RUN_DIR TIME_FILES...
  local name=$1 run=$2; shift 2
  python3 - "$name" "$run/metrics.jsonl" "$micro" "$@" <<'PY'
import json, statistics, sys
name, metrics, micro = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(metrics)][1:]  # step 1 warms up
tps = statistics.median(r["tokens_per_s"] for r in rows)
pps = statistics.median(micro * r["tokens_per_s"] / r["tokens"] for r in rows)
peaks = []
for f in sys.argv[4:]:
    for line in open(f):
        if line.startswith("peak_kib"): peaks.append(int(line.split()[1]) / 1024)
print(f"{name:<22} {tps:10.0f} {pps:9.2f}   " + " ".join(f"{p:7.1f}" for p in peaks))
PY
}

echo "DPO step, $preset (vocab $vocab, $params parameters), micro_batch $micro pairs, $steps steps, $threads cores"
echo "run                    tokens/s   pairs/s   peak RSS per rank (MiB)"
OMP_NUM_THREADS=$threads /usr/bin/time -f "peak_kib %M" -o "$dir/t.plain" \
  "$fimi" "${args[@]}" --set train.steps="$steps" --set train.out_dir="$dir/plain" >/dev/null
summarize "plain (1 process)" "$dir/plain" "$dir/t.plain"
OMP_NUM_THREADS=$threads /usr/bin/time -f "peak_kib %M" -o "$dir/t.z1" \
  "$fimi" "${args[@]}" --set train.steps="$steps" --set train.out_dir="$dir/z1" --set dist.zero3=true --set dist.unit_size="$unit" >/dev/null
summarize "ZeRO-3, world 1, unit $unit" "$dir/z1" "$dir/t.z1"
half=$(( threads / 2 > 0 ? threads / 2 : 1 ))
OMP_NUM_THREADS=$half mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS \
  bash -c '/usr/bin/time -f "peak_kib %M" -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$dir/t.np2" \
  "$fimi" "${args[@]}" --set train.steps="$steps" --set train.out_dir="$dir/np2" --set dist.unit_size="$unit" >/dev/null
summarize "ZeRO-3, world 2, unit $unit" "$dir/np2" "$dir/t.np2.0" "$dir/t.np2.1"
echo "formula (fimi train --dry-run --unit-tokens $((unit * longest)), $unit pair(s) = $((2 * unit * longest)) tokens):"
"$fimi" "${args[@]}" --dry-run --unit-tokens "$((unit * longest))" | grep -E "world +(1|2):"
