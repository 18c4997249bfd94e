// model/gemma_cuda.c: the Gemma forward, backward and KV-cache decode step on
// the CUDA backend (see gemma_cuda.h), written out layer by layer in the
// same op order as model/gemma.c and model/decode.c, calling the *_cuda ops
// of kernels/cuda/ops_cuda.h. Defines GemmaCudaActs and the device memory
// it carves. Plain C with no CUDA header: every device operation goes
// through ops_cuda.h, so tests/standin/ can run this file on the host.
// The activation layout and its size (gemma_cuda_activation_bytes) are
// compiled in every build, so a CPU-only build can plan GPU memory.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemma_cuda.h"
#include "model/decode.h"
#include "model/safetensors.h"

// What one layer's forward keeps for its backward, as LayerActs in gemma.c.
// bf16 unless marked fp32. N = B*T rows, qd = nh*hd, kvd = nkv*hd.
typedef struct CudaLayerActs {
  bf16 *ln1;        // (N, C) input_layernorm(h_in)
  float *ln1_rstd;  // (N) fp32
  bf16 *q_raw;      // (N, qd) q_proj output before q_norm (gemma3; NULL for gemma2)
  float *q_rstd;    // (N, nh) fp32
  bf16 *k_raw;      // (N, kvd) (gemma3)
  float *k_rstd;    // (N, nkv) fp32
  bf16 *q;          // (B, T, nh, hd) normed and roped queries
  bf16 *k;          // (B, T, nkv, hd) normed and roped keys
  bf16 *v;          // (B, T, nkv, hd)
  bf16 *att;        // (N, qd) attention output, o_proj input
  float *att_lse;   // (B, nh, T) fp32
  bf16 *o;          // (N, C) o_proj output
  float *o_rstd;    // (N) fp32
  bf16 *h_mid;      // (N, C) residual stream after the attention block
  bf16 *ln2;        // (N, C) pre_feedforward_layernorm(h_mid)
  float *ln2_rstd;  // (N) fp32
  bf16 *gate;       // (N, I)
  bf16 *up;         // (N, I)
  bf16 *gelu;       // (N, I) gelu_tanh(gate) * up
  bf16 *mlp;        // (N, C) down_proj output
  float *mlp_rstd;  // (N) fp32
  // Gemma 4 only (NULL otherwise):
  bf16 *v_raw;      // (N, kvd) v_proj output before the value norm
  float *v_rstd;    // (N, nkv) fp32 value norm rstd per head
  bf16 *h_ff;       // (N, C) residual after the MLP block, the per-layer input block's input
  bf16 *ple_gate;   // (N, P) per_layer_input_gate output
  bf16 *ple_act;    // (N, P) gelu_tanh(ple_gate) * per-layer input
  bf16 *ple_proj;   // (N, C) per_layer_projection output
  float *ple_rstd;  // (N) fp32
} CudaLayerActs;

struct GemmaCudaActs {
  int capacity;          // rows (B*T) every buffer holds
  void *memory;          // device: everything the forward keeps
  CudaLayerActs *sets;   // (L) host array of device views
  bf16 *residual;        // (L+1, N, C): layer l's input at l, the last layer's output at L
  bf16 *final_norm;      // (N, C) model.norm output, LM head input
  float *final_rstd;     // (N) fp32
  float *lm_lse;         // (N) fp32
  float *logprobs;       // (N) fp32
  float *dlogprobs;      // (N) fp32, the backward's input
  int *tokens;           // (N) device copy of the last forward's inputs
  int *targets;          // (N)
  int *positions;        // (N) position of each row within its sequence
  int *host_positions;   // (N) host staging for positions
  // Gemma 4: per-layer inputs and the keys/values kv-shared layers reuse
  // (outside the layer sets: a shared layer's recompute reads them).
  bf16 *ple;             // (L, N, P) each layer's per-layer input
  bf16 *ple_proj;        // (N, L*P) per_layer_model_projection(x0) * C^-0.5, the norm's input
  float *ple_rstd;       // (N*L) fp32
  bf16 *ple_normed;      // (N, L*P) per_layer_projection_norm output
  bf16 *ple_embedded;    // (N, L*P) the per-layer table's rows * sqrt(P)
  bf16 *store_k[GEMMA_MAX_LAYERS];  // (N, kvd of l) roped keys of a layer kv-shared layers read; else NULL
  bf16 *store_v[GEMMA_MAX_LAYERS];  // (N, kvd of l) its normed values
  // Backward scratch, allocated by the first backward.
  void *grad_memory;
  bf16 *dres;                 // (N, C) gradient wrt the residual stream
  bf16 *dA, *dB;              // (N, C) temporaries
  bf16 *dgelu, *dgate, *dup;  // (N, I)
  bf16 *dq, *datt;            // (N, qd)
  bf16 *dk, *dv, *dk_raw;     // (N, kvd)
  // Gemma 4
  bf16 *dv_raw;               // (N, kvd) gradient wrt the value norm's input
  bf16 *dple_act, *dple_gate; // (N, P)
  bf16 *dple;                 // (L, N, P) gradient wrt each layer's per-layer input
  bf16 *dple_flat;            // (N, L*P) the same in the model's layout, * 2^-0.5
  bf16 *dple_proj;            // (N, L*P)
  bf16 *dstore_k[GEMMA_MAX_LAYERS];  // (N, kvd of l) what kv-shared layers send back to layer l's keys
  bf16 *dstore_v[GEMMA_MAX_LAYERS];  // (N, kvd of l) and values
  int B, T;
  int valid;
};

// ---------------------------------------------------------------------------
// Device memory carved out of one allocation. The same walk counts
// (base == NULL) and assigns, so the size formula cannot drift.

typedef struct Carver {
  char *base;
  size_t used;  // bytes
} Carver;

static void *carve(Carver *c, size_t bytes) {
  void *p = c->base ? c->base + c->used : NULL;
  c->used += (bytes + 255) & ~(size_t)255;  // 256-byte aligned: vector loads and cuBLASLt's preferences
  return p;
}
static bf16 *carve_bf16(Carver *c, size_t n) { return carve(c, n * sizeof(bf16)); }
static float *carve_f32(Carver *c, size_t n) { return carve(c, n * sizeof(float)); }

static size_t ple_width(const GemmaConfig *cfg) {
  return cfg->family == GEMMA_FAMILY_GEMMA4 ? (size_t)cfg->hidden_size_per_layer_input : 0;
}

// One layer set, sized for the widest layer (Gemma 4 layers differ).
static void carve_layer(Carver *c, CudaLayerActs *a, const GemmaConfig *cfg, size_t N) {
  GemmaLayerWidths d = gemma_widest_layer(cfg);
  size_t C = cfg->hidden_size, I = d.mlp, nh = cfg->num_attention_heads;
  size_t nkv = d.nkv, qd = d.qd, kvd = d.kvd, P = ple_width(cfg);
  int gemma4 = cfg->family == GEMMA_FAMILY_GEMMA4;
  memset(a, 0, sizeof *a);
  a->ln1 = carve_bf16(c, N * C);
  a->ln1_rstd = carve_f32(c, N);
  if (cfg->family != GEMMA_FAMILY_GEMMA2) {
    a->q_raw = carve_bf16(c, N * qd);
    a->q_rstd = carve_f32(c, N * nh);
    a->k_raw = carve_bf16(c, N * kvd);
    a->k_rstd = carve_f32(c, N * nkv);
  }
  a->q = carve_bf16(c, N * qd);
  a->k = carve_bf16(c, N * kvd);
  a->v = carve_bf16(c, N * kvd);
  a->att = carve_bf16(c, N * qd);
  a->att_lse = carve_f32(c, N * nh);
  a->o = carve_bf16(c, N * C);
  a->o_rstd = carve_f32(c, N);
  a->h_mid = carve_bf16(c, N * C);
  a->ln2 = carve_bf16(c, N * C);
  a->ln2_rstd = carve_f32(c, N);
  a->gate = carve_bf16(c, N * I);
  a->up = carve_bf16(c, N * I);
  a->gelu = carve_bf16(c, N * I);
  a->mlp = carve_bf16(c, N * C);
  a->mlp_rstd = carve_f32(c, N);
  if (gemma4) {
    a->v_raw = carve_bf16(c, N * kvd);
    a->v_rstd = carve_f32(c, N * nkv);
  }
  if (P > 0) {
    a->h_ff = carve_bf16(c, N * C);
    a->ple_gate = carve_bf16(c, N * P);
    a->ple_act = carve_bf16(c, N * P);
    a->ple_proj = carve_bf16(c, N * C);
    a->ple_rstd = carve_f32(c, N);
  }
}

// k[l], v[l] (N, kvd of l) for each layer kv-shared layers read, NULL for the others.
static void carve_stored_kv(Carver *c, const GemmaConfig *cfg, size_t N, bf16 **k, bf16 **v) {
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    size_t kvd = (size_t)shape.kv_heads * shape.head_dim;
    k[l] = shape.stores_kv ? carve_bf16(c, N * kvd) : NULL;
    v[l] = shape.stores_kv ? carve_bf16(c, N * kvd) : NULL;
  }
}

static void carve_gemma4_forward(Carver *c, GemmaCudaActs *acts, const GemmaConfig *cfg, size_t N) {
  size_t L = cfg->num_hidden_layers, P = ple_width(cfg);
  if (P > 0) {
    acts->ple = carve_bf16(c, L * N * P);
    acts->ple_proj = carve_bf16(c, N * L * P);
    acts->ple_rstd = carve_f32(c, N * L);
    acts->ple_normed = carve_bf16(c, N * L * P);
    acts->ple_embedded = carve_bf16(c, N * L * P);
  }
  carve_stored_kv(c, cfg, N, acts->store_k, acts->store_v);
}

