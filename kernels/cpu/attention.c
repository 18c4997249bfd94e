// kernels/cpu/attention.c: causal attention on the CPU in float32 (see ops.h).
// Defines attention_forward, attention_backward and attention_decode.
// Features: sliding window, Gemma 2 score softcap, grouped-query heads.
// Memory is linear in T: no (T, T) score matrix is ever formed. The forward
// walks keys in tiles with an online softmax and saves the row log-sum-exp;
// the backward recomputes each probability as exp(score - lse).
//
// Vectorization: key tiles are aligned at multiples of ATTN_KEY_TILE and
// transposed once per task into (hd, tile) buffers, so a query row's scores
// against the whole tile are hd broadcast-multiply-adds over a contiguous
// tile vector (no horizontal sums); softcap, exp and the softmax weights then
// run over the tile buffer with vm_tanhf/vm_expf (vecmath.h), and the P @ V,
// dq, dk, dv updates are axpys over hd. Keys a row may not see are masked in
// the tile buffer (score -inf, weight 0) and skipped in the axpys.
//
// Determinism: every output element is written by exactly one task and
// every sum runs in an order fixed by the code (tile sums by a fixed lane
// tree), so results are bitwise the same for any thread count, and decode
// runs the very same row-tile routine as the forward.
#include "kernels/ops.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu/vecmath.h"

// Keys per tile: the tile's scores, weights and transposed keys/values live
// on the stack. Query rows per forward/dq task: the rows share each
// transposed key tile, which amortizes the transposition.
#define ATTN_KEY_TILE 64
#define ATTN_QUERY_TILE 32
// Lanes of the fixed-order tile sum (a multiple of any SIMD width used).
#define ATTN_SUM_LANES 16
_Static_assert(ATTN_KEY_TILE % ATTN_SUM_LANES == 0, "tile sum needs whole lanes");

static inline int min_int(int a, int b) { return a < b ? a : b; }
static inline int max_int(int a, int b) { return a > b ? a : b; }

// D_i = dout_i . out_i for rows r < n (rows `stride` floats apart), each a
// plain chain over d in order: the same chain as tile_dots' dp = dout . v, so
// a row that sees a single key (out = v exactly) gets dp - D = 0 exactly and
// a zero gradient, as exact math says. The rows are independent chains, which
// keeps the loop busy despite the sequential sums.
// D (n), dout, out at row 0
static void row_dots(float *restrict D, const float *restrict dout, const float *restrict out, long stride, int n,
                     int hd) {
  for (int r = 0; r < n; r++) D[r] = 0.0f;
  for (int d = 0; d < hd; d++)
    for (int r = 0; r < n; r++) D[r] += dout[r * stride + d] * out[r * stride + d];
}

// First key that query i may see: the causal mask alone allows 0, a sliding
// window of W keys (itself included) allows i - W + 1.
static inline int first_visible_key(int i, int window) { return window > 0 ? max_int(0, i - window + 1) : 0; }

// xT (hd, ATTN_KEY_TILE): column c = row t0 + c of x for t0 + c in [lo, hi],
// zero elsewhere (so no row outside [lo, hi] is read: decode's cache holds
// garbage past each length). x points at row 0 of the head, rows x_stride apart.
static void transpose_tile(float *restrict xT, const float *restrict x, long x_stride, int t0, int lo, int hi,
                           int hd) {
  for (int c = 0; c < ATTN_KEY_TILE; c++) {
    int j = t0 + c;
    if (j < lo || j > hi) {
      for (int d = 0; d < hd; d++) xT[d * ATTN_KEY_TILE + c] = 0.0f;
    } else {
      const float *row = x + j * x_stride;
      for (int d = 0; d < hd; d++) xT[d * ATTN_KEY_TILE + c] = row[d];
    }
  }
}

// The tile kernels below come in a one-row and an ATTN_ROWS-row form. Both
// compute every output element as the same chain, in the same order (a sum
// over d, or over keys c, one multiply-add at a time), so a row gives the
// same bits whichever form ran it: decode (one row) equals the forward
// (blocks of rows) bitwise. The block form keeps ATTN_ROWS accumulators of
// ATTN_VEC floats in registers and reuses each load of the shared operand
// ATTN_ROWS times; the one-row form serves decode and the rows left over.
#define ATTN_ROWS 4
#define ATTN_VEC 16

