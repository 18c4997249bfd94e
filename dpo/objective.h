// dpo/objective.h: the DPO objective for the shared training loop
// (train/loop.h, docs/dpo.md). Defines DpoBatch (a micro-batch of pairs as
// 2 * pairs right-padded rows: row 2i = prompt + chosen, row 2i + 1 =
// prompt + rejected, scored only on response tokens), dpo_batch_build,
// dpo_batch_sums (summed response log-probs per row), DpoObjective and
// dpo_objective_init (a TrainObjective plus a per-step metrics callback).
//
// Per micro-batch: forward the policy to per-token log-probs, sum them over
// each response's loss-masked tokens, take the reference sums (precomputed
// ref_logp_chosen / ref_logp_rejected in the dataset, or a forward of a
// frozen reference model), dpo_batch_loss gives d loss / d sum per response,
// which is the dlogprobs of each of that response's masked tokens; backward.
#ifndef FIMI_DPO_OBJECTIVE_H
#define FIMI_DPO_OBJECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "dpo/loss.h"
#include "dpo/monitor.h"
#include "train/objective.h"

struct cJSON;

typedef struct DpoBatch {
  int pairs;
  int B, T;          // B = 2 * pairs
  int *tokens;       // (B, T) inputs, pad_id on padding
  int *targets;      // (B, T) next token, -1 where not scored
  float *mask;       // (B, T) 1 on response tokens with loss_mask 1
  float *dlogprobs;  // (B, T)
  float *logprobs;   // (B, T) filled by the model
  double *sums;      // (B) summed masked log-probs per row
  long *lengths;     // (B) masked tokens per row
  int64_t tokens_real, loss_tokens;
  size_t capacity, row_capacity;
} DpoBatch;

// Fills b from rows of a DPO dataset (fields prompt, chosen, rejected).
// Each prompt + response must fit max_len input positions + 1.
int dpo_batch_build(DpoBatch *b, const Dataset *ds, const int64_t *rows, int64_t count, int pad_id, int max_len,
                    FimiError *err);
// b->sums[r] = sum over t of mask * logprobs of row r (in double).
void dpo_batch_sums(DpoBatch *b);
void dpo_batch_free(DpoBatch *b);

typedef enum { DPO_REFERENCE_PRECOMPUTED = 0, DPO_REFERENCE_MODEL = 1 } DpoReferenceKind;
// "precomputed" / "model".
int dpo_reference_kind_parse(const char *name, DpoReferenceKind *out, FimiError *err);

// The policy-model calls DPO makes, when they are not the loop's GemmaModel:
// a ZeRO-3 model across ranks (cmd/cmd_train.c) or a GPU. The micro-batch's
// pairs are then cut into units of `unit` pairs (parallel/zero3.h's units): unit
// u is forwarded and backwarded on rank u % world in one call (ranks left
// without a unit in the last round run unit 0 with zero gradients), and the
// loss sums are all-reduced.
typedef struct DpoModelOps {
  int (*forward)(void *ctx, const int *tokens, const int *targets, int B, int T, float *logprobs, FimiError *err);
  int (*backward)(void *ctx, const float *dlogprobs, FimiError *err);
  // Sums `count` doubles over the ranks, in a fixed order (collective).
  int (*all_reduce_sum)(void *ctx, double *data, int count, FimiError *err);
  void *ctx;
  int rank, world;
  int unit;  // pairs per call, >= 1
} DpoModelOps;

typedef struct DpoObjective {
  DpoConfig config;
  const DpoModelOps *ops;  // NULL: the loop's model, one process
  DpoMonitor monitor;
  DpoBaseline baseline;
  int pad_id, max_len;
  GemmaModel *reference;  // NULL: the datasets' ref_logp_chosen / ref_logp_rejected
  DpoBatch batch;
  DpoPair *pairs;
  double *dchosen, *drejected;
  size_t pair_capacity;
  DpoSums step_sums;  // this step's training pairs (cleared by the metrics callback)
  DpoSums eval_sums;  // the last evaluation's pairs (cleared by the metrics callback)
  DpoMetrics last;    // the last step's metrics (for tests and summaries)
  DpoMetrics last_eval;
  int have_eval;
} DpoObjective;

// reference: a frozen model (DPO_REFERENCE_MODEL), or NULL to read the
// precomputed sums from the datasets (dpo/reference.h writes them).
int dpo_objective_init(DpoObjective *dpo, const GemmaConfig *config, const DpoConfig *dpo_config,
                       const DpoMonitorConfig *monitor_config, GemmaModel *reference, TrainObjective *out,
                       FimiError *err);
void dpo_objective_free(DpoObjective *dpo);
// Runs the policy through ops (borrowed; see DpoModelOps) from now on.
void dpo_objective_set_model_ops(DpoObjective *dpo, const DpoModelOps *ops);

// The per-step metrics callback for TrainLoopConfig.step_metrics (ctx = the
// DpoObjective): adds rewards/..., logps/..., the changes since step 0 and,
// after an evaluation, eval_rewards/accuracies etc. to the step's JSON line;
// logs the divergence monitor's warnings.
int dpo_objective_step_metrics(void *ctx, int64_t step, struct cJSON *line, FimiError *err);
// TrainLoopConfig.objective_save / objective_load (ctx = the DpoObjective):
// the reward baseline of the *_change metrics, so that a resumed run logs
// the same changes as an uninterrupted one.
int dpo_objective_state_save(void *ctx, struct cJSON *state, FimiError *err);
int dpo_objective_state_load(void *ctx, const struct cJSON *state, FimiError *err);

#endif
