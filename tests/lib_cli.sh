# tests/lib_cli.sh: what the tests/cli_*.sh scripts share (sourced, not a
# test itself): a temporary WORK directory removed on exit, counters, and
# expect_ok / expect_fail / expect_grep / cli_summary.
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0
checks=0

expect_ok() {  # expect_ok DESCRIPTION CMD...  (stdout in $WORK/out, stderr in $WORK/err)
  local what="$1"; shift
  checks=$((checks + 1))
  if ! "$@" >"$WORK/out" 2>"$WORK/err"; then
    echo "FAIL: $what: exit $?"; cat "$WORK/err"; failures=$((failures + 1))
  fi
}

expect_fail() {  # expect_fail DESCRIPTION EXPECTED_TEXT CMD...
  local what="$1" text="$2"; shift 2
  checks=$((checks + 1))
  if "$@" >"$WORK/out" 2>"$WORK/err"; then
    echo "FAIL: $what: succeeded but should fail"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$text" "$WORK/err"; then
    echo "FAIL: $what: message lacks \"$text\":"; cat "$WORK/err"; failures=$((failures + 1))
  fi
}

expect_true() {  # expect_true DESCRIPTION CMD...  (a check on files already written)
  local what="$1"; shift
  checks=$((checks + 1))
  "$@" >/dev/null 2>&1 || { echo "FAIL: $what"; failures=$((failures + 1)); }
}

cli_summary() {
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" -eq 0 ]
}
