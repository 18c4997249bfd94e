// kernels/cpu/attention_cached.c: attention of new queries (decode rows or a
// prefill chunk) against a KV cache whose keys are kept transposed per tile
// of ATTN_CACHE_TILE positions, on the CPU in float32 (see ops.h). Defines
// attention_cached.
//
// Why its own op: attention_decode transposes every visible key tile into a
// (hd, tile) buffer for each (query, head) before its dots, and that
// transposition (strided stores) cost more than the arithmetic: 36% of a
// prefill and about 40% of a 16-row decode step of small-10m. Here the
// cache holds each tile already transposed (written once per token by the
// caller), so a query reads it directly, every head of a GQA group shares
// it, and consecutive queries of one sequence (a prefill chunk) are taken in
// blocks of ATTN_CACHED_ROWS that share every load of it.
//
// Numerics: each query's result is computed with the chains attention_decode
// uses for that query (the same aligned key tiles, dots summed over d in
// order in ATTN_CACHED_VEC lanes, the same online softmax with vm_expf and
// fixed-order tile sum, P @ V summed over keys in order), so a query gives
// the bits attention_decode gives it on the row-layout cache
// (tests/test_ops_attention_cached.c checks this). Columns a query may not
// see are masked to weight 0 exactly, whatever the tile holds there (keys of
// other queries, or stale rows past the length). Every output row is written
// by one task, so results do not depend on the thread count.
#include "kernels/ops.h"

#include <math.h>

#include "kernels/cpu/vecmath.h"

// ATTN_CACHED_VEC and ATTN_CACHED_SUM_LANES must equal attention.c's ATTN_VEC
// and ATTN_SUM_LANES, and ATTN_CACHE_TILE its ATTN_KEY_TILE, for the bitwise
// match above.
#define TILE ATTN_CACHE_TILE
#define ATTN_CACHED_VEC 16
#define ATTN_CACHED_SUM_LANES 16
#define ATTN_CACHED_ROWS 4
#define ATTN_CACHED_QUERY_TILE 32
_Static_assert(TILE % ATTN_CACHED_VEC == 0 && TILE % ATTN_CACHED_SUM_LANES == 0, "whole lanes");

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

// Keys query position p may see: [first, p], first = p - W + 1 under a window.
static inline int first_key_of(int p, int window) { return window > 0 ? imax(0, p - window + 1) : 0; }

// Columns [*c0, *c1] of key tile t0 that position p sees; false when none.
static inline int seen_columns(int p, int t0, int window, int *c0, int *c1) {
  int j0 = imax(t0, first_key_of(p, window)), j1 = imin(t0 + TILE - 1, p);
  *c0 = j0 - t0;
  *c1 = j1 - t0;
  return j0 <= j1;
}

// dots[c] = sum_d q[d] * kT[d][c] for every column of the tile (the caller
// masks those the query may not see). Each row of kT is read whole, and the
// TILE / VEC column chunks are independent chains, so the loop is not
// bound by the latency of one chain of multiply-adds.
// dots (TILE), q (hd), kT (hd, TILE)
static void row_dots(float *restrict dots, const float *restrict q, const float *restrict kT, int hd) {
  float a[TILE] = {0};
  for (int d = 0; d < hd; d++) {
    const float *k_row = kT + d * TILE;
    float x = q[d];
#pragma omp simd
    for (int c = 0; c < TILE; c++) a[c] += x * k_row[c];
  }
  for (int c = 0; c < TILE; c++) dots[c] = a[c];
}

// row_dots for ATTN_CACHED_ROWS queries (q_stride floats apart) at once, each
// load of kT used four times; each element the same chain as in row_dots.
// dots (ROWS, TILE), q at row 0 of the block, kT (hd, TILE)
static void block_dots(float (*restrict dots)[TILE], const float *restrict q, long q_stride, const float *restrict kT,
                       int hd) {
  const float *q0 = q, *q1 = q + q_stride, *q2 = q1 + q_stride, *q3 = q2 + q_stride;
  float a0[TILE] = {0}, a1[TILE] = {0}, a2[TILE] = {0}, a3[TILE] = {0};
  for (int d = 0; d < hd; d++) {
    const float *k_row = kT + d * TILE;
    float x0 = q0[d], x1 = q1[d], x2 = q2[d], x3 = q3[d];
#pragma omp simd
    for (int c = 0; c < TILE; c++) {
      a0[c] += x0 * k_row[c];
      a1[c] += x1 * k_row[c];
      a2[c] += x2 * k_row[c];
      a3[c] += x3 * k_row[c];
    }
  }
  for (int c = 0; c < TILE; c++) {
    dots[0][c] = a0[c];
    dots[1][c] = a1[c];
    dots[2][c] = a2[c];
    dots[3][c] = a3[c];
  }
}

