// optim/adamw.c: the AdamW optimizer over registered flat buffers (see
// adamw.h). The per-element arithmetic is the kernels' adamw_update op; this
// file owns the moments, the ranges and the step counter.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "kernels/ops.h"
#include "optim/adamw.h"

void adamw_config_default(AdamWConfig *config) {
  config->beta1 = 0.9;
  config->beta2 = 0.999;
  config->eps = 1e-8;
  config->weight_decay = 0.0;
}

int adamw_config_validate(const AdamWConfig *c, FimiError *err) {
  if (!(c->beta1 >= 0 && c->beta1 < 1)) return fimi_fail(err, "optim.beta1 must be in [0, 1), got %g", c->beta1);
  if (!(c->beta2 >= 0 && c->beta2 < 1)) return fimi_fail(err, "optim.beta2 must be in [0, 1), got %g", c->beta2);
  if (!(c->eps > 0) || !isfinite(c->eps)) return fimi_fail(err, "optim.eps must be finite and > 0, got %g", c->eps);
  if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
    return fimi_fail(err, "optim.weight_decay must be finite and >= 0, got %g", c->weight_decay);
  return 0;
}

void adamw_decay_rules_default(AdamWDecayRules *rules) {
  rules->decay_norms = 0;
  rules->decay_embeddings = 0;
}

