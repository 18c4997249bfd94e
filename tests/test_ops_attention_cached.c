// tests/test_ops_attention_cached.c: attention_cached (queries against a KV
// cache with keys transposed per tile, kernels/cpu/attention_cached.c)
// against an independent float64 reference: query i of sequence seqs[i] sees
// cache rows j < lengths[i] with j > lengths[i] - 1 - W under a window,
// score = q.k * scale, softcap c*tanh(s/c) before the mask, GQA kv head =
// h / (nh / nkv). Also: each query equals attention_decode of that query on
// the row-layout cache bitwise (the contract in ops.h); cache rows past a
// sequence's longest length hold NaN in both layouts, so reading one would
// show; a length outside [1, S] gives a zero row; 1 and 3 threads give the
// same bits. Cases: prefill chunks (one sequence), decode rows (one query per
// sequence, in any order) and mixes.
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
  const int *seqs, *lengths;  // (N) each
  double *q, *k, *v;          // q (N, nh, hd); k, v (B, S, nkv, hd)
} CachedRef;

// out (N, nh, hd); a query whose length is outside [1, S] gets zeros
static void ref_cached(double *out, const CachedRef *r) {
  int nh = r->nh, nkv = r->nkv, hd = r->hd;
  double *scores = malloc(sizeof(double) * r->S);
  for (int i = 0; i < r->N; i++)
    for (int h = 0; h < nh; h++) {
      double *o = out + ((long)i * nh + h) * hd;
      for (int d = 0; d < hd; d++) o[d] = 0;
      int L = r->lengths[i], p = L - 1, kvh = h / (nh / nkv);
      if (L < 1 || L > r->S) continue;
      const double *qi = r->q + ((long)i * nh + h) * hd;
      const double *k = r->k + (long)r->seqs[i] * r->S * nkv * hd, *v = r->v + (long)r->seqs[i] * r->S * nkv * hd;
      double max = -INFINITY;
      for (int j = 0; j < L; j++) {
        const double *kj = k + ((long)j * nkv + kvh) * hd;
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
        const double *vj = v + ((long)j * nkv + kvh) * hd;
        for (int d = 0; d < hd; d++) o[d] += w * vj[d];
      }
    }
  free(scores);
}

static int same_bits(const float *a, const float *b, long n) { return memcmp(a, b, sizeof(float) * n) == 0; }

// k_tiles (B, ceil(S/TILE), nkv, hd, TILE) from the row layout k (B, S, nkv, hd);
// positions past S (the last tile's padding) get NaN.
static void to_tiles(float *k_tiles, const float *k, int B, int S, int nkv, int hd) {
  int T = ATTN_CACHE_TILE, tiles = (S + T - 1) / T;
  for (int b = 0; b < B; b++)
    for (int p = 0; p < tiles * T; p++)
      for (int h = 0; h < nkv; h++)
        for (int d = 0; d < hd; d++)
          k_tiles[((((long)b * tiles + p / T) * nkv + h) * hd + d) * T + p % T] =
              p < S ? k[(((long)b * S + p) * nkv + h) * hd + d] : NAN;
}

static void check_cached(Rng *rng, int B, int N, int S, int nh, int nkv, int hd, int window, float softcap, float scale,
                         const int *seqs, const int *lengths, const char *what) {
  long nq = (long)N * nh * hd, row = (long)nkv * hd, qrow = (long)nh * hd, nc = (long)B * S * row;
  int tiles = (S + ATTN_CACHE_TILE - 1) / ATTN_CACHE_TILE;
  float *q = random_floats(rng, nq, 1.0f);
  float *k = random_floats(rng, nc, 1.0f), *v = random_floats(rng, nc, 1.0f);
  for (int b = 0; b < B; b++) {  // rows past the longest length of b are never to be read
    int valid = 0;
    for (int i = 0; i < N; i++)
      if (seqs[i] == b && lengths[i] <= S && lengths[i] > valid) valid = lengths[i];
    for (long x = ((long)b * S + valid) * row; x < (long)(b + 1) * S * row; x++) k[x] = v[x] = NAN;
  }
  float *k_tiles = malloc(sizeof(float) * B * tiles * ATTN_CACHE_TILE * row);
  to_tiles(k_tiles, k, B, S, nkv, hd);
  float *out = malloc(sizeof(float) * nq), *row_out = malloc(sizeof(float) * qrow);
  for (long x = 0; x < nq; x++) out[x] = NAN;  // must be overwritten
  attention_cached(out, q, k_tiles, v, seqs, lengths, N, S, nh, nkv, hd, window, softcap, scale);

  printf("attention_cached %s: B=%d N=%d S=%d nh=%d nkv=%d hd=%d window=%d softcap=%g\n", what, B, N, S, nh, nkv, hd,
         window, softcap);
  CachedRef ref = {N, S, nh, nkv, hd, window, softcap, scale, seqs, lengths, to_double(q, nq), to_double(k, nc),
                   to_double(v, nc)};
  double *ref_out = malloc(sizeof(double) * nq);
  ref_cached(ref_out, &ref);
  check_error("out vs float64 reference", rel_error_vs(out, ref_out, nq), TOL);

  int decode_differs = 0;
  for (int i = 0; i < N; i++) {
    long seq = (long)seqs[i] * S * row;
    attention_decode(row_out, q + i * qrow, k + seq, v + seq, lengths + i, 1, S, nh, nkv, hd, window, softcap, scale);
    decode_differs += !same_bits(row_out, out + i * qrow, qrow);
  }
  CHECK(decode_differs == 0, "attention_cached %s: %d of %d queries differ from attention_decode", what,
        decode_differs, N);

  float *out1 = malloc(sizeof(float) * nq);
  int threads = omp_get_max_threads();
  for (int t = 1; t <= 3; t += 2) {
    omp_set_num_threads(t);
    attention_cached(out1, q, k_tiles, v, seqs, lengths, N, S, nh, nkv, hd, window, softcap, scale);
    CHECK(same_bits(out, out1, nq), "attention_cached %s depends on the thread count (%d)", what, t);
  }
  omp_set_num_threads(threads);
  free(q), free(k), free(v), free(k_tiles), free(out), free(row_out), free(out1);
  free(ref.q), free(ref.k), free(ref.v), free(ref_out);
}

