// model/gemma_params.c: the Gemma model's parameters: the per-layer offsets,
// the HF-named tensor table, allocation of parameters and gradients, random
// init, and the per-layer attention settings (see gemma.h for the layout).
// Forward and backward live in gemma.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/gemma.h"

float gemma_embed_scale(const GemmaConfig *cfg) {
  // HF builds torch.tensor(hidden_size ** 0.5) in fp32; sqrtf is correctly
  // rounded, so this is the same float.
  return sqrtf((float)cfg->hidden_size);
}

// One layer's tensors in gemma.h's order; numel left for the caller.
static void layer_offsets_used(const GemmaConfig *cfg, int layer, GemmaLayerOffsets *off) {
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, layer, &shape);
  size_t C = (size_t)cfg->hidden_size, I = (size_t)shape.intermediate, hd = (size_t)shape.head_dim;
  size_t qd = (size_t)cfg->num_attention_heads * hd, kvd = (size_t)shape.kv_heads * hd;
  size_t P = cfg->family == GEMMA_FAMILY_GEMMA4 ? (size_t)cfg->hidden_size_per_layer_input : 0;
  size_t at = 0;
  memset(off, 0, sizeof *off);
  off->gemma4 = cfg->family == GEMMA_FAMILY_GEMMA4;
  off->has_qk_norm = cfg->family != GEMMA_FAMILY_GEMMA2;
  off->has_k = shape.has_kv;
  off->has_v = shape.has_v;
  off->has_ple = P > 0;
  off->input_norm = at, at += C;
  off->q = at, at += qd * C;
  if (off->has_k) off->k = at, at += kvd * C;
  if (off->has_v) off->v = at, at += kvd * C;
  off->o = at, at += C * qd;
  if (off->has_qk_norm) {
    off->q_norm = at, at += hd;
    if (off->has_k) off->k_norm = at, at += hd;
  }
  off->post_attn_norm = at, at += C;
  off->pre_ff_norm = at, at += C;
  off->gate = at, at += I * C;
  off->up = at, at += I * C;
  off->down = at, at += C * I;
  off->post_ff_norm = at, at += C;
  if (off->has_ple) {
    off->ple_gate = at, at += P * C;
    off->ple_proj = at, at += C * P;
    off->ple_norm = at, at += C;
  }
  if (off->gemma4) off->layer_scalar = at, at += 1;
  off->used = at;
}

void gemma_layer_offsets_at(const GemmaConfig *cfg, int layer, GemmaLayerOffsets *off) {
  size_t numel = 0;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerOffsets other;
    layer_offsets_used(cfg, l, &other);
    if (other.used > numel) numel = other.used;
  }
  layer_offsets_used(cfg, layer, off);
  off->numel = numel;
}

void gemma_layer_offsets(const GemmaConfig *cfg, GemmaLayerOffsets *off) { gemma_layer_offsets_at(cfg, 0, off); }

void gemma_global_offsets(const GemmaConfig *cfg, GemmaGlobalOffsets *off) {
  size_t V = (size_t)cfg->vocab_size, C = (size_t)cfg->hidden_size, L = (size_t)cfg->num_hidden_layers;
  size_t P = cfg->family == GEMMA_FAMILY_GEMMA4 ? (size_t)cfg->hidden_size_per_layer_input : 0;
  memset(off, 0, sizeof *off);
  size_t at = 0;
  off->embed = at, at += V * C;
  off->norm = at, at += C;
  if (P > 0) {
    off->ple_embed = at, at += (size_t)cfg->vocab_size_per_layer_input * L * P;
    off->ple_proj = at, at += L * P * C;
    off->ple_norm = at, at += P;
  }
  off->numel = at;
}

