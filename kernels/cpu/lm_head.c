// kernels/cpu/lm_head.c: the fused LM head on the CPU (see ops.h).
// Defines lm_head_logprob_forward, lm_head_logprob_backward,
// lm_head_logprob_forward_backward, lm_head_logits.
// logprob[n] = log softmax(cap(hidden[n] @ wte^T))[target[n]] without ever
// holding (N, V) logits (V is 262k for Gemma 3): rows with a target are
// gathered into blocks of R rows, sized so the block's full (R, V) logits fit
// a bounded scratch (28 MiB: R = 448 at V = 16k, 28 at V = 262k). One sgemm
// per block gives whole logit rows, so each row's log-sum-exp is a plain
// two-pass max/sum (no online rescaling) in loops that vectorize. The
// gradient dlogits = dlp * (onehot - softmax) * cap' is formed in place in the
// same scratch, then two sgemms give the block's dhidden and add into dwte.
// The backward recomputes the block's logits from the saved lse; the fused
// op, used when dlogprobs is known before the forward (SFT), does forward and
// backward per block and so skips that recompute. All three walk the same
// blocks with the same calls, so their results agree bitwise. Rows whose
// target is outside [0, V) are skipped: logprob 0, lse 0, no gradient.
#include "kernels/cpu/blas.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/vecmath.h"
#include "kernels/ops.h"

// Bound on one block's (R, V) logits: 7M floats = 28 MiB. Under glibc's
// 32 MiB ceiling for its adaptive mmap threshold, so after the first call the
// scratch comes from the heap, already mapped; a 32 MiB one is mmap'ed and
// page-faulted afresh every call (10k faults, ~2% of a small-10m step).
#define LM_HEAD_SCRATCH_FLOATS (7L << 20)
// More rows per block than this buys sgemm nothing and only costs memory.
#define LM_HEAD_MAX_ROWS 512
// The row sum of exp runs in float vector lanes over segments this long and
// adds the segments in double: fp32 lanes alone over 262k terms would lose
// ~1e-5 of the sum.
#define LM_HEAD_SUM_SEGMENT 2048

static inline int min_int(int a, int b) { return a < b ? a : b; }

// Rows per block for vocab V: the most whose (R, V) logits fit the scratch bound.
static int row_block_size(int V) {
  long r = LM_HEAD_SCRATCH_FLOATS / V;
  return r < 1 ? 1 : r > LM_HEAD_MAX_ROWS ? LM_HEAD_MAX_ROWS : (int)r;
}

// ops.h ops cannot return an error; a failed allocation of scratch leaves
// nothing sensible to compute, so it stops the process loudly.
static void *lm_head_scratch(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "lm_head: cannot allocate %zu bytes of scratch\n", bytes);
    abort();
  }
  return p;
}

static inline int has_target(const int *targets, int n, int V) { return targets[n] >= 0 && targets[n] < V; }

// Fills rows (R) with the next row indices that have a target, starting the
// scan at *next; returns how many it found (0 at the end).
static int next_row_block(int *rows, int R, const int *targets, int N, int V, int *next) {
  int count = 0;
  while (*next < N && count < R) {
    if (has_target(targets, *next, V)) rows[count++] = *next;
    (*next)++;
  }
  return count;
}

// dst (count, C) = src rows `rows`; src (N, C)
static void gather_rows(float *dst, const float *src, const int *rows, int count, int C) {
  for (int r = 0; r < count; r++) memcpy(dst + (long)r * C, src + (long)rows[r] * C, sizeof(float) * C);
}

// dst rows `rows` = src (count, C); dst (N, C)
static void scatter_rows(float *dst, const float *src, const int *rows, int count, int C) {
  for (int r = 0; r < count; r++) memcpy(dst + (long)rows[r] * C, src + (long)r * C, sizeof(float) * C);
}

// z (V) = softcap * tanh(z / softcap) in place; nothing when softcap <= 0.
// Divide, tanh, multiply: HF's order of operations.
static void row_softcap(float *z, int V, float softcap) {
  if (softcap <= 0.0f) return;
#pragma omp simd
  for (int v = 0; v < V; v++) z[v] = softcap * vm_tanhf(z[v] / softcap);
}

