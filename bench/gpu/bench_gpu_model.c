// bench/gpu/bench_gpu_model.c: one training step's forward + backward of a
// whole Gemma model on the GPU (model/gemma_cuda.c), default gemma3-4b at
// B = 1, T = 4096 (T = 2048 if the activations do not fit). Prints
// GPU_RESULT lines (tests/gpu/gpu_test.h) for the forward, for forward +
// backward, and for SFT's step (forward + backward with the fused LM head,
// gemma_cuda_forward_backward): time, tokens/s and MFU.
//
// Usage: bench_gpu_model [preset [B [T]]].
//
// FLOPs (model FLOPs, no recompute counted): 6 * P per token for the
// matmuls, P = gemma_config_param_count (tied embedding once: it is the LM
// head's matmul; the lookup is free; norm weights are a rounding error), plus
// attention: per layer and token 4 * nh * hd * keys for the forward's QK^T
// and PV (2 FLOPs per multiply-add), twice that for the backward, so
// 12 * nh * hd * keys in all, where keys is the number of keys the query
// actually sees: t + 1 causal, min(t + 1, W) on sliding layers (averaged
// over the T positions). MFU = tokens/s * FLOPs per token / 989e12 (H200
// dense bf16 peak without sparsity).
//
// The weights are random bf16 (uniform, std ~0.017) written straight on the
// device: a 16 Mi-element random block uploaded once, then copied across the
// flat buffer, so the 8 GB of a 4B model take milliseconds (no CPU init).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemma_cuda.h"
#define BENCH_NAME "bench_gpu_model"
#include "bench/gpu/bench_gpu.h"
#include "tests/gpu/gpu_test.h"

#define H200_BF16_PEAK 989e12

// One measured configuration; returns 0, or -1 when the batch does not fit.
static int bench(CudaContext *ctx, GemmaCudaModel *m, const char *preset, int B, int T) {
  const GemmaConfig *cfg = &m->config;
  FimiError err = {0};
  int N = B * T, warmup = 1, reps = 3;
  int *tokens = malloc((size_t)N * sizeof(int)), *targets = malloc((size_t)N * sizeof(int));
  float *dlogprobs = malloc((size_t)N * sizeof(float)), *logprobs = malloc((size_t)N * sizeof(float));
  Rng rng;
  rng_seed(&rng, 5);
  for (int i = 0; i < N; i++) tokens[i] = 1 + (int)(rng_next_u64(&rng) % (uint64_t)(cfg->vocab_size - 1));
  for (int i = 0; i < N; i++) {
    targets[i] = (i + 1) % T != 0 ? tokens[i + 1] : -1;
    dlogprobs[i] = targets[i] >= 0 ? -1.0f / (float)N : 0.0f;
  }
  int rc = -1;
  // Warm-up: allocates the activations (may fail: out of memory) and builds the matmul plans.
  for (int r = 0; r < warmup; r++) {
    if (gemma_cuda_forward(m, tokens, targets, B, T, logprobs, &err) != 0 ||
        gemma_cuda_backward(m, dlogprobs, &err) != 0 || cuda_context_sync(ctx, &err) != 0) {
      printf("%s B%d T%d: %s\n", preset, B, T, err.message);
      goto done;
    }
  }
  size_t bad = 0;
  for (int i = 0; i < N; i++) bad += !isfinite(logprobs[i]);
  if (bad) printf("%s B%d T%d: %zu non-finite log-probs\n", preset, B, T, bad);

  GpuTimer timer;
  gpu_timer_start(&timer, ctx);
  for (int r = 0; r < reps; r++) gemma_cuda_forward(m, tokens, targets, B, T, NULL, &err);
  double fwd_ms = gpu_timer_stop_ms(&timer, ctx, reps);
  gpu_timer_start(&timer, ctx);
  for (int r = 0; r < reps; r++) {
    gemma_cuda_forward(m, tokens, targets, B, T, NULL, &err);
    gemma_cuda_backward(m, dlogprobs, &err);
  }
  double step_ms = gpu_timer_stop_ms(&timer, ctx, reps);
  // SFT's step: the same with the LM head fused (one logits GEMM per chunk).
  gpu_timer_start(&timer, ctx);
  for (int r = 0; r < reps; r++) gemma_cuda_forward_backward(m, tokens, targets, B, T, dlogprobs, NULL, &err);
  double sft_ms = gpu_timer_stop_ms(&timer, ctx, reps);
  if (cuda_context_sync(ctx, &err) != 0) {
    printf("%s B%d T%d: %s\n", preset, B, T, err.message);
    goto done;
  }
  double fpt = train_flops_per_token(cfg, T);
  double tok_s = N / (step_ms * 1e-3), mfu = tok_s * fpt / H200_BF16_PEAK;
  char shape[128];
  snprintf(shape, sizeof shape, "%s B%d T%d", preset, B, T);
  gpu_report("model_forward", shape, -1, 0, fwd_ms, N * fpt / 3.0 / (fwd_ms * 1e9), 0);
  gpu_report("model_fwd_bwd", shape, -1, 0, step_ms, N * fpt / (step_ms * 1e9), 0);
  gpu_report("model_fwd_bwd_fused_sft", shape, -1, 0, sft_ms, N * fpt / (sft_ms * 1e9), 0);
  printf("%s: forward %.1f ms, forward+backward %.1f ms, %.0f tokens/s, %.3g GFLOP/token (6N = %.3g), MFU %.1f%% "
         "of %.0f TFLOP/s\n",
         shape, fwd_ms, step_ms, tok_s, fpt / 1e9, 6.0 * (double)gemma_config_param_count(cfg) / 1e9, 100 * mfu,
         H200_BF16_PEAK / 1e12);
  printf("%s: SFT step with the fused LM head %.1f ms, %.0f tokens/s, MFU %.1f%%\n", shape, sft_ms,
         N / (sft_ms * 1e-3), 100 * N / (sft_ms * 1e-3) * fpt / H200_BF16_PEAK);
  rc = 0;
done:
  free(tokens);
  free(targets);
  free(dlogprobs);
  free(logprobs);
  return rc;
}

