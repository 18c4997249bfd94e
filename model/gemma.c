// model/gemma.c: the Gemma forward and backward passes on flat buffers, written
// out layer by layer (llm.c style), and the activation memory they use.
// Defines GemmaActivations. Follows Hugging Face transformers'
// Gemma3ForCausalLM / Gemma2ForCausalLM exactly (docs/model.md has the
// diagram), and Gemma4ForCausalLM (docs/gemma4.md) as additions to the same
// layer code: per-layer embeddings, value norm, layer scalar, kv sharing.
// Parameters and the tensor table live in gemma_params.c.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "model/gemma.h"

// What one layer's forward keeps for its backward. N = B*T rows, qd = nh*hd,
// kvd = nkv*hd, I = intermediate size.
typedef struct LayerActs {
  float *ln1;       // (N, C) input_layernorm(h_in)
  float *ln1_rstd;  // (N)
  float *q_raw;     // (N, qd) q_proj output before q_norm (gemma3; NULL for gemma2)
  float *q_rstd;    // (N, nh) q_norm rstd per head (gemma3)
  float *k_raw;     // (N, kvd) k_proj output before k_norm (gemma3)
  float *k_rstd;    // (N, nkv) (gemma3)
  float *q;         // (N, qd) = (B, T, nh, hd) normed and roped queries
  float *k;         // (N, kvd) = (B, T, nkv, hd) normed and roped keys
  float *v;         // (N, kvd) values
  float *att;       // (N, qd) attention output, o_proj input
  float *att_lse;   // (B, nh, T) log-sum-exp of each query's scores
  float *o;         // (N, C) o_proj output, post_attention_layernorm input
  float *o_rstd;    // (N)
  float *h_mid;     // (N, C) residual stream after the attention block
  float *ln2;       // (N, C) pre_feedforward_layernorm(h_mid)
  float *ln2_rstd;  // (N)
  float *gate;      // (N, I) gate_proj output
  float *up;        // (N, I) up_proj output
  float *gelu;      // (N, I) gelu_tanh(gate) * up, down_proj input
  float *mlp;       // (N, C) down_proj output, post_feedforward_layernorm input
  float *mlp_rstd;  // (N)
  // Gemma 4 only (NULL otherwise):
  float *v_raw;     // (N, kvd) v_proj output before the value norm
  float *v_rstd;    // (N, nkv) value norm rstd per head
  float *h_ff;      // (N, C) residual stream after the MLP block, per-layer input block's input
  float *ple_gate;  // (N, P) per_layer_input_gate output
  float *ple_act;   // (N, P) gelu_tanh(ple_gate) * per-layer input, per_layer_projection input
  float *ple_proj;  // (N, C) per_layer_projection output, post_per_layer_input_norm input
  float *ple_rstd;  // (N)
} LayerActs;

struct GemmaActivations {
  int capacity;   // rows (B*T) every buffer holds
  int recompute;  // layout: 1 = a single LayerActs set shared by all layers
  int num_sets;   // L, or 1 with recompute
  float *memory;  // one allocation holding everything forward saves
  LayerActs *sets;        // (num_sets)
  float *residual;        // (L+1, N, C): layer l's input at l, the last layer's output at L
  float *final_norm;      // (N, C) model.norm output, LM head input
  float *final_rstd;      // (N)
  float *lm_lse;          // (N) log-sum-exp over the vocab of each row's logits
  int *tokens;            // (N) copy of the last forward's inputs
  int *targets;           // (N)
  int *positions;         // (N) position of each row within its sequence
  // Gemma 4: per-layer inputs and the keys/values other layers reuse.
  float *ple;             // (L, N, P) each layer's per-layer input
  float *ple_proj;        // (N, L*P) per_layer_model_projection(x0) * C^-0.5, the norm's input
  float *ple_rstd;        // (N*L)
  float *ple_normed;      // (N, L*P) per_layer_projection_norm output
  float *store_k[GEMMA_MAX_LAYERS];  // (N, kvd of l) roped keys of a layer kv-shared layers read; else NULL
  float *store_v[GEMMA_MAX_LAYERS];  // (N, kvd of l) its normed values
  // Backward scratch, allocated by the first backward (forward-only users,
  // e.g. DPO reference log-probs, never pay for it).
  float *grad_memory;
  float *dres;            // (N, C) gradient wrt the residual stream
  float *dA, *dB;         // (N, C) temporaries
  float *dgelu, *dgate, *dup;  // (N, I)
  float *dq, *datt;       // (N, qd)
  float *dk, *dv, *dk_raw;  // (N, kvd)
  // Gemma 4
  float *dv_raw;          // (N, kvd) gradient wrt the value norm's input
  float *dple_act, *dple_gate;  // (N, P)
  float *dple;            // (L, N, P) gradient wrt each layer's per-layer input
  float *dple_flat;       // (N, L*P) the same in the model's layout
  float *dple_proj;       // (N, L*P)
  float *dstore_k[GEMMA_MAX_LAYERS];  // (N, kvd of l) what the kv-shared layers send back to layer l's keys
  float *dstore_v[GEMMA_MAX_LAYERS];  // (N, kvd of l) and values
  // The last forward.
  int B, T;
  int valid;
  int forward_recompute;
};

// ---------------------------------------------------------------------------
// Activation memory: buffers carved out of one allocation. The same walk
// counts (base == NULL) and assigns, so the size formula cannot drift.

