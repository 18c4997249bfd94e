// model/gemma.h: the Gemma model on the CPU backend, written out layer by
// layer (llm.c style). Defines GemmaModel, its flat parameter buffers with
// HF-named tensors, forward (per-token log-probs of given targets), backward
// (gradients of every parameter), the fused forward+backward for objectives
// whose per-token weights are known up front, and random init.
//
// Parameter layout: one flat float buffer per transformer layer (the unit
// ZeRO-3 shards later) plus one "globals" buffer (embedding, final norm).
// Per layer, in this order (HF names under model.layers.N.):
//   input_layernorm.weight            (C)
//   self_attn.q_proj.weight           (nh*hd, C)
//   self_attn.k_proj.weight           (nkv*hd, C)
//   self_attn.v_proj.weight           (nkv*hd, C)
//   self_attn.o_proj.weight           (C, nh*hd)
//   self_attn.q_norm.weight           (hd)        gemma3 only
//   self_attn.k_norm.weight           (hd)        gemma3 only
//   post_attention_layernorm.weight   (C)
//   pre_feedforward_layernorm.weight  (C)
//   mlp.gate_proj.weight              (I, C)
//   mlp.up_proj.weight                (I, C)
//   mlp.down_proj.weight              (C, I)
//   post_feedforward_layernorm.weight (C)
// Globals: model.embed_tokens.weight (V, C) (tied LM head), model.norm.weight (C).
//
// Gemma 4 (docs/gemma4.md) adds to the same order, per layer, with that
// layer's hd, nkv and I (GemmaLayerShape):
//   self_attn.k_proj, self_attn.k_norm  absent on kv-shared layers
//   self_attn.v_proj                    absent on kv-shared layers and, with
//                                       attention_k_eq_v, on full-attention layers
//   per_layer_input_gate.weight       (P, C)   } with per-layer
//   per_layer_projection.weight       (C, P)   } embeddings
//   post_per_layer_input_norm.weight  (C)      } (P > 0)
//   layer_scalar                      (1)      a buffer: loaded and saved, never trained
// and to the globals, after the final norm (P > 0):
//   model.embed_tokens_per_layer.weight        (Vp, L*P)
//   model.per_layer_model_projection.weight    (L*P, C)
//   model.per_layer_projection_norm.weight     (P)
// Gemma 4 norm weights are the gain itself (initialized to 1), not centred
// on 0. Its layers differ in size; every layer buffer has the size of the
// largest (layer_numel), a smaller layer leaving its tail at zero.
#ifndef FIMI_MODEL_GEMMA_H
#define FIMI_MODEL_GEMMA_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "model/gemma_config.h"

#define GEMMA_NAME_MAX 96

// One named tensor inside a flat buffer.
typedef struct GemmaTensor {
  char name[GEMMA_NAME_MAX];  // HF name, e.g. "model.layers.3.mlp.up_proj.weight"
  int ndim;                   // 1 or 2
  int64_t shape[2];
  size_t offset;              // in floats, within its buffer
  size_t numel;
  int layer;                  // -1 for globals
  int is_norm;                // norm weights: stored centred on 0 (Gemma 4: the gain), no weight decay
  int frozen;                 // a buffer (Gemma 4 layer_scalar): its gradient stays 0
} GemmaTensor;

typedef struct GemmaActivations GemmaActivations;  // defined in gemma.c

// Per-layer hooks (docs/model.md, "Layer hooks"): let a caller that keeps the
// layer parameters elsewhere (ZeRO-3 in parallel/zero3.c keeps only a shard per
// rank) hand each layer its parameters just before the layer runs and take
// its gradient right after the layer's backward. Generic callbacks: model/
// knows nothing of MPI. With model->hooks == NULL (the default) nothing
// changes. Any callback may be NULL; a non-zero return aborts the pass with
// the callback's error.
//   before_forward(l, &params): before layer l's forward. *params starts as
//     model->layers[l]; the hook may point it at a full layer buffer
//     (layer_numel floats) that stays valid until after_forward(l).
//   after_forward(l): layer l's forward is done with *params.
//   before_backward(l, &params, &grads): before layer l's backward, and
//     before its recompute when recompute = 1 (before_forward is not called
//     for the recompute). *params as above; *grads starts as model->layers_grad[l]
//     and may point at a layer buffer the backward accumulates into. Both
//     stay valid until after_backward(l).
//   after_backward(l): layer l's gradient is complete for this backward.
// Forward runs layers 0..L-1, backward L-1..0. The globals (embedding, final
// norm) and their gradients always come from model->globals(_grad).
typedef struct GemmaLayerHooks {
  void *ctx;
  int (*before_forward)(void *ctx, int layer, const float **params, FimiError *err);
  int (*after_forward)(void *ctx, int layer, FimiError *err);
  int (*before_backward)(void *ctx, int layer, const float **params, float **grads, FimiError *err);
  int (*after_backward)(void *ctx, int layer, FimiError *err);
} GemmaLayerHooks;

