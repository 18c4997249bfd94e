// kernels/cuda/rmsnorm.cu: Gemma RMSNorm on the GPU, fp32 statistics.
// Defines rmsnorm_forward_cuda and rmsnorm_backward_cuda (gain 1 + w, Gemma
// 2/3) and rmsnorm_forward_gain_cuda and rmsnorm_backward_gain_cuda (gain w,
// Gemma 4, or no gain with weight NULL: Gemma 4's value norm), all in
// kernels/cuda/ops_cuda.h; kernels/cpu/rmsnorm.c is the reference.
//
// The three gains are one set of kernels with the gain as a template
// argument (NormGain): each flavour is compiled on its own, the (1 + w)
// kernels to the same PTX as when they were the only ones (same bits), and
// the no-weight ones never load a weight.
//
// Forward and the dinp part of the backward: one warp per row (8 rows per
// 256-thread block). Each lane sums its columns in fp32, the warp reduces with
// shuffles (a fixed order, so deterministic), then the row is read a second
// time (from L1/L2: a row is at most a few KiB) to write the output. When C is
// a multiple of 8 and the pointers are 16-byte aligned each lane moves 8 bf16
// per load; otherwise (or with FIMI_CUDA_SIMPLE=1) it walks single columns.
//
// dweight (the same for both weighted gains: d(1 + w)/dw = dw/dw = 1) without
// atomics: the rows are split into R fixed chunks and the columns into
// 64-wide tiles; block (tile, chunk) sums its rows for its 64 columns into
// partial (R, C) fp32, then one thread per column adds the R partials in
// chunk order to dweight. R depends only on (N, C), so the bits do
// not depend on the GPU. partial is stream-ordered scratch (cudaMallocAsync
// from the device pool, which cuda_context_create keeps warm).
extern "C" {
#include "core/error.h"
}
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

#define RMSNORM_WARPS 8                 // rows per block in the row kernels
#define RMSNORM_TILE 64                 // columns per block in the dweight kernel (2 per lane)
#define RMSNORM_ROW_GROUPS 8            // blockDim.y of the dweight kernel
#define RMSNORM_MIN_ROWS_PER_CHUNK 32   // fewer rows per chunk would be mostly overhead
#define RMSNORM_TARGET_BLOCKS 1024      // (tiles * chunks) aimed at: several waves on 132 SMs

// The gain applied after normalizing: (1 + w) (Gemma 2/3 store the weight
// centred on 0), w (Gemma 4 stores the gain itself), or none (weight NULL).
enum NormGain { GAIN_ONE_PLUS_W, GAIN_W, GAIN_NONE };

// The gain of one column from its bf16 weight value w (unused for GAIN_NONE).
template <int GAIN>
__device__ __forceinline__ float norm_gain(float w) {
  return GAIN == GAIN_ONE_PLUS_W ? 1.0f + w : (GAIN == GAIN_W ? w : 1.0f);
}

// The 8 weight values of a vector lane at column c (without a weight: no
// load, zeros that norm_gain ignores). The kernels apply norm_gain inside
// each expression, where (1 + w) always stood, so that the (1 + w) kernels
// compile to the same instructions as before the other gains existed.
template <int GAIN>
__device__ __forceinline__ void load_weight8(const __nv_bfloat16 *weight, int c, float w[8]) {
  if (GAIN == GAIN_NONE) {
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = 0.0f;
    return;
  }
  unpack_bf16x8(*reinterpret_cast<const int4 *>(weight + c), w);
}

// The gain of column c (1 without a weight: no load).
template <int GAIN>
__device__ __forceinline__ float column_gain(const __nv_bfloat16 *weight, int c) {
  return GAIN == GAIN_NONE ? 1.0f : norm_gain<GAIN>(bf16_to_float(weight[c]));
}

