// eval/stats.h: the statistics of evaluation reports (docs/evaluation.md).
// Defines eval_pass_hat_k (tau-bench's pass^k from c successes of n trials),
// eval_pass_at_k (any of k succeeds), EvalBand (the learnable band: tasks
// that always fail, split, always pass) and eval_sign_test_p (the exact
// two-sided paired sign test).
#ifndef FIMI_EVAL_STATS_H
#define FIMI_EVAL_STATS_H

// The chance that k i.i.d. trials of a task all succeed, estimated without
// bias from c successes in n trials: C(c, k) / C(n, k). 0 when c < k;
// NaN when k < 1 or k > n or c outside [0, n].
double eval_pass_hat_k(int n, int c, int k);
// The chance that at least one of k trials succeeds: 1 - C(n-c, k) / C(n, k)
// (the unbiased pass@k of Chen et al., 2021). Same domain as above.
double eval_pass_at_k(int n, int c, int k);

// Tasks by how their trials went (FiMI paper, Table 13 at n = 2).
typedef struct EvalBand {
  int always_fail, split, always_pass;
} EvalBand;
// Adds one task with c successes of n trials.
void eval_band_add(EvalBand *band, int n, int c);

// Two-sided exact sign test of `wins` against `losses` (ties dropped):
// p = min(1, 2 * P[X <= min(wins, losses)]) with X ~ Binomial(wins + losses,
// 1/2). 1 when there are no untied pairs.
double eval_sign_test_p(int wins, int losses);

#endif