// out[c] = sum_d row[d] * xT[d][c] for the chunks of ATTN_VEC columns that
// meet columns [u0, u1] (what some row of the block can see); other columns
// are set to 0, the caller masks them anyway.
// out (ATTN_KEY_TILE), row (hd), xT (hd, ATTN_KEY_TILE)
static inline void zero_outside_chunks(float *out, int u0, int u1) {
  int cb0 = u0 / ATTN_VEC * ATTN_VEC, cb1 = u1 / ATTN_VEC * ATTN_VEC + ATTN_VEC;
  for (int c = 0; c < cb0; c++) out[c] = 0.0f;
  for (int c = cb1; c < ATTN_KEY_TILE; c++) out[c] = 0.0f;
}

static inline void tile_dots1(float *restrict out, const float *restrict row, const float *restrict xT, int u0,
                              int u1, int hd) {
  zero_outside_chunks(out, u0, u1);
  for (int cb = u0 / ATTN_VEC * ATTN_VEC; cb <= u1; cb += ATTN_VEC) {
    float a[ATTN_VEC] = {0};
    for (int d = 0; d < hd; d++) {
      const float *col = xT + d * ATTN_KEY_TILE + cb;
      float x = row[d];
#pragma omp simd
      for (int l = 0; l < ATTN_VEC; l++) a[l] += x * col[l];
    }
    for (int l = 0; l < ATTN_VEC; l++) out[cb + l] = a[l];
  }
}

// tile_dots1 for ATTN_ROWS rows r (row_stride floats apart) at once.
// out (ATTN_ROWS, ATTN_KEY_TILE), rows at row 0, xT (hd, ATTN_KEY_TILE)
static inline void tile_dots4(float (*restrict out)[ATTN_KEY_TILE], const float *restrict rows, long row_stride,
                              const float *restrict xT, int u0, int u1, int hd) {
  const float *r0 = rows, *r1 = rows + row_stride, *r2 = r1 + row_stride, *r3 = r2 + row_stride;
  for (int r = 0; r < ATTN_ROWS; r++) zero_outside_chunks(out[r], u0, u1);
  for (int cb = u0 / ATTN_VEC * ATTN_VEC; cb <= u1; cb += ATTN_VEC) {
    float a0[ATTN_VEC] = {0}, a1[ATTN_VEC] = {0}, a2[ATTN_VEC] = {0}, a3[ATTN_VEC] = {0};
    for (int d = 0; d < hd; d++) {
      const float *col = xT + d * ATTN_KEY_TILE + cb;
      float x0 = r0[d], x1 = r1[d], x2 = r2[d], x3 = r3[d];
#pragma omp simd
      for (int l = 0; l < ATTN_VEC; l++) {
        a0[l] += x0 * col[l];
        a1[l] += x1 * col[l];
        a2[l] += x2 * col[l];
        a3[l] += x3 * col[l];
      }
    }
    for (int l = 0; l < ATTN_VEC; l++) {
      out[0][cb + l] = a0[l];
      out[1][cb + l] = a1[l];
      out[2][cb + l] = a2[l];
      out[3][cb + l] = a3[l];
    }
  }
}

// acc[d] += sum_{c = c0..c1} w[c] * x[t0 + c][d], keys in order.
// acc (hd), w (ATTN_KEY_TILE), x at row 0 of the head, rows x_stride apart
static inline void tile_accumulate1(float *restrict acc, const float *restrict w, const float *restrict x,
                                    long x_stride, int t0, int c0, int c1, int hd) {
  int d0 = 0;
  for (; d0 + ATTN_VEC <= hd; d0 += ATTN_VEC) {
    float a[ATTN_VEC];
    for (int l = 0; l < ATTN_VEC; l++) a[l] = acc[d0 + l];
    for (int c = c0; c <= c1; c++) {
      const float *xr = x + (t0 + c) * x_stride + d0;
      float w0 = w[c];
#pragma omp simd
      for (int l = 0; l < ATTN_VEC; l++) a[l] += w0 * xr[l];
    }
    for (int l = 0; l < ATTN_VEC; l++) acc[d0 + l] = a[l];
  }
  // hd not a multiple of ATTN_VEC: the same chains, keys outer so that the
  // loop over d stays elementwise (a loop over keys inside could become an
  // in-order vector reduction that rounds each product apart: other bits)
  for (int c = c0; c <= c1; c++) {
    const float *xr = x + (t0 + c) * x_stride;
    float w0 = w[c];
    for (int d = d0; d < hd; d++) acc[d] += w0 * xr[d];
  }
}

