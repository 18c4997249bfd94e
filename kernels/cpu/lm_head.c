// kernels/cpu/lm_head.c: the fused, chunked LM head on the CPU (see ops.h).
// Defines lm_head_logprob_forward, lm_head_logprob_backward, lm_head_logits.
// logprob[n] = log softmax(cap(hidden[n] @ wte^T))[target[n]] without ever
// holding (N, V) logits (V is 262k for Gemma 3): rows with a target are
// gathered into blocks, the vocab is walked in chunks with one sgemm per
// (block, chunk) into a (rows, chunk) scratch, and each row keeps a running
// max and sum (online log-sum-exp). The backward recomputes each chunk's
// logits from the saved lse. Rows whose target is outside [0, V) are skipped:
// logprob 0, lse 0, no gradient.
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"

// Vocab columns per sgemm: a (rows, chunk) scratch of 256 x 4096 floats is 4 MiB.
#define LM_HEAD_VOCAB_CHUNK 4096
// Token rows per block: each wte chunk read from memory serves this many rows
// (sgemm runs ~1.5x faster at 256..512 rows than at 128 on an EPYC).
#define LM_HEAD_ROW_BLOCK 256

static inline int min_int(int a, int b) { return a < b ? a : b; }

// ops.h ops cannot return an error; a failed allocation of a few MiB of
// scratch leaves nothing sensible to compute, so it stops the process loudly.
static float *lm_head_scratch(size_t count) {
  float *p = malloc(count * sizeof(float));
  if (!p) {
    fprintf(stderr, "lm_head: cannot allocate %zu bytes of scratch\n", count * sizeof(float));
    abort();
  }
  return p;
}

static inline int has_target(const int *targets, int n, int V) { return targets[n] >= 0 && targets[n] < V; }

// Fills rows (LM_HEAD_ROW_BLOCK) with the next row indices that have a target,
// starting the scan at *next; returns how many it found (0 at the end).
static int next_row_block(int *rows, const int *targets, int N, int V, int *next) {
  int count = 0;
  while (*next < N && count < LM_HEAD_ROW_BLOCK) {
    if (has_target(targets, *next, V)) rows[count++] = *next;
    (*next)++;
  }
  return count;
}

// dst (count, C) = src rows `rows`; src (N, C)
static void gather_rows(float *dst, const float *src, const int *rows, int count, int C) {
  for (int r = 0; r < count; r++) memcpy(dst + (long)r * C, src + (long)rows[r] * C, sizeof(float) * C);
}

// logits (count, width) = block (count, C) @ wte[v0 : v0 + width]^T, raw (no cap).
// wte (V, C)
static void chunk_logits(float *logits, const float *block, const float *wte, int count, int C, int v0, int width) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, count, width, C, 1.0f, block, C, wte + (long)v0 * C, C, 0.0f,
              logits, width);
}

// logprobs (N), lse (N), hidden (N, C), wte (V, C), targets (N)
void lm_head_logprob_forward(float *logprobs, float *lse, const float *hidden, const float *wte, const int *targets,
                             int N, int C, int V, float softcap) {
  for (int n = 0; n < N; n++) {
    logprobs[n] = 0.0f;
    if (lse) lse[n] = 0.0f;
  }
  if (N <= 0 || V <= 0 || C <= 0) return;
  float *block = lm_head_scratch((size_t)LM_HEAD_ROW_BLOCK * C);                     // (rows, C)
  float *logits = lm_head_scratch((size_t)LM_HEAD_ROW_BLOCK * LM_HEAD_VOCAB_CHUNK);  // (rows, chunk)
  int rows[LM_HEAD_ROW_BLOCK];
  float running_max[LM_HEAD_ROW_BLOCK];
  double running_sum[LM_HEAD_ROW_BLOCK];  // double: a sum over 262k terms
  float target_logit[LM_HEAD_ROW_BLOCK];
  int next = 0, count;
  while ((count = next_row_block(rows, targets, N, V, &next)) > 0) {
    gather_rows(block, hidden, rows, count, C);
    for (int r = 0; r < count; r++) {
      running_max[r] = -INFINITY;
      running_sum[r] = 0.0;
      target_logit[r] = 0.0f;
    }
    for (int v0 = 0; v0 < V; v0 += LM_HEAD_VOCAB_CHUNK) {
      int width = min_int(LM_HEAD_VOCAB_CHUNK, V - v0);
      chunk_logits(logits, block, wte, count, C, v0, width);
      // rows are independent: each thread owns whole rows, so no sum is split
#pragma omp parallel for schedule(static)
      for (int r = 0; r < count; r++) {
        float *z = logits + (long)r * width;  // (width)
        float chunk_max = -INFINITY;
        for (int c = 0; c < width; c++) {
          if (softcap > 0.0f) z[c] = softcap * tanhf(z[c] / softcap);
          if (z[c] > chunk_max) chunk_max = z[c];
        }
        float new_max = chunk_max > running_max[r] ? chunk_max : running_max[r];
        double sum = running_sum[r] * exp((double)running_max[r] - new_max);
        for (int c = 0; c < width; c++) sum += expf(z[c] - new_max);
        running_sum[r] = sum;
        running_max[r] = new_max;
        int t = targets[rows[r]];
        if (t >= v0 && t < v0 + width) target_logit[r] = z[t - v0];
      }
    }
    for (int r = 0; r < count; r++) {
      float row_lse = running_max[r] + (float)log(running_sum[r]);
      logprobs[rows[r]] = target_logit[r] - row_lse;
      if (lse) lse[rows[r]] = row_lse;
    }
  }
  free(block);
  free(logits);
}

