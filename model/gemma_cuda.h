// model/gemma_cuda.h: the Gemma model on the CUDA backend (--device cuda):
// forward (per-token log-probs of given targets), backward (gradients of
// every parameter) and KV-cache decoding, written out layer by layer on top
// of kernels/cuda/ops_cuda.h. Defines GemmaCudaModel, GemmaCudaKVCache and
// their functions. Mirrors model/gemma.c and model/decode.c op for op (same
// order, same scales, layer settings from gemma_attn_spec), with the CUDA
// backend's dtypes: bf16 weights and activations, fp32 parameter gradients,
// fp32 norm/attention/LM-head statistics.
//
// Gemma 4 (docs/gemma4.md) runs as additions to the same layer code: gain
// norms, value norm, per-layer inputs, layer scalar, kv sharing, per-layer
// head dims (64, 128, 256 and 512) and partial rope.
//
// Memory layout: ONE flat device buffer of bf16 parameters holding the CPU
// model's buffers back to back: globals (embedding (V, C), final norm (C),
// Gemma 4's per-layer table, projection and norm) at 0, then layer l at globals_numel + l * layer_numel, each layer in
// gemma.h's order (GemmaLayerOffsets). The fp32 gradient buffer has the same
// offsets, so an upload is one cast per CPU buffer and a download gives the
// CPU model's gradient layout (gemma_cuda_tensor_offset maps a GemmaTensor).
//
// By default every layer keeps its activations (at gemma3-4b, B*T = 4096
// they take ~15 GB in bf16, well inside an H200); gemma_cuda_set_recompute
// keeps one layer's. Layer hooks (GemmaCudaLayerHooks) let ZeRO-3
// (parallel/zero3_cuda.h) hand each layer its gathered parameters and take
// its gradient; such a "sharded" model holds only the globals.
// Only compiled with the CUDA backend (FIMI_HAVE_CUDA), except gemma_cuda_activation_bytes.
#ifndef FIMI_MODEL_GEMMA_CUDA_H
#define FIMI_MODEL_GEMMA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "kernels/cuda/ops_cuda.h"
#include "model/decode.h"
#include "model/gemma.h"
#include "model/gemma_config.h"

// Device bytes of the activations and backward scratch a forward + backward
// over N = B*T rows allocates (the same walk that carves them), with
// recompute 0 or 1. In every build: --dry-run plans GPU memory without one.
size_t gemma_cuda_activation_bytes(const GemmaConfig *cfg, int N, int recompute);

typedef struct GemmaCudaActs GemmaCudaActs;  // defined in gemma_cuda.c

#ifdef FIMI_HAVE_CUDA


// Which kernels compute attention in training and scoring (the decode
// kernel is fimi's in both cases): fimi's own (attention.cu, the default) or
// cuDNN's fused SDPA (attention_cudnn.cpp), a speed and correctness reference.
typedef enum { GEMMA_CUDA_ATTENTION_FIMI = 0, GEMMA_CUDA_ATTENTION_CUDNN } GemmaCudaAttention;

// Per-layer hooks, as GemmaLayerHooks in model/gemma.h but on device
// buffers: before_forward(l, &params) points *params at layer l's bf16
// parameters (layer_numel, valid until after_forward(l)); before_backward(l,
// &params, &grads) also points *grads at an fp32 buffer (layer_numel) the
// backward ACCUMULATES into (zero it there), called once per layer before its
// recompute and backward; after_backward(l): layer l's gradient is complete
// (enqueued on the model's stream). after_* may be NULL. A non-zero return
// aborts the pass with the hook's error.
typedef struct GemmaCudaLayerHooks {
  void *ctx;
  int (*before_forward)(void *ctx, int layer, const bf16 **params, FimiError *err);
  int (*after_forward)(void *ctx, int layer, FimiError *err);
  int (*before_backward)(void *ctx, int layer, const bf16 **params, float **grads, FimiError *err);
  int (*after_backward)(void *ctx, int layer, FimiError *err);
} GemmaCudaLayerHooks;