typedef struct GemmaModel {
  GemmaConfig config;
  // Parameters: globals then layers.
  float *globals;          // (V*C + C)
  float *layers[GEMMA_MAX_LAYERS];  // each (layer_numel)
  size_t globals_numel;
  size_t layer_numel;
  // Gradients, same layout; allocated by gemma_model_alloc_grads.
  float *globals_grad;
  float *layers_grad[GEMMA_MAX_LAYERS];
  // Tensor table in HF order (globals first, then layer by layer).
  GemmaTensor *tensors;
  int num_tensors;
  // Forward/backward state (allocated lazily for the largest B*T seen).
  GemmaActivations *acts;
  int recompute;           // 1: keep only layer inputs, recompute inside backward
  const GemmaLayerHooks *hooks;  // NULL: parameters from layers[], grads to layers_grad[]
} GemmaModel;

int gemma_model_create(GemmaModel *model, const GemmaConfig *cfg, FimiError *err);
void gemma_model_free(GemmaModel *model);
// N(0, 0.02) for matrices and embedding, 0 for norm weights (HF's init).
void gemma_model_init_random(GemmaModel *model, uint64_t seed);
int gemma_model_alloc_grads(GemmaModel *model, FimiError *err);
void gemma_model_zero_grads(GemmaModel *model);
// Pointer to a tensor's parameters / gradients (NULL grads if not allocated).
float *gemma_tensor_data(GemmaModel *model, const GemmaTensor *t);
float *gemma_tensor_grad(GemmaModel *model, const GemmaTensor *t);
const GemmaTensor *gemma_find_tensor(const GemmaModel *model, const char *name);
int64_t gemma_model_param_count(const GemmaModel *model);

// Forward over a batch of B sequences of length T.
// tokens (B, T) inputs; targets (B, T) the token to score at each position
// (usually tokens shifted left), -1 = not scored. Positions are 0..T-1.
// logprobs (B, T) out: log p(target | prefix), 0 where target < 0.
// Activations needed by backward are kept inside the model.
int gemma_forward(GemmaModel *model, const int *tokens, const int *targets, int B, int T, float *logprobs,
                  FimiError *err);
// Backward of sum(dlogprobs * logprobs) for the last forward; accumulates
// into the parameter gradients (call gemma_model_zero_grads first).
// dlogprobs (B, T). For SFT: dlogprobs = -mask / count.
int gemma_backward(GemmaModel *model, const float *dlogprobs, FimiError *err);
// Forward and backward in one call, for when dlogprobs (B, T) is known before
// the forward: SFT (-mask / count) and other per-token objectives whose
// weights do not depend on the log-probs. The LM head then does its forward
// and backward per block of rows (lm_head_logprob_forward_backward), which
// skips the backward's recompute of the logits (a quarter of the LM head's
// FLOPs). Results equal gemma_forward then gemma_backward (bitwise on one
// build): logprobs (B, T) out, parameter gradients accumulated. Works with
// either recompute setting; leaves the forward state valid, so a further
// gemma_backward may differentiate the same batch with other weights.
// Losses that need the log-probs first (DPO's sequence-level sigmoid, GRPO's
// ratios against the current policy) call gemma_forward, then gemma_backward.
int gemma_forward_backward(GemmaModel *model, const int *tokens, const int *targets, int B, int T,
                           const float *dlogprobs, float *logprobs, FimiError *err);

