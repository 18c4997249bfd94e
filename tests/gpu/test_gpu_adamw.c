// tests/gpu/test_gpu_adamw.c: the optimizer ops on the GPU
// (kernels/cuda/adamw.cu) against kernels/cpu/adamw.c.
// - adamw_update_cuda vs adamw_update over 5 steps (weight decay 0.1,
//   grad_scale 0.7, one step at grad_scale 1), n odd (1000003: the float4
//   kernel plus a scalar tail), param/m/v compared after every step, the
//   state poisoned nowhere (it is updated in place) but the bf16 copy
//   poisoned before every step. Tolerance 1e-6 of each tensor's max: the GPU
//   rounds every fp32 operation as kernels/cpu/adamw.c writes it (explicit
//   __fmul_rn/__fadd_rn/__fdiv_rn/__fsqrt_rn, IEEE-exact), so the only
//   difference is where GCC contracts a product and a sum into an FMA on the
//   CPU (-O3 -march=native): one ulp (6e-8 relative) in an intermediate, a
//   few ulps after 5 steps.
// - the bf16 working copy: every element is one of the two bf16 neighbours of
//   its fp32 master (the value itself when exactly representable);
// - FIMI_CUDA_SIMPLE=1 (scalar kernel) gives bitwise the same state and copy;
// - stochastic rounding is unbiased: 2^20 copies of x = 1 + 2^-10 (and of
//   -(1 + 3 * 2^-10)) with lr 0 (the master stays x); their mean must be
//   within 4 sigma of x, sigma = gap * sqrt(p (1 - p) / n). (4, not 3: the
//   seed is fixed, so the check is deterministic and a 3-sigma bound would
//   be a 0.3% chance of a permanently failing correct kernel.)
// - pieces: a buffer updated in pieces with index0 = each piece's start
//   (misaligned starts, so the float4 kernel, the scalar tail and the scalar
//   kernel all meet piece borders) gives bitwise the state and bf16 copy of
//   the whole update, and round_bf16_stochastic_cuda in pieces the copy that
//   update wrote (what ZeRO-3 shards rely on); a piece with index0 = 0 does
//   not (the test could fail);
// - accumulate_f64_cuda and cast_f64_to_f32_cuda against the host loop
//   (exact: one double add per element, one rounding).
// - sum_squares_cuda vs a long double host sum (relative 1e-12: each square
//   is exact in double, only the summation order differs), n in {0, 1, 5,
//   1000003}, and a second call gives the same bits;
// - throughput at n = 2^28 (Gemma 3 4B's fp32 shard on one GPU is ~2^32):
//   adamw bytes = 30 n (param, m, v read and written, grad read, bf16
//   written), sum_squares bytes = 4 n.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

#define TOL_ADAMW 1e-6
#define TOL_SUMSQ 1e-12

static uint32_t float_bits(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}

static float bits_float(uint32_t b) {
  float x;
  memcpy(&x, &b, 4);
  return x;
}

// Number of elements of copy (n, bf16 values as fp32) that are not one of the
// two bf16 neighbours of master (n): truncation towards zero, or one bf16 step
// further from zero.
static size_t count_not_neighbours(const float *copy, const float *master, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t lower = float_bits(master[i]) & 0xffff0000u;
    float down = bits_float(lower), up = bits_float(lower + 0x10000u);
    if (!(copy[i] == down || copy[i] == up)) bad++;
  }
  return bad;
}

static float *host_uniform(size_t n, float low, float high, uint64_t seed) {
  float *x = malloc(n * sizeof *x);
  Rng rng;
  rng_seed(&rng, seed);
  rng_fill_uniform(&rng, x, (long)n, low, high);
  for (size_t i = 0; i < n; i++)
    if (x[i] == 0.0f) x[i] = high * 0.5f;  // never zero
  return x;
}

static double download_rel_error(CudaContext *ctx, const float *d, const float *ref, size_t n) {
  float *h = host_from_f32(ctx, d, n);
  double e = max_rel_error(h, ref, n);
  free(h);
  return e;
}

static int same_device_bits(CudaContext *ctx, const void *a, const void *b, size_t bytes) {
  float *ha = malloc(bytes), *hb = malloc(bytes);
  cuda_download_f32(ctx, ha, a, bytes / 4);
  cuda_download_f32(ctx, hb, b, bytes / 4);
  int same = memcmp(ha, hb, bytes) == 0;
  free(ha);
  free(hb);
  return same;
}

