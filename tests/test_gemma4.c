// tests/test_gemma4.c: Gemma 4 text models on the CPU backend (model/).
// Checks, against an independent float64 reference written here from
// transformers' modeling_gemma4.py (Gemma4ForCausalLM):
// - the forward's log-probs, on tiny-g4 (per-layer embeddings, kv sharing,
//   double-wide MLP, keys = values on full layers with their own head dim,
//   partial rope) and on a variant without per-layer embeddings;
// - every trainable tensor's gradient (loss = sum_t w_t * logprob_t) against
//   central finite differences of the reference, the layer_scalar buffer's
//   gradient staying 0;
// - recompute = 1 and the fused forward + backward: bitwise the same
//   log-probs and gradients;
// - KV-cache prefill + decode against the forward, the kv-shared layers
//   holding no cache of their own; a copied sequence decodes alike; greedy
//   generation starts with the argmax after the prompt;
// - config.json: the Hub's gemma4 wrapper (E2B text_config), per_layer_config
//   as transformers writes it, the refused mixture-of-experts block, and a
//   round trip of what fimi writes; presets' parameter counts.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/decode.h"
#include "model/gemma.h"
#include "finite_difference.h"
#include "test_util.h"

#define BATCH 2
#define SEQ 12

// ---------------------------------------------------------------------------
// float64 reference (modeling_gemma4.py), parameters looked up by HF name.

typedef struct RefModel {
  const GemmaModel *model;
  double **p;  // (num_tensors) float64 copy of each tensor
} RefModel;

static const double *ref_tensor(const RefModel *r, int layer, const char *name) {
  char full[GEMMA_NAME_MAX];
  if (layer >= 0) snprintf(full, sizeof full, "model.layers.%d.%s", layer, name);
  else snprintf(full, sizeof full, "%s", name);
  const GemmaTensor *t = gemma_find_tensor(r->model, full);
  if (!t) {
    fprintf(stderr, "reference: no tensor %s\n", full);
    exit(2);
  }
  return r->p[t - r->model->tensors];
}

// Gemma4RMSNorm: out (rows, n) = x * (mean(x^2) + eps)^-0.5 * w (w NULL: no gain)
static void ref_norm(double *out, const double *x, const double *w, int rows, int n, double eps) {
  for (int r = 0; r < rows; r++) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[r * n + i] * x[r * n + i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) out[r * n + i] = x[r * n + i] * s * (w ? w[i] : 1.0);
  }
}

// out (rows, oc) = x (rows, ic) @ w^T
static void ref_matmul(double *out, const double *x, const double *w, int rows, int ic, int oc) {
  for (int r = 0; r < rows; r++)
    for (int o = 0; o < oc; o++) {
      double s = 0;
      for (int i = 0; i < ic; i++) s += x[r * ic + i] * w[o * ic + i];
      out[r * oc + o] = s;
    }
}

// rotate_half rope with "proportional" frequencies: pair i < pairs turns by
// t * theta^(-2i/hd), the others have frequency 0. x (B*T, heads, hd).
static void ref_rope(double *x, int B, int T, int heads, int hd, double theta, int pairs) {
  for (int n = 0; n < B * T; n++)
    for (int h = 0; h < heads; h++) {
      double *v = x + ((size_t)n * heads + h) * hd;
      for (int i = 0; i < pairs; i++) {
        double ang = (n % T) * pow(theta, -2.0 * i / hd);
        double a = v[i], c = v[i + hd / 2];
        v[i] = a * cos(ang) - c * sin(ang);
        v[i + hd / 2] = c * cos(ang) + a * sin(ang);
      }
    }
}

static double gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

