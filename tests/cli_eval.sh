#!/usr/bin/env bash
# tests/cli_eval.sh: `fimi eval` end to end (docs/evaluation.md).
#   - the oracle through the harness scores exactly 1.0 on every episode of
#     a task of every family (2 trials), and the summary's slices, band and
#     pass^k agree with a recomputation in Python from the episodes;
#   - compare: the sign test's p against math.comb in Python, from the two
#     files; ladder marks the best; a result file read back by compare and
#     ladder, so broken files are named by field;
#   - a tiny random model: the same episodes at rollout.slots 1 and 4;
#   - usage errors and bad inputs are named.
# Usage: cli_eval.sh /path/to/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE

expect_ok "help" "$FIMI" eval --help
expect_true "help names compare" grep -q "fimi eval compare" "$WORK/out"
expect_ok "sample" "$FIMI" env sample --family all --n 1 --seed 5 --out "$WORK/tasks.jsonl"

# ---- scripted agents ------------------------------------------------------------------------
expect_ok "oracle" "$FIMI" eval --agent oracle --tasks "$WORK/tasks.jsonl" --trials 2 --out "$WORK/oracle.json"
expect_true "markdown beside the json" test -s "$WORK/oracle.md"
expect_ok "oracle at 1.0" "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
eps = d["episodes"]
tasks = {e["task_id"] for e in eps}
assert len(eps) == 2 * len(tasks) and len(tasks) >= 60, (len(eps), len(tasks))
bad = [e["task_id"] for e in eps if e["reward"]["total"] != 1.0 or e["reward"]["strict_total"] != 1.0]
assert not bad, bad[:5]
s = d["summary"]
assert s["overall"]["reward"] == 1.0 and s["overall"]["success"] == 1.0
assert all(v["reward"] == 1.0 for v in s["kind"].values()) and len(s["kind"]) == 4
assert s["band"]["always_pass"] == 1.0 and [p["pass_hat_k"] for p in s["pass_k"]] == [1.0, 1.0]
' "$WORK/oracle.json"

expect_ok "random" "$FIMI" eval --agent random --tasks "$WORK/tasks.jsonl" --trials 3 --out "$WORK/random.json" \
  --label rand
expect_ok "summary recomputed" "$PY" -c 'import json, sys, math, collections
d = json.load(open(sys.argv[1]))
eps, s = d["episodes"], d["summary"]
def close(a, b): return abs(a - b) < 1e-9
for kind, sl in s["kind"].items():
    r = [e["reward"]["total"] for e in eps if e["kind"] == kind]
    assert sl["episodes"] == len(r) and close(sl["reward"], sum(r) / len(r)), kind
    st = [e["reward"]["strict_total"] for e in eps if e["kind"] == kind]
    assert close(sl["strict_penalty"], (sum(r) - sum(st)) / len(r)), kind
db = [e["reward"]["db"] for e in eps if "db" in e["reward"]["checks"]]
assert close(s["overall"]["db"], sum(db) / len(db))
shallow = [e["reward"]["total"] for e in eps if e["num_gold"] <= 6]
assert close(s["depth"]["shallow"]["reward"], sum(shallow) / len(shallow))
c = collections.Counter(e["task_id"] for e in eps if e["reward"]["total"] >= 1.0)
tasks = sorted({e["task_id"] for e in eps})
for p in s["pass_k"]:
    k = p["k"]
    want = sum(math.comb(c[t], k) / math.comb(3, k) for t in tasks) / len(tasks)
    assert close(p["pass_hat_k"], want), (k, p, want)
split = sum(1 for t in tasks if 0 < c[t] < 3) / len(tasks)
assert close(s["band"]["split"], split)
assert close(s["dialog"]["tool_calls"], sum(e["tool_calls"] for e in eps) / len(eps))
' "$WORK/random.json"

# ---- compare and ladder ----------------------------------------------------------------------
expect_ok "compare" "$FIMI" eval compare "$WORK/random.json" "$WORK/oracle.json" --out "$WORK/cmp.json"
expect_true "compare table" grep -q "sign test p" "$WORK/out"
expect_ok "sign test p" "$PY" -c 'import json, sys, math
a, b, cmp = (json.load(open(p)) for p in sys.argv[1:4])
def means(d):
    m = {}
    for e in d["episodes"]:
        m.setdefault(e["task_id"], []).append(e["reward"]["total"])
    return {t: sum(v) / len(v) for t, v in m.items()}
