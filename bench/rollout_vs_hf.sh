#!/usr/bin/env bash
# bench/rollout_vs_hf.sh: fimi's batched generation vs Hugging Face
# transformers `generate` on the CPU, same model, same prompts, same lengths.
# Defines nothing to build: runs bench_rollout from an existing build.
#
# `bench_rollout --export` writes the preset's random model (the tokenizer is
# trained in-process, the model's vocabulary is the tokenizer's) as
# config.json + model.safetensors and the rendered prompts of real bank tasks
# (<bos>, system turn, first customer turn, generation prompt) as token ids.
# Then, for each batch size and round, fimi and HF alternate (fimi, hf, fimi,
# ...), so load from other work falls on both alike:
# - fimi: `bench_rollout --generate`: each prompt prefilled in chunks of 64
#   (gemma_prefill), then NEW batched decode steps (gemma_decode_step, one
#   GEMM for all rows: row_invariant off, ROW_INVARIANT=1 for on), sampling
#   at temperature 1 on the host: the rollout policy's path without the
#   environment's turns;
# - HF: bench/hf_generate.py: Gemma3ForCausalLM float32, left padding with
#   an attention mask, generate(max_new_tokens=NEW, min_new_tokens=NEW,
#   do_sample, temperature 1, top_k 0, top_p 1, no eos), sdpa attention
#   (ATTN=eager for eager).
# Generated tokens/s = batch x NEW / seconds of the whole call (prefill
# included); the table shows the medians over rounds and their ratio.
#
# Usage: bench/rollout_vs_hf.sh BUILD_DIR [PRESET] [THREADS] [NEW] [BATCHES]
#        (defaults small-10m, 2, 32, "1 16 64")
# Env:   PYTHON with torch + transformers (default .venv/bin/python, then python3);
#        ROUNDS (default 3); RESULTS=FILE appends each run's JSON line; GREEDY=1 for argmax on both sides; ROW_INVARIANT; ATTN.
set -euo pipefail

build=${1:?usage: rollout_vs_hf.sh BUILD_DIR [PRESET] [THREADS] [NEW] [BATCHES]}
preset=${2:-small-10m}
threads=${3:-2}
new=${4:-32}
batches=${5:-"1 16 64"}
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../.venv/bin/python}
[ -x "$python" ] || python=python3
bench=$build/bench/bench_rollout
[ -x "$bench" ] || { echo "rollout_vs_hf.sh: $bench not found (build the bench_rollout target)" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bench" --preset "$preset" --export "$dir/model" --tasks 64 >&2

# Passive waiting: with spinning OpenMP threads a descheduled peer on a
# shared machine stalls every parallel region (docs/benchmarks.md).
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
rounds=${ROUNDS:-3}
greedy=()
[ "${GREEDY:-0}" = 1 ] && greedy=(--greedy)
results=()
for ((r = 0; r < rounds; r++)); do
  for b in $batches; do
    results+=("$("$bench" --generate "$dir/model" --batch "$b" --new "$new" --rounds 1 --way prefill \
      --row-invariant "${ROW_INVARIANT:-0}" "${greedy[@]}")")
    results+=("$("$python" "$here/hf_generate.py" --model-dir "$dir/model" --batch "$b" --new "$new" --rounds 1 \
      --threads "$threads" --attn "${ATTN:-sdpa}" "${greedy[@]}" 2>/dev/null)")
    [ -n "${RESULTS:-}" ] && printf '%s\n%s\n' "${results[-2]}" "${results[-1]}" >>"$RESULTS"
    echo "round $((r + 1)) batch $b done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
done

"$python" - "$preset" "$threads" "$new" "${results[@]}" <<'EOF'
import json, statistics, sys
preset, threads, new, runs = sys.argv[1], sys.argv[2], sys.argv[3], [json.loads(x) for x in sys.argv[4:]]
pairs = list(zip(runs[0::2], runs[1::2]))
print(f"preset {preset}: {threads} threads, {new} new tokens per prompt, temperature "
      f"{'0 (greedy)' if pairs[0][0]['greedy'] else '1'}, rounds alternate fimi/hf")
print("| batch | prompt tokens (hf padded) | fimi tok/s | fimi prefill s | fimi decode s | hf tok/s | hf prefill s "
      "| hf total s | fimi/hf | per round |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for b in sorted({f["batch"] for f, _ in pairs}):
    ps = [(f, h) for f, h in pairs if f["batch"] == b]
    med = lambda xs: statistics.median(xs)
    ft, ht = med([f["best_tokens_per_s"] for f, _ in ps]), med([h["best_tokens_per_s"] for _, h in ps])
    ratios = [f["best_tokens_per_s"] / h["best_tokens_per_s"] for f, h in ps]
    print(f"| {b} | {ps[0][0]['prompt_tokens']} ({ps[0][1]['padded_prompt_tokens']}) | {ft:.1f} "
          f"| {med([f['best_prefill_s'] for f, _ in ps]):.3f} | {med([f['best_decode_s'] for f, _ in ps]):.3f} "
          f"| {ht:.1f} | {med([h['best_prefill_s'] for _, h in ps]):.3f} | {med([h['best_s'] for _, h in ps]):.3f} "
          f"| {med(ratios):.2f} | {', '.join(f'{x:.2f}' for x in ratios)} |")
print(f"torch {pairs[0][1]['torch']}, transformers {pairs[0][1]['transformers']}, HF attention {pairs[0][1]['attn']}")
EOF
