#!/usr/bin/env bash
# tests/cli_train.sh: `fimi train` end to end on configs/tiny-cpu-sft.ini
# with data built from the repo (tokenizer from tests/interop, SFT rows from
# configs/data): the loss goes down clearly in 30 steps; 15 steps + --resume
# + 15 steps equals 30 straight (metrics and final weights, bitwise); a run
# killed with kill -9 in the middle of a save (FIMI_TEST_SAVE_DELAY_MS)
# leaves the previous checkpoint complete, the half-written temp dir is
# removed on --resume and the resumed run still ends bitwise equal; usage
# and config errors. Usage: cli_train.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
# One thread: the test machines are shared, and OpenMP threads competing for
# cores make the run many times slower (results do not depend on it).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
require_python json  # h5py and numpy too, when there, for the optimizer arrays
CONFIG="$SRC/configs/tiny-cpu-sft.ini"
D="$WORK/tiny-sft"
mkdir -p "$D"
train() {  # train OUT_DIR [more args...]
  local out="$1"; shift
  "$FIMI" train --config "$CONFIG" --set train.init="$D/init" --set data.train="$D/train.h5" \
    --set data.eval="$D/eval.h5" --set train.out_dir="$out" --set train.progress=false "$@"
}

make_tiny_tokenizer "$D"
tokenize_tiny sft "$D"
expect_ok "init" "$FIMI" init --config "$CONFIG" --tokenizer "$D/tokenizer.json" --out "$D/init"

# --dry-run: the ZeRO-3 memory plan grows with --unit-tokens and shrinks with the world size.
expect_ok "dry run with a memory plan" "$FIMI" train --config "$CONFIG" --set train.init="$D/init" --dry-run \
  --unit-tokens 64
expect_true "memory plan: world 1 > world 2 > world 8" "$PY" -c 'import re, sys
mib = {int(w): float(m) for w, m in re.findall(r"world +(\d+): +([0-9.]+) MiB", open(sys.argv[1]).read())}
print(mib); assert mib[1] > mib[2] > mib[8] > 0' "$WORK/out"
expect_fail "bad --unit-tokens" "--unit-tokens: expected" "$FIMI" train --config "$CONFIG" --dry-run --unit-tokens 0

# 30 steps straight: the loss falls clearly (ln 600 = 6.4 at the start).
expect_ok "train 30 steps" train "$WORK/a"
cat "$WORK/out"
expect_true "30 metric lines" test "$(wc -l <"$WORK/a/metrics.jsonl")" = 30
expect_true "train loss falls by more than 2 nats" "$PY" -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first = sum(r["loss"] for r in rows[:3]) / 3; last = sum(r["loss"] for r in rows[-3:]) / 3
print(first, last); assert first - last > 2.0 and rows[-1]["skipped"] == 0' "$WORK/a/metrics.jsonl"
expect_true "eval loss at steps 10, 20, 30, falling" "$PY" -c 'import json, sys
ev = [(r["step"], r["eval_loss"]) for r in map(json.loads, open(sys.argv[1])) if "eval_loss" in r]
assert [s for s, _ in ev] == [10, 20, 30] and ev[2][1] < ev[0][1] < 6.0, ev' "$WORK/a/metrics.jsonl"
expect_true "keep_last 2: steps 20 and 30" test "$(cd "$WORK/a" && echo step_*)" = "step_000020 step_000030"
for f in DONE config.json model.safetensors tokenizer.json optimizer.h5 trainer_state.json; do
  expect_true "checkpoint has $f" test -f "$WORK/a/step_000030/$f"
done
expect_true "tokenizer.json copied verbatim" cmp "$D/tokenizer.json" "$WORK/a/step_000030/tokenizer.json"
expect_ok "fimi info reads the checkpoint" "$FIMI" info "$WORK/a/step_000030"

# 15 + resume + 15 == 30.
expect_ok "train to step 15" train "$WORK/b" --set train.stop_at_step=15
expect_true "stopped at 15" test -f "$WORK/b/step_000015/DONE" -a ! -e "$WORK/b/step_000030"
expect_fail "fresh start over checkpoints" "--resume" train "$WORK/b"
expect_ok "resume" train "$WORK/b" --resume "$WORK/b"
expect_true "resumed metrics == straight metrics" test "$(metrics_without_timing "$WORK/b/metrics.jsonl")" = \
  "$(metrics_without_timing "$WORK/a/metrics.jsonl")"