static void test_update_vs_cpu(CudaContext *ctx) {
  const size_t n = 1000003;
  const int steps = 5;
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu steps=%d", n, steps);
  float *param = host_random_bf16(n, 1.0f, 11);  // masters start from bf16 weights, as after loading a checkpoint
  float *m = host_uniform(n, -1e-2f, 1e-2f, 12);
  float *v = host_uniform(n, 1e-6f, 1e-4f, 13);
  float *d_param = gpu_alloc(n * sizeof(float)), *d_m = gpu_alloc(n * sizeof(float));
  float *d_v = gpu_alloc(n * sizeof(float)), *d_grad = gpu_alloc(n * sizeof(float));
  // the same state through the scalar kernel (FIMI_CUDA_SIMPLE=1)
  float *s_param = gpu_alloc(n * sizeof(float)), *s_m = gpu_alloc(n * sizeof(float));
  float *s_v = gpu_alloc(n * sizeof(float));
  bf16 *d_copy = gpu_alloc(n * sizeof(bf16)), *s_copy = gpu_alloc(n * sizeof(bf16));
  cuda_upload_f32(ctx, d_param, param, n);
  cuda_upload_f32(ctx, d_m, m, n);
  cuda_upload_f32(ctx, d_v, v, n);
  cuda_upload_f32(ctx, s_param, param, n);
  cuda_upload_f32(ctx, s_m, m, n);
  cuda_upload_f32(ctx, s_v, v, n);
  double worst = 0.0;
  size_t not_neighbours = 0;
  int simple_same = 1;
  double ms_total = 0.0;
  for (int t = 1; t <= steps; t++) {
    float *grad = host_uniform(n, -1.0f, 1.0f, 100 + t);
    AdamWStep step = {.lr = 1e-3 * t, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .step = t,
                      .grad_scale = t == 3 ? 1.0f : 0.7f};
    uint64_t seed = 0x5eed0000u + (uint64_t)t;
    cuda_upload_f32(ctx, d_grad, grad, n);
    cuda_fill_bytes(ctx, d_copy, 0xFF, n * sizeof(bf16));
    cuda_fill_bytes(ctx, s_copy, 0xFF, n * sizeof(bf16));
    adamw_update(param, m, v, grad, n, &step);
    GpuTimer timer;
    gpu_timer_start(&timer, ctx);
    adamw_update_cuda(ctx, d_param, d_m, d_v, d_grad, d_copy, n, &step, seed, 0);
    ms_total += gpu_timer_stop_ms(&timer, ctx, 1);
    setenv("FIMI_CUDA_SIMPLE", "1", 1);
    adamw_update_cuda(ctx, s_param, s_m, s_v, d_grad, s_copy, n, &step, seed, 0);
    unsetenv("FIMI_CUDA_SIMPLE");
    double e_p = download_rel_error(ctx, d_param, param, n);
    double e_m = download_rel_error(ctx, d_m, m, n);
    double e_v = download_rel_error(ctx, d_v, v, n);
    double e = e_p > e_m ? e_p : e_m;
    if (e_v > e) e = e_v;
    if (e > worst) worst = e;
    if (e > TOL_ADAMW) printf("adamw step %d: param %.3e m %.3e v %.3e\n", t, e_p, e_m, e_v);
    float *master = host_from_f32(ctx, d_param, n);
    float *copy = host_from_bf16(ctx, d_copy, n);
    not_neighbours += count_not_neighbours(copy, master, n);
    free(master);
    free(copy);
    simple_same = simple_same && same_device_bits(ctx, d_param, s_param, n * sizeof(float)) &&
                  same_device_bits(ctx, d_m, s_m, n * sizeof(float)) &&
                  same_device_bits(ctx, d_v, s_v, n * sizeof(float)) &&
                  same_device_bits(ctx, d_copy, s_copy, (n - 1) * sizeof(bf16));  // whole floats: n - 1 is even
    free(grad);
  }
  double ms = ms_total / steps;
  gpu_report("adamw_update vs cpu", shape, worst, TOL_ADAMW, ms, 0.0, 30.0 * n / (ms * 1e6));
  if (not_neighbours) {
    printf("adamw: %zu bf16 copies are not a neighbour of their fp32 master\n", not_neighbours);
    gpu_failures++;
  }
  if (!simple_same) {
    printf("adamw: FIMI_CUDA_SIMPLE=1 (scalar kernel) differs from the float4 kernel\n");
    gpu_failures++;
  }
  cuda_free(d_param);
  cuda_free(d_m);
  cuda_free(d_v);
  cuda_free(d_grad);
  cuda_free(s_param);
  cuda_free(s_m);
  cuda_free(s_v);
  cuda_free(d_copy);
  cuda_free(s_copy);
  free(param);
  free(m);
  free(v);
}

