// tests/test_ops_rope.c: the CPU RoPE (kernels/cpu/rope.c), rotate_half
// convention, against two float64 references:
// - "HF angles": the angle is formed in float32 exactly as Hugging Face does
//   (inv_freq = 1 / theta^(2i/hd) in fp32, / position_scale, times float(pos)),
//   then cos/sin and the rotation in double. At positions of tens of
//   thousands the fp32 angle differs from the exact one by ~1e-3 rad, so
//   matching HF means matching this, not exact math.
// - "exact": all of it in double, at small positions, to pin the formula.
// Backward vs central finite differences of L = sum(g * rope(x)); in place
// (out == inp) must equal out of place bitwise.
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// vs HF angles: only cosf/sinf vs cos/sin (1 ulp) and two fp32 products.
#define TOL_HF 1e-6
// vs exact angles at positions < 64: fp32 angle error ~pos * 2^-24.
#define TOL_EXACT 2e-5
#define TOL_BACKWARD 1e-6
#define FD_MAX_CHECKS 200

typedef struct {
  int N, nh, hd;
  float theta, position_scale;
  int exact_angles;
  const int *positions;
  double *inp, *g;  // (N, nh, hd)
} RopeRef;

static double ref_angle(const RopeRef *r, int pos, int i) {
  if (r->exact_angles) return ((double)pos / r->position_scale) * pow((double)r->theta, -2.0 * i / r->hd);
  float exponent = (float)(2 * i) / (float)r->hd;
  float inv_freq = 1.0f / powf(r->theta, exponent);
  inv_freq = inv_freq / r->position_scale;
  return (double)((float)pos * inv_freq);
}

// out[i] = x[i] cos - x[i + hd/2] sin; out[i + hd/2] = x[i + hd/2] cos + x[i] sin
// out (N, nh, hd)
static void ref_rope(double *out, const RopeRef *r) {
  int half = r->hd / 2;
  for (int n = 0; n < r->N; n++)
    for (int h = 0; h < r->nh; h++) {
      const double *x = r->inp + ((long)n * r->nh + h) * r->hd;
      double *y = out + ((long)n * r->nh + h) * r->hd;
      for (int i = 0; i < half; i++) {
        double a = ref_angle(r, r->positions[n], i);
        y[i] = x[i] * cos(a) - x[i + half] * sin(a);
        y[i + half] = x[i + half] * cos(a) + x[i] * sin(a);
      }
    }
}

static double ref_loss(void *ctx) {
  RopeRef *r = ctx;
  long n = (long)r->N * r->nh * r->hd;
  double *out = malloc(sizeof(double) * n);
  ref_rope(out, r);
  double loss = 0;
  for (long i = 0; i < n; i++) loss += r->g[i] * out[i];
  free(out);
  return loss;
}

static void check_rope(Rng *rng, int N, int nh, int hd, float theta, float position_scale, int max_pos) {
  long n = (long)N * nh * hd;
  int *positions = malloc(sizeof(int) * N);
  for (int i = 0; i < N; i++) positions[i] = (int)(rng_next_u64(rng) % (uint64_t)(max_pos + 1));
  float *inp = random_floats(rng, n, 1.0f), *g = random_floats(rng, n, 1.0f);
  float *out = malloc(sizeof(float) * n), *dinp = malloc(sizeof(float) * n);
  rope_forward(out, inp, positions, N, nh, hd, theta, position_scale);
  rope_backward(dinp, g, positions, N, nh, hd, theta, position_scale);

  RopeRef ref = {N, nh, hd, theta, position_scale, 0, positions, to_double(inp, n), to_double(g, n)};
  double *ref_out = malloc(sizeof(double) * n);
  printf("rope N=%d nh=%d hd=%d theta=%g position_scale=%g positions<=%d\n", N, nh, hd, theta, position_scale,
         max_pos);
  ref_rope(ref_out, &ref);
  check_error("rope_forward vs HF fp32 angles", rel_error_vs(out, ref_out, n), TOL_HF);
  if (max_pos < 64) {
    ref.exact_angles = 1;
    ref_rope(ref_out, &ref);
    check_error("rope_forward vs exact double angles", rel_error_vs(out, ref_out, n), TOL_EXACT);
    ref.exact_angles = 0;
  }
  check_error("rope_backward dinp (FD)", fd_rel_error(ref_loss, &ref, ref.inp, dinp, n, FD_MAX_CHECKS, rng),
              TOL_BACKWARD);

  // in place must give the same bits (this also re-runs the op: determinism)
  float *buf = malloc(sizeof(float) * n);
  memcpy(buf, inp, sizeof(float) * n);
  rope_forward(buf, buf, positions, N, nh, hd, theta, position_scale);
  CHECK(memcmp(buf, out, sizeof(float) * n) == 0, "rope_forward in place differs");
  memcpy(buf, g, sizeof(float) * n);
  rope_backward(buf, buf, positions, N, nh, hd, theta, position_scale);
  CHECK(memcmp(buf, dinp, sizeof(float) * n) == 0, "rope_backward in place differs");

  free(positions), free(inp), free(g), free(out), free(dinp), free(ref.inp), free(ref.g), free(ref_out), free(buf);
}

