#!/usr/bin/env bash
# tests/cli_docs_wording.sh: the user docs (docs/*.md and README.md) speak of
# fimi and its users, not of how the repository was worked on: no "this
# session", "issue #N", "lent GPU", "the device tool", helper or coding-agent
# phrases. The patterns are phrases, because the bare words are fimi's own
# elsewhere: the banking agent, a bank session (docs/bank-database.md), a
# card reissue. Before checking the docs, the script checks its patterns on
# built-in lines: each planted line must be caught and each legitimate line
# must pass, so a pattern that stops matching fails here first.
# Usage: cli_docs_wording.sh [PATH/TO/fimi] [ROOT]   (ROOT: the tree to check,
# default this source tree; the fimi argument is unused, as ctest passes it)
set -uo pipefail
ROOT="${2:-$(cd "$(dirname "$0")/.." && pwd)}"

# One extended regular expression per line, matched case-insensitively.
PATTERNS='\bthis (session|workplace)\b
\b(device|lent|later|earlier|previous|next|helper|other) sessions?\b
\bsessions? ([0-9]+|note|notes|of this project)\b
\bin one session\b
\bissues? #?[0-9]+\b
\b(the|this|that|an|open|later|foundation) issues? (asks?|says|lists|adds?|renames|wants|requires)\b
\bsee the open issues\b
\blent (gpu|device|machine|session)s?\b
\b(was|were|been|be|is|are|first) lent\b
\bdevice tool\b
\bcan_start_another\b|\bgive_back\b|\bfiles_at\b|\boutput_tail\b
\brun\(command=
\bcarry=\[
\bhelper (session|agent)s?\b
\b(ai|llm|coding) agents?\b
\bagents? (working|editing) (on|in) (this|the) (repo|repository|tree|project)\b
\bthe workplace\b'

# Lines the patterns must catch, and lines of fimi's own vocabulary they must not.
PLANTED='What was checked without a GPU this session.
since session 4 a test in CI
details in the session note
No session of this project has been lent a device so far
(the device tool`s status)
the first lent session runs it
No GPU was lent when it was written;
This formula is checked when ZeRO-3 lands (issue 6).
as the issue asks; the decode kernel stays
see issue #12 for the plan
run(command="bash tests/gpu/check.sh", carry=[".gpudeps"])
another coding agent edits this file
other sessions were compiling on the same 2 cores'
LEGIT='## Sessions: authentication and confirmation
The banking agent calls one tool per turn.
The agent session ends when the customer leaves.
A bank service request can be an issue for the customer.
debit reissue Rs 200 + GST; credit reissue free
shared helpers in env/tasks/family_helpers.c
a step of k micro-batches issues its all-gathers early
the bank lent Rs 5 lakh at 9.1%
Each agent turn is scored; helper functions live in tests/lib_cli.sh.'

failures=0
matches() { grep -inE -f <(printf '%s\n' "$PATTERNS") "$@"; }

while IFS= read -r line; do
  printf '%s\n' "$line" | matches >/dev/null || { echo "FAIL: the patterns miss a planted line: $line"; failures=$((failures + 1)); }
done <<<"$PLANTED"
while IFS= read -r line; do
  if hit=$(printf '%s\n' "$line" | matches); then echo "FAIL: the patterns hit legitimate text: $hit"; failures=$((failures + 1)); fi
done <<<"$LEGIT"

files=("$ROOT/README.md" "$ROOT"/docs/*.md)
if hits=$(matches -H "${files[@]}"); then
  echo "FAIL: wording about how the repository was worked on, not about fimi (rewrite for a user):"
  printf '%s\n' "$hits" | sed "s|^$ROOT/||"
  failures=$((failures + 1))
fi
echo "checked ${#files[@]} files against $(printf '%s\n' "$PATTERNS" | wc -l) patterns; $failures failed"
[ "$failures" -eq 0 ]
