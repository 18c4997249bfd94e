// kernels/cpu/attention_prefill.c: attention of a prefill chunk against its
// sequence's KV cache on the CPU in float32 (see ops.h). Defines
// attention_prefill.
//
// Why its own op: running a chunk's N queries as N attention_decode rows
// transposes every visible key tile once per (query, head); here the queries
// of a head are taken ATTN_PF_QUERY_TILE at a time, each key tile is
// transposed once for all of them, and blocks of ATTN_PF_ROWS queries share
// every load of it (the scheme of attention_forward, kernels/cpu/attention.c).
//
// Numerics: each query's result is computed with the chains attention_decode
// uses for that query (the same aligned key tiles of ATTN_PF_KEY_TILE keys,
// dots summed over d in order in ATTN_PF_VEC lanes, the same online softmax
// with vm_expf and the same fixed-order tile sum, P @ V summed over keys in
// order), so a query gives the bits attention_decode gives it
// (tests/test_ops_attention_prefill.c checks this): a sequence's cache is the
// same whether its tokens came in by prefill or by decode steps, up to the
// GEMMs around the attention. Columns a query may not see get weight 0
// exactly, which leaves its sums unchanged. Every output row is written by
// one task, so results do not depend on the thread count.
#include "kernels/ops.h"

#include <math.h>

#include "kernels/cpu/vecmath.h"

// These four must equal attention.c's ATTN_KEY_TILE, ATTN_VEC, ATTN_SUM_LANES
// and the (query-independent) key tile alignment for the bitwise match above.
#define ATTN_PF_KEY_TILE 64
#define ATTN_PF_VEC 16
#define ATTN_PF_SUM_LANES 16
#define ATTN_PF_ROWS 4
#define ATTN_PF_QUERY_TILE 32
_Static_assert(ATTN_PF_KEY_TILE % ATTN_PF_VEC == 0 && ATTN_PF_KEY_TILE % ATTN_PF_SUM_LANES == 0, "whole lanes");
_Static_assert(ATTN_PF_QUERY_TILE % ATTN_PF_ROWS == 0, "whole row blocks");

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

// Keys query position p may see: [first, p], first = p - W + 1 under a window.
static inline int first_key_of(int p, int window) { return window > 0 ? imax(0, p - window + 1) : 0; }

// kT (hd, KEY_TILE): column c = key t0 + c of the head for t0 + c in [lo, hi],
// 0 elsewhere, so no cache row outside [lo, hi] (written rows) is ever read.
// k_head at key 0 of the head, keys k_stride floats apart
static void load_key_tile(float *restrict kT, const float *restrict k_head, long k_stride, int t0, int lo, int hi,
                          int hd) {
  for (int c = 0; c < ATTN_PF_KEY_TILE; c++) {
    int j = t0 + c;
    const float *key = k_head + (long)j * k_stride;
    int inside = j >= lo && j <= hi;
    for (int d = 0; d < hd; d++) kT[d * ATTN_PF_KEY_TILE + c] = inside ? key[d] : 0.0f;
  }
}

