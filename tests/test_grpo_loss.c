// tests/test_grpo_loss.c: rl/grpo_loss. Group advantages against a plain
// float64 reference and hand-computed groups (zero variance, all-fail /
// all-pass, Dr. GRPO's unscaled mode, errors); each loss aggregation against
// a float64 reference of the header's formulas on random inputs (random
// masks, advantages of both signs, ratios inside and outside the clip range,
// with and without KL), the gradient against central differences of that
// reference, micro-batch splits summing to the whole step, the first update
// (ratio exactly 1), hand-made clipping cases (DAPO's clip-higher included),
// bad inputs naming row and position, and invalid configs naming the key.
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/rng.h"
#include "rl/grpo_loss.h"
#include "tests/test_util.h"

// ----------------------------------------------------------------------------
// Advantages

// The reference: mean, unbiased std and the normalisation, the obvious way.
// A group of equal rewards is given 0 directly (the formula gives 0 / eps).
static void reference_advantages(const double *r, int groups, int G, int scale, double eps, double *a) {
  for (int g = 0; g < groups; g++) {
    const double *x = r + g * G;
    double mean = 0, var = 0;
    int equal = 1;
    for (int i = 0; i < G; i++) mean += x[i], equal &= x[i] == x[0];
    mean /= G;
    for (int i = 0; i < G; i++) var += (x[i] - mean) * (x[i] - mean) / (G - 1);
    for (int i = 0; i < G; i++) a[g * G + i] = equal ? 0.0 : scale ? (x[i] - mean) / (sqrt(var) + eps) : x[i] - mean;
  }
}

static void test_advantages_vs_reference(void) {
  Rng rng;
  rng_seed(&rng, 21);
  FimiError err = {0};
  int sizes[5] = {2, 3, 4, 8, 16};
  double epss[3] = {0.0, 1e-4, 1e-2};
  double max_err = 0;
  int zero_var_seen = 0, all_fail_seen = 0, all_pass_seen = 0;
  for (int trial = 0; trial < 300; trial++) {
    int G = sizes[trial % 5], groups = 1 + (int)(rng_next_u64(&rng) % 6);
    int scale = (trial / 5) % 2;
    double eps = epss[(trial / 10) % 3];
    int discrete = (trial / 30) % 2;  // {0, 0.5, 1} rewards: equal groups are common
    double r[6 * 16], a[6 * 16], want[6 * 16];
    for (int k = 0; k < groups * G; k++)
      r[k] = discrete ? 0.5 * (double)(rng_next_u64(&rng) % 3) : 2.0 * rng_uniform_double(&rng) - 0.5;
    GrpoGroupStats s;
    if (grpo_advantages(r, groups, G, scale, eps, 0.75, a, &s, &err) != 0) {
      CHECK(0, "advantages: %s", err.message);
      continue;
    }
    reference_advantages(r, groups, G, scale, eps, want);
    max_err = fmax(max_err, max_rel_error(a, want, groups * G));
    int zv = 0, af = 0, ap = 0;
    double mean = 0, var = 0;
    for (int g = 0; g < groups; g++) {
      int pass = 0, equal = 1;
      for (int i = 0; i < G; i++) pass += r[g * G + i] >= 0.75, equal &= r[g * G + i] == r[g * G];
      zv += equal, af += pass == 0, ap += pass == G;
    }
    for (int k = 0; k < groups * G; k++) mean += r[k] / (groups * G);
    for (int k = 0; k < groups * G; k++) var += (r[k] - mean) * (r[k] - mean) / (groups * G);
    CHECK(s.groups == groups && s.zero_variance == zv && s.all_fail == af && s.all_pass == ap,
          "trial %d: counts groups %d zv %d/%d fail %d/%d pass %d/%d", trial, s.groups, s.zero_variance, zv, s.all_fail,
          af, s.all_pass, ap);
    CHECK_CLOSE(s.reward_mean, mean, 1e-13, "reward_mean");
    CHECK_CLOSE(s.reward_std, sqrt(var), 1e-13, "reward_std (population)");
    zero_var_seen += zv, all_fail_seen += af, all_pass_seen += ap;
  }
  printf(
      "advantages: 300 random batches: max rel err %.2e (tol 1e-13); %d zero-variance, %d all-fail, %d all-pass "
      "groups\n",
      max_err, zero_var_seen, all_fail_seen, all_pass_seen);
  CHECK(max_err <= 1e-13, "advantages vs float64 reference: %.3g", max_err);
  CHECK(zero_var_seen > 0 && all_fail_seen > 0 && all_pass_seen > 0, "the random batches cover every count");
}

