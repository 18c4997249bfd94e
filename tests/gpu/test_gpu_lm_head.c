// tests/gpu/test_gpu_lm_head.c: the fused LM head on the GPU
// (kernels/cuda/lm_head.cu) against kernels/cpu/lm_head.c on the same
// bf16-rounded hidden states and embedding. For each (shape, softcap):
// - forward logprobs (N) and lse (N), poisoned first; rows whose target is
//   -1 or V must give exactly 0 and 0;
// - backward dhidden (N, C), poisoned first (rows without a target exactly
//   0), and dwte (V, C) ACCUMULATED onto a nonzero initial buffer; the
//   softmax part of dwte (vocabulary rows that are no row's target, where
//   the gradient is small next to the target rows') is checked on its own
//   as (dwte - dwte0) so that the large entries do not hide it;
// - determinism: a second forward and a second backward give the same bits;
// - timing: TFLOP/s of the forward (2 N C V) and the backward (6 N C V: the
//   logits recomputed, dhidden, dwte).
// Shapes: N=5 C=64 V=1000 (tiny), N=300 C=640 V=32000 (Gemma-270M-like
// width) also with FIMI_LM_HEAD_ROWS=37 (eight full chunks and a ragged one),
// N=200 C=640 V=262144 (the Gemma 3 270M head: the default 170-row chunk
// then a ragged 30-row one; C=640 rather than 4B's 2560 keeps the host side,
// four (V, C) fp32 buffers and the CPU reference, to a few seconds), and
// N=7 C=67 V=1001 with FIMI_LM_HEAD_ROWS=3 (odd everything: the chunks'
// hidden and dhidden pointers are only 2-byte aligned, as the GEMM's
// alignment-keyed plans must handle). Softcap 30 (Gemma 2's final softcap)
// and 0.
// Inputs: hidden uniform in [-1, 1], wte uniform in [-s, s] with s = 15 /
// sqrt(C), so logits have a standard deviation near 5 and the largest reach
// 20-25, where a cap of 30 bends them.
// Tolerances:
// - logprobs and lse: both sides compute the same fp32 logits from the same
//   bf16 values (exact products, fp32 sums; only the order of the C-term sum
//   differs, ~1e-5 absolute at C = 2560), then fp32 tanh/exp/log. So an
//   ABSOLUTE bound on log-probabilities (the unit a loss sees) of 2e-3, far
//   above the expected ~1e-4 and far below a real mistake (dropping one
//   token of probability 1e-3 from a row's sum moves its lse by 1e-3).
// - dhidden (bf16 out) and dwte: the GPU rounds dlogits to bf16 (2^-9
//   relative) before the two GEMMs: GPU_TOL_BF16 of the tensor's max.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

#define TOL_LOGPROB_ABS 2e-3

typedef struct LmHeadCase {
  int N, C, V;
  int chunk_rows;  // FIMI_LM_HEAD_ROWS for this case, 0: the default
  int reps;        // timed launches
} LmHeadCase;

static double max_abs_error(const float *got, const float *ref, size_t n) {
  double e = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(got[i]) && isfinite(ref[i])) return INFINITY;
    double d = fabs((double)got[i] - (double)ref[i]);
    if (d > e) e = d;
  }
  return e;
}

// max |(got - start) - (ref - start)| / max |ref - start| over the rows v
// (C wide) with is_target[v] == 0: the softmax part of the dwte gradient.
static double softmax_part_error(const float *got, const float *ref, const float *start, const unsigned char *is_target,
                                 int V, int C) {
  double max_diff = 0.0, max_ref = 0.0;
  for (int v = 0; v < V; v++) {
    if (is_target[v]) continue;
    for (size_t i = (size_t)v * C; i < (size_t)(v + 1) * C; i++) {
      if (!isfinite(got[i])) return INFINITY;
      double g = (double)got[i] - start[i], r = (double)ref[i] - start[i];
      if (fabs(g - r) > max_diff) max_diff = fabs(g - r);
      if (fabs(r) > max_ref) max_ref = fabs(r);
    }
  }
  return max_diff / (max_ref > 1e-30 ? max_ref : 1e-30);
}