// tile_accumulate1 for ATTN_ROWS rows: acc rows acc_stride floats apart, w (ATTN_ROWS, ATTN_KEY_TILE).
static inline void tile_accumulate4(float *restrict acc, long acc_stride, const float (*restrict w)[ATTN_KEY_TILE],
                                    const float *restrict x, long x_stride, int t0, int c0, int c1, int hd) {
  float *acc0 = acc, *acc1 = acc + acc_stride, *acc2 = acc1 + acc_stride, *acc3 = acc2 + acc_stride;
  int d0 = 0;
  for (; d0 + ATTN_VEC <= hd; d0 += ATTN_VEC) {
    float a0[ATTN_VEC], a1[ATTN_VEC], a2[ATTN_VEC], a3[ATTN_VEC];
    for (int l = 0; l < ATTN_VEC; l++) {
      a0[l] = acc0[d0 + l];
      a1[l] = acc1[d0 + l];
      a2[l] = acc2[d0 + l];
      a3[l] = acc3[d0 + l];
    }
    for (int c = c0; c <= c1; c++) {
      const float *xr = x + (t0 + c) * x_stride + d0;
      float w0 = w[0][c], w1 = w[1][c], w2 = w[2][c], w3 = w[3][c];
#pragma omp simd
      for (int l = 0; l < ATTN_VEC; l++) {
        a0[l] += w0 * xr[l];
        a1[l] += w1 * xr[l];
        a2[l] += w2 * xr[l];
        a3[l] += w3 * xr[l];
      }
    }
    for (int l = 0; l < ATTN_VEC; l++) {
      acc0[d0 + l] = a0[l];
      acc1[d0 + l] = a1[l];
      acc2[d0 + l] = a2[l];
      acc3[d0 + l] = a3[l];
    }
  }
  for (int c = c0; c <= c1; c++) {  // hd not a multiple of ATTN_VEC, as in tile_accumulate1
    const float *xr = x + (t0 + c) * x_stride;
    float w0 = w[0][c], w1 = w[1][c], w2 = w[2][c], w3 = w[3][c];
    for (int d = d0; d < hd; d++) {
      acc0[d] += w0 * xr[d];
      acc1[d] += w1 * xr[d];
      acc2[d] += w2 * xr[d];
      acc3[d] += w3 * xr[d];
    }
  }
}

// Raw dots -> scores as the forward sees them: raw = q.k * scale, softcapped
// when softcap > 0, -inf outside columns [c0, c1]. dcap (or NULL) gets the
// derivative of the capped score w.r.t. raw (1 - tanh^2, or 1 without a cap).
// s, dcap (ATTN_KEY_TILE)
static inline void finish_scores(float *restrict s, float *restrict dcap, int c0, int c1, float softcap,
                                 float scale) {
  if (softcap > 0.0f) {
    for (int c = 0; c < ATTN_KEY_TILE; c++) {
      float t = vm_tanhf(s[c] * scale / softcap);
      s[c] = softcap * t;
      if (dcap) dcap[c] = 1.0f - t * t;
    }
  } else {
    for (int c = 0; c < ATTN_KEY_TILE; c++) {
      s[c] = s[c] * scale;
      if (dcap) dcap[c] = 1.0f;
    }
  }
  for (int c = 0; c < ATTN_KEY_TILE; c++) s[c] = c >= c0 && c <= c1 ? s[c] : -INFINITY;
}

// Sum of a tile in a fixed order: lanes of every ATTN_SUM_LANES-th element,
// then a halving tree. Elementwise code only, so vectorizing it cannot
// reorder anything.
static inline float tile_sum(const float *x) {
  float lanes[ATTN_SUM_LANES];
  for (int l = 0; l < ATTN_SUM_LANES; l++) lanes[l] = x[l];
  for (int c = ATTN_SUM_LANES; c < ATTN_KEY_TILE; c += ATTN_SUM_LANES)
    for (int l = 0; l < ATTN_SUM_LANES; l++) lanes[l] += x[c + l];
  for (int w = ATTN_SUM_LANES / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) lanes[l] += lanes[l + w];
  return lanes[0];
}

