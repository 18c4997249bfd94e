// cmd/sharded_model.h: the ZeRO-3 model a train rank runs under mpirun, as
// cmd/cmd_train.c's sharded objectives call it: the CPU one
// (parallel/zero3.h, --device cpu) or the GPU one (parallel/zero3_cuda.h,
// --device cuda; cmd/train_cuda.h). Defines ShardedModelOps. Every call is
// collective over the train ranks and has the meaning of the zero3_* call of
// the same name; tokens, targets, dlogprobs and logprobs are host arrays.
#ifndef FIMI_CMD_SHARDED_MODEL_H
#define FIMI_CMD_SHARDED_MODEL_H

#include "core/error.h"
#include "model/gemma.h"
#include "optim/adamw.h"
#include "optim/clip.h"

typedef struct ShardedModelOps {
  int (*forward_backward)(void *ctx, const int *tokens, const int *targets, int B, int T, const float *dlogprobs,
                          float *logprobs, FimiError *err);
  int (*forward)(void *ctx, const int *tokens, const int *targets, int B, int T, float *logprobs, FimiError *err);
  int (*backward)(void *ctx, const float *dlogprobs, FimiError *err);
  void (*zero_grads)(void *ctx);
  // Clipping with max_norm and one AdamW update (zero3_step).
  int (*step)(void *ctx, double lr, double max_norm, ClipResult *out, FimiError *err);
  // Checkpoints: the full fp32 weights into dst, and this rank's optimizer
  // (its shards' moments and step) as of the last gather or load.
  int (*gather)(void *ctx, GemmaModel *dst, FimiError *err);
  AdamW *(*optimizer)(void *ctx);
  // The shards from full weights and the optimizer (as a checkpoint left them).
  int (*load)(void *ctx, const GemmaModel *src, FimiError *err);
} ShardedModelOps;

#endif