static void test_advantages_by_hand(void) {
  FimiError err = {0};
  GrpoGroupStats s;
  // {1, 0, 0, 0}: mean 1/4, squared deviations 9/16 + 3/16 = 3/4, / (4 - 1)
  // = 1/4, std 1/2: A = 0.75 / 0.5 = 1.5 and -0.25 / 0.5 = -0.5, all exact.
  double r[8] = {1, 0, 0, 0, 1, 1, 1, 1}, a[8];
  CHECK(grpo_advantages(r, 2, 4, 1, 0.0, 1.0, a, &s, &err) == 0, "%s", err.message);
  CHECK(a[0] == 1.5 && a[1] == -0.5 && a[2] == -0.5 && a[3] == -0.5, "{1,0,0,0}: %g %g %g %g", a[0], a[1], a[2], a[3]);
  CHECK(a[4] == 0 && a[5] == 0 && a[6] == 0 && a[7] == 0, "{1,1,1,1} gives A = 0");
  CHECK(s.groups == 2 && s.zero_variance == 1 && s.all_pass == 1 && s.all_fail == 0, "counts %d %d %d %d", s.groups,
        s.zero_variance, s.all_pass, s.all_fail);
  // Over all 8: mean 5/8, population variance (5 (3/8)^2 + 3 (5/8)^2) / 8 = 15/64.
  CHECK(s.reward_mean == 0.625, "reward_mean %g", s.reward_mean);
  CHECK_CLOSE(s.reward_std, sqrt(15.0 / 64.0), 1e-15, "reward_std");
  // eps 1e-4 as TRL: 0.75 / 0.5001.
  CHECK(grpo_advantages(r, 1, 4, 1, 1e-4, 1.0, a, &s, &err) == 0, "%s", err.message);
  CHECK_CLOSE(a[0], 0.75 / 0.5001, 1e-15, "{1,0,0,0} with eps 1e-4");
  // Dr. GRPO: no division, A = R - mean.
  CHECK(grpo_advantages(r, 1, 4, 0, 1e-4, 1.0, a, &s, &err) == 0, "%s", err.message);
  CHECK(a[0] == 0.75 && a[1] == -0.25 && a[3] == -0.25, "Dr. GRPO {1,0,0,0}: %g %g", a[0], a[1]);
  // {2, 4}: mean 3, unbiased std sqrt(2) (a population std would be 1).
  double r2[2] = {2, 4}, a2[2];
  CHECK(grpo_advantages(r2, 1, 2, 1, 0.0, 3.0, a2, &s, &err) == 0, "%s", err.message);
  CHECK_CLOSE(a2[0], -1 / sqrt(2.0), 1e-15, "{2,4} A0");
  CHECK_CLOSE(a2[1], 1 / sqrt(2.0), 1e-15, "{2,4} A1");
  CHECK(s.all_fail == 0 && s.all_pass == 0 && s.zero_variance == 0, "{2,4} at threshold 3: mixed");
  // {0.1, 0.1, 0.1}: the computed mean is 0.10000000000000002, so the plain
  // formula would give -1.4e-13 at eps 1e-4 and NaN at eps 0; equal rewards
  // must give exactly 0.
  double r3[6] = {0.1, 0.1, 0.1, 0, 0, 0}, a3[6];
  for (int e = 0; e < 2; e++) {
    CHECK(grpo_advantages(r3, 2, 3, 1, e ? 1e-4 : 0.0, 0.5, a3, &s, &err) == 0, "%s", err.message);
    int zero = 1;
    for (int k = 0; k < 6; k++) zero &= a3[k] == 0.0 && !signbit(a3[k]);
    CHECK(zero, "equal rewards (eps %g): A = %g, not exactly 0", e ? 1e-4 : 0.0, a3[0]);
    CHECK(s.zero_variance == 2 && s.all_fail == 2 && s.all_pass == 0, "two all-fail zero-variance groups");
  }
  // Nearly equal rewards are not zero-variance: the group has a signal.
  double r4[2] = {0.7, 0.7 + 1e-12}, a4[2];
  CHECK(grpo_advantages(r4, 1, 2, 1, 0.0, 0.7, a4, &s, &err) == 0 && s.zero_variance == 0 && s.all_pass == 1,
        "nearly equal: zero_variance %d all_pass %d", s.zero_variance, s.all_pass);
  CHECK_CLOSE(a4[1], 1 / sqrt(2.0), 1e-3, "nearly equal rewards normalise to +-1/sqrt(2)");
  // stats may be NULL.
  CHECK(grpo_advantages(r, 2, 4, 1, 1e-4, 1.0, a, NULL, &err) == 0, "NULL stats");
}