// One row's online-softmax step over a key tile, visible columns [c0, c1]:
// s (ATTN_KEY_TILE) holds the raw dots on entry and the weights
// p = exp(score - new max) on exit (0 where masked); acc (hd), the
// unnormalized sum of p * v, is rescaled to the new max (the caller then adds
// this tile's p @ v); *running_max and *running_sum are updated.
static inline void row_softmax_step(float *restrict s, float *restrict acc, float *running_max, float *running_sum,
                                    int c0, int c1, int hd, float softcap, float scale) {
  finish_scores(s, NULL, c0, c1, softcap, scale);
  float tile_max = -INFINITY;
#pragma omp simd reduction(max : tile_max)
  for (int c = 0; c < ATTN_KEY_TILE; c++) tile_max = s[c] > tile_max ? s[c] : tile_max;
  float new_max = *running_max > tile_max ? *running_max : tile_max;
  for (int c = 0; c < ATTN_KEY_TILE; c++) s[c] = vm_expf(s[c] - new_max);  // masked: exp(-inf) = 0
  // rescale what was summed against the old max (exp(-inf) = 0 on the first tile)
  float correction = vm_expf(*running_max - new_max);
  *running_sum = *running_sum * correction + tile_sum(s);
  for (int d = 0; d < hd; d++) acc[d] *= correction;
  *running_max = new_max;
}

// out_row (hd) = acc / sum; returns the row's lse.
static inline float attention_row_finish(float *out_row, const float *acc, float running_max, float running_sum,
                                         int hd) {
  float inv_sum = 1.0f / running_sum;
  for (int d = 0; d < hd; d++) out_row[d] = acc[d] * inv_sum;
  return running_max + logf(running_sum);
}

// Visible columns [*c0, *c1] of key tile t0 for query i; false when none.
static inline int visible_columns(int i, int t0, int t_last, int window, int *c0, int *c1) {
  int j0 = max_int(t0, first_visible_key(i, window)), j1 = min_int(t_last, i);
  *c0 = j0 - t0;
  *c1 = j1 - t0;
  return j0 <= j1;
}

// One parallel task of the forward and of the dq pass: query rows i0..i1 of
// head h in sequence b, and where that head's rows start.
typedef struct QueryTileTask {
  int b, h, i0, i1;
  long kv_head_offset;  // key 0 of (b, kv head of h) in k/v (B, T, nkv, hd)
  long q_head_offset;   // query row 0 of (b, h) in q/out (B, T, nh, hd)
} QueryTileTask;

static inline int query_tile_count(int T) { return (T + ATTN_QUERY_TILE - 1) / ATTN_QUERY_TILE; }

static inline QueryTileTask query_tile_task(long task, int T, int nh, int nkv, int hd) {
  int qtiles = query_tile_count(T);
  QueryTileTask t;
  int qt = (int)(task % qtiles);
  t.h = (int)((task / qtiles) % nh);
  t.b = (int)(task / ((long)qtiles * nh));
  t.i0 = qt * ATTN_QUERY_TILE;
  t.i1 = min_int(T - 1, t.i0 + ATTN_QUERY_TILE - 1);
  t.kv_head_offset = (long)t.b * T * nkv * hd + (long)(t.h / (nh / nkv)) * hd;
  t.q_head_offset = (long)t.b * T * nh * hd + (long)t.h * hd;
  return t;
}

