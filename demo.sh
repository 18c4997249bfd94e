#!/usr/bin/env bash
# demo.sh: the main job on the CPU default. Today: train a BPE tokenizer on
# the bank's text, initialize a tiny Gemma 3 model sized to it, export both as
# a Hugging Face checkpoint, reload, inspect, and generate (ids, then text
# streamed from a chat prompt) with the KV cache; then the simulated bank:
# sample tasks from every family, replay one task's gold chain, and score
# the oracle and a random agent on all of them; last, 30 SFT steps of the
# tiny model on bank dialogues, with checkpoints, and a reply from it; then
# GRPO on the bank: an SFT warm start on oracle transcripts of one task
# family, and GRPO steps with validation on held-out tasks (docs/grpo.md);
# last, `fimi eval` of the warm start and the GRPO run on the held-out
# tasks, compared task by task (docs/evaluation.md).
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
"$FIMI" eval --agent oracle --tasks "$OUT/tasks.jsonl" --out "$OUT/eval-agent-oracle.json" | sed -n 5,7p
"$FIMI" eval --agent random --tasks "$OUT/tasks.jsonl" --out "$OUT/eval-agent-random.json" | sed -n 5,7p
"$FIMI" data tokenize --kind sft --input configs/data/tiny-sft-train.jsonl --tokenizer "$OUT/tokenizer.json" --out "$OUT/sft-train.h5"
"$FIMI" data tokenize --kind sft --input configs/data/tiny-sft-eval.jsonl --tokenizer "$OUT/tokenizer.json" --out "$OUT/sft-eval.h5"
"$FIMI" init --config configs/tiny-cpu-sft.ini --tokenizer "$OUT/tokenizer.json" --out "$OUT/sft-init"
rm -rf "$OUT/sft-run"
"$FIMI" train --config configs/tiny-cpu-sft.ini --set data.train="$OUT/sft-train.h5" --set data.eval="$OUT/sft-eval.h5" \
  --set train.init="$OUT/sft-init" --set train.out_dir="$OUT/sft-run"
tail -1 "$OUT/sft-run/metrics.jsonl"
"$FIMI" generate --config configs/tiny-cpu-demo.ini --model "$OUT/sft-run/step_000030" --chat --prompt "Mera FD kab mature hoga?"
# GRPO: oracle transcripts of the rate_quote family -> tokenizer, tiny model,
# SFT warm start -> 24 GRPO steps of 4 tasks x 4 rollouts, validated on 16
# held-out tasks before the first step and every 6 steps (the best kept as
# run/best).
G="$OUT/grpo"
rm -rf "$G" && mkdir -p "$G"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
"$FIMI" env sample --family rate_quote --n 32 --seed 1 --out "$G/train.jsonl"
"$FIMI" env sample --family rate_quote --n 16 --seed 99 --out "$G/val.jsonl"
"$FIMI" env sample --family rate_quote --n 48 --seed 7 --out "$G/test.jsonl"
"$FIMI" env transcripts --task-file "$G/train.jsonl" --catalog family --out "$G/sft.jsonl"
"$FIMI" tokenizer train --input "$G/sft.jsonl" --vocab-size 768 --out "$G/tokenizer.json"
"$FIMI" init --preset tiny --tokenizer "$G/tokenizer.json" --out "$G/init"
"$FIMI" data tokenize --kind sft --input "$G/sft.jsonl" --tokenizer "$G/tokenizer.json" --out "$G/sft.h5"
"$FIMI" train --config configs/tiny-cpu-sft.ini --set data.train="$G/sft.h5" --set data.eval= \
  --set train.init="$G/init" --set train.out_dir="$G/sft" --set train.steps=100 --set optim.lr=3e-3 \
  --set optim.schedule=constant --set optim.warmup_steps=0 --set train.save_every=0 --set train.eval_every=0
"$FIMI" train --config configs/tiny-cpu-grpo.ini --set train.init="$G/sft/step_000100" --set train.out_dir="$G/run" \
  --set env.tasks="$G/train.jsonl" --set env.val_tasks="$G/val.jsonl" --set train.steps=24 --set train.eval_every=6 \
  --set grpo.max_turn_tokens=64 --set grpo.max_episode_tokens=160 --set grpo.context=1300 --set optim.lr=1e-4
tail -1 "$G/run/metrics.jsonl"
# Evaluation (docs/evaluation.md): the SFT warm start and the GRPO run's
# best step (chosen on val.jsonl) on 48 test tasks neither saw, 2 trials
# each, with the budgets of the GRPO run; then the paired comparison and
# the ladder.
EVAL_ARGS=(--tasks "$G/test.jsonl" --trials 2 --set grpo.max_turn_tokens=64 --set grpo.max_episode_tokens=160
           --set grpo.context=1300)
"$FIMI" eval --model "$G/sft/step_000100" --label sft "${EVAL_ARGS[@]}" --out "$OUT/eval-sft.json" >/dev/null
"$FIMI" eval --model "$G/run/best" --label grpo "${EVAL_ARGS[@]}" --out "$OUT/eval-grpo.json" >/dev/null
"$FIMI" eval --agent oracle --label oracle "${EVAL_ARGS[@]}" --out "$OUT/eval-oracle.json" >/dev/null
"$FIMI" eval compare "$OUT/eval-sft.json" "$OUT/eval-grpo.json"
"$FIMI" eval ladder "$OUT/eval-sft.json" "$OUT/eval-grpo.json" "$OUT/eval-oracle.json"
# Pictures (docs/report.md): the GRPO run's panels and the evaluation's bars.
"$FIMI" report "$G/run" --out "$OUT/plots" >"$OUT/report-run.txt"
"$FIMI" report --results "$OUT/eval-sft.json" "$OUT/eval-grpo.json" "$OUT/eval-oracle.json" --out "$OUT/plots" \
  >"$OUT/report-eval.txt"
echo "evaluation summaries: $OUT/eval-sft.md, $OUT/eval-grpo.md (every episode in the .json files)"
echo "plots: $(ls "$OUT"/plots/*.png 2>/dev/null | tr '\n' ' ')(numbers in $OUT/report-*.txt)"
