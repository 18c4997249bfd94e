// tests/test_ops_util.h: helpers shared by the tests/test_ops_*.c kernel
// tests. Defines random_floats, to_double, rel_error_vs (fp32 result vs a
// float64 reference), fd_rel_error and fd_rel_error_at (an fp32 gradient vs
// central finite differences of a float64 loss) and check_error.
#ifndef FIMI_TESTS_TEST_OPS_UTIL_H
#define FIMI_TESTS_TEST_OPS_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "tests/test_util.h"

// Step of the central differences in double: truncation error ~eps^2 and
// cancellation ~1e-16/eps, both far below the fp32 errors being measured.
#define FD_EPS 1e-6

// n floats from N(0, std^2); the caller frees.
static inline float *random_floats(Rng *rng, long n, float std) {
  float *x = malloc(sizeof(float) * (n > 0 ? n : 1));
  rng_fill_normal(rng, x, n, 0.0f, std);
  return x;
}

static inline double *to_double(const float *x, long n) {
  double *y = malloc(sizeof(double) * (n > 0 ? n : 1));
  for (long i = 0; i < n; i++) y[i] = x[i];
  return y;
}

// max |got - ref| / max |ref| (test_util.h's max_rel_error), got in fp32.
static inline double rel_error_vs(const float *got, const double *ref, long n) {
  double *g = to_double(got, n);
  double e = max_rel_error(g, ref, n);
  free(g);
  return e;
}

// Central differences of loss(ctx) w.r.t. x[idx[k]], k < count, compared with
// the fp32 gradient grad[idx[k]]: returns max |grad - fd| / max |fd| over
// those elements. x is the double copy of the input that loss() reads; each
// element is restored after its two evaluations.
static inline double fd_rel_error_at(double (*loss)(void *), void *ctx, double *x, const float *grad,
                                     const long *idx, long count) {
  double max_diff = 0, max_ref = 1e-30;
  for (long k = 0; k < count; k++) {
    long i = idx[k];
    double saved = x[i];
    x[i] = saved + FD_EPS;
    double up = loss(ctx);
    x[i] = saved - FD_EPS;
    double down = loss(ctx);
    x[i] = saved;
    double fd = (up - down) / (2 * FD_EPS);
    double diff = fabs(grad[i] - fd);
    if (diff > max_diff || diff != diff) max_diff = diff != diff ? INFINITY : diff;
    if (fabs(fd) > max_ref) max_ref = fabs(fd);
  }
  return max_diff / max_ref;
}

// fd_rel_error_at on every element when n <= max_checks, else on a random
// sample of max_checks elements.
static inline double fd_rel_error(double (*loss)(void *), void *ctx, double *x, const float *grad, long n,
                                  int max_checks, Rng *rng) {
  long count = n < max_checks ? n : max_checks;
  long *idx = malloc(sizeof(long) * (count > 0 ? count : 1));
  for (long k = 0; k < count; k++) idx[k] = n <= max_checks ? k : (long)(rng_next_u64(rng) % (uint64_t)n);
  double e = fd_rel_error_at(loss, ctx, x, grad, idx, count);
  free(idx);
  return e;
}

// Prints one measured error against its tolerance and records a check.
static inline void check_error(const char *what, double err, double tol) {
  printf("  %-58s max rel err %.2e  (tol %.0e)%s\n", what, err, tol, err <= tol ? "" : "  FAIL");
  CHECK(err <= tol, "%s: max rel err %.3g > tol %.3g", what, err, tol);
}

#endif
