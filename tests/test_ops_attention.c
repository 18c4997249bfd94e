// tests/test_ops_attention.c: the CPU attention (kernels/cpu/attention.c)
// against an independent float64 reference that forms the full (T, T) score
// matrix: score = q.k * scale, softcap c*tanh(s/c) before the mask, causal
// mask with optional window (j > i - W), GQA kv head = h / (nh / nkv).
// Forward: out and lse. Backward: dq, dk, dv vs central finite differences of
// L = sum(g * out) on the double reference. Decode: equals the last row of
// attention_forward bitwise for per-sequence lengths, and never reads cache
// rows past the length. Determinism: bitwise equal for 1 and 3 threads.
#include <limits.h>
#include <omp.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// fp32 dot products over hd <= 256, expf, and sums over <= 150 keys: errors of
// a few 1e-7 of the largest value (measured <= 5e-7); 1e-5 keeps headroom
// while a wrong mask, scale or softcap gives O(1e-2) or more.
#define TOL_FORWARD 1e-5
// the backward chains three such fp32 sums (dp, ds, the dq/dk/dv sums):
// measured <= 1.5e-6, so the same 1e-5
#define TOL_BACKWARD 1e-5
// FD work per tensor, in units of reference multiply-adds, to bound run time
#define FD_WORK_BUDGET 3e8

typedef struct {
  int B, T, nh, nkv, hd, window;
  double softcap, scale;
  double *q, *k, *v, *g;  // q, g (B, T, nh, hd); k, v (B, T, nkv, hd)
} AttnRef;

// out (B, T, nh, hd), lse (B, nh, T) or NULL
static void ref_attention(double *out, double *lse, const AttnRef *r) {
  int T = r->T, nh = r->nh, nkv = r->nkv, hd = r->hd;
  double *scores = malloc(sizeof(double) * T);
  for (int b = 0; b < r->B; b++)
    for (int h = 0; h < nh; h++) {
      int kvh = h / (nh / nkv);
      for (int i = 0; i < T; i++) {
        const double *qi = r->q + (((long)b * T + i) * nh + h) * hd;
        double max = -INFINITY;
        for (int j = 0; j < T; j++) {
          const double *kj = r->k + (((long)b * T + j) * nkv + kvh) * hd;
          double s = 0;
          for (int d = 0; d < hd; d++) s += qi[d] * kj[d];
          s *= r->scale;
          if (r->softcap > 0) s = r->softcap * tanh(s / r->softcap);  // cap, then mask
          int visible = j <= i && (r->window <= 0 || j > i - r->window);
          scores[j] = visible ? s : -INFINITY;
          if (scores[j] > max) max = scores[j];
        }
        double sum = 0;
        for (int j = 0; j < T; j++) sum += exp(scores[j] - max);
        double *oi = out + (((long)b * T + i) * nh + h) * hd;
        for (int d = 0; d < hd; d++) oi[d] = 0;
        for (int j = 0; j < T; j++) {
          double p = exp(scores[j] - max) / sum;
          const double *vj = r->v + (((long)b * T + j) * nkv + kvh) * hd;
          for (int d = 0; d < hd; d++) oi[d] += p * vj[d];
        }
        if (lse) lse[((long)b * nh + h) * T + i] = max + log(sum);
      }
    }
  free(scores);
}

static double ref_loss(void *ctx) {
  AttnRef *r = ctx;
  long n = (long)r->B * r->T * r->nh * r->hd;
  double *out = malloc(sizeof(double) * n);
  ref_attention(out, NULL, r);
  double loss = 0;
  for (long i = 0; i < n; i++) loss += r->g[i] * out[i];
  free(out);
  return loss;
}

static int same_bits(const float *a, const float *b, long n) { return memcmp(a, b, sizeof(float) * n) == 0; }

static void fill_nan(float *x, long n) {
  for (long i = 0; i < n; i++) x[i] = NAN;
}