static void test_advantages_errors(void) {
  FimiError err = {0};
  GrpoGroupStats s = {.groups = -7};
  double r[8] = {1, 0, 0, 0, 1, 0, 1, 0}, a[8];
  for (int k = 0; k < 8; k++) a[k] = 42;
  CHECK(grpo_advantages(r, 8, 1, 1, 1e-4, 1, a, &s, &err) != 0 && strstr(err.message, "group size 1"),
        "G = 1 accepted: %s", err.message);
  CHECK(grpo_advantages(r, 0, 4, 1, 1e-4, 1, a, &s, &err) != 0 && strstr(err.message, "groups"), "0 groups");
  CHECK(grpo_advantages(r, 2, 4, 1, -1e-4, 1, a, &s, &err) != 0 && strstr(err.message, "eps"), "eps < 0");
  CHECK(grpo_advantages(r, 2, 4, 1, NAN, 1, a, &s, &err) != 0 && strstr(err.message, "eps"), "eps NaN");
  r[5] = NAN;
  CHECK(grpo_advantages(r, 2, 4, 1, 1e-4, 1, a, &s, &err) != 0 && strstr(err.message, "rollout 5") &&
            strstr(err.message, "group 1"),
        "NaN reward: %s", err.message);
  r[5] = -INFINITY;
  CHECK(grpo_advantages(r, 2, 4, 1, 1e-4, 1, a, &s, &err) != 0 && strstr(err.message, "rollout 5"), "-inf reward");
  double huge[2] = {1e308, -1e308};
  CHECK(grpo_advantages(huge, 1, 2, 1, 1e-4, 1, a, &s, &err) != 0 && strstr(err.message, "too large"),
        "overflowing rewards: %s", err.message);
  int untouched = s.groups == -7;
  for (int k = 0; k < 8; k++) untouched &= a[k] == 42;
  CHECK(untouched, "a failed call wrote adv or stats");
}

// ----------------------------------------------------------------------------
// The loss: a random micro-batch and the float64 reference

enum { MAX_B = 8, MAX_T = 12 };

typedef struct Batch {
  int B, T;
  float logp[MAX_B * MAX_T], old_logp[MAX_B * MAX_T], ref_logp[MAX_B * MAX_T], mask[MAX_B * MAX_T];
  double adv[MAX_B];
  double total_tokens, total_seqs;
} Batch;

// Rows are rollouts: a prompt prefix (mask 0), then sampled tokens (mask 1)
// with holes where observation turns sit; one row in four has no policy
// token at all. Unmasked positions hold garbage the loss must ignore.
// Ratios exp(logp - old_logp) lie in [0.64, 1.57]: inside and outside any
// clip range tested; advantages of both signs, some exactly 0.
static void random_batch(Rng *rng, Batch *b, int B, int T) {
  b->B = B, b->T = T;
  b->total_tokens = 0, b->total_seqs = B;
  for (int i = 0; i < B; i++) {
    int prompt = (int)(rng_next_u64(rng) % (T / 2)), empty = rng_next_u64(rng) % 4 == 0;
    b->adv[i] = i % 5 == 4 ? 0.0 : 1.5 * rng_normal(rng);
    for (int t = 0; t < T; t++) {
      int k = i * T + t;
      b->mask[k] = !empty && t >= prompt && rng_uniform_double(rng) < 0.85 ? 1.0f : 0.0f;
      b->logp[k] = (float)(-0.05 - 4.0 * rng_uniform_double(rng));
      b->old_logp[k] = (float)(b->logp[k] + 0.9 * (rng_uniform_double(rng) - 0.5));
      b->ref_logp[k] = (float)(b->logp[k] + 0.5 * rng_normal(rng));
      if (b->mask[k] == 0) b->logp[k] = 1e30f, b->old_logp[k] = NAN, b->ref_logp[k] = -INFINITY;
      b->total_tokens += b->mask[k];
    }
  }
  if (b->total_tokens == 0)
    b->mask[0] = 1, b->logp[0] = -1, b->old_logp[0] = -1.1f, b->ref_logp[0] = -1.2f, b->total_tokens = 1;
}

// The reference: the header's per-token formula and aggregations written
// directly (fmin/fmax for min and clip, exp(x) - x - 1 for k3), on double logp.
static double reference_loss(const GrpoLossConfig *c, const Batch *b, const double *logp) {
  double loss = 0;
  for (int i = 0; i < b->B; i++) {
    double row = 0, n = 0;
    for (int t = 0; t < b->T; t++) {
      int k = i * b->T + t;
      if (b->mask[k] == 0) continue;
      double r = exp(logp[k] - b->old_logp[k]), A = b->adv[i];
      double clipped = fmin(fmax(r, 1 - c->clip_low), 1 + c->clip_high);
      double l = -fmin(r * A, clipped * A);
      if (c->kl_coef > 0) {
        double x = b->ref_logp[k] - logp[k];
        l += c->kl_coef * (exp(x) - x - 1);
      }
      row += l, n += 1;
    }
    if (c->aggregation == GRPO_AGG_TOKEN_MEAN) loss += row / b->total_tokens;
    if (c->aggregation == GRPO_AGG_SEQ_MEAN_TOKEN_MEAN && n > 0) loss += row / n / b->total_seqs;
    if (c->aggregation == GRPO_AGG_SEQ_MEAN_TOKEN_SUM) loss += row / b->total_seqs;
  }
  return loss;
}

