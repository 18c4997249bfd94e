#!/usr/bin/env bash
# tests/cli_eval_bench.sh: `fimi eval bench` end to end (docs/evaluation-bench.md).
#   - build: the committed case set (tests/data/bench/cases.jsonl) is exactly
#     what `fimi env sample --family all --n 3 --seed 1` (the first 62
#     families' 186 tasks: the set predates the 38 added later) +
#     `bench build` give;
#   - the oracle passes every gate of every case at 3 attempts; for the
#     random agent, Pass^n, Pass@n, Mean and Avg@n overall, per category and
#     per axis, and the gate and check counts, recomputed in Python from the
#     attempts the file holds; every attempt carries its trajectory;
#   - score: judging the run's own result file again gives the same numbers;
#   - a tiny random model through the bench end to end (2 attempts);
#   - bad case files and arguments are named.
# Usage: cli_eval_bench.sh /path/to/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
CASES="$SRC/tests/data/bench/cases.jsonl"

# (fimi eval --help, bench included, answers fimi eval's usage; bench alone prints its own)
expect_fail "usage" "fimi eval bench build" "$FIMI" eval bench

# ---- the committed case set is the builder's output ---------------------------------------------
expect_ok "sample" "$FIMI" env sample --family all --n 3 --seed 1 --out "$WORK/all-tasks.jsonl"
head -n 186 "$WORK/all-tasks.jsonl" > "$WORK/tasks.jsonl"  # registry order: the first 62 families
expect_ok "build" "$FIMI" eval bench build --tasks "$WORK/tasks.jsonl" --out "$WORK/cases.jsonl"
expect_true "build prints the categories" grep -q "capability" "$WORK/out"
expect_true "committed cases are fresh (rebuild with the two commands above)" cmp "$WORK/cases.jsonl" "$CASES"

# ---- scripted agents ----------------------------------------------------------------------------
expect_ok "oracle" "$FIMI" eval bench --agent oracle --cases "$CASES" --attempts 3 --out "$WORK/oracle.json"
expect_true "markdown beside the json" grep -q "Pass^n" "$WORK/oracle.md"
expect_ok "oracle passes every gate" "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "fimi-eval-bench" and d["attempts"] == 3 and len(d["cases"]) >= 200
for c in d["cases"]:
    assert c["tries"] == 3 and c["passes"] == 3, c["id"]
    for a in c["attempts"]:
        assert a["pass"] and a["failed_gate"] is None, (c["id"], a["gates"])
        assert all(a["gates"][g]["pass"] for g in ("safety", "actions", "rq"))
        assert any(t["role"] == "model" for t in a["trajectory"])
o = d["summary"]["overall"]
assert o["pass_hat_n"] == o["pass_at_n"] == o["mean"] == o["avg_at_n"] == 1.0
assert len(d["summary"]["categories"]) == 6
' "$WORK/oracle.json"

expect_ok "random" "$FIMI" eval bench --agent random --cases "$CASES" --attempts 3 --out "$WORK/random.json"
cat >"$WORK/recompute.py" <<'EOF'
import json, sys, collections
d = json.load(open(sys.argv[1]))
def metrics(cases):
    tries = [c["tries"] for c in cases]
    passes = [sum(a["pass"] for a in c["attempts"]) for c in cases]
    n = len(cases)
    failed = collections.Counter(a["failed_gate"] for c in cases for a in c["attempts"] if not a["pass"])
    return {"cases": n, "attempts": sum(tries), "passes": sum(passes),
            "pass_hat_n": sum(p == t for p, t in zip(passes, tries)) / n,
            "pass_at_n": sum(p > 0 for p in passes) / n,
            "mean": sum(passes) / sum(tries),
            "avg_at_n": sum(p / t for p, t in zip(passes, tries)) / n,
            "failed": {g: failed.get(g, 0) for g in ("safety", "actions", "rq", "episode")}}
def same(got, want, what):
    for k, v in want.items():
        if isinstance(v, float):
            assert abs(got[k] - v) < 1e-9, (what, k, got[k], v)
        else:
            assert got[k] == v, (what, k, got[k], v)
s = d["summary"]
same(s["overall"], metrics(d["cases"]), "overall")
for cat, m in s["categories"].items():
    same(m, metrics([c for c in d["cases"] if c["category"] == cat]), cat)
for axis, m in s["axes"].items():
    same(m, metrics([c for c in d["cases"] if c["axis"] == axis]), axis)
