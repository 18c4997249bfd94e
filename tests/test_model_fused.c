// tests/test_model_fused.c: gemma_forward_backward (the LM head's forward and
// backward fused per block of rows) against gemma_forward then gemma_backward
// on two models built from one seed: same log-probs and parameter gradients,
// for presets tiny and tiny-gemma2 (final softcap), recompute 0 and 1, with
// unscored (-1) targets. Also: two fused steps give the same bits, the fused
// step leaves a forward that gemma_backward can differentiate, and it fails
// cleanly without gradients or with a bad token.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/gemma.h"
#include "test_util.h"

#define B 3
#define T 20

// The two paths run the same ops on the same inputs with the LM head's blocks
// and sgemm calls identical, so they agree bitwise on one build (printed).
// The tolerance is the API's promise, fp32 rounding: a backend that orders
// sums differently moves log-probs and gradients by ~1e-7 relative to their
// largest entry; a dropped or doubled contribution is >= 1e-3.
#define TOL 1e-5

// max |a - b| / max |b| over n floats
static double rel_error(const float *a, const float *b, size_t n) {
  double max_diff = 0, max_ref = 1e-30;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (d > max_diff || d != d) max_diff = d != d ? INFINITY : d;
    if (fabs(b[i]) > max_ref) max_ref = fabs(b[i]);
  }
  return max_diff / max_ref;
}

// Worst relative error over the gradient buffers (each against its own max).
static double grads_rel_error(const GemmaModel *a, const GemmaModel *b) {
  double worst = rel_error(a->globals_grad, b->globals_grad, a->globals_numel);
  for (int l = 0; l < a->config.num_hidden_layers; l++)
    worst = fmax(worst, rel_error(a->layers_grad[l], b->layers_grad[l], a->layer_numel));
  return worst;
}

static int grads_equal(const GemmaModel *a, const GemmaModel *b) {
  if (memcmp(a->globals_grad, b->globals_grad, a->globals_numel * sizeof(float)) != 0) return 0;
  for (int l = 0; l < a->config.num_hidden_layers; l++)
    if (memcmp(a->layers_grad[l], b->layers_grad[l], a->layer_numel * sizeof(float)) != 0) return 0;
  return 1;
}

// All gradients in one flat copy: globals, then layer by layer.
static float *grads_snapshot(const GemmaModel *m) {
  size_t g = m->globals_numel, l = m->layer_numel;
  float *snap = malloc((g + (size_t)m->config.num_hidden_layers * l) * sizeof(float));
  memcpy(snap, m->globals_grad, g * sizeof(float));
  for (int i = 0; i < m->config.num_hidden_layers; i++) memcpy(snap + g + i * l, m->layers_grad[i], l * sizeof(float));
  return snap;
}

static int grads_equal_snapshot(const GemmaModel *m, const float *snap) {
  size_t g = m->globals_numel, l = m->layer_numel;
  if (memcmp(snap, m->globals_grad, g * sizeof(float)) != 0) return 0;
  for (int i = 0; i < m->config.num_hidden_layers; i++)
    if (memcmp(snap + g + i * l, m->layers_grad[i], l * sizeof(float)) != 0) return 0;
  return 1;
}

static int make_model(GemmaModel *m, const char *preset, int recompute) {
  FimiError err = {0};
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, preset, &err) != 0 || gemma_model_create(m, &cfg, &err) != 0 ||
      gemma_model_alloc_grads(m, &err) != 0) {
    CHECK(0, "%s: %s", preset, err.message);
    return -1;
  }
  m->recompute = recompute;
  gemma_model_init_random(m, 77);
  return 0;
}

static int separate_step(GemmaModel *m, const int *tokens, const int *targets, const float *dl, float *lp) {
  FimiError err = {0};
  gemma_model_zero_grads(m);
  int rc = gemma_forward(m, tokens, targets, B, T, lp, &err) || gemma_backward(m, dl, &err);
  CHECK(rc == 0, "forward + backward: %s", err.message);
  return rc;
}

static int fused_step(GemmaModel *m, const int *tokens, const int *targets, const float *dl, float *lp) {
  FimiError err = {0};
  gemma_model_zero_grads(m);
  int rc = gemma_forward_backward(m, tokens, targets, B, T, dl, lp, &err);
  CHECK(rc == 0, "forward_backward: %s", err.message);
  return rc;
}

