#!/usr/bin/env bash
# tests/gpu/check.sh: the whole GPU check on a lent device machine, in under
# six minutes (DESIGN.md section 8, docs/gpu-check.md). Run from anywhere:
#   bash tests/gpu/check.sh
# 1. environment: the libraries carried in .gpudeps/root (launch/gpu-deps.sh)
#    when present, else the system's; nvidia-smi -L.
# 2. configure (-G Ninja -DFIMI_GPU_CHECK=ON, Release) and build everything
#    that compiles (ninja -k 0: a test that fails to build does not stop the
#    others; a .cu that fails does, since the kernels are one library).
# 3. every ctest test labelled gpu, one at a time, each under a timeout; a
#    failed one is run again with FIMI_CUDA_SIMPLE=1 (the kernels' simple
#    variants) when time allows, its lines tagged [simple].
# 4. every bench_gpu_* (bench_gpu_ceilings first), then bench/gpu/sdpa_torch.py.
# 5. ONE table of all GPU_RESULT lines (bench/gpu/gpu_table.py: TFLOP/s and
#    GB/s also as shares of the ceilings measured in step 4), then a summary.
# It never stops at a failure. Exit: 0 all passed, 1 anything failed or was
# not run, 2 no GPU ("NO GPU: nothing was checked"; build and skips only).
# $OUT (when set): gpu-check.log (everything) and gpu-table.txt.
# Environment: FIMI_GPU_BUILD (build dir, default build-gpucheck),
# FIMI_CHECK_JOBS (build jobs, default nproc), FIMI_CHECK_SCALE (multiplies
# every time limit, for slow machines; default 1).
set -u -o pipefail

FIMI_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${FIMI_GPU_BUILD:-$FIMI_ROOT/build-gpucheck}"
JOBS="${FIMI_CHECK_JOBS:-$(nproc)}"
SCALE="${FIMI_CHECK_SCALE:-1}"
LOG="$BUILD/gpu-check.log"
TABLE="$BUILD/gpu-table.txt"
START=$SECONDS

# Phase marks, seconds from the start: each phase ends by its mark, so a slow
# build eats into the tests, never into the benchmarks' short window.
MARK_CONFIGURE=45
MARK_BUILD=190
MARK_TESTS=300
MARK_BENCH=340
MARK_TORCH=355

# Seconds left until `mark`, at most `cap`, at least 5 (scaled).
limit_until() {
  local left=$(($1 * SCALE - (SECONDS - START))) cap=$(($2 * SCALE))
  ((left > cap)) && left=$cap
  ((left < 5)) && left=5
  echo "$left"
}

phase() { printf '\n===== %s (t=%ds)\n' "$1" $((SECONDS - START)); }

FAILED=()         # what failed, one entry each
BUILD_STATE="build ok"
TESTS_PASSED=0 TESTS_FAILED=0 TESTS_SKIPPED=0 TESTS_NOT_RUN=0 TESTS_TOTAL=0
BENCH_OK=0 BENCH_FAILED=0 BENCH_SKIPPED=0
TORCH_STATE="not present"
HAVE_GPU=0
CMAKE_DEP_ARGS=()
ORIG_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"