static void reference_counts(const GrpoLossConfig *c, const Batch *b, double *clipped, double *ratio_sum,
                             double *kl_sum) {
  *clipped = *ratio_sum = *kl_sum = 0;
  for (int k = 0; k < b->B * b->T; k++) {
    if (b->mask[k] == 0) continue;
    double r = exp((double)b->logp[k] - b->old_logp[k]), A = b->adv[k / b->T];
    *clipped += fmin(fmax(r, 1 - c->clip_low), 1 + c->clip_high) * A < r * A;
    *ratio_sum += r;
    double x = (double)b->ref_logp[k] - b->logp[k];
    if (c->kl_coef > 0) *kl_sum += exp(x) - x - 1;
  }
}

static int call_loss(const GrpoLossConfig *c, const Batch *b, int row0, int rows, float *dlogp, GrpoLossStats *s,
                     FimiError *err) {
  long o = (long)row0 * b->T;
  return grpo_loss(c, b->logp + o, b->old_logp + o, b->ref_logp + o, b->mask + o, b->adv + row0, rows, b->T,
                   b->total_tokens, b->total_seqs, dlogp + o, s, err);
}

static int near_kink(const GrpoLossConfig *c, double logp, double old_logp) {
  double r = exp(logp - old_logp);
  return fabs(r - (1 - c->clip_low)) < 1e-5 || fabs(r - (1 + c->clip_high)) < 1e-5;
}

static void test_loss_vs_reference(void) {
  Rng rng;
  rng_seed(&rng, 5);
  FimiError err = {0};
  double clips[3][2] = {{0.2, 0.2}, {0.2, 0.28}, {0.1, 0.3}};
  double kls[2] = {0.0, 0.1};
  for (int agg = 0; agg < 3; agg++) {
    double max_loss_err = 0, max_grad_err = 0, max_split_err = 0;
    double tokens = 0, clipped = 0;
    int kinks = 0, split_bitwise = 1, unmasked_zero = 1, counts_ok = 1;
    for (int trial = 0; trial < 120; trial++) {
      GrpoLossConfig c = {.clip_low = clips[trial % 3][0],
                          .clip_high = clips[trial % 3][1],
                          .kl_coef = kls[(trial / 3) % 2],
                          .aggregation = (GrpoAggregation)agg};
      Batch b;
      random_batch(&rng, &b, MAX_B, MAX_T);
      int n = b.B * b.T;
      float dlogp[MAX_B * MAX_T];
      for (int k = 0; k < n; k++) dlogp[k] = 77.0f;
      GrpoLossStats s = {0};
      if (call_loss(&c, &b, 0, b.B, dlogp, &s, &err) != 0) {
        CHECK(0, "grpo_loss: %s", err.message);
        continue;
      }
      double logp[MAX_B * MAX_T];
      for (int k = 0; k < n; k++) logp[k] = b.logp[k];
      double ref = reference_loss(&c, &b, logp);
      max_loss_err = fmax(max_loss_err, fabs(s.loss - ref) / fmax(1.0, fabs(ref)));
      // Central differences of the float64 reference, h = 1e-6 on log-probs
      // of size ~1; tokens within 1e-5 of a clip boundary have no derivative.
      double fd[MAX_B * MAX_T], got[MAX_B * MAX_T];
      int m = 0;
      for (int k = 0; k < n; k++) {
        if (b.mask[k] == 0) {
          unmasked_zero &= dlogp[k] == 0.0f && !signbit(dlogp[k]);
          continue;
        }
        if (near_kink(&c, logp[k], b.old_logp[k])) {
          kinks++;
          continue;
        }
        double h = 1e-6, keep = logp[k];
        logp[k] = keep + h;
        double up = reference_loss(&c, &b, logp);
        logp[k] = keep - h;
        fd[m] = (up - reference_loss(&c, &b, logp)) / (2 * h);
        logp[k] = keep;
        got[m++] = dlogp[k];
      }
      if (m > 0) max_grad_err = fmax(max_grad_err, max_rel_error(got, fd, m));
      double want_clipped, want_ratio, want_kl;
      reference_counts(&c, &b, &want_clipped, &want_ratio, &want_kl);
      counts_ok &= s.tokens == b.total_tokens && s.clipped == want_clipped &&
                   fabs(s.ratio_sum - want_ratio) <= 1e-12 * want_ratio &&
                   fabs(s.kl_sum - want_kl) <= 1e-12 * fmax(1, want_kl);
      tokens += s.tokens, clipped += s.clipped;
      // Micro-batches {0,1,2}, {3}, {4..7} of the same step: same sum, same dlogp.
      float split[MAX_B * MAX_T];
      GrpoLossStats ss = {0};
      int ok = call_loss(&c, &b, 0, 3, split, &ss, &err) == 0 && call_loss(&c, &b, 3, 1, split, &ss, &err) == 0 &&
               call_loss(&c, &b, 4, b.B - 4, split, &ss, &err) == 0;
      CHECK(ok, "split calls: %s", err.message);
      max_split_err = fmax(max_split_err, fabs(ss.loss - s.loss) / fmax(1.0, fabs(s.loss)));
      split_bitwise &= memcmp(split, dlogp, sizeof(float) * n) == 0 && ss.tokens == s.tokens && ss.clipped == s.clipped;
    }
    printf(
        "%s: 120 random batches (3 clip ranges, KL 0 / 0.1): loss rel err %.2e (tol 1e-13), dlogp vs central "
        "differences %.2e (tol 2e-7), %d kinks skipped, micro-batch sum rel err %.2e (tol 1e-14), clipped "
        "%.0f of %.0f tokens\n",
        grpo_aggregation_name((GrpoAggregation)agg), max_loss_err, max_grad_err, kinks, max_split_err, clipped, tokens);
    CHECK(max_loss_err <= 1e-13, "%s loss vs float64 reference: %.3g", grpo_aggregation_name(agg), max_loss_err);
    CHECK(max_grad_err <= 2e-7, "%s dlogp vs central differences: %.3g", grpo_aggregation_name(agg), max_grad_err);
    CHECK(max_split_err <= 1e-14, "%s micro-batch sum: %.3g", grpo_aggregation_name(agg), max_split_err);
    CHECK(split_bitwise, "%s: micro-batch dlogp or counts differ from one call", grpo_aggregation_name(agg));
    CHECK(unmasked_zero, "%s: dlogp not +0 where mask is 0", grpo_aggregation_name(agg));
    CHECK(counts_ok, "%s: tokens / clipped / ratio_sum / kl_sum differ from the reference", grpo_aggregation_name(agg));
    CHECK(clipped > 0.1 * tokens && clipped < 0.6 * tokens, "%s: the batches exercise both branches (%g of %g)",
          grpo_aggregation_name(agg), clipped, tokens);
  }
}

