#!/usr/bin/env bash
# tests/cli_env.sh: `fimi env` end to end: tools still lists the catalog;
# sample is deterministic and covers every family; replay prints the gold
# chain with outputs; play takes turns from a pipe and scores them (a scripted
# oracle reaches 1.0, an idle player 0); eval runs the scripted agents; bad
# task files and options fail with messages naming the problem.
# Usage: cli_env.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
source "$(dirname "$0")/lib_cli.sh"
require_python json

expect_ok "tools" "$FIMI" env tools
grep -q "^verify_customer" "$WORK/out" || { echo "FAIL: tools lacks verify_customer"; failures=$((failures + 1)); }

expect_ok "sample --list" "$FIMI" env sample --list
grep -q "^fd_paper" "$WORK/out" || { echo "FAIL: --list lacks fd_paper"; failures=$((failures + 1)); }
nfam=$(grep -c "" "$WORK/out"); nfam=$((nfam - 1))

expect_ok "sample fd_paper" "$FIMI" env sample --family fd_paper --n 3 --seed 7 --out "$WORK/a.jsonl"
expect_ok "sample again" "$FIMI" env sample --family fd_paper --n 3 --seed 7 --out "$WORK/b.jsonl"
expect_true "same seed, same tasks" cmp "$WORK/a.jsonl" "$WORK/b.jsonl"
expect_true "three tasks" test "$(grep -c "" "$WORK/a.jsonl")" -eq 3
expect_ok "sample other seed" "$FIMI" env sample --family fd_paper --n 3 --seed 8 --out "$WORK/c.jsonl"
checks=$((checks + 1)); cmp -s "$WORK/a.jsonl" "$WORK/c.jsonl" && { echo "FAIL: seeds 7 and 8 gave the same tasks"; failures=$((failures + 1)); }
expect_ok "sample all" "$FIMI" env sample --family all --n 2 --seed 1 --out "$WORK/all.jsonl"
expect_true "two tasks per family" test "$(grep -c "" "$WORK/all.jsonl")" -eq $((2 * nfam))

id=$(head -1 "$WORK/a.jsonl" | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.readline())["id"])')
expect_ok "replay" "$FIMI" env replay --task-file "$WORK/a.jsonl" --task "$id"
cp "$WORK/out" "$WORK/replay.txt"
grep -q '^\[0\] <tool_call>{"name":"verify_customer"' "$WORK/replay.txt" || { echo "FAIL: replay step 0"; failures=$((failures + 1)); }
grep -q '^\[3\] <tool_call>{"name":"create_fd"' "$WORK/replay.txt" || { echo "FAIL: replay step 3"; failures=$((failures + 1)); }
grep -q '^    -> {"fd_id":"FD' "$WORK/replay.txt" || { echo "FAIL: replay lacks create_fd output"; failures=$((failures + 1)); }
grep -q '^communicate fd_id = FD' "$WORK/replay.txt" || { echo "FAIL: replay lacks values"; failures=$((failures + 1)); }

# A scripted oracle through a pipe: ask every field, run the gold chain,
# then say the values replay printed.
"$PY" - "$WORK/a.jsonl" "$id" "$WORK/replay.txt" > "$WORK/turns.txt" <<'PY'
import json, sys
task = next(t for t in map(json.loads, open(sys.argv[1])) if t["id"] == sys.argv[2])
values = [l.split(" = ", 1)[1].strip() for l in open(sys.argv[3]) if l.startswith("communicate ")]
for f in task["fields"]:
    print("Could you please share your %s?" % f["name"].replace("_", " "))
for g in task["gold"]:
    print("<tool_call>%s</tool_call>" % json.dumps({"name": g["name"], "arguments": g["arguments"]}, separators=(",", ":")))
print("Done. " + " ".join(values) + ". Thank you.")
PY
expect_ok "play oracle from a pipe" "$FIMI" env play --task-file "$WORK/a.jsonl" --task "$id" < "$WORK/turns.txt"
grep -q "^customer> " "$WORK/out" || { echo "FAIL: play shows no customer"; failures=$((failures + 1)); }
grep -q '^tool> {"name":"create_fd","result":{"fd_id"' "$WORK/out" || { echo "FAIL: play shows no tool result"; failures=$((failures + 1)); }
grep -q "^end stop" "$WORK/out" || { echo "FAIL: oracle play did not stop"; cat "$WORK/out"; failures=$((failures + 1)); }
grep -q '"total":1,"strict_total":1' "$WORK/out" || { echo "FAIL: oracle play reward"; grep reward "$WORK/out"; failures=$((failures + 1)); }

printf 'hello\nhow are you\n' > "$WORK/idle.txt"
expect_ok "play idle" "$FIMI" env play --task-file "$WORK/a.jsonl" --task "$id" < "$WORK/idle.txt"
grep -q "input ended" "$WORK/out" && grep -q '"total":0,' "$WORK/out" || { echo "FAIL: idle play"; cat "$WORK/out"; failures=$((failures + 1)); }

expect_ok "eval oracle" "$FIMI" eval --agent oracle --tasks "$WORK/all.jsonl" --out "$WORK/oracle.json"
grep -q "^| \*\*overall\*\* | $((2 * nfam)) | 1.000 | 1.000 |" "$WORK/out" || { echo "FAIL: eval oracle"; head -8 "$WORK/out"; failures=$((failures + 1)); }
expect_ok "eval do_nothing" "$FIMI" eval --agent do_nothing --tasks "$WORK/all.jsonl" --out "$WORK/nothing.json"
# Below 0.15, test_env_episode's bound: an idle agent still earns the db check
# on the refusals and reads that declare only seq and db.
grep -Eq "^\| \*\*overall\*\* \| $((2 * nfam)) \| 0\.(0[0-9]|1[0-4])" "$WORK/out" || { echo "FAIL: eval do_nothing not low"; head -8 "$WORK/out"; failures=$((failures + 1)); }

# Errors.
checks=$((checks + 1)); "$FIMI" env sample --n 2 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: sample without --family should exit 2"; failures=$((failures + 1)); }
expect_fail "unknown family" "unknown family" "$FIMI" env sample --family nope --n 1
expect_fail "bad --n" "--n" "$FIMI" env sample --family fd_paper --n 0
expect_fail "unknown option" "unknown option" "$FIMI" env replay --taskfile x
expect_fail "missing task file" "nothing.jsonl" "$FIMI" env replay --task-file "$WORK/nothing.jsonl" --task x
expect_fail "unknown task id" "no task" "$FIMI" env play --task-file "$WORK/a.jsonl" --task nope
{ head -1 "$WORK/a.jsonl"; echo; echo '{"id": "broken"}'; } > "$WORK/bad.jsonl"
expect_fail "bad task line" "bad.jsonl:3" "$FIMI" env replay --task-file "$WORK/bad.jsonl" --task "$id"
head -1 "$WORK/a.jsonl" | sed 's/"name":"create_fd"/"name":"create_fdx"/' > "$WORK/bad2.jsonl"
expect_fail "unknown gold tool" "unknown tool 'create_fdx'" "$FIMI" env replay --task-file "$WORK/bad2.jsonl" --task "$id"
expect_fail "env eval points to fimi eval" "fimi eval --agent" "$FIMI" env eval --task-file "$WORK/a.jsonl"

cli_summary
