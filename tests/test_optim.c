// tests/test_optim.c: optim/: LR schedules against hand-computed values,
// gradient clipping (norm, coefficient, non-finite, sharded sum == whole),
// the AdamW optimizer (ranges with and without decay and uncovered gaps vs
// the adamw_update op, validation, state save/load resuming bit for bit), and
// the decay rule applied to the Gemma model's HF-named tensor table.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "model/gemma.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "train/state.h"
#include "tests/test_ops_util.h"

static void check_factor(const LrSchedule *s, long step, double expect, const char *what) {
  char label[128];
  snprintf(label, sizeof label, "%s step %ld", what, step);
  CHECK_CLOSE(lr_schedule_factor(s, step), expect, 1e-12, label);
}

static void test_schedules(void) {
  FimiError err = {0};
  LrSchedule s;
  lr_schedule_default(&s);
  s.base_lr = 5e-7;
  CHECK(lr_schedule_validate(&s, &err) == 0, "default schedule invalid: %s", err.message);
  check_factor(&s, 0, 1.0, "constant");
  check_factor(&s, 1000, 1.0, "constant");

  s.kind = LR_SCHEDULE_CONSTANT_WITH_WARMUP;
  s.warmup_steps = 4;
  double cw[6] = {0.0, 0.25, 0.5, 0.75, 1.0, 1.0};
  for (int k = 0; k < 6; k++) check_factor(&s, k, cw[k], "constant_with_warmup(4)");

  s.kind = LR_SCHEDULE_LINEAR;
  s.warmup_steps = 2, s.total_steps = 10;
  check_factor(&s, 1, 0.5, "linear(2, 10)");
  check_factor(&s, 2, 1.0, "linear(2, 10)");
  check_factor(&s, 6, 0.5, "linear(2, 10)");   // (10 - 6) / 8
  check_factor(&s, 10, 0.0, "linear(2, 10)");
  check_factor(&s, 12, 0.0, "linear(2, 10)");  // clamped at 0

  // Cosine, warmup 10, total 110: decay over 100 steps.
  s.kind = LR_SCHEDULE_COSINE;
  s.warmup_steps = 10, s.total_steps = 110;
  check_factor(&s, 0, 0.0, "cosine(10, 110)");
  check_factor(&s, 3, 0.3, "cosine(10, 110)");
  check_factor(&s, 10, 1.0, "cosine(10, 110)");
  check_factor(&s, 35, 0.5 + 0.25 * sqrt(2.0), "cosine(10, 110)");  // 0.5 (1 + cos(pi/4))
  check_factor(&s, 60, 0.5, "cosine(10, 110)");
  check_factor(&s, 85, 0.5 - 0.25 * sqrt(2.0), "cosine(10, 110)");
  check_factor(&s, 110, 0.0, "cosine(10, 110)");
  // transformers lets the cosine rise again past total_steps (progress > 1).
  check_factor(&s, 120, 0.5 * (1.0 + cos(1.1 * 3.141592653589793)), "cosine(10, 110)");
  CHECK_CLOSE(lr_schedule_lr(&s, 60), 2.5e-7, 1e-18, "cosine lr at the midpoint");
  // With a floor of 10%: f * 0.9 + 0.1.
  s.min_lr_ratio = 0.1;
  check_factor(&s, 60, 0.55, "cosine min 0.1");
  check_factor(&s, 110, 0.1, "cosine min 0.1");
  check_factor(&s, 5, 0.5, "cosine min 0.1 (warmup unaffected)");
  // No warmup: full lr at step 0.
  s.min_lr_ratio = 0, s.warmup_steps = 0;
  check_factor(&s, 0, 1.0, "cosine(0, 110)");
  // The paper's run: 885 steps, warmup ratio 0.1 -> ceil(88.5) = 89.
  CHECK(lr_warmup_steps_from_ratio(0.1, 885) == 89, "warmup ratio 0.1 of 885: %ld",
        lr_warmup_steps_from_ratio(0.1, 885));
  CHECK(lr_warmup_steps_from_ratio(0.0, 885) == 0, "warmup ratio 0");

  LrScheduleKind kind;
  CHECK(lr_schedule_kind_parse("cosine", &kind, &err) == 0 && kind == LR_SCHEDULE_COSINE, "parse cosine");
  CHECK(lr_schedule_kind_parse("cosine_with_restarts", &kind, &err) != 0 && strstr(err.message, "cosine_with_restarts"),
        "unknown schedule should fail naming it");
  s.total_steps = 0;
  CHECK(lr_schedule_validate(&s, &err) != 0 && strstr(err.message, "total_steps"), "cosine without total_steps");
  s.total_steps = 10, s.min_lr_ratio = 1.5;
  CHECK(lr_schedule_validate(&s, &err) != 0 && strstr(err.message, "min_lr_ratio"), "min_lr_ratio 1.5");
  s.min_lr_ratio = 0, s.base_lr = NAN;
  CHECK(lr_schedule_validate(&s, &err) != 0, "NaN lr accepted");
}