static void run_case(CudaContext *ctx, const LmHeadCase *lc, uint64_t seed) {
  int N = lc->N, C = lc->C, V = lc->V;
  char what[96];
  snprintf(what, sizeof what, "lm_head N=%d C=%d V=%d", N, C, V);
  if (gpu_test_skip_large(what, 2.0 * N * C * V)) return;
  size_t n_h = (size_t)N * C, n_w = (size_t)V * C;
  float w_scale = 15.0f / sqrtf((float)C);
  float *hidden = host_random_bf16(n_h, 1.0f, seed);
  float *wte = host_random_bf16(n_w, w_scale, seed + 1);
  float *dlogprobs = host_random_bf16((size_t)N, 1.0f, seed + 2);
  // nonzero initial dwte, of the size of the target rows' gradient (~1):
  // cheaper than a second random stream over V*C elements
  float *dwte0 = malloc(n_w * sizeof(float));
  for (size_t i = 0; i < n_w; i++) dwte0[i] = wte[n_w - 1 - i] * (0.5f / w_scale);
  int *targets = malloc((size_t)N * sizeof(int));
  Rng rng;
  rng_seed(&rng, seed + 3);
  for (int n = 0; n < N; n++) targets[n] = (int)(rng_next_u64(&rng) % (uint64_t)V);
  targets[1] = -1;  // no target: logprob 0, no gradient
  targets[3] = V;   // out of range: the same
  unsigned char *is_target = calloc((size_t)V, 1);
  for (int n = 0; n < N; n++)
    if (targets[n] >= 0 && targets[n] < V) is_target[targets[n]] = 1;

  bf16 *d_hidden = gpu_bf16_from(ctx, hidden, n_h);
  bf16 *d_wte = gpu_bf16_from(ctx, wte, n_w);
  int *d_targets = gpu_alloc((size_t)N * sizeof(int));
  cuda_upload_i32(ctx, d_targets, targets, (size_t)N);
  float *d_dlogprobs = gpu_alloc((size_t)N * sizeof(float));
  cuda_upload_f32(ctx, d_dlogprobs, dlogprobs, (size_t)N);
  float *d_logprobs = gpu_poisoned(ctx, (size_t)N * sizeof(float));
  float *d_lse = gpu_poisoned(ctx, (size_t)N * sizeof(float));
  bf16 *d_dhidden = gpu_poisoned(ctx, n_h * sizeof(bf16));
  float *d_dwte = gpu_alloc(n_w * sizeof(float));

  float *ref_lp = malloc((size_t)N * sizeof(float));
  float *ref_lse = malloc((size_t)N * sizeof(float));
  float *ref_dh = malloc(n_h * sizeof(float));
  float *ref_dw = malloc(n_w * sizeof(float));
  float *got_dw = malloc(n_w * sizeof(float));
  const float softcaps[2] = {30.0f, 0.0f};
  char rows_env[32];
  snprintf(rows_env, sizeof rows_env, "%d", lc->chunk_rows);
  if (lc->chunk_rows > 0)
    setenv("FIMI_LM_HEAD_ROWS", rows_env, 1);
  else
    unsetenv("FIMI_LM_HEAD_ROWS");

  for (int s = 0; s < 2; s++) {
    float cap = softcaps[s];
    char shape[128];
    snprintf(shape, sizeof shape, "N=%d C=%d V=%d cap=%g%s%s", N, C, V, cap, lc->chunk_rows ? " rows=" : "",
             lc->chunk_rows ? rows_env : "");
    // CPU reference (fp32 on the same bf16 values)
    memcpy(ref_dw, dwte0, n_w * sizeof(float));
    lm_head_logprob_forward(ref_lp, ref_lse, hidden, wte, targets, N, C, V, cap);
    lm_head_logprob_backward(ref_dh, ref_dw, dlogprobs, hidden, wte, targets, ref_lse, N, C, V, cap);

    // forward
    cuda_fill_bytes(ctx, d_logprobs, 0xFF, (size_t)N * sizeof(float));
    cuda_fill_bytes(ctx, d_lse, 0xFF, (size_t)N * sizeof(float));
    lm_head_logprob_forward_cuda(ctx, d_logprobs, d_lse, d_hidden, d_wte, d_targets, N, C, V, cap);
    float *got_lp = host_from_f32(ctx, d_logprobs, (size_t)N);
    float *got_lse = host_from_f32(ctx, d_lse, (size_t)N);
    double e_lp = max_abs_error(got_lp, ref_lp, (size_t)N);
    double e_lse = max_abs_error(got_lse, ref_lse, (size_t)N);
    int masked_ok = got_lp[1] == 0.0f && got_lse[1] == 0.0f && got_lp[3] == 0.0f && got_lse[3] == 0.0f;
    if (!masked_ok) {
      printf("lm_head %s: rows without a target give logprob %g %g, lse %g %g (want 0)\n", shape, got_lp[1],
             got_lp[3], got_lse[1], got_lse[3]);
      gpu_failures++;
    }
    lm_head_logprob_forward_cuda(ctx, d_logprobs, d_lse, d_hidden, d_wte, d_targets, N, C, V, cap);
    float *again = host_from_f32(ctx, d_logprobs, (size_t)N);
    if (memcmp(again, got_lp, (size_t)N * sizeof(float)) != 0) {
      printf("lm_head %s: forward not deterministic\n", shape);
      gpu_failures++;
    }
    free(again);
    GpuTimer t;
    gpu_timer_start(&t, ctx);
    for (int r = 0; r < GPU_TEST_REPS(lc->reps); r++)
      lm_head_logprob_forward_cuda(ctx, d_logprobs, d_lse, d_hidden, d_wte, d_targets, N, C, V, cap);
    double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(lc->reps));
    double flop = 2.0 * N * (double)C * V;
    gpu_report("lm_head_fwd logprob", shape, e_lp, TOL_LOGPROB_ABS, ms, flop / (ms * 1e9), 0.0);
    gpu_report("lm_head_fwd lse", shape, e_lse, TOL_LOGPROB_ABS, ms, 0.0, 0.0);

    // backward, from the GPU's own lse (as training uses it)
    cuda_upload_f32(ctx, d_lse, got_lse, (size_t)N);
    cuda_fill_bytes(ctx, d_dhidden, 0xFF, n_h * sizeof(bf16));
    cuda_upload_f32(ctx, d_dwte, dwte0, n_w);
    lm_head_logprob_backward_cuda(ctx, d_dhidden, d_dwte, d_dlogprobs, d_hidden, d_wte, d_targets, d_lse, N, C, V,
                                  cap);
    float *got_dh = host_from_bf16(ctx, d_dhidden, n_h);
    cuda_download_f32(ctx, got_dw, d_dwte, n_w);
    double e_dh = max_rel_error(got_dh, ref_dh, n_h);
    double e_dw = max_rel_error(got_dw, ref_dw, n_w);
    double e_dw_soft = softmax_part_error(got_dw, ref_dw, dwte0, is_target, V, C);
    for (int c = 0; c < C; c++)
      if (got_dh[(size_t)1 * C + c] != 0.0f || got_dh[(size_t)3 * C + c] != 0.0f) {
        printf("lm_head %s: dhidden of a row without a target is not 0\n", shape);
        gpu_failures++;
        break;
      }
    lm_head_logprob_backward_cuda(ctx, d_dhidden, d_dwte, d_dlogprobs, d_hidden, d_wte, d_targets, d_lse, N, C, V,
                                  cap);
    float *dh_again = host_from_bf16(ctx, d_dhidden, n_h);
    if (memcmp(dh_again, got_dh, n_h * sizeof(float)) != 0) {
      printf("lm_head %s: backward not deterministic\n", shape);
      gpu_failures++;
    }
    free(dh_again);
    gpu_timer_start(&t, ctx);
    for (int r = 0; r < GPU_TEST_REPS(lc->reps); r++)
      lm_head_logprob_backward_cuda(ctx, d_dhidden, d_dwte, d_dlogprobs, d_hidden, d_wte, d_targets, d_lse, N, C,
                                    V, cap);
    ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(lc->reps));
    gpu_report("lm_head_bwd dhidden", shape, e_dh, GPU_TOL_BF16, ms, 3.0 * flop / (ms * 1e9), 0.0);
    gpu_report("lm_head_bwd dwte", shape, e_dw, GPU_TOL_BF16, ms, 0.0, 0.0);
    gpu_report("lm_head_bwd dwte softmax part", shape, e_dw_soft, GPU_TOL_BF16, ms, 0.0, 0.0);

    // fused forward + backward (SFT): bitwise the separate ops' results
    cuda_fill_bytes(ctx, d_logprobs, 0xFF, (size_t)N * sizeof(float));
    cuda_fill_bytes(ctx, d_lse, 0xFF, (size_t)N * sizeof(float));
    cuda_fill_bytes(ctx, d_dhidden, 0xFF, n_h * sizeof(bf16));
    cuda_upload_f32(ctx, d_dwte, dwte0, n_w);
    lm_head_logprob_forward_backward_cuda(ctx, d_logprobs, d_lse, d_dhidden, d_dwte, d_dlogprobs, d_hidden, d_wte,
                                          d_targets, N, C, V, cap);
    float *fused_lp = host_from_f32(ctx, d_logprobs, (size_t)N), *fused_lse = host_from_f32(ctx, d_lse, (size_t)N);
    float *fused_dh = host_from_bf16(ctx, d_dhidden, n_h), *fused_dw = host_from_f32(ctx, d_dwte, n_w);
    int same = memcmp(fused_lp, got_lp, (size_t)N * sizeof(float)) == 0 &&
               memcmp(fused_lse, got_lse, (size_t)N * sizeof(float)) == 0 &&
               memcmp(fused_dh, got_dh, n_h * sizeof(float)) == 0 && memcmp(fused_dw, got_dw, n_w * sizeof(float)) == 0;
    if (!same) printf("lm_head %s: fused forward+backward differs from forward then backward\n", shape);
    gpu_timer_start(&t, ctx);
    for (int r = 0; r < GPU_TEST_REPS(lc->reps); r++)
      lm_head_logprob_forward_backward_cuda(ctx, d_logprobs, d_lse, d_dhidden, d_dwte, d_dlogprobs, d_hidden, d_wte,
                                            d_targets, N, C, V, cap);
    ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(lc->reps));
    // error column: 0 when bitwise equal to the separate ops, else 1 (limit 0)
    gpu_report("lm_head_fused_fwdbwd", shape, same ? 0.0 : 1.0, 0.0, ms, 3.0 * flop / (ms * 1e9), 0.0);
    free(fused_lp), free(fused_lse), free(fused_dh), free(fused_dw);
    free(got_lp);
    free(got_lse);
    free(got_dh);
  }
  unsetenv("FIMI_LM_HEAD_ROWS");

  cuda_free(d_hidden);
  cuda_free(d_wte);
  cuda_free(d_targets);
  cuda_free(d_dlogprobs);
  cuda_free(d_logprobs);
  cuda_free(d_lse);
  cuda_free(d_dhidden);
  cuda_free(d_dwte);
  free(hidden);
  free(wte);
  free(dlogprobs);
  free(dwte0);
  free(targets);
  free(is_target);
  free(ref_lp);
  free(ref_lse);
  free(ref_dh);
  free(ref_dw);
  free(got_dw);
}