// out (B, T, nh, hd), lse (B, nh, T) or NULL, q (B, T, nh, hd), k, v (B, T, nkv, hd)
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T, int nh,
                       int nkv, int hd, int window, float softcap, float scale) {
  long kv_stride = (long)nkv * hd;
  long q_stride = (long)nh * hd;
  long tasks = (long)B * nh * query_tile_count(T);
  // One task per (b, h, tile of query rows); dynamic scheduling balances the
  // causal triangle and cannot change any result.
#pragma omp parallel for schedule(dynamic, 1)
  for (long task = 0; task < tasks; task++) {
    QueryTileTask t = query_tile_task(task, T, nh, nkv, hd);
    int b = t.b, h = t.h, i0 = t.i0, i1 = t.i1;
    const float *k_head = k + t.kv_head_offset, *v_head = v + t.kv_head_offset;
    const float *q_head = q + t.q_head_offset;
    float *out_head = out + t.q_head_offset;
    float kT[hd * ATTN_KEY_TILE];     // (hd, tile)
    float acc[ATTN_QUERY_TILE * hd];  // (rows, hd)
    float row_max[ATTN_QUERY_TILE], row_sum[ATTN_QUERY_TILE];
    float s[ATTN_ROWS][ATTN_KEY_TILE];  // (rows, tile) dots, then weights
    for (int r = 0; r <= i1 - i0; r++) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
      for (int d = 0; d < hd; d++) acc[r * hd + d] = 0.0f;
    }
    int first_key = first_visible_key(i0, window);
    for (int t0 = first_key / ATTN_KEY_TILE * ATTN_KEY_TILE; t0 <= i1; t0 += ATTN_KEY_TILE) {
      int t_last = min_int(T - 1, t0 + ATTN_KEY_TILE - 1);
      transpose_tile(kT, k_head, kv_stride, t0, first_key, i1, hd);
      int i = i0;
      for (; i + ATTN_ROWS - 1 <= i1; i += ATTN_ROWS) {
        int c0[ATTN_ROWS], c1[ATTN_ROWS], any = 0, u0 = ATTN_KEY_TILE, u1 = -1;
        for (int r = 0; r < ATTN_ROWS; r++)
          if (visible_columns(i + r, t0, t_last, window, &c0[r], &c1[r])) {
            any = 1;
            u0 = min_int(u0, c0[r]);
            u1 = max_int(u1, c1[r]);
          }
        if (!any) continue;
        tile_dots4(s, q_head + i * q_stride, q_stride, kT, u0, u1, hd);
        for (int r = 0; r < ATTN_ROWS; r++) {
          int rr = i + r - i0;
          if (c0[r] <= c1[r]) {
            row_softmax_step(s[r], acc + rr * hd, &row_max[rr], &row_sum[rr], c0[r], c1[r], hd, softcap, scale);
          } else {
            for (int c = 0; c < ATTN_KEY_TILE; c++) s[r][c] = 0.0f;  // nothing visible: adds zeros
          }
        }
        // the union of the rows' columns: each row's weight is 0 outside its own
        tile_accumulate4(acc + (i - i0) * hd, hd, (const float(*)[ATTN_KEY_TILE])s, v_head, kv_stride, t0, u0, u1,
                         hd);
      }
      for (; i <= i1; i++) {
        int c0, c1, rr = i - i0;
        if (!visible_columns(i, t0, t_last, window, &c0, &c1)) continue;
        tile_dots1(s[0], q_head + i * q_stride, kT, c0, c1, hd);
        row_softmax_step(s[0], acc + rr * hd, &row_max[rr], &row_sum[rr], c0, c1, hd, softcap, scale);
        tile_accumulate1(acc + rr * hd, s[0], v_head, kv_stride, t0, c0, c1, hd);
      }
    }
    for (int i = i0; i <= i1; i++) {
      int r = i - i0;
      float row_lse = attention_row_finish(out_head + i * q_stride, acc + r * hd, row_max[r], row_sum[r], hd);
      if (lse) lse[((long)b * nh + h) * T + i] = row_lse;
    }
  }
}

// yT[d][c] += x0[d] w[0][c] + x1[d] w[1][c] + x2[d] w[2][c] + x3[d] w[3][c], rows
// in that order, over the whole tile (weights are 0 where a row sees no key).
// Accumulating dk/dv transposed keeps the 4 weight vectors of each column
// chunk in registers across d: one load and one store per 4 multiply-adds.
// yT (hd, ATTN_KEY_TILE); x0..x3 (hd); w (ATTN_ROWS, ATTN_KEY_TILE)
static inline void tile_outer4(float *restrict yT, const float *x0, const float *x1, const float *x2, const float *x3,
                               const float (*restrict w)[ATTN_KEY_TILE], int hd) {
  for (int d = 0; d < hd; d++) {
    float a0 = x0[d], a1 = x1[d], a2 = x2[d], a3 = x3[d];
    float *y = yT + d * ATTN_KEY_TILE;
#pragma omp simd
    for (int c = 0; c < ATTN_KEY_TILE; c++) y[c] = y[c] + a0 * w[0][c] + a1 * w[1][c] + a2 * w[2][c] + a3 * w[3][c];
  }
}

// Gradient weights of one query row against a key tile, from its raw dots
// s = q.k and dp = dout.v: p = exp(score - lse), ds = p (dp - D) dcap * scale
// (the gradient w.r.t. q.k), both zero outside columns [c0, c1].
// s (ATTN_KEY_TILE) in: dots, out: p; dp (ATTN_KEY_TILE) in: dots, out: ds
static inline void row_grad_step(float *restrict s, float *restrict dp, float row_lse, float D, int c0, int c1,
                                 float softcap, float scale) {
  float dcap[ATTN_KEY_TILE];
  finish_scores(s, dcap, c0, c1, softcap, scale);
  for (int c = 0; c < ATTN_KEY_TILE; c++) {
    s[c] = vm_expf(s[c] - row_lse);  // masked: exp(-inf) = 0, so ds = 0 too
    dp[c] = s[c] * (dp[c] - D) * dcap[c] * scale;
  }
}