// log sum_v exp(z_v) of one row z (V)
static float row_logsumexp(const float *z, int V) {
  // a compare and select, which vectorizes to vmaxps; fmaxf would be a libm call
  float max = -INFINITY;
#pragma omp simd reduction(max : max)
  for (int v = 0; v < V; v++) max = z[v] > max ? z[v] : max;
  double sum = 0.0;
  for (int v0 = 0; v0 < V; v0 += LM_HEAD_SUM_SEGMENT) {
    int end = min_int(V, v0 + LM_HEAD_SUM_SEGMENT);
    float segment = 0.0f;
#pragma omp simd reduction(+ : segment)
    for (int v = v0; v < end; v++) segment += vm_expf(z[v] - max);
    sum += segment;
  }
  return max + (float)log(sum);
}

// One row's capped logits z (V) -> d(dlp * logprob)/d(raw logit), in place.
// With lp = z[t] - lse: dlp/dz_v = onehot(t)_v - softmax(z)_v, and the cap's
// derivative is 1 - tanh^2 = 1 - (z/cap)^2 (1 without a cap). The softmax
// term is written for every column by one branch-free loop; the one-hot term
// is then added at t alone.
static void row_dlogits(float *z, int V, float lse, int t, float dlp, float softcap) {
  float target_dcap = 1.0f;
  if (softcap > 0.0f) {
    float inv_cap = 1.0f / softcap, y = z[t] * inv_cap;
    target_dcap = 1.0f - y * y;
#pragma omp simd
    for (int v = 0; v < V; v++) {
      float yv = z[v] * inv_cap;
      z[v] = -dlp * vm_expf(z[v] - lse) * (1.0f - yv * yv);
    }
  } else {
#pragma omp simd
    for (int v = 0; v < V; v++) z[v] = -dlp * vm_expf(z[v] - lse);
  }
  z[t] += dlp * target_dcap;
}

// What one call computes; shared by the three entry points so that they walk
// the same blocks with the same calls. Shapes as in ops.h.
typedef struct LmHeadCall {
  const float *hidden;     // (N, C)
  const float *wte;        // (V, C)
  const int *targets;      // (N)
  int N, C, V;
  float softcap;
  float *logprobs;         // (N) written, or NULL when lse is given
  float *lse;              // (N) written, or read when lse_given, or NULL
  int lse_given;           // 1: backward of an earlier forward, lse holds its values
  const float *dlogprobs;  // (N), or NULL: no gradient
  float *dhidden;          // (N, C) overwritten, or NULL
  float *dwte;             // (V, C) accumulated, or NULL
} LmHeadCall;

// One row of a block: z (V) raw logits of row n -> capped, its lse and
// logprob (unless lse is given), then dlogits in place if a gradient is wanted.
static void row_step(const LmHeadCall *k, float *z, int n, int backward) {
  int t = k->targets[n];
  row_softcap(z, k->V, k->softcap);
  float lse;
  if (k->lse_given) {
    lse = k->lse[n];
  } else {
    lse = row_logsumexp(z, k->V);
    k->logprobs[n] = z[t] - lse;
    if (k->lse) k->lse[n] = lse;
  }
  if (backward) row_dlogits(z, k->V, lse, t, k->dlogprobs[n], k->softcap);
}

// The block's gradients from its dlogits (count, V): dblock (count, C) =
// dlogits @ wte, scattered to the block's dhidden rows; dwte (V, C) +=
// dlogits^T @ block. Each dwte element gets one sum per block, blocks in row
// order, and no per-thread partial sums, so the order of accumulation is
// fixed. (OpenBLAS may pick other micro-kernels for the edge tiles of another
// thread count's partition: bits are reproducible at a given thread count.)
// dblock (count, C) is scratch.
static void block_gradients(const LmHeadCall *k, const float *dlogits, const float *block, float *dblock,
                            const int *rows, int count) {
  int C = k->C, V = k->V;
  if (k->dhidden) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, count, C, V, 1.0f, dlogits, V, k->wte, C, 0.0f, dblock,
                C);
    scatter_rows(k->dhidden, dblock, rows, count, C);
  }
  if (k->dwte)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, count, 1.0f, dlogits, V, block, C, 1.0f, k->dwte, C);
}

