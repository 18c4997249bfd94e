// tests/gpu/test_gpu_elementwise.c: the scaling and reshaping elementwise
// CUDA ops of Gemma 4 (kernels/cuda/elementwise.cu) against host references
// written from their ops_cuda.h contracts on the same bf16 inputs:
// - scale_cuda: out = inp * scale, out of place, in place, an odd n (the
//   scalar tail) and an unaligned pointer (the scalar path);
// - scale_by_device_scalar_cuda: the factor one bf16 in device memory, at an
//   odd offset inside a larger buffer (as layer_scalar inside the parameter
//   buffer), out of place and in place;
// - per_layer_inputs_combine_cuda: (normed + embedded) (N, L*P) * scale into
//   layer-major (L, N, P), and per_layer_inputs_split_cuda, its backward
//   (L, N, P) * scale into (N, L*P); P = 256 (Gemma 4's per-layer width: the
//   128-bit path) and odd P (scalar path).
// Each op is one fp32 multiply (or add then multiply) per element rounded to
// bf16 once, so the GPU must match the host's nearest-even rounding of the
// same fp32 value exactly: tolerance 0. Scales are off the bf16 grid's
// powers of two, so the rounding is exercised. Outputs are poisoned with
// NaN first; inputs are random and never zero.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

static const char *NAME = "test_gpu_elementwise";

// ref (n) = x (n) * factor rounded to bf16 (the ops' contract).
static float *scaled_ref(const float *x, float factor, size_t n) {
  float *ref = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) ref[i] = host_round_bf16(x[i] * factor);
  return ref;
}

// ---- scale_cuda ----
// `offset` elements into each allocation (1: unaligned, the scalar path).
static void test_scale(CudaContext *ctx, size_t n, int offset, int reps, uint64_t seed) {
  const float scale = 0.0883883f;  // 1/sqrt(128), not a power of two
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu%s", n, offset ? " unaligned" : "");
  float *x = host_random_bf16(n, 3.0f, seed);
  float *ref = scaled_ref(x, scale, n);
  size_t bytes = (n + (size_t)offset) * sizeof(bf16);
  bf16 *a_x = gpu_alloc(bytes), *a_out = gpu_poisoned(ctx, bytes);
  bf16 *d_x = a_x + offset, *d_out = a_out + offset;
  cuda_upload_bf16(ctx, d_x, x, n);
  scale_cuda(ctx, d_out, d_x, scale, n);
  double e = bf16_error(ctx, d_out, ref, n);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) scale_cuda(ctx, d_out, d_x, scale, n);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("scale", shape, e, 0.0, ms, 0, gbps(4.0 * n, ms));
  scale_cuda(ctx, d_x, d_x, scale, n);  // in place
  gpu_report("scale_inplace", shape, bf16_error(ctx, d_x, ref, n), 0.0, 0, 0, 0);
  free(x), free(ref);
  cuda_free(a_x), cuda_free(a_out);
}

// ---- scale_by_device_scalar_cuda ----
static void test_scale_by_scalar(CudaContext *ctx, size_t n, int reps, uint64_t seed) {
  const float factor = host_round_bf16(0.3183099f);  // what a bf16 parameter holds
  enum { PARAMS = 17, AT = 5 };                      // the scalar: element 5 of a 17-element buffer
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  float *x = host_random_bf16(n, 3.0f, seed);
  float *params = host_random_bf16(PARAMS, 1.0f, seed + 1);
  params[AT] = factor;
  float *ref = scaled_ref(x, factor, n);
  bf16 *d_params = gpu_bf16_from(ctx, params, PARAMS), *d_x = gpu_bf16_from(ctx, x, n);
  bf16 *d_out = gpu_poisoned(ctx, n * sizeof(bf16));
  scale_by_device_scalar_cuda(ctx, d_out, d_x, d_params + AT, n);
  double e = bf16_error(ctx, d_out, ref, n);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) scale_by_device_scalar_cuda(ctx, d_out, d_x, d_params + AT, n);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("scale_by_device_scalar", shape, e, 0.0, ms, 0, gbps(4.0 * n, ms));
  scale_by_device_scalar_cuda(ctx, d_x, d_x, d_params + AT, n);  // in place
  gpu_report("scale_by_device_scalar_inplace", shape, bf16_error(ctx, d_x, ref, n), 0.0, 0, 0, 0);
  free(x), free(params), free(ref);
  cuda_free(d_params), cuda_free(d_x), cuda_free(d_out);
}