// dq for every query row: dq_i = sum_j ds_ij * k_j with ds from row_grad_step.
// One task per (b, h, tile of query rows), key tiles transposed once per task.
// dq (B, T, nh, hd); dout, q, out (B, T, nh, hd); k, v (B, T, nkv, hd); lse (B, nh, T)
static void attention_backward_dq(float *dq, const float *dout, const float *q, const float *k, const float *v,
                                  const float *out, const float *lse, int B, int T, int nh, int nkv, int hd,
                                  int window, float softcap, float scale) {
  long kv_stride = (long)nkv * hd;
  long q_stride = (long)nh * hd;
  long tasks = (long)B * nh * query_tile_count(T);
#pragma omp parallel for schedule(dynamic, 1)
  for (long task = 0; task < tasks; task++) {
    QueryTileTask t = query_tile_task(task, T, nh, nkv, hd);
    int b = t.b, h = t.h, i0 = t.i0, i1 = t.i1;
    const float *k_head = k + t.kv_head_offset, *v_head = v + t.kv_head_offset;
    long q_head = t.q_head_offset;  // offset of query row 0 of (b, h)
    const float *lse_row = lse + ((long)b * nh + h) * T;
    float kT[hd * ATTN_KEY_TILE], vT[hd * ATTN_KEY_TILE];  // (hd, tile)
    float D[ATTN_QUERY_TILE];                              // dout_i . out_i
    float s[ATTN_ROWS][ATTN_KEY_TILE], dp[ATTN_ROWS][ATTN_KEY_TILE];
    row_dots(D, dout + q_head + i0 * q_stride, out + q_head + i0 * q_stride, q_stride, i1 - i0 + 1, hd);
    for (int i = i0; i <= i1; i++)
      for (int d = 0; d < hd; d++) dq[q_head + i * q_stride + d] = 0.0f;
    int first_key = first_visible_key(i0, window);
    for (int t0 = first_key / ATTN_KEY_TILE * ATTN_KEY_TILE; t0 <= i1; t0 += ATTN_KEY_TILE) {
      int t_last = min_int(T - 1, t0 + ATTN_KEY_TILE - 1);
      transpose_tile(kT, k_head, kv_stride, t0, first_key, i1, hd);
      transpose_tile(vT, v_head, kv_stride, t0, first_key, i1, hd);
      int i = i0;
      for (; i + ATTN_ROWS - 1 <= i1; i += ATTN_ROWS) {
        int c0[ATTN_ROWS], c1[ATTN_ROWS], any = 0, u0 = ATTN_KEY_TILE, u1 = -1;
        for (int r = 0; r < ATTN_ROWS; r++)
          if (visible_columns(i + r, t0, t_last, window, &c0[r], &c1[r])) {
            any = 1;
            u0 = min_int(u0, c0[r]);
            u1 = max_int(u1, c1[r]);
          }
        if (!any) continue;
        long qo = q_head + i * q_stride;
        tile_dots4(s, q + qo, q_stride, kT, u0, u1, hd);
        tile_dots4(dp, dout + qo, q_stride, vT, u0, u1, hd);
        for (int r = 0; r < ATTN_ROWS; r++) {
          if (c0[r] <= c1[r]) {
            row_grad_step(s[r], dp[r], lse_row[i + r], D[i + r - i0], c0[r], c1[r], softcap, scale);
          } else {
            for (int c = 0; c < ATTN_KEY_TILE; c++) dp[r][c] = 0.0f;
          }
        }
        tile_accumulate4(dq + qo, q_stride, (const float(*)[ATTN_KEY_TILE])dp, k_head, kv_stride, t0, u0, u1, hd);
      }
      for (; i <= i1; i++) {
        int c0, c1;
        if (!visible_columns(i, t0, t_last, window, &c0, &c1)) continue;
        long qo = q_head + i * q_stride;
        tile_dots1(s[0], q + qo, kT, c0, c1, hd);
        tile_dots1(dp[0], dout + qo, vT, c0, c1, hd);
        row_grad_step(s[0], dp[0], lse_row[i], D[i - i0], c0, c1, softcap, scale);
        tile_accumulate1(dq + qo, dp[0], k_head, kv_stride, t0, c0, c1, hd);
      }
    }
  }
}