// sets: L (every layer keeps its activations) or 1 (recompute: the layer
// being run or recomputed uses the only set).
static size_t carve_forward(Carver *c, GemmaCudaActs *acts, const GemmaConfig *cfg, size_t N, size_t sets) {
  size_t C = cfg->hidden_size, L = cfg->num_hidden_layers;
  acts->residual = carve_bf16(c, (L + 1) * N * C);
  for (size_t l = 0; l < sets; l++) {
    CudaLayerActs scratch;
    carve_layer(c, acts->sets ? &acts->sets[l] : &scratch, cfg, N);
  }
  if (cfg->family == GEMMA_FAMILY_GEMMA4) carve_gemma4_forward(c, acts, cfg, N);
  acts->final_norm = carve_bf16(c, N * C);
  acts->final_rstd = carve_f32(c, N);
  acts->lm_lse = carve_f32(c, N);
  acts->logprobs = carve_f32(c, N);
  acts->dlogprobs = carve_f32(c, N);
  acts->tokens = carve(c, N * sizeof(int));
  acts->targets = carve(c, N * sizeof(int));
  acts->positions = carve(c, N * sizeof(int));
  return c->used;
}

static size_t carve_backward(Carver *c, GemmaCudaActs *acts, const GemmaConfig *cfg, size_t N) {
  GemmaLayerWidths d = gemma_widest_layer(cfg);
  size_t C = cfg->hidden_size, I = d.mlp, qd = d.qd, kvd = d.kvd, L = cfg->num_hidden_layers, P = ple_width(cfg);
  acts->dres = carve_bf16(c, N * C);
  acts->dA = carve_bf16(c, N * C);
  acts->dB = carve_bf16(c, N * C);
  acts->dgelu = carve_bf16(c, N * I);
  acts->dgate = carve_bf16(c, N * I);
  acts->dup = carve_bf16(c, N * I);
  acts->dq = carve_bf16(c, N * qd);
  acts->datt = carve_bf16(c, N * qd);
  acts->dk = carve_bf16(c, N * kvd);
  acts->dv = carve_bf16(c, N * kvd);
  acts->dk_raw = cfg->family != GEMMA_FAMILY_GEMMA2 ? carve_bf16(c, N * kvd) : NULL;
  if (cfg->family != GEMMA_FAMILY_GEMMA4) return c->used;
  acts->dv_raw = carve_bf16(c, N * kvd);
  if (P > 0) {
    acts->dple_act = carve_bf16(c, N * P);
    acts->dple_gate = carve_bf16(c, N * P);
    acts->dple = carve_bf16(c, L * N * P);
    acts->dple_flat = carve_bf16(c, N * L * P);
    acts->dple_proj = carve_bf16(c, N * L * P);
  }
  carve_stored_kv(c, cfg, N, acts->dstore_k, acts->dstore_v);
  return c->used;
}

size_t gemma_cuda_activation_bytes(const GemmaConfig *cfg, int N, int recompute) {
  GemmaCudaActs acts;
  memset(&acts, 0, sizeof acts);  // sets NULL: carve_forward counts into a scratch set
  Carver count = {NULL, 0};
  carve_forward(&count, &acts, cfg, (size_t)N, recompute ? 1 : (size_t)cfg->num_hidden_layers);
  size_t forward = count.used;
  Carver back = {NULL, 0};
  return forward + carve_backward(&back, &acts, cfg, (size_t)N);
}

#ifdef FIMI_HAVE_CUDA

static void acts_free(GemmaCudaModel *model) {
  GemmaCudaActs *acts = model->acts;
  if (!acts) return;
  cuda_free(acts->memory);
  cuda_free(acts->grad_memory);
  free(acts->sets);
  free(acts->host_positions);
  free(acts);
  model->acts = NULL;
}

// Makes sure the forward state holds N rows. Grows only, so steady-state
// training never allocates; growing drops the backward scratch (re-carved by
// the next backward).
static int ensure_activations(GemmaCudaModel *model, int N, FimiError *err) {
  if (model->acts && model->acts->capacity >= N) return 0;
  const GemmaConfig *cfg = &model->config;
  acts_free(model);
  GemmaCudaActs *acts = fimi_calloc(1, sizeof *acts, err);
  if (!acts) return -1;
  model->acts = acts;
  acts->capacity = N;
  size_t sets = model->recompute ? 1 : (size_t)cfg->num_hidden_layers;
  acts->sets = fimi_calloc(sets, sizeof(CudaLayerActs), err);
  acts->host_positions = acts->sets ? fimi_calloc((size_t)N, sizeof(int), err) : NULL;
  if (!acts->host_positions) goto fail;
  Carver count = {NULL, 0};
  size_t bytes = carve_forward(&count, acts, cfg, (size_t)N, sets);
  void *memory = NULL;
  if (cuda_malloc(&memory, bytes, err) != 0) goto fail;
  acts->memory = memory;
  Carver assign = {memory, 0};
  carve_forward(&assign, acts, cfg, (size_t)N, sets);
  return 0;
fail:
  acts_free(model);
  return fimi_fail_wrap(err, "GPU activations for %d rows", N);
}

static int ensure_grad_scratch(GemmaCudaModel *model, FimiError *err) {
  GemmaCudaActs *acts = model->acts;
  if (acts->grad_memory) return 0;
  Carver count = {NULL, 0};
  size_t bytes = carve_backward(&count, acts, &model->config, (size_t)acts->capacity);
  void *memory = NULL;
  if (cuda_malloc(&memory, bytes, err) != 0) return fimi_fail_wrap(err, "GPU backward scratch");
  acts->grad_memory = memory;
  Carver assign = {memory, 0};
  carve_backward(&assign, acts, &model->config, (size_t)acts->capacity);
  return 0;
}

// ---------------------------------------------------------------------------
// Parameters

// Checks the config and fills model's shape fields (no allocation).
static int init_shape(GemmaCudaModel *model, const GemmaConfig *cfg, CudaContext *ctx, FimiError *err) {
  memset(model, 0, sizeof *model);
  if (gemma_config_validate(cfg, err) != 0) return fimi_fail_wrap(err, "GPU model");
  // attention_*_cuda supports these head sizes only (ops_cuda.h).
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    int hd = shape.head_dim;
    if (hd != 64 && hd != 128 && hd != 256 && hd != 512)
      return fimi_fail(err, "GPU model: layer %d's head dim %d is not supported by the CUDA attention (64, 128, 256 "
                            "or 512)", l, hd);
  }
  model->config = *cfg;
  model->ctx = ctx;
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  GemmaGlobalOffsets g;
  gemma_global_offsets(cfg, &g);
  model->globals_numel = g.numel;
  model->layer_numel = off.numel;
  model->num_params = model->globals_numel + (size_t)cfg->num_hidden_layers * model->layer_numel;
  // HF multiplies by torch.tensor(sqrt(C), dtype=bf16) when the weights are bf16.
  model->embed_scale = bf16_to_float(float_to_bf16(gemma_embed_scale(cfg)));
  // Gemma 4's per-layer table is a scaled embedding too: sqrt(P) in bf16.
  model->ple_embed_scale = bf16_to_float(float_to_bf16(sqrtf((float)ple_width(cfg))));
  return 0;
}

static int alloc_params(GemmaCudaModel *model, size_t numel, FimiError *err) {
  void *params = NULL;
  if (cuda_malloc(&params, numel * sizeof(bf16), err) != 0)
    return fimi_fail_wrap(err, "GPU model: %zu MiB of bf16 weights", numel * sizeof(bf16) >> 20);
  model->params = params;
  model->params_numel = model->grads_numel = numel;
  return 0;
}

int gemma_cuda_create(GemmaCudaModel *model, const GemmaConfig *cfg, CudaContext *ctx, FimiError *err) {
  if (init_shape(model, cfg, ctx, err) != 0) return -1;
  return alloc_params(model, model->num_params, err);
}

int gemma_cuda_create_sharded(GemmaCudaModel *model, const GemmaConfig *cfg, CudaContext *ctx,
                              const GemmaCudaLayerHooks *hooks, size_t globals_capacity, FimiError *err) {
  if (init_shape(model, cfg, ctx, err) != 0) return -1;
  if (!hooks || !hooks->before_forward || !hooks->before_backward)
    return fimi_fail(err, "GPU model: a sharded model needs before_forward and before_backward hooks");
  if (globals_capacity < model->globals_numel)
    return fimi_fail(err, "GPU model: globals capacity %zu is below the globals' %zu elements", globals_capacity,
                     model->globals_numel);
  if (alloc_params(model, globals_capacity, err) != 0) return -1;
  model->hooks = hooks;
  return 0;
}

int gemma_cuda_set_attention(GemmaCudaModel *model, const char *name, FimiError *err) {
  if (strcmp(name, "fimi") == 0) {
    model->attention = GEMMA_CUDA_ATTENTION_FIMI;
    return 0;
  }
  if (strcmp(name, "cudnn") != 0)
    return fimi_fail(err, "cuda.attention: unknown value '%s' (expected fimi or cudnn)", name);
  const GemmaConfig *cfg = &model->config;
  if (cfg->attn_logit_softcapping > 0.0)
    return fimi_fail(err, "cuda.attention = cudnn: this model has attn_logit_softcapping %g, which cuDNN's attention "
                          "cannot apply; use cuda.attention = fimi",
                     cfg->attn_logit_softcapping);
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    if (shape.head_dim > 256)  // cuDNN's fused SDPA graphs take head dims up to 256
      return fimi_fail(err, "cuda.attention = cudnn: layer %d has head dim %d, above the 256 cuDNN's attention takes; "
                            "use cuda.attention = fimi", l, shape.head_dim);
  }
  model->attention = GEMMA_CUDA_ATTENTION_CUDNN;
  return 0;
}

void gemma_cuda_set_recompute(GemmaCudaModel *model, int recompute) {
  recompute = recompute != 0;
  if (model->recompute == recompute) return;
  acts_free(model);  // the next forward carves L sets or one
  model->recompute = recompute;
}

void gemma_cuda_free(GemmaCudaModel *model) {
  if (!model) return;
  acts_free(model);
  cuda_free(model->params);
  cuda_free(model->grads);
  memset(model, 0, sizeof *model);
}

