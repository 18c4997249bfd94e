#!/usr/bin/env bash
# demo.sh: the main job on the CPU default. Today: initialize a tiny Gemma 3
# model, export it as a Hugging Face checkpoint, reload it, inspect it and
# generate from it with the KV cache. Later issues grow this into the
# end-to-end train-and-evaluate demo.
set -euo pipefail
cd "$(dirname "$0")"
bash launch/install-deps.sh
BUILD_DIR="${FIMI_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target fimi
FIMI="$BUILD_DIR/cmd/fimi"
OUT="${FIMI_DEMO_OUT:-demo-out}"
mkdir -p "$OUT"
"$FIMI" info
"$FIMI" init --config configs/tiny-cpu-demo.ini --out "$OUT/tiny"
"$FIMI" info "$OUT/tiny"
"$FIMI" generate --config configs/tiny-cpu-demo.ini --model "$OUT/tiny" --prompt-ids 2,17,42,99 --prompt-ids 2,5
"$FIMI" score --model "$OUT/tiny" --ids 2,17,42,99,7
