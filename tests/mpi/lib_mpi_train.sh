# tests/mpi/lib_mpi_train.sh: sourced by the `fimi train` tests across ranks
# (train_world_test.sh, dpo_world_test.sh) after SRC is set. Sources
# tests/lib_cli.sh and sets MPIEXEC, the Open MPI / sanitizer environment,
# D (a data folder under WORK), and requires safetensors and numpy in PY
# (lib_cli.sh's require_python: a skip, exit 77, without them).
source "$SRC/tests/lib_cli.sh"
MPIEXEC="${FIMI_MPIEXEC:-mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$SRC/tests/mpi/lsan-openmpi.supp"
require_python numpy safetensors  # compare.py: losses and weights within 1e-5
D="$WORK/data"
mkdir -p "$D"