static int same_shape(const GemmaConfig *a, const GemmaConfig *b) {
  return a->family == b->family && a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
         a->intermediate_size == b->intermediate_size && a->num_hidden_layers == b->num_hidden_layers &&
         a->num_attention_heads == b->num_attention_heads && a->num_key_value_heads == b->num_key_value_heads &&
         a->head_dim == b->head_dim && a->hidden_size_per_layer_input == b->hidden_size_per_layer_input &&
         a->global_head_dim == b->global_head_dim && a->num_global_key_value_heads == b->num_global_key_value_heads &&
         a->attention_k_eq_v == b->attention_k_eq_v && a->num_kv_shared_layers == b->num_kv_shared_layers &&
         a->use_double_wide_mlp == b->use_double_wide_mlp &&
         memcmp(a->layer_is_sliding, b->layer_is_sliding, sizeof a->layer_is_sliding) == 0;
}

bf16 *gemma_cuda_layer_params(GemmaCudaModel *model, int layer) {
  if (model->hooks) return NULL;
  return model->params + model->globals_numel + (size_t)layer * model->layer_numel;
}

static float *layer_grads(GemmaCudaModel *model, int layer) {
  if (model->hooks) return NULL;
  return model->grads + model->globals_numel + (size_t)layer * model->layer_numel;
}

// Layer l's parameters for its forward: resident, or from before_forward.
static int forward_params(GemmaCudaModel *model, int l, const bf16 **w, FimiError *err) {
  *w = gemma_cuda_layer_params(model, l);
  if (model->hooks && model->hooks->before_forward(model->hooks->ctx, l, w, err) != 0) return -1;
  return *w ? 0 : fimi_fail(err, "GPU model: no parameters for layer %d", l);
}

static int forward_done(GemmaCudaModel *model, int l, FimiError *err) {
  const GemmaCudaLayerHooks *h = model->hooks;
  return h && h->after_forward ? h->after_forward(h->ctx, l, err) : 0;
}

// Layer l's parameters and gradient buffer for its backward (and recompute).
static int backward_params(GemmaCudaModel *model, int l, const bf16 **w, float **g, FimiError *err) {
  *w = gemma_cuda_layer_params(model, l);
  *g = layer_grads(model, l);
  if (model->hooks && model->hooks->before_backward(model->hooks->ctx, l, w, g, err) != 0) return -1;
  return *w && *g ? 0 : fimi_fail(err, "GPU model: no parameters or gradient buffer for layer %d", l);
}

static int backward_done(GemmaCudaModel *model, int l, FimiError *err) {
  const GemmaCudaLayerHooks *h = model->hooks;
  return h && h->after_backward ? h->after_backward(h->ctx, l, err) : 0;
}

int gemma_cuda_upload_weights(GemmaCudaModel *model, const GemmaModel *cpu, FimiError *err) {
  if (!same_shape(&model->config, &cpu->config) || cpu->globals_numel != model->globals_numel ||
      cpu->layer_numel != model->layer_numel)
    return fimi_fail(err, "GPU model: uploading weights of a model with another shape");
  if (model->hooks) return fimi_fail(err, "GPU model: a sharded model gets its layers through its hooks, not an upload");
  if (!cpu->globals) return fimi_fail(err, "GPU model: the CPU model has no global parameters");
  for (int l = 0; l < model->config.num_hidden_layers; l++)
    if (!cpu->layers[l]) return fimi_fail(err, "GPU model: the CPU model holds no parameters for layer %d", l);
  cuda_upload_bf16(model->ctx, model->params, cpu->globals, model->globals_numel);
  for (int l = 0; l < model->config.num_hidden_layers; l++)
    cuda_upload_bf16(model->ctx, gemma_cuda_layer_params(model, l), cpu->layers[l], model->layer_numel);
  return cuda_context_sync(model->ctx, err);
}

int gemma_cuda_alloc_grads(GemmaCudaModel *model, FimiError *err) {
  if (!model->grads) {
    void *grads = NULL;
    if (cuda_malloc(&grads, model->grads_numel * sizeof(float), err) != 0)
      return fimi_fail_wrap(err, "GPU model: %zu MiB of fp32 gradients", model->grads_numel * sizeof(float) >> 20);
    model->grads = grads;
  }
  gemma_cuda_zero_grads(model);
  return 0;
}

void gemma_cuda_zero_grads(GemmaCudaModel *model) {
  if (model->grads) cuda_fill_bytes(model->ctx, model->grads, 0, model->grads_numel * sizeof(float));
}

size_t gemma_cuda_tensor_offset(const GemmaCudaModel *model, const GemmaTensor *t) {
  return (t->layer < 0 ? 0 : model->globals_numel + (size_t)t->layer * model->layer_numel) + t->offset;
}

void gemma_cuda_download_grads(GemmaCudaModel *model, float *host_flat) {
  cuda_download_f32(model->ctx, host_flat, model->grads, model->hooks ? model->globals_numel : model->num_params);
}

const float *gemma_cuda_logprobs_device(const GemmaCudaModel *model) {
  return model->acts && model->acts->valid ? model->acts->logprobs : NULL;
}

const bf16 *gemma_cuda_final_hidden_device(const GemmaCudaModel *model) {
  return model->acts && model->acts->valid ? model->acts->final_norm : NULL;
}

// ---------------------------------------------------------------------------
// Forward

// Gemma 2/3 norms scale by (1 + w), Gemma 4's by w (gemma.c's norm_forward).
static void norm_forward(CudaContext *ctx, const GemmaLayerOffsets *off, bf16 *out, float *rstd, const bf16 *inp,
                         const bf16 *weight, int N, int C, float eps) {
  if (off->gemma4) rmsnorm_forward_gain_cuda(ctx, out, rstd, inp, weight, N, C, eps);
  else rmsnorm_forward_cuda(ctx, out, rstd, inp, weight, N, C, eps);
}

static void norm_backward(CudaContext *ctx, const GemmaLayerOffsets *off, bf16 *dinp, float *dweight,
                          const bf16 *dout, const bf16 *inp, const bf16 *weight, const float *rstd, int N, int C) {
  if (off->gemma4) rmsnorm_backward_gain_cuda(ctx, dinp, dweight, dout, inp, weight, rstd, N, C);
  else rmsnorm_backward_cuda(ctx, dinp, dweight, dout, inp, weight, rstd, N, C);
}

static CudaLayerActs *layer_acts(GemmaCudaModel *model, int l);

// Where layer l's attention reads its keys and values (B, T, nkv, hd): its
// own set's, or the stored ones of its kv source (Gemma 4), as layer_kv in gemma.c.
static void layer_kv(GemmaCudaModel *model, int l, const GemmaLayerShape *shape, bf16 **k, bf16 **v) {
  GemmaCudaActs *acts = model->acts;
  if (acts->store_k[shape->kv_source]) {
    *k = acts->store_k[shape->kv_source];
    *v = acts->store_v[shape->kv_source];
  } else {
    *k = layer_acts(model, l)->k;
    *v = layer_acts(model, l)->v;
  }
}

// Gemma 4's per-layer input block and layer scalar on h_ff (N, C), the
// residual after the MLP block (per_layer_input_forward in gemma.c):
// h_out = scalar * (h_ff + post_per_layer_input_norm(per_layer_projection(
// gelu_tanh(per_layer_input_gate(h_ff)) * ple_l))). Without per-layer
// inputs h_ff is h_out and only the scalar applies.
static void per_layer_input_forward(GemmaCudaModel *model, int l, const GemmaLayerOffsets *off, const bf16 *w,
                                    CudaLayerActs *a, bf16 *h_out, int N) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  int C = cfg->hidden_size, P = (int)ple_width(cfg);
  if (off->has_ple) {
    const bf16 *ple_l = model->acts->ple + (size_t)l * N * P;  // (N, P)
    matmul_forward_cuda(ctx, a->ple_gate, a->h_ff, w + off->ple_gate, N, C, P);
    geglu_forward_cuda(ctx, a->ple_act, a->ple_gate, ple_l, (size_t)N * P);
    matmul_forward_cuda(ctx, a->ple_proj, a->ple_act, w + off->ple_proj, N, P, C);
    rmsnorm_forward_gain_cuda(ctx, h_out, a->ple_rstd, a->ple_proj, w + off->ple_norm, N, C,
                              (float)cfg->rms_norm_eps);
    residual_add_cuda(ctx, h_out, h_out, a->h_ff, (size_t)N * C);
  }
  scale_by_device_scalar_cuda(ctx, h_out, h_out, w + off->layer_scalar, (size_t)N * C);
}

// Attention through fimi's kernels or cuDNN's (model->attention).
static int layer_attention_forward(GemmaCudaModel *model, int l, CudaLayerActs *a, const bf16 *k, const bf16 *v, int B,
                             int T, int nkv, int hd, const GemmaAttnSpec *spec, FimiError *err) {
  CudaContext *ctx = model->ctx;
  int nh = model->config.num_attention_heads;
  if (model->attention == GEMMA_CUDA_ATTENTION_CUDNN) {
    if (attention_forward_cudnn(ctx, a->att, a->att_lse, a->q, k, v, B, T, nh, nkv, hd, spec->window, spec->softcap,
                                spec->scale, err) != 0)
      return fimi_fail_wrap(err, "layer %d", l);
    return 0;
  }
  attention_forward_cuda(ctx, a->att, a->att_lse, a->q, k, v, B, T, nh, nkv, hd, spec->window, spec->softcap,
                         spec->scale);
  return 0;
}