typedef struct Carver {
  float *base;
  size_t used;  // floats
} Carver;

static float *carve(Carver *c, size_t n) {
  float *p = c->base ? c->base + c->used : NULL;
  c->used += (n + 15) & ~(size_t)15;  // keep every buffer 64-byte aligned
  return p;
}

static size_t ple_width(const GemmaConfig *cfg) {
  return cfg->family == GEMMA_FAMILY_GEMMA4 ? (size_t)cfg->hidden_size_per_layer_input : 0;
}

static void carve_layer(Carver *c, LayerActs *a, const GemmaConfig *cfg, size_t N) {
  GemmaLayerWidths d = gemma_widest_layer(cfg);
  size_t C = cfg->hidden_size, I = d.mlp, nh = cfg->num_attention_heads;
  size_t nkv = d.nkv, qd = d.qd, kvd = d.kvd, P = ple_width(cfg);
  int qk_norm = cfg->family != GEMMA_FAMILY_GEMMA2, gemma4 = cfg->family == GEMMA_FAMILY_GEMMA4;
  memset(a, 0, sizeof *a);
  a->ln1 = carve(c, N * C);
  a->ln1_rstd = carve(c, N);
  if (qk_norm) {
    a->q_raw = carve(c, N * qd);
    a->q_rstd = carve(c, N * nh);
    a->k_raw = carve(c, N * kvd);
    a->k_rstd = carve(c, N * nkv);
  }
  a->q = carve(c, N * qd);
  a->k = carve(c, N * kvd);
  a->v = carve(c, N * kvd);
  a->att = carve(c, N * qd);
  a->att_lse = carve(c, N * nh);
  a->o = carve(c, N * C);
  a->o_rstd = carve(c, N);
  a->h_mid = carve(c, N * C);
  a->ln2 = carve(c, N * C);
  a->ln2_rstd = carve(c, N);
  a->gate = carve(c, N * I);
  a->up = carve(c, N * I);
  a->gelu = carve(c, N * I);
  a->mlp = carve(c, N * C);
  a->mlp_rstd = carve(c, N);
  if (gemma4) {
    a->v_raw = carve(c, N * kvd);
    a->v_rstd = carve(c, N * nkv);
  }
  if (P > 0) {
    a->h_ff = carve(c, N * C);
    a->ple_gate = carve(c, N * P);
    a->ple_act = carve(c, N * P);
    a->ple_proj = carve(c, N * C);
    a->ple_rstd = carve(c, N);
  }
}

// k[l], v[l] (N, kvd of l) for each layer kv-shared layers read, NULL for the others.
static void carve_stored_kv(Carver *c, const GemmaConfig *cfg, size_t N, float **k, float **v) {
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape s;
    gemma_layer_shape(cfg, l, &s);
    size_t kvd = (size_t)s.kv_heads * s.head_dim;
    k[l] = s.stores_kv ? carve(c, N * kvd) : NULL;
    v[l] = s.stores_kv ? carve(c, N * kvd) : NULL;
  }
}

// Gemma 4: the per-layer inputs and the stored keys/values of the layers
// kv-shared layers read (kept whatever the recompute setting: a shared
// layer's recompute reads them).
static void carve_gemma4_forward(Carver *c, GemmaActivations *acts, const GemmaConfig *cfg, size_t N) {
  size_t L = cfg->num_hidden_layers, P = ple_width(cfg);
  if (P > 0) {
    acts->ple = carve(c, L * N * P);
    acts->ple_proj = carve(c, N * L * P);
    acts->ple_rstd = carve(c, N * L);
    acts->ple_normed = carve(c, N * L * P);
  }
  carve_stored_kv(c, cfg, N, acts->store_k, acts->store_v);
}

// Forward state: residual stream, layer sets, final norm, LM head lse, and
// the int arrays (stored as floats' worth of space: sizeof(int) == sizeof(float)).
static size_t carve_forward(Carver *c, GemmaActivations *acts, const GemmaConfig *cfg, size_t N, int num_sets) {
  size_t C = cfg->hidden_size, L = cfg->num_hidden_layers;
  acts->residual = carve(c, (L + 1) * N * C);
  for (int s = 0; s < num_sets; s++) {
    LayerActs scratch;
    carve_layer(c, acts->sets ? &acts->sets[s] : &scratch, cfg, N);
  }
  if (cfg->family == GEMMA_FAMILY_GEMMA4) carve_gemma4_forward(c, acts, cfg, N);
  acts->final_norm = carve(c, N * C);
  acts->final_rstd = carve(c, N);
  acts->lm_lse = carve(c, N);
  acts->tokens = (int *)carve(c, N);
  acts->targets = (int *)carve(c, N);
  acts->positions = (int *)carve(c, N);
  return c->used;
}

