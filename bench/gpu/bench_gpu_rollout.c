// bench/gpu/bench_gpu_rollout.c: the GRPO rollout engine's model calls on
// the GPU, as its GPU policy (cmd/rollout_cuda.c) makes them: default
// gemma3-1b, 64 sequences. Each policy callback is one model/gemma_cuda.h
// call, and those are what is timed here (the policy itself needs rl/'s
// headers, which the GPU-check build lacks):
//   rollout_prefill: a 512-token prompt into each of the 64 sequences
//     (gemma_cuda_prefill, chunks of 256 tokens as rollout.prefill_chunk
//     defaults to, the last token's logits to the host);
//   rollout_copy: the shared prompt copied to the other members of a group
//     (gemma_cuda_kv_cache_copy_sequence, 48 copies of 512 tokens: 16 groups
//     of 4);
//   rollout_decode: 128 decode steps of all 64 sequences, every step's
//     logits (64, V) fp32 to the host (gemma_cuda_decode_step), where the
//     engine samples.
// Reports prefill and decode tokens/s; TFLOP/s counts 2 * P per token (the
// matmuls, tied LM head included) plus attention (4 * nh * hd per key a query
// sees). Sampling and the environment are the host's and not included.
//
// Usage: bench_gpu_rollout [preset [sequences [prompt [steps]]]].
// The weights are random bf16 written on the device, as bench_gpu_model does.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "bench_gpu_rollout"
#include "bench/gpu/bench_gpu.h"
#include "model/gemma_cuda.h"
#include "tests/gpu/gpu_test.h"

// Attention FLOPs of one token at position pos (0-based) over every layer.
static double attention_flops(const GemmaConfig *cfg, int pos) {
  double f = 0;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaAttnSpec spec;
    gemma_attn_spec(cfg, l, &spec);
    int keys = spec.window > 0 && pos + 1 > spec.window ? spec.window : pos + 1;
    f += 4.0 * cfg->num_attention_heads * cfg->head_dim * keys;
  }
  return f;
}

static void die(const char *what, const FimiError *err) {
  fprintf(stderr, BENCH_NAME ": %s: %s\n", what, err->message);
  exit(1);
}

