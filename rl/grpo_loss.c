// rl/grpo_loss.c: GRPO's group advantages and its clipped policy loss with the
// k3 KL penalty, with d loss / d logp (formulas in grpo_loss.h, docs/grpo.md).
// Everything is computed in double from the float inputs; only dlogp is
// rounded to float. Both entry points validate every input they will read
// before writing any output: on error adv, dlogp and the stats are untouched.
#include <float.h>
#include <math.h>
#include <string.h>

#include "rl/grpo_loss.h"

// ----------------------------------------------------------------------------
// Advantages

static int all_equal(const double *r, int G) {
  for (int i = 1; i < G; i++)
    if (r[i] != r[0]) return 0;
  return 1;
}

// Mean and standard deviation of n values, two-pass. unbiased: divide by
// n - 1 as torch.std and TRL do for a group; else by n (a batch summary).
static void moments(const double *r, long n, int unbiased, double *mean, double *std) {
  double sum = 0, ss = 0;
  for (long i = 0; i < n; i++) sum += r[i];
  *mean = sum / (double)n;
  for (long i = 0; i < n; i++) ss += (r[i] - *mean) * (r[i] - *mean);
  *std = sqrt(ss / (double)(unbiased ? n - 1 : n));
}

static int check_advantage_args(const double *rewards, int groups, int G, double eps, double pass_threshold,
                                const double *adv, FimiError *err) {
  if (groups < 1) return fimi_fail(err, "grpo advantages: %d groups (need at least 1)", groups);
  if (G < 2) return fimi_fail(err, "grpo advantages: group size %d (need at least 2 rollouts per group)", G);
  if (!rewards || !adv) return fimi_fail(err, "grpo advantages: NULL rewards or advantages");
  if (!isfinite(eps) || eps < 0) return fimi_fail(err, "grpo advantages: eps must be finite and >= 0, got %g", eps);
  if (isnan(pass_threshold)) return fimi_fail(err, "grpo advantages: pass threshold is NaN");
  long n = (long)groups * G;
  for (long k = 0; k < n; k++)
    if (!isfinite(rewards[k]))
      return fimi_fail(err, "grpo advantages: reward of rollout %ld (group %ld, member %ld) is %g (not finite)", k,
                       k / G, k % G, rewards[k]);
  // Finite rewards near DBL_MAX can still overflow a sum of squares.
  double mean, std;
  for (int g = 0; g < groups; g++) {
    moments(rewards + (long)g * G, G, 1, &mean, &std);
    if (!isfinite(mean) || !isfinite(std))
      return fimi_fail(err, "grpo advantages: rewards of group %d are too large (mean %g, std %g)", g, mean, std);
  }
  moments(rewards, n, 0, &mean, &std);
  if (!isfinite(mean) || !isfinite(std))
    return fimi_fail(err, "grpo advantages: rewards are too large (mean %g, std %g)", mean, std);
  return 0;
}

// Writes a group's advantages into a; returns 1 if the group carries no signal.
static int group_advantages(const double *r, int G, int scale_by_std, double eps, double *a) {
  // Exactly equal rewards give exactly 0 (not rounding noise of the mean),
  // and no 0 / 0 when eps is 0.
  if (all_equal(r, G)) {
    for (int i = 0; i < G; i++) a[i] = 0.0;
    return 1;
  }
  double mean, std;
  moments(r, G, 1, &mean, &std);
  for (int i = 0; i < G; i++) a[i] = scale_by_std ? (r[i] - mean) / (std + eps) : r[i] - mean;
  return 0;
}