// Causal attention with a window (0 = none), scaling 1.0, GQA.
static void ref_attention(double *att, const double *q, const double *k, const double *v, int B, int T, int nh,
                          int nkv, int hd, int window) {
  double sc[SEQ];
  for (int b = 0; b < B; b++)
    for (int hh = 0; hh < nh; hh++) {
      int kh = hh / (nh / nkv);
      for (int i = 0; i < T; i++) {
        const double *qi = q + ((size_t)(b * T + i) * nh + hh) * hd;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j <= i; j++) {
          sc[j] = -INFINITY;
          if (window > 0 && j <= i - window) continue;
          const double *kj = k + ((size_t)(b * T + j) * nkv + kh) * hd;
          double s = 0;
          for (int d = 0; d < hd; d++) s += qi[d] * kj[d];
          sc[j] = s;
          if (s > mx) mx = s;
        }
        for (int j = 0; j <= i; j++) sum += exp(sc[j] - mx);
        double *oi = att + ((size_t)(b * T + i) * nh + hh) * hd;
        for (int d = 0; d < hd; d++) oi[d] = 0;
        for (int j = 0; j <= i; j++) {
          double p = exp(sc[j] - mx) / sum;
          const double *vj = v + ((size_t)(b * T + j) * nkv + kh) * hd;
          for (int d = 0; d < hd; d++) oi[d] += p * vj[d];
        }
      }
    }
}

#define ALLOC(n) calloc((size_t)(n), sizeof(double))