int main(int argc, char **argv) {
  const char *name = "bench_gpu_model";
  const char *preset = argc > 1 ? argv[1] : "gemma3-4b";
  int B = argc > 2 ? atoi(argv[2]) : 1, T = argc > 3 ? atoi(argv[3]) : 4096;
  CudaContext *ctx = gpu_test_open(name);
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaCudaModel m;
  if (B <= 0 || T <= 1 || gemma_config_preset(&cfg, preset, &err) != 0 || gemma_cuda_create(&m, &cfg, ctx, &err) != 0 ||
      gemma_cuda_alloc_grads(&m, &err) != 0) {
    fprintf(stderr, "%s: %s (B %d, T %d)\n", name, err.message, B, T);
    return 1;
  }
  bench_fill_random_weights(ctx, &m);
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  printf("%s: %s, %.2fB parameters: bf16 weights %.1f GB + fp32 grads %.1f GB; %.1f of %.1f GB free\n", name, preset,
         m.num_params / 1e9, m.num_params * 2 / 1e9, m.num_params * 4 / 1e9, free_b / 1e9, total_b / 1e9);
  int rc = bench(ctx, &m, preset, B, T);
  if (rc != 0 && T > 2048) {
    // Out of memory at T: drop the activations and measure at 2048 instead.
    gemma_cuda_free(&m);
    if (gemma_cuda_create(&m, &cfg, ctx, &err) != 0 || gemma_cuda_alloc_grads(&m, &err) != 0) {
      fprintf(stderr, "%s: %s\n", name, err.message);
      return 1;
    }
    bench_fill_random_weights(ctx, &m);
    printf("%s: T %d did not fit; measuring T 2048\n", name, T);
    rc = bench(ctx, &m, preset, B, 2048);
  }
  gemma_cuda_free(&m);
  if (rc != 0) gpu_failures++;
  return gpu_test_close(ctx, name);
}
