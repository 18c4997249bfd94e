#!/usr/bin/env bash
# tests/cli_report.sh: `fimi report` on the metrics.jsonl fixtures of
# tests/data/report/ (a 12-step GRPO run, a 6-step DPO run, an 8-step SFT
# run) and on two `fimi eval` result files. The printed numbers are checked
# against values this script computes from the fixtures (the trailing
# moving-window mean, first/last/min/max, the held-out points, the best step
# from RUN_DIR/best or, without the link, the first highest validation); the
# PNGs must exist, start with the PNG signature and not be tiny. Errors: a
# malformed line names file:line, a run folder without metrics.jsonl, a
# result file of another format. Without gnuplot on PATH the command still
# prints the numbers, names gnuplot-nox and exits 0. When this machine has no
# gnuplot, everything but the PNG checks runs, then the test exits 77
# (skipped). Usage: cli_report.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
require_python json
DATA="$SRC/tests/data/report"
HAVE_GNUPLOT=0
command -v gnuplot >/dev/null 2>&1 && HAVE_GNUPLOT=1

run_dir() {  # run_dir DIR FIXTURE: DIR/metrics.jsonl copied from tests/data/report/FIXTURE
  mkdir -p "$1" && cp "$DATA/$2" "$1/metrics.jsonl"
}

# check_table REPORT_STDOUT METRICS PANEL LEGEND FIELD WINDOW: the curve LEGEND
# of PANEL has the points, first, last, min and max (value@step) of FIELD in
# METRICS, or of its trailing mean over WINDOW steps when WINDOW > 0.
check_table() {
  "$PY" - "$@" <<'EOF'
import json, math, sys
out, metrics, panel, legend, field, window = sys.argv[1:7]
window = int(window)
rows = [json.loads(l) for l in open(metrics) if l.strip()]
steps = [r["step"] for r in rows]
vals = [r.get(field) for r in rows]
vals = [v if isinstance(v, (int, float)) else float("nan") for v in vals]
if window > 0:
    mean = []
    for i in range(len(vals)):
        w = [v for v in vals[max(0, i - window + 1):i + 1] if not math.isnan(v)]
        mean.append(sum(w) / len(w) if w else float("nan"))
    vals = mean
pts = [(v, s) for v, s in zip(vals, steps) if not math.isnan(v)]
want = [len(pts), pts[0], pts[-1], min(pts, key=lambda p: p[0]), max(pts, key=lambda p: p[0])]
lines = open(out).read().split("\n")
start = next(i for i, l in enumerate(lines) if l.startswith(panel + ": "))
block = lines[start + 1:]
block = block[:next((i for i, l in enumerate(block) if not l.startswith("  ")), len(block))]
row = next(l for l in block if l.startswith("  " + legend + " "))
cells = row[len(legend) + 2:].split()
got = [int(cells[0])] + [(float(c.split("@")[0]), int(c.split("@")[1])) for c in cells[1:5]]
assert got[0] == want[0], (row, want)
for (gv, gs), (wv, ws) in zip(got[1:], want[1:]):
    # min/max ties: any step with the extreme value is right
    assert abs(gv - wv) <= 1e-5 * max(1, abs(wv)), (row, want)
    assert gs == ws or [v for v, s in pts if s == gs][0] == wv, (row, want)
print("ok", panel, legend, got)
EOF
}