void gemma_attn_spec(const GemmaConfig *cfg, int layer, GemmaAttnSpec *spec) {
  int sliding = cfg->layer_is_sliding[layer] != 0;
  spec->window = sliding ? cfg->sliding_window : 0;
  // HF multiplies fp32 scores by the Python float query_pre_attn_scalar**-0.5,
  // which torch rounds to fp32.
  spec->scale = (float)pow(cfg->query_pre_attn_scalar, -0.5);
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, layer, &shape);
  spec->rope_pairs = shape.rope_pairs;
  if (cfg->family == GEMMA_FAMILY_GEMMA4) {
    // Gemma4TextAttention: scaling 1.0, no softcap; rope per layer type
    // (sliding: default; full: proportional, with its factor)
    spec->scale = 1.0f;
    spec->softcap = 0.0f;
    spec->rope_theta = (float)(sliding ? cfg->rope_local_base_freq : cfg->rope_theta);
    spec->rope_position_scale = sliding ? 1.0f : (float)cfg->rope_scaling_factor;
  } else if (cfg->family == GEMMA_FAMILY_GEMMA2) {
    spec->rope_theta = (float)cfg->rope_theta;
    spec->rope_position_scale = 1.0f;
    spec->softcap = (float)cfg->attn_logit_softcapping;
  } else {
    // Gemma3Attention never passes a softcap to its attention function, even
    // when the config carries attn_logit_softcapping.
    spec->rope_theta = (float)(sliding ? cfg->rope_local_base_freq : cfg->rope_theta);
    spec->rope_position_scale = sliding ? 1.0f : (float)cfg->rope_scaling_factor;
    spec->softcap = 0.0f;
  }
}

double gemma_visible_pairs(int T, int window) {
  double pairs = 0;
  for (int i = 0; i < T; i++) pairs += window > 0 && i + 1 > window ? window : i + 1;
  return pairs;
}

// 64-byte aligned so the kernels' SIMD loads never split cache lines.
static float *alloc_floats(size_t n, FimiError *err) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) {
    fimi_fail(err, "out of memory allocating %zu floats", n);
    return NULL;
  }
  return p;
}

static GemmaTensor *add_tensor(GemmaModel *model, const char *name, int layer, size_t offset, int64_t rows,
                               int64_t cols, int is_norm) {
  GemmaTensor *t = &model->tensors[model->num_tensors++];
  memset(t, 0, sizeof *t);
  if (layer >= 0)
    snprintf(t->name, sizeof t->name, "model.layers.%d.%s", layer, name);
  else
    snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = cols > 0 ? 2 : 1;
  t->shape[0] = rows;
  t->shape[1] = cols > 0 ? cols : 0;
  t->numel = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
  t->offset = offset;
  t->layer = layer;
  t->is_norm = is_norm;
  return t;
}

// Tensors of layer l in gemma.h's order.
static void add_layer_tensors(GemmaModel *model, int l) {
  const GemmaConfig *cfg = &model->config;
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, l, &shape);
  GemmaLayerOffsets off;
  gemma_layer_offsets_at(cfg, l, &off);
  int64_t C = cfg->hidden_size, I = shape.intermediate, hd = shape.head_dim;
  int64_t qd = cfg->num_attention_heads * hd, kvd = shape.kv_heads * hd, P = cfg->hidden_size_per_layer_input;
  add_tensor(model, "input_layernorm.weight", l, off.input_norm, C, 0, 1);
  add_tensor(model, "self_attn.q_proj.weight", l, off.q, qd, C, 0);
  if (off.has_k) add_tensor(model, "self_attn.k_proj.weight", l, off.k, kvd, C, 0);
  if (off.has_v) add_tensor(model, "self_attn.v_proj.weight", l, off.v, kvd, C, 0);
  add_tensor(model, "self_attn.o_proj.weight", l, off.o, C, qd, 0);
  if (off.has_qk_norm) {
    add_tensor(model, "self_attn.q_norm.weight", l, off.q_norm, hd, 0, 1);
    if (off.has_k) add_tensor(model, "self_attn.k_norm.weight", l, off.k_norm, hd, 0, 1);
  }
  add_tensor(model, "post_attention_layernorm.weight", l, off.post_attn_norm, C, 0, 1);
  add_tensor(model, "pre_feedforward_layernorm.weight", l, off.pre_ff_norm, C, 0, 1);
  add_tensor(model, "mlp.gate_proj.weight", l, off.gate, I, C, 0);
  add_tensor(model, "mlp.up_proj.weight", l, off.up, I, C, 0);
  add_tensor(model, "mlp.down_proj.weight", l, off.down, C, I, 0);
  add_tensor(model, "post_feedforward_layernorm.weight", l, off.post_ff_norm, C, 0, 1);
  if (off.has_ple) {
    add_tensor(model, "per_layer_input_gate.weight", l, off.ple_gate, P, C, 0);
    add_tensor(model, "per_layer_projection.weight", l, off.ple_proj, C, P, 0);
    add_tensor(model, "post_per_layer_input_norm.weight", l, off.ple_norm, C, 0, 1);
  }
  if (off.gemma4) add_tensor(model, "layer_scalar", l, off.layer_scalar, 1, 0, 1)->frozen = 1;
}

