// tests/test_ops_attention_prefill.c: attention_prefill (a chunk of one
// sequence's queries against its KV cache, kernels/cpu/attention_prefill.c)
// against an independent float64 reference: query i sees cache rows j <
// lengths[i] with j > lengths[i] - 1 - W under a window, score = q.k * scale,
// softcap c*tanh(s/c) before the mask, GQA kv head = h / (nh / nkv). Also:
// each query equals attention_decode of that query bitwise (the contract in
// ops.h), cache rows past the longest length (NaN here) are never read, a
// length outside [1, S] gives a zero row, and 1 and 3 threads give the same bits.
#include <limits.h>
#include <omp.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// As tests/test_ops_attention.c: fp32 dots over hd <= 256, exp, sums over
// <= a few hundred keys: errors of a few 1e-7 of the largest value; a wrong
// mask, scale or softcap gives O(1e-2) or more.
#define TOL 1e-5

typedef struct {
  int N, S, nh, nkv, hd, window;
  double softcap, scale;
  const int *lengths;  // (N)
  double *q, *k, *v;   // q (N, nh, hd); k, v (S, nkv, hd)
} PrefillRef;

// out (N, nh, hd); a query whose length is outside [1, S] gets zeros
static void ref_prefill(double *out, const PrefillRef *r) {
  int nh = r->nh, nkv = r->nkv, hd = r->hd;
  double *scores = malloc(sizeof(double) * r->S);
  for (int i = 0; i < r->N; i++)
    for (int h = 0; h < nh; h++) {
      double *o = out + ((long)i * nh + h) * hd;
      for (int d = 0; d < hd; d++) o[d] = 0;
      int L = r->lengths[i], p = L - 1, kvh = h / (nh / nkv);
      if (L < 1 || L > r->S) continue;
      const double *qi = r->q + ((long)i * nh + h) * hd;
      double max = -INFINITY;
      for (int j = 0; j < L; j++) {
        const double *kj = r->k + ((long)j * nkv + kvh) * hd;
        double s = 0;
        for (int d = 0; d < hd; d++) s += qi[d] * kj[d];
        s *= r->scale;
        if (r->softcap > 0) s = r->softcap * tanh(s / r->softcap);
        int visible = r->window <= 0 || (long)j > (long)p - r->window;
        scores[j] = visible ? s : -INFINITY;
        if (scores[j] > max) max = scores[j];
      }
      double sum = 0;
      for (int j = 0; j < L; j++) sum += exp(scores[j] - max);
      for (int j = 0; j < L; j++) {
        double w = exp(scores[j] - max) / sum;
        const double *vj = r->v + ((long)j * nkv + kvh) * hd;
        for (int d = 0; d < hd; d++) o[d] += w * vj[d];
      }
    }
  free(scores);
}

static int same_bits(const float *a, const float *b, long n) { return memcmp(a, b, sizeof(float) * n) == 0; }

