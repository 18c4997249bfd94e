// tests/test_ops_matmul.c: the CPU matmul (kernels/cpu/matmul.c) against an
// independent float64 reference. Forward: max relative error vs naive double
// loops. Backward: dinp and the accumulated dweight vs central finite
// differences of the double loss L = sum(g * (inp @ weight^T)).
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// fp32 dot products of up to 256 terms: rounding grows like sqrt(K) * 2^-24,
// a few 1e-7 of the largest output; 1e-5 leaves headroom and still sees any
// indexing or transposition error (those are O(1)). Gradients are the same
// kind of fp32 sums, compared with double FD whose own error is ~1e-9.
#define TOL_FORWARD 1e-5
#define TOL_BACKWARD 1e-5
#define FD_MAX_CHECKS 200

// ---- float64 reference ----
typedef struct {
  int N, C, OC;
  double *inp, *weight, *g;  // (N, C), (OC, C), (N, OC)
} MatmulRef;

// out (N, OC) = inp (N, C) @ weight (OC, C)^T
static void ref_matmul(double *out, const double *inp, const double *weight, int N, int C, int OC) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double s = 0;
      for (int c = 0; c < C; c++) s += inp[n * C + c] * weight[o * C + c];
      out[n * OC + o] = s;
    }
}

// L = sum(g * out)
static double ref_loss(void *ctx) {
  MatmulRef *r = ctx;
  double *out = malloc(sizeof(double) * r->N * r->OC);
  ref_matmul(out, r->inp, r->weight, r->N, r->C, r->OC);
  double loss = 0;
  for (long i = 0; i < (long)r->N * r->OC; i++) loss += r->g[i] * out[i];
  free(out);
  return loss;
}

static void check_matmul(Rng *rng, int N, int C, int OC) {
  long n_in = (long)N * C, n_w = (long)OC * C, n_out = (long)N * OC;
  float *inp = random_floats(rng, n_in, 1.0f);
  float *weight = random_floats(rng, n_w, 0.5f);
  float *g = random_floats(rng, n_out, 1.0f);
  float *out = malloc(sizeof(float) * n_out);
  float *dinp = malloc(sizeof(float) * n_in);
  float *dweight_base = random_floats(rng, n_w, 0.1f);  // what dweight held before: must be kept
  float *dweight = malloc(sizeof(float) * n_w);
  memcpy(dweight, dweight_base, sizeof(float) * n_w);
  for (long i = 0; i < n_in; i++) dinp[i] = NAN;  // must be overwritten

  matmul_forward(out, inp, weight, N, C, OC);
  matmul_backward(dinp, dweight, g, inp, weight, N, C, OC);
  for (long i = 0; i < n_w; i++) dweight[i] -= dweight_base[i];  // the accumulated part

  MatmulRef ref = {N, C, OC, to_double(inp, n_in), to_double(weight, n_w), to_double(g, n_out)};
  double *ref_out = malloc(sizeof(double) * n_out);
  ref_matmul(ref_out, ref.inp, ref.weight, N, C, OC);

  printf("matmul N=%d C=%d OC=%d\n", N, C, OC);
  check_error("matmul_forward out", rel_error_vs(out, ref_out, n_out), TOL_FORWARD);
  check_error("matmul_backward dinp (FD)", fd_rel_error(ref_loss, &ref, ref.inp, dinp, n_in, FD_MAX_CHECKS, rng),
              TOL_BACKWARD);
  check_error("matmul_backward dweight, accumulated (FD)",
              fd_rel_error(ref_loss, &ref, ref.weight, dweight, n_w, FD_MAX_CHECKS, rng), TOL_BACKWARD);

  // NULL gradients are allowed and must not change the other one
  float *dinp_only = malloc(sizeof(float) * n_in);
  matmul_backward(dinp_only, NULL, g, inp, weight, N, C, OC);
  CHECK(memcmp(dinp_only, dinp, sizeof(float) * n_in) == 0, "matmul dinp with dweight NULL differs");
  matmul_backward(NULL, dweight_base, g, inp, weight, N, C, OC);

  // determinism: the same call twice gives the same bits
  float *out2 = malloc(sizeof(float) * n_out);
  matmul_forward(out2, inp, weight, N, C, OC);
  CHECK(memcmp(out, out2, sizeof(float) * n_out) == 0, "matmul forward not deterministic");

  free(inp), free(weight), free(g), free(out), free(out2), free(dinp), free(dinp_only), free(dweight),
      free(dweight_base), free(ref_out), free(ref.inp), free(ref.weight), free(ref.g);
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 1234);
  printf("tolerance: forward %.0e, backward %.0e (fp32 sums of <= 256 terms vs float64)\n", TOL_FORWARD,
         TOL_BACKWARD);
  check_matmul(&rng, 1, 1, 1);
  check_matmul(&rng, 7, 33, 17);
  check_matmul(&rng, 64, 128, 96);
  check_matmul(&rng, 3, 256, 5);
  TEST_MAIN_END();
}