// A prefill chunk: n queries of sequence 1 (of 2) at positions start .. start + n - 1.
static void check_chunk(Rng *rng, int start, int n, int S, int nh, int nkv, int hd, int window, float softcap,
                        float scale) {
  int *seqs = malloc(sizeof(int) * n), *lengths = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) seqs[i] = 1, lengths[i] = start + i + 1;
  char what[64];
  snprintf(what, sizeof what, "chunk at %d", start);
  check_cached(rng, 2, n, S, nh, nkv, hd, window, softcap, scale, seqs, lengths, what);
  free(seqs);
  free(lengths);
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 77);
  printf("tolerance %.0e (fp32 dot products over hd, exp, sums over keys)\n", TOL);
  //                 start n   S    nh nkv hd   window softcap scale
  check_chunk(&rng, 0, 64, 64, 4, 2, 64, 0, 0.0f, 0.125f);         // a first chunk: causal within itself
  check_chunk(&rng, 419, 64, 500, 4, 2, 64, 128, 0.0f, 0.125f);    // later chunk, sliding window over tiles
  check_chunk(&rng, 419, 64, 500, 4, 2, 64, 0, 0.0f, 0.125f);      // later chunk, global layer
  check_chunk(&rng, 70, 37, 110, 4, 1, 64, 16, 1.5f, 0.125f);      // leftover rows (37 = 32 + 4 + 1), softcap
  check_chunk(&rng, 5, 1, 6, 2, 2, 64, 0, 0.0f, 0.125f);           // one query
  check_chunk(&rng, 3, 9, 12, 8, 2, 256, 100, 0.0f, 0.0625f);      // head_dim 256, window > length
  check_chunk(&rng, 10, 12, 30, 2, 1, 64, 1, 1.0f, 0.125f);        // window 1: each query sees itself only
  check_chunk(&rng, 20, 25, 45, 2, 1, 40, 30, 1.0f, 0.158f);       // head_dim not a multiple of the lane chunk
  check_chunk(&rng, 60, 70, 130, 2, 2, 64, INT_MAX, 0.0f, 0.125f); // the largest window: no overflow
  // decode: one query per sequence, in any order, a length 0 and one past S (zero rows)
  int dseqs[6] = {3, 0, 5, 1, 4, 2}, dlengths[6] = {1, 150, 65, 0, 151, 64};
  check_cached(&rng, 6, 6, 150, 4, 2, 64, 64, 2.0f, 0.125f, dseqs, dlengths, "decode rows");
  check_cached(&rng, 6, 6, 150, 4, 4, 40, 0, 0.0f, 0.158f, dseqs, dlengths, "decode rows, hd 40");
  // a mix: runs of one sequence (longer than a block, and split by others), lengths out of order
  int mseqs[12] = {1, 1, 1, 1, 1, 1, 0, 0, 2, 1, 1, 2}, mlengths[12] = {3, 9, 50, 17, 51, 2, 20, 21, 1, 40, 41, 7};
  check_cached(&rng, 3, 12, 51, 4, 2, 64, 20, 0.0f, 0.125f, mseqs, mlengths, "mixed sequences");
  TEST_MAIN_END();
}
