// train/batch.h: the per-position arrays every objective's batch holds
// (SftBatch, DpoBatch): defines train_batch_reserve, which grows them
// together so a batch never has arrays of different sizes.
#ifndef FIMI_TRAIN_BATCH_H
#define FIMI_TRAIN_BATCH_H

#include <stddef.h>

#include "core/error.h"

// Grows tokens, targets (int) and mask, dlogprobs, logprobs (float) to at
// least n elements each; *capacity is what they hold now. On failure the
// arrays keep their old size and contents (what names the batch in the error).
int train_batch_reserve(int **tokens, int **targets, float **mask, float **dlogprobs, float **logprobs,
                        size_t *capacity, size_t n, const char *what, FimiError *err);

#endif