// ---- per-layer inputs ----
// Element (l, n, p) of the layer-major (L, N, P) tensor is (n, l*P + p) of the flat (N, L*P) one.
static size_t flat_index(int l, int n, int p, int L, int P) { return (size_t)n * L * P + (size_t)l * P + p; }

// combine: out (L, N, P) from normed, embedded (N, L*P); split: dflat (N,
// L*P) from dple (L, N, P); both against the contract's formula.
static void test_per_layer_inputs(CudaContext *ctx, int N, int L, int P, int reps, uint64_t seed) {
  const float scale = 0.70710678f;  // Gemma 4's per_layer_input_scale, 2^-0.5
  size_t n = (size_t)N * L * P;
  char shape[64];
  snprintf(shape, sizeof shape, "N=%d L=%d P=%d", N, L, P);
  float *normed = host_random_bf16(n, 2.0f, seed), *embedded = host_random_bf16(n, 2.0f, seed + 1);
  float *dple = host_random_bf16(n, 1.0f, seed + 2);
  float *ref_out = malloc(n * sizeof(float)), *ref_dflat = malloc(n * sizeof(float));
  size_t e = 0;  // layer-major element
  for (int l = 0; l < L; l++)
    for (int r = 0; r < N; r++)
      for (int p = 0; p < P; p++, e++) {
        size_t f = flat_index(l, r, p, L, P);
        ref_out[e] = host_round_bf16((normed[f] + embedded[f]) * scale);
        ref_dflat[f] = host_round_bf16(dple[e] * scale);
      }
  bf16 *d_normed = gpu_bf16_from(ctx, normed, n), *d_embedded = gpu_bf16_from(ctx, embedded, n);
  bf16 *d_dple = gpu_bf16_from(ctx, dple, n);
  bf16 *d_out = gpu_poisoned(ctx, n * sizeof(bf16)), *d_dflat = gpu_poisoned(ctx, n * sizeof(bf16));

  per_layer_inputs_combine_cuda(ctx, d_out, d_normed, d_embedded, N, L, P, scale);
  double e_out = bf16_error(ctx, d_out, ref_out, n);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++)
    per_layer_inputs_combine_cuda(ctx, d_out, d_normed, d_embedded, N, L, P, scale);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("per_layer_inputs_combine", shape, e_out, 0.0, ms, 0, gbps(6.0 * n, ms));

  per_layer_inputs_split_cuda(ctx, d_dflat, d_dple, N, L, P, scale);
  double e_split = bf16_error(ctx, d_dflat, ref_dflat, n);
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) per_layer_inputs_split_cuda(ctx, d_dflat, d_dple, N, L, P, scale);
  ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("per_layer_inputs_split", shape, e_split, 0.0, ms, 0, gbps(4.0 * n, ms));

  free(normed), free(embedded), free(dple), free(ref_out), free(ref_dflat);
  cuda_free(d_normed), cuda_free(d_embedded), cuda_free(d_dple), cuda_free(d_out), cuda_free(d_dflat);
}

int main(void) {
  CudaContext *ctx = gpu_test_open(NAME);
  // scale: a residual stream's size, an odd n (scalar tail), unaligned
  test_scale(ctx, (size_t)4096 * 1536, 0, 20, 100);
  test_scale(ctx, 12347, 0, 5, 110);
  test_scale(ctx, 12345, 1, 5, 120);
  test_scale_by_scalar(ctx, (size_t)4096 * 1536, 20, 200);
  test_scale_by_scalar(ctx, 12347, 5, 210);
  // per-layer inputs: Gemma 4 E2B's (L 35, P 256) over 2048 rows, odd shapes
  test_per_layer_inputs(ctx, 2048, 35, 256, 20, 300);
  test_per_layer_inputs(ctx, 37, 3, 256, 5, 310);
  test_per_layer_inputs(ctx, 37, 5, 7, 5, 320);
  test_per_layer_inputs(ctx, 1, 1, 1, 5, 330);
  return gpu_test_close(ctx, NAME);
}
