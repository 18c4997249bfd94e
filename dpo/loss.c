// dpo/loss.c: DPO losses, gradients and metrics (see loss.h, docs/dpo.md).
// Every quantity follows TRL's _compute_loss step by step:
//   chosen_logratios   = policy_chosen - ref_chosen
//   rejected_logratios = policy_rejected - ref_rejected
//   delta              = chosen_logratios - rejected_logratios
#include <math.h>
#include <string.h>

#include "dpo/loss.h"

static const char *loss_names[] = {"sigmoid", "ipo", "hinge"};

int dpo_loss_type_parse(const char *name, DpoLossType *out, FimiError *err) {
  for (int k = 0; k < 3; k++)
    if (name && strcmp(name, loss_names[k]) == 0) {
      *out = (DpoLossType)k;
      return 0;
    }
  return fimi_fail(err, "unknown dpo.loss_type '%s' (expected sigmoid, ipo or hinge)", name ? name : "(null)");
}

const char *dpo_loss_type_name(DpoLossType type) { return type >= 0 && type < 3 ? loss_names[type] : "unknown"; }

void dpo_config_default(DpoConfig *config) {
  config->loss_type = DPO_LOSS_SIGMOID;
  config->beta = 0.1;
  config->rpo_alpha = 0.0;
}

int dpo_config_validate(const DpoConfig *config, FimiError *err) {
  if (config->loss_type < DPO_LOSS_SIGMOID || config->loss_type > DPO_LOSS_HINGE)
    return fimi_fail(err, "dpo.loss_type: unknown value %d", (int)config->loss_type);
  if (!isfinite(config->beta) || !(config->beta > 0))
    return fimi_fail(err, "dpo.beta must be finite and > 0, got %g", config->beta);
  if (!isfinite(config->rpo_alpha) || config->rpo_alpha < 0)
    return fimi_fail(err, "dpo.rpo_alpha must be finite and >= 0, got %g", config->rpo_alpha);
  return 0;
}

// -log sigmoid(x) = softplus(-x) and its derivative -sigmoid(-x), without
// overflow: exp() only ever sees a non-positive argument.
static double neg_log_sigmoid(double x) { return x >= 0 ? log1p(exp(-x)) : -x + log1p(exp(x)); }
static double sigmoid_of_neg(double x) {  // sigmoid(-x)
  if (x >= 0) {
    double e = exp(-x);
    return e / (1.0 + e);
  }
  return 1.0 / (1.0 + exp(x));
}

static int check_pair(const DpoPair *p, FimiError *err) {
  const char *names[4] = {"policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected"};
  double values[4] = {p->policy_chosen, p->policy_rejected, p->ref_chosen, p->ref_rejected};
  for (int k = 0; k < 4; k++)
    if (!isfinite(values[k])) return fimi_fail(err, "dpo pair: %s log-prob is %g (not finite)", names[k], values[k]);
  if (p->chosen_tokens < 0 || p->rejected_tokens < 0)
    return fimi_fail(err, "dpo pair: negative response length (chosen %ld, rejected %ld)", p->chosen_tokens,
                     p->rejected_tokens);
  return 0;
}

int dpo_pair_loss(const DpoConfig *config, const DpoPair *pair, DpoPairResult *out, FimiError *err) {
  if (check_pair(pair, err) != 0) return -1;
  double beta = config->beta;
  double chosen_logratio = pair->policy_chosen - pair->ref_chosen;
  double rejected_logratio = pair->policy_rejected - pair->ref_rejected;
  double delta = chosen_logratio - rejected_logratio;
  // d delta / d policy_chosen = 1, d delta / d policy_rejected = -1, except
  // IPO's per-token scores (1 / length each).
  double dloss_ddelta;
  switch (config->loss_type) {
    case DPO_LOSS_SIGMOID:
      out->loss = neg_log_sigmoid(beta * delta);
      dloss_ddelta = -beta * sigmoid_of_neg(beta * delta);
      out->dpolicy_chosen = dloss_ddelta;
      out->dpolicy_rejected = -dloss_ddelta;
      break;
    case DPO_LOSS_HINGE: {
      double h = 1.0 - beta * delta;
      out->loss = h > 0 ? h : 0.0;
      dloss_ddelta = h > 0 ? -beta : 0.0;  // torch's relu has gradient 0 at 0
      out->dpolicy_chosen = dloss_ddelta;
      out->dpolicy_rejected = -dloss_ddelta;
      break;
    }
    case DPO_LOSS_IPO: {
      double lc = (double)(pair->chosen_tokens > 1 ? pair->chosen_tokens : 1);
      double lr = (double)(pair->rejected_tokens > 1 ? pair->rejected_tokens : 1);
      double ipo_delta = chosen_logratio / lc - rejected_logratio / lr;
      double d = ipo_delta - 1.0 / (2.0 * beta);
      out->loss = d * d;
      out->dpolicy_chosen = 2.0 * d / lc;
      out->dpolicy_rejected = -2.0 * d / lr;
      break;
    }
    default:
      return fimi_fail(err, "dpo: unknown loss type %d", (int)config->loss_type);
  }
  out->reward_chosen = beta * chosen_logratio;
  out->reward_rejected = beta * rejected_logratio;
  // RPO (TRL's rpo_alpha): + alpha * NLL of the chosen tokens, token-mean
  // over the micro-batch; this pair's share is nll_weight * -policy_chosen.
  out->nll = 0;
  if (config->rpo_alpha > 0) {
    if (!isfinite(pair->nll_weight) || pair->nll_weight < 0)
      return fimi_fail(err, "dpo pair: nll_weight is %g", pair->nll_weight);
    out->nll = -pair->nll_weight * pair->policy_chosen;
    out->loss += config->rpo_alpha * out->nll;
    out->dpolicy_chosen -= config->rpo_alpha * pair->nll_weight;
  }
  return 0;
}