static size_t carve_backward(Carver *c, GemmaActivations *acts, const GemmaConfig *cfg, size_t N) {
  GemmaLayerWidths d = gemma_widest_layer(cfg);
  size_t C = cfg->hidden_size, I = d.mlp, qd = d.qd, kvd = d.kvd, L = cfg->num_hidden_layers, P = ple_width(cfg);
  acts->dres = carve(c, N * C);
  acts->dA = carve(c, N * C);
  acts->dB = carve(c, N * C);
  acts->dgelu = carve(c, N * I);
  acts->dgate = carve(c, N * I);
  acts->dup = carve(c, N * I);
  acts->dq = carve(c, N * qd);
  acts->datt = carve(c, N * qd);
  acts->dk = carve(c, N * kvd);
  acts->dv = carve(c, N * kvd);
  acts->dk_raw = cfg->family != GEMMA_FAMILY_GEMMA2 ? carve(c, N * kvd) : NULL;
  if (cfg->family != GEMMA_FAMILY_GEMMA4) return c->used;
  acts->dv_raw = carve(c, N * kvd);
  if (P > 0) {
    acts->dple_act = carve(c, N * P);
    acts->dple_gate = carve(c, N * P);
    acts->dple = carve(c, L * N * P);
    acts->dple_flat = carve(c, N * L * P);
    acts->dple_proj = carve(c, N * L * P);
  }
  carve_stored_kv(c, cfg, N, acts->dstore_k, acts->dstore_v);
  return c->used;
}

size_t gemma_activation_floats(const GemmaConfig *cfg, int N, int recompute, int with_backward) {
  GemmaActivations tmp;
  memset(&tmp, 0, sizeof tmp);
  Carver c = {NULL, 0};
  size_t total = carve_forward(&c, &tmp, cfg, (size_t)N, recompute ? 1 : cfg->num_hidden_layers);
  if (with_backward) {
    Carver g = {NULL, 0};
    total += carve_backward(&g, &tmp, cfg, (size_t)N);
  }
  return total;
}

static float *alloc_aligned(size_t floats, FimiError *err) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (floats ? floats : 1) * sizeof(float)) != 0) {
    fimi_fail(err, "out of memory allocating %zu MiB of activations", floats * sizeof(float) >> 20);
    return NULL;
  }
  return p;
}

void gemma_activations_free(GemmaModel *model) {
  GemmaActivations *acts = model->acts;
  if (!acts) return;
  free(acts->memory);
  free(acts->grad_memory);
  free(acts->sets);
  free(acts);
  model->acts = NULL;
}

// Makes sure the forward state holds N rows in the layout model->recompute
// asks for. Grows only: a smaller batch reuses the buffers, so steady-state
// training never allocates.
static int ensure_activations(GemmaModel *model, int N, FimiError *err) {
  GemmaActivations *acts = model->acts;
  int recompute = model->recompute ? 1 : 0;
  if (acts && acts->capacity >= N && acts->recompute == recompute) return 0;
  int capacity = acts && acts->capacity > N ? acts->capacity : N;
  gemma_activations_free(model);
  acts = calloc(1, sizeof *acts);
  if (!acts) return fimi_fail(err, "out of memory allocating activations");
  model->acts = acts;
  acts->capacity = capacity;
  acts->recompute = recompute;
  acts->num_sets = recompute ? 1 : model->config.num_hidden_layers;
  acts->sets = calloc((size_t)acts->num_sets, sizeof(LayerActs));
  if (!acts->sets) {
    gemma_activations_free(model);
    return fimi_fail(err, "out of memory allocating activations");
  }
  Carver count = {NULL, 0};
  size_t floats = carve_forward(&count, acts, &model->config, (size_t)capacity, acts->num_sets);
  acts->memory = alloc_aligned(floats, err);
  if (!acts->memory) {
    gemma_activations_free(model);
    return -1;
  }
  Carver assign = {acts->memory, 0};
  carve_forward(&assign, acts, &model->config, (size_t)capacity, acts->num_sets);
  return 0;
}

static int ensure_grad_scratch(GemmaModel *model, FimiError *err) {
  GemmaActivations *acts = model->acts;
  if (acts->grad_memory) return 0;
  Carver count = {NULL, 0};
  size_t floats = carve_backward(&count, acts, &model->config, (size_t)acts->capacity);
  acts->grad_memory = alloc_aligned(floats, err);
  if (!acts->grad_memory) return -1;
  Carver assign = {acts->grad_memory, 0};
  carve_backward(&assign, acts, &model->config, (size_t)acts->capacity);
  return 0;
}

// ---------------------------------------------------------------------------
// Forward

// Gemma 2/3 norms scale by (1 + w), Gemma 4's by w.
static void norm_forward(const GemmaLayerOffsets *off, float *out, float *rstd, const float *inp, const float *weight,
                         int N, int C, float eps) {
  if (off->gemma4) rmsnorm_forward_gain(out, rstd, inp, weight, N, C, eps);
  else rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
}

static void norm_backward(const GemmaLayerOffsets *off, float *dinp, float *dweight, const float *dout,
                          const float *inp, const float *weight, const float *rstd, int N, int C) {
  if (off->gemma4) rmsnorm_backward_gain(dinp, dweight, dout, inp, weight, rstd, N, C);
  else rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}

static LayerActs *layer_set(GemmaActivations *acts, int l);

// Where layer l's attention reads its keys and values (B, T, nkv, hd): its
// own, or for a kv-shared layer those of its source; a layer that kv-shared
// layers read keeps them in acts->store_k/v. Gradients alike (dstore_k/v).
static void layer_kv(GemmaActivations *acts, const GemmaConfig *cfg, int l, float **k, float **v) {
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, l, &shape);
  int src = shape.kv_source;
  if (acts->store_k[src]) {
    *k = acts->store_k[src];
    *v = acts->store_v[src];
  } else {
    *k = layer_set(acts, l)->k;
    *v = layer_set(acts, l)->v;
  }
}

