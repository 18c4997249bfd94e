// tests/gpu/test_gpu_norm.c: the memory-bound CUDA ops against their CPU
// references (kernels/cpu/) on the same bf16-rounded inputs:
// - rmsnorm_forward_cuda (out, rstd) and rmsnorm_backward_cuda (dinp, and
//   dweight ACCUMULATED onto a nonzero buffer, run twice: dw0 + 2G), bitwise
//   determinism of dweight; hidden-size rows, per-head rows (q/k norm, C =
//   head_dim 256), odd C (scalar path), C < 32;
// - the same for Gemma 4's rmsnorm_forward_gain_cuda /
//   rmsnorm_backward_gain_cuda, with a weight (gain w, values around 1) and
//   without (weight and dweight NULL: the value norm, whose dinp is run twice
//   and compared bitwise instead); per-head rows at head_dim 256 and 512
//   (rows x heads), hidden rows, odd C;
// - rope_forward_cuda / rope_backward_cuda, including in place, large
//   positions (~40k, where the angle arithmetic matters), linear scaling,
//   hd 64 and 256;
// - rope_forward_partial_cuda / rope_backward_partial_cuda (Gemma 4's
//   proportional rope) out of place and in place: rot_pairs = hd/8 at hd 512
//   and 256, 0 (a copy), and hd/2, which must equal rope_*_cuda bitwise; the
//   pairs that pass through must equal the input bitwise;
// - geglu_forward_cuda / geglu_backward_cuda (both grads, and each alone with
//   the other NULL), odd n (the scalar tail), unaligned pointers;
// - residual_add_cuda (also in place), the casts (exact: 0 error expected).
// Each (op, shape) prints one GPU_RESULT line with GB/s = the bytes the op
// must move at least (each input read once, each output written once) / time.
// Tolerances: bf16 outputs GPU_TOL_BF16 (output rounding 2^-9 plus fp32
// differences); fp32 rstd 1e-4 relative (only the order of an fp32 sum
// differs from the CPU's double sum; expected ~1e-6); fp32 dweight 1e-4 of
// the tensor's max (same reason).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

#define TOL_F32_SUM 1e-4
#define RMS_EPS 1e-6f

// ---- RMSNorm ----
// The three gains of ops_cuda.h: Gemma 2/3's (1 + w), Gemma 4's w, and none
// (Gemma 4's value norm: weight and dweight NULL).
typedef enum { NORM_ONE_PLUS_W, NORM_GAIN, NORM_NO_WEIGHT } NormKind;
static const char *NORM_PREFIX[3] = {"rmsnorm", "rmsnorm_gain", "rmsnorm_noweight"};

static void norm_forward_cpu(NormKind kind, float *out, float *rstd, const float *x, const float *w, int N, int C) {
  if (kind == NORM_ONE_PLUS_W) rmsnorm_forward(out, rstd, x, w, N, C, RMS_EPS);
  else rmsnorm_forward_gain(out, rstd, x, w, N, C, RMS_EPS);
}

static void norm_backward_cpu(NormKind kind, float *dinp, float *dw, const float *dout, const float *x, const float *w,
                              const float *rstd, int N, int C) {
  if (kind == NORM_ONE_PLUS_W) rmsnorm_backward(dinp, dw, dout, x, w, rstd, N, C);
  else rmsnorm_backward_gain(dinp, dw, dout, x, w, rstd, N, C);
}

static void norm_forward_gpu(NormKind kind, CudaContext *ctx, bf16 *out, float *rstd, const bf16 *x, const bf16 *w,
                             int N, int C) {
  if (kind == NORM_ONE_PLUS_W) rmsnorm_forward_cuda(ctx, out, rstd, x, w, N, C, RMS_EPS);
  else rmsnorm_forward_gain_cuda(ctx, out, rstd, x, w, N, C, RMS_EPS);
}

static void norm_backward_gpu(NormKind kind, CudaContext *ctx, bf16 *dinp, float *dw, const bf16 *dout, const bf16 *x,
                              const bf16 *w, const float *rstd, int N, int C) {
  if (kind == NORM_ONE_PLUS_W) rmsnorm_backward_cuda(ctx, dinp, dw, dout, x, w, rstd, N, C);
  else rmsnorm_backward_gain_cuda(ctx, dinp, dw, dout, x, w, rstd, N, C);
}

