#!/usr/bin/env bash
# bench/cpu_train_step.sh: fimi vs PyTorch CPU training-step throughput.
# Defines nothing to build: runs bench_train_step and torch_train_step.py from
# an existing build on the same model (the preset's config.json written by
# `fimi init`), same batch, sequence length and thread count, and prints a
# side-by-side table with the ratio fimi/torch: mean over the timed steps and
# the best step (the steadier number on a machine shared with other work).
#
# Usage: bench/cpu_train_step.sh BUILD_DIR [PRESET] [THREADS] [BATCH] [SEQ] [STEPS]
# Env:   PYTHON (default .venv/bin/python in the repo, then python3) with torch + transformers.
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
f_json=$("$bench" --preset "$preset" "${common[@]}")
t_json=$("$python" "$here/torch_train_step.py" --model-dir "$dir/model" "${common[@]}")

"$python" - "$f_json" "$t_json" "$preset" <<'EOF'
import json, sys
f, t, preset = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
print(f"preset {preset}: batch {f['batch']} x seq {f['seq']}, {f['steps']} timed steps, "
      f"{f['threads']} threads, fp32 forward+backward")
print(f"{'':14}{'fimi':>12}{'torch':>12}{'fimi/torch':>12}")
rows = [("tokens_per_s", "tokens/s"), ("ms_per_step", "ms/step"), ("best_tokens_per_s", "best tok/s"),
        ("best_ms_per_step", "best ms/step"), ("peak_rss_mib", "peak RSS MiB"), ("params", "parameters"),
        ("loss", "loss")]
for key, label in rows:
    ratio = f[key] / t[key] if t[key] else float("nan")
    print(f"{label:14}{f[key]:>12}{t[key]:>12}{ratio:>12.2f}")
print(f"torch {t['torch']}, transformers {t['transformers']}")
EOF
