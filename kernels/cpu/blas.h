// kernels/cpu/blas.h: the BLAS library behind the CPU backend's GEMMs, and
// which of its kernel sets runs. Defines cblas_sgemm (through the chosen
// library's cblas.h), BlasInfo, blas_info, blas_describe, blas_set_threads, CpuVectorUnit,
// cpu_vector_unit, blas_better_kernels, blas_kernels_at_start and
// blas_run_on_better_kernels.
//
// Why this exists: OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its
// kernels from cpuid when it loads. A version older than the processor may
// not recognize it and fall back to its SSE3 "Prescott" kernels, about 3.5x
// slower than the AVX-512 ones on such a CPU, silently. fimi reports the pick
// everywhere (fimi info, train and eval logs, metrics.jsonl) and replaces a
// pick below the CPU's vector unit at start (cmd/main.c; docs/decisions.md).
//
// The library is a build option (CMake FIMI_BLAS): openblas (Debian's, the
// default), blis (Debian's runtime-dispatched BLIS) or scipy-openblas (a
// newer OpenBLAS from the PyPI wheel, whose symbols carry a scipy_ prefix).
#ifndef FIMI_KERNELS_CPU_BLAS_H
#define FIMI_KERNELS_CPU_BLAS_H

#include <cblas.h>

#if defined(FIMI_BLAS_SCIPY_OPENBLAS)
#define cblas_sgemm scipy_cblas_sgemm
#endif

typedef struct BlasInfo {
  char library[96];   // "OpenBLAS 0.3.21", "BLIS 0.9.0"
  char kernels[48];   // the kernel set running: "SkylakeX", "Prescott", "zen3"
  char detected[48];  // what the library picked by itself ("" when unknown)
  // Who chose `kernels`: "detected" (the library), "fimi" (replaced a pick
  // below the CPU at start), "user" (OPENBLAS_CORETYPE set by the user or
  // the machine), or "build" (a library without a run-time choice).
  const char *chosen_by;
  int threads;  // the library's thread count for one GEMM
} BlasInfo;

void blas_info(BlasInfo *info);
// One line for logs: "OpenBLAS 0.3.21, kernels SkylakeX (chosen by fimi;
// the library picked Prescott), 2 threads".
void blas_describe(const BlasInfo *info, char *out, int size);
// Threads for one GEMM (both OpenBLAS and BLIS keep their own count).
void blas_set_threads(int threads);

// The widest vector unit both the CPU and the OS (XSAVE state) offer.
typedef enum CpuVectorUnit { CPU_VECTOR_SSE = 0, CPU_VECTOR_AVX2_FMA = 2, CPU_VECTOR_AVX512F = 3 } CpuVectorUnit;
CpuVectorUnit cpu_vector_unit(void);

// The OpenBLAS kernel set (an OPENBLAS_CORETYPE value) to run instead of
// `core` on a CPU with `unit`, or NULL when `core` already uses that unit:
// "SkylakeX" for a pre-AVX-512 core on an AVX-512F CPU, "Haswell" for a
// pre-AVX2 core on an AVX2+FMA CPU. Core names as openblas_get_corename
// prints them (case-insensitive).
const char *blas_better_kernels(const char *core, CpuVectorUnit unit);

// Decides, before the first GEMM, whether this process should run again with
// other kernels. Returns the OPENBLAS_CORETYPE value to set (and the process
// to re-execute itself), or NULL to go on as it is: always NULL when the
// user set OPENBLAS_CORETYPE, when fimi already chose (FIMI_BLAS_DETECTED is
// set), or when the library has no run-time choice. `detected` receives the
// library's own pick. FIMI_BLAS_ASSUME_CORE=NAME makes fimi treat the
// library's pick as NAME (tests use it to exercise the replacement on a CPU
// the library recognizes).
const char *blas_kernels_at_start(char *detected, int detected_size);
// Acts on blas_kernels_at_start: sets OPENBLAS_CORETYPE (and
// FIMI_BLAS_DETECTED, so the new image neither loops nor forgets what the
// library picked) and re-executes /proc/self/exe with argv; returns when
// nothing is to change or the exec failed (then it says so and goes on).
// `announce`: say once on stderr what changes (rank 0 of a job only).
// OpenBLAS reads OPENBLAS_CORETYPE only when it loads, before main, hence
// the exec. Call it first thing in main, before any thread or GEMM.
void blas_run_on_better_kernels(char **argv, int announce);

#endif