static void test_clip(void) {
  FimiError err = {0};
  float a[2] = {3.0f, 0.0f}, b[1] = {4.0f};
  float *grads[2] = {a, b};
  size_t numels[2] = {2, 1};
  ClipResult r;
  CHECK(clip_grad_norm(grads, numels, 2, 10.0, &r, &err) == 0, "clip: %s", err.message);
  CHECK(r.norm == 5.0 && r.scale == 1.0f && !r.clipped && r.finite, "norm 5 under max 10: no clip (norm %g)", r.norm);
  CHECK(a[0] == 3.0f && b[0] == 4.0f, "unclipped gradients changed");
  CHECK(clip_grad_norm(grads, numels, 2, 1.0, &r, &err) == 0, "clip: %s", err.message);
  float coef = (float)(1.0 / (5.0 + 1e-6));
  CHECK(r.norm == 5.0 && r.clipped && r.scale == coef, "clip to 1: scale %.9g expected %.9g", r.scale, coef);
  CHECK(a[0] == 3.0f * coef && b[0] == 4.0f * coef, "clipped gradients are not g * coef");
  double after = sqrt(clip_local_sumsq((const float *const *)grads, numels, 2));
  CHECK_CLOSE(after, 1.0, 1e-6, "norm after clipping");
  // max_norm <= 0: report only.
  CHECK(clip_grad_norm(grads, numels, 2, 0.0, &r, &err) == 0 && !r.clipped && r.scale == 1.0f, "max_norm 0 clipped");
  // Non-finite: reported, gradients untouched, scale 1.
  float c[3] = {1.0f, INFINITY, 2.0f}, *cg[1] = {c};
  size_t cn[1] = {3};
  CHECK(clip_grad_norm(cg, cn, 1, 1.0, &r, &err) == 0 && !r.finite && r.scale == 1.0f, "inf gradient not reported");
  CHECK(c[0] == 1.0f && c[2] == 2.0f, "non-finite step must leave the gradients alone");
  c[1] = NAN;
  CHECK(clip_grad_norm(cg, cn, 1, 1.0, &r, &err) == 0 && !r.finite, "NaN gradient not reported");
  CHECK(clip_from_sumsq(4.0, NAN, &r, &err) != 0, "NaN max_norm accepted");
  // Sharded: the sum of the shards' sums of squares gives the same decision
  // as the whole buffer (here 4 shards of a random buffer).
  Rng rng;
  rng_seed(&rng, 5);
  long n = 10007;
  float *g = random_floats(&rng, n, 1.0f);
  double whole = clip_local_sumsq((const float *const *)&g, (size_t[]){(size_t)n}, 1), parts = 0;
  long shard = (n + 3) / 4;
  for (int rank = 0; rank < 4; rank++) {
    long begin = rank * shard, count = begin + shard <= n ? shard : n - begin;
    const float *p = g + begin;
    size_t cnt = (size_t)count;
    parts += clip_local_sumsq(&p, &cnt, 1);
  }
  ClipResult rw, rp;
  clip_from_sumsq(whole, 1.0, &rw, &err);
  clip_from_sumsq(parts, 1.0, &rp, &err);
  CHECK(fabs(rw.norm - rp.norm) <= 1e-13 * rw.norm && rw.scale == rp.scale, "sharded norm %.17g vs whole %.17g",
        rp.norm, rw.norm);
  long double ref = 0;
  for (long i = 0; i < n; i++) ref += (long double)g[i] * g[i];
  CHECK_CLOSE(rw.norm, sqrt((double)ref), 1e-14, "global norm vs long double");
  free(g);
}