// Weighted sum of log-probs; logprobs (B*T) out if non-NULL.
static double ref_loss(const RefModel *r, const int *tokens, const int *targets, const float *weights, int B, int T,
                       double *logprobs) {
  const GemmaConfig *cfg = &r->model->config;
  int N = B * T, C = cfg->hidden_size, V = cfg->vocab_size, L = cfg->num_hidden_layers, nh = cfg->num_attention_heads;
  int P = cfg->hidden_size_per_layer_input, LP = L * P, Imax = 2 * cfg->intermediate_size;
  int qmax = nh * (cfg->global_head_dim > cfg->head_dim ? cfg->global_head_dim : cfg->head_dim);
  double eps = (float)cfg->rms_norm_eps;
  double *h = ALLOC(N * C), *x = ALLOC(N * C), *y = ALLOC(N * C), *q = ALLOC(N * qmax), *att = ALLOC(N * qmax);
  double *g = ALLOC(N * Imax), *u = ALLOC(N * Imax), *ple = ALLOC(N * LP + 1), *proj = ALLOC(N * LP + 1);
  double *ks[GEMMA_MAX_LAYERS] = {0}, *vs[GEMMA_MAX_LAYERS] = {0};
  const double *wte = ref_tensor(r, -1, "model.embed_tokens.weight");
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) h[n * C + c] = wte[(size_t)tokens[n] * C + c] * gemma_embed_scale(cfg);
  if (P > 0) {  // get_per_layer_inputs + project_per_layer_inputs
    const double *table = ref_tensor(r, -1, "model.embed_tokens_per_layer.weight");
    ref_matmul(proj, h, ref_tensor(r, -1, "model.per_layer_model_projection.weight"), N, C, LP);
    for (int i = 0; i < N * LP; i++) proj[i] *= pow(C, -0.5);
    ref_norm(proj, proj, ref_tensor(r, -1, "model.per_layer_projection_norm.weight"), N * L, P, eps);
    for (int n = 0; n < N; n++)
      for (int j = 0; j < LP; j++) ple[n * LP + j] = (proj[n * LP + j] + table[(size_t)tokens[n] * LP + j] * sqrt(P)) * sqrt(0.5);
  }
  for (int l = 0; l < L; l++) {
    GemmaLayerShape s;
    gemma_layer_shape(cfg, l, &s);
    int sliding = cfg->layer_is_sliding[l], hd = s.head_dim, nkv = s.kv_heads, I = s.intermediate;
    int qd = nh * hd, kvd = nkv * hd;
    double theta = sliding ? cfg->rope_local_base_freq : cfg->rope_theta;
    int pairs = sliding ? hd / 2 : (int)floor(cfg->partial_rotary_factor * hd / 2);
    ref_norm(x, h, ref_tensor(r, l, "input_layernorm.weight"), N, C, eps);
    ref_matmul(q, x, ref_tensor(r, l, "self_attn.q_proj.weight"), N, C, qd);
    ref_norm(q, q, ref_tensor(r, l, "self_attn.q_norm.weight"), N * nh, hd, eps);
    ref_rope(q, B, T, nh, hd, theta, pairs);
    if (s.has_kv) {
      ks[l] = ALLOC(N * kvd), vs[l] = ALLOC(N * kvd);
      ref_matmul(ks[l], x, ref_tensor(r, l, "self_attn.k_proj.weight"), N, C, kvd);
      if (s.has_v) ref_matmul(vs[l], x, ref_tensor(r, l, "self_attn.v_proj.weight"), N, C, kvd);
      else memcpy(vs[l], ks[l], (size_t)N * kvd * sizeof(double));  // attention_k_eq_v
      ref_norm(ks[l], ks[l], ref_tensor(r, l, "self_attn.k_norm.weight"), N * nkv, hd, eps);
      ref_rope(ks[l], B, T, nkv, hd, theta, pairs);
      ref_norm(vs[l], vs[l], NULL, N * nkv, hd, eps);
    }
    ref_attention(att, q, ks[s.kv_source], vs[s.kv_source], B, T, nh, nkv, hd, sliding ? cfg->sliding_window : 0);
    ref_matmul(x, att, ref_tensor(r, l, "self_attn.o_proj.weight"), N, qd, C);
    ref_norm(y, x, ref_tensor(r, l, "post_attention_layernorm.weight"), N, C, eps);
    for (int i = 0; i < N * C; i++) h[i] += y[i];
    ref_norm(x, h, ref_tensor(r, l, "pre_feedforward_layernorm.weight"), N, C, eps);
    ref_matmul(g, x, ref_tensor(r, l, "mlp.gate_proj.weight"), N, C, I);
    ref_matmul(u, x, ref_tensor(r, l, "mlp.up_proj.weight"), N, C, I);
    for (int i = 0; i < N * I; i++) g[i] = gelu_tanh(g[i]) * u[i];
    ref_matmul(x, g, ref_tensor(r, l, "mlp.down_proj.weight"), N, I, C);
    ref_norm(y, x, ref_tensor(r, l, "post_feedforward_layernorm.weight"), N, C, eps);
    for (int i = 0; i < N * C; i++) h[i] += y[i];
    if (P > 0) {
      ref_matmul(g, h, ref_tensor(r, l, "per_layer_input_gate.weight"), N, C, P);
      for (int n = 0; n < N; n++)
        for (int p = 0; p < P; p++) g[n * P + p] = gelu_tanh(g[n * P + p]) * ple[n * LP + l * P + p];
      ref_matmul(x, g, ref_tensor(r, l, "per_layer_projection.weight"), N, P, C);
      ref_norm(y, x, ref_tensor(r, l, "post_per_layer_input_norm.weight"), N, C, eps);
      for (int i = 0; i < N * C; i++) h[i] += y[i];
    }
    double scalar = ref_tensor(r, l, "layer_scalar")[0];
    for (int i = 0; i < N * C; i++) h[i] *= scalar;
  }
  ref_norm(x, h, ref_tensor(r, -1, "model.norm.weight"), N, C, eps);
  double loss = 0, cap = cfg->final_logit_softcapping;
  double *logits = ALLOC(V);
  for (int n = 0; n < N; n++) {
    double lp = 0;
    if (targets[n] >= 0) {
      double mx = -INFINITY, sum = 0;
      for (int vv = 0; vv < V; vv++) {
        double s = 0;
        for (int c = 0; c < C; c++) s += x[n * C + c] * wte[(size_t)vv * C + c];
        if (cap > 0) s = cap * tanh(s / cap);
        logits[vv] = s;
        if (s > mx) mx = s;
      }
      for (int vv = 0; vv < V; vv++) sum += exp(logits[vv] - mx);
      lp = logits[targets[n]] - mx - log(sum);
    }
    if (logprobs) logprobs[n] = lp;
    loss += weights[n] * lp;
  }
  for (int l = 0; l < L; l++) free(ks[l]), free(vs[l]);
  free(h), free(x), free(y), free(q), free(att), free(g), free(u), free(ple), free(proj), free(logits);
  return loss;
}

