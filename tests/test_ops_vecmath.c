// tests/test_ops_vecmath.c: vm_expf and vm_tanhf (kernels/cpu/vecmath.h)
// against double-precision exp and tanh. Measures the max error in ulps of
// the float result over ~10M points per function (a uniform sweep of the
// whole range, every float near the branch points and the limits, and
// log-spaced tiny magnitudes for tanh) and checks the special values.
// The sweep runs in plain loops that GCC vectorizes, so the vector code is
// what gets measured.
#include <float.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/vecmath.h"
#include "tests/test_util.h"

// A few ulp is what the kernels' tolerances (1e-5 relative) can absorb with
// a wide margin; the measured errors are printed.
#define TOL_EXP_ULP 2.0
#define TOL_TANH_ULP 3.0
#define SWEEP 10000000L

// Spacing of floats at |ref|: 2^(e - 24) for |ref| in [2^(e-1), 2^e), the
// subnormal spacing 2^-149 below FLT_MIN.
static double float_ulp(double ref) {
  double a = fabs(ref);
  if (a < FLT_MIN) return ldexp(1.0, -149);
  int e;
  frexp(a, &e);
  return ldexp(1.0, e - 24);
}

// Max ulp error of f over xs against ref; prints the worst point.
static double max_ulp_error(const char *name, void (*vec)(const float *, float *, long), double (*ref)(double),
                            const float *xs, long n) {
  float *got = malloc(sizeof(float) * n);
  vec(xs, got, n);
  double worst = 0;
  long worst_i = 0;
  for (long i = 0; i < n; i++) {
    double r = ref((double)xs[i]);
    if (r > FLT_MAX) r = INFINITY;  // rounds to inf in float
    double e;
    if (isinf(r)) e = got[i] == r ? 0 : INFINITY;
    else e = fabs((double)got[i] - r) / float_ulp(r);
    if (e > worst || e != e) {
      worst = e != e ? INFINITY : e;
      worst_i = i;
    }
  }
  if (n > 0)
    printf("  %-8s %ld points: max %.3f ulp at x = %.9g (got %.9g, exact %.9g)\n", name, n, worst, xs[worst_i],
           got[worst_i], ref(xs[worst_i]));
  free(got);
  return worst;
}

// The loops under test: written like the kernels' loops so they vectorize.
static void exp_loop(const float *x, float *y, long n) {
  for (long i = 0; i < n; i++) y[i] = vm_expf(x[i]);
}
static void tanh_loop(const float *x, float *y, long n) {
  for (long i = 0; i < n; i++) y[i] = vm_tanhf(x[i]);
}

// n floats evenly spaced over [lo, hi], then every float within `count` steps
// of each point in `around` (nextafterf walks).
static long fill_points(float *xs, long n, float lo, float hi, const float *around, int n_around, int count) {
  long k = 0;
  for (long i = 0; i < n; i++) xs[k++] = lo + (hi - lo) * (float)((double)i / (double)(n - 1));
  for (int a = 0; a < n_around; a++) {
    float up = around[a], down = around[a];
    for (int s = 0; s < count; s++) {
      xs[k++] = up;
      xs[k++] = down;
      up = nextafterf(up, INFINITY);
      down = nextafterf(down, -INFINITY);
    }
  }
  return k;
}

static void check_special(const char *what, float got, float want) {
  int same = (got == want && signbit(got) == signbit(want)) || (got != got && want != want);
  CHECK(same, "%s: got %.9g want %.9g", what, got, want);
}

int main(void) {
  int count = 1000;
  float *xs = malloc(sizeof(float) * (SWEEP + 2L * count * 16 + 2000));

  // exp: the whole finite-result range, plus the branch points of the
  // reduction (multiples of ln2/2), the limits and 0
  float exp_around[] = {0.0f, 0.34657359f, -0.34657359f, 1.0397208f, VM_EXP_OVERFLOW, VM_EXP_UNDERFLOW,
                        -87.336544f /* ln FLT_MIN */, 10.0f, -10.0f};
  long n = fill_points(xs, SWEEP, -103.9f, 88.7f, exp_around, 9, count);
  printf("vm_expf vs exp (double):\n");
  double e_exp = max_ulp_error("vm_expf", exp_loop, exp, xs, n);
  CHECK(e_exp <= TOL_EXP_ULP, "vm_expf max error %.3f ulp > %.1f", e_exp, TOL_EXP_ULP);

  // tanh: [-10, 10] (saturated beyond 9.01), the branch point 0.5, tiny
  // magnitudes log-spaced down to the subnormals
  float tanh_around[] = {0.5f, -0.5f, 0.0f, 9.0f, 1.0f, -1.0f};
  n = fill_points(xs, SWEEP, -10.0f, 10.0f, tanh_around, 6, count);
  for (int i = 0; i < 1000; i++) xs[n++] = (i % 2 ? -1.0f : 1.0f) * (float)pow(10.0, -40.0 + 40.0 * i / 999.0);
  printf("vm_tanhf vs tanh (double):\n");
  double e_tanh = max_ulp_error("vm_tanhf", tanh_loop, tanh, xs, n);
  CHECK(e_tanh <= TOL_TANH_ULP, "vm_tanhf max error %.3f ulp > %.1f", e_tanh, TOL_TANH_ULP);

  // special values
  check_special("expf(-inf)", vm_expf(-INFINITY), 0.0f);
  check_special("expf(+inf)", vm_expf(INFINITY), INFINITY);
  check_special("expf(nan)", vm_expf(NAN), NAN);
  check_special("expf(0)", vm_expf(0.0f), 1.0f);
  check_special("expf(-0)", vm_expf(-0.0f), 1.0f);
  check_special("expf(89)", vm_expf(89.0f), INFINITY);
  check_special("expf(-200)", vm_expf(-200.0f), 0.0f);
  check_special("expf(-FLT_MAX)", vm_expf(-FLT_MAX), 0.0f);
  check_special("tanhf(0)", vm_tanhf(0.0f), 0.0f);
  check_special("tanhf(-0)", vm_tanhf(-0.0f), -0.0f);
  check_special("tanhf(inf)", vm_tanhf(INFINITY), 1.0f);
  check_special("tanhf(-inf)", vm_tanhf(-INFINITY), -1.0f);
  check_special("tanhf(nan)", vm_tanhf(NAN), NAN);
  check_special("tanhf(50)", vm_tanhf(50.0f), 1.0f);
  check_special("tanhf(-FLT_MAX)", vm_tanhf(-FLT_MAX), -1.0f);
  check_special("tanhf(1e-30)", vm_tanhf(1e-30f), 1e-30f);
  free(xs);
  TEST_MAIN_END();
}
