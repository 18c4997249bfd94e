// kernels/cpu/attention.c: causal attention on the CPU in float32 (see ops.h).
// Defines attention_forward, attention_backward and attention_decode.
// Features: sliding window, Gemma 2 score softcap, grouped-query heads.
// Memory is linear in T: no (T, T) score matrix is ever formed. The forward
// walks keys in tiles with an online softmax and saves the row log-sum-exp;
// the backward recomputes each probability as exp(score - lse).
// Every output element is written by exactly one task and summed in a fixed
// order, so results are bitwise the same for any thread count.
#include "kernels/ops.h"

#include <math.h>
#include <string.h>

// Keys per tile of the online softmax: the tile's scores live on the stack.
#define ATTN_KEY_TILE 64

static inline int min_int(int a, int b) { return a < b ? a : b; }
static inline int max_int(int a, int b) { return a > b ? a : b; }

// `omp simd` lets the compiler split the sum into vector lanes: the order is
// fixed by the compiled code, never by the thread count, so it stays
// deterministic, and it is several times faster than a scalar chain.
static inline float dot_product(const float *a, const float *b, int n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int d = 0; d < n; d++) sum += a[d] * b[d];
  return sum;
}

// y += alpha * x; y, x (n)
static inline void axpy(float *restrict y, float alpha, const float *restrict x, int n) {
#pragma omp simd
  for (int d = 0; d < n; d++) y[d] += alpha * x[d];
}

// First key that query i may see: the causal mask alone allows 0, a sliding
// window of W keys (itself included) allows i - W + 1.
static inline int first_visible_key(int i, int window) { return window > 0 ? max_int(0, i - window + 1) : 0; }

// The score as the forward sees it, softcapped when softcap > 0, and its
// derivative with respect to the raw score q.k*scale (1 - tanh^2 under the
// cap). The backward calls this too, so it recomputes bitwise the same score.
static inline float attention_score(const float *q_row, const float *k_row, int hd, float scale, float softcap,
                                    float *dscore_draw) {
  float raw = dot_product(q_row, k_row, hd) * scale;
  if (softcap > 0.0f) {
    float t = tanhf(raw / softcap);
    if (dscore_draw) *dscore_draw = 1.0f - t * t;
    return softcap * t;
  }
  if (dscore_draw) *dscore_draw = 1.0f;
  return raw;
}

// One query row against keys j0..j1 (inclusive) of one kv head, in tiles
// with a running max and sum. Shared by the forward and decode so that a
// decode step equals the matching prefill row bitwise. Returns the row lse.
// out_row (hd), q_row (hd); k, v point at key 0 of the kv head, whose rows are
// kv_stride floats apart.
static float attention_row_forward(float *out_row, const float *q_row, const float *k, const float *v, long kv_stride,
                                   int j0, int j1, int hd, float softcap, float scale) {
  float acc[hd];                     // (hd) unnormalized sum of p * v
  float scores[ATTN_KEY_TILE];       // (tile)
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  for (int d = 0; d < hd; d++) acc[d] = 0.0f;
  for (int t0 = j0; t0 <= j1; t0 += ATTN_KEY_TILE) {
    int t1 = min_int(j1, t0 + ATTN_KEY_TILE - 1);
    float tile_max = -INFINITY;
    for (int j = t0; j <= t1; j++) {
      float s = attention_score(q_row, k + j * kv_stride, hd, scale, softcap, NULL);
      scores[j - t0] = s;
      if (s > tile_max) tile_max = s;
    }
    float new_max = running_max > tile_max ? running_max : tile_max;
    // rescale what was summed against the old max (exp(-inf) = 0 on the first tile)
    float correction = expf(running_max - new_max);
    running_sum *= correction;
    for (int d = 0; d < hd; d++) acc[d] *= correction;
    for (int j = t0; j <= t1; j++) {
      float p = expf(scores[j - t0] - new_max);
      const float *v_row = v + j * kv_stride;
      running_sum += p;
      axpy(acc, p, v_row, hd);
    }
    running_max = new_max;
  }
  float inv_sum = 1.0f / running_sum;
  for (int d = 0; d < hd; d++) out_row[d] = acc[d] * inv_sum;
  return running_max + logf(running_sum);
}

// out (B, T, nh, hd), lse (B, nh, T) or NULL, q (B, T, nh, hd), k, v (B, T, nkv, hd)
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T, int nh,
                       int nkv, int hd, int window, float softcap, float scale) {
  int group = nh / nkv;  // query heads per kv head
  long kv_stride = (long)nkv * hd;
  long rows = (long)B * nh * T;
  // One task per (b, h, i) query row, rows independent; dynamic scheduling
  // balances the causal triangle and cannot change any result.
#pragma omp parallel for schedule(dynamic, 16)
  for (long r = 0; r < rows; r++) {
    int i = (int)(r % T);
    int h = (int)((r / T) % nh);
    int b = (int)(r / ((long)T * nh));
    int kvh = h / group;
    long qo = (((long)b * T + i) * nh + h) * hd;
    const float *k_head = k + (long)b * T * kv_stride + (long)kvh * hd;  // key 0 of (b, kvh)
    const float *v_head = v + (long)b * T * kv_stride + (long)kvh * hd;
    float row_lse = attention_row_forward(out + qo, q + qo, k_head, v_head, kv_stride, first_visible_key(i, window),
                                          i, hd, softcap, scale);
    if (lse) lse[r] = row_lse;  // r enumerates (b, h, i), the lse layout
  }
}