// The reference loss of one batch, as fd_tensor_error calls it.
typedef struct BatchLoss {
  const RefModel *ref;
  const int *tokens, *targets;
  const float *weights;
} BatchLoss;

static double batch_loss(void *ctx) {
  const BatchLoss *b = ctx;
  return ref_loss(b->ref, b->tokens, b->targets, b->weights, BATCH, SEQ, NULL);
}

// ---------------------------------------------------------------------------

// O(1) activations so finite differences see real curvature: matrices
// N(0, 1/fan_in), gains 1 + N(0, 0.1^2), layer scalars in [0.5, 1.5].
static void init_test_params(GemmaModel *m, uint64_t seed) {
  Rng rng;
  rng_seed(&rng, seed);
  for (int i = 0; i < m->num_tensors; i++) {
    const GemmaTensor *t = &m->tensors[i];
    float *data = gemma_tensor_data(m, t);
    if (t->frozen) {
      data[0] = 0.5f + rng_uniform(&rng);
    } else if (t->is_norm) {
      rng_fill_normal(&rng, data, (long)t->numel, 0.0f, 0.1f);
      for (size_t j = 0; j < t->numel; j++) data[j] += 1.0f;
    } else {
      rng_fill_normal(&rng, data, (long)t->numel, 0.0f, 1.0f / sqrtf((float)t->shape[1]));
    }
  }
}

static void make_batch(const GemmaConfig *cfg, int *tokens, int *targets, float *weights, uint64_t seed) {
  Rng rng;
  rng_seed(&rng, seed);
  int N = BATCH * SEQ;
  for (int n = 0; n < N; n++) tokens[n] = (int)(rng_next_u64(&rng) % (uint64_t)cfg->vocab_size);
  for (int n = 0; n < N; n++) targets[n] = (n + 1) % SEQ ? tokens[n + 1] : -1;
  targets[3] = -1;
  for (int n = 0; n < N; n++) weights[n] = 2.0f * rng_uniform(&rng) - 1.0f;
}

static int same_grads(GemmaModel *a, GemmaModel *b) {
  if (memcmp(a->globals_grad, b->globals_grad, a->globals_numel * sizeof(float)) != 0) return 0;
  for (int l = 0; l < a->config.num_hidden_layers; l++)
    if (memcmp(a->layers_grad[l], b->layers_grad[l], a->layer_numel * sizeof(float)) != 0) return 0;
  return 1;
}

