#!/usr/bin/env bash
# tests/cli_grpo_learning.sh: GRPO learns on the simulated bank. A tiny
# Gemma 3 gets an SFT warm start on oracle transcripts of the rate_quote
# family (32 tasks; 100 steps), then 24 fixed-seed GRPO steps of 4 tasks x 4
# rollouts (configs/tiny-cpu-grpo.ini, lr 1e-4) with validation on 16
# held-out tasks every 4 steps (greedy). Asserts, from metrics.jsonl: the
# training reward (strict, sampled rollouts) of the last 6 steps beats the
# first 6 by at least 0.05 (measured +0.16: 0.30 -> 0.46), and the final
# validation reward is not below the initial one (measured 0.256 -> 0.290).
# The margins and the run are in docs/grpo.md ("Learning"), with the
# measurement that the rise depends on train.seed (42 here; two of four
# seeds show none), so this shows the machinery learning, not a reliable
# margin. About 1-5 min on 2 cores. Usage: cli_grpo_learning.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
source "$SRC/tests/lib_grpo.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
require_python json
D="$WORK/learn"
prepare_grpo_data "$D" rate_quote 32 16 768 100 3e-3
expect_ok "grpo" "$FIMI" train --config "$SRC/configs/tiny-cpu-grpo.ini" --set train.init="$D/sft/step_000100" \
  --set train.out_dir="$D/grpo" --set env.tasks="$D/train.jsonl" --set env.val_tasks="$D/val.jsonl" \
  --set train.steps=24 --set train.eval_every=4 --set train.save_every=0 --set train.progress=false \
  --set grpo.max_turn_tokens=64 --set grpo.max_episode_tokens=160 --set grpo.context=1300 --set optim.lr=1e-4
expect_true "training reward rises by >= 0.05 (last 6 steps vs first 6) and validation does not fall" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
r = [x["reward_mean"] for x in rows]
first, last = sum(r[:6]) / 6, sum(r[-6:]) / 6
start, end = rows[0]["validation_start"], rows[-1]["validation"]
print("train reward %.3f -> %.3f, validation %.3f -> %.3f" % (first, last, start, end), file=sys.stderr)
assert len(rows) == 24 and last - first >= 0.05 and end >= start, (first, last, start, end)' "$D/grpo/metrics.jsonl"
cat "$WORK/err" >&2
cli_summary