// One decoder layer: h_out = layer(h_in) with device parameters w
// (layer_numel), saving internals into a. Same ops in the same order as
// layer_forward in gemma.c.
static int layer_forward(GemmaCudaModel *model, int l, const bf16 *w, CudaLayerActs *a, const bf16 *h_in,
                         bf16 *h_out, int B, int T, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, l, &shape);
  int N = B * T, C = cfg->hidden_size, I = shape.intermediate, hd = shape.head_dim;
  int nh = cfg->num_attention_heads, nkv = shape.kv_heads, qd = nh * hd, kvd = nkv * hd;
  float eps = (float)cfg->rms_norm_eps;
  GemmaLayerOffsets off;
  gemma_layer_offsets_at(cfg, l, &off);
  GemmaAttnSpec spec;
  gemma_attn_spec(cfg, l, &spec);
  const int *pos = model->acts->positions;
  bf16 *k, *v;  // (N, kvd) the keys and values attention reads
  layer_kv(model, l, &shape, &k, &v);

  // attention block: h_mid = h_in + post_attention_layernorm(o_proj(attn(input_layernorm(h_in))))
  norm_forward(ctx, &off, a->ln1, a->ln1_rstd, h_in, w + off.input_norm, N, C, eps);
  bf16 *q_lin = off.has_qk_norm ? a->q_raw : a->q;  // (N, qd)
  matmul_forward_cuda(ctx, q_lin, a->ln1, w + off.q, N, C, qd);
  if (off.has_qk_norm) norm_forward(ctx, &off, a->q, a->q_rstd, a->q_raw, w + off.q_norm, N * nh, hd, eps);
  rope_forward_partial_cuda(ctx, a->q, a->q, pos, N, nh, hd, spec.rope_theta, spec.rope_position_scale,
                            spec.rope_pairs);
  // A kv-shared layer (Gemma 4) computes no keys or values: it reads its source's.
  if (off.has_k) {
    bf16 *k_lin = off.has_qk_norm ? a->k_raw : k;  // (N, kvd)
    matmul_forward_cuda(ctx, k_lin, a->ln1, w + off.k, N, C, kvd);
    // Gemma 4's values pass a norm without gain; with attention_k_eq_v the
    // full-attention layers take them from k_proj (before k_norm).
    bf16 *v_lin = off.gemma4 ? (off.has_v ? a->v_raw : a->k_raw) : v;  // (N, kvd)
    if (off.has_v) matmul_forward_cuda(ctx, v_lin, a->ln1, w + off.v, N, C, kvd);
    if (off.gemma4) rmsnorm_forward_gain_cuda(ctx, v, a->v_rstd, v_lin, NULL, N * nkv, hd, eps);
    if (off.has_qk_norm) norm_forward(ctx, &off, k, a->k_rstd, a->k_raw, w + off.k_norm, N * nkv, hd, eps);
    rope_forward_partial_cuda(ctx, k, k, pos, N, nkv, hd, spec.rope_theta, spec.rope_position_scale,
                              spec.rope_pairs);
  }
  if (layer_attention_forward(model, l, a, k, v, B, T, nkv, hd, &spec, err) != 0) return -1;
  matmul_forward_cuda(ctx, a->o, a->att, w + off.o, N, qd, C);
  norm_forward(ctx, &off, a->h_mid, a->o_rstd, a->o, w + off.post_attn_norm, N, C, eps);
  residual_add_cuda(ctx, a->h_mid, a->h_mid, h_in, (size_t)N * C);

  // MLP block: h_out = h_mid + post_feedforward_layernorm(down(gelu_tanh(gate(x)) * up(x)))
  norm_forward(ctx, &off, a->ln2, a->ln2_rstd, a->h_mid, w + off.pre_ff_norm, N, C, eps);
  matmul_forward_cuda(ctx, a->gate, a->ln2, w + off.gate, N, C, I);
  matmul_forward_cuda(ctx, a->up, a->ln2, w + off.up, N, C, I);
  geglu_forward_cuda(ctx, a->gelu, a->gate, a->up, (size_t)N * I);
  matmul_forward_cuda(ctx, a->mlp, a->gelu, w + off.down, N, I, C);
  bf16 *h_ff = off.has_ple ? a->h_ff : h_out;  // (N, C)
  norm_forward(ctx, &off, h_ff, a->mlp_rstd, a->mlp, w + off.post_ff_norm, N, C, eps);
  residual_add_cuda(ctx, h_ff, h_ff, a->h_mid, (size_t)N * C);
  if (off.gemma4) per_layer_input_forward(model, l, &off, w, a, h_out, N);
  return 0;
}

// Buffers of Gemma 4's per-layer inputs for N rows (the forward's in acts,
// decode's in its step scratch).
typedef struct PleBuffers {
  bf16 *proj;      // (N, L*P) per_layer_model_projection(x0) * C^-0.5
  float *rstd;     // (N*L) fp32, or NULL (decode)
  bf16 *normed;    // (N, L*P) per_layer_projection_norm(proj)
  bf16 *embedded;  // (N, L*P) the per-layer table's rows * sqrt(P)
  bf16 *out;       // (L, N, P) layer l's per-layer inputs at l
} PleBuffers;

// gemma_per_layer_inputs on the device: x0 (N, C) the scaled embedding,
// tokens (N) device ids; out (L, N, P) =
// (rmsnorm(x0 @ W^T * C^-0.5 per layer's P values) + E[token] * sqrt(P)) * 2^-0.5.
static void per_layer_inputs(GemmaCudaModel *model, const bf16 *x0, const int *tokens, int N, const PleBuffers *b) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  GemmaGlobalOffsets g;
  gemma_global_offsets(cfg, &g);
  int C = cfg->hidden_size, L = cfg->num_hidden_layers, P = (int)ple_width(cfg), LP = L * P;
  // HF multiplies by Python floats, which torch rounds to the tensor's dtype's math (fp32 here)
  float proj_scale = (float)pow((double)C, -0.5), input_scale = (float)pow(2.0, -0.5);
  matmul_forward_cuda(ctx, b->proj, x0, model->params + g.ple_proj, N, C, LP);
  scale_cuda(ctx, b->proj, b->proj, proj_scale, (size_t)N * LP);
  rmsnorm_forward_gain_cuda(ctx, b->normed, b->rstd, b->proj, model->params + g.ple_norm, N * L, P,
                            (float)cfg->rms_norm_eps);
  embedding_forward_cuda(ctx, b->embedded, tokens, model->params + g.ple_embed, N, LP, model->ple_embed_scale);
  per_layer_inputs_combine_cuda(ctx, b->out, b->normed, b->embedded, N, L, P, input_scale);
}

static bf16 *residual_at(GemmaCudaActs *acts, const GemmaConfig *cfg, int l) {
  return acts->residual + (size_t)l * acts->capacity * cfg->hidden_size;
}

// As check_batch in gemma.c: ids validated on the host before any upload.
static int check_batch(const GemmaConfig *cfg, const int *tokens, const int *targets, int B, int T, FimiError *err) {
  if (B <= 0 || T <= 0) return fimi_fail(err, "batch %d x %d must be positive", B, T);
  // The ops index (N, width) buffers with int row counts: keep N * width in range.
  GemmaLayerWidths widest = gemma_widest_layer(cfg);
  long long width = cfg->hidden_size;
  if ((long long)widest.mlp > width) width = (long long)widest.mlp;
  if ((long long)widest.qd > width) width = (long long)widest.qd;
  if ((long long)cfg->num_hidden_layers * (long long)ple_width(cfg) > width)
    width = (long long)cfg->num_hidden_layers * (long long)ple_width(cfg);
  if ((long long)B * T > 0x7fffffffLL / width)
    return fimi_fail(err, "batch %d x %d is too large", B, T);
  int V = cfg->vocab_size;
  for (long i = 0; i < (long)B * T; i++) {
    if (tokens[i] < 0 || tokens[i] >= V)
      return fimi_fail(err, "token %d at row %ld, column %ld is outside the vocabulary [0, %d)",
                       tokens[i], i / T, i % T, V);
    if (targets[i] < -1 || targets[i] >= V)
      return fimi_fail(err, "target %d at row %ld, column %ld is outside [-1, %d)", targets[i],
                       i / T, i % T, V);
  }
  return 0;
}

// Layer l's activations: its own set, or with recompute the only one.
static CudaLayerActs *layer_acts(GemmaCudaModel *model, int l) {
  return &model->acts->sets[model->recompute ? 0 : l];
}

// The forward up to the LM head's input: acts->final_norm (N, C), with every
// activation the backward needs. Uploads tokens, targets and positions.
static int forward_to_final_norm(GemmaCudaModel *model, const int *tokens, const int *targets, int B, int T,
                                 FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  if (check_batch(cfg, tokens, targets, B, T, err) != 0) return -1;
  int N = B * T, C = cfg->hidden_size, V = cfg->vocab_size, L = cfg->num_hidden_layers;
  if (ensure_activations(model, N, err) != 0) return -1;
  GemmaCudaActs *acts = model->acts;
  acts->valid = 0;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) acts->host_positions[b * T + t] = t;
  cuda_upload_i32(ctx, acts->tokens, tokens, (size_t)N);
  cuda_upload_i32(ctx, acts->targets, targets, (size_t)N);
  cuda_upload_i32(ctx, acts->positions, acts->host_positions, (size_t)N);

  const bf16 *wte = model->params;                     // (V, C)
  const bf16 *norm_w = model->params + (size_t)V * C;  // (C)
  embedding_forward_cuda(ctx, residual_at(acts, cfg, 0), acts->tokens, wte, N, C, model->embed_scale);
  if (ple_width(cfg) > 0) {
    PleBuffers ple = {acts->ple_proj, acts->ple_rstd, acts->ple_normed, acts->ple_embedded, acts->ple};
    per_layer_inputs(model, residual_at(acts, cfg, 0), acts->tokens, N, &ple);
  }
  for (int l = 0; l < L; l++) {
    const bf16 *w = NULL;
    if (forward_params(model, l, &w, err) != 0 ||
        layer_forward(model, l, w, layer_acts(model, l), residual_at(acts, cfg, l), residual_at(acts, cfg, l + 1), B,
                      T, err) != 0 ||
        forward_done(model, l, err) != 0)
      return -1;
  }
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  norm_forward(ctx, &off, acts->final_norm, acts->final_rstd, residual_at(acts, cfg, L), norm_w, N, C,
               (float)cfg->rms_norm_eps);
  acts->B = B;
  acts->T = T;
  return 0;
}

// Copies the last forward's log-probs to the host and waits for the stream.
static int download_logprobs(GemmaCudaModel *model, float *logprobs, FimiError *err) {
  GemmaCudaActs *acts = model->acts;
  cuda_download_f32(model->ctx, logprobs, acts->logprobs, (size_t)acts->B * acts->T);
  return cuda_context_sync(model->ctx, err);
}