// dq for every query row: dq_i = scale * sum_j ds_ij * k_j with
// ds_ij = p_ij * (dp_ij - D_i) * dcap_ij, p_ij = exp(s_ij - lse_i),
// dp_ij = dout_i . v_j, D_i = dout_i . out_i.
// dq (B, T, nh, hd); dout, q, out (B, T, nh, hd); k, v (B, T, nkv, hd); lse (B, nh, T)
static void attention_backward_dq(float *dq, const float *dout, const float *q, const float *k, const float *v,
                                  const float *out, const float *lse, int B, int T, int nh, int nkv, int hd,
                                  int window, float softcap, float scale) {
  int group = nh / nkv;
  long kv_stride = (long)nkv * hd;
  long rows = (long)B * nh * T;
#pragma omp parallel for schedule(dynamic, 16)
  for (long r = 0; r < rows; r++) {
    int i = (int)(r % T);
    int h = (int)((r / T) % nh);
    int b = (int)(r / ((long)T * nh));
    int kvh = h / group;
    long qo = (((long)b * T + i) * nh + h) * hd;
    const float *k_head = k + (long)b * T * kv_stride + (long)kvh * hd;
    const float *v_head = v + (long)b * T * kv_stride + (long)kvh * hd;
    const float *q_row = q + qo, *dout_row = dout + qo;
    float *dq_row = dq + qo;
    float D = dot_product(dout_row, out + qo, hd);
    float row_lse = lse[r];
    for (int d = 0; d < hd; d++) dq_row[d] = 0.0f;
    for (int j = first_visible_key(i, window); j <= i; j++) {
      float dcap;
      float s = attention_score(q_row, k_head + j * kv_stride, hd, scale, softcap, &dcap);
      float p = expf(s - row_lse);
      float dp = dot_product(dout_row, v_head + j * kv_stride, hd);
      float ds = p * (dp - D) * dcap * scale;
      const float *k_row = k_head + j * kv_stride;
      axpy(dq_row, ds, k_row, hd);
    }
  }
}

// dk, dv for every key row. One task per (b, kv head, tile of keys) owns those
// dk/dv rows and adds the contributions of every query head of the group and
// every query that sees them, in (head, query) order: deterministic without
// atomics, and parallel even when there is a single kv head.
// dk, dv (B, T, nkv, hd) or NULL; others as in attention_backward_dq
static void attention_backward_dkdv(float *dk, float *dv, const float *dout, const float *q, const float *k,
                                    const float *v, const float *out, const float *lse, int B, int T, int nh, int nkv,
                                    int hd, int window, float softcap, float scale) {
  int group = nh / nkv;
  long kv_stride = (long)nkv * hd;
  int tiles = (T + ATTN_KEY_TILE - 1) / ATTN_KEY_TILE;
  long tasks = (long)B * nkv * tiles;
#pragma omp parallel for schedule(dynamic, 1)
  for (long task = 0; task < tasks; task++) {
    int tile = (int)(task % tiles);
    int kvh = (int)((task / tiles) % nkv);
    int b = (int)(task / ((long)tiles * nkv));
    int j0 = tile * ATTN_KEY_TILE;
    int j1 = min_int(T - 1, j0 + ATTN_KEY_TILE - 1);
    long head_offset = (long)b * T * kv_stride + (long)kvh * hd;  // key 0 of (b, kvh)
    const float *k_head = k + head_offset, *v_head = v + head_offset;
    for (int j = j0; j <= j1; j++) {
      if (dk) memset(dk + head_offset + j * kv_stride, 0, sizeof(float) * hd);
      if (dv) memset(dv + head_offset + j * kv_stride, 0, sizeof(float) * hd);
    }
    // the last query that sees key j1 is j1 + W - 1 under a window
    int last_query = window > 0 ? min_int(T - 1, j1 + window - 1) : T - 1;
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
      for (int i = j0; i <= last_query; i++) {
        long qo = (((long)b * T + i) * nh + h) * hd;
        const float *q_row = q + qo, *dout_row = dout + qo;
        float D = dot_product(dout_row, out + qo, hd);
        float row_lse = lse[((long)b * nh + h) * T + i];
        int jj1 = min_int(j1, i);
        for (int j = max_int(j0, first_visible_key(i, window)); j <= jj1; j++) {
          float dcap;
          float s = attention_score(q_row, k_head + j * kv_stride, hd, scale, softcap, &dcap);
          float p = expf(s - row_lse);
          if (dv) {
            float *dv_row = dv + head_offset + j * kv_stride;
            axpy(dv_row, p, dout_row, hd);
          }
          if (dk) {
            float dp = dot_product(dout_row, v_head + j * kv_stride, hd);
            float ds = p * (dp - D) * dcap * scale;
            float *dk_row = dk + head_offset + j * kv_stride;
            axpy(dk_row, ds, q_row, hd);
          }
        }
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
// 0 .. lengths[b] - 1, same window and softcap rules as the forward. A
// length outside [1, S] has no valid keys: its output rows are zero.
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
    attention_row_forward(out_row, q + r * hd, k_cache + head_offset, v_cache + head_offset, kv_stride,
                          first_visible_key(i, window), i, hd, softcap, scale);
  }
}
