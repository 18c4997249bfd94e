// model/decode.h: incremental decoding with a KV cache for a batch of
// sequences of different lengths, and sampling. Defines GemmaKVCache,
// gemma_kv_cache_create, gemma_decode_step, SamplerConfig, sample_token,
// gemma_generate.
#ifndef FIMI_MODEL_DECODE_H
#define FIMI_MODEL_DECODE_H

#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "model/gemma.h"

typedef struct GemmaKVCache {
  int batch;         // B
  int capacity;      // S: max tokens per sequence
  int *lengths;      // (B) tokens currently cached per sequence
  float *k;          // (L, B, S, nkv, hd)
  float *v;          // (L, B, S, nkv, hd)
} GemmaKVCache;

int gemma_kv_cache_create(GemmaKVCache *cache, const GemmaConfig *cfg, int batch, int capacity, FimiError *err);
void gemma_kv_cache_free(GemmaKVCache *cache);
void gemma_kv_cache_reset(GemmaKVCache *cache);

// Feeds one token per sequence (tokens (B)); active (B) may be NULL (all
// active) or 0/1 flags: inactive sequences are not advanced. Writes the
// next-token logits (B, V) (final softcap applied). Fails if a sequence's
// cache is full.
int gemma_decode_step(GemmaModel *model, GemmaKVCache *cache, const int *tokens, const int *active, float *logits,
                      FimiError *err);

typedef struct SamplerConfig {
  float temperature;  // 0 = greedy
  float top_p;        // 1 = no nucleus truncation
} SamplerConfig;

// Samples one id from logits (V). Deterministic given the rng state; ties in
// greedy go to the lowest id.
int sample_token(const float *logits, int V, const SamplerConfig *sampler, Rng *rng);

// Prefills each prompt through the cache, then samples up to max_new tokens
// per sequence, stopping a sequence at stop_token (if >= 0).
// prompts: B arrays with prompt_lengths; out_tokens (B, max_new), out_lengths (B).
int gemma_generate(GemmaModel *model, const int *const *prompts, const int *prompt_lengths, int B, int max_new,
                   int stop_token, const SamplerConfig *sampler, uint64_t seed, int *out_tokens, int *out_lengths,
                   FimiError *err);

#endif
