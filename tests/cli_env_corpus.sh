#!/usr/bin/env bash
# tests/cli_env_corpus.sh: `fimi env corpus` end to end on a small corpus
# (320 tasks on a 200-customer bank; 200 to 280 fail the stratified gate: too few
# sample candidates of one kind once the communication families stay out): build writes the four JSONL files and
# the manifest, twice byte for byte the same; report prints every table and
# refuses a changed file naming it; fimi eval's oracle scores 1.0 on the
# held-out file; bad options fail with messages naming them.
# Usage: cli_env_corpus.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
source "$(dirname "$0")/lib_cli.sh"
require_python json

expect_ok "build" "$FIMI" env corpus build --out "$WORK/a" --total 320 --customers 200 --seed 2
for f in corpus.jsonl heldout.jsonl validation.jsonl train.jsonl manifest.json; do
  expect_true "$f written" test -s "$WORK/a/$f"
done
expect_true "320 corpus tasks" test "$(grep -c "" "$WORK/a/corpus.jsonl")" -eq 320
expect_ok "build again" "$FIMI" env corpus build --out "$WORK/b" --total 320 --customers 200 --seed 2
for f in corpus.jsonl heldout.jsonl validation.jsonl train.jsonl manifest.json; do
  expect_true "$f identical across builds" cmp "$WORK/a/$f" "$WORK/b/$f"
done
expect_ok "manifest: counts and hashes" "$PY" - "$WORK/a" <<'PY'
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
assert m["customers"] == 200 and m["image_seed"] == (200 << 32) | 2, (m["customers"], m["image_seed"])
def fnv(b):
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
for f in m["files"]:
    data = open(os.path.join(d, f["name"]), "rb").read()
    assert len(data) == f["bytes"] and fnv(data) == int(f["fnv1a64"], 16), f["name"]
    assert data.count(b"\n") == f["tasks"], f["name"]
ids = {s: [json.loads(l)["id"] for l in open(os.path.join(d, s + ".jsonl"))] for s in ("heldout", "validation", "train")}
allids = sum(ids.values(), [])
assert len(allids) == len(set(allids)), "a task in two splits"
assert len(m["gates"]) == 16 and not any(g["failed"] for g in m["gates"]), [g for g in m["gates"] if g["failed"]]
PY
expect_ok "report" "$FIMI" env corpus report "$WORK/a"
for t in "## Tasks per family" "## Kinds and use cases per split" "## Use-case shares of the corpus against the FiMI paper" \
         "## Gold chain lengths" "## Opening-line diversity" "## Named variants" "## Declared checks" "## Gates" "| leakage |"; do
  checks=$((checks + 1)); grep -qF "$t" "$WORK/out" || { echo "FAIL: report lacks '$t'"; failures=$((failures + 1)); }
done
expect_ok "oracle on the held-out file" "$FIMI" eval --agent oracle --tasks "$WORK/a/heldout.jsonl" --out "$WORK/ho.json"
expect_ok "held-out oracle at 1.0" "$PY" -c 'import json, sys
eps = json.load(open(sys.argv[1]))["episodes"]
assert eps and all(e["reward"]["total"] == 1.0 and e["reward"]["strict_total"] == 1.0 for e in eps), len(eps)' "$WORK/ho.json"

echo '{"id":"x"}' >> "$WORK/b/train.jsonl"
expect_fail "changed file" "train.jsonl" "$FIMI" env corpus report "$WORK/b"
expect_fail "no --out" "--out DIR is required" "$FIMI" env corpus build
expect_fail "unknown option" "unknown option" "$FIMI" env corpus build --out "$WORK/c" --bogus 1
expect_fail "too many customers" "--customers" "$FIMI" env corpus build --out "$WORK/c" --customers 999999
expect_fail "unknown subcommand" "unknown subcommand" "$FIMI" env corpus shuffle
expect_fail "report of a missing dir" "manifest.json" "$FIMI" env corpus report "$WORK/none"
cli_summary