static void check_prefill(Rng *rng, int N, int S, int nh, int nkv, int hd, int window, float softcap, float scale,
                          const int *lengths, const char *what) {
  long nq = (long)N * nh * hd, row = (long)nkv * hd, qrow = (long)nh * hd;
  int longest = 0;
  for (int i = 0; i < N; i++) longest = lengths[i] > longest && lengths[i] <= S ? lengths[i] : longest;
  float *q = random_floats(rng, nq, 1.0f);
  float *k = random_floats(rng, (long)S * row, 1.0f), *v = random_floats(rng, (long)S * row, 1.0f);
  for (long x = (long)longest * row; x < (long)S * row; x++) k[x] = v[x] = NAN;  // never to be read
  float *out = malloc(sizeof(float) * nq), *row_out = malloc(sizeof(float) * qrow);
  for (long x = 0; x < nq; x++) out[x] = NAN;  // must be overwritten
  attention_prefill(out, q, k, v, lengths, N, S, nh, nkv, hd, window, softcap, scale);

  printf("attention_prefill %s: N=%d S=%d nh=%d nkv=%d hd=%d window=%d softcap=%g\n", what, N, S, nh, nkv, hd,
         window, softcap);
  PrefillRef ref = {N, S, nh, nkv, hd, window, softcap, scale, lengths, to_double(q, nq), to_double(k, longest * row),
                    to_double(v, longest * row)};
  double *ref_out = malloc(sizeof(double) * nq);
  ref_prefill(ref_out, &ref);
  check_error("out vs float64 reference", rel_error_vs(out, ref_out, nq), TOL);

  int decode_differs = 0;
  for (int i = 0; i < N; i++) {
    attention_decode(row_out, q + i * qrow, k, v, lengths + i, 1, S, nh, nkv, hd, window, softcap, scale);
    decode_differs += !same_bits(row_out, out + i * qrow, qrow);
  }
  CHECK(decode_differs == 0, "attention_prefill %s: %d of %d queries differ from attention_decode", what,
        decode_differs, N);

  float *out1 = malloc(sizeof(float) * nq);
  int threads = omp_get_max_threads();
  for (int t = 1; t <= 3; t += 2) {
    omp_set_num_threads(t);
    attention_prefill(out1, q, k, v, lengths, N, S, nh, nkv, hd, window, softcap, scale);
    CHECK(same_bits(out, out1, nq), "attention_prefill %s depends on the thread count (%d)", what, t);
  }
  omp_set_num_threads(threads);
  free(q), free(k), free(v), free(out), free(row_out), free(out1), free(ref.q), free(ref.k), free(ref.v), free(ref_out);
}

// A chunk of n queries at positions start .. start + n - 1.
static void check_chunk(Rng *rng, int start, int n, int S, int nh, int nkv, int hd, int window, float softcap,
                        float scale) {
  int *lengths = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) lengths[i] = start + i + 1;
  char what[64];
  snprintf(what, sizeof what, "chunk at %d", start);
  check_prefill(rng, n, S, nh, nkv, hd, window, softcap, scale, lengths, what);
  free(lengths);
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 77);
  printf("tolerance %.0e (fp32 dot products over hd, exp, sums over keys)\n", TOL);
  //                 start n   S    nh nkv hd   window softcap scale
  check_chunk(&rng, 0, 64, 64, 4, 2, 64, 0, 0.0f, 0.125f);        // a first chunk: causal within itself
  check_chunk(&rng, 419, 64, 500, 4, 2, 64, 128, 0.0f, 0.125f);   // later chunk, sliding window over tiles
  check_chunk(&rng, 419, 64, 500, 4, 2, 64, 0, 0.0f, 0.125f);     // later chunk, global layer
  check_chunk(&rng, 70, 37, 110, 4, 1, 64, 16, 1.5f, 0.125f);     // leftover rows (37 = 32 + 4 + 1), softcap
  check_chunk(&rng, 5, 1, 6, 2, 2, 64, 0, 0.0f, 0.125f);          // one query
  check_chunk(&rng, 3, 9, 12, 8, 2, 256, 100, 0.0f, 0.0625f);     // head_dim 256, window > length
  check_chunk(&rng, 10, 12, 30, 2, 1, 64, 1, 1.0f, 0.125f);       // window 1: each query sees itself only
  check_chunk(&rng, 20, 25, 45, 2, 1, 40, 30, 1.0f, 0.158f);      // head_dim not a multiple of the lane chunk
  check_chunk(&rng, 60, 70, 130, 2, 2, 64, INT_MAX, 0.0f, 0.125f); // the largest window: no overflow
  int odd[7] = {3, 0, 50, 17, 51, 1, 52};  // any order, a length 0 and one past S (52 > 51): zero rows
  check_prefill(&rng, 7, 51, 4, 2, 64, 20, 0.0f, 0.125f, odd, "lengths out of order");
  TEST_MAIN_END();
}
