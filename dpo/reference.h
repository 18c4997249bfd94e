// dpo/reference.h: the DPO reference pass (docs/dpo.md). Defines
// dpo_reference_compute (the frozen model's summed response log-probs of
// every pair of a dataset, forward only) and dpo_reference_ensure (adds them
// to a dataset file as ref_logp_chosen / ref_logp_rejected when missing).
//
// Precomputing once before training means no second model in memory during
// training (the paper's setup); the values are the initial policy's, so the
// rewards start at 0 (up to float32 storage and batching round-off).
#ifndef FIMI_DPO_REFERENCE_H
#define FIMI_DPO_REFERENCE_H

#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "model/gemma.h"

// chosen[i], rejected[i] (ds->rows each) = sums over the response tokens of
// pair i of the model's log-probs, micro_batch pairs per forward.
int dpo_reference_compute(GemmaModel *model, const Dataset *ds, int64_t micro_batch, float *chosen, float *rejected,
                          FimiError *err);

// Opens path (a DPO dataset); when it lacks ref_logp_chosen or
// ref_logp_rejected, computes both with `model` and writes them into the
// file (atomically, dataset_write_ref_logp). *computed = 1 when it did.
int dpo_reference_ensure(GemmaModel *model, const char *path, int64_t micro_batch, int *computed, FimiError *err);

#endif