// Stochastic rounding of n copies of x (lr 0: the master stays x): the mean of
// the bf16 copies is x within 4 sigma.
static void test_stochastic_rounding(CudaContext *ctx, float x) {
  const size_t n = (size_t)1 << 20;
  float *host = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) host[i] = x;
  float *d_param = gpu_alloc(n * sizeof(float)), *d_grad = gpu_alloc(n * sizeof(float));
  float *d_m = gpu_alloc(n * sizeof(float)), *d_v = gpu_alloc(n * sizeof(float));
  bf16 *d_copy = gpu_poisoned(ctx, n * sizeof(bf16));
  cuda_upload_f32(ctx, d_param, host, n);
  cuda_upload_f32(ctx, d_grad, host, n);
  cuda_fill_bytes(ctx, d_m, 0, n * sizeof(float));
  cuda_fill_bytes(ctx, d_v, 0, n * sizeof(float));
  AdamWStep step = {.lr = 0.0, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0, .step = 1,
                    .grad_scale = 1.0f};
  adamw_update_cuda(ctx, d_param, d_m, d_v, d_grad, d_copy, n, &step, 12345, 0);
  float *master = host_from_f32(ctx, d_param, n);
  float *copy = host_from_bf16(ctx, d_copy, n);
  size_t changed = 0;
  for (size_t i = 0; i < n; i++) changed += master[i] != x;
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) sum += copy[i];
  double mean = sum / (double)n;
  uint32_t lower = float_bits(x) & 0xffff0000u;
  double down = bits_float(lower), up = bits_float(lower + 0x10000u);
  double gap = fabs(up - down), p = fabs((double)x - down) / gap;
  double sigma = gap * sqrt(p * (1.0 - p) / (double)n);
  double z = fabs(mean - (double)x) / sigma;
  char shape[64];
  snprintf(shape, sizeof shape, "x=%.10g n=%zu", x, n);
  // error column: the deviation of the mean in sigmas, bound 4
  gpu_report("adamw stochastic rounding mean", shape, z, 4.0, 0.0, 0.0, 0.0);
  size_t bad = count_not_neighbours(copy, master, n);
  if (changed || bad) {
    printf("stochastic rounding x=%g: master changed in %zu elements, %zu copies not neighbours\n", x, changed, bad);
    gpu_failures++;
  }
  cuda_free(d_param);
  cuda_free(d_grad);
  cuda_free(d_m);
  cuda_free(d_v);
  cuda_free(d_copy);
  free(host);
  free(master);
  free(copy);
}

// The update of n elements at once vs in pieces [cut[k], cut[k+1]) with
// index0 = cut[k]: the same bits everywhere (state and copy), and the
// rounding alone in pieces equals the copy. With index0 = 0 for every piece
// the copies must differ (the check can fail).
static void test_pieces(CudaContext *ctx) {
  const size_t n = 10007;
  const size_t cut[] = {0, 3, 1001, 1002, 6000, 10007};
  const int pieces = (int)(sizeof cut / sizeof cut[0]) - 1;
  float *param = host_uniform(n, -1.0f, 1.0f, 41), *grad = host_uniform(n, -1.0f, 1.0f, 42);
  float *w_param = gpu_alloc(n * sizeof(float)), *w_m = gpu_alloc(n * sizeof(float));
  float *w_v = gpu_alloc(n * sizeof(float)), *d_grad = gpu_alloc(n * sizeof(float));
  float *p_param = gpu_alloc(n * sizeof(float)), *p_m = gpu_alloc(n * sizeof(float));
  float *p_v = gpu_alloc(n * sizeof(float));
  bf16 *w_copy = gpu_poisoned(ctx, n * sizeof(bf16)), *p_copy = gpu_poisoned(ctx, n * sizeof(bf16));
  bf16 *r_copy = gpu_poisoned(ctx, n * sizeof(bf16)), *z_copy = gpu_poisoned(ctx, n * sizeof(bf16));
  float *params[2] = {w_param, p_param}, *ms[2] = {w_m, p_m}, *vs[2] = {w_v, p_v};
  for (int k = 0; k < 2; k++) {
    cuda_upload_f32(ctx, params[k], param, n);
    cuda_fill_bytes(ctx, ms[k], 0, n * sizeof(float));
    cuda_fill_bytes(ctx, vs[k], 0, n * sizeof(float));
  }
  cuda_upload_f32(ctx, d_grad, grad, n);
  AdamWStep step = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .step = 1,
                    .grad_scale = 1.0f};
  const uint64_t seed = 777;
  adamw_update_cuda(ctx, w_param, w_m, w_v, d_grad, w_copy, n, &step, seed, 0);
  for (int k = 0; k < pieces; k++) {
    size_t o = cut[k], c = cut[k + 1] - cut[k];
    adamw_update_cuda(ctx, p_param + o, p_m + o, p_v + o, d_grad + o, p_copy + o, c, &step, seed, o);
    round_bf16_stochastic_cuda(ctx, r_copy + o, w_param + o, c, seed, o);
    round_bf16_stochastic_cuda(ctx, z_copy + o, w_param + o, c, seed, 0);
  }
  int same = same_device_bits(ctx, w_param, p_param, n * sizeof(float)) &&
             same_device_bits(ctx, w_m, p_m, n * sizeof(float)) && same_device_bits(ctx, w_v, p_v, n * sizeof(float)) &&
             same_device_bits(ctx, w_copy, p_copy, (n - 1) * sizeof(bf16)) &&
             same_device_bits(ctx, w_copy, r_copy, (n - 1) * sizeof(bf16));
  int zero_differs = !same_device_bits(ctx, w_copy, z_copy, (n - 1) * sizeof(bf16));
  gpu_report("adamw in pieces == whole (index0)", "n=10007, 5 pieces", same ? 0.0 : 1.0, 0.5, 0.0, 0.0, 0.0);
  if (!zero_differs) {
    printf("adamw pieces: rounding every piece from index 0 gave the same copy (the check cannot fail)\n");
    gpu_failures++;
  }
  cuda_free(w_param);
  cuda_free(w_m);
  cuda_free(w_v);
  cuda_free(d_grad);
  cuda_free(p_param);
  cuda_free(p_m);
  cuda_free(p_v);
  cuda_free(w_copy);
  cuda_free(p_copy);
  cuda_free(r_copy);
  cuda_free(z_copy);
  free(param);
  free(grad);
}

