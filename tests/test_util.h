// tests/test_util.h: minimal assertions for fimi's C tests. Defines CHECK,
// CHECK_CLOSE, TEST_MAIN_END and helpers for relative errors. A test binary
// exits non-zero if any check failed, so ctest reports it.
#ifndef FIMI_TESTS_TEST_UTIL_H
#define FIMI_TESTS_TEST_UTIL_H

#include <math.h>
#include <stdio.h>

static int test_failures = 0;
static int test_checks = 0;

#define CHECK(cond, ...)                                        \
  do {                                                          \
    test_checks++;                                              \
    if (!(cond)) {                                              \
      test_failures++;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);      \
      fprintf(stderr, __VA_ARGS__);                             \
      fputc('\n', stderr);                                      \
    }                                                           \
  } while (0)

// |a - b| <= tol * max(1, |b|)
#define CHECK_CLOSE(a, b, tol, what)                                                                   \
  do {                                                                                                 \
    double _a = (a), _b = (b);                                                                         \
    double _scale = fabs(_b) > 1.0 ? fabs(_b) : 1.0;                                                   \
    CHECK(fabs(_a - _b) <= (tol) * _scale && _a == _a, "%s: got %.9g expected %.9g (tol %g)", what, _a, _b, \
          (double)(tol));                                                                              \
  } while (0)

// Max over i of |a_i - b_i| / max(|b|_inf, tiny): a relative error for a whole tensor.
static inline double max_rel_error(const double *a, const double *b, long n) {
  double max_diff = 0, max_ref = 1e-30;
  for (long i = 0; i < n; i++) {
    double d = fabs(a[i] - b[i]);
    if (d > max_diff || d != d) max_diff = d != d ? INFINITY : d;
    if (fabs(b[i]) > max_ref) max_ref = fabs(b[i]);
  }
  return max_diff / max_ref;
}

#define TEST_MAIN_END()                                                              \
  do {                                                                               \
    printf("%d checks, %d failed\n", test_checks, test_failures);                    \
    return test_failures == 0 && test_checks > 0 ? 0 : 1;                            \
  } while (0)

#endif