// A batch of B sequences repeating positions 0..T-1 takes the shared
// cos/sin table path; it must equal rotating each row alone, bitwise, in
// both directions.
static void check_rope_table(Rng *rng, int B, int T, int nh, int hd) {
  int N = B * T;
  long n = (long)N * nh * hd;
  float *inp = malloc(sizeof(float) * n), *batched = malloc(sizeof(float) * n), *rowwise = malloc(sizeof(float) * n);
  int *positions = malloc(sizeof(int) * N);
  for (long i = 0; i < n; i++) inp[i] = rng_normal(rng);
  for (int r = 0; r < N; r++) positions[r] = r % T;
  for (int direction = 0; direction < 2; direction++) {
    void (*op)(float *, const float *, const int *, int, int, int, float, float) =
        direction ? rope_backward : rope_forward;
    op(batched, inp, positions, N, nh, hd, 10000.0f, 1.0f);
    for (int r = 0; r < N; r++)
      op(rowwise + (long)r * nh * hd, inp + (long)r * nh * hd, &positions[r], 1, nh, hd, 10000.0f, 1.0f);
    CHECK(memcmp(batched, rowwise, sizeof(float) * n) == 0, "rope %s: table path differs from per-row path",
          direction ? "backward" : "forward");
  }
  free(inp), free(batched), free(rowwise), free(positions);
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 7);
  printf("tolerance: vs HF fp32 angles %.0e (libm cosf/sinf ulp), vs exact angles %.0e (fp32 angle at pos < 64), "
         "backward %.0e\n",
         TOL_HF, TOL_EXACT, TOL_BACKWARD);
  // a known value: hd = 2, theta irrelevant, angle = pos; (1, 0) -> (cos p, sin p)
  {
    float x[2] = {1.0f, 0.0f}, y[2];
    int pos = 3;
    rope_forward(y, x, &pos, 1, 1, 2, 10000.0f, 1.0f);
    CHECK(fabs(y[0] - cos(3.0)) < 1e-6 && fabs(y[1] - sin(3.0)) < 1e-6, "rope known value: got (%g, %g)", y[0],
          y[1]);
  }
  check_rope(&rng, 1, 1, 2, 10000.0f, 1.0f, 10);
  check_rope(&rng, 7, 4, 64, 10000.0f, 1.0f, 63);      // sliding layers, small positions
  check_rope(&rng, 9, 3, 64, 10000.0f, 1.0f, 40000);   // long context
  check_rope(&rng, 5, 2, 256, 1000000.0f, 8.0f, 32768);  // Gemma 3 global: theta 1e6, linear factor 8
  check_rope(&rng, 4, 2, 256, 1000000.0f, 8.0f, 50);
  check_rope_table(&rng, 4, 16, 3, 64);
  TEST_MAIN_END();
}
