#!/usr/bin/env bash
# tests/cli_transcripts.sh: `fimi env transcripts` end to end: oracle
# transcripts of one task per family for each catalog mode (all, area,
# family) tokenize with `fimi data tokenize --kind sft` to one row per task;
# the trained (loss) tokens are the same in every mode and match the
# command's own count, while the system prompt grows family < area < all;
# rows are {"messages": [...]} with tool_calls and tool turns; the default
# catalog is all; output is deterministic; --family filters; and a missing
# task file, a bad task line (named with its line), a task the oracle cannot
# play (named by id and line), an unknown --catalog and missing flags fail,
# leaving --out untouched and no temporary file behind.
# Usage: cli_transcripts.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$(dirname "$0")/lib_cli.sh"
require_python json  # PY: lib_cli.sh's Python

make_tiny_tokenizer "$WORK"
expect_ok "sample" "$FIMI" env sample --family all --n 1 --seed 3 --out "$WORK/tasks.jsonl"
ntasks=$(grep -c "" "$WORK/tasks.jsonl")

declare -A chars loss
for c in all area family; do
  expect_ok "transcripts --catalog $c" "$FIMI" env transcripts --task-file "$WORK/tasks.jsonl" --out "$WORK/sft-$c.jsonl" \
    --catalog "$c" --tokenizer "$WORK/tokenizer.json"
  cp "$WORK/out" "$WORK/summary-$c.txt"
  grep -q "^wrote $ntasks transcripts .* catalog $c" "$WORK/summary-$c.txt" || { echo "FAIL: $c summary"; cat "$WORK/summary-$c.txt"; failures=$((failures + 1)); }
  chars[$c]=$(sed -n 's/^system prompt: mean \([0-9]*\) characters.*/\1/p' "$WORK/summary-$c.txt")
  expect_true "$c: one row per task" test "$(grep -c "" "$WORK/sft-$c.jsonl")" -eq "$ntasks"
  expect_ok "tokenize $c" "$FIMI" data tokenize --kind sft --input "$WORK/sft-$c.jsonl" --tokenizer "$WORK/tokenizer.json" \
    --out "$WORK/sft-$c.h5" --json
  "$PY" - "$WORK/out" "$ntasks" "$WORK/summary-$c.txt" > "$WORK/check.txt" <<'PY'
import json, re, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n = int(sys.argv[2])
summary = open(sys.argv[3]).read()
m = re.search(r"mean ([0-9.]+), trained \(mask 1\) ([0-9.]+)", summary)
ok = s["rows"] == n and s["rows_in"] == n and s["truncated"] == 0 and s["skipped"] == 0
ok = ok and m and abs(float(m.group(1)) - s["tokens"] / n) < 0.06 and abs(float(m.group(2)) - s["loss_tokens"] / n) < 0.06
print(s["loss_tokens"] if ok else "bad %s %s" % (s, m and m.groups()))
PY
  loss[$c]=$(cat "$WORK/check.txt")
  case "${loss[$c]}" in bad*) echo "FAIL: $c: tokenize rows or token counts: ${loss[$c]}"; failures=$((failures + 1)) ;; esac
done
checks=$((checks + 1))
if ! [ "${chars[family]:-0}" -lt "${chars[area]:-0}" ] || ! [ "${chars[area]:-0}" -lt "${chars[all]:-0}" ]; then
  echo "FAIL: system prompt should grow family < area < all: ${chars[family]:-?} ${chars[area]:-?} ${chars[all]:-?}"
  failures=$((failures + 1))
fi
checks=$((checks + 1))
if [ "${loss[all]}" != "${loss[area]}" ] || [ "${loss[area]}" != "${loss[family]}" ]; then
  echo "FAIL: trained tokens should not depend on the catalog: ${loss[all]} ${loss[area]} ${loss[family]}"
  failures=$((failures + 1))
fi

# The rows: metadata, then messages with a system turn, tool calls and tool turns.
"$PY" - "$WORK/sft-family.jsonl" "$WORK/tasks.jsonl" > "$WORK/shape.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tasks = [json.loads(l) for l in open(sys.argv[2])]
bad = []
for i, (r, t) in enumerate(zip(rows, tasks)):
    m = r["messages"]
    if r["task_id"] != t["id"] or r["family"] != t["family"] or r["catalog"] != "family" or r["seed"] != i:
        bad.append("metadata %d" % i)
    if [x["role"] for x in m[:2]] != ["system", "user"] or m[1]["content"] == "":
        bad.append("opening %d" % i)
    for a, b in zip(m[2::2], m[3::2]):
        if a["role"] != "assistant" or b["role"] not in ("tool", "user"):
            bad.append("turn order %d" % i); break
        if "tool_calls" in a:
            f = a["tool_calls"][0]["function"]
            if b["role"] != "tool" or not b["content"].startswith('{"name":"%s",' % f["name"]) or a["content"] != "":
                bad.append("tool turn %d" % i); break
calls = sum("tool_calls" in x for r in rows for x in r["messages"])
print("ok" if not bad and calls > 0 else "bad %s calls %d" % (bad[:5], calls))
PY
expect_true "row shape" grep -qx ok "$WORK/shape.txt" || cat "$WORK/shape.txt"

