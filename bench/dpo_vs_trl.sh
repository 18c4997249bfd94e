#!/usr/bin/env bash
# bench/dpo_vs_trl.sh: one DPO training step on the CPU, fimi vs Hugging Face
# TRL's DPOTrainer, side by side: same model, same pairs, same batch, same
# thread count. Defines nothing to build: uses an existing build's fimi and
# bench/trl_dpo_step.py.
#
# Setup (as bench/cpu_dpo_step.sh): a VOCAB-entry tokenizer trained on the
# test corpus and docs/, configs/data/tiny-dpo-train.jsonl (48 pairs) tokenized
# with it, PRESET initialized with it (`fimi init` writes a Hugging Face
# checkpoint: config.json, model.safetensors, tokenizer.json), and a first
# 1-step `fimi train` that adds the reference log-probs to the dataset.
# Then, for each round, fimi and TRL alternate (fimi, trl, fimi, ...), so load
# from other work falls on both alike:
# - fimi: `fimi train --config configs/tiny-cpu-dpo.ini`, STEPS steps of
#   MICRO_BATCH pairs, grad_accum 1, reference log-probs precomputed;
# - TRL: bench/trl_dpo_step.py on the same init directory and JSONL:
#   Gemma3ForCausalLM float32 (ATTN attention, default sdpa: faster than eager
#   here), sigmoid, beta 0.1, per-device batch MICRO_BATCH, precompute_ref_log_probs,
#   no bf16, no gradient checkpointing, the chat rendered in fimi's layout.
# Measures per run the median over steps 2..STEPS (step 1 warms up) of
# tokens/s, pairs/s and seconds per step, and the mean tokens per pair (prompt
# + chosen and prompt + rejected rows, fimi's `tokens` on both sides), so one
# sees that both sides process the same amount of text. Prints a markdown
# table of the medians over rounds and the fimi/TRL ratios, with the CPU model
# and fimi's BLAS.
#
# Usage: bench/dpo_vs_trl.sh BUILD_DIR [PRESET] [STEPS] [MICRO_BATCH] [VOCAB] [THREADS]
#        (defaults small-10m, 6, 8, 2048, 2)
# Env:   PYTHON with torch, transformers and trl (default .venv/bin/python, then
#        python3); ROUNDS (default 1); ATTN (sdpa or eager, the TRL model's
#        attention; default sdpa).
set -euo pipefail
build=${1:?usage: dpo_vs_trl.sh BUILD_DIR [PRESET] [STEPS] [MICRO_BATCH] [VOCAB] [THREADS]}
preset=${2:-small-10m}
steps=${3:-6}
micro=${4:-8}
vocab=${5:-2048}
threads=${6:-2}
rounds=${ROUNDS:-1}
attn=${ATTN:-sdpa}
src=$(cd "$(dirname "$0")/.." && pwd)
fimi=$(cd "$build" && pwd)/cmd/fimi
[ -x "$fimi" ] || { echo "dpo_vs_trl.sh: $fimi not found" >&2; exit 1; }
python=${PYTHON:-$src/.venv/bin/python}
[ -x "$python" ] || python=python3
"$python" -c 'import torch, transformers, trl' 2>/dev/null ||
  { echo "dpo_vs_trl.sh: $python lacks torch, transformers or trl (set PYTHON)" >&2; exit 1; }
[ "$steps" -ge 2 ] || { echo "dpo_vs_trl.sh: STEPS must be >= 2 (step 1 warms up)" >&2; exit 1; }

