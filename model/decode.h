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
  int rows;          // R = max(B, chunk): rows one model call runs at most
  int chunk;         // tokens per prefill pass (the same whatever B is)
  // 1: each decode row runs its own GEMMs, so a sequence's logits do not
  // depend on the other sequences of the step (bitwise, whatever B); 0: one
  // GEMM for all rows (faster; OpenBLAS's small-matrix kernels then round a
  // row differently for different numbers of rows).
  int row_invariant;
  int *lengths;      // (B) tokens currently cached per sequence
  float *k;          // (L, B, S, nkv, hd)
  float *v;          // (L, B, S, nkv, hd)
  // The keys again, transposed per tile of ATTN_CACHE_TILE positions, which
  // is what the CPU attention reads (kernels/ops.h attention_cached):
  float *k_tiles;    // (L, B, ceil(S / TILE), nkv, hd, TILE)
  // Where layer l's part of k/v and of k_tiles starts (floats). Gemma 4
  // layers differ in nkv * hd, and a kv-shared layer has no part of its
  // own: its offsets are its source layer's, so it reads that layer's cache.
  size_t kv_offset[GEMMA_MAX_LAYERS];
  size_t tile_offset[GEMMA_MAX_LAYERS];
  // Gemma 4 per-layer inputs of a prefill group (decode rows use scratch):
  float *group_ple;  // (L, G, P)
  // One decode step's activations for up to B rows, carved by decode.c, so a
  // step never allocates.
  float *scratch;    // one call's activations for R rows
  int *slots;        // (4R) row ids, positions, token ids, attended lengths
  // Prefill runs layer by layer over groups of whole chunks (decode.c):
  int group_rows;    // G: tokens per group, a multiple of chunk
  float *group_x;    // (G, C) the group's residual stream
} GemmaKVCache;

int gemma_kv_cache_create(GemmaKVCache *cache, const GemmaConfig *cfg, int batch, int capacity, FimiError *err);
// The same with room for prefill chunks of up to `rows` tokens (rows >= 1;
// the cache runs max(rows, batch) rows per call).
int gemma_kv_cache_create_rows(GemmaKVCache *cache, const GemmaConfig *cfg, int batch, int capacity, int rows,
                               FimiError *err);
// Sequence dst gets a copy of sequence src's cached positions (and length):
// the G rollouts of a task share one prefill of their prompt this way.
int gemma_kv_cache_copy_sequence(GemmaKVCache *cache, const GemmaConfig *cfg, int dst, int src, FimiError *err);
void gemma_kv_cache_free(GemmaKVCache *cache);
void gemma_kv_cache_reset(GemmaKVCache *cache);
// A decode step's active sequences come in runs of consecutive ids (the ids
// of rows i, i+1, ... are b, b+1, ...); each run is one attention call on the
// CPU and on the GPU. Returns the run's length starting at row i of ids (n).
int decode_run_length(const int *ids, int n, int i);

// Feeds one token per sequence (tokens (B)); active (B) may be NULL (all
// active) or 0/1 flags: inactive sequences are not advanced. Writes the
// next-token logits (B, V) (final softcap applied). Fails if a sequence's
// cache is full.
int gemma_decode_step(GemmaModel *model, GemmaKVCache *cache, const int *tokens, const int *active, float *logits,
                      FimiError *err);

// Appends n tokens (n >= 1) of sequence b to the cache in chunks of
// cache->chunk tokens (each chunk one batched pass, causal within itself),
// and writes the next-token logits after the last token into logits (V;
// may be NULL). Validates everything first: a failure changes nothing. The
// cached keys and values equal what n decode steps would write, to float
// rounding (tests/test_decode.c); the attention gives each token the bits
// a decode step gives it, the GEMMs run over a chunk's rows together. The
// result depends on the tokens, the chunk size and the cached prefix only
// (not on other sequences or the batch size).
int gemma_prefill(GemmaModel *model, GemmaKVCache *cache, int b, const int *tokens, int n, float *logits,
                  FimiError *err);

typedef struct SamplerConfig {
  float temperature;  // 0 = greedy
  float top_p;        // 1 = no nucleus truncation
} SamplerConfig;

// Samples one id from logits (V). Deterministic given the rng state; ties in
// greedy go to the lowest id. temperature > 0: softmax(logits / temperature),
// then the nucleus: tokens sorted by probability (descending, lower id first
// on ties), keeping the shortest prefix whose mass reaches top_p; one
// rng_uniform draw picks within it. NaN logits are never picked (unless all are).
int sample_token(const float *logits, int V, const SamplerConfig *sampler, Rng *rng);

typedef struct GenerateOptions {
  int max_new;                // tokens to sample per sequence at most
  const int *stop_tokens;     // a sequence ends after sampling any of these
  int num_stop_tokens;        //   (the stop token is included in the output)
  SamplerConfig sampler;
  uint64_t seed;
  // Called after each sampled token of sequence b (e.g. to stream text), in
  // order of steps and, within a step, of b; may be NULL.
  void (*on_token)(void *ctx, int b, int token);
  void *on_token_ctx;
} GenerateOptions;

// Prefills each prompt through the cache, then samples up to opt->max_new
// tokens per sequence, stopping a sequence at a stop token.
// prompts: B arrays with prompt_lengths (each >= 1); out_tokens (B, max_new),
// -1 after each sequence's end; out_lengths (B). Sequence b draws from its own
// stream rng_seed(seed ^ b * 0x9E3779B97F4A7C15), so one sequence stopping
// early does not shift the random draws of the others.
int gemma_generate(GemmaModel *model, const int *const *prompts, const int *prompt_lengths, int B,
                   const GenerateOptions *opt, int *out_tokens, int *out_lengths, FimiError *err);

// The loop of gemma_generate over any backend's decode step (CPU above,
// GPU in model/gemma_cuda.h): step feeds tokens (B) of the active rows and
// writes their next-token logits (B, V) on the host. Sampling stays on the
// host (sample_token), so every backend draws the same way from its logits.
typedef struct GenerateDecoder {
  int (*step)(void *ctx, const int *tokens, const int *active, float *logits, FimiError *err);
  void *ctx;
} GenerateDecoder;
int generate_with(const GenerateDecoder *dec, int V, const int *const *prompts, const int *prompt_lengths, int B,
                  const GenerateOptions *opt, int *out_tokens, int *out_lengths, FimiError *err);
// The KV-cache capacity generation needs (longest prompt + max_new); checks
// the arguments (B > 0, prompts non-empty); -1 with err on bad arguments.
int generate_capacity(const int *prompt_lengths, int B, const GenerateOptions *opt, FimiError *err);

#endif
