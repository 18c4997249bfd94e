# tests/lib_grpo.sh: the tiny GRPO run the GRPO tests share (sourced after
# tests/lib_cli.sh, with FIMI and SRC set; not a test itself).
# prepare_grpo_data DIR FAMILY N_TRAIN N_VAL VOCAB SFT_STEPS SFT_LR: a
# family's train and validation tasks, oracle transcripts, a BPE of VOCAB
# tokens, the random tiny init and an SFT warm start (DIR/sft/step_NNNNNN).
# prepare_tiny_grpo DIR makes, as configs/tiny-cpu-grpo.ini's comment does
# but smaller: DIR/train.jsonl (24 kyc_status_check tasks declaring all four
# checks), DIR/val.jsonl (8),
# the oracle transcripts, a 1024-token tokenizer, the random init and a
# 10-step SFT warm start at a high constant learning rate in DIR/sft
# (DIR/sft/step_000010): enough for some groups to differ in reward (a
# random init fails every rollout alike: no gradient), not a useful model.
# GRPO_ARGS: `fimi train` arguments of a 2 tasks x 4 rollouts step with small
# token budgets (one step takes about a second on one core).
prepare_grpo_data() {  # DIR FAMILY N_TRAIN N_VAL VOCAB SFT_STEPS SFT_LR: tasks, transcripts, tokenizer, init, SFT
  local d="$1" family="$2" n_train="$3" n_val="$4" vocab="$5" steps="$6" lr="$7"
  mkdir -p "$d"
  expect_ok "env sample (train)" "$FIMI" env sample --family "$family" --n "$n_train" --seed 1 --out "$d/train.jsonl"
  expect_ok "env sample (val)" "$FIMI" env sample --family "$family" --n "$n_val" --seed 99 --out "$d/val.jsonl"
  expect_ok "env transcripts" "$FIMI" env transcripts --task-file "$d/train.jsonl" --catalog family --out "$d/sft.jsonl"
  expect_ok "tokenizer" "$FIMI" tokenizer train --input "$d/sft.jsonl" --vocab-size "$vocab" --out "$d/tokenizer.json"
  expect_ok "init" "$FIMI" init --preset tiny --tokenizer "$d/tokenizer.json" --out "$d/init"
  expect_ok "tokenize sft" "$FIMI" data tokenize --kind sft --input "$d/sft.jsonl" --tokenizer "$d/tokenizer.json" \
    --out "$d/sft.h5"
  expect_ok "sft warm start" "$FIMI" train --config "$SRC/configs/tiny-cpu-sft.ini" --set data.train="$d/sft.h5" \
    --set data.eval= --set train.init="$d/init" --set train.out_dir="$d/sft" --set train.steps="$steps" \
    --set optim.lr="$lr" --set optim.schedule=constant --set optim.warmup_steps=0 --set train.save_every=0 \
    --set train.eval_every=0 --set train.progress=false
}

prepare_tiny_grpo() {
  local d="$1"
  prepare_grpo_data "$d" kyc_status_check 24 8 1024 10 1e-2
  # The family declares seq+db; a 10-step warm start rarely calls its tools
  # right, so every rollout of a group would score the db share alone and no
  # step would have a gradient. Declaring all four checks (the episodes
  # report comm and judge anyway) gives the groups reward differences.
  declare_all_checks "$d/train.jsonl" "$d/val.jsonl"
  GRPO_ARGS=(train --config "$SRC/configs/tiny-cpu-grpo.ini" --set train.init="$d/sft/step_000010"
             --set env.tasks="$d/train.jsonl" --set env.val_tasks="$d/val.jsonl" --set train.progress=false
             --set grpo.tasks_per_step=2 --set grpo.group_size=4 --set train.micro_batch=4 --set train.grad_accum=2
             --set grpo.max_turn_tokens=24 --set grpo.max_episode_tokens=48 --set rollout.slots=8
             --set grpo.val_tasks=2 --set train.save_every=0)
}

# grpo_metrics_without_timing METRICS_JSONL: per-step metrics minus the
# wall-clock fields (sorted keys, one line a step).
grpo_metrics_without_timing() {
  "$PY" -c 'import json, sys
# "run": the step-1 description of the machine (BLAS, kernels, threads), not of the training
timing = {"tokens_per_s", "elapsed", "time_prefill", "time_decode", "time_env", "time_rollout", "time_update", "gen_tokens_per_s", "run"}
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(json.dumps({k: v for k, v in d.items() if k not in timing}, sort_keys=True))' "$1"
}
