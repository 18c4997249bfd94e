#!/usr/bin/env bash
# tests/cli_grpo_learning.sh: GRPO moves the policy the way its rewards
# say, on the simulated bank. A tiny Gemma 3 gets an SFT warm start on oracle
# transcripts of the rate_quote family (32 tasks; 100 steps); then
# 1. one GRPO step of 4 tasks x 4 rollouts (configs/tiny-cpu-grpo.ini, lr
#    1e-4) with grpo.log_rollouts = 1: every rollout re-scored by `fimi
#    score` under the warm start and the updated model. Asserts the
#    surrogate sum_i A_i sum_t logp / N rises (first order: the step follows
#    the loss's gradient), rollouts with A > 0 gain log-prob per token over
#    those with A < 0, and the warm start's scores replay the logged
#    sampling-time log-probs (1e-3). Measured on seeds 1, 2, 3, 7 and 42
#    under two OpenBLAS kernel sets: the surrogate rose 8-57% every time.
# 2. 24 fixed-seed GRPO steps with greedy validation on 16 held-out tasks
#    every 4 steps: no collapse (the mean training reward of the last 6
#    steps at most 0.1 below the first 6, validation at most 0.05 below its
#    start). A reward rise over 24 steps is not asserted: on this tiny
#    model it depends on the seed (docs/grpo.md, "Learning").
# About 1-5 min on 2 cores. Usage: cli_grpo_learning.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
source "$SRC/tests/lib_grpo.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
require_python json
D="$WORK/learn"
prepare_grpo_data "$D" rate_quote 32 16 768 100 3e-3
GRPO=(train --config "$SRC/configs/tiny-cpu-grpo.ini" --set train.init="$D/sft/step_000100"
      --set env.tasks="$D/train.jsonl" --set env.val_tasks="$D/val.jsonl" --set train.progress=false
      --set grpo.max_turn_tokens=64 --set grpo.max_episode_tokens=160 --set grpo.context=1300 --set optim.lr=1e-4)

expect_ok "one grpo step, rollouts logged" "$FIMI" "${GRPO[@]}" --set train.out_dir="$D/one" --set train.steps=1 \
  --set train.eval_every=0 --set train.save_every=1 --set grpo.log_rollouts=1
cat >"$WORK/improve.py" <<'PYEOF'
import json, subprocess, sys
fimi, log, before, after = sys.argv[1:5]
rows = [json.loads(l) for l in open(log)]
def score(model, ids):  # logprobs[t - 1] = log p(ids[t] | ids[<t])
    out = subprocess.run([fimi, "score", "--model", model, "--ids", ",".join(map(str, ids))],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["logprobs"]
N = sum(sum(r["mask"][1:]) for r in rows)
J = {before: 0.0, after: 0.0}
replay, up, down = 0.0, [], []
for r in rows:
    pos = [t for t in range(1, len(r["ids"])) if r["mask"][t]]
    if not pos:
        continue
    mean = {}
    for m in (before, after):
        lp = score(m, r["ids"])
        J[m] += r["advantage"] * sum(lp[t - 1] for t in pos) / N
        mean[m] = sum(lp[t - 1] for t in pos) / len(pos)
        if m == before:
            replay = max(replay, max(abs(lp[t - 1] - r["logp"][t]) for t in pos))
    (up if r["advantage"] > 0 else down if r["advantage"] < 0 else []).append(mean[after] - mean[before])
assert len(rows) == 16 and up and down, (len(rows), up, down)
mu, md = sum(up) / len(up), sum(down) / len(down)
print(f"A>0: {len(up)} rollouts, mean dlogp/token {mu:+.4f}; A<0: {len(down)}, {md:+.4f}; "
      f"surrogate {J[before]:+.5f} -> {J[after]:+.5f}; sampling log-probs replayed within {replay:.1e}", file=sys.stderr)
assert mu > md and J[after] > J[before], (mu, md, J)
assert replay <= 1e-3, replay
PYEOF
expect_ok "the step raises the advantage-weighted log-probs of its own rollouts" "$PY" "$WORK/improve.py" "$FIMI" \
  "$D/one/rollouts/step_000001.jsonl" "$D/sft/step_000100" "$D/one/step_000001"
cat "$WORK/err" >&2

expect_ok "grpo" "$FIMI" "${GRPO[@]}" --set train.out_dir="$D/grpo" --set train.steps=24 --set train.eval_every=4 \
  --set train.save_every=0
expect_true "24 steps: no collapse of the training reward (last 6 vs first 6) or the validation" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
r = [x["reward_mean"] for x in rows]
first, last = sum(r[:6]) / 6, sum(r[-6:]) / 6
start, end = rows[0]["validation_start"], rows[-1]["validation"]
print("train reward %.3f -> %.3f, validation %.3f -> %.3f" % (first, last, start, end), file=sys.stderr)
assert len(rows) == 24 and last >= first - 0.1 and end >= start - 0.05, (first, last, start, end)' "$D/grpo/metrics.jsonl"
cat "$WORK/err" >&2
cli_summary