// ----------------------------------------------------------------------------
// Hand cases

// The first update of a step: logp == old_logp, r = exp(0) = 1 exactly.
static void test_first_update(void) {
  Rng rng;
  rng_seed(&rng, 9);
  FimiError err = {0};
  Batch b;
  random_batch(&rng, &b, MAX_B, MAX_T);
  memcpy(b.old_logp, b.logp, sizeof b.logp);
  memcpy(b.ref_logp, b.logp, sizeof b.logp);  // also the reference: k3 = 0
  int n = b.B * b.T;
  for (int kl = 0; kl < 2; kl++) {
    GrpoLossConfig c;
    grpo_loss_config_default(&c);
    c.kl_coef = kl ? 0.05 : 0.0;
    float dlogp[MAX_B * MAX_T];
    GrpoLossStats s = {0};
    CHECK(call_loss(&c, &b, 0, b.B, dlogp, &s, &err) == 0, "%s", err.message);
    double want = 0;
    int grad_ok = 1;
    for (int k = 0; k < n; k++) {
      double A = b.adv[k / b.T];
      want -= A * b.mask[k];
      float g = (float)(-A / b.total_tokens);
      grad_ok &= b.mask[k] ? fabsf(dlogp[k] - g) <= 0x1p-23f * fabsf(g) : dlogp[k] == 0.0f;
    }
    want /= b.total_tokens;
    CHECK(fabs(s.loss - want) <= 1e-15 * fmax(1, fabs(want)), "ratio 1: loss %.17g, -sum(A mask)/N = %.17g", s.loss,
          want);
    CHECK(grad_ok, "ratio 1: dlogp != -A / total_tokens (within a float ulp)");
    CHECK(s.clipped == 0 && s.ratio_sum == s.tokens && s.tokens == b.total_tokens && s.kl_sum == 0,
          "ratio 1: clipped %g ratio_sum %g tokens %g kl %g", s.clipped, s.ratio_sum, s.tokens, s.kl_sum);
  }
}