// The weight (C), or NULL without one: (1 + w) around 1 for w in [-0.5,
// 0.5]; Gemma 4's gain itself in [0.5, 1.5], so that neither a missing gain
// nor a (1 + w) in its place could pass.
static float *norm_weight(NormKind kind, int C, uint64_t seed) {
  if (kind == NORM_NO_WEIGHT) return NULL;
  float *w = host_random_bf16((size_t)C, 0.5f, seed);
  if (kind == NORM_GAIN)
    for (int c = 0; c < C; c++) w[c] = host_round_bf16(1.0f + w[c]);
  return w;
}

// Backward without a weight: dinp only, twice into poisoned buffers, same bits.
static void test_rmsnorm_noweight_backward(CudaContext *ctx, const char *shape, bf16 *d_dinp, const bf16 *d_dout,
                                           const bf16 *d_x, const float *d_rstd, const float *ref_dinp, int N, int C,
                                           int reps) {
  size_t nc = (size_t)N * C;
  norm_backward_gpu(NORM_NO_WEIGHT, ctx, d_dinp, NULL, d_dout, d_x, NULL, d_rstd, N, C);
  float *dinp1 = host_from_bf16(ctx, d_dinp, nc);
  double e_dinp = max_rel_error(dinp1, ref_dinp, nc);
  cuda_fill_bytes(ctx, d_dinp, 0xFF, nc * sizeof(bf16));
  norm_backward_gpu(NORM_NO_WEIGHT, ctx, d_dinp, NULL, d_dout, d_x, NULL, d_rstd, N, C);
  float *dinp2 = host_from_bf16(ctx, d_dinp, nc);
  if (memcmp(dinp1, dinp2, nc * sizeof(float)) != 0) {
    printf("rmsnorm_noweight_backward %s: dinp differs between two runs (not deterministic)\n", shape);
    gpu_failures++;
  }
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++)
    norm_backward_gpu(NORM_NO_WEIGHT, ctx, d_dinp, NULL, d_dout, d_x, NULL, d_rstd, N, C);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("rmsnorm_noweight_backward_dinp", shape, e_dinp, GPU_TOL_BF16, ms, 0, gbps(6.0 * nc + 4.0 * N, ms));
  free(dinp1), free(dinp2);
}