static void check_preset(const char *preset, int recompute) {
  GemmaModel sep, fused;
  if (make_model(&sep, preset, recompute) != 0) return;
  if (make_model(&fused, preset, recompute) != 0) {
    gemma_model_free(&sep);
    return;
  }
  int V = sep.config.vocab_size;
  int tokens[B * T], targets[B * T];
  float dl[B * T], lp_sep[B * T], lp_fused[B * T], lp_again[B * T];
  Rng rng;
  rng_seed(&rng, 5);
  for (int i = 0; i < B * T; i++) {
    tokens[i] = (int)(rng_next_u64(&rng) % (uint64_t)V);
    // the last position of each row and a few others are not scored
    targets[i] = i % T == T - 1 || i % 7 == 3 ? -1 : (int)(rng_next_u64(&rng) % (uint64_t)V);
    dl[i] = targets[i] < 0 ? 0.0f : rng_uniform(&rng) - 0.5f;
  }
  if (separate_step(&sep, tokens, targets, dl, lp_sep) || fused_step(&fused, tokens, targets, dl, lp_fused)) goto done;
  int bitwise = memcmp(lp_sep, lp_fused, sizeof lp_sep) == 0 && grads_equal(&sep, &fused);
  double lp_err = rel_error(lp_fused, lp_sep, B * T), grad_err = grads_rel_error(&fused, &sep);
  printf("%s (recompute %d): fused vs forward+backward: logprobs %.2e, gradients %.2e (tol %.0e)%s\n", preset,
         recompute, lp_err, grad_err, TOL, bitwise ? ", bitwise equal" : "");
  CHECK(lp_err <= TOL, "%s: fused logprobs differ by %g", preset, lp_err);
  CHECK(grad_err <= TOL, "%s: fused gradients differ by %g", preset, grad_err);

  // deterministic: a second fused step on the same model gives the same bits
  float *first = grads_snapshot(&fused);
  if (fused_step(&fused, tokens, targets, dl, lp_again) == 0)
    CHECK(memcmp(lp_again, lp_fused, sizeof lp_fused) == 0 && grads_equal_snapshot(&fused, first),
          "%s: two fused steps differ", preset);
  free(first);
  // the fused step leaves a valid forward: gemma_backward on it gives the
  // separate path's gradients
  FimiError err = {0};
  gemma_model_zero_grads(&fused);
  CHECK(gemma_backward(&fused, dl, &err) == 0, "%s: backward after fused: %s", preset, err.message);
  CHECK(grads_rel_error(&fused, &sep) <= TOL, "%s: backward after a fused step differs", preset);
done:
  gemma_model_free(&sep);
  gemma_model_free(&fused);
}

// Errors come back as errors: no gradients, a token outside the vocabulary.
static void check_errors(void) {
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaModel m;
  if (gemma_config_preset(&cfg, "tiny", &err) != 0 || gemma_model_create(&m, &cfg, &err) != 0) {
    CHECK(0, "tiny: %s", err.message);
    return;
  }
  int tokens[T] = {0}, targets[T];
  float dl[T] = {0}, lp[T];
  for (int t = 0; t < T; t++) targets[t] = t;
  CHECK(gemma_forward_backward(&m, tokens, targets, 1, T, dl, lp, &err) != 0 && strstr(err.message, "gradients"),
        "fused step without gradients must fail (got '%s')", err.message);
  CHECK(gemma_model_alloc_grads(&m, &err) == 0, "alloc grads: %s", err.message);
  tokens[4] = cfg.vocab_size;
  CHECK(gemma_forward_backward(&m, tokens, targets, 1, T, dl, lp, &err) != 0 && strstr(err.message, "vocabulary"),
        "fused step with a bad token must fail (got '%s')", err.message);
  gemma_model_free(&m);
}

int main(void) {
  printf("tolerance %.0e relative to each buffer's largest entry (fp32 rounding; expected bitwise)\n", TOL);
  check_preset("tiny", 0);
  check_preset("tiny", 1);
  check_preset("tiny-gemma2", 0);
  check_preset("tiny-gemma2", 1);
  check_errors();
  TEST_MAIN_END();
}