// dots[r][c] = sum_d q_r[d] * kT[d][c] for the lane chunks meeting columns
// [u0, u1], 0 in the other chunks (masked by the caller anyway). Rows r past
// `rows` repeat the last row (their results are not used): one code path for
// any block size, each element the same chain whichever block it is in.
// dots (ROWS, KEY_TILE), q at row 0 of the block (rows q_stride apart), kT (hd, KEY_TILE)
static void block_dots(float (*restrict dots)[ATTN_PF_KEY_TILE], const float *restrict q, long q_stride, int rows,
                       const float *restrict kT, int u0, int u1, int hd) {
  const float *q0 = q, *q1 = q + imin(1, rows - 1) * q_stride, *q2 = q + imin(2, rows - 1) * q_stride,
              *q3 = q + imin(3, rows - 1) * q_stride;
  int cb0 = u0 / ATTN_PF_VEC * ATTN_PF_VEC, cb1 = u1 / ATTN_PF_VEC * ATTN_PF_VEC + ATTN_PF_VEC;
  for (int r = 0; r < ATTN_PF_ROWS; r++)
    for (int c = 0; c < ATTN_PF_KEY_TILE; c++)
      if (c < cb0 || c >= cb1) dots[r][c] = 0.0f;
  for (int cb = cb0; cb < cb1; cb += ATTN_PF_VEC) {
    float a0[ATTN_PF_VEC] = {0}, a1[ATTN_PF_VEC] = {0}, a2[ATTN_PF_VEC] = {0}, a3[ATTN_PF_VEC] = {0};
    for (int d = 0; d < hd; d++) {
      const float *col = kT + d * ATTN_PF_KEY_TILE + cb;
      float x0 = q0[d], x1 = q1[d], x2 = q2[d], x3 = q3[d];
#pragma omp simd
      for (int l = 0; l < ATTN_PF_VEC; l++) {
        a0[l] += x0 * col[l];
        a1[l] += x1 * col[l];
        a2[l] += x2 * col[l];
        a3[l] += x3 * col[l];
      }
    }
    for (int l = 0; l < ATTN_PF_VEC; l++) {
      dots[0][cb + l] = a0[l];
      dots[1][cb + l] = a1[l];
      dots[2][cb + l] = a2[l];
      dots[3][cb + l] = a3[l];
    }
  }
}

// Sum of a tile: lanes of every SUM_LANES-th element, then a halving tree.
static inline float tile_total(const float *x) {
  float lanes[ATTN_PF_SUM_LANES];
  for (int l = 0; l < ATTN_PF_SUM_LANES; l++) lanes[l] = x[l];
  for (int c = ATTN_PF_SUM_LANES; c < ATTN_PF_KEY_TILE; c += ATTN_PF_SUM_LANES)
    for (int l = 0; l < ATTN_PF_SUM_LANES; l++) lanes[l] += x[c + l];
  for (int w = ATTN_PF_SUM_LANES / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) lanes[l] += lanes[l + w];
  return lanes[0];
}

// One query's online-softmax step over a key tile it sees in columns
// [c0, c1]: s (KEY_TILE) holds its raw dots on entry and its weights
// exp(score - new max) on exit (0 outside [c0, c1]); acc (hd) is rescaled to
// the new max; *row_max and *row_sum are updated.
static void softmax_step(float *restrict s, float *restrict acc, float *row_max, float *row_sum, int c0, int c1,
                         int hd, float softcap, float scale) {
  if (softcap > 0.0f) {
    for (int c = 0; c < ATTN_PF_KEY_TILE; c++) s[c] = softcap * vm_tanhf(s[c] * scale / softcap);
  } else {
    for (int c = 0; c < ATTN_PF_KEY_TILE; c++) s[c] = s[c] * scale;
  }
  for (int c = 0; c < ATTN_PF_KEY_TILE; c++) s[c] = c >= c0 && c <= c1 ? s[c] : -INFINITY;
  float tile_max = -INFINITY;
#pragma omp simd reduction(max : tile_max)
  for (int c = 0; c < ATTN_PF_KEY_TILE; c++) tile_max = s[c] > tile_max ? s[c] : tile_max;
  float new_max = *row_max > tile_max ? *row_max : tile_max;
  for (int c = 0; c < ATTN_PF_KEY_TILE; c++) s[c] = vm_expf(s[c] - new_max);  // masked: exp(-inf) = 0
  float correction = vm_expf(*row_max - new_max);                              // 0 on a row's first tile
  *row_sum = *row_sum * correction + tile_total(s);
  for (int d = 0; d < hd; d++) acc[d] *= correction;
  *row_max = new_max;
}