checks = collections.Counter()
for c in d["cases"]:
    assert len(c["attempts"]) == c["tries"] == d["attempts"], c["id"]
    for a in c["attempts"]:
        assert any(t["role"] == "user" for t in a["trajectory"]), c["id"]
        g = a["failed_gate"]
        if g is None:
            continue
        order = ["safety", "actions", "rq"]
        assert a["gates"][g]["pass"] is False and a["gates"][g]["reason"]
        assert all(a["gates"][e]["pass"] for e in order[:order.index(g)]), "earlier gates passed"
        assert all(a["gates"][e] is None for e in order[order.index(g) + 1:]), "later gates not consulted"
        checks[g + "." + a["gates"][g]["check"]] += 1
assert dict(checks) == s["checks"], (checks, s["checks"])
print(json.dumps(s["overall"]))
EOF
expect_ok "random's metrics recomputed" "$PY" "$WORK/recompute.py" "$WORK/random.json"
expect_ok "random fails somewhere" "$PY" -c 'import json, sys
o = json.load(open(sys.argv[1]))["summary"]["overall"]
assert o["mean"] < 0.5 and o["failed"]["safety"] > 0 and o["failed"]["actions"] > 0, o
' "$WORK/random.json"
expect_ok "score again" "$FIMI" eval bench score --cases "$CASES" --results "$WORK/random.episodes.json" \
  --out "$WORK/rescored.json"
expect_ok "same scores" "$PY" -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["summary"] == b["summary"] and a["cases"] == b["cases"]
' "$WORK/random.json" "$WORK/rescored.json"

# ---- a tiny random model through the bench -------------------------------------------------------
{ head -n 3 "$CASES"; grep -m 1 '"axis":"social_engineering"' "$CASES"; grep -m 1 '"axis":"prompt_injection"' "$CASES"; } \
  >"$WORK/few.jsonl"
expect_ok "few tasks" "$PY" -c 'import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        out.write(json.dumps(json.loads(line)["task"]) + "\n")
' "$WORK/few.jsonl" "$WORK/few-tasks.jsonl"
expect_ok "transcripts" "$FIMI" env transcripts --task-file "$WORK/few-tasks.jsonl" --catalog family \
  --out "$WORK/few-sft.jsonl"
expect_ok "tokenizer" "$FIMI" tokenizer train --input "$WORK/few-sft.jsonl" --vocab-size 512 --out "$WORK/tok.json"
expect_ok "init" "$FIMI" init --preset tiny --tokenizer "$WORK/tok.json" --out "$WORK/init"
expect_ok "model bench" "$FIMI" eval bench --model "$WORK/init" --cases "$WORK/few.jsonl" --attempts 2 \
  --set grpo.max_turn_tokens=24 --set grpo.max_episode_tokens=64 --out "$WORK/model.json"
expect_ok "model attempts judged" "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert abs(d["temperature"] - 0.7) < 1e-6 and d["top_p"] == 1.0 and d["attempts"] == 2, (d["temperature"], d["top_p"])
assert d["summary"]["overall"]["attempts"] == 10 and len(d["cases"]) == 5
for c in d["cases"]:
    for a in c["attempts"]:
        assert any(t["sampled"] for t in a["trajectory"]), c["id"]
        assert a["pass"] or a["failed_gate"] in ("safety", "actions", "rq", "episode")
' "$WORK/model.json"
expect_ok "model metrics recomputed" "$PY" "$WORK/recompute.py" "$WORK/model.json"

# ---- errors are named ---------------------------------------------------------------------------
head -n 2 "$CASES" >"$WORK/bad.jsonl"
printf '{"id": "x", "category": "loans"}\n' >>"$WORK/bad.jsonl"
expect_fail "bad category named with file:line" "bad.jsonl:3: category" \
  "$FIMI" eval bench --agent oracle --cases "$WORK/bad.jsonl" --out "$WORK/bad.json"
head -n 1 "$CASES" | sed 's/"calls":\[{"name":"verify_customer"/"calls":[{"name":"verify_customers"/' >"$WORK/bad2.jsonl"
expect_fail "bad tool named" "bad2.jsonl:1: calls[0].name" \
  "$FIMI" eval bench score --cases "$WORK/bad2.jsonl" --results "$WORK/random.episodes.json"
expect_fail "cases of another run" "no case of the case file" \
  "$FIMI" eval bench score --cases "$WORK/few.jsonl" --results "$WORK/random.episodes.json" --out "$WORK/x.json"
expect_fail "cases required" "--cases" "$FIMI" eval bench --agent oracle
expect_fail "unknown argument" "--bogus" "$FIMI" eval bench --agent oracle --cases "$CASES" --bogus 1
expect_fail "bad attempts" "--attempts" "$FIMI" eval bench --agent oracle --cases "$CASES" --attempts 0
expect_fail "build needs tasks" "--tasks" "$FIMI" eval bench build --out "$WORK/c.jsonl"

cli_summary