// acc (n) double += x (n), then out = (float)acc: the host loop, bitwise.
static void test_accumulate_f64(CudaContext *ctx) {
  const size_t n = 4099;
  float *x = host_uniform(n, -3.0f, 3.0f, 43), *y = host_uniform(n, -1e-4f, 1e-4f, 44);
  double *acc = malloc(n * sizeof(double));
  float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    acc[i] = (double)x[i] + (double)y[i];
    want[i] = (float)acc[i];
  }
  double *d_acc = gpu_alloc(n * sizeof(double));
  float *d_x = gpu_alloc(n * sizeof(float)), *d_y = gpu_alloc(n * sizeof(float));
  float *d_out = gpu_poisoned(ctx, n * sizeof(float));
  cuda_fill_bytes(ctx, d_acc, 0, n * sizeof(double));
  cuda_upload_f32(ctx, d_x, x, n);
  cuda_upload_f32(ctx, d_y, y, n);
  accumulate_f64_cuda(ctx, d_acc, d_x, n);
  accumulate_f64_cuda(ctx, d_acc, d_y, n);
  cast_f64_to_f32_cuda(ctx, d_out, d_acc, n);
  cuda_download_f32(ctx, got, d_out, n);
  double *got_acc = malloc(n * sizeof(double));
  cuda_download_f32(ctx, (float *)got_acc, (const float *)d_acc, 2 * n);
  int same = memcmp(got, want, n * sizeof(float)) == 0 && memcmp(got_acc, acc, n * sizeof(double)) == 0;
  gpu_report("accumulate_f64 + cast_f64_to_f32 vs host", "n=4099", same ? 0.0 : 1.0, 0.5, 0.0, 0.0, 0.0);
  cuda_free(d_acc);
  cuda_free(d_x);
  cuda_free(d_y);
  cuda_free(d_out);
  free(x);
  free(y);
  free(acc);
  free(want);
  free(got);
  free(got_acc);
}

