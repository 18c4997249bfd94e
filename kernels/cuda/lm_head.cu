// kernels/cuda/lm_head.cu: the fused LM head on the GPU (kernels/cuda/ops_cuda.h).
// Defines lm_head_logprob_forward_cuda, lm_head_logprob_backward_cuda,
// lm_head_logprob_forward_backward_cuda (both in one pass, for SFT),
// lm_head_logits_cuda, and the scratch they share (ctx->lm_head_scratch,
// freed by cuda_context_destroy).
//
// logprob[n] = log softmax(cap(hidden[n] @ wte^T))[target[n]] without ever
// holding (N, V) logits (V is 262k for Gemma 3). Token rows are taken in
// chunks of R consecutive rows, R chosen so that the chunk's fp32 logits
// (R, V) and its bf16 dlogits (R, V) fit LM_HEAD_SCRATCH_BYTES (256 MiB:
// R = 170 at V = 262144, R = 1398 at V = 32000). Per chunk:
//   forward:  logits (R, V) fp32 = hidden_chunk @ wte^T (gemm_bf16), then one
//             block per row: softcap, max, sum of exp (two passes over the
//             row, fp32, fixed-order block reductions), lse = max + log(sum),
//             logprob = cap(z[target]) - lse.
//   backward: the same GEMM recomputes the logits; one block per row writes
//             dlogits = dlogprob * (onehot(target) - softmax) * cap' as bf16
//             into the second part of the scratch; then dhidden_chunk (R, C)
//             = dlogits @ wte (bf16 out) and dwte (V, C) += dlogits^T @
//             hidden_chunk (fp32, accumulate), both through gemm_bf16.
// The fp32 logits and the bf16 dlogits live in two disjoint parts of the
// scratch: writing bf16 over the fp32 row in place would race between blocks
// (bf16 row r overlaps fp32 row r/2, which another block may still read).
//
// Rows whose target is outside [0, V) get logprob 0, lse 0 and an all-zero
// dlogits row (so dhidden 0 and nothing added to dwte). Unlike the CPU op,
// which gathers the rows that have a target, the GPU computes those rows'
// logits too: gathering would need the count of valid targets on the host
// (a synchronization) and the chunks are cheap next to that.
//
// Deterministic: chunks in row order, every reduction over a row in a fixed
// order set by the launch shape, dwte accumulated by one GEMM per chunk in
// chunk order, no atomics.
//
// FIMI_LM_HEAD_ROWS=R (tests) caps the rows per chunk, so small shapes
// exercise several chunks and a ragged last one.
#include <math.h>
#include <stdlib.h>

#include "kernels/cuda/matmul.cuh"

// Bound on one chunk's scratch: (R, V) fp32 logits + (R, V) bf16 dlogits.
#define LM_HEAD_SCRATCH_BYTES ((size_t)256 << 20)
// Threads per row block (a multiple of 32). V = 262144 gives 512 logits per thread.
#define LM_HEAD_THREADS 512
// Offset of the dlogits part, rounded so that it is 256-byte aligned like a
// cudaMalloc pointer (cuBLASLt prefers aligned operands).
#define LM_HEAD_ALIGN ((size_t)256)

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Bytes of scratch for R rows: fp32 logits, then bf16 dlogits.
static size_t scratch_bytes_for(int R, int V) {
  size_t cells = (size_t)R * (size_t)V;
  return align_up(cells * sizeof(float), LM_HEAD_ALIGN) + cells * sizeof(__nv_bfloat16);
}

// The bf16 dlogits part of the scratch, after R rows of fp32 logits.
static __nv_bfloat16 *scratch_dlogits(float *logits, int R, int V) {
  return (__nv_bfloat16 *)((char *)logits + align_up((size_t)R * V * sizeof(float), LM_HEAD_ALIGN));
}

// Rows per chunk for N rows of vocab V: as many as fit the bound (at least
// one), at most N, at most FIMI_LM_HEAD_ROWS when that is set.
static int chunk_rows(int N, int V) {
  size_t per_row = (size_t)V * (sizeof(float) + sizeof(__nv_bfloat16));
  size_t R = LM_HEAD_SCRATCH_BYTES / per_row;
  if (R < 1) R = 1;
  if (R > (size_t)N) R = (size_t)N;
  const char *s = getenv("FIMI_LM_HEAD_ROWS");
  if (s && s[0]) {
    long cap = strtol(s, NULL, 10);
    if (cap >= 1 && (size_t)cap < R) R = (size_t)cap;
  }
  return (int)R;
}