# The carried libraries (launch/gpu-deps.sh): relocatable, used in place.
setup_deps() {
  local root="$FIMI_ROOT/.gpudeps/root"
  if [ ! -d "$root" ]; then
    echo "deps: no .gpudeps/root; using the system's OpenBLAS, cJSON, inih"
    setup_cudnn
    return
  fi
  local lib="$root/usr/lib/x86_64-linux-gnu"
  local gz blas="$BUILD/gpudeps-lib"
  # OpenBLAS travels gzipped: unpack it here, outside the carried folder.
  gz="$(ls "$lib"/openblas-openmp/libopenblasp-r*.so.gz 2>/dev/null | head -1)"
  if [ -n "$gz" ] && { [ ! -s "$blas/libopenblas.so.0" ] || [ "$gz" -nt "$blas/libopenblas.so.0" ]; }; then
    mkdir -p "$blas"
    if gzip -dc "$gz" >"$blas/libopenblas.so.0.tmp"; then
      mv "$blas/libopenblas.so.0.tmp" "$blas/libopenblas.so.0"
      ln -sfn libopenblas.so.0 "$blas/libopenblas.so"
    else
      echo "deps: could not unpack $gz"
    fi
  fi
  export PKG_CONFIG_PATH="$lib/openblas-openmp/pkgconfig:$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$blas:$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The CMake build looks for the OpenMP OpenBLAS at Debian's fixed path: name
  # the carried one. -rpath-link: the linker must find libgfortran beside it.
  CMAKE_DEP_ARGS+=("-DFIMI_OPENBLAS_OPENMP=$blas/libopenblas.so" "-DcJSON_DIR=$lib/cmake/cJSON"
    "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$blas:$lib")
  if ! pkg-config --version >/dev/null 2>&1; then
    echo "deps: no pkg-config on this machine; using the carried pkgconf"
    CMAKE_DEP_ARGS+=("-DPKG_CONFIG_EXECUTABLE=$root/usr/bin/pkg-config")
  fi
  echo "deps: using $root ($(du -sh "$root" 2>/dev/null | cut -f1))"
  setup_cudnn
}

# The optional cuDNN attention path: headers carried in .gpudeps (build),
# libcudnn.so.9 from this machine, PyTorch's wheel if nowhere else (run).
setup_cudnn() {
  local deps="$FIMI_ROOT/.gpudeps" lib=""
  if [ -f "$deps/cudnn-frontend/include/cudnn_frontend.h" ]; then
    CMAKE_DEP_ARGS+=("-DFIMI_CUDNN_FRONTEND_INCLUDE=$deps/cudnn-frontend/include")
    [ -f /usr/local/cuda/include/cudnn.h ] || [ -f /usr/include/cudnn.h ] ||
      CMAKE_DEP_ARGS+=("-DFIMI_CUDNN_INCLUDE=$deps/cudnn-include")
  fi
  lib="$(ldconfig -p 2>/dev/null | sed -n 's/.*libcudnn\.so\.9 .*=> //p' | head -1)"
  if [ -z "$lib" ]; then
    lib="$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib", "libcudnn.so.9"))' 2>/dev/null || true)"
    [ -f "$lib" ] || lib="$(find / -xdev -name libcudnn.so.9 \( -path '*nvidia*' -o -path '*torch*' -o -path '*cuda*' \) 2>/dev/null | head -1)"
  fi
  if [ -n "$lib" ] && [ -f "$lib" ]; then
    export FIMI_CUDNN_LIBRARY="$lib"
    export LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "deps: cuDNN $lib"
  else
    echo "deps: no libcudnn.so.9 found: the cuDNN attention rows will be skipped"
  fi
  setup_nccl
}

# NCCL for nccl_gpu_test (the device collectives at world 1): the system's,
# else PyTorch's nvidia-nccl wheel (include/ and lib/ under nvidia/nccl).
setup_nccl() {
  [ -f /usr/include/nccl.h ] || [ -f /usr/local/cuda/include/nccl.h ] && { echo "deps: NCCL from the system"; return; }
  local root
  root="$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
  if [ -n "$root" ] && [ -f "$root/include/nccl.h" ]; then
    CMAKE_DEP_ARGS+=("-DFIMI_NCCL_ROOT=$root")
    export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "deps: NCCL $root"
  else
    echo "deps: no NCCL found: nccl_gpu_test will not be built"
  fi
}

env_phase() {
  phase "environment"
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  echo "host: $(uname -n), $(nproc) cores; repo: $FIMI_ROOT; build: $BUILD"
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  echo "nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'not found')"
  echo "cmake: $(cmake --version | head -1); ninja: $(ninja --version 2>/dev/null || echo 'not found')"
  if command -v nvidia-smi >/dev/null 2>&1; then
    local gpus
    gpus="$(nvidia-smi -L 2>&1)"
    echo "$gpus"
    if echo "$gpus" | grep -q '^GPU [0-9]'; then
      HAVE_GPU=1
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
    fi
  else
    echo "nvidia-smi: not found"
  fi
  [ "$HAVE_GPU" = 1 ] || echo "no GPU visible: tests and benchmarks will only build and skip"
  setup_deps
}