expect_true "resumed weights == straight weights (bitwise)" cmp "$WORK/a/step_000030/model.safetensors" \
  "$WORK/b/step_000030/model.safetensors"
# fimi writes HDF5 without timestamps (data/h5_create.h): the same state
# gives the same bytes, so cmp is the whole comparison; h5py, when there,
# also reads the arrays back (and names them if the files differ).
expect_true "resumed optimizer.h5 == straight (byte for byte)" cmp "$WORK/a/step_000030/optimizer.h5" \
  "$WORK/b/step_000030/optimizer.h5"
if has_python h5py numpy; then
  echo "optimizer.h5 compared byte for byte (cmp) and array by array (h5py, $PY)"
  expect_true "resumed optimizer state == straight (h5py: step, names, arrays)" "$PY" -c 'import h5py, numpy as np, sys
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert sorted(a) == sorted(b) and len(a) > 0 and a.attrs["step"] == b.attrs["step"] == 30
diff = [k for k in a if not np.array_equal(a[k][()], b[k][()])]
assert not diff, diff' "$WORK/a/step_000030/optimizer.h5" "$WORK/b/step_000030/optimizer.h5"
else
  echo "optimizer.h5 compared byte for byte (cmp) only: no h5py/numpy in $PY"
fi

# kill -9 during the save of step 20: step 10 stays complete and loadable.
checks=$((checks + 1))
FIMI_TEST_SAVE_DELAY_MS=4000 train "$WORK/c" >"$WORK/c.log" 2>&1 &
PID=$!
# Poll until the save of step 20 starts (or the run ends): a sanitizer build on
# a loaded machine can take minutes to get there.
for _ in $(seq 1 12000); do
  [ -d "$WORK/c/.tmp-step_000020" ] && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.05
done
if [ -d "$WORK/c/.tmp-step_000020" ]; then kill -9 "$PID"; else echo "FAIL: no save of step 20 seen"; failures=$((failures + 1)); fi
wait "$PID" 2>/dev/null
expect_true "step 10 complete after the kill" test -f "$WORK/c/step_000010/DONE"
expect_true "no step 20 after the kill" test ! -e "$WORK/c/step_000020"
expect_true "the half-written temp dir is there" test -d "$WORK/c/.tmp-step_000020"
expect_ok "resume after kill -9" train "$WORK/c" --resume "$WORK/c"
expect_true "resume names the cleanup" grep -q "tmp-step_000020" "$WORK/err"
expect_true "temp dir removed" test ! -e "$WORK/c/.tmp-step_000020"
expect_true "after kill + resume: weights == straight" cmp "$WORK/a/step_000030/model.safetensors" \
  "$WORK/c/step_000030/model.safetensors"
expect_true "after kill + resume: metrics == straight" test "$(metrics_without_timing "$WORK/c/metrics.jsonl")" = \
  "$(metrics_without_timing "$WORK/a/metrics.jsonl")"

# Errors.
expect_fail "resume from nothing" "no complete checkpoint" train "$WORK/empty" --resume "$WORK/empty"
expect_fail "unknown key" "nosuch" train "$WORK/d" --set train.nosuch=1
expect_fail "no train data" "data.train" train "$WORK/d" --set data.train=
expect_fail "missing dataset file" "data.train" train "$WORK/d" --set data.train="$WORK/missing.h5"
expect_fail "bad schedule" "optim.schedule" train "$WORK/d" --set optim.schedule=zigzag
expect_fail "bad micro_batch" "micro_batch" train "$WORK/d" --set train.micro_batch=0
expect_fail "unknown objective" "objective" train "$WORK/d" --set train.objective=ppo
expect_fail "unknown cuda.attention" "cuda.attention: unknown value 'flash'" train "$WORK/d" --set cuda.attention=flash
expect_fail "unknown flag" "unknown option" "$FIMI" train --frobnicate
expect_ok "help" "$FIMI" train --help
cli_summary