// Walks the rows with a target in blocks of R: one sgemm for the block's
// (count, V) logits, the per-row work in parallel (rows are independent, so
// no sum is split between threads), then the block's gradients.
static void lm_head_run(const LmHeadCall *k) {
  int N = k->N, C = k->C, V = k->V;
  if (k->dhidden) memset(k->dhidden, 0, sizeof(float) * (size_t)N * C);
  if (!k->lse_given)
    for (int n = 0; n < N; n++) {
      k->logprobs[n] = 0.0f;
      if (k->lse) k->lse[n] = 0.0f;
    }
  int backward = k->dlogprobs && (k->dhidden || k->dwte);
  if (N <= 0 || V <= 0 || C <= 0 || (k->lse_given && !backward)) return;
  int R = min_int(row_block_size(V), N);
  int *rows = lm_head_scratch(sizeof(int) * R);                                     // (R)
  float *block = lm_head_scratch(sizeof(float) * (size_t)R * C);                     // (R, C) hidden rows
  float *logits = lm_head_scratch(sizeof(float) * (size_t)R * V);                    // (R, V), then dlogits
  float *dblock = k->dhidden ? lm_head_scratch(sizeof(float) * (size_t)R * C) : NULL;  // (R, C)
  int next = 0, count;
  while ((count = next_row_block(rows, R, k->targets, N, V, &next)) > 0) {
    gather_rows(block, k->hidden, rows, count, C);
    // logits (count, V) = block (count, C) @ wte^T, raw (no cap)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, count, V, C, 1.0f, block, C, k->wte, C, 0.0f, logits, V);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < count; r++) row_step(k, logits + (long)r * V, rows[r], backward);
    if (backward) block_gradients(k, logits, block, dblock, rows, count);
  }
  free(rows);
  free(block);
  free(logits);
  free(dblock);
}

// logprobs (N), lse (N) or NULL, hidden (N, C), wte (V, C), targets (N)
void lm_head_logprob_forward(float *logprobs, float *lse, const float *hidden, const float *wte, const int *targets,
                             int N, int C, int V, float softcap) {
  LmHeadCall k = {.hidden = hidden, .wte = wte, .targets = targets, .N = N, .C = C, .V = V, .softcap = softcap,
                  .logprobs = logprobs, .lse = lse};
  lm_head_run(&k);
}

// dhidden (N, C) or NULL, dwte (V, C) or NULL, dlogprobs (N), hidden (N, C),
// wte (V, C), targets (N), lse (N) from the forward
void lm_head_logprob_backward(float *dhidden, float *dwte, const float *dlogprobs, const float *hidden,
                              const float *wte, const int *targets, const float *lse, int N, int C, int V,
                              float softcap) {
  LmHeadCall k = {.hidden = hidden, .wte = wte, .targets = targets, .N = N, .C = C, .V = V, .softcap = softcap,
                  .lse = (float *)lse, .lse_given = 1, .dlogprobs = dlogprobs, .dhidden = dhidden, .dwte = dwte};
  lm_head_run(&k);  // lse_given: lse is only read
}

// logprobs (N), lse (N) or NULL, dhidden (N, C) or NULL, dwte (V, C) or NULL,
// dlogprobs (N), hidden (N, C), wte (V, C), targets (N)
void lm_head_logprob_forward_backward(float *logprobs, float *lse, float *dhidden, float *dwte, const float *dlogprobs,
                                      const float *hidden, const float *wte, const int *targets, int N, int C, int V,
                                      float softcap) {
  LmHeadCall k = {.hidden = hidden, .wte = wte, .targets = targets, .N = N, .C = C, .V = V, .softcap = softcap,
                  .logprobs = logprobs, .lse = lse, .dlogprobs = dlogprobs, .dhidden = dhidden, .dwte = dwte};
  lm_head_run(&k);
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
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) row_softcap(logits + (long)n * V, V, softcap);
}