// Scale applied to embeddings: sqrt(C) rounded to the working dtype. This is
// the fp32 value (CPU backend); the CUDA bf16 backend rounds it to bf16, as HF
// does when the weights are bf16 (sqrt(640) = 25.298 -> 25.25).
float gemma_embed_scale(const GemmaConfig *cfg);

// Offsets (in floats) of each tensor inside one layer's flat buffer, in the
// order of the layout above. q_norm/k_norm are 0 and has_qk_norm 0 for gemma2.
// Gemma 4: k/v offsets are meaningless where has_k/has_v are 0, the
// per-layer input tensors where has_ple is 0.
typedef struct GemmaLayerOffsets {
  size_t input_norm, q, k, v, o, q_norm, k_norm, post_attn_norm, pre_ff_norm, gate, up, down, post_ff_norm;
  size_t ple_gate, ple_proj, ple_norm, layer_scalar;  // Gemma 4
  size_t numel;  // floats of every layer buffer (the largest layer's)
  size_t used;   // floats this layer's tensors occupy (<= numel)
  int has_qk_norm;
  int has_k, has_v;  // 1 for Gemma 2/3
  int has_ple;       // Gemma 4 with per-layer embeddings
  int gemma4;        // norms are gains (rmsnorm_*_gain), value norm, layer scalar
} GemmaLayerOffsets;
// Layer 0's offsets (every layer's for Gemma 2/3).
void gemma_layer_offsets(const GemmaConfig *cfg, GemmaLayerOffsets *off);
// Layer l's offsets (Gemma 4 layers differ).
void gemma_layer_offsets_at(const GemmaConfig *cfg, int layer, GemmaLayerOffsets *off);

// Offsets (in floats) inside the globals buffer.
typedef struct GemmaGlobalOffsets {
  size_t embed, norm;                    // (V, C), (C)
  size_t ple_embed, ple_proj, ple_norm;  // Gemma 4 with P > 0: (Vp, L*P), (L*P, C), (P)
  size_t numel;
} GemmaGlobalOffsets;
void gemma_global_offsets(const GemmaConfig *cfg, GemmaGlobalOffsets *off);

// How layer `layer` attends: shared by the training forward and decode so the
// two can never disagree. Sliding layers: window W and rope_local_base_freq
// (gemma3); global layers: no window, rope_theta and the linear rope scaling
// factor. Gemma 2 uses rope_theta everywhere and softcaps the scores.
typedef struct GemmaAttnSpec {
  int window;           // 0 = full causal
  float rope_theta;
  float rope_position_scale;  // positions are divided by it (1 = none)
  float softcap;        // 0 = none
  float scale;          // query_pre_attn_scalar^-0.5 (Gemma 4: 1)
  int rope_pairs;       // pairs that rotate (hd/2 except Gemma 4's partial rope)
} GemmaAttnSpec;
void gemma_attn_spec(const GemmaConfig *cfg, int layer, GemmaAttnSpec *spec);
// (query, key) pairs one head of a T-token sequence computes under the causal
// mask and a window (<= 0: none): the sum over positions i of min(i + 1,
// window). The attention FLOPs of tests and benchmarks count these.
double gemma_visible_pairs(int T, int window);

// Gemma 4's per-layer inputs (Gemma4TextModel.get_per_layer_inputs then
// project_per_layer_inputs) for N rows: x0 (N, C) the scaled embedding,
// tokens (N) in [0, Vp); out (L, N, P) layer l's inputs at l:
//   (rmsnorm(x0 @ W^T * C^-0.5 per layer's P values) + E[token] * sqrt(P)) * 2^-0.5
// proj (N, L*P) and rstd (N*L) keep the norm's input and rstd, normed
// (N, L*P) its output. Shared by the forward and decode.
void gemma_per_layer_inputs(const GemmaModel *model, const float *x0, const int *tokens, int N, float *proj,
                            float *rstd, float *normed, float *out);

// Frees the forward/backward state (called by gemma_model_free; also useful to
// drop activation memory between phases). The next forward re-allocates.
void gemma_activations_free(GemmaModel *model);
// Floats the activations of a forward (and backward) over N = B*T tokens
// occupy with the model's current recompute setting: docs/model.md explains.
size_t gemma_activation_floats(const GemmaConfig *cfg, int N, int recompute, int with_backward);

#endif