static void test_clipping_by_hand(void) {
  FimiError err = {0};
  // One token per row; old_logp 0 so r = exp(logp).
  enum { R = 7 };
  double ratios[R] = {1.5, 0.5, 1.5, 0.5, 1.25, 0.75, 1.5};
  double advs[R] = {1, -1, -1, 1, 1, -1, 0};
  float logp[R], old[R] = {0}, mask[R], dlogp[R];
  double r[R];
  for (int i = 0; i < R; i++) logp[i] = (float)log(ratios[i]), mask[i] = 1, r[i] = exp((double)logp[i]);
  // Row: A > 0 and r above 1 + clip_high: clipped, the loss is -(1+ch) A.
  //      A < 0 and r below 1 - clip_low: clipped, the loss is -(1-cl) A.
  //      The opposite signs take the unclipped branch: gradient -A r.
  //      A = 0: no branch is clipped, everything is 0.
  // Row 4 (r = 1.25, A > 0) is clipped at clip_high 0.2, not at DAPO's 0.28.
  for (int dapo = 0; dapo < 2; dapo++) {
    GrpoLossConfig c = {
        .clip_low = 0.2, .clip_high = dapo ? 0.28 : 0.2, .kl_coef = 0, .aggregation = GRPO_AGG_TOKEN_MEAN};
    double want_loss[R] = {-(1 + c.clip_high), 0.8, r[2], -r[3], dapo ? -r[4] : -1.2, 0.8, 0};
    double want_grad[R] = {0, 0, r[2], -r[3], dapo ? -r[4] : 0, 0, 0};
    GrpoLossStats s = {0};
    CHECK(grpo_loss(&c, logp, old, NULL, mask, advs, R, 1, R, R, dlogp, &s, &err) == 0, "%s", err.message);
    double total = 0;
    for (int i = 0; i < R; i++) {
      total += want_loss[i] / R;
      CHECK(fabsf(dlogp[i] - (float)(want_grad[i] / R)) <= 1e-7f, "clip_high %g row %d: dlogp %g want %g", c.clip_high,
            i, dlogp[i], want_grad[i] / R);
      CHECK(dlogp[i] != 0 || want_grad[i] == 0, "row %d gradient vanished", i);
    }
    CHECK(s.clipped == (dapo ? 3 : 4), "clip_high %g: %g clipped", c.clip_high, s.clipped);
    CHECK_CLOSE(s.loss, total, 1e-15, "hand-made clipping loss");
  }
  // Per row, one token at a time: exactly the clipped ones are counted.
  int want_clipped[R] = {1, 1, 0, 0, 1, 1, 0};
  for (int i = 0; i < R; i++) {
    GrpoLossConfig c;
    grpo_loss_config_default(&c);
    GrpoLossStats s = {0};
    CHECK(grpo_loss(&c, logp + i, old + i, NULL, mask + i, advs + i, 1, 1, 1, 1, dlogp + i, &s, &err) == 0, "%s",
          err.message);
    CHECK(s.clipped == want_clipped[i], "row %d (r %.2f, A %+g): clipped %g, want %d", i, ratios[i], advs[i], s.clipped,
          want_clipped[i]);
  }
  // A ratio exactly on a boundary is inside the range (both branches tie):
  // unclipped, gradient -A r. clip_high = r - 1 and clip_low = 1 - r are
  // exact (Sterbenz), so 1 + clip_high and 1 - clip_low give r back exactly.
  float up = 0.2f, down = -0.2f, zero = 0, one = 1, g;
  double r_up = exp((double)up), r_down = exp((double)down), plus = 1, minus = -1;
  GrpoLossConfig c = {.clip_low = 1 - r_down, .clip_high = r_up - 1, .aggregation = GRPO_AGG_TOKEN_MEAN};
  CHECK(1 + c.clip_high == r_up && 1 - c.clip_low == r_down, "boundaries not exact");
  GrpoLossStats s = {0};
  CHECK(grpo_loss(&c, &up, &zero, NULL, &one, &plus, 1, 1, 1, 1, &g, &s, &err) == 0 && s.clipped == 0 &&
            g == (float)-r_up,
        "r == 1 + clip_high, A > 0: clipped %g, dlogp %g", s.clipped, g);
  CHECK(grpo_loss(&c, &down, &zero, NULL, &one, &minus, 1, 1, 1, 1, &g, &s, &err) == 0 && s.clipped == 0 &&
            g == (float)r_down,
        "r == 1 - clip_low, A < 0: clipped %g, dlogp %g", s.clipped, g);
}

// ----------------------------------------------------------------------------
// Bad inputs and configs

static int untouched(const float *dlogp, int n, const GrpoLossStats *s) {
  for (int k = 0; k < n; k++)
    if (dlogp[k] != 77.0f) return 0;
  return s->loss == 5 && s->tokens == 0 && s->clipped == 0;
}