static void check_model(const char *label, const GemmaConfig *cfg) {
  FimiError err = {0};
  printf("%s: V=%d C=%d L=%d hd=%d/%d P=%d shared=%d double-wide=%d k=v=%d rope %.2f\n", label, cfg->vocab_size,
         cfg->hidden_size, cfg->num_hidden_layers, cfg->head_dim, cfg->global_head_dim,
         cfg->hidden_size_per_layer_input, cfg->num_kv_shared_layers, cfg->use_double_wide_mlp,
         cfg->attention_k_eq_v, cfg->partial_rotary_factor);
  GemmaModel model;
  if (gemma_model_create(&model, cfg, &err) != 0 || gemma_model_alloc_grads(&model, &err) != 0) {
    CHECK(0, "%s: %s", label, err.message);
    return;
  }
  init_test_params(&model, 1234);
  int N = BATCH * SEQ, tokens[BATCH * SEQ], targets[BATCH * SEQ];
  float weights[BATCH * SEQ], logprobs[BATCH * SEQ];
  make_batch(cfg, tokens, targets, weights, 99);
  CHECK(gemma_forward(&model, tokens, targets, BATCH, SEQ, logprobs, &err) == 0, "forward: %s", err.message);
  RefModel ref = {&model, calloc((size_t)model.num_tensors, sizeof(double *))};
  for (int i = 0; i < model.num_tensors; i++) {
    const GemmaTensor *t = &model.tensors[i];
    ref.p[i] = malloc(t->numel * sizeof(double));
    const float *src = gemma_tensor_data(&model, t);
    for (size_t j = 0; j < t->numel; j++) ref.p[i][j] = src[j];
  }
  double ref_lp[BATCH * SEQ], max_lp_diff = 0, lo = 0;
  ref_loss(&ref, tokens, targets, weights, BATCH, SEQ, ref_lp);
  for (int n = 0; n < N; n++) max_lp_diff = fmax(max_lp_diff, fabs(logprobs[n] - ref_lp[n])), lo = fmin(lo, ref_lp[n]);
  printf("  forward vs float64 reference: max |logprob diff| = %.3g (lowest logprob %.2f)\n", max_lp_diff, lo);
  CHECK(max_lp_diff < 2e-5, "%s: forward differs from the float64 reference by %g", label, max_lp_diff);
  CHECK(lo < -3.0, "%s: log-probs too close to zero for a meaningful check", label);

  gemma_model_zero_grads(&model);
  CHECK(gemma_backward(&model, weights, &err) == 0, "backward: %s", err.message);
  Rng pick;
  rng_seed(&pick, 7);
  BatchLoss fd = {&ref, tokens, targets, weights};
  double worst = 0;
  const char *worst_name = "";
  int checked = 0;
  for (int i = 0; i < model.num_tensors; i++) {
    const GemmaTensor *t = &model.tensors[i];
    const float *grad = gemma_tensor_grad(&model, t);
    if (t->frozen) {
      CHECK(grad[0] == 0.0f, "%s: %s is a buffer but got gradient %g", label, t->name, grad[0]);
      continue;
    }
    double max_ref, rel = fd_tensor_error(ref.p[i], grad, t->numel, &pick, batch_loss, &fd, &max_ref);
    if (rel > worst) worst = rel, worst_name = t->name;
    checked++;
    CHECK(max_ref > 1e-6, "%s: %s has a vanishing gradient (%g): the check would be empty", label, t->name, max_ref);
    CHECK(rel < 1e-4, "%s: %s gradient rel. error %.3g (max |fd| %.3g)", label, t->name, rel, max_ref);
  }
  printf("  gradients vs float64 central differences, %d tensors x 4 entries: worst rel. error %.3g (%s)\n", checked,
         worst, worst_name);

  GemmaModel again;
  CHECK(gemma_model_create(&again, cfg, &err) == 0 && gemma_model_alloc_grads(&again, &err) == 0, "%s", err.message);
  init_test_params(&again, 1234);
  again.recompute = 1;
  float logprobs2[BATCH * SEQ];
  CHECK(gemma_forward(&again, tokens, targets, BATCH, SEQ, logprobs2, &err) == 0, "%s", err.message);
  CHECK(gemma_backward(&again, weights, &err) == 0, "%s", err.message);
  CHECK(memcmp(logprobs, logprobs2, sizeof logprobs) == 0, "%s: recompute changed the log-probs", label);
  CHECK(same_grads(&model, &again), "%s: recompute changed the gradients", label);
  printf("  recompute: bitwise equal\n");

  // The fused forward + backward (SFT's path) gives the same results.
  GemmaModel fused;
  CHECK(gemma_model_create(&fused, cfg, &err) == 0 && gemma_model_alloc_grads(&fused, &err) == 0, "%s", err.message);
  init_test_params(&fused, 1234);
  float logprobs3[BATCH * SEQ];
  CHECK(gemma_forward_backward(&fused, tokens, targets, BATCH, SEQ, weights, logprobs3, &err) == 0, "%s", err.message);
  CHECK(memcmp(logprobs, logprobs3, sizeof logprobs) == 0, "%s: the fused forward+backward changed the log-probs", label);
  CHECK(same_grads(&model, &fused), "%s: the fused forward+backward changed the gradients", label);
  printf("  fused forward+backward: bitwise equal\n");
  gemma_model_free(&fused);

  // Prefill 5 tokens of sequence 1, then decode the rest one at a time; the
  // next-token log-probs must match the forward's.
  GemmaKVCache cache;
  CHECK(gemma_kv_cache_create_rows(&cache, cfg, 2, SEQ, 4, &err) == 0, "%s", err.message);
  size_t own = 0;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape s;
    gemma_layer_shape(cfg, l, &s);
    if (s.kv_source == l) own += (size_t)2 * SEQ * s.kv_heads * s.head_dim;
    else CHECK(cache.kv_offset[l] == cache.kv_offset[s.kv_source], "layer %d does not read layer %d's cache", l, s.kv_source);
  }
  float *logits = malloc(sizeof(float) * 2 * cfg->vocab_size);
  const int *seq = tokens + SEQ;
  double max_dec = 0;
  int prefill = 5, V = cfg->vocab_size;
  CHECK(gemma_prefill(&model, &cache, 1, seq, prefill, logits + V, &err) == 0, "prefill: %s", err.message);
  for (int t = prefill - 1; t < SEQ - 1; t++) {
    if (t >= prefill) {
      int step[2] = {0, seq[t]}, active[2] = {0, 1};
      CHECK(gemma_decode_step(&model, &cache, step, active, logits, &err) == 0, "decode: %s", err.message);
    }
    const float *row = logits + V;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, row[v]);
    for (int v = 0; v < V; v++) sum += exp(row[v] - mx);
    double lp = row[seq[t + 1]] - mx - log(sum);
    max_dec = fmax(max_dec, fabs(lp - logprobs[SEQ + t]));
  }
  printf("  prefill 5 + decode %d: max |logprob diff| vs forward = %.3g\n", SEQ - prefill - 1, max_dec);
  CHECK(max_dec < 1e-4, "%s: decode differs from the forward by %g", label, max_dec);
  // A copied sequence (the rollouts' shared prompt) decodes bitwise alike.
  CHECK(gemma_kv_cache_copy_sequence(&cache, cfg, 0, 1, &err) == 0, "copy: %s", err.message);
  cache.row_invariant = 1;  // each row its own GEMMs: bits independent of the other row
  int last[2] = {seq[SEQ - 1], seq[SEQ - 1]};
  CHECK(gemma_decode_step(&model, &cache, last, NULL, logits, &err) == 0, "decode: %s", err.message);
  CHECK(memcmp(logits, logits + V, sizeof(float) * V) == 0, "%s: a copied sequence decodes differently", label);
  free(logits);
  gemma_kv_cache_free(&cache);

  // Greedy generation: the first token is the argmax after the prompt.
  int prompt_len = 6, out[4], out_len = 0;
  const int *prompts[1] = {tokens};
  GenerateOptions opt = {.max_new = 4, .sampler = {0.0f, 1.0f}, .seed = 1};
  CHECK(gemma_generate(&model, prompts, &prompt_len, 1, &opt, out, &out_len, &err) == 0, "generate: %s", err.message);
  GemmaKVCache one;
  float *row = malloc(sizeof(float) * V);
  CHECK(gemma_kv_cache_create(&one, cfg, 1, SEQ, &err) == 0 && gemma_prefill(&model, &one, 0, tokens, prompt_len, row, &err) == 0,
        "%s", err.message);
  int best = 0;
  for (int v = 1; v < V; v++) best = row[v] > row[best] ? v : best;
  CHECK(out_len == 4 && out[0] == best, "%s: greedy generation gave %d tokens, first %d, argmax %d", label, out_len, out[0],
        best);
  free(row);
  gemma_kv_cache_free(&one);

  for (int i = 0; i < model.num_tensors; i++) free(ref.p[i]);
  free(ref.p);
  gemma_model_free(&again);
  gemma_model_free(&model);
}