// ---- forward ----
// out (N, C), rstd (N) or NULL, inp (N, C), weight (C) (NULL for GAIN_NONE).
// Block (32, 8): warp threadIdx.y handles row blockIdx.x * 8 + threadIdx.y.
// VEC: C % 8 == 0 and every pointer 16-byte aligned (so every row start is too).
template <bool VEC, int GAIN>
__global__ void rmsnorm_forward_kernel(__nv_bfloat16 *out, float *rstd, const __nv_bfloat16 *inp,
                                       const __nv_bfloat16 *weight, int N, int C, float eps) {
  int row = blockIdx.x * RMSNORM_WARPS + threadIdx.y;
  int lane = threadIdx.x;
  if (row >= N) return;  // whole warps leave together: no block-wide sync below
  const __nv_bfloat16 *x = inp + (size_t)row * C;  // (C)
  __nv_bfloat16 *o = out + (size_t)row * C;        // (C)
  float sum_sq = 0.0f;
  if (VEC) {
    for (int c = lane * 8; c < C; c += 32 * 8) {
      float f[8];
      unpack_bf16x8(*reinterpret_cast<const int4 *>(x + c), f);
#pragma unroll
      for (int i = 0; i < 8; i++) sum_sq += f[i] * f[i];
    }
  } else {
    for (int c = lane; c < C; c += 32) {
      float v = bf16_to_float(x[c]);
      sum_sq += v * v;
    }
  }
  sum_sq = warp_reduce_sum(sum_sq);
  float mean_sq = sum_sq / (float)C;
  float r = 1.0f / sqrtf(mean_sq + eps);
  // HF order: normalize first, then apply the gain
  if (VEC) {
    for (int c = lane * 8; c < C; c += 32 * 8) {
      float f[8], w[8];
      unpack_bf16x8(*reinterpret_cast<const int4 *>(x + c), f);
      load_weight8<GAIN>(weight, c, w);
#pragma unroll
      for (int i = 0; i < 8; i++) f[i] = (f[i] * r) * norm_gain<GAIN>(w[i]);
      *reinterpret_cast<int4 *>(o + c) = pack_bf16x8(f);
    }
  } else {
    for (int c = lane; c < C; c += 32) o[c] = float_to_bf16((bf16_to_float(x[c]) * r) * column_gain<GAIN>(weight, c));
  }
  if (rstd && lane == 0) rstd[row] = r;
}

// The forward of one gain. out (N, C), rstd (N) or NULL, inp (N, C), weight (C) or NULL.
template <int GAIN>
static void rmsnorm_forward_launch(CudaContext *ctx, bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight,
                                   int N, int C, float eps) {
  if (N <= 0 || C <= 0) return;
  dim3 block(32, RMSNORM_WARPS);
  unsigned grid = (unsigned)ceil_div(N, RMSNORM_WARPS);
  // is_aligned16(NULL) holds: a missing weight does not force the scalar path
  int vec = !cuda_simple_mode() && C % 8 == 0 && is_aligned16(out) && is_aligned16(inp) && is_aligned16(weight);
  if (vec)
    rmsnorm_forward_kernel<true, GAIN><<<grid, block, 0, ctx->stream>>>(as_nv(out), rstd, as_nv(inp),
                                                                         weight ? as_nv(weight) : NULL, N, C, eps);
  else
    rmsnorm_forward_kernel<false, GAIN><<<grid, block, 0, ctx->stream>>>(as_nv(out), rstd, as_nv(inp),
                                                                          weight ? as_nv(weight) : NULL, N, C, eps);
  cuda_check_launch();
}

extern "C" void rmsnorm_forward_cuda(CudaContext *ctx, bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight,
                                     int N, int C, float eps) {
  rmsnorm_forward_launch<GAIN_ONE_PLUS_W>(ctx, out, rstd, inp, weight, N, C, eps);
}

// weight NULL: no gain (Gemma 4's value norm).
extern "C" void rmsnorm_forward_gain_cuda(CudaContext *ctx, bf16 *out, float *rstd, const bf16 *inp,
                                          const bf16 *weight, int N, int C, float eps) {
  if (weight) rmsnorm_forward_launch<GAIN_W>(ctx, out, rstd, inp, weight, N, C, eps);
  else rmsnorm_forward_launch<GAIN_NONE>(ctx, out, rstd, inp, NULL, N, C, eps);
}