// Registers one buffer with ranges [0,100) decay, [100,150) no decay,
// [150,170) not covered, [170,256) decay, runs steps and compares with the
// op applied range by range.
static void test_adamw_ranges(void) {
  FimiError err = {0};
  Rng rng;
  rng_seed(&rng, 9);
  size_t n = 256;
  float *p = random_floats(&rng, (long)n, 1.0f), *g = random_floats(&rng, (long)n, 0.1f);
  float *ref_p = malloc(n * sizeof(float)), *ref_m = calloc(n, sizeof(float)), *ref_v = calloc(n, sizeof(float));
  memcpy(ref_p, p, n * sizeof(float));
  AdamWConfig cfg;
  adamw_config_default(&cfg);
  cfg.weight_decay = 0.1;
  AdamW opt;
  CHECK(adamw_init(&opt, &cfg, &err) == 0, "init: %s", err.message);
  AdamWRange ranges[3] = {{0, 100, 1}, {100, 50, 0}, {170, 86, 1}};
  CHECK(adamw_add_buffer(&opt, "layers.0", p, g, n, ranges, 3, &err) == 0, "add: %s", err.message);
  for (int t = 1; t <= 3; t++) {
    double lr = 1e-2 * t;
    CHECK(adamw_step(&opt, lr, 0.5f, &err) == 0, "step: %s", err.message);
    for (int r = 0; r < 3; r++) {
      AdamWStep s = {.lr = lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                     .weight_decay = ranges[r].decay ? 0.1 : 0.0, .step = t, .grad_scale = 0.5f};
      size_t o = ranges[r].offset;
      adamw_update(ref_p + o, ref_m + o, ref_v + o, g + o, ranges[r].size, &s);
    }
  }
  CHECK(memcmp(p, ref_p, n * sizeof(float)) == 0, "optimizer differs from the op applied per range");
  CHECK(opt.step == 3, "step counter %lld after 3 steps", (long long)opt.step);
  for (size_t i = 150; i < 170; i++) CHECK(opt.buffers[0].exp_avg[i] == 0.0f, "uncovered element %zu has a moment", i);
  // The decay flag matters: the decaying and non-decaying versions differ.
  float *q = malloc(n * sizeof(float)), *zero = calloc(n, sizeof(float));
  for (size_t i = 0; i < n; i++) q[i] = 1.0f;
  AdamW opt2;
  adamw_init(&opt2, &cfg, &err);
  adamw_add_buffer(&opt2, "x", q, zero, n, ranges, 3, &err);
  adamw_step(&opt2, 0.1, 1.0f, &err);
  float decayed = (float)(1.0 - 0.1 * 0.1);
  CHECK(q[0] == decayed && q[100] == 1.0f && q[160] == 1.0f && q[200] == decayed,
        "zero grad: decay range %g (expected %g), no-decay %g, gap %g", q[0], decayed, q[100], q[160]);
  adamw_free(&opt2);

  // Validation.
  float lr_before = p[0];
  CHECK(adamw_step(&opt, NAN, 1.0f, &err) != 0 && opt.step == 3 && p[0] == lr_before, "NaN lr must fail, no change");
  CHECK(adamw_step(&opt, 1e-3, 0.0f, &err) != 0, "grad_scale 0 accepted");
  CHECK(adamw_add_buffer(&opt, "layers.0", p, g, n, ranges, 3, &err) != 0 && strstr(err.message, "twice"),
        "duplicate name accepted");
  AdamWRange overlap[2] = {{0, 10, 1}, {5, 10, 0}};
  CHECK(adamw_add_buffer(&opt, "b", p, g, n, overlap, 2, &err) != 0 && strstr(err.message, "range 1"),
        "overlapping ranges accepted: %s", err.message);
  AdamWRange outside[1] = {{250, 10, 1}};
  CHECK(adamw_add_buffer(&opt, "c", p, g, n, outside, 1, &err) != 0 && strstr(err.message, "exceeds"),
        "range past the end accepted");
  AdamWRange huge[1] = {{1, SIZE_MAX, 1}};
  CHECK(adamw_add_buffer(&opt, "d", p, g, n, huge, 1, &err) != 0, "overflowing range accepted");
  AdamWConfig bad = cfg;
  bad.beta2 = 1.0;
  AdamW opt3;
  CHECK(adamw_init(&opt3, &bad, &err) != 0 && strstr(err.message, "beta2"), "beta2 = 1 accepted");
  adamw_free(&opt);
  free(p), free(g), free(ref_p), free(ref_m), free(ref_v), free(q), free(zero);
}

// Two buffers; 6 straight steps == 3 steps, save (params, state arrays, step),
// restore into a fresh optimizer, 3 more steps. Bitwise.
static void run_steps(AdamW *opt, float **grads, Rng *rng, size_t *sizes, int from, int to) {
  FimiError err = {0};
  for (int t = from; t < to; t++) {
    for (int b = 0; b < 2; b++) rng_fill_normal(rng, grads[b], (long)sizes[b], 0.0f, 0.1f);
    adamw_step(opt, 1e-2 / (1 + t), 1.0f, &err);
  }
}