// Makes ctx->lm_head_scratch hold at least `bytes`. Grows only (a training
// run settles on its largest chunk); the old buffer may still be read by
// queued kernels, so the stream is drained before it is freed.
static float *lm_head_scratch(CudaContext *ctx, size_t bytes) {
  size_t floats = ceil_div_size(bytes, sizeof(float));
  if (ctx->lm_head_scratch && ctx->lm_head_scratch_floats >= floats) return ctx->lm_head_scratch;
  if (ctx->lm_head_scratch) {
    cuda_check(cudaStreamSynchronize(ctx->stream));
    cuda_check(cudaFree(ctx->lm_head_scratch));
    ctx->lm_head_scratch = NULL;
    ctx->lm_head_scratch_floats = 0;
  }
  void *p = NULL;
  cuda_check(cudaMalloc(&p, floats * sizeof(float)));
  ctx->lm_head_scratch = (float *)p;
  ctx->lm_head_scratch_floats = floats;
  return ctx->lm_head_scratch;
}

// c * tanh(z / c), HF's order of operations (divide, tanh, multiply); z when
// softcap <= 0. The same function everywhere, so a logit capped twice gives
// the same bits.
__device__ __forceinline__ float softcap_apply(float z, float softcap) {
  return softcap > 0.0f ? softcap * tanhf(z / softcap) : z;
}

// Max over a block (blockDim.x a multiple of 32, at most 1024); all threads
// get it. Same pattern as block_reduce_sum (common.cuh). shared: 32 floats.
__device__ __forceinline__ float block_reduce_max(float x, float *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_reduce_max(x);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : -INFINITY;
  return warp_reduce_max(x);
}

// One block per row of the chunk. logprobs (rows), lse (rows) or NULL,
// logits (rows, V) raw fp32, targets (rows). Rows without a target: 0, 0.
__global__ void __launch_bounds__(LM_HEAD_THREADS)
    lm_head_forward_rows_kernel(float *logprobs, float *lse, const float *logits, const int *targets, int V,
                                float softcap) {
  __shared__ float shared[32];
  int r = blockIdx.x;
  int t = targets[r];
  if (t < 0 || t >= V) {  // the same for every thread of the block: no barrier is skipped by some only
    if (threadIdx.x == 0) {
      logprobs[r] = 0.0f;
      if (lse) lse[r] = 0.0f;
    }
    return;
  }
  const float *z = logits + (size_t)r * V;  // (V)
  float max = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) max = fmaxf(max, softcap_apply(z[v], softcap));
  max = block_reduce_max(max, shared);
  float sum = 0.0f;
  for (int v = threadIdx.x; v < V; v += blockDim.x) sum += expf(softcap_apply(z[v], softcap) - max);
  sum = block_reduce_sum(sum, shared);
  if (threadIdx.x == 0) {
    float row_lse = max + logf(sum);
    logprobs[r] = softcap_apply(z[t], softcap) - row_lse;
    if (lse) lse[r] = row_lse;
  }
}

// One block per row of the chunk: dlogits (rows, V) bf16 = d(dlp * logprob) /
// d(raw logit), from logits (rows, V) raw fp32, targets (rows), lse (rows),
// dlogprobs (rows). With lp = z[t] - lse: dlp/dz_v = onehot(t)_v - softmax_v,
// and the cap's derivative is 1 - tanh^2 = 1 - (z/cap)^2 (1 without a cap).
// Same expression order as kernels/cpu/lm_head.c's row_dlogits.
__global__ void __launch_bounds__(LM_HEAD_THREADS)
    lm_head_backward_rows_kernel(__nv_bfloat16 *dlogits, const float *logits, const int *targets, const float *lse,
                                 const float *dlogprobs, int V, float softcap) {
  int r = blockIdx.x;
  int t = targets[r];
  __nv_bfloat16 *d = dlogits + (size_t)r * V;  // (V)
  if (t < 0 || t >= V) {
    for (int v = threadIdx.x; v < V; v += blockDim.x) d[v] = float_to_bf16(0.0f);
    return;
  }
  const float *z = logits + (size_t)r * V;  // (V)
  float row_lse = lse[r], dlp = dlogprobs[r];
  float inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    float zv = softcap_apply(z[v], softcap);
    float dcap = 1.0f;
    if (softcap > 0.0f) {
      float y = zv * inv_cap;
      dcap = 1.0f - y * y;
    }
    float g = -dlp * expf(zv - row_lse) * dcap;
    if (v == t) g += dlp * dcap;
    d[v] = float_to_bf16(g);
  }
}