// acc_r[d] += sum_{c = u0..u1} w[r][c] * v[t0 + c][d] for rows r < rows, keys
// in order (a row's weights are 0 outside its own columns, which adds exact
// zeros). Rows past `rows` read the last row and are not written back.
// acc rows acc_stride floats apart, w (ROWS, KEY_TILE), v_head at key 0, keys v_stride apart
static void block_accumulate(float *restrict acc, long acc_stride, int rows,
                             const float (*restrict w)[ATTN_PF_KEY_TILE], const float *restrict v_head, long v_stride,
                             int t0, int u0, int u1, int hd) {
  float *a0 = acc, *a1 = acc + imin(1, rows - 1) * acc_stride, *a2 = acc + imin(2, rows - 1) * acc_stride,
        *a3 = acc + imin(3, rows - 1) * acc_stride;
  int d0 = 0;
  for (; d0 + ATTN_PF_VEC <= hd; d0 += ATTN_PF_VEC) {
    float s0[ATTN_PF_VEC], s1[ATTN_PF_VEC], s2[ATTN_PF_VEC], s3[ATTN_PF_VEC];
    for (int l = 0; l < ATTN_PF_VEC; l++) {
      s0[l] = a0[d0 + l];
      s1[l] = a1[d0 + l];
      s2[l] = a2[d0 + l];
      s3[l] = a3[d0 + l];
    }
    for (int c = u0; c <= u1; c++) {
      const float *vr = v_head + (long)(t0 + c) * v_stride + d0;
      float w0 = w[0][c], w1 = w[1][c], w2 = w[2][c], w3 = w[3][c];
#pragma omp simd
      for (int l = 0; l < ATTN_PF_VEC; l++) {
        s0[l] += w0 * vr[l];
        s1[l] += w1 * vr[l];
        s2[l] += w2 * vr[l];
        s3[l] += w3 * vr[l];
      }
    }
    for (int l = 0; l < ATTN_PF_VEC; l++) a0[d0 + l] = s0[l];
    if (rows > 1)
      for (int l = 0; l < ATTN_PF_VEC; l++) a1[d0 + l] = s1[l];
    if (rows > 2)
      for (int l = 0; l < ATTN_PF_VEC; l++) a2[d0 + l] = s2[l];
    if (rows > 3)
      for (int l = 0; l < ATTN_PF_VEC; l++) a3[d0 + l] = s3[l];
  }
  // hd not a multiple of VEC: the same chains, keys outer, so that the loop
  // over d stays elementwise
  for (int c = u0; c <= u1; c++) {
    const float *vr = v_head + (long)(t0 + c) * v_stride;
    for (int r = 0; r < rows; r++)
      for (int d = d0; d < hd; d++) acc[r * acc_stride + d] += w[r][c] * vr[d];
  }
}

// Columns [*c0, *c1] of key tile t0 that position p sees; false when none.
static inline int seen_columns(int p, int t0, int window, int *c0, int *c1) {
  int j0 = imax(t0, first_key_of(p, window)), j1 = imin(t0 + ATTN_PF_KEY_TILE - 1, p);
  *c0 = j0 - t0;
  *c1 = j1 - t0;
  return j0 <= j1;
}