// lm_head_logits_cuda: full capped logits of a few rows against lm_head_logits.
// Same fp32 logits on both sides (see the header): 1e-4 of the row scale.
static void run_logits_case(CudaContext *ctx, int N, int C, int V, float cap, uint64_t seed) {
  char what[96];
  snprintf(what, sizeof what, "lm_head_logits N=%d C=%d V=%d", N, C, V);
  if (gpu_test_skip_large(what, 2.0 * N * C * V)) return;
  size_t n_h = (size_t)N * C, n_w = (size_t)V * C, n_out = (size_t)N * V;
  float *hidden = host_random_bf16(n_h, 1.0f, seed);
  float *wte = host_random_bf16(n_w, 15.0f / sqrtf((float)C), seed + 1);
  float *ref = malloc(n_out * sizeof(float));
  lm_head_logits(ref, hidden, wte, N, C, V, cap);
  bf16 *d_hidden = gpu_bf16_from(ctx, hidden, n_h);
  bf16 *d_wte = gpu_bf16_from(ctx, wte, n_w);
  float *d_logits = gpu_poisoned(ctx, n_out * sizeof(float));
  lm_head_logits_cuda(ctx, d_logits, d_hidden, d_wte, N, C, V, cap);
  float *got = host_from_f32(ctx, d_logits, n_out);
  double e = max_rel_error(got, ref, n_out);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(5); r++) lm_head_logits_cuda(ctx, d_logits, d_hidden, d_wte, N, C, V, cap);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(5));
  char shape[128];
  snprintf(shape, sizeof shape, "N=%d C=%d V=%d cap=%g", N, C, V, cap);
  gpu_report("lm_head_logits", shape, e, 1e-4, ms, 2.0 * N * (double)C * V / (ms * 1e9), 0.0);
  cuda_free(d_hidden);
  cuda_free(d_wte);
  cuda_free(d_logits);
  free(hidden);
  free(wte);
  free(ref);
  free(got);
}

int main(void) {
  CudaContext *ctx = gpu_test_open("test_gpu_lm_head");
  // N = 0 is a no-op (no pointer is touched)
  lm_head_logprob_forward_cuda(ctx, NULL, NULL, NULL, NULL, NULL, 0, 64, 1000, 30.0f);
  lm_head_logprob_backward_cuda(ctx, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 64, 1000, 30.0f);
  const LmHeadCase cases[] = {
      {5, 64, 1000, 0, 10},
      {300, 640, 32000, 0, 10},
      {300, 640, 32000, 37, 3},
      {200, 640, 262144, 0, 3},
      {7, 67, 1001, 3, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, &cases[i], 1000 + 10 * i);
  run_logits_case(ctx, 3, 640, 32000, 30.0f, 77);
  run_logits_case(ctx, 4, 1152, 262144, 0.0f, 78);
  return gpu_test_close(ctx, "test_gpu_lm_head");
}
