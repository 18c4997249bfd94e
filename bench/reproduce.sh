#!/usr/bin/env bash
# bench/reproduce.sh: the FiMI paper's study at small scale on the CPU, one
# command (docs/reproduction.md). Writes everything to OUT (default
# repro-out/) and ends with OUT/REPORT.md.
#
# Stages, in order; each is skipped when OUT/STAGE/DONE exists (a stage that
# was cut off starts again from its beginning); --from STAGE redoes that
# stage and every later one; --only STAGE runs just that one.
#   data    the corpus (`fimi env corpus build`: 10,000 / 1,000 / 100
#           splits; FIMI_CORPUS=DIR reuses one built before with the same
#           manifest), the training split shuffled (DATA_SEED), its first
#           SFT_TASKS tasks played by the oracle as SFT rows (catalog
#           family), a BPE trained on those rows only (--digits DIGITS),
#           a stratified subset of HELDOUT_N held-out tasks (every held-out
#           family, round robin), the validation split
#   pretrain  a Gemma 3 model from scratch (MODEL_JSON; default: hidden 128,
#           4 layers alternating sliding/full, window 256) trained
#           PRETRAIN_STEPS steps of 32 rows on PRETRAIN_ROWS copy drills
#           (bench/copy_drills.py: random values repeated, or asked for,
#           put into a tool call and read back), every token a target: the
#           in-context copying a pretrained model brings
#   sft     the pretrained model trained SFT_STEPS steps on the rows,
#           checkpoints at a third, two thirds and the end
#   ladder  `fimi eval` of the three SFT checkpoints and of the oracle,
#           random and do-nothing agents on the held-out subset
#           (EVAL_TRIALS trials): the paper's Tables 12 and 13
#   grpo    GRPO from the last SFT checkpoint for each seed in GRPO_SEEDS:
#           group 4, 16 tasks a step, strict reward, validation on the
#           100-task split, best step kept; each best step evaluated and
#           compared with the base (`fimi eval compare`): Tables 15, 16, 19
#           and Figure 10
#   dpo     the conversation corpus of DPO_TASKS training tasks and of the
#           held-out subset, the base's own first-divergence pairs, DPO at
#           beta 0.1, the judged bench before/after (BENCH_CASES, default
#           tests/data/bench/cases.jsonl: 231 cases in six categories), and
#           the held-out divergence rate before/after
#   report  OUT/REPORT.md: every table beside the paper's, the plots
#           (`fimi report`), each stage's wall time and peak memory
#
# Usage: bench/reproduce.sh [--from STAGE | --only STAGE] [BUILD_DIR]
# Env:   OUT, FIMI_CORPUS, DATA_SEED (1), DIGITS (runs), SFT_LOSS (model), PRETRAIN_ROWS (60000),
#        PRETRAIN_STEPS (1000; 0 skips it), PRETRAIN_LR (3e-3), SFT_TASKS (4000), HELDOUT_N (400), SFT_STEPS (900),
#        SFT_LR (2e-3), GRPO_SEEDS ("1 2"), GRPO_STEPS (30), GRPO_LR (1e-4), GRPO_TEMPERATURE (1.0),
#        GRPO_MAX_DRAWS (1), GRPO_SET (more `--set KEY=VALUE` for the GRPO runs),
#        EVAL_TRIALS (2), DPO_TASKS (200), DPO_STEPS (40), MODEL_JSON,
#        OMP_NUM_THREADS (the machine's cores)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGES=(data pretrain sft ladder grpo dpo report)
FROM="" ONLY="" RUN_STAGE=""
while [ $# -gt 0 ]; do
  case $1 in
    --from) FROM=${2:?--from needs a stage}; shift 2 ;;
    --only) ONLY=${2:?--only needs a stage}; shift 2 ;;
    __stage) RUN_STAGE=${2:?}; shift 2 ;;  # internal: one stage, in its own process (timed)
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) BUILD=$1; shift ;;
  esac