// ---- backward: dinp ----
// y = x * r * g with the column's gain g: dx = r * g * dy - x * r^3 / C * sum_j(dy_j * g_j * x_j).
// dinp (N, C), dout (N, C), inp (N, C), weight (C) (NULL for GAIN_NONE), rstd
// (N). Launch as the forward.
template <bool VEC, int GAIN>
__global__ void rmsnorm_backward_dinp_kernel(__nv_bfloat16 *dinp, const __nv_bfloat16 *dout,
                                             const __nv_bfloat16 *inp, const __nv_bfloat16 *weight,
                                             const float *rstd, int N, int C) {
  int row = blockIdx.x * RMSNORM_WARPS + threadIdx.y;
  int lane = threadIdx.x;
  if (row >= N) return;
  const __nv_bfloat16 *x = inp + (size_t)row * C;   // (C)
  const __nv_bfloat16 *d = dout + (size_t)row * C;  // (C)
  __nv_bfloat16 *dx = dinp + (size_t)row * C;       // (C)
  float r = rstd[row];
  float dot = 0.0f;
  if (VEC) {
    for (int c = lane * 8; c < C; c += 32 * 8) {
      float fx[8], fd[8], fw[8];
      unpack_bf16x8(*reinterpret_cast<const int4 *>(x + c), fx);
      unpack_bf16x8(*reinterpret_cast<const int4 *>(d + c), fd);
      load_weight8<GAIN>(weight, c, fw);
#pragma unroll
      for (int i = 0; i < 8; i++) dot += (fd[i] * norm_gain<GAIN>(fw[i])) * fx[i];
    }
  } else {
    for (int c = lane; c < C; c += 32)
      dot += (bf16_to_float(d[c]) * column_gain<GAIN>(weight, c)) * bf16_to_float(x[c]);
  }
  dot = warp_reduce_sum(dot);
  float coef = (dot / (float)C) * r * r * r;
  if (VEC) {
    for (int c = lane * 8; c < C; c += 32 * 8) {
      float fx[8], fd[8], fw[8];
      unpack_bf16x8(*reinterpret_cast<const int4 *>(x + c), fx);
      unpack_bf16x8(*reinterpret_cast<const int4 *>(d + c), fd);
      load_weight8<GAIN>(weight, c, fw);
#pragma unroll
      for (int i = 0; i < 8; i++) fd[i] = r * norm_gain<GAIN>(fw[i]) * fd[i] - fx[i] * coef;
      *reinterpret_cast<int4 *>(dx + c) = pack_bf16x8(fd);
    }
  } else {
    for (int c = lane; c < C; c += 32) {
      float g = column_gain<GAIN>(weight, c);
      dx[c] = float_to_bf16(r * g * bf16_to_float(d[c]) - bf16_to_float(x[c]) * coef);
    }
  }
}

