// train/sft.h: the SFT objective: masked token cross-entropy, the mean of
// -log p(token | prefix) over the tokens whose loss_mask is 1.
// Defines SftBatch (one padded micro-batch), sft_batch_build, sft_loss,
// SftObjective and sft_objective_init (a TrainObjective for train/loop.h),
// SftModelOps (the model behind callbacks, e.g. on the GPU).
//
// Batches are right-padded, not packed: a micro-batch of B rows becomes
// (B, T) inputs with T = (longest row) - 1; row r's inputs are ids[0..L-1),
// its targets ids[1..L) and its mask loss_mask[1..L) (the mask of the token
// being predicted). Padding positions hold pad_id as input and target -1, so
// they are neither scored nor trained; attention is causal, so right padding
// never changes the log-probs of real tokens. Packing would save the padding
// FLOPs but needs per-document attention masks the model does not have.
#ifndef FIMI_TRAIN_SFT_H
#define FIMI_TRAIN_SFT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "train/objective.h"

typedef struct SftBatch {
  int B, T;
  int *tokens;       // (B, T) inputs, pad_id on padding
  int *targets;      // (B, T) next token, -1 where not scored
  float *mask;       // (B, T) 1 where the loss counts
  float *dlogprobs;  // (B, T) -mask * weight / loss_tokens
  float *logprobs;   // (B, T) filled by the model
  int64_t tokens_real;  // input positions that are not padding
  int64_t loss_tokens;
  size_t capacity;   // elements allocated per array
} SftBatch;

// Fills b from rows of the "seq" field of ds (growing its arrays). Rows must
// fit max_len input positions (the model's max_position_embeddings).
int sft_batch_build(SftBatch *b, const Dataset *ds, const int64_t *rows, int64_t count, int pad_id, int max_len,
                    FimiError *err);
void sft_batch_free(SftBatch *b);
// -sum(mask * logprobs) / sum(mask), in double; 0 when nothing is masked in.
double sft_loss(const float *logprobs, const float *mask, size_t n);

// The model calls SFT makes, when they are not the loop's GemmaModel (a
// model on the GPU: cmd/train_cuda.c). Same contracts as gemma_forward_backward
// (log-probs out, gradients of sum(dlogprobs * logprobs) accumulated) and
// gemma_forward; tokens, targets, dlogprobs and logprobs are host arrays.
typedef struct SftModelOps {
  int (*forward_backward)(void *ctx, const int *tokens, const int *targets, int B, int T, const float *dlogprobs,
                          float *logprobs, FimiError *err);
  int (*forward)(void *ctx, const int *tokens, const int *targets, int B, int T, float *logprobs, FimiError *err);
  void *ctx;
} SftModelOps;

typedef struct SftObjective {
  int pad_id;
  int max_len;
  SftBatch batch;
  const SftModelOps *ops;  // NULL: the loop's GemmaModel
} SftObjective;

// pad_id: the model's pad token (any valid id: padding is never scored).
void sft_objective_init(SftObjective *sft, const GemmaConfig *config, TrainObjective *out);
void sft_objective_free(SftObjective *sft);
// Runs the model through ops (borrowed) from now on (after sft_objective_init).
void sft_objective_set_model_ops(SftObjective *sft, const SftModelOps *ops);

#endif