expect_ok "default catalog" "$FIMI" env transcripts --task-file "$WORK/tasks.jsonl" --out "$WORK/default.jsonl"
expect_true "default catalog is all, deterministic" cmp "$WORK/default.jsonl" "$WORK/sft-all.jsonl"
expect_ok "other seed" "$FIMI" env transcripts --task-file "$WORK/tasks.jsonl" --out "$WORK/seed9.jsonl" --seed 9
checks=$((checks + 1)); cmp -s "$WORK/seed9.jsonl" "$WORK/sft-all.jsonl" && { echo "FAIL: --seed changed nothing"; failures=$((failures + 1)); }
nfd=$(grep -c '"family":"fd_' "$WORK/tasks.jsonl")
expect_ok "--family fd_*" "$FIMI" env transcripts --task-file "$WORK/tasks.jsonl" --out "$WORK/fd.jsonl" --family 'fd_*'
expect_true "--family keeps only fd_ tasks" test "$(grep -c '"family":"fd_' "$WORK/fd.jsonl")" -eq "$nfd" -a \
  "$(grep -c "" "$WORK/fd.jsonl")" -eq "$nfd"
grep -q "tasks of other families skipped" "$WORK/out" || { echo "FAIL: --family summary"; failures=$((failures + 1)); }
expect_fail "--family matching nothing" "no task of" "$FIMI" env transcripts --task-file "$WORK/tasks.jsonl" \
  --out "$WORK/none.jsonl" --family 'nosuch*'

# Errors leave --out as it was and no OUT.tmp.
echo old > "$WORK/keep.jsonl"
expect_fail "missing task file" "$WORK/nosuch.jsonl" "$FIMI" env transcripts --task-file "$WORK/nosuch.jsonl" --out "$WORK/keep.jsonl"
{ head -2 "$WORK/tasks.jsonl"; echo '{"id":"broken"}'; } > "$WORK/bad.jsonl"
expect_fail "bad task line named" "bad.jsonl:3" "$FIMI" env transcripts --task-file "$WORK/bad.jsonl" --out "$WORK/keep.jsonl"
# A task whose gold chain fails (wrong date of birth): named by id and line.
"$PY" - "$WORK/tasks.jsonl" > "$WORK/unplayable.jsonl" <<'PY'
import json, sys
tasks = [json.loads(l) for l in open(sys.argv[1])]
i = next(k for k, t in enumerate(tasks) if k > 0 and t["gold"] and t["gold"][0]["name"] == "verify_customer")
tasks[i]["gold"][0]["arguments"]["date_of_birth"] = "1900-01-01"
print("\n".join(json.dumps(t) for t in tasks[: i + 1]))
PY
read -r badline badid < <("$PY" - "$WORK/tasks.jsonl" <<'PY'
import json, sys
tasks = [json.loads(l) for l in open(sys.argv[1])]
i = next(k for k, t in enumerate(tasks) if k > 0 and t["gold"] and t["gold"][0]["name"] == "verify_customer")
print(i + 1, tasks[i]["id"])
PY
)
expect_fail "unplayable task named" "unplayable.jsonl:$badline: task $badid" "$FIMI" env transcripts \
  --task-file "$WORK/unplayable.jsonl" --out "$WORK/keep.jsonl"
# A task the oracle cannot score 1.0 on (a rubric rule it must break): refused, named.
"$PY" - "$WORK/tasks.jsonl" > "$WORK/unsolvable.jsonl" <<'PY'
import json, sys
t = json.loads(open(sys.argv[1]).readline())
t["assertions"].append({"text": "The agent never verifies the customer.", "rule": "not_called", "args": ["verify_customer"]})
t["checks"] = sorted(set(t["checks"]) | {"judge"})  # the rubric scores only where the judge is declared
print(json.dumps(t))
PY
expect_fail "oracle below 1.0 refused" "unsolvable.jsonl:1: task $(head -1 "$WORK/tasks.jsonl" | sed 's/^{"id":"\([^"]*\)".*/\1/'): transcript: the oracle scored" \
  "$FIMI" env transcripts --task-file "$WORK/unsolvable.jsonl" --out "$WORK/keep.jsonl"
expect_fail "unknown --catalog" "--catalog: env.catalog: unknown value 'everything'" "$FIMI" env transcripts --task-file "$WORK/tasks.jsonl" \
  --out "$WORK/keep.jsonl" --catalog everything
expect_fail "missing --out" "--out" "$FIMI" env transcripts --task-file "$WORK/tasks.jsonl"
expect_fail "unknown option" "--bogus" "$FIMI" env transcripts --task-file "$WORK/tasks.jsonl" --out "$WORK/keep.jsonl" --bogus
expect_true "failures leave --out untouched" test "$(cat "$WORK/keep.jsonl")" = old
expect_true "no temporary file left" test ! -e "$WORK/keep.jsonl.tmp" -a ! -e "$WORK/none.jsonl" -a ! -e "$WORK/none.jsonl.tmp"
expect_ok "--help" "$FIMI" env transcripts --help
grep -q "^usage: fimi env transcripts" "$WORK/out" || { echo "FAIL: --help prints the usage on stdout"; failures=$((failures + 1)); }

cli_summary