static int ends_with(const char *s, size_t len, const char *suffix) {
  size_t n = strlen(suffix);
  return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

int adamw_name_decays(const char *name, int is_norm, const AdamWDecayRules *rules) {
  size_t len = strlen(name);
  if (ends_with(name, len, ".bias")) return 0;
  // The module path: drop a trailing ".weight".
  size_t module_len = ends_with(name, len, ".weight") ? len - strlen(".weight") : len;
  // The module's own name: the part after the last '.'.
  size_t start = module_len;
  while (start > 0 && name[start - 1] != '.') start--;
  int norm = is_norm || ends_with(name, module_len, "norm");
  if (norm) return rules->decay_norms;
  char module[ADAMW_NAME_MAX * 2];
  size_t mlen = module_len - start < sizeof module - 1 ? module_len - start : sizeof module - 1;
  memcpy(module, name + start, mlen);
  module[mlen] = '\0';
  if (strstr(module, "embed")) return rules->decay_embeddings;
  return 1;
}

int adamw_init(AdamW *opt, const AdamWConfig *config, FimiError *err) {
  memset(opt, 0, sizeof *opt);
  if (adamw_config_validate(config, err) != 0) return -1;
  opt->config = *config;
  return 0;
}

void adamw_free(AdamW *opt) {
  if (!opt) return;
  for (int i = 0; i < opt->num_buffers; i++) {
    free(opt->buffers[i].exp_avg);
    free(opt->buffers[i].exp_avg_sq);
    free(opt->buffers[i].ranges);
  }
  free(opt->buffers);
  memset(opt, 0, sizeof *opt);
}

static int check_ranges(const char *name, size_t numel, const AdamWRange *ranges, int num_ranges, FimiError *err) {
  if (num_ranges < 0 || (num_ranges > 0 && !ranges))
    return fimi_fail(err, "optimizer buffer '%s': bad range list (%d ranges)", name, num_ranges);
  size_t end_prev = 0;
  for (int r = 0; r < num_ranges; r++) {
    const AdamWRange *g = &ranges[r];
    if (g->size == 0) return fimi_fail(err, "optimizer buffer '%s': range %d is empty", name, r);
    if (g->offset > numel || g->size > numel - g->offset)
      return fimi_fail(err, "optimizer buffer '%s': range %d [%zu, +%zu) exceeds the buffer's %zu elements", name, r,
                       g->offset, g->size, numel);
    if (r > 0 && g->offset < end_prev)
      return fimi_fail(err, "optimizer buffer '%s': range %d starts at %zu, before the end %zu of range %d "
                       "(ranges must be ascending and disjoint)", name, r, g->offset, end_prev, r - 1);
    end_prev = g->offset + g->size;
  }
  return 0;
}

int adamw_add_buffer(AdamW *opt, const char *name, float *param, const float *grad, size_t numel,
                     const AdamWRange *ranges, int num_ranges, FimiError *err) {
  if (!name || !name[0] || strlen(name) >= ADAMW_NAME_MAX)
    return fimi_fail(err, "optimizer buffer name must be 1..%d characters", ADAMW_NAME_MAX - 1);
  for (int i = 0; i < opt->num_buffers; i++)
    if (strcmp(opt->buffers[i].name, name) == 0) return fimi_fail(err, "optimizer buffer '%s' registered twice", name);
  if (numel > 0 && (!param || !grad)) return fimi_fail(err, "optimizer buffer '%s': NULL param or grad", name);
  if (numel > SIZE_MAX / sizeof(float)) return fimi_fail(err, "optimizer buffer '%s': %zu elements overflow", name, numel);
  if (check_ranges(name, numel, ranges, num_ranges, err) != 0) return -1;
  if (opt->num_buffers == opt->capacity) {
    int cap = opt->capacity ? opt->capacity * 2 : 8;
    AdamWBuffer *grown = realloc(opt->buffers, (size_t)cap * sizeof *grown);
    if (!grown) return fimi_fail(err, "out of memory registering optimizer buffer '%s'", name);
    opt->buffers = grown;
    opt->capacity = cap;
  }
  AdamWBuffer b;
  memset(&b, 0, sizeof b);
  snprintf(b.name, sizeof b.name, "%s", name);
  b.param = param;
  b.grad = grad;
  b.numel = numel;
  b.num_ranges = num_ranges;
  b.exp_avg = fimi_calloc(numel ? numel : 1, sizeof(float), err);
  b.exp_avg_sq = fimi_calloc(numel ? numel : 1, sizeof(float), err);
  b.ranges = fimi_calloc(num_ranges ? (size_t)num_ranges : 1, sizeof(AdamWRange), err);
  if (!b.exp_avg || !b.exp_avg_sq || !b.ranges) {
    free(b.exp_avg), free(b.exp_avg_sq), free(b.ranges);
    return fimi_fail_wrap(err, "optimizer state of buffer '%s' (%zu floats)", name, numel);
  }
  if (num_ranges) memcpy(b.ranges, ranges, (size_t)num_ranges * sizeof(AdamWRange));
  opt->buffers[opt->num_buffers++] = b;
  return 0;
}

int adamw_step(AdamW *opt, double lr, float grad_scale, FimiError *err) {
  if (!isfinite(lr) || lr < 0) return fimi_fail(err, "adamw step %lld: learning rate %g is not finite and >= 0",
                                                (long long)opt->step + 1, lr);
  if (!isfinite(grad_scale) || !(grad_scale > 0))
    return fimi_fail(err, "adamw step %lld: grad_scale %g is not finite and > 0", (long long)opt->step + 1,
                     (double)grad_scale);
  AdamWStep s = {.lr = lr, .beta1 = opt->config.beta1, .beta2 = opt->config.beta2, .eps = opt->config.eps,
                 .step = (long)(opt->step + 1), .grad_scale = grad_scale};
  for (int i = 0; i < opt->num_buffers; i++) {
    AdamWBuffer *b = &opt->buffers[i];
    for (int r = 0; r < b->num_ranges; r++) {
      const AdamWRange *g = &b->ranges[r];
      s.weight_decay = g->decay ? opt->config.weight_decay : 0.0;
      size_t o = g->offset;
      adamw_update(b->param + o, b->exp_avg + o, b->exp_avg_sq + o, b->grad + o, g->size, &s);
    }
  }
  opt->step++;
  return 0;
}

int adamw_state_count(const AdamW *opt) { return 2 * opt->num_buffers; }

int adamw_state_array(AdamW *opt, int index, AdamWStateArray *out, FimiError *err) {
  if (index < 0 || index >= adamw_state_count(opt))
    return fimi_fail(err, "optimizer state index %d out of range [0, %d)", index, adamw_state_count(opt));
  AdamWBuffer *b = &opt->buffers[index / 2];
  int second = index % 2;
  snprintf(out->name, sizeof out->name, "%s.%s", b->name, second ? "exp_avg_sq" : "exp_avg");
  out->data = second ? b->exp_avg_sq : b->exp_avg;
  out->numel = b->numel;
  return 0;
}

int adamw_state_load(AdamW *opt, const char *name, const float *data, size_t numel, FimiError *err) {
  AdamWStateArray a;
  for (int i = 0; i < adamw_state_count(opt); i++) {
    if (adamw_state_array(opt, i, &a, err) != 0) return -1;
    if (strcmp(a.name, name) != 0) continue;
    if (numel != a.numel)
      return fimi_fail(err, "optimizer state '%s': %zu elements in the checkpoint, %zu expected", name, numel, a.numel);
    if (numel > 0 && !data) return fimi_fail(err, "optimizer state '%s': no data", name);
    int second = i % 2;
    for (size_t k = 0; k < numel; k++)
      if (!isfinite(data[k]) || (second && data[k] < 0))
        return fimi_fail(err, "optimizer state '%s': element %zu is %g (expected finite%s)", name, k, (double)data[k],
                         second ? " and >= 0" : "");
    if (numel) memcpy(a.data, data, numel * sizeof(float));
    return 0;
  }
  return fimi_fail(err, "optimizer state '%s' does not match any registered buffer", name);
}

int adamw_set_step(AdamW *opt, int64_t step, FimiError *err) {
  if (step < 0) return fimi_fail(err, "optimizer step counter %lld is negative", (long long)step);
  opt->step = step;
  return 0;
}

uint64_t adamw_rounding_seed(uint64_t train_seed, int64_t step) { return rng_mix(train_seed, (uint64_t)step); }