static void test_bad_inputs(void) {
  Rng rng;
  rng_seed(&rng, 13);
  FimiError err = {0};
  Batch b;
  random_batch(&rng, &b, 4, 6);
  for (int k = 0; k < 24; k++) {  // rows 0..3: positions 2..5 are policy tokens
    b.mask[k] = k % 6 >= 2 ? 1.0f : 0.0f;
    b.logp[k] = -0.5f - 0.1f * (float)(k % 5);
    b.old_logp[k] = b.logp[k] + 0.15f * (float)(k % 3 - 1);
    b.ref_logp[k] = b.logp[k] - 0.1f;
  }
  b.total_tokens = 16, b.total_seqs = 4;
  GrpoLossConfig c = {.clip_low = 0.2, .clip_high = 0.28, .kl_coef = 0.04, .aggregation = GRPO_AGG_TOKEN_MEAN};
  float dlogp[24], clean[24];
  GrpoLossStats s0 = {0};
  CHECK(call_loss(&c, &b, 0, 4, clean, &s0, &err) == 0, "clean batch: %s", err.message);
  struct {
    float *where;
    float value;
    const char *name;
  } cases[3] = {{&b.logp[2 * 6 + 3], NAN, "logp"},
                {&b.old_logp[2 * 6 + 3], INFINITY, "old_logp"},
                {&b.ref_logp[2 * 6 + 3], NAN, "ref_logp"}};
  for (int k = 0; k < 3; k++) {
    float keep = *cases[k].where;
    *cases[k].where = cases[k].value;
    GrpoLossStats s = {.loss = 5};
    for (int j = 0; j < 24; j++) dlogp[j] = 77.0f;
    CHECK(call_loss(&c, &b, 0, 4, dlogp, &s, &err) != 0 && strstr(err.message, cases[k].name) &&
              strstr(err.message, "row 2") && strstr(err.message, "position 3"),
          "%s %g on a masked token: %s", cases[k].name, cases[k].value, err.message);
    CHECK(untouched(dlogp, 24, &s), "%s: a failed call wrote dlogp or stats", cases[k].name);
    *cases[k].where = keep;
  }
  // Unmasked positions are never used: NaN there changes nothing.
  b.logp[1 * 6 + 0] = NAN, b.old_logp[1 * 6 + 1] = INFINITY, b.ref_logp[3 * 6 + 1] = NAN;
  GrpoLossStats s = {0};
  CHECK(call_loss(&c, &b, 0, 4, dlogp, &s, &err) == 0, "NaN on unmasked tokens: %s", err.message);
  CHECK(memcmp(dlogp, clean, sizeof dlogp) == 0 && s.loss == s0.loss && s.tokens == 16,
        "NaN on unmasked tokens changed the result");
  // With kl_coef 0 the reference is not read: NaN there, or no array at all.
  GrpoLossConfig nokl = c;
  nokl.kl_coef = 0;
  b.ref_logp[0 * 6 + 2] = NAN;
  s = (GrpoLossStats){0};
  CHECK(grpo_loss(&nokl, b.logp, b.old_logp, NULL, b.mask, b.adv, 4, 6, 16, 4, dlogp, &s, &err) == 0 &&
            call_loss(&nokl, &b, 0, 4, dlogp, &s, &err) == 0 && s.kl_sum == 0,
        "kl_coef 0 read ref_logp: %s", err.message);
  CHECK(grpo_loss(&c, b.logp, b.old_logp, NULL, b.mask, b.adv, 4, 6, 16, 4, dlogp, &s, &err) != 0 &&
            strstr(err.message, "grpo.kl_coef"),
        "KL without reference log-probs: %s", err.message);
  b.ref_logp[0 * 6 + 2] = -1;
  // A row's advantage matters only if the row has policy tokens.
  double keep_adv = b.adv[1];
  b.adv[1] = NAN;
  CHECK(call_loss(&c, &b, 0, 4, dlogp, &s, &err) != 0 && strstr(err.message, "row 1"), "NaN advantage: %s",
        err.message);
  for (int t = 0; t < 6; t++) b.mask[6 + t] = 0;
  b.total_tokens = 12;
  CHECK(call_loss(&c, &b, 0, 4, dlogp, &s, &err) == 0, "NaN advantage of an empty row: %s", err.message);
  b.adv[1] = keep_adv;
  // Masks are 0 or 1.
  b.mask[7] = 0.5f;
  CHECK(call_loss(&c, &b, 0, 4, dlogp, &s, &err) != 0 && strstr(err.message, "mask") && strstr(err.message, "row 1") &&
            strstr(err.message, "position 1"),
        "mask 0.5: %s", err.message);
  b.mask[7] = 0;
  // Step totals.
  double totals[4][2] = {{0, 4}, {NAN, 4}, {16, 0}, {11, 4}};  // 12 tokens here: 11 cannot be the step's total
  for (int k = 0; k < 4; k++) {
    b.total_tokens = totals[k][0], b.total_seqs = totals[k][1];
    CHECK(call_loss(&c, &b, 0, 4, dlogp, &s, &err) != 0 && strstr(err.message, "total_"), "totals %g %g accepted",
          totals[k][0], totals[k][1]);
  }
  // A ratio of e^100 with A < 0 has a gradient no float holds.
  float lp = 0, olp = -100, m = 1, g;
  double A = -1;
  GrpoLossConfig d;
  grpo_loss_config_default(&d);
  CHECK(grpo_loss(&d, &lp, &olp, NULL, &m, &A, 1, 1, 1, 1, &g, &s, &err) != 0 && strstr(err.message, "overflow") &&
            strstr(err.message, "row 0"),
        "overflowing ratio: %s", err.message);
  // An empty micro-batch is a no-op.
  s = (GrpoLossStats){0};
  CHECK(grpo_loss(&d, NULL, NULL, NULL, NULL, NULL, 0, 6, 16, 4, NULL, &s, &err) == 0 && s.tokens == 0 && s.loss == 0,
        "empty micro-batch: %s", err.message);
}