// With z = cap(raw) and lp = z[target] - lse:
//   dlp/dz_v = onehot(target)_v - softmax(z)_v,  dz/draw = 1 - (z/cap)^2.
// dhidden = dlogit @ wte (overwritten), dwte += dlogit^T @ hidden.
// dhidden (N, C) or NULL, dwte (V, C) or NULL, dlogprobs (N), hidden (N, C),
// wte (V, C), targets (N), lse (N) from the forward
void lm_head_logprob_backward(float *dhidden, float *dwte, const float *dlogprobs, const float *hidden,
                              const float *wte, const int *targets, const float *lse, int N, int C, int V,
                              float softcap) {
  if (dhidden) memset(dhidden, 0, sizeof(float) * (size_t)N * C);
  if ((!dhidden && !dwte) || N <= 0 || V <= 0 || C <= 0) return;
  float *block = lm_head_scratch((size_t)LM_HEAD_ROW_BLOCK * C);                     // (rows, C)
  float *dlogits = lm_head_scratch((size_t)LM_HEAD_ROW_BLOCK * LM_HEAD_VOCAB_CHUNK);  // (rows, chunk)
  float *dblock = dhidden ? lm_head_scratch((size_t)LM_HEAD_ROW_BLOCK * C) : NULL;   // (rows, C)
  int rows[LM_HEAD_ROW_BLOCK];
  int next = 0, count;
  while ((count = next_row_block(rows, targets, N, V, &next)) > 0) {
    gather_rows(block, hidden, rows, count, C);
    for (int v0 = 0; v0 < V; v0 += LM_HEAD_VOCAB_CHUNK) {
      int width = min_int(LM_HEAD_VOCAB_CHUNK, V - v0);
      chunk_logits(dlogits, block, wte, count, C, v0, width);
      // turn the chunk's raw logits into dlogprob/draw, in place
#pragma omp parallel for schedule(static)
      for (int r = 0; r < count; r++) {
        float *g = dlogits + (long)r * width;  // (width)
        float row_lse = lse[rows[r]], dlp = dlogprobs[rows[r]];
        int t = targets[rows[r]];
        for (int c = 0; c < width; c++) {
          float z = g[c], dcap = 1.0f;
          if (softcap > 0.0f) {
            float th = tanhf(z / softcap);
            z = softcap * th;
            dcap = 1.0f - th * th;
          }
          float onehot = (v0 + c == t) ? 1.0f : 0.0f;
          g[c] = dlp * (onehot - expf(z - row_lse)) * dcap;
        }
      }
      // dblock (rows, C) (+)= dlogits (rows, width) @ wte_chunk (width, C)
      if (dblock)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, count, C, width, 1.0f, dlogits, width,
                    wte + (long)v0 * C, C, v0 == 0 ? 0.0f : 1.0f, dblock, C);
      // dwte_chunk (width, C) += dlogits^T (width, rows) @ block (rows, C)
      if (dwte)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, width, C, count, 1.0f, dlogits, width, block, C, 1.0f,
                    dwte + (long)v0 * C, C);
    }
    if (dblock)
      for (int r = 0; r < count; r++) memcpy(dhidden + (long)rows[r] * C, dblock + (long)r * C, sizeof(float) * C);
  }
  free(block);
  free(dlogits);
  free(dblock);
}

// logits (N, V) = cap(hidden @ wte^T); hidden (N, C), wte (V, C). Meant for
// the few rows of a decode step, where the full rows are needed for sampling.
void lm_head_logits(float *logits, const float *hidden, const float *wte, int N, int C, int V, float softcap) {
  if (N <= 0 || V <= 0) return;
  if (C <= 0) {
    memset(logits, 0, sizeof(float) * (size_t)N * V);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, hidden, C, wte, C, 0.0f, logits, V);
  if (softcap > 0.0f) {
    long total = (long)N * V;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < total; i++) logits[i] = softcap * tanhf(logits[i] / softcap);
  }
}
