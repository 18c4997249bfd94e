// tests/gpu/test_gpu_matmul.c: matmul_forward_cuda and matmul_backward_cuda
// (kernels/cuda/matmul.cu, cuBLASLt) against kernels/cpu/matmul.c on the same
// bf16-rounded inputs. For each shape:
// - forward out (N, OC), poisoned first;
// - backward dinp (N, C), poisoned first, and dweight (OC, C) ACCUMULATED
//   onto a nonzero initial buffer, then a second backward that must add the
//   same amount again (dw0 + 2G);
// - bitwise determinism: a second forward gives the same bits;
// - timing: TFLOP/s of the forward (2 N C OC) and the backward (4 N C OC).
// Shapes: odd N (7), awkward everything (5 x 33 x 17, which may have no
// cuBLASLt algorithm and then exercises the fallback kernel), a pointer only
// 16-byte aligned (the LM head passes pointers into the middle of buffers),
// Gemma 270M-like (C 640, OC 2048) and a Gemma 4B MLP (4096 x 2560 -> 10240).
// Tolerances: out and dinp are bf16 (2^-9 relative rounding of the output
// after an fp32 sum of exact bf16 products): GPU_TOL_BF16. dweight stays fp32,
// so only the summation order differs from OpenBLAS: 1e-4 of the tensor's
// max (measured errors are expected around 1e-6).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

#define TOL_F32_SUM 1e-4

typedef struct MatmulCase {
  int N, C, OC;
  int offset;  // elements by which inp/dout start after their allocation (alignment test)
  int reps;    // timed launches
} MatmulCase;

static double download_error_bf16(CudaContext *ctx, const bf16 *d, const float *ref, size_t n) {
  float *h = host_from_bf16(ctx, d, n);
  double e = max_rel_error(h, ref, n);
  free(h);
  return e;
}