static void test_configs(void) {
  FimiError err = {0};
  GrpoLossConfig c;
  grpo_loss_config_default(&c);
  CHECK(c.clip_low == 0.2 && c.clip_high == 0.2 && c.kl_coef == 0 && c.aggregation == GRPO_AGG_TOKEN_MEAN,
        "defaults: clip 0.2 / 0.2, kl 0, token_mean");
  CHECK(grpo_loss_config_validate(&c, &err) == 0, "defaults invalid: %s", err.message);
  struct {
    double clip_low, clip_high, kl_coef;
    int agg;
    const char *key;
  } bad[] = {{1.0, 0.2, 0, 0, "grpo.clip_low"},         {-0.1, 0.2, 0, 0, "grpo.clip_low"},
             {NAN, 0.2, 0, 0, "grpo.clip_low"},         {0.2, -0.01, 0, 0, "grpo.clip_high"},
             {0.2, INFINITY, 0, 0, "grpo.clip_high"},   {0.2, 0.2, -1, 0, "grpo.kl_coef"},
             {0.2, 0.2, NAN, 0, "grpo.kl_coef"},        {0.2, 0.2, 0, 3, "grpo.loss_aggregation"},
             {0.2, 0.2, 0, -1, "grpo.loss_aggregation"}};
  float lp = -1, m = 1, g;
  double A = 1;
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    GrpoLossConfig b = {bad[k].clip_low, bad[k].clip_high, bad[k].kl_coef, (GrpoAggregation)bad[k].agg};
    CHECK(grpo_loss_config_validate(&b, &err) != 0 && strstr(err.message, bad[k].key), "config %zu (%s): %s", k,
          bad[k].key, err.message);
    GrpoLossStats s = {0};
    CHECK(grpo_loss(&b, &lp, &lp, &lp, &m, &A, 1, 1, 1, 1, &g, &s, &err) != 0 && strstr(err.message, bad[k].key),
          "grpo_loss ran with config %zu", k);
  }
  GrpoLossConfig edge = {0.0, 0.0, 0.0, GRPO_AGG_SEQ_MEAN_TOKEN_SUM};  // no clipping slack at all is legal
  CHECK(grpo_loss_config_validate(&edge, &err) == 0, "clip 0 / 0: %s", err.message);
  for (int k = 0; k < 3; k++) {
    GrpoAggregation out = (GrpoAggregation)99;
    const char *name = grpo_aggregation_name((GrpoAggregation)k);
    CHECK(name && grpo_aggregation_parse(name, &out, &err) == 0 && out == (GrpoAggregation)k, "round trip %d", k);
  }
  CHECK(grpo_aggregation_name((GrpoAggregation)3) == NULL && grpo_aggregation_name((GrpoAggregation)-1) == NULL,
        "name of an invalid aggregation");
  CHECK(strcmp(grpo_aggregation_name(GRPO_AGG_SEQ_MEAN_TOKEN_MEAN), "seq_mean_token_mean") == 0, "names");
  GrpoAggregation out = GRPO_AGG_SEQ_MEAN_TOKEN_SUM;
  CHECK(grpo_aggregation_parse("token-mean", &out, &err) != 0 && strstr(err.message, "grpo.loss_aggregation") &&
            strstr(err.message, "token-mean") && out == GRPO_AGG_SEQ_MEAN_TOKEN_SUM,
        "parse token-mean: %s", err.message);
  CHECK(grpo_aggregation_parse(NULL, &out, &err) != 0, "parse NULL");
}

int main(void) {
  test_advantages_vs_reference();
  test_advantages_by_hand();
  test_advantages_errors();
  test_loss_vs_reference();
  test_first_update();
  test_clipping_by_hand();
  test_bad_inputs();
  test_configs();
  TEST_MAIN_END();
}
