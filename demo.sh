#!/usr/bin/env bash
# demo.sh: the main job on the CPU default. Today: train a BPE tokenizer on
# the bank's text, initialize a tiny Gemma 3 model sized to it, export both as
# a Hugging Face checkpoint, reload, inspect, and generate (ids, then text
# streamed from a chat prompt) with the KV cache; list the bank's tools.
# Later issues grow this into the end-to-end train-and-evaluate demo.
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
"$FIMI" tokenizer train --input tests/interop/tokenizer_corpus.txt docs/*.md --vocab-size 512 --out "$OUT/tokenizer.json"
"$FIMI" init --config configs/tiny-cpu-demo.ini --tokenizer "$OUT/tokenizer.json" --out "$OUT/tiny"
"$FIMI" info "$OUT/tiny"
"$FIMI" generate --config configs/tiny-cpu-demo.ini --model "$OUT/tiny" --prompt-ids 2,17,42,99 --prompt-ids 2,5
"$FIMI" score --model "$OUT/tiny" --ids 2,17,42,99,7
"$FIMI" generate --config configs/tiny-cpu-demo.ini --model "$OUT/tiny" --chat --prompt "Mera FD kab mature hoga?"
"$FIMI" env tools >"$OUT/tools.txt" && head -5 "$OUT/tools.txt"