// dk, dv for every key row. One task per (b, kv head, tile of keys) owns those
// dk/dv rows and adds the contributions of every query head of the group and
// every query that sees them, in (head, query) order, ATTN_ROWS queries per
// update, into transposed (hd, tile) accumulators written out at the end:
// deterministic without atomics, and parallel even when there is a single
// kv head.
// dk, dv (B, T, nkv, hd) or NULL; others as in attention_backward_dq
static void attention_backward_dkdv(float *dk, float *dv, const float *dout, const float *q, const float *k,
                                    const float *v, const float *out, const float *lse, int B, int T, int nh, int nkv,
                                    int hd, int window, float softcap, float scale) {
  int group = nh / nkv;
  long kv_stride = (long)nkv * hd;
  long q_stride = (long)nh * hd;
  int tiles = (T + ATTN_KEY_TILE - 1) / ATTN_KEY_TILE;
  long tasks = (long)B * nkv * tiles;
#pragma omp parallel for schedule(dynamic, 1)
  for (long task = 0; task < tasks; task++) {
    int tile = (int)(task % tiles);
    int kvh = (int)((task / tiles) % nkv);
    int b = (int)(task / ((long)tiles * nkv));
    int t0 = tile * ATTN_KEY_TILE;
    int t1 = min_int(T - 1, t0 + ATTN_KEY_TILE - 1);
    long head_offset = (long)b * T * kv_stride + (long)kvh * hd;  // key 0 of (b, kvh)
    const float *k_head = k + head_offset, *v_head = v + head_offset;
    float kT[hd * ATTN_KEY_TILE], vT[hd * ATTN_KEY_TILE];  // (hd, tile)
    float s[ATTN_ROWS][ATTN_KEY_TILE], dp[ATTN_ROWS][ATTN_KEY_TILE];
    transpose_tile(kT, k_head, kv_stride, t0, t0, t1, hd);
    transpose_tile(vT, v_head, kv_stride, t0, t0, t1, hd);
    float dkT[hd * ATTN_KEY_TILE], dvT[hd * ATTN_KEY_TILE];  // (hd, tile) this task's dk, dv, transposed
    memset(dkT, 0, sizeof(dkT));
    memset(dvT, 0, sizeof(dvT));
    // the last query that sees key t1 is t1 + W - 1 under a window (compared
    // as T - 1 - t1 < W so that a huge W cannot overflow)
    int last_query = window > 0 && T - 1 - t1 >= window ? t1 + window - 1 : T - 1;
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
      const float *lse_row = lse + ((long)b * nh + h) * T;
      long q_head = (long)b * T * q_stride + (long)h * hd;  // offset of query row 0 of (b, h)
      for (int i0 = t0; i0 <= last_query; i0 += ATTN_QUERY_TILE) {
        int i1 = min_int(last_query, i0 + ATTN_QUERY_TILE - 1);
        float D[ATTN_QUERY_TILE];  // dout_i . out_i of rows i0..i1
        row_dots(D, dout + q_head + i0 * q_stride, out + q_head + i0 * q_stride, q_stride, i1 - i0 + 1, hd);
        for (int i = i0; i <= i1; i += ATTN_ROWS) {
          int rows = min_int(ATTN_ROWS, i1 - i + 1);
          int c0[ATTN_ROWS], c1[ATTN_ROWS], u0 = ATTN_KEY_TILE, u1 = -1;
          for (int r = 0; r < rows; r++)
            if (visible_columns(i + r, t0, t1, window, &c0[r], &c1[r])) {
              u0 = min_int(u0, c0[r]);
              u1 = max_int(u1, c1[r]);
            }
          if (u0 > u1) continue;
          long qo = q_head + i * q_stride;
          if (rows == ATTN_ROWS) {
            tile_dots4(s, q + qo, q_stride, kT, u0, u1, hd);
            tile_dots4(dp, dout + qo, q_stride, vT, u0, u1, hd);
          } else {
            for (int r = 0; r < rows; r++) {
              tile_dots1(s[r], q + qo + r * q_stride, kT, u0, u1, hd);
              tile_dots1(dp[r], dout + qo + r * q_stride, vT, u0, u1, hd);
            }
          }
          for (int r = 0; r < rows; r++) {
            if (c0[r] <= c1[r]) {
              row_grad_step(s[r], dp[r], lse_row[i + r], D[i + r - i0], c0[r], c1[r], softcap, scale);
            } else {
              for (int c = 0; c < ATTN_KEY_TILE; c++) s[r][c] = dp[r][c] = 0.0f;
            }
          }
          // dv_j += sum_r p_rj dout_r, dk_j += sum_r ds_rj q_r, rows in order
          if (rows < ATTN_ROWS) {
            for (int r = rows; r < ATTN_ROWS; r++)  // absent rows: weight 0 on a real row
              for (int c = 0; c < ATTN_KEY_TILE; c++) s[r][c] = dp[r][c] = 0.0f;
          }
          const float *x0 = q + qo, *x1 = x0 + (rows > 1) * q_stride, *x2 = x0 + (rows > 2) * 2 * q_stride,
                      *x3 = x0 + (rows > 3) * 3 * q_stride;
          const float *g0 = dout + qo, *g1 = g0 + (x1 - x0), *g2 = g0 + (x2 - x0), *g3 = g0 + (x3 - x0);
          if (dv) tile_outer4(dvT, g0, g1, g2, g3, (const float(*)[ATTN_KEY_TILE])s, hd);
          if (dk) tile_outer4(dkT, x0, x1, x2, x3, (const float(*)[ATTN_KEY_TILE])dp, hd);
        }
      }
    }
    for (int j = t0; j <= t1; j++) {  // back to rows: this task owns dk, dv rows t0..t1
      long ko = head_offset + j * kv_stride;
      for (int d = 0; d < hd; d++) {
        if (dk) dk[ko + d] = dkT[d * ATTN_KEY_TILE + (j - t0)];
        if (dv) dv[ko + d] = dvT[d * ATTN_KEY_TILE + (j - t0)];
      }
    }
  }
}