// Backward with a weight (uses the GPU's own rstd), twice: dweight = dw0 + 2G,
// then once more from dw0 with dinp NULL: the same bits as the first.
// d_dw (C) holds dw0 on entry.
static void test_rmsnorm_weighted_backward(CudaContext *ctx, NormKind kind, const char *shape, bf16 *d_dinp,
                                           float *d_dw, const bf16 *d_dout, const bf16 *d_x, const bf16 *d_w,
                                           const float *d_rstd, const float *ref_dinp, const float *ref_dw,
                                           const float *dw0, int N, int C, int reps) {
  size_t nc = (size_t)N * C;
  char op[64];
  norm_backward_gpu(kind, ctx, d_dinp, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
  double e_dinp = bf16_error(ctx, d_dinp, ref_dinp, nc);
  float *dw1 = host_from_f32(ctx, d_dw, (size_t)C);
  double e_dw = max_rel_error(dw1, ref_dw, (size_t)C);
  norm_backward_gpu(kind, ctx, d_dinp, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
  float *dw2 = host_from_f32(ctx, d_dw, (size_t)C);
  float *ref_dw2 = malloc((size_t)C * sizeof(float));
  for (int c = 0; c < C; c++) ref_dw2[c] = 2.0f * ref_dw[c] - dw0[c];
  double e_dw2 = max_rel_error(dw2, ref_dw2, (size_t)C);
  cuda_upload_f32(ctx, d_dw, dw0, (size_t)C);
  norm_backward_gpu(kind, ctx, NULL, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
  float *dw3 = host_from_f32(ctx, d_dw, (size_t)C);
  if (memcmp(dw1, dw3, (size_t)C * sizeof(float)) != 0) {
    printf("%s_backward %s: dweight differs between two runs (not deterministic)\n", NORM_PREFIX[kind], shape);
    gpu_failures++;
  }
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++)
    norm_backward_gpu(kind, ctx, d_dinp, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  snprintf(op, sizeof op, "%s_backward_dinp", NORM_PREFIX[kind]);
  gpu_report(op, shape, e_dinp, GPU_TOL_BF16, ms, 0, gbps(6.0 * nc + 2.0 * C + 4.0 * N, ms));
  snprintf(op, sizeof op, "%s_backward_dweight", NORM_PREFIX[kind]);
  gpu_report(op, shape, e_dw, TOL_F32_SUM, 0, 0, 0);
  snprintf(op, sizeof op, "%s_backward_dweight_accum", NORM_PREFIX[kind]);
  gpu_report(op, shape, e_dw2, TOL_F32_SUM, 0, 0, 0);
  free(dw1), free(dw2), free(dw3), free(ref_dw2);
}

static void test_rmsnorm(CudaContext *ctx, NormKind kind, int N, int C, int reps, uint64_t seed) {
  size_t nc = (size_t)N * C;
  char shape[96], op[64];
  snprintf(shape, sizeof shape, "N=%d C=%d", N, C);
  float *x = host_random_bf16(nc, 2.0f, seed);
  float *w = norm_weight(kind, C, seed + 1);
  float *dout = host_random_bf16(nc, 1.0f, seed + 2);
  float *dw0 = host_random_bf16((size_t)C, 1.0f, seed + 3);
  float *ref_out = malloc(nc * sizeof(float)), *ref_rstd = malloc((size_t)N * sizeof(float));
  float *ref_dinp = malloc(nc * sizeof(float)), *ref_dw = malloc((size_t)C * sizeof(float));
  memcpy(ref_dw, dw0, (size_t)C * sizeof(float));
  norm_forward_cpu(kind, ref_out, ref_rstd, x, w, N, C);
  norm_backward_cpu(kind, ref_dinp, w ? ref_dw : NULL, dout, x, w, ref_rstd, N, C);

  bf16 *d_x = gpu_bf16_from(ctx, x, nc), *d_w = w ? gpu_bf16_from(ctx, w, (size_t)C) : NULL;
  bf16 *d_dout = gpu_bf16_from(ctx, dout, nc);
  bf16 *d_out = gpu_poisoned(ctx, nc * sizeof(bf16)), *d_dinp = gpu_poisoned(ctx, nc * sizeof(bf16));
  float *d_rstd = gpu_poisoned(ctx, (size_t)N * sizeof(float));
  float *d_dw = w ? gpu_alloc((size_t)C * sizeof(float)) : NULL;
  if (d_dw) cuda_upload_f32(ctx, d_dw, dw0, (size_t)C);

  norm_forward_gpu(kind, ctx, d_out, d_rstd, d_x, d_w, N, C);
  double e_out = bf16_error(ctx, d_out, ref_out, nc);
  double e_rstd = f32_error(ctx, d_rstd, ref_rstd, (size_t)N);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) norm_forward_gpu(kind, ctx, d_out, d_rstd, d_x, d_w, N, C);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  snprintf(op, sizeof op, "%s_forward", NORM_PREFIX[kind]);
  gpu_report(op, shape, e_out, GPU_TOL_BF16, ms, 0, gbps(4.0 * nc + (w ? 2.0 * C : 0.0) + 4.0 * N, ms));
  snprintf(op, sizeof op, "%s_forward_rstd", NORM_PREFIX[kind]);
  gpu_report(op, shape, e_rstd, TOL_F32_SUM, 0, 0, 0);
  // the forward without rstd must give the same output
  cuda_fill_bytes(ctx, d_out, 0xFF, nc * sizeof(bf16));
  norm_forward_gpu(kind, ctx, d_out, NULL, d_x, d_w, N, C);
  snprintf(op, sizeof op, "%s_forward_no_rstd", NORM_PREFIX[kind]);
  gpu_report(op, shape, bf16_error(ctx, d_out, ref_out, nc), GPU_TOL_BF16, 0, 0, 0);

  if (kind == NORM_NO_WEIGHT)
    test_rmsnorm_noweight_backward(ctx, shape, d_dinp, d_dout, d_x, d_rstd, ref_dinp, N, C, reps);
  else
    test_rmsnorm_weighted_backward(ctx, kind, shape, d_dinp, d_dw, d_dout, d_x, d_w, d_rstd, ref_dinp, ref_dw, dw0, N,
                                   C, reps);

  free(x), free(w), free(dout), free(dw0), free(ref_out), free(ref_rstd), free(ref_dinp), free(ref_dw);
  cuda_free(d_x), cuda_free(d_w), cuda_free(d_dout), cuda_free(d_out), cuda_free(d_dinp), cuda_free(d_rstd);
  cuda_free(d_dw);
}

// ---- RoPE ----
// B sequences of T positions starting at `start` (plus `stride` * t).
static void test_rope(CudaContext *ctx, int B, int T, int nh, int hd, float theta, float position_scale, int start,
                      int stride, int reps, uint64_t seed) {
  int N = B * T;
  size_t n = (size_t)N * nh * hd;
  char shape[160];
  snprintf(shape, sizeof shape, "N=%d nh=%d hd=%d theta=%g scale=%g pos=%d+%d*t", N, nh, hd, theta, position_scale,
           start, stride);
  float *x = host_random_bf16(n, 1.0f, seed);
  int *pos = malloc((size_t)N * sizeof(int));
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) pos[b * T + t] = start + stride * t;
  float *ref_f = malloc(n * sizeof(float)), *ref_b = malloc(n * sizeof(float));
  rope_forward(ref_f, x, pos, N, nh, hd, theta, position_scale);
  rope_backward(ref_b, x, pos, N, nh, hd, theta, position_scale);

  int *d_pos = gpu_alloc((size_t)N * sizeof(int));
  cuda_upload_i32(ctx, d_pos, pos, (size_t)N);
  bf16 *d_x = gpu_bf16_from(ctx, x, n);
  bf16 *d_out = gpu_poisoned(ctx, n * sizeof(bf16));
  rope_forward_cuda(ctx, d_out, d_x, d_pos, N, nh, hd, theta, position_scale);
  double e_f = bf16_error(ctx, d_out, ref_f, n);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) rope_forward_cuda(ctx, d_out, d_x, d_pos, N, nh, hd, theta, position_scale);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("rope_forward", shape, e_f, GPU_TOL_BF16, ms, 0, gbps(4.0 * n + 4.0 * N, ms));

  cuda_fill_bytes(ctx, d_out, 0xFF, n * sizeof(bf16));
  rope_backward_cuda(ctx, d_out, d_x, d_pos, N, nh, hd, theta, position_scale);
  gpu_report("rope_backward", shape, bf16_error(ctx, d_out, ref_b, n), GPU_TOL_BF16, 0, 0, 0);

  // in place: forward then backward on the same buffer
  bf16 *d_y = gpu_bf16_from(ctx, x, n);
  rope_forward_cuda(ctx, d_y, d_y, d_pos, N, nh, hd, theta, position_scale);
  gpu_report("rope_forward_inplace", shape, bf16_error(ctx, d_y, ref_f, n), GPU_TOL_BF16, 0, 0, 0);
  cuda_upload_bf16(ctx, d_y, x, n);
  rope_backward_cuda(ctx, d_y, d_y, d_pos, N, nh, hd, theta, position_scale);
  gpu_report("rope_backward_inplace", shape, bf16_error(ctx, d_y, ref_b, n), GPU_TOL_BF16, 0, 0, 0);

  free(x), free(pos), free(ref_f), free(ref_b);
  cuda_free(d_pos), cuda_free(d_x), cuda_free(d_out), cuda_free(d_y);
}