// ---- backward: dweight, stage 1 ----
// partial[chunk][c] = sum over the chunk's rows n of dout[n,c] * x[n,c] * rstd[n].
// partial (chunks, C), dout (N, C), inp (N, C), rstd (N). Block (32, 8), grid
// (tiles, chunks): lane tx owns columns tile*64 + 2tx and + 2tx + 1 (adjacent
// bf16, so a warp reads 128 contiguous bytes per row); row group ty takes rows
// chunk_start + ty, + 8, ...; then the 8 groups are added in order.
__global__ void rmsnorm_dweight_partial_kernel(float *partial, const __nv_bfloat16 *dout, const __nv_bfloat16 *inp,
                                               const float *rstd, int N, int C, int rows_per_chunk) {
  __shared__ float sums[RMSNORM_ROW_GROUPS][RMSNORM_TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int chunk = blockIdx.y;
  int c0 = blockIdx.x * RMSNORM_TILE + 2 * tx;
  int row_start = chunk * rows_per_chunk;
  int row_end = row_start + rows_per_chunk < N ? row_start + rows_per_chunk : N;
  float acc0 = 0.0f, acc1 = 0.0f;
  for (int n = row_start + ty; n < row_end; n += RMSNORM_ROW_GROUPS) {
    size_t base = (size_t)n * C;
    float r = rstd[n];
    if (c0 < C) acc0 += (bf16_to_float(dout[base + c0]) * bf16_to_float(inp[base + c0])) * r;
    if (c0 + 1 < C) acc1 += (bf16_to_float(dout[base + c0 + 1]) * bf16_to_float(inp[base + c0 + 1])) * r;
  }
  sums[ty][2 * tx] = acc0;
  sums[ty][2 * tx + 1] = acc1;
  __syncthreads();
  if (ty == 0) {
    for (int j = 0; j < 2; j++) {
      int c = c0 + j;
      float s = 0.0f;
      for (int g = 0; g < RMSNORM_ROW_GROUPS; g++) s += sums[g][2 * tx + j];
      if (c < C) partial[(size_t)chunk * C + c] = s;
    }
  }
}

// ---- backward: dweight, stage 2 ----
// dweight[c] += sum over chunks (in chunk order) of partial[chunk][c].
// dweight (C), partial (chunks, C). One thread per column.
__global__ void rmsnorm_dweight_reduce_kernel(float *dweight, const float *partial, int chunks, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s = 0.0f;
  for (int k = 0; k < chunks; k++) s += partial[(size_t)k * C + c];
  dweight[c] += s;
}

// The dinp part of the backward of one gain: shapes as rmsnorm_backward_launch.
template <int GAIN>
static void rmsnorm_backward_dinp_launch(CudaContext *ctx, bf16 *dinp, const bf16 *dout, const bf16 *inp,
                                         const bf16 *weight, const float *rstd, int N, int C) {
  dim3 block(32, RMSNORM_WARPS);
  unsigned grid = (unsigned)ceil_div(N, RMSNORM_WARPS);
  int vec = !cuda_simple_mode() && C % 8 == 0 && is_aligned16(dinp) && is_aligned16(dout) && is_aligned16(inp) &&
            is_aligned16(weight);
  const __nv_bfloat16 *w = weight ? as_nv(weight) : NULL;
  if (vec)
    rmsnorm_backward_dinp_kernel<true, GAIN><<<grid, block, 0, ctx->stream>>>(as_nv(dinp), as_nv(dout), as_nv(inp),
                                                                               w, rstd, N, C);
  else
    rmsnorm_backward_dinp_kernel<false, GAIN><<<grid, block, 0, ctx->stream>>>(as_nv(dinp), as_nv(dout), as_nv(inp),
                                                                                w, rstd, N, C);
  cuda_check_launch();
}

// dweight (C) += sum over rows of dout * x * rstd: the gradient of the weight
// for both weighted gains (d(1 + w)/dw = dw/dw = 1). dout, inp (N, C), rstd (N).
static void rmsnorm_backward_dweight(CudaContext *ctx, float *dweight, const bf16 *dout, const bf16 *inp,
                                     const float *rstd, int N, int C) {
  int tiles = ceil_div(C, RMSNORM_TILE);
  // chunks: enough blocks in all, at least RMSNORM_MIN_ROWS_PER_CHUNK rows each
  int chunks = RMSNORM_TARGET_BLOCKS / tiles;
  if (chunks < 1) chunks = 1;
  int max_chunks = ceil_div(N, RMSNORM_MIN_ROWS_PER_CHUNK);
  if (chunks > max_chunks) chunks = max_chunks;
  int rows_per_chunk = ceil_div(N, chunks);
  chunks = ceil_div(N, rows_per_chunk);  // no empty trailing chunk
  float *partial = NULL;                 // (chunks, C)
  cuda_check(cudaMallocAsync((void **)&partial, (size_t)chunks * C * sizeof(float), ctx->stream));
  dim3 block(32, RMSNORM_ROW_GROUPS);
  dim3 grid((unsigned)tiles, (unsigned)chunks);
  rmsnorm_dweight_partial_kernel<<<grid, block, 0, ctx->stream>>>(partial, as_nv(dout), as_nv(inp), rstd, N, C,
                                                                  rows_per_chunk);
  cuda_check_launch();
  rmsnorm_dweight_reduce_kernel<<<(unsigned)ceil_div(C, 256), 256, 0, ctx->stream>>>(dweight, partial, chunks, C);
  cuda_check_launch();
  cuda_check(cudaFreeAsync(partial, ctx->stream));
}

// dinp (N, C) overwritten or NULL, dweight (C) accumulated or NULL (left
// alone without a weight), dout, inp (N, C), weight (C) or NULL for
// GAIN_NONE, rstd (N).
template <int GAIN>
static void rmsnorm_backward_launch(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                                    const bf16 *weight, const float *rstd, int N, int C) {
  if (N <= 0 || C <= 0) return;
  if (dinp) rmsnorm_backward_dinp_launch<GAIN>(ctx, dinp, dout, inp, weight, rstd, N, C);
  if (dweight && GAIN != GAIN_NONE) rmsnorm_backward_dweight(ctx, dweight, dout, inp, rstd, N, C);
}

extern "C" void rmsnorm_backward_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout,
                                      const bf16 *inp, const bf16 *weight, const float *rstd, int N, int C) {
  rmsnorm_backward_launch<GAIN_ONE_PLUS_W>(ctx, dinp, dweight, dout, inp, weight, rstd, N, C);
}

// weight NULL: no gain and no dweight, as on the CPU.
extern "C" void rmsnorm_backward_gain_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout,
                                           const bf16 *inp, const bf16 *weight, const float *rstd, int N, int C) {
  if (weight) rmsnorm_backward_launch<GAIN_W>(ctx, dinp, dweight, dout, inp, weight, rstd, N, C);
  else rmsnorm_backward_launch<GAIN_NONE>(ctx, dinp, dweight, dout, inp, NULL, rstd, N, C);
}