int grpo_advantages(const double *rewards, int groups, int G, int scale_by_std, double eps, double pass_threshold,
                    double *adv, GrpoGroupStats *stats, FimiError *err) {
  // All checks come first: on error adv and *stats are untouched.
  if (check_advantage_args(rewards, groups, G, eps, pass_threshold, adv, err) != 0) return -1;
  GrpoGroupStats s = {.groups = groups};
  for (int g = 0; g < groups; g++) {
    const double *r = rewards + (long)g * G;
    s.zero_variance += group_advantages(r, G, scale_by_std, eps, adv + (long)g * G);
    int passed = 0;
    for (int i = 0; i < G; i++) passed += r[i] >= pass_threshold;
    s.all_fail += passed == 0;
    s.all_pass += passed == G;
  }
  // Population std: it describes this batch of rewards, it estimates nothing.
  moments(rewards, (long)groups * G, 0, &s.reward_mean, &s.reward_std);
  if (stats) *stats = s;  // stats may be NULL: the advantages alone
  return 0;
}

// ----------------------------------------------------------------------------
// Configuration

static const char *aggregation_names[] = {"token_mean", "seq_mean_token_mean", "seq_mean_token_sum"};

const char *grpo_aggregation_name(GrpoAggregation agg) {
  return agg >= GRPO_AGG_TOKEN_MEAN && agg <= GRPO_AGG_SEQ_MEAN_TOKEN_SUM ? aggregation_names[agg] : NULL;
}

int grpo_aggregation_parse(const char *name, GrpoAggregation *out, FimiError *err) {
  for (int k = 0; k < 3; k++)
    if (name && strcmp(name, aggregation_names[k]) == 0) {
      *out = (GrpoAggregation)k;
      return 0;
    }
  return fimi_fail(err,
                   "unknown grpo.loss_aggregation '%s' (expected token_mean, seq_mean_token_mean or "
                   "seq_mean_token_sum)",
                   name ? name : "(null)");
}

void grpo_loss_config_default(GrpoLossConfig *c) {
  c->clip_low = 0.2;
  c->clip_high = 0.2;
  c->kl_coef = 0.0;
  c->aggregation = GRPO_AGG_TOKEN_MEAN;
}

int grpo_loss_config_validate(const GrpoLossConfig *c, FimiError *err) {
  // clip_low < 1 keeps the lower bound 1 - clip_low positive: a ratio is never <= 0.
  if (!isfinite(c->clip_low) || c->clip_low < 0 || c->clip_low >= 1)
    return fimi_fail(err, "grpo.clip_low must be in [0, 1), got %g", c->clip_low);
  if (!isfinite(c->clip_high) || c->clip_high < 0)
    return fimi_fail(err, "grpo.clip_high must be finite and >= 0, got %g", c->clip_high);
  if (!isfinite(c->kl_coef) || c->kl_coef < 0)
    return fimi_fail(err, "grpo.kl_coef must be finite and >= 0, got %g", c->kl_coef);
  if (!grpo_aggregation_name(c->aggregation))
    return fimi_fail(err, "grpo.loss_aggregation: unknown value %d", (int)c->aggregation);
  return 0;
}

// ----------------------------------------------------------------------------
// The loss

// One policy token's loss term and its derivative w.r.t. logp.
typedef struct TokenTerm {
  double loss, grad;
  double ratio, k3;
  int clipped;
} TokenTerm;

static TokenTerm token_term(const GrpoLossConfig *c, double logp, double old_logp, double ref_logp, double A) {
  TokenTerm t;
  t.ratio = exp(logp - old_logp);
  // The clipped branch is the strict minimum exactly when the ratio has left
  // the range in the direction the advantage pushes it. Deciding by these
  // signs, not by comparing r*A with clip(r)*A, keeps rounding from picking
  // the wrong branch when A is tiny. Inside the range (boundaries included)
  // both branches agree and the unclipped one carries the gradient.
  double low = 1.0 - c->clip_low, high = 1.0 + c->clip_high;
  t.clipped = (A > 0 && t.ratio > high) || (A < 0 && t.ratio < low);
  if (t.clipped) {
    t.loss = -(A > 0 ? high : low) * A;
    t.grad = 0.0;  // the clipped ratio is a constant
  } else {
    t.loss = -t.ratio * A;
    t.grad = -A * t.ratio;  // d r / d logp = r
  }
  t.k3 = 0.0;
  if (c->kl_coef > 0) {
    // k3 = e^x - x - 1 with x = ref - logp; expm1 keeps it accurate near 0,
    // where the policy is close to the reference and k3 ~ x^2 / 2.
    double x = ref_logp - logp;
    t.k3 = expm1(x) - x;
    t.loss += c->kl_coef * t.k3;
    t.grad += c->kl_coef * -expm1(x);  // d k3 / d logp = 1 - e^x
  }
  return t;
}