// ---- partial RoPE ----
// Elements of the pairs i >= rot_pairs of every head (N * nh heads of hd)
// whose bits differ between got and x (both bf16 values as fp32).
static size_t passthrough_differ(const float *got, const float *x, size_t heads, int hd, int rot_pairs) {
  size_t differ = 0;
  int half = hd / 2;
  for (size_t h = 0; h < heads; h++)
    for (int i = rot_pairs; i < half; i++)
      for (int k = 0; k < 2; k++) {
        size_t e = h * hd + i + (size_t)k * half;
        differ += memcmp(&got[e], &x[e], sizeof(float)) != 0;
      }
  return differ;
}

// bf16 elements of two device tensors (n) whose bits differ.
static size_t bf16_differ(CudaContext *ctx, const bf16 *a, const bf16 *b, size_t n) {
  float *ha = host_from_bf16(ctx, a, n), *hb = host_from_bf16(ctx, b, n);
  size_t differ = 0;
  for (size_t i = 0; i < n; i++) differ += memcmp(&ha[i], &hb[i], sizeof(float)) != 0;
  free(ha), free(hb);
  return differ;
}

// rot_pairs = hd/2 is the full rotation: the same bits as rope_*_cuda.
// d_x (n) input, d_part_f / d_part_b the partial forward / backward of it.
static void rope_partial_vs_full(CudaContext *ctx, const char *shape, const bf16 *d_x, const bf16 *d_part_f,
                                 const bf16 *d_part_b, const int *d_pos, int N, int nh, int hd, float theta,
                                 float position_scale) {
  size_t n = (size_t)N * nh * hd;
  bf16 *d_full = gpu_poisoned(ctx, n * sizeof(bf16));
  rope_forward_cuda(ctx, d_full, d_x, d_pos, N, nh, hd, theta, position_scale);
  gpu_report("rope_partial_forward_vs_full_differ", shape, (double)bf16_differ(ctx, d_full, d_part_f, n), 0.0, 0, 0, 0);
  cuda_fill_bytes(ctx, d_full, 0xFF, n * sizeof(bf16));
  rope_backward_cuda(ctx, d_full, d_x, d_pos, N, nh, hd, theta, position_scale);
  gpu_report("rope_partial_backward_vs_full_differ", shape, (double)bf16_differ(ctx, d_full, d_part_b, n), 0.0, 0, 0,
             0);
  cuda_free(d_full);
}