static void test_sum_squares(CudaContext *ctx, size_t n) {
  float *x = host_uniform(n ? n : 1, -2.0f, 2.0f, 7 + n);
  // the reference in long double (x86: 64-bit mantissa), so that its own
  // rounding (~n * 2^-64) stays far below the bound
  long double acc = 0.0L;
  for (size_t i = 0; i < n; i++) acc += (long double)x[i] * (long double)x[i];
  double ref = (double)acc;
  float *d_x = gpu_alloc((n ? n : 1) * sizeof(float));
  cuda_upload_f32(ctx, d_x, x, n);
  double *d_out = gpu_poisoned(ctx, 2 * sizeof(double));
  sum_squares_cuda(ctx, d_out, d_x, n);
  sum_squares_cuda(ctx, d_out + 1, d_x, n);
  double got[2];
  cuda_download_f32(ctx, (float *)got, (const float *)d_out, 4);
  double e = fabs(got[0] - ref) / (ref > 0.0 ? ref : 1.0);
  if (!isfinite(got[0])) e = INFINITY;
  if (memcmp(&got[0], &got[1], sizeof(double)) != 0) {
    printf("sum_squares n=%zu: two calls differ (%.17g, %.17g)\n", n, got[0], got[1]);
    gpu_failures++;
  }
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  gpu_report("sum_squares vs host double", shape, e, TOL_SUMSQ, 0.0, 0.0, 0.0);
  cuda_free(d_x);
  cuda_free(d_out);
  free(x);
}

// Throughput at n = 2^28 on constant buffers (bytes 0x3C: every float is
// 0.01148...), checked against the CPU update of one element.
static void test_throughput(CudaContext *ctx) {
  const size_t n = (size_t)1 << 28;
  const int reps = 5;
  float *d_param = gpu_alloc(n * sizeof(float)), *d_m = gpu_alloc(n * sizeof(float));
  float *d_v = gpu_alloc(n * sizeof(float)), *d_grad = gpu_alloc(n * sizeof(float));
  bf16 *d_copy = gpu_poisoned(ctx, n * sizeof(bf16));
  cuda_fill_bytes(ctx, d_param, 0x3C, n * sizeof(float));
  cuda_fill_bytes(ctx, d_m, 0x3C, n * sizeof(float));
  cuda_fill_bytes(ctx, d_v, 0x3C, n * sizeof(float));
  cuda_fill_bytes(ctx, d_grad, 0x3C, n * sizeof(float));
  AdamWStep step = {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.01, .step = 10,
                    .grad_scale = 0.5f};
  float one = bits_float(0x3C3C3C3Cu);
  float p = one, m = one, v = one;
  adamw_update_cuda(ctx, d_param, d_m, d_v, d_grad, d_copy, n, &step, 1, 0);  // warm-up
  adamw_update(&p, &m, &v, &one, 1, &step);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) adamw_update_cuda(ctx, d_param, d_m, d_v, d_grad, d_copy, n, &step, 2 + r, 0);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) adamw_update(&p, &m, &v, &one, 1, &step);
  // a sample of the result: the first, a middle and the last 4096 elements
  const size_t k = 4096;
  size_t starts[3] = {0, n / 2 - 3, n - k};
  float *ref = malloc(k * sizeof(float));
  for (size_t i = 0; i < k; i++) ref[i] = p;
  double e = 0.0;
  for (int s = 0; s < 3; s++) {
    double es = download_rel_error(ctx, d_param + starts[s], ref, k);
    if (es > e) e = es;
  }
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  gpu_report("adamw_update throughput", shape, e, TOL_ADAMW, ms, 0.0, 30.0 * (double)n / (ms * 1e6));

  double *d_out = gpu_poisoned(ctx, sizeof(double));
  sum_squares_cuda(ctx, d_out, d_grad, n);  // warm-up
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) sum_squares_cuda(ctx, d_out, d_grad, n);
  ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  double got;
  cuda_download_f32(ctx, (float *)&got, (const float *)d_out, 2);
  double want = (double)n * (double)one * (double)one;
  gpu_report("sum_squares throughput", shape, fabs(got - want) / want, TOL_SUMSQ, ms, 0.0,
             4.0 * (double)n / (ms * 1e6));
  cuda_free(d_out);
  cuda_free(d_param);
  cuda_free(d_m);
  cuda_free(d_v);
  cuda_free(d_grad);
  cuda_free(d_copy);
  free(ref);
}

int main(void) {
  CudaContext *ctx = gpu_test_open("test_gpu_adamw");
  (void)gpu_bf16_from;  // gpu_test.h helpers this test does not need
  // test_update_vs_cpu compares the two AdamW kernels itself, setting
  // FIMI_CUDA_SIMPLE for the scalar one: start from the default
  unsetenv("FIMI_CUDA_SIMPLE");
  test_update_vs_cpu(ctx);
  test_stochastic_rounding(ctx, 1.0f + 0x1p-10f);
  test_stochastic_rounding(ctx, -(1.0f + 3.0f * 0x1p-10f));
  test_pieces(ctx);
  test_accumulate_f64(ctx);
  const size_t sizes[] = {0, 1, 5, 1000003};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) test_sum_squares(ctx, sizes[i]);
  test_throughput(ctx);
  return gpu_test_close(ctx, "test_gpu_adamw");
}
