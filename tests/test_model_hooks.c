// tests/test_model_hooks.c: the model's per-layer hooks (GemmaLayerHooks,
// model/gemma.h). A model whose own layer buffers hold NaN, with hooks that
// hand it copies of the real parameters and separate gradient buffers, must
// give bitwise the same log-probs and gradients as the plain model:
// gemma_forward + gemma_backward and gemma_forward_backward, recompute 0 and
// 1, on the "tiny" (gemma3) and "tiny-gemma2" presets. Also checks the order
// of the hook calls and that a failing hook aborts the pass with its error.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/gemma.h"
#include "test_util.h"

#define BATCH 2
#define SEQ 10
#define MAX_EVENTS 64

typedef struct HookCtx {
  float *params[GEMMA_MAX_LAYERS];
  float *grads[GEMMA_MAX_LAYERS];
  char events[MAX_EVENTS][16];  // "F3", "f3", "B3", "b3": before/after forward/backward of layer 3
  int num_events;
  int fail_at;  // before_backward of this layer fails (-1: never)
} HookCtx;

static void record(HookCtx *h, char kind, int layer) {
  if (h->num_events < MAX_EVENTS) snprintf(h->events[h->num_events++], 16, "%c%d", kind, layer);
}

static int before_forward(void *ctx, int layer, const float **params, FimiError *err) {
  (void)err;
  HookCtx *h = ctx;
  record(h, 'F', layer);
  *params = h->params[layer];
  return 0;
}

static int after_forward(void *ctx, int layer, FimiError *err) {
  (void)err;
  record(ctx, 'f', layer);
  return 0;
}

static int before_backward(void *ctx, int layer, const float **params, float **grads, FimiError *err) {
  HookCtx *h = ctx;
  record(h, 'B', layer);
  if (layer == h->fail_at) return fimi_fail(err, "test hook refuses layer %d", layer);
  *params = h->params[layer];
  *grads = h->grads[layer];
  return 0;
}

static int after_backward(void *ctx, int layer, FimiError *err) {
  (void)err;
  record(ctx, 'b', layer);
  return 0;
}

static void make_batch(const GemmaConfig *cfg, int *tokens, int *targets, float *dlogprobs, uint64_t seed) {
  Rng rng;
  rng_seed(&rng, seed);
  for (int i = 0; i < BATCH * SEQ; i++) tokens[i] = (int)(rng_next_u64(&rng) % (uint64_t)cfg->vocab_size);
  for (int i = 0; i < BATCH * SEQ; i++) {
    int last = i % SEQ == SEQ - 1;
    targets[i] = last ? -1 : tokens[i + 1];
    dlogprobs[i] = last ? 0.0f : -(float)(1 + i % 3) / (BATCH * SEQ);
  }
}

// Expected event sequence: F0 f0 .. F(L-1) f(L-1) [B(L-1) b(L-1) .. B0 b0].
static void check_events(const HookCtx *h, int L, int with_backward, const char *what) {
  int n = 0, ok = 1;
  char want[16];
  for (int l = 0; l < L; l++) {
    snprintf(want, sizeof want, "F%d", l);
    ok &= n < h->num_events && strcmp(h->events[n++], want) == 0;
    snprintf(want, sizeof want, "f%d", l);
    ok &= n < h->num_events && strcmp(h->events[n++], want) == 0;
  }
  for (int l = L - 1; with_backward && l >= 0; l--) {
    snprintf(want, sizeof want, "B%d", l);
    ok &= n < h->num_events && strcmp(h->events[n++], want) == 0;
    snprintf(want, sizeof want, "b%d", l);
    ok &= n < h->num_events && strcmp(h->events[n++], want) == 0;
  }
  CHECK(ok && n == h->num_events, "%s: hook calls out of order (%d events, expected %d)", what, h->num_events, n);
}