configure_phase() {
  phase "configure"
  local generator="Unix Makefiles"
  command -v ninja >/dev/null 2>&1 && generator="Ninja"
  mkdir -p "$BUILD"
  # A cache from another generator or other dependencies would be reused as is.
  if [ -f "$BUILD/CMakeCache.txt" ]; then
    local want_cjson="" arg
    for arg in "${CMAKE_DEP_ARGS[@]}"; do
      case "$arg" in -DcJSON_DIR=*) want_cjson="${arg#-DcJSON_DIR=}" ;; esac
    done
    local have_cjson
    have_cjson="$(sed -n 's/^cJSON_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
    if ! grep -qx "CMAKE_GENERATOR:INTERNAL=$generator" "$BUILD/CMakeCache.txt" ||
      { [ -n "$want_cjson" ] && [ "$have_cjson" != "$want_cjson" ]; } ||
      { [ -z "$want_cjson" ] && grep -q '\.gpudeps' "$BUILD/CMakeCache.txt"; }; then
      echo "configure: stale cache (generator or dependencies changed), starting afresh"
      rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
    fi
  fi
  local lim policy=()
  # CMake 4 refuses packages that ask for policies older than 3.5.
  cmake --version | head -1 | grep -q 'version [4-9]' && policy=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5)
  lim=$(limit_until $MARK_CONFIGURE 60)
  if ! timeout -k 5 "$lim" cmake -S "$FIMI_ROOT" -B "$BUILD" -G "$generator" -DFIMI_GPU_CHECK=ON -DFIMI_CUDNN=ON \
    -DCMAKE_BUILD_TYPE=Release "${policy[@]}" "${CMAKE_DEP_ARGS[@]}"; then
    BUILD_STATE="configure FAILED"
    FAILED+=("configure")
    [ -f "$BUILD/CMakeFiles/CMakeError.log" ] && tail -40 "$BUILD/CMakeFiles/CMakeError.log"
    return 1
  fi
  echo "--- dependencies as configured:"
  grep -E '^(FIMI_OPENBLAS_OPENMP|cJSON_DIR|PKG_CONFIG_EXECUTABLE|pkgcfg_lib_INIH_inih|OPENBLAS_INCLUDE_DIRS|INIH_INCLUDE_DIRS|CMAKE_CUDA_COMPILER|FIMI_CUDNN_FRONTEND_INCLUDE|FIMI_CUDNN_INCLUDE|FIMI_NCCL_INCLUDE_DIR|FIMI_NCCL_LIBRARY):' \
    "$BUILD/CMakeCache.txt" | sed 's/^/    /'
  if ! grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=.' "$BUILD/CMakeCache.txt"; then
    echo "configure: no CUDA compiler found: the GPU tests cannot be built"
    BUILD_STATE="no CUDA compiler"
    FAILED+=("no nvcc")
    return 1
  fi
}

build_phase() {
  phase "build (-j $JOBS)"
  local lim keep=(-k 0)
  grep -qx "CMAKE_GENERATOR:INTERNAL=Ninja" "$BUILD/CMakeCache.txt" || keep=(-k)
  lim=$(limit_until $MARK_BUILD 170)
  timeout -k 5 "$lim" cmake --build "$BUILD" -j "$JOBS" -- "${keep[@]}"
  local rc=$?
  # The cuDNN path is the one file built against headers from elsewhere (the
  # carried frontend): if it is what failed, the kernels library is missing
  # and nothing could run, so build again without it (its rows then absent).
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] &&
    ! find "$BUILD/kernels" -name 'attention_cudnn.cpp.o' 2>/dev/null | grep -q .; then
    echo "build: the cuDNN attention path did not compile; building again with -DFIMI_CUDNN=OFF"
    FAILED+=("cuDNN path did not compile")
    lim=$(limit_until $MARK_BUILD 170)
    if timeout -k 5 "$lim" cmake "$BUILD" -DFIMI_CUDNN=OFF >/dev/null; then
      timeout -k 5 "$lim" cmake --build "$BUILD" -j "$JOBS" -- "${keep[@]}"
      rc=$?
    fi
  fi
  if [ $rc -ne 0 ]; then
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then BUILD_STATE="build TIMED OUT after ${lim}s"; else BUILD_STATE="build FAILED (rc $rc; what built is still run)"; fi
    FAILED+=("build")
  fi
}

