// tests/test_ops_geglu.c: the CPU GeGLU (kernels/cpu/geglu.c) against a
// float64 reference out = gelu_tanh(gate) * up with
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Backward: dgate, dup vs central finite differences of L = sum(g * out).
// Gates span [-8, 8] (tails included) from N(0, 3^2).
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// elementwise: a handful of fp32 roundings plus tanhf (1-2 ulp) per element,
// but for negative gates 1 + tanh(.) cancels (as in torch's own fp32 kernel),
// so a lone tail element can be off by ~1e-6 of itself (n = 1 case). 1e-5 is
// still far below any slip in the formula (O(1e-3) and up).
#define TOL_FORWARD 1e-5
#define TOL_BACKWARD 1e-5
#define FD_MAX_CHECKS 2000

typedef struct {
  long n;
  double *gate, *up, *g;  // (n)
} GegluRef;

static double ref_gelu_tanh(double x) {
  return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 5);
  printf("tolerance: forward %.0e, backward %.0e (fp32 roundings, tanhf, 1 + tanh cancellation for x < 0)\n",
         TOL_FORWARD, TOL_BACKWARD);
  long sizes[3] = {1, 1000, 4099};
  for (int s = 0; s < 3; s++) {
    long n = sizes[s];
    float *gate = random_floats(&rng, n, 3.0f), *up = random_floats(&rng, n, 1.0f), *g = random_floats(&rng, n, 1.0f);
    for (long i = 0; i < n; i++) gate[i] = gate[i] > 8.0f ? 8.0f : gate[i] < -8.0f ? -8.0f : gate[i];
    float *out = malloc(sizeof(float) * n), *dgate = malloc(sizeof(float) * n), *dup = malloc(sizeof(float) * n);
    geglu_forward(out, gate, up, n);
    geglu_backward(dgate, dup, g, gate, up, n);

    GegluRef ref = {n, to_double(gate, n), to_double(up, n), to_double(g, n)};
    double *ref_out = malloc(sizeof(double) * n);
    for (long i = 0; i < n; i++) ref_out[i] = ref_gelu_tanh(ref.gate[i]) * ref.up[i];
    printf("geglu n=%ld\n", n);
    check_error("geglu_forward out", rel_error_vs(out, ref_out, n), TOL_FORWARD);
    // FD of L = sum(g * out) element by element: out[i] depends on gate[i]
    // and up[i] only, so differencing out[i] alone is the same derivative
    // without n - 1 terms of cancellation noise
    double max_diff_gate = 0, max_ref_gate = 1e-30, max_diff_up = 0, max_ref_up = 1e-30;
    for (long i = 0; i < n && i < FD_MAX_CHECKS; i++) {
      double x = ref.gate[i], u = ref.up[i], gi = ref.g[i];
      double fd_gate = gi * u * (ref_gelu_tanh(x + FD_EPS) - ref_gelu_tanh(x - FD_EPS)) / (2 * FD_EPS);
      double fd_up = gi * ref_gelu_tanh(x) * ((u + FD_EPS) - (u - FD_EPS)) / (2 * FD_EPS);
      max_diff_gate = fmax(max_diff_gate, fabs(dgate[i] - fd_gate));
      max_ref_gate = fmax(max_ref_gate, fabs(fd_gate));
      max_diff_up = fmax(max_diff_up, fabs(dup[i] - fd_up));
      max_ref_up = fmax(max_ref_up, fabs(fd_up));
      if (dgate[i] != dgate[i] || dup[i] != dup[i]) max_diff_gate = INFINITY;
    }
    check_error("geglu_backward dgate (FD)", max_diff_gate / max_ref_gate, TOL_BACKWARD);
    check_error("geglu_backward dup (FD)", max_diff_up / max_ref_up, TOL_BACKWARD);

    // determinism and NULL gradients
    float *out2 = malloc(sizeof(float) * n), *dgate2 = malloc(sizeof(float) * n);
    geglu_forward(out2, gate, up, n);
    geglu_backward(dgate2, NULL, g, gate, up, n);
    CHECK(memcmp(out, out2, sizeof(float) * n) == 0, "geglu_forward not deterministic");
    CHECK(memcmp(dgate, dgate2, sizeof(float) * n) == 0, "geglu_backward with dup NULL differs");

    free(gate), free(up), free(g), free(out), free(dgate), free(dup), free(out2), free(dgate2);
    free(ref.gate), free(ref.up), free(ref.g), free(ref_out);
  }
  TEST_MAIN_END();
}
