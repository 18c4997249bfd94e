// tests/gpu/test_gpu_embedding.c: embedding_forward_cuda and
// embedding_backward_cuda (kernels/cuda/embedding.cu) against
// kernels/cpu/embedding.c on the same bf16-rounded values:
// - forward: scaled row gather, a zero row for token -1 (output poisoned first);
// - backward: dwte ACCUMULATED onto a nonzero buffer, then a second backward
//   (dw0 + 2G); repeated tokens (many rows per token), token -1, padding_idx
//   (its row must stay bitwise as it was), the last token V - 1; bitwise
//   determinism of two runs from the same start;
// - shapes: Gemma 3's V = 262144 with C = 640, C = 2560, tiny odd cases, a
//   C that is not a multiple of 8 (scalar forward path).
// Tolerances: the forward is one fp32 product rounded to bf16: GPU_TOL_BF16.
// The backward adds the rows of each token in the CPU's order, in fp32, so
// only FMA contraction can differ: 1e-5 of the tensor's max for one pass,
// 1e-4 for the two-pass check (its reference 2 * ref - dw0 rounds differently
// from adding the rows again).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

#define TOL_EMB_BWD 1e-5
#define TOL_EMB_ACCUM 1e-4

// A cheap nonzero pattern on the bf16 grid for V x C tables (random numbers
// for 168M elements would take seconds on the host).
static float *host_pattern_bf16(size_t n, float scale, uint32_t salt) {
  float *x = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (salt * 0x9E3779B9u);
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    float u = ((float)(h & 0xffffu) - 32767.5f) / 32768.0f;  // in (-1, 1), never 0
    x[i] = host_round_bf16(u * scale);
  }
  return x;
}

// tokens: a mix of repeats in [lo_repeat, lo_repeat + repeat_range), uniform
// ids in [0, V), -1 and padding_idx, plus V - 1 once
static int *make_tokens(int N, int V, int padding_idx, int repeat_range, uint64_t seed) {
  int *t = malloc((size_t)N * sizeof(int));
  Rng rng;
  rng_seed(&rng, seed);
  for (int n = 0; n < N; n++) {
    uint64_t r = rng_next_u64(&rng);
    int kind = (int)(r % 10);
    int id = (int)((r >> 8) % (uint64_t)V);
    if (kind == 0)
      t[n] = -1;
    else if (kind == 1 && padding_idx >= 0)
      t[n] = padding_idx;
    else if (kind < 6)
      t[n] = (int)((r >> 8) % (uint64_t)(repeat_range < V ? repeat_range : V));
    else
      t[n] = id;
  }
  if (N > 2) t[N / 2] = V - 1;
  return t;
}