# Passive waiting: with spinning OpenMP threads a descheduled peer on a
# shared machine stalls every parallel region (docs/benchmarks.md).
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# No progress bars; any datasets cache file (TRL's reference log-probs) stays in the temp dir.
export TQDM_DISABLE=1 HF_DATASETS_CACHE=$dir/hf-datasets
cd "$src"
data=configs/data/tiny-dpo-train.jsonl
"$fimi" tokenizer train --input tests/interop/tokenizer_corpus.txt docs/*.md --vocab-size "$vocab" \
  --out "$dir/tok.json" >/dev/null
"$fimi" data tokenize --kind dpo --input "$data" --tokenizer "$dir/tok.json" --out "$dir/train.h5" >/dev/null
"$fimi" init --preset "$preset" --tokenizer "$dir/tok.json" --out "$dir/init" >/dev/null
args=(train --config configs/tiny-cpu-dpo.ini --set train.init="$dir/init" --set data.train="$dir/train.h5"
      --set data.eval= --set train.save_every=0 --set train.eval_every=0 --set train.progress=false
      --set train.micro_batch="$micro" --set train.grad_accum=1)
"$fimi" "${args[@]}" --set train.steps=1 --set train.out_dir="$dir/ref" >/dev/null

# One JSON line per fimi run, with the keys trl_dpo_step.py prints.
fimi_summary() {  # fimi_summary METRICS_JSONL
  "$python" - "$1" "$micro" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]  # step 1 warms up
micro = int(sys.argv[2])
print(json.dumps(dict(
    impl="fimi", seconds_per_step=statistics.median(r["tokens"] / r["tokens_per_s"] for r in rows),
    tokens_per_s=statistics.median(r["tokens_per_s"] for r in rows),
    pairs_per_s=statistics.median(micro * r["tokens_per_s"] / r["tokens"] for r in rows),
    tokens_per_pair=sum(r["tokens"] for r in rows) / (micro * len(rows)))))
PY
}

results=()
for ((r = 1; r <= rounds; r++)); do
  "$fimi" "${args[@]}" --set train.steps="$steps" --set train.out_dir="$dir/fimi.$r" >/dev/null
  results+=("$(fimi_summary "$dir/fimi.$r/metrics.jsonl")")
  "$python" bench/trl_dpo_step.py --model-dir "$dir/init" --data "$data" --steps "$steps" --batch "$micro" \
    --threads "$threads" --attn "$attn" --out-dir "$dir/trl.$r" >"$dir/trl.out" 2>"$dir/trl.err" ||
    { cat "$dir/trl.err" >&2; exit 1; }
  results+=("$(grep '^{"impl": "trl"' "$dir/trl.out")")
  echo "round $r of $rounds done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
blas=$("$fimi" info 2>/dev/null | grep '^BLAS: ' || echo "BLAS: (not reported)")
"$python" - "$preset" "$vocab" "$micro" "$steps" "$threads" "$attn" "$cpu" "$blas" "${results[@]}" <<'PY'
import json, statistics, sys
preset, vocab, micro, steps, threads, attn, cpu, blas = sys.argv[1:9]
runs = [json.loads(x) for x in sys.argv[9:]]
pairs = list(zip(runs[0::2], runs[1::2]))  # (fimi, trl) per round
trl = pairs[0][1]
print(f"DPO step on the CPU, {preset} (vocab {vocab}), {micro} pairs per step, {steps} steps (medians over steps "
      f"2..{steps}), {threads} threads, {len(pairs)} round(s) alternating fimi/TRL")
print(f"CPU: {cpu}; fimi {blas}; TRL {trl['trl']}, transformers {trl['transformers']}, torch {trl['torch']}, "
      f"{attn} attention, float32")
print()
keys = [("tokens/s", "tokens_per_s", "{:.0f}"), ("pairs/s", "pairs_per_s", "{:.2f}"),
        ("seconds/step", "seconds_per_step", "{:.3f}"), ("tokens per pair", "tokens_per_pair", "{:.1f}")]
med = lambda side, k: statistics.median(p[side][k] for p in pairs)
print("| side | " + " | ".join(name for name, _, _ in keys) + " |")
print("|---|" + "---:|" * len(keys))
for side, label in ((0, "fimi"), (1, "TRL DPOTrainer")):
    print(f"| {label} | " + " | ".join(fmt.format(med(side, k)) for _, k, fmt in keys) + " |")
print("| fimi / TRL | " + " | ".join(f"{med(0, k) / med(1, k):.2f}" for _, k, _ in keys) + " |")
if len(pairs) > 1:
    per = ", ".join(f"{f['tokens_per_s'] / t['tokens_per_s']:.2f}" for f, t in pairs)
    print(f"\nfimi/TRL tokens/s per round: {per}")
PY
