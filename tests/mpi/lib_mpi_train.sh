# tests/mpi/lib_mpi_train.sh: sourced by the `fimi train` tests across ranks
# (train_world_test.sh, dpo_world_test.sh) after SRC is set. Sources
# tests/lib_cli.sh and sets MPIEXEC, the Open MPI / sanitizer environment,
# PY (a Python with safetensors and numpy) and D (a data folder under WORK).
source "$SRC/tests/lib_cli.sh"
MPIEXEC="${FIMI_MPIEXEC:-mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$SRC/tests/mpi/lsan-openmpi.supp"
PY="$SRC/.venv/bin/python"
"$PY" -c "import safetensors, numpy" 2>/dev/null || PY=python3
D="$WORK/data"
mkdir -p "$D"