// ---------------------------------------------------------------------------
// config.json

// The text part of google/gemma-4-E2B-it's config.json (as public parsers
// quote it) inside the multimodal wrapper.
static const char *E2B_WRAPPER =
    "{\"model_type\": \"gemma4\", \"architectures\": [\"Gemma4ForConditionalGeneration\"],"
    " \"tie_word_embeddings\": true, \"image_token_id\": 258880, \"audio_token_id\": 258881,"
    " \"eos_token_id\": [1, 106], \"vision_config\": {}, \"audio_config\": {},"
    " \"text_config\": {\"model_type\": \"gemma4_text\", \"hidden_size\": 1536, \"num_hidden_layers\": 35,"
    " \"num_attention_heads\": 8, \"num_key_value_heads\": 1, \"head_dim\": 256, \"global_head_dim\": 512,"
    " \"num_global_key_value_heads\": null, \"attention_k_eq_v\": false, \"sliding_window\": 512,"
    " \"vocab_size\": 262144, \"vocab_size_per_layer_input\": 262144, \"hidden_size_per_layer_input\": 256,"
    " \"num_kv_shared_layers\": 20, \"use_double_wide_mlp\": true, \"intermediate_size\": 6144,"
    " \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-6, \"hidden_activation\": \"gelu_pytorch_tanh\","
    " \"final_logit_softcapping\": 30.0, \"enable_moe_block\": false,"
    " \"rope_parameters\": {\"full_attention\": {\"partial_rotary_factor\": 0.25, \"rope_theta\": 1000000.0,"
    " \"rope_type\": \"proportional\"}, \"sliding_attention\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}}}";