static int check_loss_args(const GrpoLossConfig *c, const float *logp, const float *old_logp, const float *ref_logp,
                           const float *mask, const double *adv, int B, int T, double total_tokens, double total_seqs,
                           const float *dlogp, const GrpoLossStats *stats, FimiError *err) {
  if (!c) return fimi_fail(err, "grpo loss: NULL config");
  if (grpo_loss_config_validate(c, err) != 0) return -1;
  if (B < 0 || T < 0) return fimi_fail(err, "grpo loss: bad shape (%d rows, %d positions)", B, T);
  if (!stats) return fimi_fail(err, "grpo loss: NULL stats");
  if ((long)B * T > 0 && (!logp || !old_logp || !mask || !dlogp))
    return fimi_fail(err, "grpo loss: NULL logp, old_logp, mask or dlogp");
  if (B > 0 && !adv) return fimi_fail(err, "grpo loss: NULL advantages");
  if ((long)B * T > 0 && c->kl_coef > 0 && !ref_logp)
    return fimi_fail(err, "grpo loss: grpo.kl_coef is %g but no reference log-probs were given", c->kl_coef);
  if (!isfinite(total_tokens) || !(total_tokens > 0))
    return fimi_fail(err, "grpo loss: total_tokens must be finite and > 0, got %g", total_tokens);
  if (!isfinite(total_seqs) || !(total_seqs > 0))
    return fimi_fail(err, "grpo loss: total_seqs must be finite and > 0, got %g", total_seqs);
  return 0;
}

// Row i's policy-token count n_i, after checking its mask is 0/1 and its
// masked tokens (and its advantage, if it has any) are finite and give a
// finite loss term. Unmasked positions are never read beyond the mask.
static int check_row(const GrpoLossConfig *c, const float *logp, const float *old_logp, const float *ref_logp,
                     const float *mask, double A, int i, int T, double *n_out, FimiError *err) {
  double n = 0;
  for (int t = 0; t < T; t++) {
    float m = mask[t];
    if (m == 0.0f) continue;
    if (m != 1.0f) return fimi_fail(err, "grpo loss: mask at row %d position %d is %g (expected 0 or 1)", i, t, m);
    if (n == 0 && !isfinite(A)) return fimi_fail(err, "grpo loss: advantage of row %d is %g (not finite)", i, A);
    n += 1;
    if (!isfinite(logp[t])) return fimi_fail(err, "grpo loss: logp at row %d position %d is %g", i, t, logp[t]);
    if (!isfinite(old_logp[t]))
      return fimi_fail(err, "grpo loss: old_logp at row %d position %d is %g", i, t, old_logp[t]);
    double ref = 0.0;
    if (c->kl_coef > 0) {
      if (!isfinite(ref_logp[t]))
        return fimi_fail(err, "grpo loss: ref_logp at row %d position %d is %g", i, t, ref_logp[t]);
      ref = ref_logp[t];
    }
    TokenTerm tt = token_term(c, logp[t], old_logp[t], ref, A);
    // Finite float inputs can still overflow exp(): logp - old_logp > ~88
    // makes dlogp too large for a float even before the aggregation weight.
    if (!isfinite(tt.loss) || !isfinite(tt.grad) || fabs(tt.grad) > FLT_MAX)
      return fimi_fail(err, "grpo loss: row %d position %d: loss term overflows (ratio %g, k3 %g)", i, t, tt.ratio,
                       tt.k3);
  }
  *n_out = n;
  return 0;
}