// As test_rope, for rope_forward_partial_cuda / rope_backward_partial_cuda.
static void test_rope_partial(CudaContext *ctx, int N, int nh, int hd, float theta, int rot_pairs, int start,
                              int stride, int reps, uint64_t seed) {
  size_t n = (size_t)N * nh * hd;
  float scale = 1.0f;
  char shape[160];
  snprintf(shape, sizeof shape, "N=%d nh=%d hd=%d rot=%d theta=%g pos=%d+%d*t", N, nh, hd, rot_pairs, theta, start,
           stride);
  float *x = host_random_bf16(n, 1.0f, seed);
  int *pos = malloc((size_t)N * sizeof(int));
  for (int t = 0; t < N; t++) pos[t] = start + stride * t;
  float *ref_f = malloc(n * sizeof(float)), *ref_b = malloc(n * sizeof(float));
  rope_forward_partial(ref_f, x, pos, N, nh, hd, theta, scale, rot_pairs);
  rope_backward_partial(ref_b, x, pos, N, nh, hd, theta, scale, rot_pairs);

  int *d_pos = gpu_alloc((size_t)N * sizeof(int));
  cuda_upload_i32(ctx, d_pos, pos, (size_t)N);
  bf16 *d_x = gpu_bf16_from(ctx, x, n);
  bf16 *d_f = gpu_poisoned(ctx, n * sizeof(bf16)), *d_b = gpu_poisoned(ctx, n * sizeof(bf16));
  rope_forward_partial_cuda(ctx, d_f, d_x, d_pos, N, nh, hd, theta, scale, rot_pairs);
  rope_backward_partial_cuda(ctx, d_b, d_x, d_pos, N, nh, hd, theta, scale, rot_pairs);
  float *got_f = host_from_bf16(ctx, d_f, n), *got_b = host_from_bf16(ctx, d_b, n);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++)
    rope_forward_partial_cuda(ctx, d_f, d_x, d_pos, N, nh, hd, theta, scale, rot_pairs);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("rope_partial_forward", shape, max_rel_error(got_f, ref_f, n), GPU_TOL_BF16, ms, 0,
             gbps(4.0 * n + 4.0 * N, ms));
  gpu_report("rope_partial_backward", shape, max_rel_error(got_b, ref_b, n), GPU_TOL_BF16, 0, 0, 0);
  size_t differ = passthrough_differ(got_f, x, (size_t)N * nh, hd, rot_pairs) +
                  passthrough_differ(got_b, x, (size_t)N * nh, hd, rot_pairs);
  gpu_report("rope_partial_passthrough_differ", shape, (double)differ, 0.0, 0, 0, 0);
  if (rot_pairs == hd / 2) rope_partial_vs_full(ctx, shape, d_x, d_f, d_b, d_pos, N, nh, hd, theta, scale);

  // in place: forward, then backward, each on a fresh copy of x
  bf16 *d_y = gpu_bf16_from(ctx, x, n);
  rope_forward_partial_cuda(ctx, d_y, d_y, d_pos, N, nh, hd, theta, scale, rot_pairs);
  gpu_report("rope_partial_forward_inplace", shape, bf16_error(ctx, d_y, ref_f, n), GPU_TOL_BF16, 0, 0, 0);
  cuda_upload_bf16(ctx, d_y, x, n);
  rope_backward_partial_cuda(ctx, d_y, d_y, d_pos, N, nh, hd, theta, scale, rot_pairs);
  gpu_report("rope_partial_backward_inplace", shape, bf16_error(ctx, d_y, ref_b, n), GPU_TOL_BF16, 0, 0, 0);

  free(x), free(pos), free(ref_f), free(ref_b), free(got_f), free(got_b);
  cuda_free(d_pos), cuda_free(d_x), cuda_free(d_f), cuda_free(d_b), cuda_free(d_y);
}

