#!/usr/bin/env bash
# tests/cli_help.sh: every `fimi` command and subcommand answers --help and -h
# with its usage on stdout (a "usage:" line) and exit 0, and an unknown option
# fails with a non-zero exit and an error naming the usage ("see fimi CMD SUB
# --help", or the usage line itself). The commands come from `fimi --help` and
# the subcommands from each command's usage lines ("fimi CMD SUB ..."), so a
# new one is covered without editing this test. Usage: cli_help.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"

run() {  # run ARGS...: fimi ARGS with no input, stdout in $WORK/out, stderr in $WORK/err, exit code in $rc
  timeout 20 "$FIMI" "$@" </dev/null >"$WORK/out" 2>"$WORK/err"
  rc=$?
}

check_help() {  # check_help WORDS...: `fimi WORDS --help` and `-h`
  local flag
  for flag in --help -h; do
    checks=$((checks + 1))
    run "$@" "$flag"
    if [ "$rc" -ne 0 ]; then
      echo "FAIL: fimi $* $flag: exit $rc"; head -5 "$WORK/err"; failures=$((failures + 1))
    elif ! grep -q "usage:" "$WORK/out"; then
      echo "FAIL: fimi $* $flag: no \"usage:\" line on stdout"; head -5 "$WORK/err"; failures=$((failures + 1))
    fi
  done
}

check_unknown_option() {  # check_unknown_option WORDS...: `fimi WORDS --no-such-option` fails, naming the usage
  checks=$((checks + 1))
  local path="fimi${*:+ $*}"
  run "$@" --no-such-option
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    echo "FAIL: $path --no-such-option: exit $rc, expected a usage error"; failures=$((failures + 1))
  elif ! grep -qF -- "$path --help" "$WORK/err" && ! grep -qE -- "usage: +$path( |$)" "$WORK/err"; then
    echo "FAIL: $path --no-such-option: the error does not name \"$path --help\" or its usage:"
    head -5 "$WORK/err"; failures=$((failures + 1))
  fi
}

subcommands() {  # subcommands CMD: SUB for every usage line "[usage:] fimi CMD SUB ..." of `fimi CMD --help`
  "$FIMI" "$1" --help </dev/null 2>/dev/null |
    sed -nE "s/^(usage:)? *fimi $1 ([a-z][a-z0-9_-]*)( .*)?$/\2/p" | sort -u
}

check_help
check_unknown_option
commands=$("$FIMI" --help | sed -n '/^commands:/,/^$/p' | sed -nE 's/^  ([a-z][a-z0-9_-]*) .*/\1/p')
expect_true "fimi --help lists commands" test -n "$commands"
ncmd=0 nsub=0
for cmd in $commands; do
  ncmd=$((ncmd + 1))
  check_help "$cmd"
  subs=$(subcommands "$cmd")
  check_unknown_option "$cmd"  # with subcommands: an unknown subcommand
  for sub in $subs; do
    nsub=$((nsub + 1))
    check_help "$cmd" "$sub"
    check_unknown_option "$cmd" "$sub"
  done
done
echo "covered $ncmd commands and $nsub subcommands: $(echo $commands)"

# Help names every value the code accepts: a bad value's error lists them
# ("... (sft, dpo or grpo)"), and each must appear in the command's --help.
check_values_in_help() {  # check_values_in_help "HELP WORDS" ARGS...: `fimi ARGS` rejects a value and lists the valid ones
  local help=$1
  shift
  checks=$((checks + 1))
  run "$@"
  local list values missing=""
  list=$(grep -oE '\(([a-z0-9_]+(, | or )?)+\)' "$WORK/err" | tail -1 | tr -d '()')
  values=$(echo "$list" | sed -E 's/,? or /, /g; s/, /\n/g')
  if [ -z "$values" ]; then
    echo "FAIL: fimi $*: no list of valid values in the error:"; head -3 "$WORK/err"; failures=$((failures + 1)); return
  fi
  $FIMI $help --help </dev/null >"$WORK/help" 2>&1
  for v in $values; do grep -qw -- "$v" "$WORK/help" || missing="$missing $v"; done
  if [ -n "$missing" ]; then
    echo "FAIL: fimi $help --help does not name:$missing (accepted: $list)"; failures=$((failures + 1))
  fi
}
check_values_in_help train train --config "$SRC/configs/tiny-cpu-sft.ini" --set train.objective=bogus --dry-run
check_values_in_help eval eval --agent bogus --tasks "$WORK/none.jsonl"
expect_true "at least 8 commands and 10 subcommands found" test "$ncmd" -ge 8 -a "$nsub" -ge 10
cli_summary