// Tensor table in HF order: globals, then each layer in gemma.h's order.
static void build_tensor_table(GemmaModel *model) {
  const GemmaConfig *cfg = &model->config;
  int64_t V = cfg->vocab_size, C = cfg->hidden_size, L = cfg->num_hidden_layers;
  int64_t P = cfg->family == GEMMA_FAMILY_GEMMA4 ? cfg->hidden_size_per_layer_input : 0;
  GemmaGlobalOffsets g;
  gemma_global_offsets(cfg, &g);
  model->num_tensors = 0;
  add_tensor(model, "model.embed_tokens.weight", -1, g.embed, V, C, 0);
  add_tensor(model, "model.norm.weight", -1, g.norm, C, 0, 1);
  if (P > 0) {
    add_tensor(model, "model.embed_tokens_per_layer.weight", -1, g.ple_embed, cfg->vocab_size_per_layer_input, L * P, 0);
    add_tensor(model, "model.per_layer_model_projection.weight", -1, g.ple_proj, L * P, C, 0);
    add_tensor(model, "model.per_layer_projection_norm.weight", -1, g.ple_norm, P, 0, 1);
  }
  for (int l = 0; l < cfg->num_hidden_layers; l++) add_layer_tensors(model, l);
}

int gemma_model_create(GemmaModel *model, const GemmaConfig *cfg, FimiError *err) {
  memset(model, 0, sizeof *model);
  if (gemma_config_validate(cfg, err) != 0) return -1;
  model->config = *cfg;
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  GemmaGlobalOffsets g;
  gemma_global_offsets(cfg, &g);
  model->globals_numel = g.numel;
  model->layer_numel = off.numel;
  int per_layer = 17;  // the most a layer has (Gemma 4 with per-layer embeddings)
  model->tensors = fimi_calloc((size_t)(5 + per_layer * cfg->num_hidden_layers), sizeof(GemmaTensor), err);
  if (!model->tensors) goto fail;
  build_tensor_table(model);
  model->globals = alloc_floats(model->globals_numel, err);
  if (!model->globals) goto fail;
  memset(model->globals, 0, model->globals_numel * sizeof(float));
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    model->layers[l] = alloc_floats(model->layer_numel, err);
    if (!model->layers[l]) goto fail;
    memset(model->layers[l], 0, model->layer_numel * sizeof(float));
  }
  return 0;
fail:
  gemma_model_free(model);
  return fimi_fail_wrap(err, "creating the Gemma model");
}

void gemma_model_free(GemmaModel *model) {
  if (!model) return;
  gemma_activations_free(model);
  free(model->globals);
  free(model->globals_grad);
  for (int l = 0; l < GEMMA_MAX_LAYERS; l++) {
    free(model->layers[l]);
    free(model->layers_grad[l]);
  }
  free(model->tensors);
  memset(model, 0, sizeof *model);
}