done
BUILD=$(cd "${BUILD:-$SRC/build}" && pwd)
FIMI=$BUILD/cmd/fimi
OUT=$(mkdir -p "${OUT:-$SRC/repro-out}" && cd "${OUT:-$SRC/repro-out}" && pwd)
export OUT
DATA_SEED=${DATA_SEED:-1} DIGITS=${DIGITS:-runs} SFT_LOSS=${SFT_LOSS:-model}
PRETRAIN_ROWS=${PRETRAIN_ROWS:-60000} PRETRAIN_STEPS=${PRETRAIN_STEPS:-1000} PRETRAIN_LR=${PRETRAIN_LR:-3e-3}
SFT_TASKS=${SFT_TASKS:-4000} HELDOUT_N=${HELDOUT_N:-400} SFT_STEPS=${SFT_STEPS:-900} SFT_LR=${SFT_LR:-2e-3}
GRPO_SEEDS=${GRPO_SEEDS:-"1 2"} GRPO_STEPS=${GRPO_STEPS:-30} GRPO_LR=${GRPO_LR:-1e-4} GRPO_TEMPERATURE=${GRPO_TEMPERATURE:-1.0} GRPO_MAX_DRAWS=${GRPO_MAX_DRAWS:-1} GRPO_SET=${GRPO_SET:-}
EVAL_TRIALS=${EVAL_TRIALS:-2} DPO_TASKS=${DPO_TASKS:-200} DPO_STEPS=${DPO_STEPS:-40}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
D=$OUT/data
say() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# ---- the stages ------------------------------------------------------------------

stage_data() {
  local corpus=$D/corpus
  if [ -n "${FIMI_CORPUS:-}" ]; then
    [ -f "$FIMI_CORPUS/manifest.json" ] || { echo "FIMI_CORPUS=$FIMI_CORPUS has no manifest.json" >&2; return 1; }
    ln -sfn "$(cd "$FIMI_CORPUS" && pwd)" "$corpus"
  else
    "$FIMI" env corpus build --out "$corpus" >"$D/corpus.log"
  fi
  "$FIMI" env corpus report "$corpus" >"$D/corpus-report.md"
  # The training split is stored grouped by use case; a seeded shuffle makes
  # any head of it a sample of every family (the first 4,000 rows in file
  # order held 48 of its 82 families).
  python3 -c 'import random, sys
rows = open(sys.argv[1]).readlines()
random.Random(int(sys.argv[2])).shuffle(rows)
open(sys.argv[3], "w").writelines(rows)' "$corpus/train.jsonl" "$DATA_SEED" "$D/train_shuffled.jsonl"
  head -n "$SFT_TASKS" "$D/train_shuffled.jsonl" >"$D/sft_tasks.jsonl"
  "$FIMI" env transcripts --task-file "$D/sft_tasks.jsonl" --catalog family --out "$D/sft.jsonl" >"$D/transcripts.log"
  "$FIMI" tokenizer train --input "$D/sft.jsonl" --vocab-size 2048 --digits "$DIGITS" --out "$D/tokenizer.json" >/dev/null
  "$FIMI" data tokenize --kind sft --input "$D/sft.jsonl" --tokenizer "$D/tokenizer.json" --out "$D/sft.h5" \
    --max-length 2048 --overlong drop --loss "$SFT_LOSS" >"$D/tokenize.log"
  # The held-out subset: round robin over families in the file's order, so
  # every held-out family keeps its share (the split is already stratified).
  python3 - "$corpus/heldout.jsonl" "$HELDOUT_N" "$D/heldout.jsonl" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n = min(int(sys.argv[2]), len(rows))
by = collections.OrderedDict()
for r in rows: by.setdefault(r["family"], []).append(r)
out = []
while len(out) < n:
    for fam in by:
        if by[fam] and len(out) < n: out.append(by[fam].pop(0))
with open(sys.argv[3], "w") as f:
    for r in out: f.write(json.dumps(r) + "\n")
print(f"held-out subset: {len(out)} of {len(rows)} tasks, {len(set(r['family'] for r in out))} families")
PY
  cp "$corpus/validation.jsonl" "$D/validation.jsonl"
  # GRPO and DPO draw from the training split past the SFT rows.
  tail -n +"$((SFT_TASKS + 1))" "$D/train_shuffled.jsonl" >"$D/rl_tasks.jsonl"
  head -n "$DPO_TASKS" "$D/rl_tasks.jsonl" >"$D/dpo_tasks.jsonl"
}

