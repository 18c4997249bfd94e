// tests/test_model_grad.c: checks the Gemma forward and backward (model/gemma.c)
// against an independent float64 reference written here from the Hugging Face
// definition (Gemma3ForCausalLM / Gemma2ForCausalLM), on the "tiny" and
// "tiny-gemma2" presets:
// - forward log-probs equal the float64 reference's;
// - every parameter tensor of every layer (plus embedding and final norm):
//   analytic gradients of loss = sum_t w_t * logprob_t equal central finite
//   differences of the float64 reference loss;
// - recompute = 1 gives bitwise the same log-probs and gradients;
// - a second backward accumulates (doubles the gradients).
// Finite differences run on the float64 reference, so they are accurate to
// ~1e-9 and the tolerance only has to absorb the fp32 model's rounding.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/gemma.h"
#include "finite_difference.h"
#include "test_util.h"

#define BATCH 2
#define SEQ 12

// ---------------------------------------------------------------------------
// float64 reference. Parameters are float64 copies indexed like the tensor
// table, looked up by HF name, so the reference also checks the table.

typedef struct RefModel {
  const GemmaModel *model;
  double **p;  // (num_tensors) float64 copy of each tensor
} RefModel;

static const double *ref_tensor(const RefModel *r, int layer, const char *name) {
  char full[GEMMA_NAME_MAX];
  if (layer >= 0)
    snprintf(full, sizeof full, "model.layers.%d.%s", layer, name);
  else
    snprintf(full, sizeof full, "%s", name);
  const GemmaTensor *t = gemma_find_tensor(r->model, full);
  if (!t) {
    fprintf(stderr, "reference: no tensor %s\n", full);
    exit(2);
  }
  return r->p[t - r->model->tensors];
}

// out (rows, n) = x * rsqrt(mean(x^2) + eps) * (1 + w)
static void ref_rmsnorm(double *out, const double *x, const double *w, int rows, int n, double eps) {
  for (int r = 0; r < rows; r++) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[r * n + i] * x[r * n + i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) out[r * n + i] = x[r * n + i] * s * (1.0 + w[i]);
  }
}

// out (rows, oc) = x (rows, ic) @ w^T, w (oc, ic)
static void ref_matmul(double *out, const double *x, const double *w, int rows, int ic, int oc) {
  for (int r = 0; r < rows; r++)
    for (int o = 0; o < oc; o++) {
      double s = 0;
      for (int i = 0; i < ic; i++) s += x[r * ic + i] * w[o * ic + i];
      out[r * oc + o] = s;
    }
}

// rotate_half RoPE on x (rows, heads, hd) at position pos of each row.
static void ref_rope(double *x, int B, int T, int heads, int hd, double theta, double pscale) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int h = 0; h < heads; h++) {
        double *v = x + ((size_t)(b * T + t) * heads + h) * hd;
        for (int i = 0; i < hd / 2; i++) {
          double ang = (t / pscale) * pow(theta, -2.0 * i / hd);
          double a = v[i], c = v[i + hd / 2];
          v[i] = a * cos(ang) - c * sin(ang);
          v[i + hd / 2] = c * cos(ang) + a * sin(ang);
        }
      }
}

static double gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