void gemma_model_init_random(GemmaModel *model, uint64_t seed) {
  // One stream walked in tensor-table order, so the init depends only on the
  // config and the seed.
  Rng rng;
  rng_seed(&rng, seed);
  for (int i = 0; i < model->num_tensors; i++) {
    const GemmaTensor *t = &model->tensors[i];
    float *data = gemma_tensor_data(model, t);
    if (t->is_norm && model->config.family == GEMMA_FAMILY_GEMMA4)
      for (size_t j = 0; j < t->numel; j++) data[j] = 1.0f;  // Gemma 4 gains (and layer_scalar) start at 1
    else if (t->is_norm)
      memset(data, 0, t->numel * sizeof(float));  // (1 + w) with w = 0: identity scale
    else
      rng_fill_normal(&rng, data, (long)t->numel, 0.0f, 0.02f);
  }
  // nn.Embedding(padding_idx=pad) zeroes the pad row at init, as HF does
  // (Gemma 4's per-layer table too).
  const GemmaConfig *cfg = &model->config;
  if (cfg->pad_token_id >= 0 && cfg->pad_token_id < cfg->vocab_size)
    memset(model->globals + (size_t)cfg->pad_token_id * (size_t)cfg->hidden_size, 0,
           (size_t)cfg->hidden_size * sizeof(float));
  GemmaGlobalOffsets g;
  gemma_global_offsets(cfg, &g);
  size_t ple_row = (size_t)cfg->num_hidden_layers * (size_t)cfg->hidden_size_per_layer_input;
  if (g.ple_embed && cfg->pad_token_id >= 0 && cfg->pad_token_id < cfg->vocab_size_per_layer_input)
    memset(model->globals + g.ple_embed + (size_t)cfg->pad_token_id * ple_row, 0, ple_row * sizeof(float));
}

int gemma_model_alloc_grads(GemmaModel *model, FimiError *err) {
  if (!model->globals_grad) {
    model->globals_grad = alloc_floats(model->globals_numel, err);
    if (!model->globals_grad) return -1;
  }
  for (int l = 0; l < model->config.num_hidden_layers; l++) {
    if (model->layers_grad[l]) continue;
    model->layers_grad[l] = alloc_floats(model->layer_numel, err);
    if (!model->layers_grad[l]) return -1;
  }
  gemma_model_zero_grads(model);
  return 0;
}

void gemma_model_zero_grads(GemmaModel *model) {
  if (model->globals_grad) memset(model->globals_grad, 0, model->globals_numel * sizeof(float));
  for (int l = 0; l < model->config.num_hidden_layers; l++)
    if (model->layers_grad[l]) memset(model->layers_grad[l], 0, model->layer_numel * sizeof(float));
}

float *gemma_tensor_data(GemmaModel *model, const GemmaTensor *t) {
  float *base = t->layer < 0 ? model->globals : model->layers[t->layer];
  return base ? base + t->offset : NULL;
}

float *gemma_tensor_grad(GemmaModel *model, const GemmaTensor *t) {
  float *base = t->layer < 0 ? model->globals_grad : model->layers_grad[t->layer];
  return base ? base + t->offset : NULL;
}

const GemmaTensor *gemma_find_tensor(const GemmaModel *model, const char *name) {
  for (int i = 0; i < model->num_tensors; i++)
    if (strcmp(model->tensors[i].name, name) == 0) return &model->tensors[i];
  return NULL;
}

int64_t gemma_model_param_count(const GemmaModel *model) {
  if (model->config.family == GEMMA_FAMILY_GEMMA4) return gemma_config_param_count(&model->config);
  return (int64_t)model->globals_numel + (int64_t)model->config.num_hidden_layers * (int64_t)model->layer_numel;
}