typedef struct GemmaCudaModel {
  GemmaConfig config;
  GemmaCudaAttention attention;  // GEMMA_CUDA_ATTENTION_FIMI unless gemma_cuda_set_attention says otherwise
  int recompute;                 // 1: one layer's activations kept, recomputed in backward
  CudaContext *ctx;      // not owned: the caller creates and destroys it
  size_t globals_numel;  // V*C + C
  size_t layer_numel;    // GemmaLayerOffsets.numel
  size_t num_params;     // globals_numel + L * layer_numel
  bf16 *params;          // device (params_numel) bf16 working weights
  float *grads;          // device (grads_numel) fp32, NULL until gemma_cuda_alloc_grads
  size_t params_numel;   // num_params, or (sharded) the globals' capacity
  size_t grads_numel;    // the same
  const GemmaCudaLayerHooks *hooks;  // NULL: every layer resident in params / grads
  float embed_scale;     // sqrt(C) rounded to bf16, as HF does with bf16 weights
  float ple_embed_scale; // Gemma 4: sqrt(P) rounded to bf16 (the per-layer table's scale)
  GemmaCudaActs *acts;   // forward/backward state, allocated for the largest B*T seen
} GemmaCudaModel;

// Allocates the device parameters (uninitialized: upload them next).
int gemma_cuda_create(GemmaCudaModel *model, const GemmaConfig *cfg, CudaContext *ctx, FimiError *err);
// A sharded model: params and grads hold only the globals (globals_capacity
// >= globals_numel elements each: a collective may want them padded); the
// layers come from hooks (before_forward and before_backward required,
// borrowed: they must outlive the model). No upload, no KV cache: ZeRO-3
// trains and scores through it; decode on a whole model.
int gemma_cuda_create_sharded(GemmaCudaModel *model, const GemmaConfig *cfg, CudaContext *ctx,
                              const GemmaCudaLayerHooks *hooks, size_t globals_capacity, FimiError *err);
void gemma_cuda_free(GemmaCudaModel *model);
// `cuda.attention`: "fimi" or "cudnn". cudnn is refused for a softcapped
// model (Gemma 2); whether cuDNN loads and supports each shape is known at
// the first forward / backward, which then fails with cuDNN's reason.
int gemma_cuda_set_attention(GemmaCudaModel *model, const char *name, FimiError *err);
// `model.recompute`: keep only the residual stream (each layer's input) and
// one layer's activations; the backward runs each layer's forward again
// before its backward. Memory: (L + 1) * N * C plus ONE layer's activations
// instead of L; time: one more forward per step. Results are bitwise the same
// (every op is deterministic). Changing it drops the activations.
void gemma_cuda_set_recompute(GemmaCudaModel *model, int recompute);
// Copies a CPU model's fp32 parameters (same config) into the bf16 device
// weights, rounding to nearest even. Fails if the configs differ or a CPU
// layer buffer is absent (freed by ZeRO-3).
int gemma_cuda_upload_weights(GemmaCudaModel *model, const GemmaModel *cpu, FimiError *err);
// Allocates (first call) and zeroes the fp32 gradients.
int gemma_cuda_alloc_grads(GemmaCudaModel *model, FimiError *err);
void gemma_cuda_zero_grads(GemmaCudaModel *model);
// Device parameters of layer l (layer_numel); NULL for a sharded model.
bf16 *gemma_cuda_layer_params(GemmaCudaModel *model, int layer);
// Offset of a tensor of the CPU tensor table inside params / grads.
size_t gemma_cuda_tensor_offset(const GemmaCudaModel *model, const GemmaTensor *t);
// Copies the fp32 gradients to host_flat (num_params floats, flat layout
// above; a sharded model: the globals' globals_numel).
void gemma_cuda_download_grads(GemmaCudaModel *model, float *host_flat);

// Forward over B sequences of length T, as gemma_forward: tokens (B, T) and
// targets (B, T) on the HOST (validated there: token in [0, V), target in
// [-1, V)); logprobs (B, T) host out (may be NULL: the log-probs stay on the
// device, gemma_cuda_logprobs_device). Synchronizes the stream before
// returning when logprobs is not NULL. Activations stay for the backward.
int gemma_cuda_forward(GemmaCudaModel *model, const int *tokens, const int *targets, int B, int T, float *logprobs,
                       FimiError *err);
// Backward of sum(dlogprobs * logprobs) for the last forward, dlogprobs (B, T)
// on the HOST; accumulates into the fp32 gradients (zero them first).
// Asynchronous: cuda_context_sync or gemma_cuda_download_grads waits.
int gemma_cuda_backward(GemmaCudaModel *model, const float *dlogprobs, FimiError *err);
// Both at once when dlogprobs (B, T, host) is known before the forward (SFT):
// the LM head computes each chunk's logits once instead of twice
// (lm_head_logprob_forward_backward_cuda). Same results, bitwise, as
// gemma_cuda_forward then gemma_cuda_backward; logprobs (B, T) host or NULL.
int gemma_cuda_forward_backward(GemmaCudaModel *model, const int *tokens, const int *targets, int B, int T,
                                const float *dlogprobs, float *logprobs, FimiError *err);