static void test_adamw_state(void) {
  FimiError err = {0};
  size_t sizes[2] = {300, 77};
  AdamWConfig cfg;
  adamw_config_default(&cfg);
  cfg.weight_decay = 0.01;
  AdamWRange r0[2] = {{0, 200, 1}, {200, 100, 0}}, r1[1] = {{0, 77, 1}};
  float *pa[2], *pb[2], *ga[2], *gb[2];
  Rng init;
  rng_seed(&init, 1);
  for (int b = 0; b < 2; b++) {
    pa[b] = random_floats(&init, (long)sizes[b], 1.0f);
    pb[b] = malloc(sizes[b] * sizeof(float));
    ga[b] = calloc(sizes[b], sizeof(float));
    gb[b] = calloc(sizes[b], sizeof(float));
  }
  // Straight run, with a copy of the state after step 3.
  AdamW a;
  adamw_init(&a, &cfg, &err);
  adamw_add_buffer(&a, "layers.0", pa[0], ga[0], sizes[0], r0, 2, &err);
  adamw_add_buffer(&a, "globals", pa[1], ga[1], sizes[1], r1, 1, &err);
  Rng ra;
  rng_seed(&ra, 77);
  run_steps(&a, ga, &ra, sizes, 0, 3);
  Rng rb = ra;  // the data stream continues from the same place
  for (int b = 0; b < 2; b++) memcpy(pb[b], pa[b], sizes[b] * sizeof(float));
  int count = adamw_state_count(&a);
  CHECK(count == 4, "state arrays: %d", count);
  AdamWStateArray saved[4];
  float *copies[4];
  const char *names[4] = {"layers.0.exp_avg", "layers.0.exp_avg_sq", "globals.exp_avg", "globals.exp_avg_sq"};
  for (int i = 0; i < count; i++) {
    CHECK(adamw_state_array(&a, i, &saved[i], &err) == 0, "state array %d: %s", i, err.message);
    CHECK(strcmp(saved[i].name, names[i]) == 0, "state %d named %s, expected %s", i, saved[i].name, names[i]);
    copies[i] = malloc(saved[i].numel * sizeof(float));
    memcpy(copies[i], saved[i].data, saved[i].numel * sizeof(float));
  }
  int64_t saved_step = a.step;
  run_steps(&a, ga, &ra, sizes, 3, 6);

  AdamW b;
  adamw_init(&b, &cfg, &err);
  adamw_add_buffer(&b, "layers.0", pb[0], gb[0], sizes[0], r0, 2, &err);
  adamw_add_buffer(&b, "globals", pb[1], gb[1], sizes[1], r1, 1, &err);
  for (int i = 0; i < count; i++)
    CHECK(adamw_state_load(&b, saved[i].name, copies[i], saved[i].numel, &err) == 0, "load %s: %s", saved[i].name,
          err.message);
  CHECK(adamw_set_step(&b, saved_step, &err) == 0, "set step");
  run_steps(&b, gb, &rb, sizes, 3, 6);
  for (int k = 0; k < 2; k++)
    CHECK(memcmp(pa[k], pb[k], sizes[k] * sizeof(float)) == 0, "resumed buffer %d differs from the straight run", k);
  CHECK(memcmp(a.buffers[0].exp_avg_sq, b.buffers[0].exp_avg_sq, sizes[0] * sizeof(float)) == 0, "resumed moments");
  CHECK(a.step == 6 && b.step == 6, "step counters %lld %lld", (long long)a.step, (long long)b.step);
  // Untrusted state rejected, array unchanged.
  float before = b.buffers[0].exp_avg_sq[0];
  copies[1][5] = -1.0f;
  CHECK(adamw_state_load(&b, "layers.0.exp_avg_sq", copies[1], sizes[0], &err) != 0 && strstr(err.message, "element 5"),
        "negative exp_avg_sq accepted: %s", err.message);
  CHECK(b.buffers[0].exp_avg_sq[0] == before, "failed load changed the state");
  copies[0][7] = NAN;
  CHECK(adamw_state_load(&b, "layers.0.exp_avg", copies[0], sizes[0], &err) != 0, "NaN exp_avg accepted");
  CHECK(adamw_state_load(&b, "layers.0.exp_avg", copies[0], sizes[0] - 1, &err) != 0 && strstr(err.message, "elements"),
        "wrong size accepted");
  CHECK(adamw_state_load(&b, "layers.9.exp_avg", copies[0], sizes[0], &err) != 0, "unknown name accepted");
  CHECK(adamw_set_step(&b, -1, &err) != 0, "negative step accepted");
  CHECK(adamw_state_array(&b, 4, &saved[0], &err) != 0, "state index out of range accepted");
  adamw_free(&a), adamw_free(&b);
  for (int k = 0; k < 2; k++) free(pa[k]), free(pb[k]), free(ga[k]), free(gb[k]);
  for (int i = 0; i < count; i++) free(copies[i]);
}

