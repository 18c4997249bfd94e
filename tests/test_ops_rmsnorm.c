// tests/test_ops_rmsnorm.c: the CPU Gemma RMSNorm (kernels/cpu/rmsnorm.c)
// against an independent float64 reference y = x / sqrt(mean(x^2) + eps) *
// (1 + w). Backward: dinp and the accumulated dweight vs central finite
// differences of L = sum(g * y). Also: bitwise equal results for 1 and 3
// threads.
#include <omp.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// one fp32 rsqrt and two products per element after a (double) mean: a few
// ulp, ~1e-7 relative; the backward adds a few more roundings per element.
// Measured errors are ~3e-7; 1e-5 leaves headroom, any formula slip is O(1).
#define TOL_FORWARD 1e-5
#define TOL_BACKWARD 1e-5
#define FD_MAX_CHECKS 200
#define EPS 1e-6f

typedef struct {
  int N, C;
  double eps;
  double *inp, *weight, *g;  // (N, C), (C), (N, C)
} RmsnormRef;

// out (N, C), rstd (N)
static void ref_rmsnorm(double *out, double *rstd, const double *inp, const double *weight, int N, int C,
                        double eps) {
  for (int n = 0; n < N; n++) {
    double ms = 0;
    for (int c = 0; c < C; c++) ms += inp[n * C + c] * inp[n * C + c];
    ms /= C;
    double r = 1.0 / sqrt(ms + eps);
    for (int c = 0; c < C; c++) out[n * C + c] = inp[n * C + c] * r * (1.0 + weight[c]);
    if (rstd) rstd[n] = r;
  }
}

static double ref_loss(void *ctx) {
  RmsnormRef *r = ctx;
  double *out = malloc(sizeof(double) * r->N * r->C);
  ref_rmsnorm(out, NULL, r->inp, r->weight, r->N, r->C, r->eps);
  double loss = 0;
  for (long i = 0; i < (long)r->N * r->C; i++) loss += r->g[i] * out[i];
  free(out);
  return loss;
}

static void check_rmsnorm(Rng *rng, int N, int C) {
  long n = (long)N * C;
  float *inp = random_floats(rng, n, 1.0f);
  float *weight = random_floats(rng, C, 0.5f);  // Gemma weights are centred on 0
  float *g = random_floats(rng, n, 1.0f);
  float *out = malloc(sizeof(float) * n), *rstd = malloc(sizeof(float) * N);
  float *dinp = malloc(sizeof(float) * n);
  float *dweight_base = random_floats(rng, C, 0.1f);
  float *dweight = malloc(sizeof(float) * C);
  memcpy(dweight, dweight_base, sizeof(float) * C);
  for (long i = 0; i < n; i++) dinp[i] = NAN;  // must be overwritten

  rmsnorm_forward(out, rstd, inp, weight, N, C, EPS);
  rmsnorm_backward(dinp, dweight, g, inp, weight, rstd, N, C);
  for (int c = 0; c < C; c++) dweight[c] -= dweight_base[c];

  RmsnormRef ref = {N, C, EPS, to_double(inp, n), to_double(weight, C), to_double(g, n)};
  double *ref_out = malloc(sizeof(double) * n), *ref_rstd = malloc(sizeof(double) * N);
  ref_rmsnorm(ref_out, ref_rstd, ref.inp, ref.weight, N, C, ref.eps);

  printf("rmsnorm N=%d C=%d\n", N, C);
  check_error("rmsnorm_forward out", rel_error_vs(out, ref_out, n), TOL_FORWARD);
  check_error("rmsnorm_forward rstd", rel_error_vs(rstd, ref_rstd, N), TOL_FORWARD);
  check_error("rmsnorm_backward dinp (FD)", fd_rel_error(ref_loss, &ref, ref.inp, dinp, n, FD_MAX_CHECKS, rng),
              TOL_BACKWARD);
  check_error("rmsnorm_backward dweight, accumulated (FD)",
              fd_rel_error(ref_loss, &ref, ref.weight, dweight, C, FD_MAX_CHECKS, rng), TOL_BACKWARD);

  // bitwise the same with 1 and 3 threads (dweight sums rows in a fixed order)
  float *out1 = malloc(sizeof(float) * n), *dinp1 = malloc(sizeof(float) * n), *dw1 = calloc(C, sizeof(float));
  float *out3 = malloc(sizeof(float) * n), *dinp3 = malloc(sizeof(float) * n), *dw3 = calloc(C, sizeof(float));
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  rmsnorm_forward(out1, rstd, inp, weight, N, C, EPS);
  rmsnorm_backward(dinp1, dw1, g, inp, weight, rstd, N, C);
  omp_set_num_threads(3);
  rmsnorm_forward(out3, rstd, inp, weight, N, C, EPS);
  rmsnorm_backward(dinp3, dw3, g, inp, weight, rstd, N, C);
  omp_set_num_threads(threads);
  CHECK(memcmp(out1, out3, sizeof(float) * n) == 0 && memcmp(out1, out, sizeof(float) * n) == 0,
        "rmsnorm forward depends on thread count");
  CHECK(memcmp(dinp1, dinp3, sizeof(float) * n) == 0, "rmsnorm dinp depends on thread count");
  CHECK(memcmp(dw1, dw3, sizeof(float) * C) == 0, "rmsnorm dweight depends on thread count");

  free(inp), free(weight), free(g), free(out), free(rstd), free(dinp), free(dweight_base), free(dweight);
  free(ref.inp), free(ref.weight), free(ref.g), free(ref_out), free(ref_rstd);
  free(out1), free(dinp1), free(dw1), free(out3), free(dinp3), free(dw3);
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 99);
  printf("tolerance: forward %.0e (a few fp32 ulp per element), backward %.0e (plus an fp32 sum over C)\n",
         TOL_FORWARD, TOL_BACKWARD);
  // C = 1 is left out on purpose: there y = x/sqrt(x^2 + eps) is flat, its
  // gradient is pure cancellation (~eps/x^2) and no fp32 formula resolves it.
  check_rmsnorm(&rng, 1, 2);
  check_rmsnorm(&rng, 5, 64);
  check_rmsnorm(&rng, 16, 256);  // also the q_norm/k_norm use: rows*heads x head_dim
  check_rmsnorm(&rng, 70, 1000);  // C not a multiple of the 64-column tile
  TEST_MAIN_END();
}