static void check_attention(Rng *rng, int B, int T, int nh, int nkv, int hd, int window, float softcap, float scale) {
  long nq = (long)B * T * nh * hd, nk = (long)B * T * nkv * hd, nl = (long)B * nh * T;
  float *q = random_floats(rng, nq, 1.0f), *k = random_floats(rng, nk, 1.0f), *v = random_floats(rng, nk, 1.0f);
  float *g = random_floats(rng, nq, 1.0f);
  float *out = malloc(sizeof(float) * nq), *lse = malloc(sizeof(float) * nl);
  float *dq = malloc(sizeof(float) * nq), *dk = malloc(sizeof(float) * nk), *dv = malloc(sizeof(float) * nk);
  fill_nan(dq, nq), fill_nan(dk, nk), fill_nan(dv, nk);  // must be overwritten
  attention_forward(out, lse, q, k, v, B, T, nh, nkv, hd, window, softcap, scale);
  attention_backward(dq, dk, dv, g, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);

  AttnRef ref = {B,         T,       nh,       nkv,     hd, window, softcap, scale, to_double(q, nq), to_double(k, nk),
                 to_double(v, nk), to_double(g, nq)};
  double *ref_out = malloc(sizeof(double) * nq), *ref_lse = malloc(sizeof(double) * nl);
  ref_attention(ref_out, ref_lse, &ref);
  double work = (double)B * nh * T * T * hd * 2;  // one reference forward
  int checks = (int)(FD_WORK_BUDGET / (2 * work));
  if (checks > 200) checks = 200;
  if (checks < 16) checks = 16;

  printf("attention B=%d T=%d nh=%d nkv=%d hd=%d window=%d softcap=%g scale=%g (FD on %d elements per tensor)\n", B,
         T, nh, nkv, hd, window, softcap, scale, checks);
  check_error("attention_forward out", rel_error_vs(out, ref_out, nq), TOL_FORWARD);
  check_error("attention_forward lse", rel_error_vs(lse, ref_lse, nl), TOL_FORWARD);
  check_error("attention_backward dq (FD)", fd_rel_error(ref_loss, &ref, ref.q, dq, nq, checks, rng), TOL_BACKWARD);
  check_error("attention_backward dk (FD)", fd_rel_error(ref_loss, &ref, ref.k, dk, nk, checks, rng), TOL_BACKWARD);
  check_error("attention_backward dv (FD)", fd_rel_error(ref_loss, &ref, ref.v, dv, nk, checks, rng), TOL_BACKWARD);

  // NULL gradients: each part alone gives the same bits
  float *dq2 = malloc(sizeof(float) * nq), *dk2 = malloc(sizeof(float) * nk), *dv2 = malloc(sizeof(float) * nk);
  attention_backward(dq2, NULL, NULL, g, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);
  attention_backward(NULL, dk2, NULL, g, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);
  attention_backward(NULL, NULL, dv2, g, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);
  CHECK(same_bits(dq, dq2, nq) && same_bits(dk, dk2, nk) && same_bits(dv, dv2, nk),
        "attention_backward with NULL gradients differs");

  // determinism: 1 thread and 3 threads give the same bits
  float *out1 = malloc(sizeof(float) * nq), *lse1 = malloc(sizeof(float) * nl);
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  attention_forward(out1, lse1, q, k, v, B, T, nh, nkv, hd, window, softcap, scale);
  attention_backward(dq2, dk2, dv2, g, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);
  omp_set_num_threads(threads);
  CHECK(same_bits(out, out1, nq) && same_bits(lse, lse1, nl), "attention_forward depends on thread count");
  CHECK(same_bits(dq, dq2, nq) && same_bits(dk, dk2, nk) && same_bits(dv, dv2, nk),
        "attention_backward depends on thread count");
  omp_set_num_threads(3);
  attention_backward(dq2, dk2, dv2, g, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);
  omp_set_num_threads(threads);
  CHECK(same_bits(dq, dq2, nq) && same_bits(dk, dk2, nk) && same_bits(dv, dv2, nk),
        "attention_backward depends on thread count (3)");

  free(q), free(k), free(v), free(g), free(out), free(lse), free(dq), free(dk), free(dv), free(dq2), free(dk2),
      free(dv2), free(out1), free(lse1);
  free(ref.q), free(ref.k), free(ref.v), free(ref.g), free(ref_out), free(ref_lse);
}