// ---- GeGLU ----
// `offset` elements into each allocation (1: unaligned, the scalar path).
static void test_geglu(CudaContext *ctx, size_t n, int offset, int reps, uint64_t seed) {
  char shape[96];
  snprintf(shape, sizeof shape, "n=%zu%s", n, offset ? " unaligned" : "");
  float *gate = host_random_bf16(n, 4.0f, seed);  // covers tanh's curved part and its tails
  float *up = host_random_bf16(n, 1.0f, seed + 1);
  float *dout = host_random_bf16(n, 1.0f, seed + 2);
  float *ref = malloc(n * sizeof(float)), *ref_dg = malloc(n * sizeof(float)), *ref_du = malloc(n * sizeof(float));
  geglu_forward(ref, gate, up, n);
  geglu_backward(ref_dg, ref_du, dout, gate, up, n);

  size_t bytes = (n + (size_t)offset) * sizeof(bf16);
  bf16 *a_gate = gpu_alloc(bytes), *a_up = gpu_alloc(bytes), *a_dout = gpu_alloc(bytes);
  bf16 *a_out = gpu_alloc(bytes), *a_dg = gpu_alloc(bytes), *a_du = gpu_alloc(bytes);
  bf16 *d_gate = a_gate + offset, *d_up = a_up + offset, *d_dout = a_dout + offset;
  bf16 *d_out = a_out + offset, *d_dg = a_dg + offset, *d_du = a_du + offset;
  cuda_upload_bf16(ctx, d_gate, gate, n);
  cuda_upload_bf16(ctx, d_up, up, n);
  cuda_upload_bf16(ctx, d_dout, dout, n);
  cuda_fill_bytes(ctx, a_out, 0xFF, bytes);
  cuda_fill_bytes(ctx, a_dg, 0xFF, bytes);
  cuda_fill_bytes(ctx, a_du, 0xFF, bytes);

  geglu_forward_cuda(ctx, d_out, d_gate, d_up, n);
  double e = bf16_error(ctx, d_out, ref, n);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) geglu_forward_cuda(ctx, d_out, d_gate, d_up, n);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("geglu_forward", shape, e, GPU_TOL_BF16, ms, 0, gbps(6.0 * n, ms));

  geglu_backward_cuda(ctx, d_dg, d_du, d_dout, d_gate, d_up, n);
  double e_dg = bf16_error(ctx, d_dg, ref_dg, n), e_du = bf16_error(ctx, d_du, ref_du, n);
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) geglu_backward_cuda(ctx, d_dg, d_du, d_dout, d_gate, d_up, n);
  ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("geglu_backward_dgate", shape, e_dg, GPU_TOL_BF16, ms, 0, gbps(10.0 * n, ms));
  gpu_report("geglu_backward_dup", shape, e_du, GPU_TOL_BF16, 0, 0, 0);
  // each gradient alone (the other NULL)
  cuda_fill_bytes(ctx, a_dg, 0xFF, bytes);
  geglu_backward_cuda(ctx, d_dg, NULL, d_dout, d_gate, d_up, n);
  gpu_report("geglu_backward_dgate_only", shape, bf16_error(ctx, d_dg, ref_dg, n), GPU_TOL_BF16, 0, 0, 0);
  cuda_fill_bytes(ctx, a_du, 0xFF, bytes);
  geglu_backward_cuda(ctx, NULL, d_du, d_dout, d_gate, d_up, n);
  gpu_report("geglu_backward_dup_only", shape, bf16_error(ctx, d_du, ref_du, n), GPU_TOL_BF16, 0, 0, 0);

  free(gate), free(up), free(dout), free(ref), free(ref_dg), free(ref_du);
  cuda_free(a_gate), cuda_free(a_up), cuda_free(a_dout), cuda_free(a_out), cuda_free(a_dg), cuda_free(a_du);
}

