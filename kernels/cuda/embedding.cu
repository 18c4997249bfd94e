// kernels/cuda/embedding.cu: token embedding on the GPU. Defines
// embedding_forward_cuda and embedding_backward_cuda (kernels/cuda/ops_cuda.h);
// kernels/cpu/embedding.c is the reference.
//
// Forward: one block per token row gathers wte[token] * scale (a zero row for
// token < 0), 8 bf16 per 128-bit load when C % 8 == 0 and the pointers are
// 16-byte aligned, single columns otherwise.
//
// Backward, deterministic without atomics: the rows are grouped by token on
// the HOST. The token ids (N ints, tens of KiB) are copied down, which
// synchronizes the stream (twice per call: the download, then the small
// upload of the grouping): the embedding backward is the last op of a
// backward pass, so little is left queued behind it to starve. The
// valid rows (0 <= token < V, token != padding_idx) are sorted by (token,
// row); the permutation, the segment starts and each segment's token go up in
// one stream-ordered scratch block. Then block (segment, column tile) adds the
// segment's rows to dwte[token] in row order, one thread per column:
// dwte[token][c] += dout[row][c] * scale, row after row, exactly the CPU's
// order, so repeated tokens sum the same way as on the CPU.
extern "C" {
#include "core/error.h"
}
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

#define EMBEDDING_THREADS 128
#define EMBEDDING_BWD_THREADS 256

// ---- forward ----
// out (N, C), tokens (N), wte (V, C). One block per row n = blockIdx.x.
template <bool VEC>
__global__ void embedding_forward_kernel(__nv_bfloat16 *out, const int *tokens, const __nv_bfloat16 *wte, int C,
                                         float scale) {
  int n = blockIdx.x;
  int token = tokens[n];
  __nv_bfloat16 *o = out + (size_t)n * C;  // (C)
  if (VEC) {
    int4 *o4 = reinterpret_cast<int4 *>(o);
    if (token < 0) {
      for (int v = threadIdx.x; v < C / 8; v += blockDim.x) o4[v] = make_int4(0, 0, 0, 0);
      return;
    }
    const int4 *w4 = reinterpret_cast<const int4 *>(wte + (size_t)token * C);  // (C / 8)
    for (int v = threadIdx.x; v < C / 8; v += blockDim.x) {
      float f[8];
      unpack_bf16x8(w4[v], f);
#pragma unroll
      for (int i = 0; i < 8; i++) f[i] *= scale;
      o4[v] = pack_bf16x8(f);
    }
  } else {
    if (token < 0) {
      for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = float_to_bf16(0.0f);
      return;
    }
    const __nv_bfloat16 *w = wte + (size_t)token * C;  // (C)
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = float_to_bf16(bf16_to_float(w[c]) * scale);
  }
}

extern "C" void embedding_forward_cuda(CudaContext *ctx, bf16 *out, const int *tokens, const bf16 *wte, int N, int C,
                                       float scale) {
  if (N <= 0 || C <= 0) return;
  int vec = !cuda_simple_mode() && C % 8 == 0 && is_aligned16(out) && is_aligned16(wte);
  if (vec)
    embedding_forward_kernel<true><<<(unsigned)N, EMBEDDING_THREADS, 0, ctx->stream>>>(as_nv(out), tokens, as_nv(wte),
                                                                                        C, scale);
  else
    embedding_forward_kernel<false><<<(unsigned)N, EMBEDDING_THREADS, 0, ctx->stream>>>(as_nv(out), tokens,
                                                                                         as_nv(wte), C, scale);
  cuda_check_launch();
}

// ---- backward ----
// dwte (V, C) fp32 accumulated; dout (N, C); perm (rows): row ids grouped by
// token, in row order within a token; seg_start (segments + 1) into perm;
// seg_token (segments). Grid (segments, ceil(C / 256)), one thread per column.
__global__ void embedding_backward_kernel(float *dwte, const __nv_bfloat16 *dout, const int *perm,
                                          const int *seg_start, const int *seg_token, int C, float scale) {
  int s = blockIdx.x;
  int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float *dw = dwte + (size_t)seg_token[s] * C + c;
  float acc = *dw;
  for (int j = seg_start[s]; j < seg_start[s + 1]; j++) acc += bf16_to_float(dout[(size_t)perm[j] * C + c]) * scale;
  *dw = acc;
}