// Sum of a tile: lanes of every SUM_LANES-th element, then a halving tree.
static inline float tile_total(const float *x) {
  float lanes[ATTN_CACHED_SUM_LANES];
  for (int l = 0; l < ATTN_CACHED_SUM_LANES; l++) lanes[l] = x[l];
  for (int c = ATTN_CACHED_SUM_LANES; c < TILE; c += ATTN_CACHED_SUM_LANES)
    for (int l = 0; l < ATTN_CACHED_SUM_LANES; l++) lanes[l] += x[c + l];
  for (int w = ATTN_CACHED_SUM_LANES / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) lanes[l] += lanes[l + w];
  return lanes[0];
}

// One query's online-softmax step over a key tile it sees in columns
// [c0, c1]: s (TILE) holds its raw dots on entry and its weights
// exp(score - new max) on exit (0 outside [c0, c1]); acc (hd) is rescaled to
// the new max; *row_max and *row_sum are updated.
static void softmax_step(float *restrict s, float *restrict acc, float *row_max, float *row_sum, int c0, int c1,
                         int hd, float softcap, float scale) {
  if (softcap > 0.0f) {
    for (int c = 0; c < TILE; c++) s[c] = softcap * vm_tanhf(s[c] * scale / softcap);
  } else {
    for (int c = 0; c < TILE; c++) s[c] = s[c] * scale;
  }
  for (int c = 0; c < TILE; c++) s[c] = c >= c0 && c <= c1 ? s[c] : -INFINITY;
  float tile_max = -INFINITY;
#pragma omp simd reduction(max : tile_max)
  for (int c = 0; c < TILE; c++) tile_max = s[c] > tile_max ? s[c] : tile_max;
  float new_max = *row_max > tile_max ? *row_max : tile_max;
  for (int c = 0; c < TILE; c++) s[c] = vm_expf(s[c] - new_max);  // masked: exp(-inf) = 0
  float correction = vm_expf(*row_max - new_max);                  // 0 on a query's first tile
  *row_sum = *row_sum * correction + tile_total(s);
  for (int d = 0; d < hd; d++) acc[d] *= correction;
  *row_max = new_max;
}

// acc[d] += sum_{c = c0..c1} w[c] * v[t0 + c][d], keys in order, in blocks
// of ACC_BLOCK dimensions held in registers (independent chains, each value
// row read whole), then ATTN_CACHED_VEC, then one at a time: the blocking
// changes no element's chain.
// acc (hd), w (TILE), v_head at key 0 of the head, keys v_stride floats apart
#define ACC_BLOCK 64
static void row_accumulate(float *restrict acc, const float *restrict w, const float *restrict v_head, long v_stride,
                           int t0, int c0, int c1, int hd) {
  int d0 = 0;
  for (; d0 + ACC_BLOCK <= hd; d0 += ACC_BLOCK) {
    float a[ACC_BLOCK];
    for (int l = 0; l < ACC_BLOCK; l++) a[l] = acc[d0 + l];
    for (int c = c0; c <= c1; c++) {
      const float *vr = v_head + (long)(t0 + c) * v_stride + d0;
      float w0 = w[c];
#pragma omp simd
      for (int l = 0; l < ACC_BLOCK; l++) a[l] += w0 * vr[l];
    }
    for (int l = 0; l < ACC_BLOCK; l++) acc[d0 + l] = a[l];
  }
  for (; d0 + ATTN_CACHED_VEC <= hd; d0 += ATTN_CACHED_VEC) {
    float a[ATTN_CACHED_VEC];
    for (int l = 0; l < ATTN_CACHED_VEC; l++) a[l] = acc[d0 + l];
    for (int c = c0; c <= c1; c++) {
      const float *vr = v_head + (long)(t0 + c) * v_stride + d0;
      float w0 = w[c];
#pragma omp simd
      for (int l = 0; l < ATTN_CACHED_VEC; l++) a[l] += w0 * vr[l];
    }
    for (int l = 0; l < ATTN_CACHED_VEC; l++) acc[d0 + l] = a[l];
  }
  // the last hd % VEC: keys outer, so that the loop over d stays elementwise
  for (int c = c0; c <= c1; c++) {
    const float *vr = v_head + (long)(t0 + c) * v_stride;
    for (int d = d0; d < hd; d++) acc[d] += w[c] * vr[d];
  }
}