// ---- residual add and casts ----
static void test_residual_and_casts(CudaContext *ctx, size_t n, int reps, uint64_t seed) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  float *a = host_random_bf16(n, 1.0f, seed), *b = host_random_bf16(n, 1.0f, seed + 1);
  float *ref = malloc(n * sizeof(float));
  residual_add(ref, a, b, n);
  bf16 *d_a = gpu_bf16_from(ctx, a, n), *d_b = gpu_bf16_from(ctx, b, n);
  bf16 *d_out = gpu_poisoned(ctx, n * sizeof(bf16));
  residual_add_cuda(ctx, d_out, d_a, d_b, n);
  double e = bf16_error(ctx, d_out, ref, n);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) residual_add_cuda(ctx, d_out, d_a, d_b, n);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("residual_add", shape, e, GPU_TOL_BF16, ms, 0, gbps(6.0 * n, ms));
  residual_add_cuda(ctx, d_a, d_a, d_b, n);  // in place, out == a
  gpu_report("residual_add_inplace", shape, bf16_error(ctx, d_a, ref, n), GPU_TOL_BF16, 0, 0, 0);

  // casts: fp32 values NOT on the bf16 grid, so the rounding is exercised;
  // the reference is host_round_bf16 (nearest even), the error must be 0
  float *f = malloc(n * sizeof(float)), *rounded = malloc(n * sizeof(float));
  Rng rng;
  rng_seed(&rng, seed + 2);
  rng_fill_uniform(&rng, f, (long)n, -3.0f, 3.0f);
  for (size_t i = 0; i < n; i++) rounded[i] = host_round_bf16(f[i]);
  float *d_f = gpu_alloc(n * sizeof(float));
  cuda_upload_f32(ctx, d_f, f, n);
  bf16 *d_h = gpu_poisoned(ctx, n * sizeof(bf16));
  cast_f32_to_bf16_cuda(ctx, d_h, d_f, n);
  double e_cast = bf16_error(ctx, d_h, rounded, n);
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) cast_f32_to_bf16_cuda(ctx, d_h, d_f, n);
  ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("cast_f32_to_bf16", shape, e_cast, 0.0, ms, 0, gbps(6.0 * n, ms));
  float *d_back = gpu_poisoned(ctx, n * sizeof(float));
  cast_bf16_to_f32_cuda(ctx, d_back, d_h, n);
  double e_back = f32_error(ctx, d_back, rounded, n);
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) cast_bf16_to_f32_cuda(ctx, d_back, d_h, n);
  ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("cast_bf16_to_f32", shape, e_back, 0.0, ms, 0, gbps(6.0 * n, ms));

  free(a), free(b), free(ref), free(f), free(rounded);
  cuda_free(d_a), cuda_free(d_b), cuda_free(d_out), cuda_free(d_f), cuda_free(d_h), cuda_free(d_back);
}