check_png() {  # check_png FILE: a PNG signature and more than 5 kB
  [ -f "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
    [ "$(stat -c %s "$1")" -gt 5000 ]
}

# ---- GRPO: the FiMI Figure 10 panels -------------------------------------------
G="$WORK/grpo"
run_dir "$G" grpo-metrics.jsonl
mkdir -p "$G/step_000012" && ln -s step_000012 "$G/best"
expect_ok "report of a GRPO run" "$FIMI" report "$G" --window 3
cp "$WORK/out" "$WORK/grpo.txt"
cat "$WORK/grpo.txt"
expect_true "detected as GRPO" grep -q "grpo objective" "$WORK/grpo.txt"
M="$DATA/grpo-metrics.jsonl"
expect_true "train reward per step" check_table "$WORK/grpo.txt" "$M" grpo_train_reward "train reward, per step" reward_mean 0
expect_true "train reward, mean of 3" check_table "$WORK/grpo.txt" "$M" grpo_train_reward \
  "train reward, mean of the last 3 steps" reward_mean 3
expect_true "all-fail share, mean of 3" check_table "$WORK/grpo.txt" "$M" grpo_all_fail_groups \
  "all-fail groups, mean of the last 3 steps" all_fail_groups 3
expect_true "tokens per episode, mean of 3" check_table "$WORK/grpo.txt" "$M" grpo_gen_tokens \
  "tokens per episode, mean of the last 3 steps" gen_tokens 3
expect_true "held-out points: step 0 (validation_start) then the scored steps" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want = ["%g@0" % rows[0]["validation_start"]] + ["%g@%d" % (r["validation"], r["step"]) for r in rows if "validation" in r]
line = [l for l in open(sys.argv[2]) if l.strip().startswith("value@step:")][0]
assert line.split()[1:] == want, (line, want)' "$M" "$WORK/grpo.txt"
expect_true "best step from RUN_DIR/best (12, not the highest validation at 8)" \
  grep -q "best step: step 12 (RUN_DIR/best)" "$WORK/grpo.txt"
expect_true "reference at the initial weights' held-out reward" \
  grep -q "reference: initial weights (step 0) = 0.25$" "$WORK/grpo.txt"
expect_ok "--window 10 (the default)" "$FIMI" report "$G" --out "$WORK/grpo-default"
expect_true "default window 10" check_table "$WORK/out" "$M" grpo_train_reward \
  "train reward, mean of the last 10 steps" reward_mean 10
rm "$G/best"
expect_ok "report without RUN_DIR/best" "$FIMI" report "$G" --out "$WORK/grpo-nolink"
expect_true "without the link: the first highest validation (step 8)" \
  grep -q "best step: step 8 (highest held-out reward; no RUN_DIR/best link)" "$WORK/out"

# ---- DPO and SFT -----------------------------------------------------------------
D="$WORK/dpo"
run_dir "$D" dpo-metrics.jsonl
expect_ok "report of a DPO run" "$FIMI" report "$D"
cp "$WORK/out" "$WORK/dpo.txt"
expect_true "detected as DPO" grep -q "dpo objective" "$WORK/dpo.txt"
M="$DATA/dpo-metrics.jsonl"
expect_true "DPO loss, mean of 10" check_table "$WORK/dpo.txt" "$M" dpo_loss "train, mean of the last 10 steps" loss 10
expect_true "DPO eval loss points" check_table "$WORK/dpo.txt" "$M" dpo_loss eval eval_loss 0
expect_true "DPO margins" check_table "$WORK/dpo.txt" "$M" dpo_reward_margins "train, per step" rewards/margins 0
expect_true "DPO accuracy" check_table "$WORK/dpo.txt" "$M" dpo_accuracy "train, per step" rewards/accuracies 0
expect_true "DPO eval accuracy" check_table "$WORK/dpo.txt" "$M" dpo_accuracy eval eval_rewards/accuracies 0
S="$WORK/sft"
run_dir "$S" sft-metrics.jsonl
expect_ok "report of an SFT run" "$FIMI" report "$S"
cp "$WORK/out" "$WORK/sft.txt"
expect_true "detected as SFT" grep -q "sft objective" "$WORK/sft.txt"
expect_true "SFT loss" check_table "$WORK/sft.txt" "$DATA/sft-metrics.jsonl" sft_loss "train, per step" loss 0
expect_true "SFT learning rate" check_table "$WORK/sft.txt" "$DATA/sft-metrics.jsonl" sft_lr "learning rate" lr 0

# ---- eval result files -------------------------------------------------------------
R="$WORK/results"
expect_ok "report of two result files" "$FIMI" report --results "$DATA/base.json" "$DATA/grpo.json" --out "$R"
cp "$WORK/out" "$WORK/results.txt"
cat "$WORK/results.txt"
expect_true "bar values: the files' reward and strict, overall and by kind; a missing kind is -" "$PY" -c '
import json, sys
text = open(sys.argv[1]).read().split("\n")
for measure in ("reward", "strict"):
    start = text.index(next(l for l in text if l.startswith("results_" + measure + ": ")))
    lines = text[start:start + 2 + len(sys.argv[2:])]
    assert lines[1].split() == ["model", "episodes", "overall", "happy", "seq", "edge", "tools"], lines[1]
    for path, line in zip(sys.argv[2:], lines[2:]):
        r = json.load(open(path))
        assert line.strip().startswith(r["label"]), (line, r["label"])
        cells = line[len(line) - len(line.lstrip()) + len(r["label"]):].split()
        s = r["summary"]
        want = [s["overall"]["episodes"], s["overall"][measure]]
        want += [s["kind"][k][measure] if k in s["kind"] else None for k in ("happy", "seq", "edge", "tools")]
        for c, w in zip(cells, want):
            assert (c == "-") if w is None else abs(float(c) - w) < 1e-9, (line, want)
print("ok")' "$WORK/results.txt" "$DATA/base.json" "$DATA/grpo.json"
# Result files as `fimi eval` writes them: the oracle and do-nothing agents on
# one task of every family.
expect_ok "tasks for eval" "$FIMI" env sample --family all --n 1 --seed 5 --out "$WORK/eval-tasks.jsonl"
expect_ok "eval oracle" "$FIMI" eval --agent oracle --tasks "$WORK/eval-tasks.jsonl" --out "$WORK/oracle.json"
expect_ok "eval do_nothing" "$FIMI" eval --agent do_nothing --tasks "$WORK/eval-tasks.jsonl" --out "$WORK/none.json"
R2="$WORK/results-eval"
expect_ok "report of fimi eval's result files" "$FIMI" report --results "$WORK/oracle.json" "$WORK/none.json" --out "$R2"
expect_true "the overall reward of each file, as printed" "$PY" -c '
import json, sys
lines = open(sys.argv[1]).read().split("\n")
start = lines.index(next(l for l in lines if l.startswith("results_reward: ")))
for path, line in zip(sys.argv[2:], lines[start + 2:]):
    r = json.load(open(path))
    cells = line.split()
    assert cells[0] == r["label"] and abs(float(cells[2]) - r["summary"]["overall"]["reward"]) < 1e-5, (line, path)
print("ok")' "$WORK/out" "$WORK/oracle.json" "$WORK/none.json"

# ---- errors ------------------------------------------------------------------------
B="$WORK/bad"
run_dir "$B" grpo-metrics.jsonl
sed -i '3s/.*/{"step": 3, "loss": 0.1,/' "$B/metrics.jsonl"
expect_fail "a truncated line names file:line" "$B/metrics.jsonl:3:" "$FIMI" report "$B"
run_dir "$B" grpo-metrics.jsonl
sed -i '5s/"reward_mean": [0-9.]*/"reward_mean": "high"/' "$B/metrics.jsonl"
expect_fail "a string reward names file:line and the field" "$B/metrics.jsonl:5: field \"reward_mean\" must be a number" \
  "$FIMI" report "$B"
run_dir "$B" grpo-metrics.jsonl
sed -i '7s/"step": 7/"step": 2/' "$B/metrics.jsonl"
expect_fail "steps that go back name file:line" "$B/metrics.jsonl:7: step 2 after step 6" "$FIMI" report "$B"
run_dir "$B" grpo-metrics.jsonl
sed -i '2s/.*/[1, 2]/' "$B/metrics.jsonl"
expect_fail "a line that is not an object" "$B/metrics.jsonl:2: not a JSON object" "$FIMI" report "$B"
mkdir -p "$WORK/empty-run"
expect_fail "no metrics.jsonl" "no metrics.jsonl" "$FIMI" report "$WORK/empty-run"
: >"$WORK/empty-run/metrics.jsonl"
expect_fail "an empty metrics.jsonl" "no steps logged yet" "$FIMI" report "$WORK/empty-run"
echo '{"format": "fimi-something-else", "version": 1}' >"$WORK/other.json"
expect_fail "a result file of another format" "is not a \`fimi eval\` result file" \
  "$FIMI" report --results "$WORK/other.json" --out "$WORK/r-other"
echo '{"format": "fimi-eval-results", "version": 1, "summary": {"overall": {"episodes": 3}}}' >"$WORK/noreward.json"
expect_fail "a summary without reward" "summary.overall: missing required field \"reward\"" \
  "$FIMI" report --results "$WORK/noreward.json" --out "$WORK/r-noreward"
expect_fail "--window 0" "--window" "$FIMI" report "$G" --window 0
expect_fail "RUN_DIR and --results together" "not both" "$FIMI" report "$G" --results "$DATA/base.json"
expect_ok "--help" "$FIMI" report --help
expect_true "--help prints the usage" grep -q "usage: fimi report RUN_DIR" "$WORK/out"

# ---- without gnuplot: the numbers, a message, exit 0 ---------------------------------
expect_ok "no gnuplot on PATH: still exit 0" env PATH=/nonexistent "$FIMI" report "$G" --window 3 --out "$WORK/nogp"
expect_true "no gnuplot: the same numbers" check_table "$WORK/out" "$DATA/grpo-metrics.jsonl" grpo_train_reward \
  "train reward, mean of the last 3 steps" reward_mean 3
expect_true "no gnuplot: names the package" grep -q "apt-get install gnuplot-nox" "$WORK/err"
expect_true "no gnuplot: no PNG, but the scripts to draw them later" \
  bash -c '! ls "$1"/*.png 2>/dev/null && test -s "$1/gnuplot/grpo_train_reward.gp"' _ "$WORK/nogp"

# ---- the PNGs ------------------------------------------------------------------------
if [ "$HAVE_GNUPLOT" = 0 ]; then
  cli_summary || exit 1
  echo "SKIPPED: the PNG checks need gnuplot (apt-get install gnuplot-nox); the numbers were checked"
  exit 77
fi
for f in grpo_train_reward grpo_heldout_reward grpo_all_fail_groups grpo_gen_tokens grpo_overview; do
  expect_true "$f.png" check_png "$G/report/$f.png"
done
for f in dpo_loss dpo_reward_margins dpo_accuracy dpo_rewards dpo_overview; do
  expect_true "$f.png" check_png "$D/report/$f.png"
done
for f in sft_loss sft_lr sft_overview; do expect_true "$f.png" check_png "$S/report/$f.png"; done
for f in results_reward results_strict; do
  expect_true "$f.png" check_png "$R/$f.png"
  expect_true "$f.png of fimi eval's files" check_png "$R2/$f.png"
done
# A folder name with a quote and a space reaches gnuplot intact.
Q="$WORK/it's a run"
run_dir "$Q" sft-metrics.jsonl
expect_ok "a run folder named with a quote and a space" "$FIMI" report "$Q"
expect_true "its PNG" check_png "$Q/report/sft_loss.png"
cli_summary