// row_accumulate for ATTN_CACHED_ROWS queries over the union [u0, u1] of
// their columns (a query's weights are 0 outside its own, which adds exact
// zeros), blocks of ATTN_CACHED_VEC dimensions (4 rows: 4 chains already).
// acc rows acc_stride floats apart, w (ROWS, TILE)
static void block_accumulate(float *restrict acc, long acc_stride, const float (*restrict w)[TILE],
                             const float *restrict v_head, long v_stride, int t0, int u0, int u1, int hd) {
  float *a0 = acc, *a1 = acc + acc_stride, *a2 = a1 + acc_stride, *a3 = a2 + acc_stride;
  int d0 = 0;
  for (; d0 + ATTN_CACHED_VEC <= hd; d0 += ATTN_CACHED_VEC) {
    float s0[ATTN_CACHED_VEC], s1[ATTN_CACHED_VEC], s2[ATTN_CACHED_VEC], s3[ATTN_CACHED_VEC];
    for (int l = 0; l < ATTN_CACHED_VEC; l++) {
      s0[l] = a0[d0 + l];
      s1[l] = a1[d0 + l];
      s2[l] = a2[d0 + l];
      s3[l] = a3[d0 + l];
    }
    for (int c = u0; c <= u1; c++) {
      const float *vr = v_head + (long)(t0 + c) * v_stride + d0;
      float w0 = w[0][c], w1 = w[1][c], w2 = w[2][c], w3 = w[3][c];
#pragma omp simd
      for (int l = 0; l < ATTN_CACHED_VEC; l++) {
        s0[l] += w0 * vr[l];
        s1[l] += w1 * vr[l];
        s2[l] += w2 * vr[l];
        s3[l] += w3 * vr[l];
      }
    }
    for (int l = 0; l < ATTN_CACHED_VEC; l++) {
      a0[d0 + l] = s0[l];
      a1[d0 + l] = s1[l];
      a2[d0 + l] = s2[l];
      a3[d0 + l] = s3[l];
    }
  }
  for (int c = u0; c <= u1; c++) {  // the last hd % VEC, as in row_accumulate
    const float *vr = v_head + (long)(t0 + c) * v_stride;
    for (int d = d0; d < hd; d++) {
      a0[d] += w[0][c] * vr[d];
      a1[d] += w[1][c] * vr[d];
      a2[d] += w[2][c] * vr[d];
      a3[d] += w[3][c] * vr[d];
    }
  }
}

// Where one task's queries read: queries i0..i1 (one sequence) of head h.
typedef struct CachedTask {
  const float *k_tiles;  // (tiles, nkv, hd, TILE) of the task's sequence
  const float *v_head;   // key 0 of the head's kv head in v_cache, rows kv_stride apart
  const float *q_head;   // query i0 of head h, rows q_stride apart
  float *out_head;       // the same in out
  int kvh, i0, i1;
} CachedTask;