static void test_embedding(CudaContext *ctx, int N, int C, int V, int padding_idx, int repeat_range, int reps,
                           uint64_t seed) {
  size_t nc = (size_t)N * C, vc = (size_t)V * C;
  char shape[128];
  snprintf(shape, sizeof shape, "N=%d C=%d V=%d pad=%d", N, C, V, padding_idx);
  float scale = host_round_bf16(sqrtf((float)C));  // as the caller passes it on CUDA
  int *tokens = make_tokens(N, V, padding_idx, repeat_range, seed);
  float *wte = host_pattern_bf16(vc, 0.5f, (uint32_t)seed);
  float *dout = host_random_bf16(nc, 1.0f, seed + 1);
  float *dw0 = host_pattern_bf16(vc, 1.0f, (uint32_t)seed + 7);

  float *ref_out = malloc(nc * sizeof(float));
  embedding_forward(ref_out, tokens, wte, N, C, scale);
  float *ref_dw = malloc(vc * sizeof(float));
  memcpy(ref_dw, dw0, vc * sizeof(float));
  embedding_backward(ref_dw, dout, tokens, N, C, scale, padding_idx);

  int *d_tokens = gpu_alloc((size_t)N * sizeof(int));
  cuda_upload_i32(ctx, d_tokens, tokens, (size_t)N);
  bf16 *d_wte = gpu_bf16_from(ctx, wte, vc), *d_dout = gpu_bf16_from(ctx, dout, nc);
  bf16 *d_out = gpu_poisoned(ctx, nc * sizeof(bf16));
  float *d_dw = gpu_alloc(vc * sizeof(float));

  // forward
  embedding_forward_cuda(ctx, d_out, d_tokens, d_wte, N, C, scale);
  float *got = host_from_bf16(ctx, d_out, nc);
  double e_f = max_rel_error(got, ref_out, nc);
  GpuTimer t;
  gpu_timer_start(&t, ctx);
  for (int r = 0; r < GPU_TEST_REPS(reps); r++) embedding_forward_cuda(ctx, d_out, d_tokens, d_wte, N, C, scale);
  double ms = gpu_timer_stop_ms(&t, ctx, GPU_TEST_REPS(reps));
  gpu_report("embedding_forward", shape, e_f, GPU_TOL_BF16, ms, 0, 4.0 * nc / (ms * 1e-3) / 1e9);

  // backward from dw0, twice (accumulation), then once more from dw0 (determinism)
  cuda_upload_f32(ctx, d_dw, dw0, vc);
  gpu_timer_start(&t, ctx);
  embedding_backward_cuda(ctx, d_dw, d_dout, d_tokens, N, C, V, scale, padding_idx);
  double ms_b = gpu_timer_stop_ms(&t, ctx, 1);  // includes the host-side grouping and its syncs
  float *dw1 = host_from_f32(ctx, d_dw, vc);
  double e_b = max_rel_error(dw1, ref_dw, vc);
  embedding_backward_cuda(ctx, d_dw, d_dout, d_tokens, N, C, V, scale, padding_idx);
  float *dw2 = host_from_f32(ctx, d_dw, vc);
  for (size_t i = 0; i < vc; i++) ref_dw[i] = 2.0f * ref_dw[i] - dw0[i];  // now the two-pass reference
  double e_b2 = max_rel_error(dw2, ref_dw, vc);
  cuda_upload_f32(ctx, d_dw, dw0, vc);
  embedding_backward_cuda(ctx, d_dw, d_dout, d_tokens, N, C, V, scale, padding_idx);
  float *dw3 = host_from_f32(ctx, d_dw, vc);
  // bytes: dout read once, and each touched dwte row read and written (fp32)
  gpu_report("embedding_backward", shape, e_b, TOL_EMB_BWD, ms_b, 0, 2.0 * nc / (ms_b * 1e-3) / 1e9);
  gpu_report("embedding_backward_accum", shape, e_b2, TOL_EMB_ACCUM, 0, 0, 0);
  if (memcmp(dw1, dw3, vc * sizeof(float)) != 0) {
    printf("embedding_backward %s: two runs differ (not deterministic)\n", shape);
    gpu_failures++;
  }
  if (padding_idx >= 0 && memcmp(dw2 + (size_t)padding_idx * C, dw0 + (size_t)padding_idx * C,
                                 (size_t)C * sizeof(float)) != 0) {
    printf("embedding_backward %s: the padding row changed\n", shape);
    gpu_failures++;
  }

  free(tokens), free(wte), free(dout), free(dw0), free(ref_out), free(ref_dw), free(got);
  free(dw1), free(dw2), free(dw3);
  cuda_free(d_tokens), cuda_free(d_wte), cuda_free(d_dout), cuda_free(d_out), cuda_free(d_dw);
}

int main(void) {
  CudaContext *ctx = gpu_test_open("test_gpu_embedding");
  test_embedding(ctx, 4096, 640, 262144, 0, 64, 20, 10);  // Gemma 3 vocab, pad 0
  test_embedding(ctx, 2048, 2560, 32768, 0, 16, 20, 20);  // wide rows, heavy repeats
  test_embedding(ctx, 7, 1152, 1000, -1, 3, 5, 30);       // no padding_idx
  test_embedding(ctx, 333, 100, 50, 2, 5, 5, 40);         // C not a multiple of 8
  test_embedding(ctx, 1, 8, 4, 3, 2, 5, 50);               // one row
  return gpu_test_close(ctx, "test_gpu_embedding");
}
