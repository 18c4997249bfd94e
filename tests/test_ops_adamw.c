// tests/test_ops_adamw.c: the optimizer ops (kernels/cpu/adamw.c) against
// float64 references: adamw_update for one step from the same state (every
// branch: weight decay on/off, lerp's two forms, grad_scale, early and late
// t), 20 steps carried in float64, the decay-only and zero-gradient cases, and
// sum_squares (vs a long double sum, bitwise across thread counts, n = 0,
// non-finite input).
#include <omp.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// One step: params ~ N(0,1) move by ~lr, so fp32 rounding of the result is
// ~2^-24 of |param|; a few such roundings per element (more on a single
// element, where m = 0.9 m + 0.1 g may cancel).
#define TOL_ONE_STEP 5e-7
// 20 steps: at most one rounding per step accumulates.
#define TOL_MULTI_STEP 3e-6
// sum_squares: double accumulation, bound (n/2048 + 265) * 2^-53 << 1e-13.
#define TOL_SUMSQ 1e-13

// The float64 reference of torch.optim.AdamW's step (ops.h), on doubles.
static void adamw_reference(double *p, double *m, double *v, const double *grad, long n, const AdamWStep *s) {
  double bc1 = 1.0 - pow(s->beta1, (double)s->step), bc2 = 1.0 - pow(s->beta2, (double)s->step);
  for (long i = 0; i < n; i++) {
    double g = grad[i] * (double)s->grad_scale;
    p[i] *= 1.0 - s->lr * s->weight_decay;
    m[i] = s->beta1 * m[i] + (1.0 - s->beta1) * g;
    v[i] = s->beta2 * v[i] + (1.0 - s->beta2) * g * g;
    double m_hat = m[i] / bc1, v_hat = v[i] / bc2;
    p[i] -= s->lr * m_hat / (sqrt(v_hat) + s->eps);
  }
}

typedef struct Case {
  const char *what;
  AdamWStep step;
} Case;

// Random state (param, m, v >= 0 consistent with earlier steps) and gradient.
static void random_state(Rng *rng, long n, float *p, float *m, float *v, float *g) {
  rng_fill_normal(rng, p, n, 0.0f, 1.0f);
  rng_fill_normal(rng, m, n, 0.0f, 0.01f);
  rng_fill_normal(rng, g, n, 0.0f, 0.1f);
  for (long i = 0; i < n; i++) {
    float r = (float)rng_normal(rng) * 0.01f;
    v[i] = r * r;
  }
}

static void test_one_step(Rng *rng, const Case *c, long n) {
  float *p = malloc(sizeof(float) * n), *m = malloc(sizeof(float) * n), *v = malloc(sizeof(float) * n);
  float *g = malloc(sizeof(float) * n);
  random_state(rng, n, p, m, v, g);
  double *pr = to_double(p, n), *mr = to_double(m, n), *vr = to_double(v, n), *gr = to_double(g, n);
  adamw_update(p, m, v, g, (size_t)n, &c->step);
  adamw_reference(pr, mr, vr, gr, n, &c->step);
  char what[160];
  snprintf(what, sizeof what, "%s n=%ld param", c->what, n);
  check_error(what, rel_error_vs(p, pr, n), TOL_ONE_STEP);
  snprintf(what, sizeof what, "%s n=%ld exp_avg", c->what, n);
  check_error(what, rel_error_vs(m, mr, n), TOL_ONE_STEP);
  snprintf(what, sizeof what, "%s n=%ld exp_avg_sq", c->what, n);
  check_error(what, rel_error_vs(v, vr, n), TOL_ONE_STEP);
  free(p), free(m), free(v), free(g), free(pr), free(mr), free(vr), free(gr);
}

// 20 steps from zero moments (t = 1..20), fresh gradients each step, the
// reference carried in float64 the whole way.
static void test_multi_step(Rng *rng) {
  long n = 4099;
  float *p = random_floats(rng, n, 1.0f), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
  double *pr = to_double(p, n), *mr = calloc(n, sizeof(double)), *vr = calloc(n, sizeof(double));
  AdamWStep s = {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .grad_scale = 1.0f};
  float *p0 = malloc(sizeof(float) * n);
  memcpy(p0, p, sizeof(float) * n);
  for (long t = 1; t <= 20; t++) {
    float *g = random_floats(rng, n, 0.05f);
    double *gr = to_double(g, n);
    s.step = t;
    adamw_update(p, m, v, g, (size_t)n, &s);
    adamw_reference(pr, mr, vr, gr, n, &s);
    free(g), free(gr);
  }
  check_error("20 steps (lr 3e-3, wd 0.1) param", rel_error_vs(p, pr, n), TOL_MULTI_STEP);
  check_error("20 steps exp_avg", rel_error_vs(m, mr, n), TOL_MULTI_STEP);
  check_error("20 steps exp_avg_sq", rel_error_vs(v, vr, n), TOL_MULTI_STEP);
  // The updates themselves (p - p0 ~ 20 * lr) vs the reference's: a test of
  // the update formula that param rounding cannot hide.
  double *dp = malloc(sizeof(double) * n), *dr = malloc(sizeof(double) * n);
  for (long i = 0; i < n; i++) dp[i] = (double)p[i] - p0[i], dr[i] = pr[i] - p0[i];
  double e = max_rel_error(dp, dr, n);
  check_error("20 steps total update (p - p0)", e, 1e-4);
  free(p), free(m), free(v), free(pr), free(mr), free(vr), free(p0), free(dp), free(dr);
}