// The decay rule on the real tensor table: norms and the embedding do not
// decay by default, every projection does; ranges built from the table cover
// each layer buffer exactly.
static void test_decay_on_gemma_table(void) {
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaModel model;
  if (gemma_config_preset(&cfg, "tiny", &err) != 0 || gemma_model_create(&model, &cfg, &err) != 0) {
    CHECK(0, "tiny model: %s", err.message);
    return;
  }
  AdamWDecayRules rules;
  adamw_decay_rules_default(&rules);
  int decayed = 0, norms = 0;
  size_t layer0_covered = 0;
  for (int i = 0; i < model.num_tensors; i++) {
    const GemmaTensor *t = &model.tensors[i];
    int by_name = adamw_name_decays(t->name, 0, &rules);  // the name alone must find the norms
    int expect = !t->is_norm && strcmp(t->name, "model.embed_tokens.weight") != 0;
    CHECK(by_name == expect, "%s: decay %d, expected %d", t->name, by_name, expect);
    CHECK(adamw_name_decays(t->name, t->is_norm, &rules) == expect, "%s with is_norm", t->name);
    decayed += by_name, norms += t->is_norm;
    if (t->layer == 0) layer0_covered += t->numel;
  }
  CHECK(decayed > 0 && norms > 0, "table has %d decayed and %d norm tensors", decayed, norms);
  CHECK(layer0_covered == model.layer_numel, "layer 0 tensors cover %zu of %zu", layer0_covered, model.layer_numel);
  rules.decay_embeddings = 1;
  CHECK(adamw_name_decays("model.embed_tokens.weight", 0, &rules) == 1, "decay_embeddings=1 ignored");
  CHECK(adamw_name_decays("model.norm.weight", 0, &rules) == 0, "norm decays with decay_embeddings");
  rules.decay_norms = 1;
  CHECK(adamw_name_decays("model.layers.0.self_attn.q_norm.weight", 0, &rules) == 1, "decay_norms=1 ignored");
  CHECK(adamw_name_decays("lm_head.bias", 0, &rules) == 0, "bias decays");
  CHECK(adamw_name_decays("model.layers.1.mlp.down_proj.weight", 0, &rules) == 1, "down_proj does not decay");
  gemma_model_free(&model);
}

// Gemma 4's layer_scalar is a buffer (frozen): its optimizer range never
// decays, even with decay_norms on (it is a norm-like 1-element tensor),
// so AdamW leaves it exactly as loaded.
static void test_frozen_never_decays(void) {
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaModel model;
  if (gemma_config_preset(&cfg, "tiny-g4", &err) != 0 || gemma_model_create(&model, &cfg, &err) != 0) {
    CHECK(0, "tiny-g4 model: %s", err.message);
    return;
  }
  AdamWDecayRules rules = {.decay_norms = 1, .decay_embeddings = 1};
  AdamWRange *ranges = NULL;
  int count = 0;
  CHECK(train_state_buffer_ranges(&model, 0, &rules, &ranges, &count, &err) == 0, "ranges: %s", err.message);
  const GemmaTensor *scalar = gemma_find_tensor(&model, "model.layers.0.layer_scalar");
  const GemmaTensor *norm = gemma_find_tensor(&model, "model.layers.0.input_layernorm.weight");
  CHECK(scalar && scalar->frozen && norm, "tiny-g4 has a frozen layer_scalar and an input norm");
  int scalar_decays = -1, norm_decays = -1;
  for (int i = 0; scalar && norm && i < count; i++) {
    if (scalar->offset >= ranges[i].offset && scalar->offset < ranges[i].offset + ranges[i].size)
      scalar_decays = ranges[i].decay;
    if (norm->offset >= ranges[i].offset && norm->offset < ranges[i].offset + ranges[i].size)
      norm_decays = ranges[i].decay;
  }
  CHECK(scalar_decays == 0, "layer_scalar's range decays (%d) with decay_norms on", scalar_decays);
  CHECK(norm_decays == 1, "input_layernorm's range does not decay (%d) with decay_norms on", norm_decays);
  free(ranges);
  gemma_model_free(&model);
}

int main(void) {
  test_schedules();
  test_clip();
  test_adamw_ranges();
  test_adamw_state();
  test_decay_on_gemma_table();
  test_frozen_never_decays();
  TEST_MAIN_END();
}