// Device views of the last forward: log-probs (B*T) fp32 and the final
// norm's output (B*T, C) bf16, the LM head's input (for full logits with
// lm_head_logits_cuda). NULL before the first forward.
const float *gemma_cuda_logprobs_device(const GemmaCudaModel *model);
const bf16 *gemma_cuda_final_hidden_device(const GemmaCudaModel *model);

// KV cache for B sequences of up to `capacity` tokens, on the device.
typedef struct GemmaCudaKVCache {
  int batch;      // B
  int capacity;   // S: max tokens per sequence
  int rows;       // R = max(B, chunk): rows one model call runs at most
  int chunk;      // tokens per prefill pass
  int *lengths;   // host (B): tokens currently cached per sequence
  bf16 *k, *v;    // device: per layer (B, S, nkv, hd) of that layer, at kv_offset[l]
  size_t kv_offset[GEMMA_MAX_LAYERS];  // elements; a kv-shared layer (Gemma 4) has its source's
  bf16 *scratch;  // device: one call's activations for up to R rows
  float *logits;  // device (B, V) fp32: the last step's logits of the active rows (prefill: its sequence's row)
  // device (3R): positions (R) and token ids (R) of the call's rows, then
  // lengths: decode (B) per sequence incl. the new token, prefill (R) per query
  int *d_slots;
  int *h_slots;   // host (4R): ids, positions, token ids, lengths
} GemmaCudaKVCache;

// Room for prefill chunks of B tokens (gemma_cuda_kv_cache_create_rows with rows = B).
int gemma_cuda_kv_cache_create(GemmaCudaKVCache *cache, const GemmaCudaModel *model, int batch, int capacity,
                               FimiError *err);
// The same with prefill chunks of up to `rows` tokens (rows >= 1; the cache
// runs max(rows, batch) rows per call), as gemma_kv_cache_create_rows.
int gemma_cuda_kv_cache_create_rows(GemmaCudaKVCache *cache, const GemmaCudaModel *model, int batch, int capacity,
                                    int rows, FimiError *err);
// As gemma_kv_cache_copy_sequence: sequence dst gets a device-to-device copy
// of sequence src's cached positions (every layer's k and v) and its length.
// Stream-ordered like the ops (the next step or prefill sees the copy; an
// asynchronous failure is reported by the next synchronizing call). Fails,
// changing nothing, on an index outside [0, B).
int gemma_cuda_kv_cache_copy_sequence(GemmaCudaModel *model, GemmaCudaKVCache *cache, int dst, int src,
                                      FimiError *err);
void gemma_cuda_kv_cache_free(GemmaCudaKVCache *cache);
void gemma_cuda_kv_cache_reset(GemmaCudaKVCache *cache);
// As gemma_decode_step: feeds one token per sequence (tokens (B), host),
// active (B) host 0/1 flags or NULL (all). The active rows' next-token logits
// (softcap applied) are left in cache->logits (B, V) on the device and, when
// logits is not NULL, copied to the host array logits (B, V) (inactive rows
// untouched). Fails, changing nothing, if a token is out of range or a
// sequence's cache is full. Waits for the stream at the end (one step's
// asynchronous errors are reported by that step).
int gemma_cuda_decode_step(GemmaCudaModel *model, GemmaCudaKVCache *cache, const int *tokens, const int *active,
                           float *logits, FimiError *err);

// As gemma_prefill: appends n tokens (n >= 1, host) of sequence b to the
// cache in chunks of cache->chunk tokens, each chunk one batched pass, causal
// within itself (attention_prefill_cuda), and writes the next-token logits
// after the last token (softcap applied) to cache->logits row b and, when
// logits is not NULL, to the host array logits (V). Validates everything
// first: a failure changes nothing. Waits for the stream at the end. The
// cached keys and values equal what n decode steps write, to bf16 rounding
// (a chunk's GEMMs run over its rows together).
int gemma_cuda_prefill(GemmaCudaModel *model, GemmaCudaKVCache *cache, int b, const int *tokens, int n,
                       float *logits, FimiError *err);

// gemma_generate on the GPU: decode steps on the device, logits copied to the
// host each step and sampled there (model/decode.h generate_with), so the
// sampling rules and RNG streams are those of the CPU path.
int gemma_cuda_generate(GemmaCudaModel *model, const int *const *prompts, const int *prompt_lengths, int B,
                        const GenerateOptions *opt, int *out_tokens, int *out_lengths, FimiError *err);

#endif  // FIMI_HAVE_CUDA
#endif