// x (n) = cap(x) in place (lm_head_logits_cuda).
__global__ void softcap_inplace_kernel(float *x, size_t n, float softcap) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] = softcap_apply(x[i], softcap);
}

// The backward of one chunk whose raw logits (rows, V) are in `logits`:
// dlogits (rows, V) bf16, then dhidden_chunk (rows, C) = dlogits @ wte (bf16
// out) and dwte (V, C) += dlogits^T @ hidden_chunk (fp32, accumulated); either
// output may be NULL. targets, lse, dlogprobs: the chunk's rows.
static void chunk_backward(CudaContext *ctx, bf16 *dhidden_chunk, float *dwte, __nv_bfloat16 *dlogits,
                           const float *logits, const bf16 *hidden_chunk, const bf16 *wte, const int *targets,
                           const float *lse, const float *dlogprobs, int rows, int C, int V, float softcap) {
  lm_head_backward_rows_kernel<<<rows, LM_HEAD_THREADS, 0, ctx->stream>>>(dlogits, logits, targets, lse, dlogprobs, V,
                                                                          softcap);
  cuda_check_launch();
  const bf16 *dl = (const bf16 *)dlogits;
  if (dhidden_chunk) gemm_bf16(ctx, dhidden_chunk, GEMM_OUT_BF16, dl, wte, rows, C, V, 0, 0, 0);
  if (dwte) gemm_bf16(ctx, dwte, GEMM_OUT_F32, dl, hidden_chunk, V, C, rows, 1, 0, 1);
}

// logprobs (N), lse (N) or NULL, hidden (N, C), wte (V, C), targets (N)
extern "C" void lm_head_logprob_forward_cuda(CudaContext *ctx, float *logprobs, float *lse, const bf16 *hidden,
                                             const bf16 *wte, const int *targets, int N, int C, int V,
                                             float softcap) {
  if (N <= 0) return;
  // No vocabulary: every row is without a target. C = 0: logprob 0 and lse 0
  // as kernels/cpu/lm_head.c gives (the GEMM would give zero logits, lse log V).
  if (V <= 0 || C <= 0) {
    cuda_check(cudaMemsetAsync(logprobs, 0, sizeof(float) * (size_t)N, ctx->stream));
    if (lse) cuda_check(cudaMemsetAsync(lse, 0, sizeof(float) * (size_t)N, ctx->stream));
    return;
  }
  int R = chunk_rows(N, V);
  float *logits = lm_head_scratch(ctx, scratch_bytes_for(R, V));  // (R, V)
  for (int r0 = 0; r0 < N; r0 += R) {
    int rows = N - r0 < R ? N - r0 : R;
    // logits (rows, V) = hidden[r0 : r0 + rows] (rows, C) @ wte (V, C)^T
    gemm_bf16(ctx, logits, GEMM_OUT_F32, hidden + (size_t)r0 * C, wte, rows, V, C, 0, 1, 0);
    lm_head_forward_rows_kernel<<<rows, LM_HEAD_THREADS, 0, ctx->stream>>>(logprobs + r0, lse ? lse + r0 : NULL,
                                                                         logits, targets + r0, V, softcap);
    cuda_check_launch();
  }
}

