// train/state.h: what one optimizer step changes, behind a small interface
// the training loop calls and nothing else: the model's parameters and
// gradients and the AdamW state over them. Defines TrainState and
// train_state_init / _free / _zero_grad / _grad_sumsq / _step.
//
// This is the world-1 (replicated) version: AdamW owns moments for every
// parameter buffer (the globals and each layer), the ranges come from the
// model's tensor table with adamw_name_decays. A ZeRO-3 version keeps the same
// five functions and replaces their bodies: zero_grad clears the local
// gradient shards, grad_sumsq returns the rank's part (the loop all-reduces
// it), step updates the local fp32 shard. The loop never touches buffers.
#ifndef FIMI_TRAIN_STATE_H
#define FIMI_TRAIN_STATE_H

#include <stddef.h>

#include "core/error.h"
#include "model/gemma.h"
#include "optim/adamw.h"

typedef struct TrainState {
  GemmaModel *model;  // borrowed; gradients allocated by train_state_init
  AdamW opt;
  int num_buffers;    // 1 + num_layers: "globals", "layers.0", ...
  float *grads[GEMMA_MAX_LAYERS + 1];
  size_t numels[GEMMA_MAX_LAYERS + 1];
} TrainState;

// Allocates the model's gradients and registers its buffers with AdamW.
int train_state_init(TrainState *s, GemmaModel *model, const AdamWConfig *config, const AdamWDecayRules *rules,
                     FimiError *err);
void train_state_free(TrainState *s);
void train_state_zero_grad(TrainState *s);
// Sum of squares of this process's gradients (deterministic order).
double train_state_grad_sumsq(const TrainState *s);
// One AdamW update with learning rate lr, gradients scaled by grad_scale.
int train_state_step(TrainState *s, double lr, float grad_scale, FimiError *err);

#endif