// Weighted sum of log-probs; logprobs (B*T) out if non-NULL.
static double ref_loss(const RefModel *r, const int *tokens, const int *targets, const float *weights, int B, int T,
                       double *logprobs) {
  const GemmaConfig *cfg = &r->model->config;
  int N = B * T, C = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size, hd = cfg->head_dim;
  int nh = cfg->num_attention_heads, nkv = cfg->num_key_value_heads, qd = nh * hd, kvd = nkv * hd;
  double eps = (float)cfg->rms_norm_eps;
  int g3 = cfg->family == GEMMA_FAMILY_GEMMA3;
  double *h = calloc((size_t)N * C, 8), *x = calloc((size_t)N * C, 8), *y = calloc((size_t)N * C, 8);
  double *q = calloc((size_t)N * qd, 8), *k = calloc((size_t)N * kvd, 8), *v = calloc((size_t)N * kvd, 8);
  double *att = calloc((size_t)N * qd, 8), *g = calloc((size_t)N * I, 8), *u = calloc((size_t)N * I, 8);
  double *sc = calloc((size_t)T, 8);
  const double *wte = ref_tensor(r, -1, "model.embed_tokens.weight");
  double scale = gemma_embed_scale(cfg);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) h[n * C + c] = wte[(size_t)tokens[n] * C + c] * scale;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    int sliding = cfg->layer_is_sliding[l];
    int window = sliding ? cfg->sliding_window : 0;
    double theta = g3 && sliding ? cfg->rope_local_base_freq : cfg->rope_theta;
    double pscale = g3 && !sliding ? cfg->rope_scaling_factor : 1.0;
    double softcap = g3 ? 0.0 : cfg->attn_logit_softcapping;
    double qscale = (float)pow(cfg->query_pre_attn_scalar, -0.5);
    ref_rmsnorm(x, h, ref_tensor(r, l, "input_layernorm.weight"), N, C, eps);
    ref_matmul(q, x, ref_tensor(r, l, "self_attn.q_proj.weight"), N, C, qd);
    ref_matmul(k, x, ref_tensor(r, l, "self_attn.k_proj.weight"), N, C, kvd);
    ref_matmul(v, x, ref_tensor(r, l, "self_attn.v_proj.weight"), N, C, kvd);
    if (g3) {
      ref_rmsnorm(q, q, ref_tensor(r, l, "self_attn.q_norm.weight"), N * nh, hd, eps);
      ref_rmsnorm(k, k, ref_tensor(r, l, "self_attn.k_norm.weight"), N * nkv, hd, eps);
    }
    ref_rope(q, B, T, nh, hd, theta, pscale);
    ref_rope(k, B, T, nkv, hd, theta, pscale);
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
            s *= qscale;
            if (softcap > 0) s = softcap * tanh(s / softcap);
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
    ref_matmul(x, att, ref_tensor(r, l, "self_attn.o_proj.weight"), N, qd, C);
    ref_rmsnorm(y, x, ref_tensor(r, l, "post_attention_layernorm.weight"), N, C, eps);
    for (size_t i = 0; i < (size_t)N * C; i++) h[i] += y[i];
    ref_rmsnorm(x, h, ref_tensor(r, l, "pre_feedforward_layernorm.weight"), N, C, eps);
    ref_matmul(g, x, ref_tensor(r, l, "mlp.gate_proj.weight"), N, C, I);
    ref_matmul(u, x, ref_tensor(r, l, "mlp.up_proj.weight"), N, C, I);
    for (size_t i = 0; i < (size_t)N * I; i++) g[i] = gelu_tanh(g[i]) * u[i];
    ref_matmul(x, g, ref_tensor(r, l, "mlp.down_proj.weight"), N, I, C);
    ref_rmsnorm(y, x, ref_tensor(r, l, "post_feedforward_layernorm.weight"), N, C, eps);
    for (size_t i = 0; i < (size_t)N * C; i++) h[i] += y[i];
  }
  ref_rmsnorm(x, h, ref_tensor(r, -1, "model.norm.weight"), N, C, eps);
  double loss = 0, cap = cfg->final_logit_softcapping;
  for (int n = 0; n < N; n++) {
    double lp = 0;
    if (targets[n] >= 0) {
      double mx = -INFINITY, sum = 0, tgt = 0;
      double *logits = malloc((size_t)V * 8);
      for (int vv = 0; vv < V; vv++) {
        double s = 0;
        for (int c = 0; c < C; c++) s += x[n * C + c] * wte[(size_t)vv * C + c];
        if (cap > 0) s = cap * tanh(s / cap);
        logits[vv] = s;
        if (s > mx) mx = s;
      }
      for (int vv = 0; vv < V; vv++) sum += exp(logits[vv] - mx);
      tgt = logits[targets[n]];
      lp = tgt - mx - log(sum);
      free(logits);
    }
    if (logprobs) logprobs[n] = lp;
    loss += weights[n] * lp;
  }
  free(h), free(x), free(y), free(q), free(k), free(v), free(att), free(g), free(u), free(sc);
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
// N(0, 1/fan_in), embedding N(0, 1/C) (logits ~ N(0, 1) through the tied
// head), norm weights N(0, 0.1^2) so their gradients are non-trivial.
static void init_test_params(GemmaModel *m, uint64_t seed) {
  Rng rng;
  rng_seed(&rng, seed);
  for (int i = 0; i < m->num_tensors; i++) {
    const GemmaTensor *t = &m->tensors[i];
    float std = t->is_norm ? 0.1f : 1.0f / sqrtf((float)t->shape[1]);
    rng_fill_normal(&rng, gemma_tensor_data(m, t), (long)t->numel, 0.0f, std);
  }
}

static void make_batch(const GemmaConfig *cfg, int *tokens, int *targets, float *weights, uint64_t seed) {
  Rng rng;
  rng_seed(&rng, seed);
  int N = BATCH * SEQ;
  for (int n = 0; n < N; n++) tokens[n] = (int)(rng_next_u64(&rng) % (uint64_t)cfg->vocab_size);
  for (int b = 0; b < BATCH; b++)
    for (int t = 0; t < SEQ; t++) {
      int n = b * SEQ + t;
      targets[n] = t + 1 < SEQ ? tokens[n + 1] : (int)(rng_next_u64(&rng) % (uint64_t)cfg->vocab_size);
    }
  targets[SEQ - 1] = -1;  // an unscored row (padding / prompt)
  targets[3] = -1;
  for (int n = 0; n < N; n++) weights[n] = 2.0f * rng_uniform(&rng) - 1.0f;
}