// lengths (B): valid cache rows per sequence; cache rows past them hold NaN,
// so reading one would show. For each b the decode output must equal, bitwise,
// the last row of attention_forward run on that sequence's first lengths[b]
// cache rows (with the decode query as its last query row).
static void check_decode(Rng *rng, int B, int S, int nh, int nkv, int hd, int window, float softcap, float scale,
                         const int *lengths) {
  long nq = (long)B * nh * hd, nc = (long)B * S * nkv * hd, row = (long)nkv * hd;
  float *q = random_floats(rng, nq, 1.0f);
  float *k_cache = random_floats(rng, nc, 1.0f), *v_cache = random_floats(rng, nc, 1.0f);
  for (int b = 0; b < B; b++) {
    int valid = lengths[b] > 0 ? lengths[b] : 0;
    fill_nan(k_cache + ((long)b * S + valid) * row, (S - valid) * row);
    fill_nan(v_cache + ((long)b * S + valid) * row, (S - valid) * row);
  }
  float *out = malloc(sizeof(float) * nq);
  attention_decode(out, q, k_cache, v_cache, lengths, B, S, nh, nkv, hd, window, softcap, scale);

  printf("attention_decode B=%d S=%d nh=%d nkv=%d hd=%d window=%d softcap=%g lengths=", B, S, nh, nkv, hd, window,
         softcap);
  for (int b = 0; b < B; b++) printf("%d%s", lengths[b], b + 1 < B ? "," : "\n");
  double worst = 0;
  for (int b = 0; b < B; b++) {
    int L = lengths[b];
    float *out_b = out + (long)b * nh * hd;
    if (L < 1) {
      int zeros = 1;
      for (long i = 0; i < (long)nh * hd; i++) zeros &= out_b[i] == 0.0f;
      CHECK(zeros, "attention_decode length %d: expected zero output", L);
      continue;
    }
    // the prefill of this sequence: earlier query rows random, the last one is the decode query
    long nseq = (long)L * nh * hd;
    float *qseq = random_floats(rng, nseq, 1.0f);
    memcpy(qseq + (long)(L - 1) * nh * hd, q + (long)b * nh * hd, sizeof(float) * nh * hd);
    float *outseq = malloc(sizeof(float) * nseq), *lseseq = malloc(sizeof(float) * nh * L);
    const float *kb = k_cache + (long)b * S * row, *vb = v_cache + (long)b * S * row;
    attention_forward(outseq, lseseq, qseq, kb, vb, 1, L, nh, nkv, hd, window, softcap, scale);
    CHECK(same_bits(outseq + (long)(L - 1) * nh * hd, out_b, (long)nh * hd),
          "attention_decode b=%d length %d differs from the last forward row", b, L);

    AttnRef ref = {1, L, nh, nkv, hd, window, softcap, scale, to_double(qseq, nseq), to_double(kb, L * row),
                   to_double(vb, L * row), NULL};
    double *ref_out = malloc(sizeof(double) * nseq);
    ref_attention(ref_out, NULL, &ref);
    double e = rel_error_vs(out_b, ref_out + (long)(L - 1) * nh * hd, (long)nh * hd);
    if (e > worst) worst = e;
    free(qseq), free(outseq), free(lseseq), free(ref.q), free(ref.k), free(ref.v), free(ref_out);
  }
  check_error("attention_decode out vs reference (bitwise = forward row)", worst, TOL_FORWARD);
  free(q), free(k_cache), free(v_cache), free(out);
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 2024);
  printf("tolerance: forward %.0e, backward %.0e (fp32 dot products over hd, expf, sums over keys)\n", TOL_FORWARD,
         TOL_BACKWARD);
  //                      B  T    nh nkv hd   window softcap scale
  check_attention(&rng, 2, 1, 2, 1, 64, 0, 0.0f, 0.125f);       // seq 1
  check_attention(&rng, 2, 37, 4, 4, 64, 0, 0.0f, 0.125f);      // GQA ratio 1, plain causal
  check_attention(&rng, 1, 70, 4, 2, 64, 16, 1.5f, 0.125f);     // ratio 2, window, softcap, 2 key tiles
  check_attention(&rng, 1, 9, 4, 1, 256, 100, 0.0f, 0.0625f);   // ratio 4, head_dim 256, window > T
  check_attention(&rng, 1, 12, 2, 1, 64, 1, 1.0f, 0.125f);      // window 1: each query sees itself only
  check_attention(&rng, 1, 20, 8, 2, 64, 5, 0.0f, 0.2f);        // ratio 4 with window, scale != hd^-1/2
  check_attention(&rng, 1, 6, 2, 2, 256, 0, 3.0f, 0.0625f);     // head_dim 256 with softcap
  check_attention(&rng, 2, 130, 2, 1, 64, 0, 2.0f, 0.125f);     // 3 key tiles, B > 1
  check_attention(&rng, 1, 150, 2, 2, 64, 70, 2.0f, 0.125f);    // window spanning tiles
  check_attention(&rng, 1, 45, 2, 1, 40, 0, 1.0f, 0.158f);      // head_dim not a multiple of the vector chunk
  check_attention(&rng, 1, 70, 2, 1, 64, INT_MAX, 0.0f, 0.125f); // a window as large as int allows: no overflow

  int lengths_a[4] = {1, 7, 20, 13};
  check_decode(&rng, 4, 20, 4, 2, 64, 0, 0.0f, 0.125f, lengths_a);
  check_decode(&rng, 4, 20, 4, 2, 64, 5, 1.5f, 0.125f, lengths_a);
  int lengths_b[3] = {150, 0, 65};  // a length 0 sequence gives zeros
  check_decode(&rng, 3, 150, 4, 1, 64, 64, 2.0f, 0.125f, lengths_b);
  int lengths_c[2] = {9, 3};
  check_decode(&rng, 2, 12, 8, 2, 256, 0, 0.0f, 0.0625f, lengths_c);
  int lengths_d[4] = {45, 33, 4, 38};  // rows in 4-row blocks and in the leftover rows, head_dim 40
  check_decode(&rng, 4, 45, 2, 1, 40, 30, 1.0f, 0.158f, lengths_d);
  TEST_MAIN_END();
}