# ctest -V (needed: the GPU_RESULT lines of passing tests) without its chatter.
ctest_quiet() {
  grep -v -E '^(Internal ctest changing|UpdateCTestConfiguration|Test project|Constructing a list|Done constructing|Updating test list|Added 0 tests|Checking test dependency|test [0-9]+$|Label Time Summary|[a-z]+ += |Total Test time|The following tests (passed|did not run)|100% tests passed|[0-9]+: (Test command|Working Directory|Environment variables|Test timeout computed| +[A-Z_]+=)|[[:space:]]*$|'$'\t'')'
}

# Runs one ctest test under a timeout and prints its output (GPU_RESULT op
# names get `tag` appended when it is set, with FIMI_CUDA_SIMPLE=1). Sets
# RESULT to passed, failed, skipped or timeout.
run_one_test() {
  local name="$1" lim="$2" tag="$3" out rc
  out="$(mktemp)"
  if [ -n "$tag" ]; then
    FIMI_CUDA_SIMPLE=1 timeout -k 5 "$lim" ctest --test-dir "$BUILD" -R "^${name}\$" -V >"$out" 2>&1
    rc=$?
    ctest_quiet <"$out" | sed "s/GPU_RESULT|\([^|]*\)|/GPU_RESULT|\1$tag|/"
  else
    timeout -k 5 "$lim" ctest --test-dir "$BUILD" -R "^${name}\$" -V >"$out" 2>&1
    rc=$?
    ctest_quiet <"$out"
  fi
  local status_line
  status_line="$(grep -E "Test +#[0-9]+: +$name " "$out" | tail -1)"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    RESULT="timeout"
  elif echo "$status_line" | grep -q 'Skipped'; then
    RESULT="skipped"
  elif [ $rc -eq 0 ] && echo "$status_line" | grep -q 'Passed'; then
    RESULT="passed"
  else
    RESULT="failed"
  fi
  rm -f "$out"
}

tests_phase() {
  phase "GPU tests (ctest -L gpu, one at a time)"
  local tests=() name lim simple_note
  mapfile -t tests < <(ctest --test-dir "$BUILD" -N -L gpu 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: *\([^ ]*\).*/\1/p')
  TESTS_TOTAL=${#tests[@]}
  echo "tests: ${tests[*]:-none}"
  if [ "$TESTS_TOTAL" -eq 0 ]; then
    FAILED+=("no GPU tests found")
    return
  fi
  for name in "${tests[@]}"; do
    if (((SECONDS - START) >= MARK_TESTS * SCALE)); then
      echo "$name: NOT RUN (out of time)"
      TESTS_NOT_RUN=$((TESTS_NOT_RUN + 1))
      FAILED+=("$name (not run: out of time)")
      continue
    fi
    lim=$(limit_until $MARK_TESTS 90)
    echo "--- $name (limit ${lim}s)"
    run_one_test "$name" "$lim" ""
    echo "--- $name: $RESULT"
    case "$RESULT" in
      passed) TESTS_PASSED=$((TESTS_PASSED + 1)) ;;
      skipped) TESTS_SKIPPED=$((TESTS_SKIPPED + 1)) ;;
      timeout)
        TESTS_FAILED=$((TESTS_FAILED + 1))
        FAILED+=("$name (timed out after ${lim}s)")
        ;;
      failed)
        TESTS_FAILED=$((TESTS_FAILED + 1))
        simple_note=""
        # The simple kernels tell a wrong fast kernel from a wrong test.
        if (((MARK_TESTS * SCALE - (SECONDS - START)) >= 40)); then
          lim=$(limit_until $MARK_TESTS 60)
          echo "--- $name again with FIMI_CUDA_SIMPLE=1 (limit ${lim}s)"
          run_one_test "$name" "$lim" "[simple]"
          simple_note="; with FIMI_CUDA_SIMPLE=1: $RESULT"
        fi
        FAILED+=("$name (failed$simple_note)")
        ;;
    esac
  done
  if [ "$HAVE_GPU" = 1 ] && [ "$TESTS_SKIPPED" -eq "$TESTS_TOTAL" ]; then
    FAILED+=("nvidia-smi sees a GPU but every test skipped (CUDA runtime sees no device?)")
  fi
}