typedef struct TokenRow {
  int token, row;
} TokenRow;

static int token_row_cmp(const void *pa, const void *pb) {
  const TokenRow *a = (const TokenRow *)pa, *b = (const TokenRow *)pb;
  if (a->token != b->token) return a->token < b->token ? -1 : 1;
  return a->row < b->row ? -1 : (a->row > b->row);
}

static void *host_alloc_or_die(size_t bytes) {
  void *p = malloc(bytes > 0 ? bytes : 1);
  if (!p) {
    fprintf(stderr, "fimi: embedding_backward_cuda: out of host memory (%zu bytes)\n", bytes);
    exit(EXIT_FAILURE);
  }
  return p;
}

extern "C" void embedding_backward_cuda(CudaContext *ctx, float *dwte, const bf16 *dout, const int *tokens, int N,
                                        int C, int V, float scale, int padding_idx) {
  if (!dwte || N <= 0 || C <= 0 || V <= 0) return;
  int *host_tokens = (int *)host_alloc_or_die((size_t)N * sizeof(int));  // (N)
  cuda_check(cudaMemcpyAsync(host_tokens, tokens, (size_t)N * sizeof(int), cudaMemcpyDeviceToHost, ctx->stream));
  cuda_check(cudaStreamSynchronize(ctx->stream));  // the first of its two syncs (see the header)

  TokenRow *pairs = (TokenRow *)host_alloc_or_die((size_t)N * sizeof(TokenRow));  // (rows)
  int rows = 0;
  for (int n = 0; n < N; n++) {
    int t = host_tokens[n];
    if (t < 0 || t >= V || t == padding_idx) continue;  // padding, out of range, or the pad row
    pairs[rows].token = t;
    pairs[rows].row = n;
    rows++;
  }
  free(host_tokens);
  if (rows == 0) {
    free(pairs);
    return;
  }
  qsort(pairs, (size_t)rows, sizeof *pairs, token_row_cmp);
  int segments = 1;
  for (int j = 1; j < rows; j++) segments += pairs[j].token != pairs[j - 1].token;

  // one block: perm (rows) | seg_start (segments + 1) | seg_token (segments)
  size_t ints = (size_t)rows + 2 * (size_t)segments + 1;
  int *host = (int *)host_alloc_or_die(ints * sizeof(int));
  int *perm = host, *seg_start = host + rows, *seg_token = seg_start + segments + 1;
  int s = 0;
  for (int j = 0; j < rows; j++) {
    if (j == 0 || pairs[j].token != pairs[j - 1].token) {
      seg_start[s] = j;
      seg_token[s] = pairs[j].token;
      s++;
    }
    perm[j] = pairs[j].row;
  }
  seg_start[segments] = rows;
  free(pairs);

  int *device = NULL;
  cuda_check(cudaMallocAsync((void **)&device, ints * sizeof(int), ctx->stream));
  cuda_check(cudaMemcpyAsync(device, host, ints * sizeof(int), cudaMemcpyHostToDevice, ctx->stream));
  // a pageable host buffer may be reused once cudaMemcpyAsync returns, but wait
  // anyway: the copy is tiny and this keeps the host side obviously safe
  cuda_check(cudaStreamSynchronize(ctx->stream));
  free(host);
  dim3 grid((unsigned)segments, (unsigned)ceil_div(C, EMBEDDING_BWD_THREADS));
  embedding_backward_kernel<<<grid, EMBEDDING_BWD_THREADS, 0, ctx->stream>>>(
      dwte, as_nv(dout), device, device + rows, device + rows + segments + 1, C, scale);
  cuda_check_launch();
  cuda_check(cudaFreeAsync(device, ctx->stream));
}