// dq (B, T, nh, hd), dk, dv (B, T, nkv, hd) overwritten (each may be NULL);
// dout, q, out (B, T, nh, hd); k, v (B, T, nkv, hd); lse (B, nh, T)
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                        const float *v, const float *out, const float *lse, int B, int T, int nh, int nkv, int hd,
                        int window, float softcap, float scale) {
  if (dq) attention_backward_dq(dq, dout, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);
  if (dk || dv) attention_backward_dkdv(dk, dv, dout, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);
}

// One query per sequence at position lengths[b] - 1 against cache rows
// 0 .. lengths[b] - 1, same window and softcap rules and the same key tiles
// (aligned at multiples of ATTN_KEY_TILE) as the forward. A length outside
// [1, S] has no valid keys: its output rows are zero.
// out (B, nh, hd), q (B, nh, hd), k_cache, v_cache (B, S, nkv, hd), lengths (B)
void attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache, const int *lengths,
                      int B, int S, int nh, int nkv, int hd, int window, float softcap, float scale) {
  int group = nh / nkv;
  long kv_stride = (long)nkv * hd;
#pragma omp parallel for schedule(dynamic, 1)
  for (long r = 0; r < (long)B * nh; r++) {
    int b = (int)(r / nh), h = (int)(r % nh);
    float *out_row = out + r * hd;
    int length = lengths[b];
    if (length < 1 || length > S) {
      for (int d = 0; d < hd; d++) out_row[d] = 0.0f;
      continue;
    }
    int i = length - 1;
    long head_offset = (long)b * S * kv_stride + (long)(h / group) * hd;
    const float *k_head = k_cache + head_offset, *v_head = v_cache + head_offset;
    float kT[hd * ATTN_KEY_TILE];  // (hd, tile)
    float acc[hd];                 // (hd)
    float p[ATTN_KEY_TILE];        // (tile) dots, then weights
    float running_max = -INFINITY, running_sum = 0.0f;
    for (int d = 0; d < hd; d++) acc[d] = 0.0f;
    int first_key = first_visible_key(i, window);
    for (int t0 = first_key / ATTN_KEY_TILE * ATTN_KEY_TILE; t0 <= i; t0 += ATTN_KEY_TILE) {
      int c0, c1;
      visible_columns(i, t0, t0 + ATTN_KEY_TILE - 1, window, &c0, &c1);
      transpose_tile(kT, k_head, kv_stride, t0, t0 + c0, t0 + c1, hd);
      tile_dots1(p, q + r * hd, kT, c0, c1, hd);
      row_softmax_step(p, acc, &running_max, &running_sum, c0, c1, hd, softcap, scale);
      tile_accumulate1(acc, p, v_head, kv_stride, t0, c0, c1, hd);
    }
    attention_row_finish(out_row, acc, running_max, running_sum, hd);
  }
}
