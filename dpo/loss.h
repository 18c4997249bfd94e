// dpo/loss.h: the DPO losses on summed response log-probs, their gradients
// and the per-step metrics, as TRL's DPOTrainer defines them
// (trl/trainer/dpo_trainer.py, _compute_loss; formulas in docs/dpo.md).
// Defines DpoLossType (sigmoid, ipo, hinge), DpoConfig (beta, and TRL's
// rpo_alpha: an NLL term on the chosen responses), DpoPair (one pair's four summed
// log-probs and response lengths), dpo_pair_loss (loss, d loss / d the policy
// sums, rewards), DpoSums (additive per-step sums that ranks all-reduce),
// DpoMetrics (the logged means) and DpoBaseline (the change since step 0).
//
// No model code: the model's forward gives per-token log-probs, the caller sums
// them over each response's loss-masked tokens, and the gradient returned here,
// d loss / d (summed log-prob), is the dlogprobs of every masked token of that
// response (a sum's derivative w.r.t. each term is 1).
#ifndef FIMI_DPO_LOSS_H
#define FIMI_DPO_LOSS_H

#include "core/error.h"

typedef enum {
  DPO_LOSS_SIGMOID = 0,  // -log sigmoid(beta * delta)                (default; the paper's Eq. 2)
  DPO_LOSS_IPO = 1,      // (delta_per_token - 1 / (2 beta))^2          (TRL: scores divided by response length)
  DPO_LOSS_HINGE = 2,    // max(0, 1 - beta * delta)
} DpoLossType;

// "sigmoid", "ipo", "hinge" (TRL's loss_type names).
int dpo_loss_type_parse(const char *name, DpoLossType *out, FimiError *err);
const char *dpo_loss_type_name(DpoLossType type);

typedef struct DpoConfig {
  DpoLossType loss_type;
  double beta;       // > 0; default 0.1
  double rpo_alpha;  // >= 0; default 0 (off). TRL's rpo_alpha: every pair's loss gains
                     // rpo_alpha * the micro-batch's mean NLL over its chosen tokens
} DpoConfig;

void dpo_config_default(DpoConfig *config);
int dpo_config_validate(const DpoConfig *config, FimiError *err);

// One preference pair: log-probs summed over the response tokens (the loss
// mask), under the policy being trained and the frozen reference.
typedef struct DpoPair {
  double policy_chosen, policy_rejected;
  double ref_chosen, ref_rejected;
  long chosen_tokens, rejected_tokens;  // response lengths (IPO's normalisation; TRL clamps at >= 1)
  // The RPO term's weight of this pair's chosen log-prob: pairs / chosen
  // tokens of its whole micro-batch (so the pairs' mean of the term is the
  // micro-batch's token-mean NLL, as TRL computes it). Unused when rpo_alpha = 0.
  double nll_weight;
} DpoPair;

typedef struct DpoPairResult {
  double loss;
  double dpolicy_chosen;    // d loss / d policy_chosen
  double dpolicy_rejected;  // d loss / d policy_rejected
  double reward_chosen;     // beta * (policy_chosen - ref_chosen)
  double reward_rejected;   // beta * (policy_rejected - ref_rejected)
  double nll;               // -nll_weight * policy_chosen (0 when rpo_alpha = 0); loss includes rpo_alpha * nll
} DpoPairResult;

// One pair's loss and gradient. Numerically stable for any finite margin
// (sigmoid uses softplus in the form that never exponentiates a positive
// number). Fails, naming the field, on a non-finite input or negative token
// count, so that the training loop can skip the step.
int dpo_pair_loss(const DpoConfig *config, const DpoPair *pair, DpoPairResult *out, FimiError *err);

// Additive per-step sums: each rank adds its pairs, the ranks all-reduce
// v[0..DPO_SUM_COUNT) (MPI_SUM on doubles), then dpo_metrics_from_sums.
enum {
  DPO_SUM_LOSS = 0,
  DPO_SUM_REWARD_CHOSEN,
  DPO_SUM_REWARD_REJECTED,
  DPO_SUM_MARGIN,
  DPO_SUM_ACCURACY,  // pairs with reward_chosen > reward_rejected (strictly, as TRL)
  DPO_SUM_LOGP_CHOSEN,
  DPO_SUM_LOGP_REJECTED,
  DPO_SUM_PAIRS,
  DPO_SUM_NLL,  // the RPO term before rpo_alpha
  DPO_SUM_COUNT
};
typedef struct DpoSums {
  double v[DPO_SUM_COUNT];
} DpoSums;

void dpo_sums_clear(DpoSums *sums);
void dpo_sums_add(DpoSums *sums, const DpoPair *pair, const DpoPairResult *result);

// A batch on one rank: for each pair i, the loss gradient scaled by
// `grad_scale` (1 / global number of pairs for TRL's mean over the batch)
// into dchosen[i], drejected[i]; the pairs' sums added to *sums. Fails on the
// first invalid pair (its index in the message), leaving *sums unchanged.
int dpo_batch_loss(const DpoConfig *config, const DpoPair *pairs, int count, double grad_scale, double *dchosen,
                   double *drejected, DpoSums *sums, FimiError *err);

// The logged metrics, TRL's names in comments. chosen_change and
// rejected_change are rewards/chosen and rewards/rejected minus their values
// at step 0 (see DpoBaseline); they are 0 until a baseline is set.
typedef struct DpoMetrics {
  double loss;                // loss (mean over pairs)
  double rewards_chosen;      // rewards/chosen
  double rewards_rejected;    // rewards/rejected
  double rewards_margins;     // rewards/margins
  double rewards_accuracies;  // rewards/accuracies
  double logps_chosen;        // logps/chosen
  double logps_rejected;      // logps/rejected
  double nll_loss;            // nll_loss (the chosen side's token-mean NLL; 0 without rpo_alpha)
  double chosen_change;       // rewards/chosen - its step-0 value
  double rejected_change;     // rewards/rejected - its step-0 value
  long pairs;
} DpoMetrics;

int dpo_metrics_from_sums(const DpoSums *sums, DpoMetrics *out, FimiError *err);

// The step-0 values the changes are measured from. With the reference equal
// to the initial policy both rewards are 0 at step 0, so the changes equal the
// rewards; with a different reference (or precomputed log-probs of another
// model) they differ, and the change is what says which side moved.
typedef struct DpoBaseline {
  int set;
  double rewards_chosen, rewards_rejected;
} DpoBaseline;

// The first call records the baseline; every call fills the two changes.
void dpo_baseline_apply(DpoBaseline *baseline, DpoMetrics *metrics);

#endif