int gemma_cuda_forward(GemmaCudaModel *model, const int *tokens, const int *targets, int B, int T, float *logprobs,
                       FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  if (forward_to_final_norm(model, tokens, targets, B, T, err) != 0) return fimi_fail_wrap(err, "gemma_cuda_forward");
  GemmaCudaActs *acts = model->acts;
  lm_head_logprob_forward_cuda(model->ctx, acts->logprobs, acts->lm_lse, acts->final_norm, model->params,
                               acts->targets, B * T, cfg->hidden_size, cfg->vocab_size,
                               (float)cfg->final_logit_softcapping);
  acts->valid = 1;
  if (logprobs && download_logprobs(model, logprobs, err) != 0) return fimi_fail_wrap(err, "gemma_cuda_forward");
  return 0;
}

// ---------------------------------------------------------------------------
// Backward

// Backward of per_layer_input_forward: dres (N, C) on entry d h_out, on
// exit d h_ff; the per-layer input's gradient goes to acts->dple's layer l
// slice. layer_scalar is a buffer: its gradient is never taken.
static void per_layer_input_backward(GemmaCudaModel *model, int l, const GemmaLayerOffsets *off, const bf16 *w,
                                     float *g, const CudaLayerActs *a, int N) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  GemmaCudaActs *acts = model->acts;
  int C = cfg->hidden_size, P = (int)ple_width(cfg);
  bf16 *dres = acts->dres, *dA = acts->dA, *dB = acts->dB;
  scale_by_device_scalar_cuda(ctx, dres, dres, w + off->layer_scalar, (size_t)N * C);
  if (!off->has_ple) return;
  const bf16 *ple_l = acts->ple + (size_t)l * N * P;  // (N, P)
  rmsnorm_backward_gain_cuda(ctx, dA, g + off->ple_norm, dres, a->ple_proj, w + off->ple_norm, a->ple_rstd, N, C);
  matmul_backward_cuda(ctx, acts->dple_act, g + off->ple_proj, dA, a->ple_act, w + off->ple_proj, N, P, C);
  geglu_backward_cuda(ctx, acts->dple_gate, acts->dple + (size_t)l * N * P, acts->dple_act, a->ple_gate, ple_l,
                      (size_t)N * P);
  matmul_backward_cuda(ctx, dB, g + off->ple_gate, acts->dple_gate, a->h_ff, w + off->ple_gate, N, C, P);
  residual_add_cuda(ctx, dres, dres, dB, (size_t)N * C);
}

static int layer_attention_backward(GemmaCudaModel *model, int l, const CudaLayerActs *a, const bf16 *k, const bf16 *v,
                              int B, int T, int nkv, int hd, const GemmaAttnSpec *spec, FimiError *err) {
  CudaContext *ctx = model->ctx;
  GemmaCudaActs *acts = model->acts;
  int nh = model->config.num_attention_heads;
  if (model->attention == GEMMA_CUDA_ATTENTION_CUDNN) {
    if (attention_backward_cudnn(ctx, acts->dq, acts->dk, acts->dv, acts->datt, a->q, k, v, a->att, a->att_lse, B, T,
                                 nh, nkv, hd, spec->window, spec->softcap, spec->scale, err) != 0)
      return fimi_fail_wrap(err, "layer %d", l);
    return 0;
  }
  attention_backward_cuda(ctx, acts->dq, acts->dk, acts->dv, acts->datt, a->q, k, v, a->att, a->att_lse, B, T, nh,
                          nkv, hd, spec->window, spec->softcap, spec->scale);
  return 0;
}

// Keys and values shared across layers (Gemma 4): a kv-shared layer hands
// its key/value gradient (acts->dk, dv) to its source layer, whose backward
// comes later and adds what it was sent.
static void exchange_kv_grads(GemmaCudaModel *model, int l, const GemmaLayerShape *shape,
                              const GemmaLayerOffsets *off, int N) {
  GemmaCudaActs *acts = model->acts;
  CudaContext *ctx = model->ctx;
  size_t NKV = (size_t)N * shape->kv_heads * shape->head_dim;
  int src = shape->kv_source;
  if (!off->has_k) {
    residual_add_cuda(ctx, acts->dstore_k[src], acts->dstore_k[src], acts->dk, NKV);
    residual_add_cuda(ctx, acts->dstore_v[src], acts->dstore_v[src], acts->dv, NKV);
  } else if (acts->dstore_k[l]) {
    residual_add_cuda(ctx, acts->dk, acts->dk, acts->dstore_k[l], NKV);
    residual_add_cuda(ctx, acts->dv, acts->dv, acts->dstore_v[l], NKV);
  }
}

// Backward through layer l (as layer_backward in gemma.c). dres (N, C): on
// entry the gradient wrt the layer's output, on exit wrt its input h_in.
// Parameter grads accumulate into g (layer_numel, fp32).
static int layer_backward(GemmaCudaModel *model, int l, const bf16 *w, float *g, const CudaLayerActs *a,
                          const bf16 *h_in, int B, int T, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  GemmaCudaActs *acts = model->acts;
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, l, &shape);
  int N = B * T, C = cfg->hidden_size, I = shape.intermediate, hd = shape.head_dim;
  int nh = cfg->num_attention_heads, nkv = shape.kv_heads, qd = nh * hd, kvd = nkv * hd;
  size_t NC = (size_t)N * C, NKV = (size_t)N * kvd;
  GemmaLayerOffsets off;
  gemma_layer_offsets_at(cfg, l, &off);
  GemmaAttnSpec spec;
  gemma_attn_spec(cfg, l, &spec);
  const int *pos = acts->positions;
  bf16 *dres = acts->dres, *dA = acts->dA, *dB = acts->dB;
  bf16 *k, *v;  // (N, kvd) the keys and values attention read
  layer_kv(model, l, &shape, &k, &v);

  if (off.gemma4) per_layer_input_backward(model, l, &off, w, g, a, N);  // dres = dh_ff
  // MLP block, from h_ff = h_mid + post_ff_norm(mlp).
  norm_backward(ctx, &off, dA, g + off.post_ff_norm, dres, a->mlp, w + off.post_ff_norm, a->mlp_rstd, N, C);
  matmul_backward_cuda(ctx, acts->dgelu, g + off.down, dA, a->gelu, w + off.down, N, I, C);
  geglu_backward_cuda(ctx, acts->dgate, acts->dup, acts->dgelu, a->gate, a->up, (size_t)N * I);
  matmul_backward_cuda(ctx, dB, g + off.gate, acts->dgate, a->ln2, w + off.gate, N, C, I);  // dB = dln2 (gate part)
  matmul_backward_cuda(ctx, dA, g + off.up, acts->dup, a->ln2, w + off.up, N, C, I);
  residual_add_cuda(ctx, dB, dB, dA, NC);
  norm_backward(ctx, &off, dA, g + off.pre_ff_norm, dB, a->h_mid, w + off.pre_ff_norm, a->ln2_rstd, N, C);
  residual_add_cuda(ctx, dres, dres, dA, NC);  // dres = dh_mid: residual path + MLP path

  // Attention block, from h_mid = h_in + post_attn_norm(o).
  norm_backward(ctx, &off, dA, g + off.post_attn_norm, dres, a->o, w + off.post_attn_norm, a->o_rstd, N, C);
  matmul_backward_cuda(ctx, acts->datt, g + off.o, dA, a->att, w + off.o, N, qd, C);
  if (layer_attention_backward(model, l, a, k, v, B, T, nkv, hd, &spec, err) != 0) return -1;
  if (off.gemma4) exchange_kv_grads(model, l, &shape, &off, N);
  rope_backward_partial_cuda(ctx, acts->dq, acts->dq, pos, N, nh, hd, spec.rope_theta, spec.rope_position_scale,
                             spec.rope_pairs);
  if (off.has_k)
    rope_backward_partial_cuda(ctx, acts->dk, acts->dk, pos, N, nkv, hd, spec.rope_theta, spec.rope_position_scale,
                               spec.rope_pairs);
  bf16 *dq_lin = acts->dq, *dk_lin = acts->dk, *dv_lin = acts->dv;  // gradients wrt the projections' outputs
  if (off.has_qk_norm) {
    // datt is dead after attention_backward: reuse it for dq_raw.
    norm_backward(ctx, &off, acts->datt, g + off.q_norm, acts->dq, a->q_raw, w + off.q_norm, a->q_rstd, N * nh, hd);
    dq_lin = acts->datt;
    if (off.has_k) {
      norm_backward(ctx, &off, acts->dk_raw, g + off.k_norm, acts->dk, a->k_raw, w + off.k_norm, a->k_rstd, N * nkv,
                    hd);
      dk_lin = acts->dk_raw;
    }
  }
  if (off.gemma4 && off.has_k) {
    // the value norm (no gain); with keys as values its input is k_proj's output
    rmsnorm_backward_gain_cuda(ctx, acts->dv_raw, NULL, acts->dv, off.has_v ? a->v_raw : a->k_raw, NULL, a->v_rstd,
                               N * nkv, hd);
    dv_lin = acts->dv_raw;
    if (!off.has_v) residual_add_cuda(ctx, dk_lin, dk_lin, acts->dv_raw, NKV);
  }
  matmul_backward_cuda(ctx, dB, g + off.q, dq_lin, a->ln1, w + off.q, N, C, qd);  // dB = dln1
  if (off.has_k) {
    matmul_backward_cuda(ctx, dA, g + off.k, dk_lin, a->ln1, w + off.k, N, C, kvd);
    residual_add_cuda(ctx, dB, dB, dA, NC);
  }
  if (off.has_v) {
    matmul_backward_cuda(ctx, dA, g + off.v, dv_lin, a->ln1, w + off.v, N, C, kvd);
    residual_add_cuda(ctx, dB, dB, dA, NC);
  }
  norm_backward(ctx, &off, dA, g + off.input_norm, dB, h_in, w + off.input_norm, a->ln1_rstd, N, C);
  residual_add_cuda(ctx, dres, dres, dA, NC);  // dres = dh_in
  return 0;
}

