// rl/grpo_loss.h: GRPO's group advantages and its clipped policy loss with
// an optional k3 KL penalty, with gradients (docs/grpo.md has every formula).
// Defines GrpoGroupStats and grpo_advantages, GrpoAggregation, GrpoLossConfig,
// GrpoLossStats and grpo_loss. Pure math on host arrays: no model, no MPI.
//
// Advantages (FiMI paper Eq. 5; TRL's GRPOTrainer): for group g of G
// rollouts, A_i = (R_i - mean_g) / (std_g + eps) with the unbiased (n - 1)
// standard deviation as torch.std and TRL; scale_by_std = 0 gives
// A_i = R_i - mean_g (Dr. GRPO). A group whose rewards are all equal has
// A = 0 for every rollout: no gradient (counted as zero_variance).
//
// Per policy token t of rollout i (mask 1), with r = exp(logp - old_logp):
//   l_t = -min(r A_i, clip(r, 1 - clip_low, 1 + clip_high) A_i) + kl_coef * k3
//   k3  = exp(ref - logp) - (ref - logp) - 1          (Schulman's k3 estimator)
// aggregated over the step (all micro-batches of one optimizer step):
//   token_mean:           sum_{i,t} l_t / total_tokens
//   seq_mean_token_mean:  (1 / total_seqs) sum_i (1 / n_i) sum_t l_t
//   seq_mean_token_sum:   (1 / total_seqs) sum_i sum_t l_t   (Dr. GRPO)
// where total_tokens and total_seqs count the whole step's policy tokens and
// rollouts, so summing grpo_loss over a step's micro-batches gives the step
// loss whatever the micro-batching.
#ifndef FIMI_RL_GRPO_LOSS_H
#define FIMI_RL_GRPO_LOSS_H

#include <stdint.h>

#include "core/error.h"

typedef struct GrpoGroupStats {
  int groups;
  int zero_variance;  // groups whose rewards are all equal (no gradient)
  int all_fail;       // groups where no rollout reaches pass_threshold
  int all_pass;       // groups where every rollout reaches it
  double reward_mean, reward_std;  // over all rollouts (population std)
} GrpoGroupStats;

// rewards (groups * G): rollout i of group g at g * G + i; adv out (groups * G).
// G >= 2; eps >= 0; rewards must be finite (error names the rollout).
int grpo_advantages(const double *rewards, int groups, int G, int scale_by_std, double eps, double pass_threshold,
                    double *adv, GrpoGroupStats *stats, FimiError *err);

typedef enum {
  GRPO_AGG_TOKEN_MEAN = 0,
  GRPO_AGG_SEQ_MEAN_TOKEN_MEAN = 1,
  GRPO_AGG_SEQ_MEAN_TOKEN_SUM = 2,
} GrpoAggregation;

// "token_mean", "seq_mean_token_mean", "seq_mean_token_sum"; NULL if invalid.
const char *grpo_aggregation_name(GrpoAggregation agg);
int grpo_aggregation_parse(const char *name, GrpoAggregation *out, FimiError *err);

typedef struct GrpoLossConfig {
  double clip_low, clip_high;  // ratio clipped to [1 - clip_low, 1 + clip_high]
  double kl_coef;              // 0: no KL term (ref_logp may be NULL)
  GrpoAggregation aggregation;
} GrpoLossConfig;

// clip_low 0.2, clip_high 0.2, kl_coef 0, token_mean.
void grpo_loss_config_default(GrpoLossConfig *c);
// clip_low in [0, 1), clip_high >= 0, kl_coef >= 0, all finite.
int grpo_loss_config_validate(const GrpoLossConfig *c, FimiError *err);

// Sums over the tokens of one grpo_loss call (add them up over a step).
typedef struct GrpoLossStats {
  double loss;          // this call's share of the step loss (as aggregated)
  double tokens;        // policy tokens (mask 1)
  double clipped;       // tokens whose clipped branch was taken (zero gradient)
  double ratio_sum;     // sum of r
  double kl_sum;        // sum of k3 (0 when kl_coef is 0)
} GrpoLossStats;

// One micro-batch of B rows of T positions (whole rollouts: a row is never
// split across calls): logp, old_logp, ref_logp (NULL when kl_coef == 0) and
// mask (B, T) row-major, adv (B). Writes dlogp (B, T) = d step_loss / d logp
// (0 where mask is 0) and adds to *stats (not cleared). total_tokens and
// total_seqs > 0 (see the aggregations above). Non-finite inputs on masked
// tokens are an error naming the row and position.
int grpo_loss(const GrpoLossConfig *c, const float *logp, const float *old_logp, const float *ref_logp,
              const float *mask, const double *adv, int B, int T, double total_tokens, double total_seqs,
              float *dlogp, GrpoLossStats *stats, FimiError *err);

#endif