// dhidden (N, C) or NULL, dwte (V, C) or NULL, dlogprobs (N), hidden (N, C),
// wte (V, C), targets (N), lse (N) from the forward
extern "C" void lm_head_logprob_backward_cuda(CudaContext *ctx, bf16 *dhidden, float *dwte, const float *dlogprobs,
                                              const bf16 *hidden, const bf16 *wte, const int *targets,
                                              const float *lse, int N, int C, int V, float softcap) {
  if (N <= 0 || C <= 0) return;  // C = 0: dhidden and dwte are empty
  if (V <= 0) {                  // no vocabulary: no gradient
    if (dhidden) cuda_check(cudaMemsetAsync(dhidden, 0, sizeof(bf16) * (size_t)N * C, ctx->stream));
    return;
  }
  if (!dhidden && !dwte) return;
  int R = chunk_rows(N, V);
  float *logits = lm_head_scratch(ctx, scratch_bytes_for(R, V));  // (R, V)
  __nv_bfloat16 *dlogits = scratch_dlogits(logits, R, V);         // (R, V)
  for (int r0 = 0; r0 < N; r0 += R) {
    int rows = N - r0 < R ? N - r0 : R;
    const bf16 *hidden_chunk = hidden + (size_t)r0 * C;  // (rows, C)
    // the forward's logits again: same GEMM, same chunk, same bits
    gemm_bf16(ctx, logits, GEMM_OUT_F32, hidden_chunk, wte, rows, V, C, 0, 1, 0);
    chunk_backward(ctx, dhidden ? dhidden + (size_t)r0 * C : NULL, dwte, dlogits, logits, hidden_chunk, wte,
                   targets + r0, lse + r0, dlogprobs + r0, rows, C, V, softcap);
  }
}

// Forward and backward in one pass over the chunks, for objectives whose
// dlogprobs are known before the forward (SFT): per chunk one logits GEMM
// instead of two (the backward's recompute). Every step is the one the
// separate ops take, in the same order on the same chunks, so the results are
// bitwise those of forward then backward.
extern "C" void lm_head_logprob_forward_backward_cuda(CudaContext *ctx, float *logprobs, float *lse, bf16 *dhidden,
                                                      float *dwte, const float *dlogprobs, const bf16 *hidden,
                                                      const bf16 *wte, const int *targets, int N, int C, int V,
                                                      float softcap) {
  if (N <= 0) return;
  if (V <= 0 || C <= 0) {  // the separate ops' edge cases, in their order
    lm_head_logprob_forward_cuda(ctx, logprobs, lse, hidden, wte, targets, N, C, V, softcap);
    lm_head_logprob_backward_cuda(ctx, dhidden, dwte, dlogprobs, hidden, wte, targets, lse, N, C, V, softcap);
    return;
  }
  int R = chunk_rows(N, V);
  float *logits = lm_head_scratch(ctx, scratch_bytes_for(R, V));  // (R, V)
  __nv_bfloat16 *dlogits = scratch_dlogits(logits, R, V);         // (R, V)
  for (int r0 = 0; r0 < N; r0 += R) {
    int rows = N - r0 < R ? N - r0 : R;
    const bf16 *hidden_chunk = hidden + (size_t)r0 * C;  // (rows, C)
    gemm_bf16(ctx, logits, GEMM_OUT_F32, hidden_chunk, wte, rows, V, C, 0, 1, 0);
    lm_head_forward_rows_kernel<<<rows, LM_HEAD_THREADS, 0, ctx->stream>>>(logprobs + r0, lse + r0, logits,
                                                                         targets + r0, V, softcap);
    cuda_check_launch();
    chunk_backward(ctx, dhidden ? dhidden + (size_t)r0 * C : NULL, dwte, dlogits, logits, hidden_chunk, wte,
                   targets + r0, lse + r0, dlogprobs + r0, rows, C, V, softcap);
  }
}

// logits (N, V) fp32 = cap(hidden (N, C) @ wte (V, C)^T). Rows in chunks of
// at most 2^28 logits so that no index of the GEMM's output nears 2^31.
extern "C" void lm_head_logits_cuda(CudaContext *ctx, float *logits, const bf16 *hidden, const bf16 *wte, int N,
                                    int C, int V, float softcap) {
  if (N <= 0 || V <= 0) return;
  int R = (int)(((size_t)1 << 28) / (size_t)V);
  if (R < 1) R = 1;
  for (int r0 = 0; r0 < N; r0 += R) {
    int rows = N - r0 < R ? N - r0 : R;
    float *out = logits + (size_t)r0 * V;  // (rows, V)
    gemm_bf16(ctx, out, GEMM_OUT_F32, hidden + (size_t)r0 * C, wte, rows, V, C, 0, 1, 0);
    if (softcap > 0.0f) {
      size_t n = (size_t)rows * V;
      int blocks = (int)(ceil_div_size(n, 256) < 65536 ? ceil_div_size(n, 256) : 65536);
      softcap_inplace_kernel<<<blocks, 256, 0, ctx->stream>>>(out, n, softcap);
      cuda_check_launch();
    }
  }
}