// Backward of per_layer_inputs: acts->dple (L, N, P) holds the gradient
// wrt the per-layer inputs; accumulates the per-layer table's, projection's
// and norm's gradients and adds the x0 part into dx0 (N, C).
static void per_layer_inputs_backward(GemmaCudaModel *model, bf16 *dx0, int N) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  GemmaCudaActs *acts = model->acts;
  GemmaGlobalOffsets g;
  gemma_global_offsets(cfg, &g);
  int C = cfg->hidden_size, L = cfg->num_hidden_layers, P = (int)ple_width(cfg), LP = L * P;
  float proj_scale = (float)pow((double)C, -0.5), input_scale = (float)pow(2.0, -0.5);
  // d(sum) = dple * 2^-0.5 for both terms, back to (N, L*P)
  per_layer_inputs_split_cuda(ctx, acts->dple_flat, acts->dple, N, L, P, input_scale);
  embedding_backward_cuda(ctx, model->grads + g.ple_embed, acts->dple_flat, acts->tokens, N, LP,
                          cfg->vocab_size_per_layer_input, model->ple_embed_scale, cfg->pad_token_id);
  rmsnorm_backward_gain_cuda(ctx, acts->dple_proj, model->grads + g.ple_norm, acts->dple_flat, acts->ple_proj,
                             model->params + g.ple_norm, acts->ple_rstd, N * L, P);
  scale_cuda(ctx, acts->dple_proj, acts->dple_proj, proj_scale, (size_t)N * LP);
  // dA is free here (the layers are done): the x0 part of the gradient
  matmul_backward_cuda(ctx, acts->dA, model->grads + g.ple_proj, acts->dple_proj, residual_at(acts, cfg, 0),
                       model->params + g.ple_proj, N, C, LP);
  residual_add_cuda(ctx, dx0, dx0, acts->dA, (size_t)N * C);
}

static int check_backward_ready(GemmaCudaModel *model, const char *who, FimiError *err) {
  if (!model->grads) return fimi_fail(err, "%s: gradients are not allocated (gemma_cuda_alloc_grads)", who);
  return ensure_grad_scratch(model, err);
}

// The backward below the LM head: acts->dA holds d/d final_norm (N, C).
static int backward_from_final_norm(GemmaCudaModel *model, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  GemmaCudaActs *acts = model->acts;
  int B = acts->B, T = acts->T, N = B * T, C = cfg->hidden_size, V = cfg->vocab_size, L = cfg->num_hidden_layers;
  const bf16 *norm_w = model->params + (size_t)V * C;
  float *dwte = model->grads, *dnorm_w = model->grads + (size_t)V * C;
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  norm_backward(ctx, &off, acts->dres, dnorm_w, acts->dA, residual_at(acts, cfg, L), norm_w, acts->final_rstd, N, C);
  for (int l = 0; l < L; l++) {  // kv-shared layers add into these before their source's backward
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    size_t bytes = (size_t)N * shape.kv_heads * shape.head_dim * sizeof(bf16);
    if (acts->dstore_k[l]) cuda_fill_bytes(ctx, acts->dstore_k[l], 0, bytes);
    if (acts->dstore_v[l]) cuda_fill_bytes(ctx, acts->dstore_v[l], 0, bytes);
  }
  for (int l = L - 1; l >= 0; l--) {
    const bf16 *w = NULL;
    float *g = NULL;
    if (backward_params(model, l, &w, &g, err) != 0) return -1;
    // Recompute: the layer's forward again from its saved input, into the
    // only set. Its output goes to dA, free until layer_backward, so the
    // saved residual stream stays untouched. Deterministic ops: the same bits.
    if (model->recompute &&
        layer_forward(model, l, w, layer_acts(model, l), residual_at(acts, cfg, l), acts->dA, B, T, err) != 0)
      return -1;
    if (layer_backward(model, l, w, g, layer_acts(model, l), residual_at(acts, cfg, l), B, T, err) != 0 ||
        backward_done(model, l, err) != 0)
      return -1;
  }
  if (ple_width(cfg) > 0) per_layer_inputs_backward(model, acts->dres, N);  // x0 feeds the per-layer inputs too
  // The tied embedding gets the input-side gradient on top of the LM head's.
  embedding_backward_cuda(ctx, dwte, acts->dres, acts->tokens, N, C, V, model->embed_scale, cfg->pad_token_id);
  return 0;
}

int gemma_cuda_backward(GemmaCudaModel *model, const float *dlogprobs, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  GemmaCudaActs *acts = model->acts;
  if (!acts || !acts->valid)
    return fimi_fail(err, "gemma_cuda_backward: no forward to differentiate (call gemma_cuda_forward first)");
  if (check_backward_ready(model, "gemma_cuda_backward", err) != 0) return -1;
  int N = acts->B * acts->T;
  cuda_upload_f32(model->ctx, acts->dlogprobs, dlogprobs, (size_t)N);
  // LM head: recomputes each chunk's logits from the saved lse; dA = d/d final_norm.
  lm_head_logprob_backward_cuda(model->ctx, acts->dA, model->grads, acts->dlogprobs, acts->final_norm, model->params,
                                acts->targets, acts->lm_lse, N, cfg->hidden_size, cfg->vocab_size,
                                (float)cfg->final_logit_softcapping);
  if (backward_from_final_norm(model, err) != 0) return fimi_fail_wrap(err, "gemma_cuda_backward");
  return 0;
}

int gemma_cuda_forward_backward(GemmaCudaModel *model, const int *tokens, const int *targets, int B, int T,
                                const float *dlogprobs, float *logprobs, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  if (forward_to_final_norm(model, tokens, targets, B, T, err) != 0 ||
      check_backward_ready(model, "gemma_cuda_forward_backward", err) != 0)
    return fimi_fail_wrap(err, "gemma_cuda_forward_backward");
  GemmaCudaActs *acts = model->acts;
  cuda_upload_f32(model->ctx, acts->dlogprobs, dlogprobs, (size_t)B * T);
  lm_head_logprob_forward_backward_cuda(model->ctx, acts->logprobs, acts->lm_lse, acts->dA, model->grads,
                                        acts->dlogprobs, acts->final_norm, model->params, acts->targets, B * T,
                                        cfg->hidden_size, cfg->vocab_size, (float)cfg->final_logit_softcapping);
  acts->valid = 1;
  if (backward_from_final_norm(model, err) != 0 || (logprobs && download_logprobs(model, logprobs, err) != 0))
    return fimi_fail_wrap(err, "gemma_cuda_forward_backward");
  return 0;
}

// ---------------------------------------------------------------------------
// KV-cache decode (as model/decode.c)

// Views into cache->scratch for n rows (n <= R), bf16, sized for the widest layer.
typedef struct StepBuffers {
  bf16 *x;      // (n, C) residual stream
  bf16 *ln;     // (n, C) norm outputs
  bf16 *tmp;    // (n, C) post-norm outputs before the residual add
  bf16 *q_raw;  // (n, qd) q_proj output (gemma3/4: before q_norm)
  bf16 *q;      // (n, nh, hd) normed + roped
  bf16 *k_raw;  // (n, kvd)
  bf16 *k;      // (n, nkv, hd) normed + roped, copied into the cache
  bf16 *v;      // (n, nkv, hd)
  bf16 *v_raw;  // (n, kvd) Gemma 4: before the value norm
  bf16 *att;    // (n, qd)
  bf16 *o;      // (n, C)
  bf16 *gate;   // (n, I)
  bf16 *up;     // (n, I)
  bf16 *act;    // (n, I) gelu_tanh(gate) * up
  // Gemma 4 with per-layer inputs (NULL otherwise)
  PleBuffers ple;     // per-layer inputs of the n rows (ple.out (L, n, P))
  bf16 *ple_gate;     // (n, P)
  bf16 *ple_act;      // (n, P)
} StepBuffers;

static size_t carve_step(StepBuffers *s, char *base, const GemmaConfig *cfg, size_t n) {
  GemmaLayerWidths d = gemma_widest_layer(cfg);
  size_t C = cfg->hidden_size, I = d.mlp, qd = d.qd, kvd = d.kvd;
  size_t L = cfg->num_hidden_layers, P = ple_width(cfg);
  Carver c = {base, 0};
  memset(s, 0, sizeof *s);
  s->x = carve_bf16(&c, n * C);
  s->ln = carve_bf16(&c, n * C);
  s->tmp = carve_bf16(&c, n * C);
  s->q_raw = carve_bf16(&c, n * qd);
  s->q = carve_bf16(&c, n * qd);
  s->k_raw = carve_bf16(&c, n * kvd);
  s->k = carve_bf16(&c, n * kvd);
  s->v = carve_bf16(&c, n * kvd);
  s->v_raw = carve_bf16(&c, n * kvd);
  s->att = carve_bf16(&c, n * qd);
  s->o = carve_bf16(&c, n * C);
  s->gate = carve_bf16(&c, n * I);
  s->up = carve_bf16(&c, n * I);
  s->act = carve_bf16(&c, n * I);
  if (P > 0) {
    s->ple.proj = carve_bf16(&c, n * L * P);
    s->ple.normed = carve_bf16(&c, n * L * P);
    s->ple.embedded = carve_bf16(&c, n * L * P);
    s->ple.out = carve_bf16(&c, L * n * P);
    s->ple_gate = carve_bf16(&c, n * P);
    s->ple_act = carve_bf16(&c, n * P);
  }
  return c.used;
}

// Each layer's part of the cache (kv_offset, elements); a kv-shared layer
// has none of its own and reads its source's. Returns the total.
static size_t layout_cache(GemmaCudaKVCache *cache, const GemmaConfig *cfg) {
  size_t total = 0;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    if (shape.kv_source != l) {
      cache->kv_offset[l] = cache->kv_offset[shape.kv_source];
      continue;
    }
    cache->kv_offset[l] = total;
    total += (size_t)cache->batch * cache->capacity * shape.kv_heads * shape.head_dim;  // (B, S, kvd)
  }
  return total;
}