// Gemma 4's per-layer input block and layer scalar, on h_ff (N, C) the
// residual after the MLP block: h_out = scalar * (h_ff + post_per_layer_input_norm(
// per_layer_projection(gelu_tanh(per_layer_input_gate(h_ff)) * ple_l))).
static void per_layer_input_forward(GemmaModel *model, int l, const GemmaLayerOffsets *off, const float *w,
                                    LayerActs *a, float *h_out, int N) {
  const GemmaConfig *cfg = &model->config;
  int C = cfg->hidden_size, P = (int)ple_width(cfg);
  if (off->has_ple) {
    const float *ple_l = model->acts->ple + (size_t)l * N * P;  // (N, P)
    matmul_forward(a->ple_gate, a->h_ff, w + off->ple_gate, N, C, P);
    geglu_forward(a->ple_act, a->ple_gate, ple_l, (size_t)N * P);
    matmul_forward(a->ple_proj, a->ple_act, w + off->ple_proj, N, P, C);
    rmsnorm_forward_gain(h_out, a->ple_rstd, a->ple_proj, w + off->ple_norm, N, C, (float)cfg->rms_norm_eps);
    residual_add(h_out, h_out, a->h_ff, (size_t)N * C);
  }
  float scalar = w[off->layer_scalar];
  for (size_t i = 0; i < (size_t)N * C; i++) h_out[i] *= scalar;
}

// One decoder layer: h_out = layer(h_in) with parameters w (layer_numel),
// saving internals into a.
static void layer_forward(GemmaModel *model, int l, const float *w, LayerActs *a, const float *h_in, float *h_out,
                          int B, int T) {
  const GemmaConfig *cfg = &model->config;
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
  float *k, *v;  // (N, kvd) the keys and values attention reads
  layer_kv(model->acts, cfg, l, &k, &v);

  // attention block: h_mid = h_in + post_attention_layernorm(o_proj(attn(input_layernorm(h_in))))
  norm_forward(&off, a->ln1, a->ln1_rstd, h_in, w + off.input_norm, N, C, eps);
  // Gemma 3/4 normalize each head of q and k before RoPE; Gemma 2 ropes the
  // projections directly, so they go straight into q/k.
  float *q_lin = off.has_qk_norm ? a->q_raw : a->q;  // (N, qd)
  matmul_forward(q_lin, a->ln1, w + off.q, N, C, qd);
  if (off.has_qk_norm) norm_forward(&off, a->q, a->q_rstd, a->q_raw, w + off.q_norm, N * nh, hd, eps);
  rope_forward_partial(a->q, a->q, pos, N, nh, hd, spec.rope_theta, spec.rope_position_scale, spec.rope_pairs);
  // A kv-shared layer (Gemma 4) computes no keys or values: it reads its source's.
  if (off.has_k) {
    float *k_lin = off.has_qk_norm ? a->k_raw : k;  // (N, kvd)
    matmul_forward(k_lin, a->ln1, w + off.k, N, C, kvd);
    // Gemma 4's values pass a norm without gain; with attention_k_eq_v the
    // full-attention layers take them from k_proj (before k_norm).
    float *v_lin = off.gemma4 ? (off.has_v ? a->v_raw : a->k_raw) : v;  // (N, kvd)
    if (off.has_v) matmul_forward(v_lin, a->ln1, w + off.v, N, C, kvd);
    if (off.gemma4) rmsnorm_forward_gain(v, a->v_rstd, v_lin, NULL, N * nkv, hd, eps);
    if (off.has_qk_norm) norm_forward(&off, k, a->k_rstd, a->k_raw, w + off.k_norm, N * nkv, hd, eps);
    rope_forward_partial(k, k, pos, N, nkv, hd, spec.rope_theta, spec.rope_position_scale, spec.rope_pairs);
  }
  attention_forward(a->att, a->att_lse, a->q, k, v, B, T, nh, nkv, hd, spec.window, spec.softcap, spec.scale);
  matmul_forward(a->o, a->att, w + off.o, N, qd, C);
  norm_forward(&off, a->h_mid, a->o_rstd, a->o, w + off.post_attn_norm, N, C, eps);
  residual_add(a->h_mid, a->h_mid, h_in, (size_t)N * C);

  // MLP block: h_out = h_mid + post_feedforward_layernorm(down(gelu_tanh(gate(x)) * up(x)))
  norm_forward(&off, a->ln2, a->ln2_rstd, a->h_mid, w + off.pre_ff_norm, N, C, eps);
  matmul_forward(a->gate, a->ln2, w + off.gate, N, C, I);
  matmul_forward(a->up, a->ln2, w + off.up, N, C, I);
  geglu_forward(a->gelu, a->gate, a->up, (size_t)N * I);
  matmul_forward(a->mlp, a->gelu, w + off.down, N, I, C);
  float *h_ff = off.has_ple ? a->h_ff : h_out;  // (N, C)
  norm_forward(&off, h_ff, a->mlp_rstd, a->mlp, w + off.post_ff_norm, N, C, eps);
  residual_add(h_ff, h_ff, a->h_mid, (size_t)N * C);
  if (off.gemma4) per_layer_input_forward(model, l, &off, w, a, h_out, N);
}

