// eval/stats.c: pass^k, pass@k, the learnable band and the exact sign test.
#include "eval/stats.h"

#include <math.h>

// C(a, k) / C(b, k) for 0 <= k <= a <= b, as a running product (no factorials,
// so n of thousands stays exact enough in double).
static double binomial_ratio(int a, int b, int k) {
  double r = 1.0;
  for (int i = 0; i < k; i++) r *= (double)(a - i) / (double)(b - i);
  return r;
}

static int valid(int n, int c, int k) { return k >= 1 && k <= n && c >= 0 && c <= n; }

double eval_pass_hat_k(int n, int c, int k) {
  if (!valid(n, c, k)) return NAN;
  return c < k ? 0.0 : binomial_ratio(c, n, k);
}

double eval_pass_at_k(int n, int c, int k) {
  if (!valid(n, c, k)) return NAN;
  return n - c < k ? 1.0 : 1.0 - binomial_ratio(n - c, n, k);
}

void eval_band_add(EvalBand *band, int n, int c) {
  if (c <= 0)
    band->always_fail++;
  else if (c >= n)
    band->always_pass++;
  else
    band->split++;
}

// log C(n, k) through lgamma: exact binomial tails up to large n without
// overflow.
static double log_choose(int n, int k) { return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0); }

double eval_sign_test_p(int wins, int losses) {
  int n = wins + losses;
  if (n <= 0) return 1.0;
  int m = wins < losses ? wins : losses;
  // log-sum-exp of the tail terms: thousands of pairs stay finite in log space.
  double top = log_choose(n, m), sum = 0.0;
  for (int i = 0; i <= m; i++) sum += exp(log_choose(n, i) - top);
  double log_p = log(2.0) + top + log(sum) - n * log(2.0);
  return log_p >= 0.0 ? 1.0 : exp(log_p);
}
