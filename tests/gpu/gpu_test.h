// tests/gpu/gpu_test.h: shared helpers of the GPU tests (tests/gpu/test_gpu_*.c).
// Defines gpu_test_open (exit 77 = ctest skip when no device), host bf16
// rounding, random inputs (never zeros), upload/download helpers, the error
// measure, event timing and gpu_report (one "GPU_RESULT" line per measured op
// that tests/gpu/check.sh gathers into its final table). With
// FIMI_CUDA_STANDIN defined (tests/standin/) the same tests run on the host
// stand-in of ops_cuda.h: no device check, wall-clock timing.
//
// Error measure: max |gpu - ref| / max |ref| over the tensor (relative to the
// tensor's scale, so that elements near zero do not dominate). The CPU
// reference runs in fp32 on the same bf16-rounded inputs; the GPU rounds
// outputs (and, for multi-op paths, intermediates) to bf16, whose unit
// roundoff is 2^-8 = 3.9e-3, hence the default tolerance GPU_TOL_BF16 = 1e-2.
#ifndef FIMI_TESTS_GPU_TEST_H
#define FIMI_TESTS_GPU_TEST_H

#ifndef FIMI_CUDA_STANDIN
#include <cuda_runtime.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/device.h"

#define GPU_TOL_BF16 1e-2
#define GPU_SKIP 77

static int gpu_failures = 0;

// Opens device 0 or exits with 77 (skipped) when there is none.
static inline CudaContext *gpu_test_open(const char *name) {
#ifndef FIMI_CUDA_STANDIN  // the host stand-in (tests/standin/) is always there
  if (cuda_device_count() == 0) {
    printf("%s: no CUDA device, skipped\n", name);
    exit(GPU_SKIP);
  }
#endif
  CudaContext *ctx = NULL;
  FimiError err = {0};
  if (cuda_context_create(&ctx, 0, &err) != 0) {
    fprintf(stderr, "%s: %s\n", name, err.message);
    exit(1);
  }
  return ctx;
}

static inline int gpu_test_close(CudaContext *ctx, const char *name) {
  FimiError err = {0};
  if (cuda_context_sync(ctx, &err) != 0) {
    fprintf(stderr, "%s: %s\n", name, err.message);
    gpu_failures++;
  }
  cuda_context_destroy(ctx);
  printf("%s: %s (%d failures)\n", name, gpu_failures ? "FAIL" : "ok", gpu_failures);
  return gpu_failures ? 1 : 0;
}

// fp32 -> nearest-even bf16 -> fp32 on the host (what cuda_upload_bf16 stores).
static inline float host_round_bf16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  memcpy(&x, &bits, 4);
  return x;
}

// Uniform in [-scale, scale], rounded to bf16, never exactly zero.
static inline float *host_random_bf16(size_t n, float scale, uint64_t seed) {
  float *x = malloc(n * sizeof *x);
  Rng rng;
  rng_seed(&rng, seed);
  for (size_t i = 0; i < n; i++) {
    float u = (float)(2.0 * rng_uniform(&rng) - 1.0) * scale;
    if (u == 0.0f) u = scale * 0.5f;
    x[i] = host_round_bf16(u);
  }
  return x;
}

static inline void *gpu_alloc(size_t bytes) {
  void *p = NULL;
  FimiError err = {0};
  if (cuda_malloc(&p, bytes, &err) != 0) {
    fprintf(stderr, "gpu_alloc(%zu): %s\n", bytes, err.message);
    exit(1);
  }
  return p;
}

// A bf16 device copy of host values (already bf16-rounded by host_random_bf16).
static inline bf16 *gpu_bf16_from(CudaContext *ctx, const float *host, size_t n) {
  bf16 *d = gpu_alloc(n * sizeof(bf16));
  cuda_upload_bf16(ctx, d, host, n);
  return d;
}

// A device output poisoned with NaN, so an element a kernel forgets to write fails.
static inline void *gpu_poisoned(CudaContext *ctx, size_t bytes) {
  void *d = gpu_alloc(bytes);
  cuda_fill_bytes(ctx, d, 0xFF, bytes);
  return d;
}

static inline float *host_from_bf16(CudaContext *ctx, const bf16 *d, size_t n) {
  float *h = malloc(n * sizeof *h);
  cuda_download_bf16(ctx, h, d, n);
  return h;
}

static inline float *host_from_f32(CudaContext *ctx, const float *d, size_t n) {
  float *h = malloc(n * sizeof *h);
  cuda_download_f32(ctx, h, d, n);
  return h;
}