model_json() {  # the base model's config.json (MODEL_JSON overrides)
  if [ -n "${MODEL_JSON:-}" ]; then cp "$MODEL_JSON" "$1"; return; fi
  cat >"$1" <<'EOF'
{"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "vocab_size": 2048, "hidden_size": 128,
 "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
 "head_dim": 32, "query_pre_attn_scalar": 32, "sliding_window": 256, "max_position_embeddings": 4096,
 "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
 "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0}
EOF
}

stage_pretrain() {
  local P=$OUT/pretrain
  model_json "$P/config.json"
  "$FIMI" init --config-json "$P/config.json" --tokenizer "$D/tokenizer.json" --out "$P/init" >/dev/null
  if [ "$PRETRAIN_STEPS" = 0 ]; then ln -sfn init "$P/base"; return; fi
  python3 "$SRC/bench/copy_drills.py" "$PRETRAIN_ROWS" "$DATA_SEED" "$P/drills.jsonl"
  python3 "$SRC/bench/copy_drills.py" 200 "$((DATA_SEED + 1))" "$P/drills_eval.jsonl" --episodes-only
  "$FIMI" data tokenize --kind sft --input "$P/drills.jsonl" --tokenizer "$D/tokenizer.json" --out "$P/drills.h5" \
    --loss all >"$P/tokenize.log"
  "$FIMI" data tokenize --kind sft --input "$P/drills_eval.jsonl" --tokenizer "$D/tokenizer.json" \
    --out "$P/drills_eval.h5" >>"$P/tokenize.log"
  "$FIMI" train --config "$SRC/configs/tiny-cpu-sft.ini" --set train.init="$P/init" --set data.train="$P/drills.h5" \
    --set data.eval="$P/drills_eval.h5" --set train.out_dir="$P/run" --set train.steps="$PRETRAIN_STEPS" \
    --set optim.lr="$PRETRAIN_LR" --set optim.schedule=cosine --set optim.warmup_steps=10 --set train.micro_batch=32 \
    --set train.grad_accum=1 --set train.save_every="$PRETRAIN_STEPS" --set train.keep_last=1 \
    --set train.eval_every=100 --set train.progress=false
  ln -sfn "run/step_$(printf %06d "$PRETRAIN_STEPS")" "$P/base"
}

stage_sft() {
  local S=$OUT/sft third=$((SFT_STEPS / 3))
  "$FIMI" train --config "$SRC/configs/tiny-cpu-sft.ini" --set train.init="$OUT/pretrain/base" --set data.train="$D/sft.h5" \
    --set data.eval= --set train.out_dir="$S/run" --set train.steps="$SFT_STEPS" --set optim.lr="$SFT_LR" \
    --set optim.schedule=cosine --set optim.warmup_steps=10 --set train.micro_batch=8 --set train.grad_accum=1 \
    --set train.save_every="$third" --set train.keep_last=3 --set train.eval_every=0 --set train.progress=false
  ln -sfn "run/step_$(printf %06d "$SFT_STEPS")" "$S/base"
}

eval_args() { echo --tasks "$D/heldout.jsonl" --trials "$EVAL_TRIALS" --set grpo.context=4000 \
  --set grpo.max_episode_tokens=1024 --set grpo.max_turn_tokens=96; }

stage_ladder() {
  local L=$OUT/ladder files=() step
  for step in $((SFT_STEPS / 3)) $((2 * SFT_STEPS / 3)) "$SFT_STEPS"; do
    "$FIMI" eval --model "$OUT/sft/run/step_$(printf %06d "$step")" --label "sft-$step" $(eval_args) \
      --out "$L/sft-$step.json" >/dev/null
    files+=("$L/sft-$step.json")
  done
  for agent in oracle random do_nothing; do
    "$FIMI" eval --agent "$agent" --label "$agent" $(eval_args) --out "$L/$agent.json" >/dev/null
    files+=("$L/$agent.json")
  done
  "$FIMI" eval ladder "${files[@]}" >"$L/ladder.md"
}

stage_grpo() {
  local G=$OUT/grpo seed
  "$FIMI" eval --model "$OUT/sft/base" --label base $(eval_args) --out "$G/base.json" >/dev/null
  for seed in $GRPO_SEEDS; do
    "$FIMI" train --config "$SRC/configs/tiny-cpu-grpo.ini" --set train.init="$OUT/sft/base" \
      --set train.out_dir="$G/seed$seed" --set train.seed="$seed" --set train.steps="$GRPO_STEPS" \
      --set optim.lr="$GRPO_LR" --set grpo.temperature="$GRPO_TEMPERATURE" --set grpo.max_draws="$GRPO_MAX_DRAWS" --set grpo.tasks_per_step=16 --set grpo.group_size=4 --set grpo.reward=strict \
      --set train.micro_batch=8 --set train.grad_accum=8 --set env.tasks="$D/rl_tasks.jsonl" \
      --set env.val_tasks="$D/validation.jsonl" --set env.catalog=family --set grpo.context=4000 \
      --set grpo.max_episode_tokens=1024 --set grpo.max_turn_tokens=96 --set train.eval_every=5 \
      --set train.save_every=5 --set train.keep_last=1 --set train.progress=false $GRPO_SET
    "$FIMI" eval --model "$G/seed$seed/best" --label "grpo-seed$seed" $(eval_args) --out "$G/grpo-seed$seed.json" >/dev/null
    "$FIMI" eval compare "$G/base.json" "$G/grpo-seed$seed.json" --out "$G/compare-seed$seed.json" \
      >"$G/compare-seed$seed.md"
    "$FIMI" report "$G/seed$seed" --out "$G/plots-seed$seed" >"$G/report-seed$seed.txt"
  done
  local first=${GRPO_SEEDS%% *}
  "$FIMI" report --results "$G/base.json" "$G/grpo-seed$first.json" --out "$G/plots-results" >/dev/null
}

stage_dpo() {
  local P=$OUT/dpo base=$OUT/sft/base split
  cp "$D/heldout.jsonl" "$P/held_tasks.jsonl"
  for split in train held; do
    local tasks=$D/dpo_tasks.jsonl
    [ "$split" = held ] && tasks=$P/held_tasks.jsonl
    "$FIMI" dpo corpus build --tasks "$tasks" --catalog family --out "$P/conv_$split.jsonl" >"$P/corpus_$split.log"
    "$FIMI" dpo pairs --model "$base" --corpus "$P/conv_$split.jsonl" --out "$P/pairs_$split.jsonl" --max-new 96 \
      --no-progress >"$P/pairs_$split.log"
    "$FIMI" data tokenize --kind dpo --input "$P/pairs_$split.jsonl" --tokenizer "$D/tokenizer.json" \
      --out "$P/pairs_$split.h5" --max-length 4096 --overlong drop >/dev/null
  done
  "$FIMI" train --config "$SRC/configs/tiny-cpu-dpo.ini" --set train.init="$base" --set data.train="$P/pairs_train.h5" \
    --set data.eval="$P/pairs_held.h5" --set train.out_dir="$P/run" --set train.steps="$DPO_STEPS" \
    --set train.eval_every="$DPO_STEPS" --set train.save_every="$DPO_STEPS" --set optim.lr=2e-4 --set dpo.beta=0.1 \
    --set dpo.rpo_alpha=1 --set train.progress=false
  local after=$P/run/step_$(printf %06d "$DPO_STEPS")
  "$FIMI" dpo pairs --model "$after" --corpus "$P/conv_held.jsonl" --out "$P/after_held.jsonl" --max-new 96 \
    --no-progress >"$P/after_held.log"
  # The judged bench: fimi's 231 cases in six categories (docs/evaluation-bench.md).
  local cases=${BENCH_CASES:-$SRC/tests/data/bench/cases.jsonl}
  "$FIMI" eval bench --model "$base" --label base --cases "$cases" --attempts 3 --out "$P/bench-base.json" >/dev/null
  "$FIMI" eval bench --model "$after" --label dpo --cases "$cases" --attempts 3 --out "$P/bench-dpo.json" >/dev/null
}

stage_report() { python3 "$SRC/bench/reproduce_report.py" "$OUT" >"$OUT/REPORT.md"; cat "$OUT/REPORT.md"; }

# ---- the runner ------------------------------------------------------------------

if [ -n "$RUN_STAGE" ]; then
  declare -F "stage_$RUN_STAGE" >/dev/null || { echo "reproduce.sh: unknown stage $RUN_STAGE" >&2; exit 2; }
  "stage_$RUN_STAGE"
  exit 0
fi
for s in $FROM $ONLY; do
  case " ${STAGES[*]} " in *" $s "*) ;; *) echo "reproduce.sh: unknown stage $s (${STAGES[*]})" >&2; exit 2 ;; esac
done

redo=0
for s in "${STAGES[@]}"; do
  [ "$s" = "$FROM" ] && redo=1
  if [ -n "$ONLY" ] && [ "$s" != "$ONLY" ]; then continue; fi
  if [ -f "$OUT/$s/DONE" ] && [ "$redo" = 0 ] && [ "$s" != "$ONLY" ]; then say "stage $s: done before, skipped"; continue; fi
  rm -rf "$OUT/$s"
  mkdir -p "$OUT/$s"
  say "stage $s: start"
  t0=$SECONDS
  /usr/bin/time -f "%M" -o "$OUT/$s/peak_kib" bash "$0" "$BUILD" __stage "$s" \
    2> >(tee "$OUT/$s/stderr.log" >&2) || { say "stage $s: failed (see $OUT/$s/stderr.log)"; exit 1; }
  echo "$((SECONDS - t0))" >"$OUT/$s/seconds"
  touch "$OUT/$s/DONE"
  say "stage $s: done in $((SECONDS - t0)) s"
done
