// tests/test_ops_elementwise.c: residual_add (kernels/cpu/elementwise.c)
// against a float64 reference, out of place and in place (out == a, out == b).
// residual_add has no backward op: the residual's gradient passes through
// unchanged and the model adds the two branches' gradients with residual_add.
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// one fp32 addition: half an ulp of the sum, <= 2^-24 of the largest value
#define TOL_FORWARD 1e-7

int main(void) {
  Rng rng;
  rng_seed(&rng, 3);
  printf("tolerance: %.0e (one fp32 addition per element)\n", TOL_FORWARD);
  long sizes[3] = {1, 1000, 100003};
  for (int s = 0; s < 3; s++) {
    long n = sizes[s];
    float *a = random_floats(&rng, n, 1.0f), *b = random_floats(&rng, n, 3.0f), *out = malloc(sizeof(float) * n);
    double *ref = malloc(sizeof(double) * n);
    for (long i = 0; i < n; i++) ref[i] = (double)a[i] + (double)b[i];
    residual_add(out, a, b, n);
    printf("residual_add n=%ld\n", n);
    check_error("residual_add out", rel_error_vs(out, ref, n), TOL_FORWARD);

    float *inplace = malloc(sizeof(float) * n);
    memcpy(inplace, a, sizeof(float) * n);
    residual_add(inplace, inplace, b, n);  // out == a
    CHECK(memcmp(inplace, out, sizeof(float) * n) == 0, "residual_add in place (out == a) differs");
    memcpy(inplace, b, sizeof(float) * n);
    residual_add(inplace, a, inplace, n);  // out == b
    CHECK(memcmp(inplace, out, sizeof(float) * n) == 0, "residual_add in place (out == b) differs");
    free(a), free(b), free(out), free(ref), free(inplace);
  }
  TEST_MAIN_END();
}