bench_phase() {
  phase "GPU benchmarks"
  local dir="$BUILD/bench/gpu" benches=() b lim rc
  [ -x "$dir/bench_gpu_ceilings" ] && benches+=("$dir/bench_gpu_ceilings")
  for b in "$dir"/bench_gpu_*; do
    [ -f "$b" ] && [ -x "$b" ] && [ "$(basename "$b")" != bench_gpu_ceilings ] && benches+=("$b")
  done
  [ -x "$dir/bench_gpu_ceilings" ] || { echo "bench_gpu_ceilings was not built: no ceilings"; FAILED+=("bench_gpu_ceilings (not built)"); }
  for b in "${benches[@]}"; do
    lim=$(limit_until $MARK_BENCH 60)
    echo "--- $(basename "$b") (limit ${lim}s)"
    (cd "$dir" && OMP_NUM_THREADS=8 timeout -k 5 "$lim" "$b")
    rc=$?
    case $rc in
      0) BENCH_OK=$((BENCH_OK + 1)) ;;
      77) BENCH_SKIPPED=$((BENCH_SKIPPED + 1)) ;;
      124 | 137)
        BENCH_FAILED=$((BENCH_FAILED + 1))
        FAILED+=("$(basename "$b") (timed out after ${lim}s)")
        ;;
      *)
        BENCH_FAILED=$((BENCH_FAILED + 1))
        FAILED+=("$(basename "$b") (rc $rc)")
        ;;
    esac
    echo "--- $(basename "$b"): rc $rc"
  done
}

torch_phase() {
  local script="$FIMI_ROOT/bench/gpu/sdpa_torch.py"
  [ -f "$script" ] || return
  phase "PyTorch reference (bench/gpu/sdpa_torch.py)"
  if [ "$HAVE_GPU" != 1 ]; then
    TORCH_STATE="skipped (no GPU)"
    echo "$TORCH_STATE"
    return
  fi
  local lim rc
  lim=$(limit_until $MARK_TORCH 45)
  (cd "$FIMI_ROOT" && LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" PYTHONUNBUFFERED=1 timeout -k 5 "$lim" python3 "$script")
  rc=$?
  if [ $rc -eq 0 ]; then
    TORCH_STATE="ok"
  else
    TORCH_STATE="FAILED (rc $rc)"
    FAILED+=("sdpa_torch.py (rc $rc)")
  fi
}

main() {
  env_phase
  if configure_phase; then
    build_phase
    tests_phase
    bench_phase
  fi
  torch_phase
  phase "results ($(date -u +%H:%M:%S) UTC)"
  # The table reads this run's log so far (everything above went through tee;
  # the pause lets tee write the last lines).
  sleep 1
  python3 "$FIMI_ROOT/bench/gpu/gpu_table.py" "$LOG" --out "$TABLE" || echo "(gpu_table.py failed)"
  local result_fails
  result_fails=$(grep -c 'GPU_RESULT|.*|FAIL|' "$LOG" 2>/dev/null)
  echo
  echo "SUMMARY: $BUILD_STATE; tests: $TESTS_PASSED passed, $TESTS_FAILED failed, $TESTS_SKIPPED skipped, $TESTS_NOT_RUN not run (of $TESTS_TOTAL); benches: $BENCH_OK ok, $BENCH_FAILED failed, $BENCH_SKIPPED skipped; torch: $TORCH_STATE; FAIL results: ${result_fails:-0}; $((SECONDS - START))s"
  [ ${#FAILED[@]} -gt 0 ] && printf 'FAILED: %s\n' "${FAILED[@]}"
  [ "$HAVE_GPU" != 1 ] && echo "NO GPU: nothing was checked"
  [ ${#FAILED[@]} -gt 0 ] && return 1
  [ "$HAVE_GPU" != 1 ] && return 2
  echo "ALL PASSED"
  return 0
}

mkdir -p "$BUILD"
: >"$LOG"
main 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
  cp "$LOG" "$OUT/gpu-check.log"
  [ -f "$TABLE" ] && cp "$TABLE" "$OUT/gpu-table.txt"
fi
exit "$rc"