// Queries i0..i1 of head h: the task of one thread.
// out, q (N, nh, hd); k_cache, v_cache (S, nkv, hd); lengths (N)
static void prefill_query_tile(float *out, const float *q, const float *k_cache, const float *v_cache,
                               const int *lengths, int i0, int i1, int h, int S, int nh, int nkv, int hd, int window,
                               float softcap, float scale) {
  long q_stride = (long)nh * hd, kv_stride = (long)nkv * hd;
  const float *k_head = k_cache + (long)(h / (nh / nkv)) * hd, *v_head = v_cache + (long)(h / (nh / nkv)) * hd;
  const float *q_head = q + (long)h * hd;
  float *out_head = out + (long)h * hd;
  float kT[hd * ATTN_PF_KEY_TILE];        // (hd, KEY_TILE)
  float acc[ATTN_PF_QUERY_TILE * hd];     // (rows, hd) unnormalized P @ V
  float row_max[ATTN_PF_QUERY_TILE], row_sum[ATTN_PF_QUERY_TILE];
  float s[ATTN_PF_ROWS][ATTN_PF_KEY_TILE];  // (ROWS, KEY_TILE) dots, then weights
  int pos[ATTN_PF_QUERY_TILE];            // query positions, -1 for a length outside [1, S]
  int lo = S, hi = -1;                    // keys some valid query of the tile sees
  for (int i = i0; i <= i1; i++) {
    int r = i - i0;
    pos[r] = lengths[i] >= 1 && lengths[i] <= S ? lengths[i] - 1 : -1;
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
    for (int d = 0; d < hd; d++) acc[r * hd + d] = 0.0f;
    if (pos[r] < 0) continue;
    lo = imin(lo, first_key_of(pos[r], window));
    hi = imax(hi, pos[r]);
  }
  for (int t0 = hi < 0 ? 0 : lo / ATTN_PF_KEY_TILE * ATTN_PF_KEY_TILE; t0 <= hi; t0 += ATTN_PF_KEY_TILE) {
    load_key_tile(kT, k_head, kv_stride, t0, lo, hi, hd);
    for (int i = i0; i <= i1; i += ATTN_PF_ROWS) {
      int rows = imin(ATTN_PF_ROWS, i1 - i + 1), r0 = i - i0;
      int c0[ATTN_PF_ROWS], c1[ATTN_PF_ROWS], seen[ATTN_PF_ROWS], u0 = ATTN_PF_KEY_TILE, u1 = -1;
      for (int r = 0; r < rows; r++) {
        seen[r] = pos[r0 + r] >= 0 && seen_columns(pos[r0 + r], t0, window, &c0[r], &c1[r]);
        if (!seen[r]) continue;
        u0 = imin(u0, c0[r]);
        u1 = imax(u1, c1[r]);
      }
      if (u0 > u1) continue;
      block_dots(s, q_head + (long)i * q_stride, q_stride, rows, kT, u0, u1, hd);
      for (int r = 0; r < ATTN_PF_ROWS; r++) {
        if (r < rows && seen[r]) {
          softmax_step(s[r], acc + (r0 + r) * hd, &row_max[r0 + r], &row_sum[r0 + r], c0[r], c1[r], hd, softcap,
                       scale);
        } else {
          for (int c = 0; c < ATTN_PF_KEY_TILE; c++) s[r][c] = 0.0f;  // sees nothing here: adds zeros
        }
      }
      block_accumulate(acc + r0 * hd, hd, rows, (const float(*)[ATTN_PF_KEY_TILE])s, v_head, kv_stride, t0, u0, u1,
                       hd);
    }
  }
  for (int i = i0; i <= i1; i++) {
    int r = i - i0;
    float *o = out_head + (long)i * q_stride;
    float inv_sum = pos[r] >= 0 ? 1.0f / row_sum[r] : 0.0f;  // a query without keys gets zeros
    for (int d = 0; d < hd; d++) o[d] = pos[r] >= 0 ? acc[r * hd + d] * inv_sum : 0.0f;
  }
}

// out (N, nh, hd), q (N, nh, hd), k_cache, v_cache (S, nkv, hd), lengths (N)
void attention_prefill(float *out, const float *q, const float *k_cache, const float *v_cache, const int *lengths,
                       int N, int S, int nh, int nkv, int hd, int window, float softcap, float scale) {
  int qtiles = (N + ATTN_PF_QUERY_TILE - 1) / ATTN_PF_QUERY_TILE;
  long tasks = (long)nh * qtiles;
  // One task per (head, tile of queries); dynamic scheduling balances the
  // causal triangle and cannot change a result.
#pragma omp parallel for schedule(dynamic, 1)
  for (long task = 0; task < tasks; task++) {
    int h = (int)(task / qtiles), i0 = (int)(task % qtiles) * ATTN_PF_QUERY_TILE;
    int i1 = imin(N - 1, i0 + ATTN_PF_QUERY_TILE - 1);
    prefill_query_tile(out, q, k_cache, v_cache, lengths, i0, i1, h, S, nh, nkv, hd, window, softcap, scale);
  }
}