// Queries i0..i1 of one sequence and one head: the work of one task.
// lengths (N) as in attention_cached
static void cached_query_tile(const CachedTask *t, const int *lengths, int S, int nh, int nkv, int hd, int window,
                              float softcap, float scale) {
  long q_stride = (long)nh * hd, kv_stride = (long)nkv * hd;
  int n = t->i1 - t->i0 + 1;
  float acc[ATTN_CACHED_QUERY_TILE * hd];  // (n, hd) unnormalized P @ V
  float row_max[ATTN_CACHED_QUERY_TILE], row_sum[ATTN_CACHED_QUERY_TILE];
  float s[ATTN_CACHED_ROWS][TILE];  // (ROWS, TILE) dots, then weights
  int pos[ATTN_CACHED_QUERY_TILE];  // query positions, -1 for a length outside [1, S]
  int lo = S, hi = -1;              // keys some valid query of the task sees
  for (int r = 0; r < n; r++) {
    int len = lengths[t->i0 + r];
    pos[r] = len >= 1 && len <= S ? len - 1 : -1;
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
    for (int d = 0; d < hd; d++) acc[r * hd + d] = 0.0f;
    if (pos[r] < 0) continue;
    lo = imin(lo, first_key_of(pos[r], window));
    hi = imax(hi, pos[r]);
  }
  for (int t0 = hi < 0 ? 0 : lo / TILE * TILE; t0 <= hi; t0 += TILE) {
    const float *kT = t->k_tiles + ((long)(t0 / TILE) * nkv + t->kvh) * hd * TILE;  // (hd, TILE)
    int r = 0;
    for (; r + ATTN_CACHED_ROWS <= n; r += ATTN_CACHED_ROWS) {
      int c0[ATTN_CACHED_ROWS], c1[ATTN_CACHED_ROWS], seen[ATTN_CACHED_ROWS], u0 = TILE, u1 = -1;
      for (int k = 0; k < ATTN_CACHED_ROWS; k++) {
        seen[k] = pos[r + k] >= 0 && seen_columns(pos[r + k], t0, window, &c0[k], &c1[k]);
        if (!seen[k]) continue;
        u0 = imin(u0, c0[k]);
        u1 = imax(u1, c1[k]);
      }
      if (u0 > u1) continue;
      block_dots(s, t->q_head + r * q_stride, q_stride, kT, hd);
      for (int k = 0; k < ATTN_CACHED_ROWS; k++) {
        if (seen[k]) {
          softmax_step(s[k], acc + (r + k) * hd, &row_max[r + k], &row_sum[r + k], c0[k], c1[k], hd, softcap, scale);
        } else {
          for (int c = 0; c < TILE; c++) s[k][c] = 0.0f;  // sees nothing here: adds zeros
        }
      }
      block_accumulate(acc + r * hd, hd, (const float(*)[TILE])s, t->v_head, kv_stride, t0, u0, u1, hd);
    }
    for (; r < n; r++) {  // the rows left over, and decode's single rows
      int c0, c1;
      if (pos[r] < 0 || !seen_columns(pos[r], t0, window, &c0, &c1)) continue;
      row_dots(s[0], t->q_head + r * q_stride, kT, hd);
      softmax_step(s[0], acc + r * hd, &row_max[r], &row_sum[r], c0, c1, hd, softcap, scale);
      row_accumulate(acc + r * hd, s[0], t->v_head, kv_stride, t0, c0, c1, hd);
    }
  }
  for (int r = 0; r < n; r++) {
    float *o = t->out_head + r * q_stride;
    float inv_sum = pos[r] >= 0 ? 1.0f / row_sum[r] : 0.0f;  // a query without keys gets zeros
    for (int d = 0; d < hd; d++) o[d] = pos[r] >= 0 ? acc[r * hd + d] * inv_sum : 0.0f;
  }
}

// Query i0 and how many queries from it form one task: a run of queries of
// one sequence, at most ATTN_CACHED_QUERY_TILE long. Task k starts where
// task k - 1 ended, so the tasks are found by one walk over seqs.
static int task_length(const int *seqs, int N, int i0) {
  int n = 1;
  while (i0 + n < N && n < ATTN_CACHED_QUERY_TILE && seqs[i0 + n] == seqs[i0]) n++;
  return n;
}

// out (N, nh, hd), q (N, nh, hd), k_tiles (B, ceil(S/TILE), nkv, hd, TILE),
// v_cache (B, S, nkv, hd), seqs (N), lengths (N)
void attention_cached(float *out, const float *q, const float *k_tiles, const float *v_cache, const int *seqs,
                      const int *lengths, int N, int S, int nh, int nkv, int hd, int window, float softcap,
                      float scale) {
  long q_stride = (long)nh * hd, kv_stride = (long)nkv * hd;
  long tiles = (S + TILE - 1) / TILE, seq_tiles = tiles * nkv * hd * TILE;  // floats of k_tiles per sequence
  // Query tiles in order; at most N of them. Walked once, then split over
  // threads with every head of a tile, so that the parallel loop can index them.
  int tile_start[N > 0 ? N : 1], count = 0;
  for (int i = 0; i < N; i += task_length(seqs, N, i)) tile_start[count++] = i;
  long tasks = (long)count * nh;
  // dynamic scheduling balances the causal triangle and cannot change a result
#pragma omp parallel for schedule(dynamic, 1)
  for (long task = 0; task < tasks; task++) {
    int i0 = tile_start[task / nh], h = (int)(task % nh), kvh = h / (nh / nkv), b = seqs[i0];
    CachedTask t = {k_tiles + b * seq_tiles,
                    v_cache + (long)b * S * kv_stride + (long)kvh * hd,
                    q + i0 * q_stride + (long)h * hd,
                    out + i0 * q_stride + (long)h * hd,
                    kvh,
                    i0,
                    i0 + task_length(seqs, N, i0) - 1};
    cached_query_tile(&t, lengths, S, nh, nkv, hd, window, softcap, scale);
  }
}
