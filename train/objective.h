// train/objective.h: what an objective plugs into the training loop.
// Defines TrainBatchResult and TrainObjective (a struct of callbacks: loss
// and backward on a micro-batch, loss without backward for evaluation).
// SFT lives in train/sft.h; DPO and GRPO provide their own from dpo/ and rl/.
#ifndef FIMI_TRAIN_OBJECTIVE_H
#define FIMI_TRAIN_OBJECTIVE_H

#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "model/gemma.h"

typedef struct TrainBatchResult {
  double loss;          // the objective's loss on this micro-batch (NaN/inf make the loop skip the step)
  int64_t tokens;       // tokens run through the model (padding excluded)
  int64_t loss_tokens;  // tokens the loss counts
} TrainBatchResult;

typedef struct TrainObjective {
  const char *name;
  void *ctx;
  // Forward and backward on rows[0..count) of ds: accumulates the gradient of
  // weight * loss into the model's gradients (weight = 1 / grad_accum).
  int (*train_batch)(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                     double weight, TrainBatchResult *out, FimiError *err);
  // Forward only: adds the loss summed over its units to *loss_sum and the
  // number of units to *count, so evaluation reports sum / count over a set.
  int (*eval_batch)(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                    double *loss_sum, double *count_out, FimiError *err);
} TrainObjective;

#endif