static int compare_grads_bitwise(GemmaModel *a, GemmaModel *b) {
  if (memcmp(a->globals_grad, b->globals_grad, a->globals_numel * sizeof(float)) != 0) return 0;
  for (int l = 0; l < a->config.num_hidden_layers; l++)
    if (memcmp(a->layers_grad[l], b->layers_grad[l], a->layer_numel * sizeof(float)) != 0) return 0;
  return 1;
}

// variant 1: strong softcaps (gemma2: attention 1.0, final 1.5) so tanh is
// far from linear on O(1) scores; variant 2: a linear rope scaling factor 8 on
// global layers, query_pre_attn_scalar != head_dim and a final softcap (gemma3).
static void check_preset(const char *preset, int variant) {
  FimiError err = {0};
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, preset, &err) != 0) {
    CHECK(0, "preset %s: %s", preset, err.message);
    return;
  }
  if (variant == 1) {
    cfg.attn_logit_softcapping = 1.0;
    cfg.final_logit_softcapping = 1.5;
  } else if (variant == 2) {
    cfg.rope_scaling_factor = 8.0;
    cfg.query_pre_attn_scalar = 1.5 * cfg.head_dim;
    cfg.final_logit_softcapping = 2.0;
  }
  printf("preset %s%s: V=%d C=%d I=%d L=%d nh=%d nkv=%d hd=%d W=%d softcaps %g/%g, B=%d T=%d\n", preset,
         variant == 1 ? " (strong softcaps)" : variant == 2 ? " (rope scaling 8, qpas 1.5 hd, final softcap)" : "",
         cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads,
         cfg.num_key_value_heads, cfg.head_dim, cfg.sliding_window, cfg.attn_logit_softcapping,
         cfg.final_logit_softcapping, BATCH, SEQ);
  int sliding = 0;
  for (int l = 0; l < cfg.num_hidden_layers; l++) sliding += cfg.layer_is_sliding[l];
  CHECK(sliding > 0 && sliding < cfg.num_hidden_layers, "%s: wants both sliding and global layers (%d of %d sliding)",
        preset, sliding, cfg.num_hidden_layers);
  CHECK(cfg.sliding_window > 0 && cfg.sliding_window < SEQ, "%s: T=%d should exceed the sliding window %d", preset, SEQ,
        cfg.sliding_window);
  GemmaModel model;
  if (gemma_model_create(&model, &cfg, &err) != 0 || gemma_model_alloc_grads(&model, &err) != 0) {
    CHECK(0, "%s: %s", preset, err.message);
    return;
  }
  init_test_params(&model, 1234);
  int N = BATCH * SEQ, tokens[BATCH * SEQ], targets[BATCH * SEQ];
  float weights[BATCH * SEQ], logprobs[BATCH * SEQ];
  make_batch(&cfg, tokens, targets, weights, 99);

  // Forward against the float64 reference.
  CHECK(gemma_forward(&model, tokens, targets, BATCH, SEQ, logprobs, &err) == 0, "forward: %s", err.message);
  RefModel ref = {&model, calloc((size_t)model.num_tensors, sizeof(double *))};
  for (int i = 0; i < model.num_tensors; i++) {
    const GemmaTensor *t = &model.tensors[i];
    ref.p[i] = malloc(t->numel * sizeof(double));
    const float *src = gemma_tensor_data(&model, t);
    for (size_t j = 0; j < t->numel; j++) ref.p[i][j] = src[j];
  }
  double ref_lp[BATCH * SEQ], max_lp_diff = 0;
  ref_loss(&ref, tokens, targets, weights, BATCH, SEQ, ref_lp);
  for (int n = 0; n < N; n++) max_lp_diff = fmax(max_lp_diff, fabs(logprobs[n] - ref_lp[n]));
  printf("  forward vs float64 reference: max |logprob diff| = %.3g (logprobs ~ %.2f)\n", max_lp_diff, ref_lp[0]);
  CHECK(max_lp_diff < 2e-5, "%s: forward differs from the float64 reference by %g", preset, max_lp_diff);

  // Backward, then central differences on the reference for every tensor.
  gemma_model_zero_grads(&model);
  CHECK(gemma_backward(&model, weights, &err) == 0, "backward: %s", err.message);
  Rng pick;
  rng_seed(&pick, 7);
  BatchLoss fd = {&ref, tokens, targets, weights};
  double worst = 0;
  const char *worst_name = "";
  for (int i = 0; i < model.num_tensors; i++) {
    const GemmaTensor *t = &model.tensors[i];
    const float *grad = gemma_tensor_grad(&model, t);
    double max_ref, rel = fd_tensor_error(ref.p[i], grad, t->numel, &pick, batch_loss, &fd, &max_ref);
    if (rel > worst) worst = rel, worst_name = t->name;
    CHECK(max_ref > 1e-6, "%s: %s has a vanishing gradient (%g): the check would be empty", preset, t->name, max_ref);
    CHECK(rel < 1e-4, "%s: %s gradient rel. error %.3g (max |fd| %.3g)", preset, t->name, rel, max_ref);
  }
  printf("  gradients vs float64 central differences, %d tensors x 4 entries: worst rel. error %.3g (%s)\n",
         model.num_tensors, worst, worst_name);

  // recompute = 1: bitwise the same results.
  GemmaModel again;
  CHECK(gemma_model_create(&again, &cfg, &err) == 0 && gemma_model_alloc_grads(&again, &err) == 0, "%s", err.message);
  init_test_params(&again, 1234);
  again.recompute = 1;
  float logprobs2[BATCH * SEQ];
  CHECK(gemma_forward(&again, tokens, targets, BATCH, SEQ, logprobs2, &err) == 0, "%s", err.message);
  CHECK(gemma_backward(&again, weights, &err) == 0, "%s", err.message);
  CHECK(memcmp(logprobs, logprobs2, sizeof logprobs) == 0, "%s: recompute changed the log-probs", preset);
  CHECK(compare_grads_bitwise(&model, &again), "%s: recompute changed the gradients", preset);
  size_t full = gemma_activation_floats(&cfg, N, 0, 1), lean = gemma_activation_floats(&cfg, N, 1, 1);
  printf("  recompute: bitwise equal; activation floats %zu -> %zu\n", full, lean);
  CHECK(lean < full, "recompute should use less activation memory");

  // A second backward accumulates.
  float sample = model.globals_grad[(size_t)tokens[0] * cfg.hidden_size];
  CHECK(gemma_backward(&model, weights, &err) == 0, "%s", err.message);
  CHECK_CLOSE(model.globals_grad[(size_t)tokens[0] * cfg.hidden_size], 2.0 * sample, 1e-5, "accumulated grad");

  for (int i = 0; i < model.num_tensors; i++) free(ref.p[i]);
  free(ref.p);
  gemma_model_free(&again);
  gemma_model_free(&model);
}

