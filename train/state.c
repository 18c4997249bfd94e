// train/state.c: the replicated (world 1) TrainState: see state.h.
#include "train/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/clip.h"

int train_state_buffer_ranges(const GemmaModel *m, int layer, const AdamWDecayRules *rules, AdamWRange **out,
                              int *count, FimiError *err) {
  AdamWRange *ranges = fimi_calloc((size_t)m->num_tensors, sizeof *ranges, err);
  if (!ranges) return -1;
  int n = 0;
  for (int i = 0; i < m->num_tensors; i++) {
    const GemmaTensor *t = &m->tensors[i];
    if (t->layer != layer) continue;
    int decay = !t->frozen && adamw_name_decays(t->name, t->is_norm, rules);  // a buffer never changes
    if (n > 0 && ranges[n - 1].decay == decay && ranges[n - 1].offset + ranges[n - 1].size == t->offset) {
      ranges[n - 1].size += t->numel;
    } else {
      ranges[n].offset = t->offset;
      ranges[n].size = t->numel;
      ranges[n].decay = decay;
      n++;
    }
  }
  *out = ranges;
  *count = n;
  return 0;
}

static int register_buffer(TrainState *s, const char *name, int layer, float *param, float *grad, size_t numel,
                           const AdamWDecayRules *rules, FimiError *err) {
  AdamWRange *ranges = NULL;
  int count = 0;
  if (train_state_buffer_ranges(s->model, layer, rules, &ranges, &count, err) != 0) return -1;
  int rc = adamw_add_buffer(&s->opt, name, param, grad, numel, ranges, count, err);
  free(ranges);
  if (rc != 0) return -1;
  s->grads[s->num_buffers] = grad;
  s->numels[s->num_buffers] = numel;
  s->num_buffers++;
  return 0;
}

int train_state_init(TrainState *s, GemmaModel *model, const AdamWConfig *config, const AdamWDecayRules *rules,
                     FimiError *err) {
  memset(s, 0, sizeof *s);
  s->model = model;
  s->world = 1;
  if (gemma_model_alloc_grads(model, err) != 0) return -1;
  if (adamw_init(&s->opt, config, err) != 0) return -1;
  int rc = register_buffer(s, "globals", -1, model->globals, model->globals_grad, model->globals_numel, rules, err);
  for (int l = 0; rc == 0 && l < model->config.num_hidden_layers; l++) {
    char name[32];
    snprintf(name, sizeof name, "layers.%d", l);
    rc = register_buffer(s, name, l, model->layers[l], model->layers_grad[l], model->layer_numel, rules, err);
  }
  if (rc != 0) adamw_free(&s->opt);
  return rc;
}

void train_state_init_sharded(TrainState *s, GemmaModel *model, const TrainStateOps *ops, void *ctx, int rank,
                              int world) {
  memset(s, 0, sizeof *s);
  s->model = model;
  s->ops = ops;
  s->ops_ctx = ctx;
  s->rank = rank;
  s->world = world;
}

void train_state_free(TrainState *s) {
  if (!s->ops) adamw_free(&s->opt);
  memset(s, 0, sizeof *s);
}

void train_state_zero_grad(TrainState *s) {
  if (s->ops) s->ops->zero_grad(s->ops_ctx);
  else gemma_model_zero_grads(s->model);
}

double train_state_grad_sumsq(const TrainState *s) {
  return clip_local_sumsq((const float *const *)s->grads, s->numels, s->num_buffers);
}

int train_state_step(TrainState *s, double lr, float grad_scale, FimiError *err) {
  return adamw_step(&s->opt, lr, grad_scale, err);
}

int train_state_clip_step(TrainState *s, double lr, double max_norm, int update, ClipResult *out, FimiError *err) {
  if (s->ops) return s->ops->clip_step(s->ops_ctx, lr, max_norm, update, out, err);
  if (clip_from_sumsq(train_state_grad_sumsq(s), max_norm, out, err) != 0) return -1;
  return update && out->finite ? train_state_step(s, lr, out->scale, err) : 0;
}

int train_state_sync_model(TrainState *s, FimiError *err) {
  return s->ops ? s->ops->gather(s->ops_ctx, s->model, err) : 0;
}