static void run_case(CudaContext *ctx, const MatmulCase *mc, uint64_t seed) {
  int N = mc->N, C = mc->C, OC = mc->OC, off = mc->offset;
  size_t n_inp = (size_t)N * C, n_w = (size_t)OC * C, n_out = (size_t)N * OC;
  char shape[128];
  snprintf(shape, sizeof shape, "N=%d C=%d OC=%d%s", N, C, OC, off ? " offset" : "");
  if (gpu_test_skip_large(shape, 2.0 * N * C * OC)) return;
  float *inp = host_random_bf16(n_inp, 1.0f, seed);
  float *weight = host_random_bf16(n_w, 0.5f, seed + 1);
  float *dout = host_random_bf16(n_out, 1.0f, seed + 2);
  float *dw0 = host_random_bf16(n_w, 1.0f, seed + 3);  // nonzero initial dweight

  // device buffers; inp and dout start `off` elements into their allocation
  bf16 *d_inp_alloc = gpu_alloc((n_inp + (size_t)off) * sizeof(bf16));
  bf16 *d_dout_alloc = gpu_alloc((n_out + (size_t)off) * sizeof(bf16));
  bf16 *d_inp = d_inp_alloc + off, *d_dout = d_dout_alloc + off;
  cuda_upload_bf16(ctx, d_inp, inp, n_inp);
  cuda_upload_bf16(ctx, d_dout, dout, n_out);
  bf16 *d_weight = gpu_bf16_from(ctx, weight, n_w);
  bf16 *d_out = gpu_poisoned(ctx, n_out * sizeof(bf16));
  bf16 *d_dinp = gpu_poisoned(ctx, n_inp * sizeof(bf16));
  float *d_dweight = gpu_alloc(n_w * sizeof(float));
  cuda_upload_f32(ctx, d_dweight, dw0, n_w);

  // CPU reference (fp32 on the same bf16 values)
  float *ref_out = malloc(n_out * sizeof(float));
  float *ref_dinp = malloc(n_inp * sizeof(float));
  float *ref_dw = malloc(n_w * sizeof(float));
  memcpy(ref_dw, dw0, n_w * sizeof(float));
  matmul_forward(ref_out, inp, weight, N, C, OC);
  matmul_backward(ref_dinp, ref_dw, dout, inp, weight, N, C, OC);

  // forward: error, determinism, timing
  matmul_forward_cuda(ctx, d_out, d_inp, d_weight, N, C, OC);
  float *got_out = host_from_bf16(ctx, d_out, n_out);
  double e_out = max_rel_error(got_out, ref_out, n_out);
  matmul_forward_cuda(ctx, d_out, d_inp, d_weight, N, C, OC);
  float *again = host_from_bf16(ctx, d_out, n_out);
  int same = memcmp(got_out, again, n_out * sizeof(float)) == 0;
  free(again);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(mc->reps); r++) matmul_forward_cuda(ctx, d_out, d_inp, d_weight, N, C, OC);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(mc->reps));
  double flops = 2.0 * N * C * OC;
  gpu_report("matmul_forward", shape, e_out, GPU_TOL_BF16, ms, flops / (ms * 1e-3) / 1e12, 0);
  if (!same) {
    printf("matmul_forward %s: two runs differ (not deterministic)\n", shape);
    gpu_failures++;
  }

  // backward once: dinp overwritten, dweight = dw0 + G
  matmul_backward_cuda(ctx, d_dinp, d_dweight, d_dout, d_inp, d_weight, N, C, OC);
  double e_dinp = download_error_bf16(ctx, d_dinp, ref_dinp, n_inp);
  float *got_dw = host_from_f32(ctx, d_dweight, n_w);
  double e_dw = max_rel_error(got_dw, ref_dw, n_w);
  // backward again: dweight = dw0 + 2G (accumulation); dinp is overwritten to the same
  matmul_backward_cuda(ctx, d_dinp, d_dweight, d_dout, d_inp, d_weight, N, C, OC);
  float *got_dw2 = host_from_f32(ctx, d_dweight, n_w);
  float *ref_dw2 = malloc(n_w * sizeof(float));
  for (size_t i = 0; i < n_w; i++) ref_dw2[i] = 2.0f * ref_dw[i] - dw0[i];
  double e_dw2 = max_rel_error(got_dw2, ref_dw2, n_w);
  double e_dinp2 = download_error_bf16(ctx, d_dinp, ref_dinp, n_inp);

  // timing: the whole backward, dinp and dweight (4 N C OC flops); dweight keeps
  // accumulating here, harmless after the checks above
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(mc->reps); r++) matmul_backward_cuda(ctx, d_dinp, d_dweight, d_dout, d_inp, d_weight, N, C, OC);
  double ms_bwd = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(mc->reps));
  gpu_report("matmul_backward_dinp", shape, e_dinp > e_dinp2 ? e_dinp : e_dinp2, GPU_TOL_BF16, ms_bwd,
             4.0 * N * C * OC / (ms_bwd * 1e-3) / 1e12, 0);
  gpu_report("matmul_backward_dweight", shape, e_dw, TOL_F32_SUM, 0, 0, 0);
  gpu_report("matmul_backward_dweight_accum", shape, e_dw2, TOL_F32_SUM, 0, 0, 0);

  // backward with NULL gradients must not touch anything
  matmul_backward_cuda(ctx, NULL, NULL, d_dout, d_inp, d_weight, N, C, OC);

  free(inp);
  free(weight);
  free(dout);
  free(dw0);
  free(ref_out);
  free(ref_dinp);
  free(ref_dw);
  free(ref_dw2);
  free(got_out);
  free(got_dw);
  free(got_dw2);
  cuda_free(d_inp_alloc);
  cuda_free(d_dout_alloc);
  cuda_free(d_weight);
  cuda_free(d_out);
  cuda_free(d_dinp);
  cuda_free(d_dweight);
}

int main(void) {
  CudaContext *ctx = gpu_test_open("test_gpu_matmul");
  const MatmulCase cases[] = {
      {7, 640, 2048, 0, 20},       // odd N (decode-sized)
      {5, 33, 17, 0, 5},           // odd everything: maybe no cuBLASLt algorithm
      {7, 640, 2048, 8, 5},        // inputs only 16-byte aligned
      {256, 640, 2048, 0, 20},     // Gemma 270M-like projection
      {1000, 1152, 6912, 0, 10},   // Gemma 1B MLP, N not a tile multiple
      {4096, 2560, 10240, 0, 10},  // Gemma 4B MLP
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, &cases[i], 1000 + 10 * i);
  return gpu_test_close(ctx, "test_gpu_matmul");
}