ma, mb = means(a), means(b)
for kind in [None] + sorted(cmp["kind"]):
    ids = [t for t in ma if kind is None or any(e["task_id"] == t and e["kind"] == kind for e in a["episodes"])]
    wins = sum(mb[t] > ma[t] + 1e-12 for t in ids); losses = sum(ma[t] > mb[t] + 1e-12 for t in ids)
    n, m = wins + losses, min(wins, losses)
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(m + 1)) / 2 ** n) if n else 1.0
    row = cmp["overall"] if kind is None else cmp["kind"][kind]
    assert row["b_better"] == wins and row["a_better"] == losses, (kind, row, wins, losses)
    assert abs(row["sign_test_p"] - p) <= 1e-9 * max(p, 1e-300), (kind, row["sign_test_p"], p)
' "$WORK/random.json" "$WORK/oracle.json" "$WORK/cmp.json"
expect_ok "ladder" "$FIMI" eval ladder "$WORK/random.json" "$WORK/oracle.json"
expect_true "ladder: the oracle is best overall" grep -q "^| oracle | [0-9]* | \*\*1.000\*\*" "$WORK/out"

# ---- bad inputs --------------------------------------------------------------------------------
head -5 "$WORK/tasks.jsonl" >"$WORK/five.jsonl"
expect_ok "five tasks" "$FIMI" eval --agent do_nothing --tasks "$WORK/five.jsonl" --out "$WORK/five.json"
expect_fail "compare on different tasks" "is in" "$FIMI" eval compare "$WORK/random.json" "$WORK/five.json"
"$PY" -c 'import json, sys
d = json.load(open(sys.argv[1])); d["episodes"][2]["reward"]["db"] = "high"
json.dump(d, open(sys.argv[2], "w"))' "$WORK/five.json" "$WORK/broken.json"
expect_fail "broken result field named" 'episodes[2].reward: field "db"' "$FIMI" eval ladder "$WORK/broken.json"
echo '{"label": "x"}' >"$WORK/other.json"
expect_fail "not a result file" "format" "$FIMI" eval ladder "$WORK/other.json"
expect_fail "unknown agent" "unknown agent" "$FIMI" eval --agent genius --tasks "$WORK/five.jsonl"
expect_fail "no tasks" "--tasks FILE is required" "$FIMI" eval --agent oracle
expect_fail "model and agent" "exactly one of" "$FIMI" eval --agent oracle --model x --tasks "$WORK/five.jsonl"
expect_fail "bad trials" "--trials" "$FIMI" eval --agent oracle --tasks "$WORK/five.jsonl" --trials 0
printf '{"id": 3}\n' >>"$WORK/five.jsonl"
expect_fail "bad task line named" "five.jsonl:6" "$FIMI" eval --agent oracle --tasks "$WORK/five.jsonl"
: >"$WORK/empty.jsonl"
expect_fail "empty task file" "no tasks" "$FIMI" eval --agent oracle --tasks "$WORK/empty.jsonl"
expect_fail "missing model" "no-model" "$FIMI" eval --model "$WORK/no-model" --tasks "$WORK/tasks.jsonl"

# ---- a tiny model: the same episodes whatever rollout.slots ----------------------------------------
expect_ok "family tasks" "$FIMI" env sample --family balance_enquiry --n 3 --seed 9 --out "$WORK/bal.jsonl"
expect_ok "transcripts" "$FIMI" env transcripts --task-file "$WORK/bal.jsonl" --catalog family --out "$WORK/bal-sft.jsonl"
expect_ok "tokenizer" "$FIMI" tokenizer train --input "$WORK/bal-sft.jsonl" --vocab-size 512 --out "$WORK/tok.json"
expect_ok "init" "$FIMI" init --preset tiny --tokenizer "$WORK/tok.json" --out "$WORK/init"
budget=(--set grpo.max_turn_tokens=16 --set grpo.max_episode_tokens=40 --set eval.temperature=1.0)
for slots in 1 4; do
  expect_ok "model eval, $slots slots" "$FIMI" eval --model "$WORK/init" --tasks "$WORK/bal.jsonl" --trials 2 \
    "${budget[@]}" --set rollout.slots=$slots --out "$WORK/model-$slots.json"
done
expect_ok "same episodes at 1 and 4 slots" "$PY" -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert len(a["episodes"]) == 6 and a["episodes"] == b["episodes"]
assert all(e["generated_tokens"] > 0 and e["tokens"] > e["generated_tokens"] for e in a["episodes"])
assert a["parameters"] > 0 and a["summary"]["dialog"]["flops_total"] > a["summary"]["dialog"]["flops_decode"] > 0
' "$WORK/model-1.json" "$WORK/model-4.json"

cli_summary