// max |got - ref| / max |ref|; NaN anywhere in got gives INFINITY.
static inline double max_rel_error(const float *got, const float *ref, size_t n) {
  double max_diff = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(got[i]) && isfinite(ref[i])) return INFINITY;
    double d = fabs((double)got[i] - (double)ref[i]);
    if (d > max_diff) max_diff = d;
    if (fabs(ref[i]) > max_ref) max_ref = fabs(ref[i]);
  }
  return max_diff / (max_ref > 1e-30 ? max_ref : 1e-30);
}

// max_rel_error of a device bf16 / fp32 output (n) against ref (n).
static inline double bf16_error(CudaContext *ctx, const bf16 *d, const float *ref, size_t n) {
  float *h = host_from_bf16(ctx, d, n);
  double e = max_rel_error(h, ref, n);
  free(h);
  return e;
}

static inline double f32_error(CudaContext *ctx, const float *d, const float *ref, size_t n) {
  float *h = host_from_f32(ctx, d, n);
  double e = max_rel_error(h, ref, n);
  free(h);
  return e;
}

// GB/s of `bytes` moved in `ms` milliseconds (0 when not timed).
static inline double gbps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0; }

// On the host stand-in the ops are the CPU reference: a timing measures
// nothing and a large shape checks nothing about the test that a small one
// does not, but both cost minutes of CPU. So there, unless FIMI_TEST_LONG=1
// (test.sh's long runs):
// GPU_TEST_REPS(n): timed launches of an op: 1 instead of n;
// gpu_test_skip_large(what, flops): 1, with a line saying so, for a case of
// more than 3e10 FLOPs (its forward), which the caller then skips.
// On a GPU: n and 0, always.
#ifdef FIMI_CUDA_STANDIN
static inline int gpu_test_long(void) {
  const char *v = getenv("FIMI_TEST_LONG");
  return v && *v && strcmp(v, "0") != 0;
}
#define GPU_TEST_REPS(n) ((n) > 1 && !gpu_test_long() ? 1 : (n))
static inline int gpu_test_skip_large(const char *what, double flops) {
  if (flops <= 3e10 || gpu_test_long()) return 0;
  printf("  %s: %.0f GFLOP, skipped on the host stand-in (FIMI_TEST_LONG=1 runs it)\n", what, flops / 1e9);
  return 1;
}
#else
#define GPU_TEST_REPS(n) (n)
static inline int gpu_test_skip_large(const char *what, double flops) {
  (void)what;
  (void)flops;
  return 0;
}
#endif

#ifdef FIMI_CUDA_STANDIN
// On the host stand-in the ops run synchronously: wall-clock time.
typedef struct GpuTimer {
  double start_s;
} GpuTimer;

static inline double gpu_test_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void gpu_timer_start(GpuTimer *t, CudaContext *ctx) {
  (void)ctx;
  t->start_s = gpu_test_now_s();
}

static inline double gpu_timer_stop_ms(GpuTimer *t, CudaContext *ctx, int launches) {
  (void)ctx;
  return 1e3 * (gpu_test_now_s() - t->start_s) / (launches > 0 ? launches : 1);
}
#else
// Event timing of `launches` calls of an op on ctx's stream, in ms per call.
typedef struct GpuTimer {
  cudaEvent_t start, stop;
} GpuTimer;

static inline void gpu_timer_start(GpuTimer *t, CudaContext *ctx) {
  cudaEventCreate(&t->start);
  cudaEventCreate(&t->stop);
  cudaEventRecord(t->start, (cudaStream_t)cuda_context_stream(ctx));
}

static inline double gpu_timer_stop_ms(GpuTimer *t, CudaContext *ctx, int launches) {
  float ms = 0.0f;
  cudaEventRecord(t->stop, (cudaStream_t)cuda_context_stream(ctx));
  cudaEventSynchronize(t->stop);
  cudaEventElapsedTime(&ms, t->start, t->stop);
  cudaEventDestroy(t->start);
  cudaEventDestroy(t->stop);
  return ms / (launches > 0 ? launches : 1);
}

// One result line. tflops and gbps may be 0 (not applicable); error < 0: not
// checked (benchmarks). A failed check counts towards the exit status.
#endif

static inline void gpu_report(const char *op, const char *shape, double error, double tolerance, double ms, double tflops,
                       double gbps) {
  int pass = error >= 0 ? error <= tolerance : 1;
  if (!pass) gpu_failures++;
  printf("GPU_RESULT|%s|%s|%.3e|%s|%.4f|%.1f|%.1f\n", op, shape, error, error < 0 ? "-" : (pass ? "pass" : "FAIL"), ms,
         tflops, gbps);
}

#endif
