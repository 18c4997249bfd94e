// tests/gpu/test_gpu_attention_prefill.c: attention_prefill_cuda (a prefill
// chunk's N queries of one sequence against its KV cache, ops_cuda.h) against
// the CPU reference, N calls of attention_decode with B = 1
// (kernels/cpu/attention.c), on the same bf16-rounded random inputs, output
// poisoned with NaN first; cache rows at and past the chunk's last position
// are NaN, so reading one fails the comparison. Each query's lengths entry is
// its position + 1 (causal within the chunk), the chunk starting at `base`
// (0: the first chunk of a prompt; > 0: a chunk after cached tokens), plus
// one query of length 0 (a zero row, as decode). Also: every query bitwise
// equal to attention_decode_cuda with B = 1 on its length (the contract: the
// same kernel). hd 64/128/256, causal and sliding windows, softcap 0 and 50,
// GQA 8/4 and 4/1, and the gemma3-1b layer shape (nh 4, nkv 1, hd 256) at a
// 256-token chunk after 768 cached tokens, global and sliding (512); hd 512
// (Gemma 4's full-attention layers) with GQA 4/1 and 4/2, windows 0 and 8.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/gpu/gpu_test.h"

static const char *NAME = "test_gpu_attention_prefill";

typedef struct PrefillCase {
  int N, base, S, nh, nkv, hd, window;
  float softcap;
} PrefillCase;

static void run_case(CudaContext *ctx, const PrefillCase *c, uint64_t seed) {
  int N = c->N, S = c->S, nh = c->nh, nkv = c->nkv, hd = c->hd;
  float scale = 1.0f / sqrtf((float)hd);
  size_t row = (size_t)nh * hd, nq = (size_t)N * row, nc = (size_t)S * nkv * hd;
  int *lengths = malloc((size_t)N * sizeof(int));
  for (int i = 0; i < N; i++) lengths[i] = c->base + i + 1;
  lengths[N / 2] = 0;  // no valid key: a zero row
  int cached = c->base + N;
  float *q = host_random_bf16(nq, 2.0f, seed + 1), *kc = host_random_bf16(nc, 2.0f, seed + 2);
  float *vc = host_random_bf16(nc, 1.0f, seed + 3);
  for (size_t e = (size_t)cached * nkv * hd; e < nc; e++) kc[e] = vc[e] = NAN;
  float *ref = malloc(nq * sizeof(float));
  for (int i = 0; i < N; i++)
    attention_decode(ref + i * row, q + i * row, kc, vc, lengths + i, 1, S, nh, nkv, hd, c->window, c->softcap, scale);
  bf16 *d_q = gpu_bf16_from(ctx, q, nq), *d_k = gpu_bf16_from(ctx, kc, nc), *d_v = gpu_bf16_from(ctx, vc, nc);
  int *d_len = gpu_alloc((size_t)N * sizeof(int));
  cuda_upload_i32(ctx, d_len, lengths, (size_t)N);
  bf16 *d_out = gpu_poisoned(ctx, nq * sizeof(bf16)), *d_one = gpu_poisoned(ctx, row * sizeof(bf16));
  attention_prefill_cuda(ctx, d_out, d_q, d_k, d_v, d_len, N, S, nh, nkv, hd, c->window, c->softcap, scale);
  float *out = host_from_bf16(ctx, d_out, nq);
  double err = max_rel_error(out, ref, nq);
  // Each query as its own decode call: the same bits.
  int differ = 0;
  for (int i = 0; i < N; i++) {
    attention_decode_cuda(ctx, d_one, d_q + i * row, d_k, d_v, d_len + i, 1, S, nh, nkv, hd, c->window, c->softcap,
                          scale);
    float *one = host_from_bf16(ctx, d_one, row);
    differ += memcmp(one, out + i * row, row * sizeof(float)) != 0;
    free(one);
  }
  GpuTimer timer;
  int reps = 5;
  gpu_timer_start(&timer, ctx);
  for (int r = 0; r < reps; r++)
    attention_prefill_cuda(ctx, d_out, d_q, d_k, d_v, d_len, N, S, nh, nkv, hd, c->window, c->softcap, scale);
  double ms = gpu_timer_stop_ms(&timer, ctx, reps);
  double flops = 0.0;  // QK^T and PV over the keys each query sees
  for (int i = 0; i < N; i++) {
    int first = c->window > 0 && lengths[i] - c->window > 0 ? lengths[i] - c->window : 0;
    flops += 4.0 * nh * hd * (lengths[i] - first);
  }
  char shape[112];
  snprintf(shape, sizeof shape, "N%d base%d S%d nh%d nkv%d hd%d w%d cap%g", N, c->base, S, nh, nkv, hd, c->window,
           c->softcap);
  gpu_report("attention_prefill", shape, err, GPU_TOL_BF16, ms, flops / (ms * 1e-3) / 1e12, 0.0);
  gpu_report("attention_prefill_vs_decode_differ", shape, (double)differ, 0.0, 0.0, 0.0, 0.0);
  cuda_free(d_q), cuda_free(d_k), cuda_free(d_v), cuda_free(d_len), cuda_free(d_out), cuda_free(d_one);
  free(q), free(kc), free(vc), free(ref), free(out), free(lengths);
}

int main(void) {
  CudaContext *ctx = gpu_test_open(NAME);
  const int hds[3] = {64, 128, 256};
  const PrefillCase shapes[] = {
      {37, 0, 300, 8, 4, 0, 0, 0.0f},     // a prompt's first chunk, causal
      {37, 100, 300, 8, 4, 0, 0, 50.0f},  // after cached tokens, softcap
      {64, 150, 300, 4, 1, 0, 32, 0.0f},  // sliding window shorter than the chunk
  };
  uint64_t seed = 2000;
  for (int hi = 0; hi < 3; hi++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      PrefillCase c = shapes[s];
      c.hd = hds[hi];
      run_case(ctx, &c, seed += 10);
    }
  // gemma3-1b's attention: a 256-token chunk after 768 cached tokens.
  const PrefillCase gemma_global = {256, 768, 1024, 4, 1, 256, 0, 0.0f};
  const PrefillCase gemma_sliding = {256, 768, 1024, 4, 1, 256, 512, 0.0f};
  run_case(ctx, &gemma_global, seed += 10);
  run_case(ctx, &gemma_sliding, seed += 10);
  // hd 512: a first chunk and one after cached tokens
  const PrefillCase hd512[] = {{40, 0, 64, 4, 1, 512, 0, 0.0f}, {40, 20, 64, 4, 2, 512, 8, 0.0f}};
  for (size_t s = 0; s < sizeof hd512 / sizeof hd512[0]; s++) run_case(ctx, &hd512[s], seed += 10);
  return gpu_test_close(ctx, NAME);
}