static void check_errors(void) {
  FimiError err = {0};
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, "tiny", &err) != 0) return;
  GemmaModel model;
  if (gemma_model_create(&model, &cfg, &err) != 0) return;
  gemma_model_init_random(&model, 5);
  int tokens[4] = {1, 2, 3, cfg.vocab_size}, targets[4] = {2, 3, 4, -1};
  float lp[4];
  CHECK(gemma_forward(&model, tokens, targets, 1, 4, lp, &err) != 0 && strstr(err.message, "vocabulary"),
        "an out-of-range token must fail: %s", err.message);
  tokens[3] = 4;
  float dl[4] = {1, 1, 1, 1};
  CHECK(gemma_forward(&model, tokens, targets, 1, 4, lp, &err) == 0, "%s", err.message);
  CHECK(gemma_backward(&model, dl, &err) != 0, "backward without gradients must fail");
  // Init: norms zero, matrices ~N(0, 0.02).
  const GemmaTensor *qn = gemma_find_tensor(&model, "model.layers.0.self_attn.q_norm.weight");
  const GemmaTensor *up = gemma_find_tensor(&model, "model.layers.0.mlp.up_proj.weight");
  CHECK(qn && up, "tensor table names");
  if (qn && up) {
    double ss = 0;
    const float *w = gemma_tensor_data(&model, up);
    for (size_t i = 0; i < up->numel; i++) ss += (double)w[i] * w[i];
    CHECK(gemma_tensor_data(&model, qn)[0] == 0.0f, "norm weights start at 0");
    CHECK_CLOSE(sqrt(ss / up->numel), 0.02, 0.05, "init std");
  }
  CHECK(gemma_model_param_count(&model) == gemma_config_param_count(&cfg), "param count %lld vs config %lld",
        (long long)gemma_model_param_count(&model), (long long)gemma_config_param_count(&cfg));
  CHECK(strcmp(model.tensors[0].name, "model.embed_tokens.weight") == 0 &&
            strcmp(model.tensors[1].name, "model.norm.weight") == 0 &&
            strcmp(model.tensors[2].name, "model.layers.0.input_layernorm.weight") == 0,
        "tensor table order");
  gemma_model_free(&model);
}

int main(void) {
  check_preset("tiny", 0);
  check_preset("tiny", 2);
  check_preset("tiny-gemma2", 0);
  check_preset("tiny-gemma2", 1);
  check_errors();
  TEST_MAIN_END();
}