int main(void) {
  CudaContext *ctx = gpu_test_open("test_gpu_norm");
  // RMSNorm: hidden rows (Gemma 270M / 1B / 4B), per-head q/k norm rows,
  // a C that is not a multiple of 8 (scalar path), C < 32, one row
  test_rmsnorm(ctx, NORM_ONE_PLUS_W, 4096, 2560, 20, 100);
  test_rmsnorm(ctx, NORM_ONE_PLUS_W, 1000, 1152, 20, 110);
  test_rmsnorm(ctx, NORM_ONE_PLUS_W, 7, 640, 20, 120);
  test_rmsnorm(ctx, NORM_ONE_PLUS_W, 4096 * 8, 256, 20, 130);
  test_rmsnorm(ctx, NORM_ONE_PLUS_W, 33, 100, 5, 140);
  test_rmsnorm(ctx, NORM_ONE_PLUS_W, 5, 13, 5, 150);
  test_rmsnorm(ctx, NORM_ONE_PLUS_W, 1, 640, 5, 160);
  // Gemma 4's norms: hidden rows (E2B's 1536), q/k norm rows of the sliding
  // (head_dim 256, 8 heads) and full (512, 2 heads) layers; the value norm
  // (no weight) on kv-head rows at 256 and 512; an odd C, C < 32
  test_rmsnorm(ctx, NORM_GAIN, 2048, 1536, 20, 170);
  test_rmsnorm(ctx, NORM_GAIN, 2048 * 8, 256, 20, 171);
  test_rmsnorm(ctx, NORM_GAIN, 1024 * 2, 512, 20, 172);
  test_rmsnorm(ctx, NORM_GAIN, 33, 100, 5, 173);
  test_rmsnorm(ctx, NORM_GAIN, 5, 13, 5, 174);
  test_rmsnorm(ctx, NORM_NO_WEIGHT, 2048 * 2, 256, 20, 180);
  test_rmsnorm(ctx, NORM_NO_WEIGHT, 1024 * 1, 512, 20, 181);
  test_rmsnorm(ctx, NORM_NO_WEIGHT, 33, 100, 5, 182);
  test_rmsnorm(ctx, NORM_NO_WEIGHT, 5, 13, 5, 183);
  // RoPE: a training batch on global/sliding thetas, large positions with
  // linear scaling, a small head dim and an odd row count
  test_rope(ctx, 4, 1024, 8, 256, 1e6f, 1.0f, 0, 1, 20, 200);
  test_rope(ctx, 2, 512, 4, 256, 1e4f, 1.0f, 0, 1, 20, 210);
  test_rope(ctx, 1, 64, 8, 256, 1e6f, 8.0f, 40000, 37, 5, 220);
  test_rope(ctx, 1, 64, 4, 256, 1e4f, 1.0f, 40000, 37, 5, 230);
  test_rope(ctx, 3, 37, 3, 64, 1e4f, 1.0f, 5, 1, 5, 240);
  // partial RoPE (Gemma 4's full-attention layers rotate hd/8 pairs of 512,
  // theta 1e6): a batch, large positions, hd 256, none, and all (= full rope)
  test_rope_partial(ctx, 1024, 8, 512, 1e6f, 64, 0, 1, 20, 250);
  test_rope_partial(ctx, 64, 2, 512, 1e6f, 64, 40000, 37, 5, 260);
  test_rope_partial(ctx, 129, 4, 256, 1e6f, 32, 3, 1, 5, 270);
  test_rope_partial(ctx, 33, 2, 512, 1e6f, 0, 0, 1, 5, 280);
  test_rope_partial(ctx, 65, 4, 512, 1e6f, 256, 100, 3, 5, 290);
  test_rope_partial(ctx, 65, 4, 256, 1e4f, 128, 40000, 37, 5, 295);
  // GeGLU: a 4B MLP's activations, an odd n (scalar tail), unaligned
  test_geglu(ctx, (size_t)4096 * 10240, 0, 20, 300);
  test_geglu(ctx, (size_t)1000 * 6912 + 3, 0, 20, 310);
  test_geglu(ctx, 12345, 1, 5, 320);
  // residual add and casts: a 4B residual stream, an odd n
  test_residual_and_casts(ctx, (size_t)4096 * 2560, 20, 400);
  test_residual_and_casts(ctx, 12347, 5, 410);
  return gpu_test_close(ctx, "test_gpu_norm");
}