void dpo_sums_clear(DpoSums *sums) { memset(sums, 0, sizeof *sums); }

void dpo_sums_add(DpoSums *sums, const DpoPair *pair, const DpoPairResult *r) {
  sums->v[DPO_SUM_LOSS] += r->loss;
  sums->v[DPO_SUM_REWARD_CHOSEN] += r->reward_chosen;
  sums->v[DPO_SUM_REWARD_REJECTED] += r->reward_rejected;
  sums->v[DPO_SUM_MARGIN] += r->reward_chosen - r->reward_rejected;
  sums->v[DPO_SUM_ACCURACY] += r->reward_chosen > r->reward_rejected ? 1.0 : 0.0;
  sums->v[DPO_SUM_LOGP_CHOSEN] += pair->policy_chosen;
  sums->v[DPO_SUM_LOGP_REJECTED] += pair->policy_rejected;
  sums->v[DPO_SUM_PAIRS] += 1.0;
  sums->v[DPO_SUM_NLL] += r->nll;
}

int dpo_batch_loss(const DpoConfig *config, const DpoPair *pairs, int count, double grad_scale, double *dchosen,
                   double *drejected, DpoSums *sums, FimiError *err) {
  if (dpo_config_validate(config, err) != 0) return -1;
  if (count < 0 || (count > 0 && (!pairs || !dchosen || !drejected)))
    return fimi_fail(err, "dpo batch: bad arguments (%d pairs)", count);
  if (!isfinite(grad_scale)) return fimi_fail(err, "dpo batch: gradient scale %g is not finite", grad_scale);
  DpoSums local;
  dpo_sums_clear(&local);
  for (int i = 0; i < count; i++) {
    DpoPairResult r;
    if (dpo_pair_loss(config, &pairs[i], &r, err) != 0) return fimi_fail_wrap(err, "dpo batch pair %d", i);
    dchosen[i] = grad_scale * r.dpolicy_chosen;
    drejected[i] = grad_scale * r.dpolicy_rejected;
    dpo_sums_add(&local, &pairs[i], &r);
  }
  for (int k = 0; k < DPO_SUM_COUNT; k++) sums->v[k] += local.v[k];
  return 0;
}

int dpo_metrics_from_sums(const DpoSums *sums, DpoMetrics *out, FimiError *err) {
  double n = sums->v[DPO_SUM_PAIRS];
  if (!(n >= 1)) return fimi_fail(err, "dpo metrics: no pairs in the step (%g)", n);
  memset(out, 0, sizeof *out);
  out->loss = sums->v[DPO_SUM_LOSS] / n;
  out->rewards_chosen = sums->v[DPO_SUM_REWARD_CHOSEN] / n;
  out->rewards_rejected = sums->v[DPO_SUM_REWARD_REJECTED] / n;
  out->rewards_margins = sums->v[DPO_SUM_MARGIN] / n;
  out->rewards_accuracies = sums->v[DPO_SUM_ACCURACY] / n;
  out->logps_chosen = sums->v[DPO_SUM_LOGP_CHOSEN] / n;
  out->logps_rejected = sums->v[DPO_SUM_LOGP_REJECTED] / n;
  out->nll_loss = sums->v[DPO_SUM_NLL] / n;
  out->pairs = (long)n;
  return 0;
}

void dpo_baseline_apply(DpoBaseline *baseline, DpoMetrics *m) {
  if (!baseline->set) {
    baseline->set = 1;
    baseline->rewards_chosen = m->rewards_chosen;
    baseline->rewards_rejected = m->rewards_rejected;
  }
  m->chosen_change = m->rewards_chosen - baseline->rewards_chosen;
  m->rejected_change = m->rewards_rejected - baseline->rewards_rejected;
}