// Zero gradient and zero moments: the update term is 0 / eps = 0, so only
// the decay acts, exactly one fp32 multiplication by (float)(1 - lr * wd).
static void test_decay_only(void) {
  float p[5] = {1.0f, -2.5f, 0.0f, 3e-3f, 7.0f}, m[5] = {0}, v[5] = {0}, g[5] = {0}, expect[5];
  AdamWStep s = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.5, .step = 1,
                 .grad_scale = 1.0f};
  float decay = (float)(1.0 - 0.01 * 0.5);
  for (int i = 0; i < 5; i++) expect[i] = p[i] * decay;
  adamw_update(p, m, v, g, 5, &s);
  CHECK(memcmp(p, expect, sizeof p) == 0, "zero gradient: param should only decay");
  s.weight_decay = 0.0;
  memcpy(expect, p, sizeof p);
  adamw_update(p, m, v, g, 5, &s);
  CHECK(memcmp(p, expect, sizeof p) == 0, "zero gradient, no decay: param should not change");
  for (int i = 0; i < 5; i++) CHECK(m[i] == 0.0f && v[i] == 0.0f, "moments of a zero gradient stay 0");
}

// First step from zero moments: m_hat = g, v_hat = g^2, so each param moves
// by lr * g / (|g| + eps) ~ lr * sign(g): Adam's signature, hand-checkable.
static void test_first_step_sign(void) {
  float p[4] = {0, 0, 0, 0}, m[4] = {0}, v[4] = {0}, g[4] = {0.5f, -2.0f, 1e-3f, -1e-2f};
  AdamWStep s = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0, .step = 1,
                 .grad_scale = 1.0f};
  adamw_update(p, m, v, g, 4, &s);
  for (int i = 0; i < 4; i++) {
    double expect = -0.1 * g[i] / (fabs(g[i]) + 1e-8);
    CHECK_CLOSE(p[i], expect, 1e-5, "first step moves by lr * sign(g)");
  }
}

static void test_sum_squares(Rng *rng) {
  long sizes[5] = {1, 7, 1000, 100003, 3000001};
  for (int k = 0; k < 5; k++) {
    long n = sizes[k];
    float *x = random_floats(rng, n, 2.0f);
    long double ref = 0;
    for (long i = 0; i < n; i++) ref += (long double)x[i] * x[i];
    double got;
    sum_squares(&got, x, (size_t)n);
    double r = (double)ref;
    char what[80];
    snprintf(what, sizeof what, "sum_squares n=%ld", n);
    check_error(what, fabs(got - r) / r, TOL_SUMSQ);
    // The same bits at 1, 2 and 3 threads (fixed block layout).
    int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 3; threads++) {
      omp_set_num_threads(threads);
      double again;
      sum_squares(&again, x, (size_t)n);
      CHECK(memcmp(&again, &got, sizeof got) == 0, "sum_squares n=%ld differs at %d threads", n, threads);
    }
    omp_set_num_threads(saved);
    free(x);
  }
  double zero = -1;
  sum_squares(&zero, NULL, 0);
  CHECK(zero == 0.0, "sum_squares of nothing is 0, got %g", zero);
  // Squares beyond fp32 range stay finite in double.
  float big[2] = {3e38f, -3e38f};
  double s;
  sum_squares(&s, big, 2);
  CHECK(isfinite(s) && fabs(s - 1.8e77) / 1.8e77 < 1e-6, "sum_squares of 3e38 overflowed: %g", s);
  float bad[3] = {1.0f, NAN, 2.0f}, inf[3] = {1.0f, -INFINITY, 2.0f};
  sum_squares(&s, bad, 3);
  CHECK(isnan(s), "sum_squares should propagate NaN");
  sum_squares(&s, inf, 3);
  CHECK(isinf(s), "sum_squares should propagate inf");
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 42);
  printf("tolerances: one step %.0e, 20 steps %.0e, sum_squares %.0e\n", TOL_ONE_STEP, TOL_MULTI_STEP, TOL_SUMSQ);
  Case cases[] = {
      {"t=1 wd=0", {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0, .step = 1,
                    .grad_scale = 1.0f}},
      {"t=2 wd=0.01", {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .step = 2,
                       .grad_scale = 1.0f}},
      {"t=1000 wd=0.1 lr=5e-7", {.lr = 5e-7, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1,
                                 .step = 1000, .grad_scale = 1.0f}},
      {"t=3 beta1=0.3 (lerp w>=0.5)", {.lr = 1e-2, .beta1 = 0.3, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0,
                                       .step = 3, .grad_scale = 1.0f}},
      {"t=5 grad_scale=0.37", {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.05,
                               .step = 5, .grad_scale = 0.37f}},
      {"t=1 lr=0.5 (update dominates)", {.lr = 0.5, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0,
                                         .step = 1, .grad_scale = 1.0f}},
  };
  long sizes[3] = {1, 1000, 100003};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int s = 0; s < 3; s++) test_one_step(&rng, &cases[c], sizes[s]);
  test_multi_step(&rng);
  test_decay_only();
  test_first_step_sign();
  test_sum_squares(&rng);
  TEST_MAIN_END();
}
