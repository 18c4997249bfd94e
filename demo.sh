#!/usr/bin/env bash
# demo.sh: the main job on the CPU default. Today: train a BPE tokenizer on
# the bank's text, initialize a tiny Gemma 3 model sized to it, export both as
# a Hugging Face checkpoint, reload, inspect, and generate (ids, then text
# streamed from a chat prompt) with the KV cache; then the simulated bank:
# sample tasks from every family, replay one task's gold chain, and score
# the oracle and a random agent on all of them; last, 30 SFT steps of the
# tiny model on bank dialogues, with checkpoints, and a reply from it.
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
"$FIMI" env sample --family all --n 2 --seed 1 --out "$OUT/tasks.jsonl"
first_task=$(head -1 "$OUT/tasks.jsonl" | sed -E 's/^\{"id":"([^"]+)".*/\1/')
"$FIMI" env replay --task-file "$OUT/tasks.jsonl" --task "$first_task"
"$FIMI" env eval --task-file "$OUT/tasks.jsonl" --agent oracle >"$OUT/eval-oracle.txt" && tail -1 "$OUT/eval-oracle.txt"
"$FIMI" env eval --task-file "$OUT/tasks.jsonl" --agent random >"$OUT/eval-random.txt" && tail -1 "$OUT/eval-random.txt"
"$FIMI" data tokenize --kind sft --input configs/data/tiny-sft-train.jsonl --tokenizer "$OUT/tokenizer.json" --out "$OUT/sft-train.h5"
"$FIMI" data tokenize --kind sft --input configs/data/tiny-sft-eval.jsonl --tokenizer "$OUT/tokenizer.json" --out "$OUT/sft-eval.h5"
"$FIMI" init --config configs/tiny-cpu-sft.ini --tokenizer "$OUT/tokenizer.json" --out "$OUT/sft-init"
rm -rf "$OUT/sft-run"
"$FIMI" train --config configs/tiny-cpu-sft.ini --set data.train="$OUT/sft-train.h5" --set data.eval="$OUT/sft-eval.h5" \
  --set train.init="$OUT/sft-init" --set train.out_dir="$OUT/sft-run"
tail -1 "$OUT/sft-run/metrics.jsonl"
"$FIMI" generate --config configs/tiny-cpu-demo.ini --model "$OUT/sft-run/step_000030" --chat --prompt "Mera FD kab mature hoga?"
