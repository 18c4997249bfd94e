// train/state.h: what one optimizer step changes, behind a small interface
// the training loop calls and nothing else: the model's parameters and
// gradients and the AdamW state over them. Defines TrainState and
// train_state_init / _free / _zero_grad / _grad_sumsq / _step.
//
// The replicated (world 1) version: AdamW owns moments for every parameter
// buffer (the globals and each layer), the ranges come from the model's
// tensor table with adamw_name_decays. A sharded version (ZeRO-3 across MPI
// ranks, set up by cmd/cmd_train.c with parallel/zero3.h, which train/ does not
// link) plugs in through TrainStateOps: zero_grad clears the gradient
// accumulators, clip_step does the global-norm clipping and the update in one
// collective call, gather writes the full weights into `model` for saving.
// The loop calls train_state_clip_step, never the buffers.
#ifndef FIMI_TRAIN_STATE_H
#define FIMI_TRAIN_STATE_H

#include <stddef.h>

#include "core/error.h"
#include "model/gemma.h"
#include "optim/adamw.h"
#include "optim/clip.h"

typedef struct TrainStateOps {
  void (*zero_grad)(void *ctx);
  // Global-norm clipping with max_norm and, when update is 1 and the norm is
  // finite, one AdamW step with lr; collective across ranks.
  int (*clip_step)(void *ctx, double lr, double max_norm, int update, ClipResult *out, FimiError *err);
  // Collective: the full current weights into dst (for checkpoints).
  int (*gather)(void *ctx, GemmaModel *dst, FimiError *err);
  // Checkpoints of a sharded run: this rank's optimizer (its shard moments and
  // step), which the checkpoint saves and loads per rank;
  AdamW *(*optimizer)(void *ctx);
  // sets the shards from full weights (after a checkpoint was loaded into src);
  int (*load)(void *ctx, const GemmaModel *src, FimiError *err);
  // collective: 1 when ok is nonzero on every rank, else 0 on every rank, so
  // that one rank's failure (a full disk, a bad file) stops all of them
  // together instead of leaving the others blocked in the next collective.
  int (*all_ok)(void *ctx, int ok);
} TrainStateOps;

typedef struct TrainState {
  GemmaModel *model;  // borrowed; gradients allocated by train_state_init
  AdamW opt;
  int num_buffers;    // 1 + num_layers: "globals", "layers.0", ...
  float *grads[GEMMA_MAX_LAYERS + 1];
  size_t numels[GEMMA_MAX_LAYERS + 1];
  // Sharded version only (NULL: replicated). model is then a full model the
  // weights are gathered into before a save; opt is unused.
  const TrainStateOps *ops;
  void *ops_ctx;
  int rank, world;  // 0, 1 when replicated; only rank 0 writes files
} TrainState;

// AdamW ranges of one parameter buffer of m (layer -1 = globals, else the
// layer) from the tensor table, adjacent tensors with the same decay
// (adamw_name_decays) merged into one range; *out is malloc'ed. Shared by
// every backend so that decay rules match (train/state_cuda.c).
int train_state_buffer_ranges(const GemmaModel *m, int layer, const AdamWDecayRules *rules, AdamWRange **out,
                              int *count, FimiError *err);
// Allocates the model's gradients and registers its buffers with AdamW.
int train_state_init(TrainState *s, GemmaModel *model, const AdamWConfig *config, const AdamWDecayRules *rules,
                     FimiError *err);
// The sharded version: ops/ctx (borrowed) hold the parameters; model is a
// full model of the same config (gather target).
void train_state_init_sharded(TrainState *s, GemmaModel *model, const TrainStateOps *ops, void *ctx, int rank,
                              int world);
void train_state_free(TrainState *s);
void train_state_zero_grad(TrainState *s);
// Sum of squares of this process's gradients (deterministic order).
double train_state_grad_sumsq(const TrainState *s);
// One AdamW update with learning rate lr, gradients scaled by grad_scale.
int train_state_step(TrainState *s, double lr, float grad_scale, FimiError *err);
// What the loop calls: the global gradient norm (clip_from_sumsq with
// max_norm) and, if update is 1 and the norm is finite, the clipped update.
int train_state_clip_step(TrainState *s, double lr, double max_norm, int update, ClipResult *out, FimiError *err);
// Collective in the sharded version: makes s->model hold the current weights.
int train_state_sync_model(TrainState *s, FimiError *err);

#endif
