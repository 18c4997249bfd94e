#!/usr/bin/env bash
# tests/mpi/mpi_tests.sh: runs tests/mpi/mpi_comm_test under mpirun.
# Usage: mpi_tests.sh PATH/TO/mpi_comm_test NP|agree|singleton
#   NP         collectives twice (results must be bitwise identical run to
#              run on every rank), roles, invalid role layouts, MPI errors.
#   agree      the same global reduction at world 1, 2 and 4 agrees to 1e-5.
#   singleton  the program without mpirun (Open MPI singleton, world 1).
# Usage: mpi_tests.sh PATH/TO/zero3_test zero3 PRESET RECOMPUTE | zero3-memory PRESET
#   zero3         ZeRO-3 training at world 1, 2, 4 on the same units: losses
#                 and final weights agree to 1e-5; world 1 with one unit per
#                 step equals the plain model + AdamW path bitwise.
#   zero3-memory  peak memory per rank at world 1, 2, 4 vs the formula.
# Usage: mpi_tests.sh PATH/TO/zero3_cuda_test zero3-gpu PRESET RECOMPUTE
#   zero3-gpu     the GPU ZeRO-3 code on the host stand-in at world 1, 2, 4:
#                 each run within bf16 tolerance of the CPU ZeRO-3 run, the
#                 three bitwise equal to each other.
# Usage: mpi_tests.sh PATH/TO/env_mpi_test env NP ENV_RANKS
#   env           episodes on ENV_RANKS env ranks equal the in-process ones.
# Usage: mpi_tests.sh PATH/TO/rollout_exchange_test exchange
#   exchange      GRPO's rollout split and exchange at world 1, 2, 3, 4.
# Open MPI refuses root and more ranks than cores unless told: CI is both.
set -uo pipefail
BIN="$1"
MODE="$2"
MPIEXEC="${FIMI_MPIEXEC:-mpirun}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Under ASan (FIMI_SANITIZE): Open MPI's allocations held until exit are not
# fimi's leaks (lsan-openmpi.supp); ignored by a normal build.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-openmpi.supp"
failures=0

run() {  # run NP ARGS...: the program at world NP; a failure is counted
  local np="$1"; shift
  if ! "$MPIEXEC" --oversubscribe -np "$np" "$BIN" "$@" >"$WORK/out" 2>&1; then
    echo "FAIL: -np $np $*"; cat "$WORK/out"; failures=$((failures + 1))
  else
    grep -v "checks, 0 failed" "$WORK/out" | sed 's/^/  /'; echo "ok: -np $np $*"
  fi
}

case "$MODE" in
  agree)
    for np in 1 2 4; do run "$np" global "$WORK/global$np"; done
    run_cmp() { "$BIN" compare 1e-5 "$WORK/global1" "$WORK/global2" "$WORK/global4" || failures=$((failures + 1)); }
    run_cmp
    # Run to run at world 4: bitwise.
    cp "$WORK/global4" "$WORK/global4a"
    run 4 global "$WORK/global4"
    cmp -s "$WORK/global4" "$WORK/global4a" || { echo "FAIL: world 4 global sum differs between runs"; failures=$((failures + 1)); }
    ;;
  zero3)
    # units of 1 row: world 1 runs 4 per step, world 2 two, world 4 one
    for np in 1 2 4; do run "$np" train "$3" "$4" 1 "$WORK/zero$np"; done
    "$BIN" compare 1e-5 "$3" "$WORK/zero1" "$WORK/zero2" "$WORK/zero4" || failures=$((failures + 1))
    # one unit of the whole batch at world 1: bitwise the plain path
    run 1 train "$3" "$4" 4 "$WORK/zero1b"
    # units of 2 rows at world 2 (one call each) vs world 1 (two calls)
    run 1 train "$3" "$4" 2 "$WORK/zero1u2"
    run 2 train "$3" "$4" 2 "$WORK/zero2u2"
    "$BIN" compare 1e-5 "$3" "$WORK/zero1u2" "$WORK/zero2u2" || failures=$((failures + 1))
    ;;
  zero3-gpu)
    for np in 1 2 4; do run "$np" train-gpu "$3" "$4" 1 "$WORK/gpu$np"; done
    "$BIN" compare 0 "$3" "$WORK/gpu1" "$WORK/gpu2" "$WORK/gpu4" || failures=$((failures + 1))
    # one unit of the whole batch at world 1: also the one-GPU train state
    run 1 train-gpu "$3" "$4" 4 "$WORK/gpu1b"
    ;;
  env)
    run "$3" play "$4"
    ;;
  exchange)
    for np in 1 2 3 4; do run "$np"; done
    ;;
  zero3-memory)
    for np in 1 2 4; do run "$np" memory "$3" 2; done
    ;;
  singleton)
    for mode in roles roles-invalid errors; do
      "$BIN" "$mode" >"$WORK/out" 2>&1 || { echo "FAIL: singleton $mode"; cat "$WORK/out"; failures=$((failures + 1)); }
    done
    "$BIN" collectives "$WORK/single" >"$WORK/out" 2>&1 || { echo "FAIL: singleton collectives"; cat "$WORK/out"; failures=$((failures + 1)); }
    echo "singleton runs done"
    ;;
  *)
    run "$MODE" collectives "$WORK/a"
    run "$MODE" collectives "$WORK/b"
    for ((r = 0; r < MODE; r++)); do
      [ -s "$WORK/a.rank$r" ] && cmp -s "$WORK/a.rank$r" "$WORK/b.rank$r" ||
        { echo "FAIL: rank $r results differ between two runs (or are missing)"; failures=$((failures + 1)); }
    done
    run "$MODE" roles
    run "$MODE" roles-invalid
    run "$MODE" errors
    ;;
esac
[ "$failures" -eq 0 ] && echo "mpi_tests $MODE: all passed" || echo "mpi_tests $MODE: $failures failed"
exit $((failures > 0))