static void check_configs(void) {
  FimiError err = {0};
  GemmaConfig cfg, preset;
  CHECK(gemma_config_parse_json(&cfg, E2B_WRAPPER, strlen(E2B_WRAPPER), "e2b", &err) == 0, "E2B: %s", err.message);
  CHECK(gemma_config_preset(&preset, "gemma4-e2b", &err) == 0, "%s", err.message);
  CHECK(cfg.family == GEMMA_FAMILY_GEMMA4 && cfg.num_extra_eos == 1 && cfg.extra_eos_token_ids[0] == 106,
        "E2B wrapper: family %d, eos list", cfg.family);
  // default layer_types (5:1) differ from E2B's 4:1, which the preset has
  int full = 0;
  for (int l = 0; l < preset.num_hidden_layers; l++) full += !preset.layer_is_sliding[l];
  CHECK(full == 7 && !preset.layer_is_sliding[4] && preset.layer_is_sliding[5], "gemma4-e2b: %d full layers", full);
  GemmaLayerShape s;
  gemma_layer_shape(&preset, 34, &s);
  CHECK(s.kv_source == 14 && s.intermediate == 12288 && !s.has_kv && s.head_dim == 512 && s.rope_pairs == 64,
        "gemma4-e2b layer 34: source %d, I %d, hd %d, pairs %d", s.kv_source, s.intermediate, s.head_dim, s.rope_pairs);
  gemma_layer_shape(&preset, 33, &s);
  CHECK(s.kv_source == 13, "gemma4-e2b layer 33 reads layer %d", s.kv_source);
  int64_t e2b = gemma_config_param_count(&preset);
  GemmaConfig e4b;
  CHECK(gemma_config_preset(&e4b, "gemma4-e4b", &err) == 0, "%s", err.message);
  int64_t e4b_count = gemma_config_param_count(&e4b);
  printf("gemma4-e2b: %.3f B parameters (text), gemma4-e4b: %.3f B\n", e2b / 1e9, e4b_count / 1e9);
  CHECK(e2b > 4.0e9 && e2b < 5.5e9 && e4b_count > 6.5e9 && e4b_count < 8.5e9, "parameter counts %lld %lld",
        (long long)e2b, (long long)e4b_count);

  // per_layer_config as transformers writes it, and what fimi writes back.
  const char *plc =
      "{\"model_type\": \"gemma4_text\", \"vocab_size\": 128, \"hidden_size\": 48, \"intermediate_size\": 64,"
      " \"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16,"
      " \"attention_k_eq_v\": true, \"vocab_size_per_layer_input\": 128, \"hidden_size_per_layer_input\": 8,"
      " \"layer_types\": [\"full_attention\", \"sliding_attention\", \"sliding_attention\"],"
      " \"per_layer_config\": {\"0\": {\"head_dim\": 32, \"num_key_value_heads\": 1},"
      " \"2\": {\"head_dim\": 32, \"num_key_value_heads\": 1}}}";
  CHECK(gemma_config_parse_json(&cfg, plc, strlen(plc), "plc", &err) == 0, "per_layer_config: %s", err.message);
  CHECK(cfg.global_head_dim == 32 && cfg.num_global_key_value_heads == 1 && !cfg.layer_is_sliding[2],
        "per_layer_config: hd %d nkv %d; the last layer forced to full", cfg.global_head_dim,
        cfg.num_global_key_value_heads);
  char *json = gemma_config_to_json(&cfg, &err);
  GemmaConfig back;
  CHECK(json && gemma_config_parse_json(&back, json, strlen(json), "written", &err) == 0, "round trip: %s", err.message);
  CHECK(json && memcmp(&back, &cfg, sizeof cfg) == 0, "config.json round trip changed the config");
  free(json);

  const char *moe = "{\"model_type\": \"gemma4_text\", \"enable_moe_block\": true, \"num_experts\": 128}";
  CHECK(gemma_config_parse_json(&cfg, moe, strlen(moe), "moe.json", &err) != 0 && strstr(err.message, "enable_moe_block") &&
            strstr(err.message, "mixture-of-experts"),
        "MoE config not refused clearly: %s", err.message);
  const char *bad_plc = "{\"model_type\": \"gemma4_text\", \"num_hidden_layers\": 2, \"layer_types\": "
                        "[\"sliding_attention\", \"full_attention\"], \"per_layer_config\": {\"0\": {\"head_dim\": 8}}}";
  CHECK(gemma_config_parse_json(&cfg, bad_plc, strlen(bad_plc), "plc.json", &err) != 0 && strstr(err.message, "per_layer_config"),
        "override of a sliding layer not refused: %s", err.message);
  const char *all_shared = "{\"model_type\": \"gemma4_text\", \"num_hidden_layers\": 2, \"num_kv_shared_layers\": 2}";
  CHECK(gemma_config_parse_json(&cfg, all_shared, strlen(all_shared), "s.json", &err) != 0 &&
            strstr(err.message, "num_kv_shared_layers"),
        "all layers kv-shared not refused: %s", err.message);
}

int main(void) {
  check_configs();
  FimiError err = {0};
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, "tiny-g4", &err) != 0) {
    CHECK(0, "tiny-g4: %s", err.message);
    TEST_MAIN_END();
  }
  cfg.final_logit_softcapping = 2.0;  // a cap that bites on O(1) logits
  check_model("tiny-g4", &cfg);
  // No per-layer embeddings, no sharing, a full rope on full layers.
  cfg.hidden_size_per_layer_input = 0;
  cfg.num_kv_shared_layers = 0;
  cfg.attention_k_eq_v = 0;
  cfg.partial_rotary_factor = 1.0;
  check_model("tiny-g4 without per-layer inputs or sharing", &cfg);
  TEST_MAIN_END();
}