// The weight of row i's token sum in the step loss (see grpo_loss.h).
static double row_weight(GrpoAggregation agg, double n_i, double total_tokens, double total_seqs) {
  switch (agg) {
    case GRPO_AGG_TOKEN_MEAN:
      return 1.0 / total_tokens;
    case GRPO_AGG_SEQ_MEAN_TOKEN_MEAN:
      return n_i > 0 ? 1.0 / (total_seqs * n_i) : 0.0;
    case GRPO_AGG_SEQ_MEAN_TOKEN_SUM:
      return 1.0 / total_seqs;
  }
  return 0.0;
}

// Writes row i's dlogp and adds its sums to *s. Inputs already checked.
static void row_loss(const GrpoLossConfig *c, const float *logp, const float *old_logp, const float *ref_logp,
                     const float *mask, double A, int T, double weight, float *dlogp, GrpoLossStats *s) {
  double loss_sum = 0;
  for (int t = 0; t < T; t++) {
    if (mask[t] == 0.0f) {
      dlogp[t] = 0.0f;
      continue;
    }
    TokenTerm tt = token_term(c, logp[t], old_logp[t], c->kl_coef > 0 ? ref_logp[t] : 0.0, A);
    dlogp[t] = (float)(weight * tt.grad);
    loss_sum += tt.loss;
    s->tokens += 1;
    s->clipped += tt.clipped;
    s->ratio_sum += tt.ratio;
    s->kl_sum += tt.k3;
  }
  s->loss += weight * loss_sum;
}

int grpo_loss(const GrpoLossConfig *c, const float *logp, const float *old_logp, const float *ref_logp,
              const float *mask, const double *adv, int B, int T, double total_tokens, double total_seqs, float *dlogp,
              GrpoLossStats *stats, FimiError *err) {
  if (check_loss_args(c, logp, old_logp, ref_logp, mask, adv, B, T, total_tokens, total_seqs, dlogp, stats, err))
    return -1;
  // Pass 1: validate everything, so that an error leaves dlogp and *stats
  // as they were (the caller can report it without a half-written batch).
  double tokens = 0, seqs = 0;
  for (int i = 0; i < B; i++) {
    long o = (long)i * T;
    double n_i = 0;
    if (check_row(c, logp + o, old_logp + o, ref_logp ? ref_logp + o : NULL, mask + o, adv[i], i, T, &n_i, err))
      return -1;
    tokens += n_i;
    seqs += n_i > 0;
  }
  // The step totals cover this micro-batch: fewer means they were not summed
  // over the step (or the arguments were swapped).
  if (tokens > total_tokens)
    return fimi_fail(err, "grpo loss: %g policy tokens in this call but total_tokens is %g", tokens, total_tokens);
  if (seqs > total_seqs)
    return fimi_fail(err, "grpo loss: %g rollouts with policy tokens in this call but total_seqs is %g", seqs,
                     total_seqs);
  // Pass 2: the loss and its gradient.
  GrpoLossStats local = {0};
  for (int i = 0; i < B; i++) {
    long o = (long)i * T;
    double n_i = 0;
    for (int t = 0; t < T; t++) n_i += mask[o + t] != 0.0f;
    double w = row_weight(c->aggregation, n_i, total_tokens, total_seqs);
    row_loss(c, logp + o, old_logp + o, ref_logp ? ref_logp + o : NULL, mask + o, adv[i], T, w, dlogp + o, &local);
  }
  stats->loss += local.loss;
  stats->tokens += local.tokens;
  stats->clipped += local.clipped;
  stats->ratio_sum += local.ratio_sum;
  stats->kl_sum += local.kl_sum;
  return 0;
}