int gemma_cuda_kv_cache_create(GemmaCudaKVCache *cache, const GemmaCudaModel *model, int batch, int capacity,
                               FimiError *err) {
  return gemma_cuda_kv_cache_create_rows(cache, model, batch, capacity, batch, err);
}

int gemma_cuda_kv_cache_create_rows(GemmaCudaKVCache *cache, const GemmaCudaModel *model, int batch, int capacity,
                                    int rows, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  memset(cache, 0, sizeof *cache);
  if (model->hooks)
    return fimi_fail(err, "GPU KV cache: a sharded (ZeRO-3) model keeps no layers resident; decode with a whole model");
  if (batch <= 0 || capacity <= 0 || rows <= 0)
    return fimi_fail(err, "GPU KV cache: batch %d, capacity %d and rows %d must be positive", batch, capacity, rows);
  int R = rows > batch ? rows : batch;
  StepBuffers views;
  size_t scratch_bytes = carve_step(&views, NULL, cfg, (size_t)R);
  void *k = NULL, *v = NULL, *scratch = NULL, *logits = NULL, *slots = NULL;
  cache->batch = batch;
  cache->capacity = capacity;
  size_t cache_elems = layout_cache(cache, cfg);
  cache->rows = R;
  cache->chunk = rows;
  cache->lengths = fimi_calloc((size_t)batch, sizeof(int), err);
  cache->h_slots = cache->lengths ? fimi_calloc(4 * (size_t)R, sizeof(int), err) : NULL;
  if (!cache->h_slots) goto fail;
  if (cuda_malloc(&k, cache_elems * sizeof(bf16), err) != 0) goto fail;
  cache->k = k;
  if (cuda_malloc(&v, cache_elems * sizeof(bf16), err) != 0) goto fail;
  cache->v = v;
  if (cuda_malloc(&scratch, scratch_bytes, err) != 0) goto fail;
  cache->scratch = scratch;
  if (cuda_malloc(&logits, (size_t)batch * cfg->vocab_size * sizeof(float), err) != 0) goto fail;
  cache->logits = logits;
  if (cuda_malloc(&slots, 3 * (size_t)R * sizeof(int), err) != 0) goto fail;
  cache->d_slots = slots;
  // Zeroed: attention never reads past a sequence's length, but zeros keep
  // any stray read finite.
  cuda_fill_bytes(model->ctx, cache->k, 0, cache_elems * sizeof(bf16));
  cuda_fill_bytes(model->ctx, cache->v, 0, cache_elems * sizeof(bf16));
  cuda_fill_bytes(model->ctx, cache->d_slots, 0, 3 * (size_t)R * sizeof(int));
  return 0;
fail:
  gemma_cuda_kv_cache_free(cache);
  return fimi_fail_wrap(err, "GPU KV cache for %d sequences of %d tokens", batch, capacity);
}

void gemma_cuda_kv_cache_free(GemmaCudaKVCache *cache) {
  if (!cache) return;
  free(cache->lengths);
  free(cache->h_slots);
  cuda_free(cache->k);
  cuda_free(cache->v);
  cuda_free(cache->scratch);
  cuda_free(cache->logits);
  cuda_free(cache->d_slots);
  memset(cache, 0, sizeof *cache);
}

void gemma_cuda_kv_cache_reset(GemmaCudaKVCache *cache) {
  memset(cache->lengths, 0, (size_t)cache->batch * sizeof(int));
}

// Copies the n new rows of k (or v) (n, kvd) into a layer's cache rows [ids[i]][positions[i]].
// Consecutive sequences at the same position (lockstep decoding) are one
// strided copy: their destinations are S * kvd apart; consecutive positions
// of one sequence (a prefill chunk) are one contiguous copy.
static void write_cache_rows(GemmaCudaModel *model, const GemmaCudaKVCache *cache, bf16 *layer_cache, size_t kvd,
                             const bf16 *rows, const int *ids, const int *positions, int n) {
  size_t S = (size_t)cache->capacity;
  for (int i = 0; i < n;) {
    int run = 1;
    size_t pitch = S * kvd;
    if (i + 1 < n && ids[i + 1] == ids[i] && positions[i + 1] == positions[i] + 1) {
      pitch = kvd;
      while (i + run < n && ids[i + run] == ids[i] && positions[i + run] == positions[i] + run) run++;
    } else {
      while (i + run < n && ids[i + run] == ids[i] + run && positions[i + run] == positions[i]) run++;
    }
    bf16 *dst = layer_cache + ((size_t)ids[i] * S + (size_t)positions[i]) * kvd;
    cuda_copy_rows(model->ctx, dst, pitch * sizeof(bf16), rows + (size_t)i * kvd, kvd * sizeof(bf16),
                   kvd * sizeof(bf16), (size_t)run);
    i += run;
  }
}

// One decoder layer for the n new tokens (as layer_step in decode.c).
// ids/positions are host arrays; d_positions (n) and d_lengths their device
// copies. Decode (prefill 0): d_lengths (B) indexed by sequence, incl. the
// new token, each run of consecutive sequences one attention call. Prefill
// (prefill 1): every row is a query of sequence ids[0], d_lengths (n) per
// query, one attention_prefill_cuda call.
static void layer_step(GemmaCudaModel *model, GemmaCudaKVCache *cache, int l, const StepBuffers *s, const int *ids,
                       const int *positions, const int *d_positions, const int *d_lengths, int n, int prefill) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, l, &shape);
  int C = cfg->hidden_size, I = shape.intermediate, hd = shape.head_dim;
  int nh = cfg->num_attention_heads, nkv = shape.kv_heads, qd = nh * hd, kvd = nkv * hd;
  float eps = (float)cfg->rms_norm_eps;
  GemmaLayerOffsets off;
  gemma_layer_offsets_at(cfg, l, &off);
  GemmaAttnSpec spec;
  gemma_attn_spec(cfg, l, &spec);
  const bf16 *w = gemma_cuda_layer_params(model, l);
  size_t S = (size_t)cache->capacity;
  bf16 *kc = cache->k + cache->kv_offset[l];  // (B, S, nkv, hd): this layer's, or its kv source's
  bf16 *vc = cache->v + cache->kv_offset[l];

  norm_forward(ctx, &off, s->ln, NULL, s->x, w + off.input_norm, n, C, eps);
  matmul_forward_cuda(ctx, off.has_qk_norm ? s->q_raw : s->q, s->ln, w + off.q, n, C, qd);
  if (off.has_qk_norm) norm_forward(ctx, &off, s->q, NULL, s->q_raw, w + off.q_norm, n * nh, hd, eps);
  rope_forward_partial_cuda(ctx, s->q, s->q, d_positions, n, nh, hd, spec.rope_theta, spec.rope_position_scale,
                            spec.rope_pairs);
  if (off.has_k) {  // a kv-shared layer writes no cache: it reads its source's
    matmul_forward_cuda(ctx, off.has_qk_norm ? s->k_raw : s->k, s->ln, w + off.k, n, C, kvd);
    bf16 *v_lin = off.gemma4 ? (off.has_v ? s->v_raw : s->k_raw) : s->v;  // (n, kvd) before the value norm
    if (off.has_v) matmul_forward_cuda(ctx, v_lin, s->ln, w + off.v, n, C, kvd);
    if (off.gemma4) rmsnorm_forward_gain_cuda(ctx, s->v, NULL, v_lin, NULL, n * nkv, hd, eps);
    if (off.has_qk_norm) norm_forward(ctx, &off, s->k, NULL, s->k_raw, w + off.k_norm, n * nkv, hd, eps);
    rope_forward_partial_cuda(ctx, s->k, s->k, d_positions, n, nkv, hd, spec.rope_theta, spec.rope_position_scale,
                              spec.rope_pairs);
    write_cache_rows(model, cache, kc, (size_t)kvd, s->k, ids, positions, n);
    write_cache_rows(model, cache, vc, (size_t)kvd, s->v, ids, positions, n);
  }
  if (prefill) {
    size_t b = (size_t)ids[0];
    attention_prefill_cuda(ctx, s->att, s->q, kc + b * S * kvd, vc + b * S * kvd, d_lengths, n, (int)S, nh, nkv, hd,
                           spec.window, spec.softcap, spec.scale);
  } else {
    for (int i = 0; i < n;) {
      int run = decode_run_length(ids, n, i), b0 = ids[i];
      attention_decode_cuda(ctx, s->att + (size_t)i * qd, s->q + (size_t)i * qd, kc + (size_t)b0 * S * kvd,
                            vc + (size_t)b0 * S * kvd, d_lengths + b0, run, (int)S, nh, nkv, hd, spec.window,
                            spec.softcap, spec.scale);
      i += run;
    }
  }
  matmul_forward_cuda(ctx, s->o, s->att, w + off.o, n, qd, C);
  norm_forward(ctx, &off, s->tmp, NULL, s->o, w + off.post_attn_norm, n, C, eps);
  residual_add_cuda(ctx, s->x, s->x, s->tmp, (size_t)n * C);

  norm_forward(ctx, &off, s->ln, NULL, s->x, w + off.pre_ff_norm, n, C, eps);
  matmul_forward_cuda(ctx, s->gate, s->ln, w + off.gate, n, C, I);
  matmul_forward_cuda(ctx, s->up, s->ln, w + off.up, n, C, I);
  geglu_forward_cuda(ctx, s->act, s->gate, s->up, (size_t)n * I);
  matmul_forward_cuda(ctx, s->o, s->act, w + off.down, n, I, C);
  norm_forward(ctx, &off, s->tmp, NULL, s->o, w + off.post_ff_norm, n, C, eps);
  residual_add_cuda(ctx, s->x, s->x, s->tmp, (size_t)n * C);
  if (!off.gemma4) return;

  // Gemma 4: x = scalar * (x + post_per_layer_input_norm(per_layer_projection(
  //   gelu_tanh(per_layer_input_gate(x)) * ple_l))), as the training forward.
  if (off.has_ple) {
    int P = (int)ple_width(cfg);
    const bf16 *ple_l = s->ple.out + (size_t)l * n * P;  // (n, P)
    matmul_forward_cuda(ctx, s->ple_gate, s->x, w + off.ple_gate, n, C, P);
    geglu_forward_cuda(ctx, s->ple_act, s->ple_gate, ple_l, (size_t)n * P);
    matmul_forward_cuda(ctx, s->o, s->ple_act, w + off.ple_proj, n, P, C);
    rmsnorm_forward_gain_cuda(ctx, s->tmp, NULL, s->o, w + off.ple_norm, n, C, eps);
    residual_add_cuda(ctx, s->x, s->x, s->tmp, (size_t)n * C);
  }
  scale_by_device_scalar_cuda(ctx, s->x, s->x, w + off.layer_scalar, (size_t)n * C);
}

