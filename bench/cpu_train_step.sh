#!/usr/bin/env bash
# bench/cpu_train_step.sh: fimi vs PyTorch CPU training-step throughput.
# Defines nothing to build: runs bench_train_step and torch_train_step.py from
# an existing build on the same model (the preset's config.json written by
# `fimi init`), same batch, sequence length and thread count, and prints a
# side-by-side table with the ratio fimi/torch: mean over the timed steps and
# the best step (the steadier number on a machine shared with other work).
# With ROUNDS=N the two programs alternate N times (fimi, torch, fimi, ...),
# so load from other work falls on both alike, and the medians over rounds
# are printed last.
#
# Usage: bench/cpu_train_step.sh BUILD_DIR [PRESET] [THREADS] [BATCH] [SEQ] [STEPS]
# Env:   PYTHON (default .venv/bin/python in the repo, then python3) with torch + transformers;
#        ROUNDS (default 1).
set -euo pipefail

build=${1:?usage: cpu_train_step.sh BUILD_DIR [PRESET] [THREADS] [BATCH] [SEQ] [STEPS]}
preset=${2:-small-10m}
threads=${3:-2}
batch=${4:-8}
seq=${5:-256}
steps=${6:-5}
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../.venv/bin/python}
[ -x "$python" ] || python=python3

fimi=$build/cmd/fimi
bench=$build/bench/bench_train_step
for f in "$fimi" "$bench"; do
  [ -x "$f" ] || { echo "cpu_train_step.sh: $f not found (build the fimi and bench_train_step targets)" >&2; exit 1; }
done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$fimi" init --preset "$preset" --out "$dir/model" >/dev/null

export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
common=(--batch "$batch" --seq "$seq" --steps "$steps" --threads "$threads" --json)
rounds=${ROUNDS:-1}
results=()
for ((r = 0; r < rounds; r++)); do
  results+=("$("$bench" --preset "$preset" "${common[@]}")")
  results+=("$("$python" "$here/torch_train_step.py" --model-dir "$dir/model" "${common[@]}")")
done

"$python" - "$preset" "${results[@]}" <<'EOF'
import json, statistics, sys
preset, runs = sys.argv[1], [json.loads(x) for x in sys.argv[2:]]
pairs = list(zip(runs[0::2], runs[1::2]))
f0 = pairs[0][0]
print(f"preset {preset}: batch {f0['batch']} x seq {f0['seq']}, {f0['steps']} timed steps, "
      f"{f0['threads']} threads, fp32 forward+backward, {len(pairs)} round(s)")
rows = [("tokens_per_s", "tokens/s"), ("ms_per_step", "ms/step"), ("best_tokens_per_s", "best tok/s"),
        ("best_ms_per_step", "best ms/step"), ("peak_rss_mib", "peak RSS MiB"), ("params", "parameters"),
        ("loss", "loss")]
for i, (f, t) in enumerate(pairs):
    print(f"round {i + 1}\n{'':14}{'fimi':>12}{'torch':>12}{'fimi/torch':>12}")
    for key, label in rows:
        ratio = f[key] / t[key] if t[key] else float("nan")
        print(f"{label:14}{f[key]:>12}{t[key]:>12}{ratio:>12.2f}")
if len(pairs) > 1:
    mean = statistics.median(f["tokens_per_s"] / t["tokens_per_s"] for f, t in pairs)
    best = statistics.median(f["best_tokens_per_s"] / t["best_tokens_per_s"] for f, t in pairs)
    print(f"median over {len(pairs)} rounds: fimi/torch {mean:.2f} on mean throughput, {best:.2f} on the best step")
print(f"torch {pairs[0][1]['torch']}, transformers {pairs[0][1]['transformers']}")
EOF