static LayerActs *layer_set(GemmaActivations *acts, int l) { return &acts->sets[acts->recompute ? 0 : l]; }

static float *residual_at(GemmaActivations *acts, const GemmaConfig *cfg, int l) {
  return acts->residual + (size_t)l * acts->capacity * cfg->hidden_size;
}

static int check_batch(const GemmaConfig *cfg, const int *tokens, const int *targets, int B, int T, FimiError *err) {
  if (B <= 0 || T <= 0) return fimi_fail(err, "gemma_forward: batch %d x %d must be positive", B, T);
  // The ops index (N, width) buffers with int row counts: keep N * width in range.
  long long width = cfg->hidden_size;
  if (cfg->intermediate_size > width) width = cfg->intermediate_size;
  GemmaLayerWidths widest = gemma_widest_layer(cfg);
  if ((long long)widest.qd > width) width = (long long)widest.qd;
  if ((long long)widest.mlp > width) width = (long long)widest.mlp;
  if ((long long)cfg->num_hidden_layers * (long long)ple_width(cfg) > width)
    width = (long long)cfg->num_hidden_layers * (long long)ple_width(cfg);
  if ((long long)B * T > 0x7fffffffLL / width) return fimi_fail(err, "gemma_forward: batch %d x %d is too large", B, T);
  int V = cfg->vocab_size;
  for (long i = 0; i < (long)B * T; i++) {
    if (tokens[i] < 0 || tokens[i] >= V)
      return fimi_fail(err, "gemma_forward: token %d at row %ld, column %ld is outside the vocabulary [0, %d)",
                       tokens[i], i / T, i % T, V);
    if (targets[i] < -1 || targets[i] >= V)
      return fimi_fail(err, "gemma_forward: target %d at row %ld, column %ld is outside [-1, %d)", targets[i], i / T,
                       i % T, V);
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Layer hooks (gemma.h): where each layer's parameters and gradients come
// from. Without hooks, the model's own buffers.

static int hook_before_forward(GemmaModel *model, int l, const float **w, FimiError *err) {
  const GemmaLayerHooks *h = model->hooks;
  *w = model->layers[l];
  if (h && h->before_forward && h->before_forward(h->ctx, l, w, err) != 0)
    return fimi_fail_wrap(err, "layer %d: before_forward hook", l);
  if (!*w) return fimi_fail(err, "layer %d: no parameters (freed, and no hook supplies them)", l);
  return 0;
}

static int hook_after_forward(GemmaModel *model, int l, FimiError *err) {
  const GemmaLayerHooks *h = model->hooks;
  if (h && h->after_forward && h->after_forward(h->ctx, l, err) != 0)
    return fimi_fail_wrap(err, "layer %d: after_forward hook", l);
  return 0;
}

static int hook_before_backward(GemmaModel *model, int l, const float **w, float **g, FimiError *err) {
  const GemmaLayerHooks *h = model->hooks;
  *w = model->layers[l];
  *g = model->layers_grad[l];
  if (h && h->before_backward && h->before_backward(h->ctx, l, w, g, err) != 0)
    return fimi_fail_wrap(err, "layer %d: before_backward hook", l);
  if (!*w || !*g) return fimi_fail(err, "layer %d: no parameters or gradient buffer for the backward", l);
  return 0;
}

static int hook_after_backward(GemmaModel *model, int l, FimiError *err) {
  const GemmaLayerHooks *h = model->hooks;
  if (h && h->after_backward && h->after_backward(h->ctx, l, err) != 0)
    return fimi_fail_wrap(err, "layer %d: after_backward hook", l);
  return 0;
}

void gemma_per_layer_inputs(const GemmaModel *model, const float *x0, const int *tokens, int N, float *proj,
                            float *rstd, float *normed, float *out) {
  const GemmaConfig *cfg = &model->config;
  GemmaGlobalOffsets g;
  gemma_global_offsets(cfg, &g);
  int C = cfg->hidden_size, L = cfg->num_hidden_layers, P = (int)ple_width(cfg), LP = L * P;
  // HF multiplies fp32 tensors by Python floats, which torch rounds to fp32.
  float proj_scale = (float)pow((double)C, -0.5), input_scale = (float)pow(2.0, -0.5);
  matmul_forward(proj, x0, model->globals + g.ple_proj, N, C, LP);
  for (size_t i = 0; i < (size_t)N * LP; i++) proj[i] *= proj_scale;
  rmsnorm_forward_gain(normed, rstd, proj, model->globals + g.ple_norm, N * L, P, (float)cfg->rms_norm_eps);
  // + the token's row of the per-layer table, scaled by sqrt(P) (fp32, as
  // the scaled embedding does), then * 2^-0.5, into layer-major order.
  const float *table = model->globals + g.ple_embed;  // (Vp, L*P)
  float embed_scale = sqrtf((float)P);
  for (int n = 0; n < N; n++) {
    const float *row = table + (size_t)tokens[n] * LP;  // (L*P)
    const float *nrow = normed + (size_t)n * LP;        // (L*P)
    for (int l = 0; l < L; l++) {
      float *o = out + ((size_t)l * N + n) * P;  // (P)
      for (int p = 0; p < P; p++) o[p] = (nrow[l * P + p] + row[l * P + p] * embed_scale) * input_scale;
    }
  }
}

static void per_layer_inputs_forward(GemmaModel *model, int N) {
  GemmaActivations *acts = model->acts;
  gemma_per_layer_inputs(model, residual_at(acts, &model->config, 0), acts->tokens, N, acts->ple_proj,
                         acts->ple_rstd, acts->ple_normed, acts->ple);
}

// Backward of per_layer_inputs_forward: acts->dple (L, N, P) holds the
// gradient wrt the per-layer inputs; accumulates the per-layer table's,
// projection's and norm's gradients and adds the x0 part into dx0 (N, C).
static void per_layer_inputs_backward(GemmaModel *model, float *dx0, int N) {
  const GemmaConfig *cfg = &model->config;
  GemmaActivations *acts = model->acts;
  GemmaGlobalOffsets g;
  gemma_global_offsets(cfg, &g);
  int C = cfg->hidden_size, L = cfg->num_hidden_layers, P = (int)ple_width(cfg), LP = L * P;
  float proj_scale = (float)pow((double)C, -0.5), input_scale = (float)pow(2.0, -0.5);
  for (int n = 0; n < N; n++)  // d(sum) = dple * 2^-0.5 for both terms, back to (N, L*P)
    for (int l = 0; l < L; l++) {
      const float *d = acts->dple + ((size_t)l * N + n) * P;
      float *flat = acts->dple_flat + (size_t)n * LP + (size_t)l * P;
      for (int p = 0; p < P; p++) flat[p] = d[p] * input_scale;
    }
  embedding_backward(model->globals_grad + g.ple_embed, acts->dple_flat, acts->tokens, N, LP, sqrtf((float)P),
                     cfg->pad_token_id);
  rmsnorm_backward_gain(acts->dple_proj, model->globals_grad + g.ple_norm, acts->dple_flat, acts->ple_proj,
                        model->globals + g.ple_norm, acts->ple_rstd, N * L, P);
  for (size_t i = 0; i < (size_t)N * LP; i++) acts->dple_proj[i] *= proj_scale;
  // dA is free here (the layers are done): the x0 part of the gradient
  matmul_backward(acts->dA, model->globals_grad + g.ple_proj, acts->dple_proj, residual_at(acts, cfg, 0),
                  model->globals + g.ple_proj, N, C, LP);
  residual_add(dx0, dx0, acts->dA, (size_t)N * C);
}

// Everything before the LM head: saves the batch, runs embedding, layers and
// the final norm into acts->final_norm (N, C). Activations must hold N rows.
// Fails only when a layer hook fails.
static int forward_to_final_norm(GemmaModel *model, const int *tokens, const int *targets, int B, int T,
                                 FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  GemmaActivations *acts = model->acts;
  int N = B * T, C = cfg->hidden_size, V = cfg->vocab_size, L = cfg->num_hidden_layers;
  acts->valid = 0;
  memcpy(acts->tokens, tokens, (size_t)N * sizeof(int));
  memcpy(acts->targets, targets, (size_t)N * sizeof(int));
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) acts->positions[b * T + t] = t;

  const float *wte = model->globals;                                // (V, C)
  const float *norm_w = model->globals + (size_t)V * C;             // (C)
  embedding_forward(residual_at(acts, cfg, 0), tokens, wte, N, C, gemma_embed_scale(cfg));
  if (ple_width(cfg) > 0) per_layer_inputs_forward(model, N);
  for (int l = 0; l < L; l++) {
    const float *w;
    if (hook_before_forward(model, l, &w, err) != 0) return -1;
    layer_forward(model, l, w, layer_set(acts, l), residual_at(acts, cfg, l), residual_at(acts, cfg, l + 1), B, T);
    if (hook_after_forward(model, l, err) != 0) return -1;
  }
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  norm_forward(&off, acts->final_norm, acts->final_rstd, residual_at(acts, cfg, L), norm_w, N, C,
               (float)cfg->rms_norm_eps);
  return 0;
}

// Records that the activations hold a complete forward of B x T, which a
// backward may differentiate.
static void mark_forward_done(GemmaActivations *acts, int B, int T) {
  acts->B = B;
  acts->T = T;
  acts->forward_recompute = acts->recompute;
  acts->valid = 1;
}

int gemma_forward(GemmaModel *model, const int *tokens, const int *targets, int B, int T, float *logprobs,
                  FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  if (check_batch(cfg, tokens, targets, B, T, err) != 0) return -1;
  if (ensure_activations(model, B * T, err) != 0) return -1;
  GemmaActivations *acts = model->acts;
  if (forward_to_final_norm(model, tokens, targets, B, T, err) != 0) return -1;
  lm_head_logprob_forward(logprobs, acts->lm_lse, acts->final_norm, model->globals, acts->targets, B * T,
                          cfg->hidden_size, cfg->vocab_size, (float)cfg->final_logit_softcapping);
  mark_forward_done(acts, B, T);
  return 0;
}

// ---------------------------------------------------------------------------
// Backward

// Backward of per_layer_input_forward: dres (N, C) on entry d h_out, on exit
// d h_ff; the per-layer input's gradient goes to acts->dple's layer l slice.
static void per_layer_input_backward(GemmaModel *model, int l, const GemmaLayerOffsets *off, const float *w, float *g,
                                     const LayerActs *a, int N) {
  const GemmaConfig *cfg = &model->config;
  GemmaActivations *acts = model->acts;
  int C = cfg->hidden_size, P = (int)ple_width(cfg);
  float *dres = acts->dres, *dA = acts->dA, *dB = acts->dB;
  // layer_scalar is a buffer: its gradient is never taken
  float scalar = w[off->layer_scalar];
  for (size_t i = 0; i < (size_t)N * C; i++) dres[i] *= scalar;
  if (!off->has_ple) return;
  const float *ple_l = acts->ple + (size_t)l * N * P;  // (N, P)
  rmsnorm_backward_gain(dA, g + off->ple_norm, dres, a->ple_proj, w + off->ple_norm, a->ple_rstd, N, C);
  matmul_backward(acts->dple_act, g + off->ple_proj, dA, a->ple_act, w + off->ple_proj, N, P, C);
  geglu_backward(acts->dple_gate, acts->dple + (size_t)l * N * P, acts->dple_act, a->ple_gate, ple_l, (size_t)N * P);
  matmul_backward(dB, g + off->ple_gate, acts->dple_gate, a->h_ff, w + off->ple_gate, N, C, P);
  residual_add(dres, dres, dB, (size_t)N * C);
}

// Backward through layer l with parameters w. dres (N, C): on entry the
// gradient wrt the layer's output, on exit wrt its input h_in. Parameter
// grads accumulate into g (layer_numel).
static void layer_backward(GemmaModel *model, int l, const float *w, float *g, const LayerActs *a, const float *h_in,
                           int B, int T) {
  const GemmaConfig *cfg = &model->config;
  GemmaActivations *acts = model->acts;
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
  float *dres = acts->dres, *dA = acts->dA, *dB = acts->dB;
  float *k, *v;  // (N, kvd) the keys and values attention read
  layer_kv(acts, cfg, l, &k, &v);

  if (off.gemma4) per_layer_input_backward(model, l, &off, w, g, a, N);  // dres = dh_ff
  // MLP block, from h_ff = h_mid + post_ff_norm(mlp).
  norm_backward(&off, dA, g + off.post_ff_norm, dres, a->mlp, w + off.post_ff_norm, a->mlp_rstd, N, C);  // dA = dmlp
  matmul_backward(acts->dgelu, g + off.down, dA, a->gelu, w + off.down, N, I, C);
  geglu_backward(acts->dgate, acts->dup, acts->dgelu, a->gate, a->up, (size_t)N * I);
  matmul_backward(dB, g + off.gate, acts->dgate, a->ln2, w + off.gate, N, C, I);  // dB = dln2 (gate part)
  matmul_backward(dA, g + off.up, acts->dup, a->ln2, w + off.up, N, C, I);
  residual_add(dB, dB, dA, NC);
  norm_backward(&off, dA, g + off.pre_ff_norm, dB, a->h_mid, w + off.pre_ff_norm, a->ln2_rstd, N, C);
  residual_add(dres, dres, dA, NC);  // dres = dh_mid: residual path + MLP path

  // Attention block, from h_mid = h_in + post_attn_norm(o).
  norm_backward(&off, dA, g + off.post_attn_norm, dres, a->o, w + off.post_attn_norm, a->o_rstd, N, C);  // dA = do
  matmul_backward(acts->datt, g + off.o, dA, a->att, w + off.o, N, qd, C);
  attention_backward(acts->dq, acts->dk, acts->dv, acts->datt, a->q, k, v, a->att, a->att_lse, B, T, nh, nkv, hd,
                     spec.window, spec.softcap, spec.scale);
  // Keys and values shared across layers (Gemma 4): a kv-shared layer hands
  // its gradient to the source layer, whose backward comes later and adds it.
  int src = shape.kv_source;
  if (!off.has_k) {
    residual_add(acts->dstore_k[src], acts->dstore_k[src], acts->dk, NKV);
    residual_add(acts->dstore_v[src], acts->dstore_v[src], acts->dv, NKV);
  } else if (acts->dstore_k[l]) {
    residual_add(acts->dk, acts->dk, acts->dstore_k[l], NKV);
    residual_add(acts->dv, acts->dv, acts->dstore_v[l], NKV);
  }
  rope_backward_partial(acts->dq, acts->dq, pos, N, nh, hd, spec.rope_theta, spec.rope_position_scale, spec.rope_pairs);
  if (off.has_k)
    rope_backward_partial(acts->dk, acts->dk, pos, N, nkv, hd, spec.rope_theta, spec.rope_position_scale,
                          spec.rope_pairs);
  float *dq_lin = acts->dq, *dk_lin = acts->dk, *dv_lin = acts->dv;  // gradients wrt the projections' outputs
  if (off.has_qk_norm) {
    // datt is dead after attention_backward: reuse it for dq_raw.
    norm_backward(&off, acts->datt, g + off.q_norm, acts->dq, a->q_raw, w + off.q_norm, a->q_rstd, N * nh, hd);
    dq_lin = acts->datt;
    if (off.has_k) {
      norm_backward(&off, acts->dk_raw, g + off.k_norm, acts->dk, a->k_raw, w + off.k_norm, a->k_rstd, N * nkv, hd);
      dk_lin = acts->dk_raw;
    }
  }
  if (off.gemma4 && off.has_k) {
    // the value norm (no gain); with keys as values its input is k_proj's output
    rmsnorm_backward_gain(acts->dv_raw, NULL, acts->dv, off.has_v ? a->v_raw : a->k_raw, NULL, a->v_rstd, N * nkv, hd);
    dv_lin = acts->dv_raw;
    if (!off.has_v) residual_add(dk_lin, dk_lin, acts->dv_raw, NKV);
  }
  matmul_backward(dB, g + off.q, dq_lin, a->ln1, w + off.q, N, C, qd);  // dB = dln1
  if (off.has_k) {
    matmul_backward(dA, g + off.k, dk_lin, a->ln1, w + off.k, N, C, kvd);
    residual_add(dB, dB, dA, NC);
  }
  if (off.has_v) {
    matmul_backward(dA, g + off.v, dv_lin, a->ln1, w + off.v, N, C, kvd);
    residual_add(dB, dB, dA, NC);
  }
  norm_backward(&off, dA, g + off.input_norm, dB, h_in, w + off.input_norm, a->ln1_rstd, N, C);
  residual_add(dres, dres, dA, NC);  // dres = dh_in
}

// Backward from the final norm's output down to the embedding, for the last
// forward: acts->dA (N, C) holds d/d final_norm (the LM head's dhidden) on
// entry. Parameter grads accumulate; the LM head has already added its part
// of the tied embedding's gradient. Fails only when a layer hook fails.
static int backward_from_final_norm(GemmaModel *model, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  GemmaActivations *acts = model->acts;
  int B = acts->B, T = acts->T, N = B * T, C = cfg->hidden_size, V = cfg->vocab_size, L = cfg->num_hidden_layers;
  const float *norm_w = model->globals + (size_t)V * C;
  float *dwte = model->globals_grad, *dnorm_w = model->globals_grad + (size_t)V * C;

  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  norm_backward(&off, acts->dres, dnorm_w, acts->dA, residual_at(acts, cfg, L), norm_w, acts->final_rstd, N, C);
  for (int l = 0; l < L; l++) {  // kv-shared layers add into these before their source's backward
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    size_t kvd = (size_t)shape.kv_heads * shape.head_dim;
    if (acts->dstore_k[l]) memset(acts->dstore_k[l], 0, (size_t)N * kvd * sizeof(float));
    if (acts->dstore_v[l]) memset(acts->dstore_v[l], 0, (size_t)N * kvd * sizeof(float));
  }
  for (int l = L - 1; l >= 0; l--) {
    LayerActs *a = layer_set(acts, l);
    const float *h_in = residual_at(acts, cfg, l);
    // Recompute the layer's internals from its saved input. Same ops, same
    // inputs: bitwise the values the forward had. The output (already in
    // residual l+1) goes to dB, which is free here.
    const float *w;
    float *g;
    if (hook_before_backward(model, l, &w, &g, err) != 0) return -1;
    if (acts->forward_recompute) layer_forward(model, l, w, a, h_in, acts->dB, B, T);
    layer_backward(model, l, w, g, a, h_in, B, T);
    if (hook_after_backward(model, l, err) != 0) return -1;
  }
  if (ple_width(cfg) > 0) per_layer_inputs_backward(model, acts->dres, N);  // x0 feeds the per-layer inputs too
  // The tied embedding gets the input-side gradient on top of the LM head's.
  embedding_backward(dwte, acts->dres, acts->tokens, N, C, gemma_embed_scale(cfg), cfg->pad_token_id);
  return 0;
}

int gemma_backward(GemmaModel *model, const float *dlogprobs, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  GemmaActivations *acts = model->acts;
  if (!acts || !acts->valid) return fimi_fail(err, "gemma_backward: no forward to differentiate (call gemma_forward first)");
  if (!model->globals_grad) return fimi_fail(err, "gemma_backward: gradients are not allocated (gemma_model_alloc_grads)");
  if (ensure_grad_scratch(model, err) != 0) return -1;
  int N = acts->B * acts->T;
  // LM head: recomputes each block's logits from the saved lse
  lm_head_logprob_backward(acts->dA, model->globals_grad, dlogprobs, acts->final_norm, model->globals, acts->targets,
                           acts->lm_lse, N, cfg->hidden_size, cfg->vocab_size, (float)cfg->final_logit_softcapping);
  return backward_from_final_norm(model, err);
}

int gemma_forward_backward(GemmaModel *model, const int *tokens, const int *targets, int B, int T,
                           const float *dlogprobs, float *logprobs, FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  if (!model->globals_grad)
    return fimi_fail(err, "gemma_forward_backward: gradients are not allocated (gemma_model_alloc_grads)");
  if (check_batch(cfg, tokens, targets, B, T, err) != 0) return -1;
  // activations first: growing them frees the backward scratch
  if (ensure_activations(model, B * T, err) != 0 || ensure_grad_scratch(model, err) != 0) return -1;
  GemmaActivations *acts = model->acts;
  if (forward_to_final_norm(model, tokens, targets, B, T, err) != 0) return -1;
  // LM head forward and backward per block of rows: dA = d/d final_norm
  lm_head_logprob_forward_backward(logprobs, acts->lm_lse, acts->dA, model->globals_grad, dlogprobs, acts->final_norm,
                                   model->globals, acts->targets, B * T, cfg->hidden_size, cfg->vocab_size,
                                   (float)cfg->final_logit_softcapping);
  mark_forward_done(acts, B, T);
  return backward_from_final_norm(model, err);
}