static void run_preset(const char *preset) {
  FimiError err = {0};
  GemmaConfig cfg;
  CHECK(gemma_config_preset(&cfg, preset, &err) == 0, "preset %s: %s", preset, err.message);
  int L = cfg.num_hidden_layers;
  GemmaModel plain, hooked;
  CHECK(gemma_model_create(&plain, &cfg, &err) == 0 && gemma_model_create(&hooked, &cfg, &err) == 0, "create: %s",
        err.message);
  gemma_model_init_random(&plain, 7);
  gemma_model_init_random(&hooked, 7);
  CHECK(gemma_model_alloc_grads(&plain, &err) == 0 && gemma_model_alloc_grads(&hooked, &err) == 0, "grads: %s",
        err.message);
  HookCtx h;
  memset(&h, 0, sizeof h);
  h.fail_at = -1;
  size_t bytes = plain.layer_numel * sizeof(float);
  for (int l = 0; l < L; l++) {
    h.params[l] = malloc(bytes);
    h.grads[l] = malloc(bytes);
    memcpy(h.params[l], plain.layers[l], bytes);
    // The model's own buffers must not be read or written: poison them.
    for (size_t i = 0; i < plain.layer_numel; i++) hooked.layers[l][i] = NAN;
  }
  GemmaLayerHooks hooks = {&h, before_forward, after_forward, before_backward, after_backward};
  hooked.hooks = &hooks;

  int tokens[BATCH * SEQ], targets[BATCH * SEQ];
  float dlog[BATCH * SEQ], lp_plain[BATCH * SEQ], lp_hooked[BATCH * SEQ];
  make_batch(&cfg, tokens, targets, dlog, 11);
  for (int fused = 0; fused < 2; fused++) {
    for (int recompute = 0; recompute < 2; recompute++) {
      char what[96];
      snprintf(what, sizeof what, "%s fused=%d recompute=%d", preset, fused, recompute);
      plain.recompute = hooked.recompute = recompute;
      gemma_model_zero_grads(&plain);
      gemma_model_zero_grads(&hooked);
      for (int l = 0; l < L; l++) memset(h.grads[l], 0, bytes);
      h.num_events = 0;
      int rc_p, rc_h;
      if (fused) {
        rc_p = gemma_forward_backward(&plain, tokens, targets, BATCH, SEQ, dlog, lp_plain, &err);
        rc_h = gemma_forward_backward(&hooked, tokens, targets, BATCH, SEQ, dlog, lp_hooked, &err);
      } else {
        rc_p = gemma_forward(&plain, tokens, targets, BATCH, SEQ, lp_plain, &err) ||
               gemma_backward(&plain, dlog, &err);
        rc_h = gemma_forward(&hooked, tokens, targets, BATCH, SEQ, lp_hooked, &err) ||
               gemma_backward(&hooked, dlog, &err);
      }
      CHECK(rc_p == 0 && rc_h == 0, "%s: %s", what, err.message);
      check_events(&h, L, 1, what);
      CHECK(memcmp(lp_plain, lp_hooked, sizeof lp_plain) == 0, "%s: log-probs differ", what);
      double lp_sum = 0;
      for (int i = 0; i < BATCH * SEQ; i++) lp_sum += lp_plain[i];
      CHECK(lp_sum < 0 && isfinite(lp_sum), "%s: log-probs not negative/finite (%g)", what, lp_sum);
      CHECK(memcmp(plain.globals_grad, hooked.globals_grad, plain.globals_numel * sizeof(float)) == 0,
            "%s: globals gradient differs", what);
      for (int l = 0; l < L; l++) {
        CHECK(memcmp(plain.layers_grad[l], h.grads[l], bytes) == 0, "%s: layer %d gradient differs", what, l);
        int untouched = 1;  // the model's own gradient buffer got nothing
        for (size_t i = 0; i < plain.layer_numel; i++) untouched &= hooked.layers_grad[l][i] == 0.0f;
        CHECK(untouched, "%s: layer %d: the model's own gradient buffer was written", what, l);
        double gsum = 0;
        for (size_t i = 0; i < plain.layer_numel; i++) gsum += fabs(plain.layers_grad[l][i]);
        CHECK(gsum > 0, "%s: layer %d gradient is all zero", what, l);
      }
    }
  }
  // Forward only: no backward hooks.
  h.num_events = 0;
  CHECK(gemma_forward(&hooked, tokens, targets, BATCH, SEQ, lp_hooked, &err) == 0, "forward: %s", err.message);
  check_events(&h, L, 0, "forward only");
  // A failing hook stops the backward with its message and the layer.
  h.fail_at = L - 2;
  fimi_error_clear(&err);
  int rc = gemma_backward(&hooked, dlog, &err);
  CHECK(rc != 0 && strstr(err.message, "test hook refuses layer") != NULL, "failing hook: rc %d, message '%s'", rc,
        err.message);
  // Without a hook supplying parameters, freed layers are an error, not a crash.
  hooked.hooks = NULL;
  free(hooked.layers[0]);
  hooked.layers[0] = NULL;
  rc = gemma_forward(&hooked, tokens, targets, BATCH, SEQ, lp_hooked, &err);
  CHECK(rc != 0 && strstr(err.message, "layer 0") != NULL, "freed layer: rc %d, message '%s'", rc, err.message);
  for (int l = 0; l < L; l++) {
    free(h.params[l]);
    free(h.grads[l]);
  }
  gemma_model_free(&plain);
  gemma_model_free(&hooked);
}

int main(void) {
  run_preset("tiny");
  run_preset("tiny-gemma2");
  TEST_MAIN_END();
}