int main(int argc, char **argv) {
  const char *preset = argc > 1 ? argv[1] : "gemma3-1b";
  int B = argc > 2 ? atoi(argv[2]) : 64, P = argc > 3 ? atoi(argv[3]) : 512, steps = argc > 4 ? atoi(argv[4]) : 128;
  int chunk = 256, groups = B / 4;
  CudaContext *ctx = gpu_test_open(BENCH_NAME);
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaCudaModel m;
  if (B < 1 || P < 1 || steps < 1 || gemma_config_preset(&cfg, preset, &err) != 0 ||
      gemma_cuda_create(&m, &cfg, ctx, &err) != 0)
    die("setup", &err);
  bench_fill_random_weights(ctx, &m);
  int V = cfg.vocab_size;
  GemmaCudaKVCache cache;
  if (gemma_cuda_kv_cache_create_rows(&cache, &m, B, P + steps, chunk, &err) != 0) die("KV cache", &err);
  int *prompt = malloc((size_t)P * sizeof(int)), *tokens = malloc((size_t)B * sizeof(int));
  float *logits = malloc((size_t)B * V * sizeof(float));
  Rng rng;
  rng_seed(&rng, 5);
  for (int i = 0; i < P; i++) prompt[i] = 1 + (int)(rng_next_u64(&rng) % (uint64_t)(V - 1));
  for (int b = 0; b < B; b++) tokens[b] = prompt[b % P];
  // Warm-up: the matmul plans of both shapes, then an empty cache again.
  if (gemma_cuda_prefill(&m, &cache, 0, prompt, P < chunk ? P : chunk, logits, &err) != 0 ||
      gemma_cuda_decode_step(&m, &cache, tokens, NULL, logits, &err) != 0)
    die("warm-up", &err);
  gemma_cuda_kv_cache_reset(&cache);
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  printf(BENCH_NAME ": %s, %.2fB parameters, %d sequences of %d + %d tokens: KV cache %.2f GB; %.1f of %.1f GB free\n",
         preset, m.num_params / 1e9, B, P, steps,
         2.0 * cfg.num_hidden_layers * B * (P + steps) * cfg.num_key_value_heads * cfg.head_dim * 2 / 1e9,
         free_b / 1e9, total_b / 1e9);
  double per_token = 2.0 * (double)gemma_config_param_count(&cfg), prefill_flops = 0, decode_flops = 0;
  for (int i = 0; i < P; i++) prefill_flops += per_token + attention_flops(&cfg, i);
  for (int s = 0; s < steps; s++) decode_flops += per_token + attention_flops(&cfg, P + s);
  prefill_flops *= B, decode_flops *= B;

  GpuTimer timer;
  gpu_timer_start(&timer, ctx);
  for (int b = 0; b < B; b++)
    if (gemma_cuda_prefill(&m, &cache, b, prompt, P, logits + (size_t)b * V, &err) != 0) die("prefill", &err);
  double prefill_ms = gpu_timer_stop_ms(&timer, ctx, 1);
  // Group sharing: sequence g*4 keeps its prompt, the next 3 get copies.
  gpu_timer_start(&timer, ctx);
  for (int g = 0; g < groups; g++)
    for (int k = 1; k < 4; k++)
      if (gemma_cuda_kv_cache_copy_sequence(&m, &cache, 4 * g + k, 4 * g, &err) != 0) die("copy", &err);
  double copy_ms = gpu_timer_stop_ms(&timer, ctx, 1);
  bench_sync(ctx, "copy");
  gpu_timer_start(&timer, ctx);
  for (int s = 0; s < steps; s++) {
    if (gemma_cuda_decode_step(&m, &cache, tokens, NULL, logits, &err) != 0) die("decode", &err);
    for (int b = 0; b < B; b++) tokens[b] = (tokens[b] * 31 + s + 1) % V;  // the host's pick, here a stand-in
  }
  double decode_ms = gpu_timer_stop_ms(&timer, ctx, 1);

  size_t bad = 0;
  for (size_t i = 0; i < (size_t)B * V; i++) bad += !(logits[i] == logits[i]) || logits[i] > 1e30f || logits[i] < -1e30f;
  if (bad) {
    printf(BENCH_NAME ": %zu non-finite logits after the last step\n", bad);
    gpu_failures++;
  }
  double prefill_tok_s = (double)B * P / (prefill_ms * 1e-3), decode_tok_s = (double)B * steps / (decode_ms * 1e-3);
  double copy_bytes = 2.0 * 3 * groups * cfg.num_hidden_layers * (double)P * cfg.num_key_value_heads * cfg.head_dim * 2;
  char shape[128];
  snprintf(shape, sizeof shape, "%s seqs%d prompt%d chunk%d", preset, B, P, chunk);
  gpu_report("rollout_prefill", shape, -1, 0, prefill_ms / B, prefill_flops / (prefill_ms * 1e9), 0);
  snprintf(shape, sizeof shape, "%s %d copies of %d tokens", preset, 3 * groups, P);
  gpu_report("rollout_copy", shape, -1, 0, copy_ms, 0, 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9);
  snprintf(shape, sizeof shape, "%s seqs%d ctx%d-%d logits to host", preset, B, P, P + steps);
  gpu_report("rollout_decode", shape, -1, 0, decode_ms / steps, decode_flops / (decode_ms * 1e9), 0);
  printf(BENCH_NAME ": prefill %.0f tokens/s (%.1f ms per %d-token prompt); decode %.0f tokens/s (%.2f ms per step of "
         "%d sequences, %.1f MB of logits to the host each); %d copies %.2f ms\n",
         prefill_tok_s, prefill_ms / B, P, decode_tok_s, decode_ms / steps, B, (double)B * V * 4 / 1e6, 3 * groups,
         copy_ms);
  gemma_cuda_kv_cache_free(&cache);
  gemma_cuda_free(&m);
  free(prompt), free(tokens), free(logits);
  return gpu_test_close(ctx, BENCH_NAME);
}