// Embedding (and Gemma 4's per-layer inputs) of the step's n rows into s->x.
static void step_embed(GemmaCudaModel *model, const StepBuffers *s, const int *d_tokens, int n) {
  const GemmaConfig *cfg = &model->config;
  embedding_forward_cuda(model->ctx, s->x, d_tokens, model->params, n, cfg->hidden_size, model->embed_scale);
  if (ple_width(cfg) > 0) per_layer_inputs(model, s->x, d_tokens, n, &s->ple);
}

// The final norm of n rows (Gemma 4's scales by w).
static void step_final_norm(GemmaCudaModel *model, bf16 *out, const bf16 *x, int n) {
  const GemmaConfig *cfg = &model->config;
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  norm_forward(model->ctx, &off, out, NULL, x, model->params + (size_t)cfg->vocab_size * cfg->hidden_size, n,
               cfg->hidden_size, (float)cfg->rms_norm_eps);
}

int gemma_cuda_decode_step(GemmaCudaModel *model, GemmaCudaKVCache *cache, const int *tokens, const int *active,
                           float *logits, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  int B = cache->batch, R = cache->rows, C = cfg->hidden_size, V = cfg->vocab_size;
  int *ids = cache->h_slots, *positions = ids + R, *toks = ids + 2 * R, *new_lengths = ids + 3 * R;
  // Validate everything before touching the cache, so a failure changes nothing.
  int n = 0;
  for (int b = 0; b < B; b++) {
    new_lengths[b] = cache->lengths[b];  // inactive: unchanged (never read, but defined)
    if (active && !active[b]) continue;
    if (cache->lengths[b] >= cache->capacity)
      return fimi_fail(err, "decode: sequence %d is full (%d tokens, the KV cache capacity)", b, cache->capacity);
    if (tokens[b] < 0 || tokens[b] >= V)
      return fimi_fail(err, "decode: token %d for sequence %d is outside the vocabulary [0, %d)", tokens[b], b, V);
    ids[n] = b;
    positions[n] = cache->lengths[b];
    toks[n] = tokens[b];
    new_lengths[b] = cache->lengths[b] + 1;  // the new token's own k/v is attended too
    n++;
  }
  if (n == 0) return 0;
  // Device copies: positions (n) at d_slots, token ids (n) at d_slots + R,
  // lengths (B) at d_slots + 2R.
  int *d_positions = cache->d_slots, *d_tokens = cache->d_slots + R, *d_lengths = cache->d_slots + 2 * R;
  cuda_upload_i32(ctx, d_positions, positions, (size_t)n);
  cuda_upload_i32(ctx, d_tokens, toks, (size_t)n);
  cuda_upload_i32(ctx, d_lengths, new_lengths, (size_t)B);

  StepBuffers s;
  carve_step(&s, (char *)cache->scratch, cfg, (size_t)n);
  const bf16 *wte = model->params;
  step_embed(model, &s, d_tokens, n);
  for (int l = 0; l < cfg->num_hidden_layers; l++)
    layer_step(model, cache, l, &s, ids, positions, d_positions, d_lengths, n, 0);
  step_final_norm(model, s.ln, s.x, n);
  for (int i = 0; i < n;) {
    int run = decode_run_length(ids, n, i);
    lm_head_logits_cuda(ctx, cache->logits + (size_t)ids[i] * V, s.ln + (size_t)i * C, wte, run, C, V,
                        (float)cfg->final_logit_softcapping);
    i += run;
  }
  if (logits) {
    for (int i = 0; i < n;) {
      int run = decode_run_length(ids, n, i);
      cuda_download_f32(ctx, logits + (size_t)ids[i] * V, cache->logits + (size_t)ids[i] * V, (size_t)run * V);
      i += run;
    }
  }
  if (cuda_context_sync(ctx, err) != 0) return fimi_fail_wrap(err, "decode step");
  for (int i = 0; i < n; i++) cache->lengths[ids[i]]++;
  return 0;
}

int gemma_cuda_prefill(GemmaCudaModel *model, GemmaCudaKVCache *cache, int b, const int *tokens, int n,
                       float *logits, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  CudaContext *ctx = model->ctx;
  int R = cache->rows, chunk = cache->chunk, C = cfg->hidden_size, V = cfg->vocab_size;
  // Validate everything before touching the cache, so a failure changes nothing.
  if (b < 0 || b >= cache->batch) return fimi_fail(err, "prefill: sequence %d outside [0, %d)", b, cache->batch);
  if (n < 1) return fimi_fail(err, "prefill: sequence %d: no tokens", b);
  if (cache->lengths[b] > cache->capacity - n)
    return fimi_fail(err, "prefill: sequence %d: %d + %d tokens exceed the KV cache capacity %d", b,
                     cache->lengths[b], n, cache->capacity);
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= V)
      return fimi_fail(err, "prefill: token %d at %d is outside the vocabulary [0, %d)", tokens[i], i, V);
  int *ids = cache->h_slots, *positions = ids + R, *toks = ids + 2 * R, *query_lengths = ids + 3 * R;
  int *d_positions = cache->d_slots, *d_tokens = cache->d_slots + R, *d_lengths = cache->d_slots + 2 * R;
  const bf16 *wte = model->params;
  int base = cache->lengths[b];
  StepBuffers s;
  for (int start = 0; start < n; start += chunk) {
    int m = n - start < chunk ? n - start : chunk;
    for (int i = 0; i < m; i++) {
      ids[i] = b;
      positions[i] = base + start + i;
      toks[i] = tokens[start + i];
      query_lengths[i] = base + start + i + 1;  // causal within the chunk
    }
    // h_slots + R and d_slots have the same layout (positions, tokens,
    // lengths, R each): one upload, which waits for the stream (so the
    // previous chunk is done with d_slots and the host arrays).
    cuda_upload_i32(ctx, d_positions, positions, 3 * (size_t)R);
    carve_step(&s, (char *)cache->scratch, cfg, (size_t)m);
    step_embed(model, &s, d_tokens, m);
    for (int l = 0; l < cfg->num_hidden_layers; l++)
      layer_step(model, cache, l, &s, ids, positions, d_positions, d_lengths, m, 1);
    if (start + m == n) {  // only the last token's logits are wanted: its row alone
      bf16 *x_last = s.x + (size_t)(m - 1) * C, *ln_last = s.ln + (size_t)(m - 1) * C;
      step_final_norm(model, ln_last, x_last, 1);
      lm_head_logits_cuda(ctx, cache->logits + (size_t)b * V, ln_last, wte, 1, C, V,
                          (float)cfg->final_logit_softcapping);
      if (logits) cuda_download_f32(ctx, logits, cache->logits + (size_t)b * V, (size_t)V);
    }
  }
  if (cuda_context_sync(ctx, err) != 0) return fimi_fail_wrap(err, "prefill of sequence %d", b);
  cache->lengths[b] = base + n;
  return 0;
}

int gemma_cuda_kv_cache_copy_sequence(GemmaCudaModel *model, GemmaCudaKVCache *cache, int dst, int src,
                                      FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  if (dst < 0 || dst >= cache->batch || src < 0 || src >= cache->batch)
    return fimi_fail(err, "GPU KV cache copy: sequences %d <- %d outside [0, %d)", dst, src, cache->batch);
  if (dst == src) return 0;
  size_t S = (size_t)cache->capacity;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    if (shape.kv_source != l) continue;  // a kv-shared layer has no cache of its own
    size_t kvd = (size_t)shape.kv_heads * shape.head_dim, bytes = (size_t)cache->lengths[src] * kvd * sizeof(bf16);
    size_t from = cache->kv_offset[l] + (size_t)src * S * kvd, to = cache->kv_offset[l] + (size_t)dst * S * kvd;
    cuda_copy_rows(model->ctx, cache->k + to, bytes, cache->k + from, bytes, bytes, 1);
    cuda_copy_rows(model->ctx, cache->v + to, bytes, cache->v + from, bytes, bytes, 1);
  }
  cache->lengths[dst] = cache->lengths[src];
  return 0;
}

// ---- generation ------------------------------------------------------------------

typedef struct CudaDecoder {
  GemmaCudaModel *model;
  GemmaCudaKVCache *cache;
} CudaDecoder;

static int cuda_decode_step_host(void *ctx, const int *tokens, const int *active, float *logits, FimiError *err) {
  CudaDecoder *d = ctx;
  return gemma_cuda_decode_step(d->model, d->cache, tokens, active, logits, err);
}

int gemma_cuda_generate(GemmaCudaModel *model, const int *const *prompts, const int *prompt_lengths, int B,
                        const GenerateOptions *opt, int *out_tokens, int *out_lengths, FimiError *err) {
  int capacity = generate_capacity(prompt_lengths, B, opt, err);
  if (capacity < 0) return -1;
  GemmaCudaKVCache cache;
  if (gemma_cuda_kv_cache_create(&cache, model, B, capacity, err) != 0) return -1;
  CudaDecoder gpu = {model, &cache};
  GenerateDecoder dec = {cuda_decode_step_host, &gpu};
  int rc = generate_with(&dec, model->config.vocab_size, prompts, prompt_lengths, B, opt, out_tokens, out_lengths, err);
  gemma_cuda_kv_cache_free(&cache);
  return rc;
}

#endif  // FIMI_HAVE_CUDA
