// kernels/cuda/elementwise.cu: casts, the residual add and scalings on the
// GPU. Defines (kernels/cuda/ops_cuda.h) cast_f32_to_bf16_cuda,
// cast_bf16_to_f32_cuda, residual_add_cuda, scale_cuda and
// scale_by_device_scalar_cuda (the factor read from device memory: Gemma 4's
// layer_scalar, no host synchronization), Gemma 4's per-layer-input reshapes
// per_layer_inputs_combine_cuda and per_layer_inputs_split_cuda, and the
// double accumulator ZeRO-3's gradient owners use: accumulate_f64_cuda and
// cast_f64_to_f32_cuda (plain grid-stride loops: they touch one shard once
// per layer and micro-batch).
//
// Memory-bound: each thread moves 128 bits per load (8 bf16 or 4 fp32) when
// every pointer is 16-byte aligned, in a grid-stride loop; the last n % 8
// elements (or everything, for unaligned pointers or FIMI_CUDA_SIMPLE=1) go
// through a scalar kernel. The vector path keeps each element's arithmetic
// identical to the scalar one, so both give the same bits.
extern "C" {
#include "core/error.h"
}
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

#define ELEMWISE_THREADS 256

// ---- casts ----
// out (n) bf16, inp (n) fp32: elements [start, n)
__global__ void cast_f32_to_bf16_scalar_kernel(__nv_bfloat16 *out, const float *inp, size_t start, size_t n) {
  for (size_t i = start + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = float_to_bf16(inp[i]);
}

// out (nvec * 8) bf16, inp (nvec * 8) fp32, both 16-byte aligned
__global__ void cast_f32_to_bf16_vec_kernel(__nv_bfloat16 *out, const float *inp, size_t nvec) {
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += (size_t)gridDim.x * blockDim.x) {
    const float4 *src = reinterpret_cast<const float4 *>(inp) + 2 * v;
    float4 lo = src[0], hi = src[1];
    float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    reinterpret_cast<int4 *>(out)[v] = pack_bf16x8(f);
  }
}

// out (n) fp32, inp (n) bf16: elements [start, n)
__global__ void cast_bf16_to_f32_scalar_kernel(float *out, const __nv_bfloat16 *inp, size_t start, size_t n) {
  for (size_t i = start + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = bf16_to_float(inp[i]);
}

// out (nvec * 8) fp32, inp (nvec * 8) bf16, both 16-byte aligned
__global__ void cast_bf16_to_f32_vec_kernel(float *out, const __nv_bfloat16 *inp, size_t nvec) {
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += (size_t)gridDim.x * blockDim.x) {
    float f[8];
    unpack_bf16x8(reinterpret_cast<const int4 *>(inp)[v], f);
    float4 *dst = reinterpret_cast<float4 *>(out) + 2 * v;
    dst[0] = make_float4(f[0], f[1], f[2], f[3]);
    dst[1] = make_float4(f[4], f[5], f[6], f[7]);
  }
}

extern "C" void cast_f32_to_bf16_cuda(CudaContext *ctx, bf16 *out, const float *inp, size_t n) {
  if (n == 0) return;
  size_t nvec = (!cuda_simple_mode() && is_aligned16(out) && is_aligned16(inp)) ? n / 8 : 0;
  if (nvec > 0) {
    cast_f32_to_bf16_vec_kernel<<<grid_stride_blocks(ctx, nvec, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        as_nv(out), inp, nvec);
    cuda_check_launch();
  }
  if (nvec * 8 < n) {
    cast_f32_to_bf16_scalar_kernel<<<grid_stride_blocks(ctx, n - nvec * 8, ELEMWISE_THREADS), ELEMWISE_THREADS, 0,
                                     ctx->stream>>>(as_nv(out), inp, nvec * 8, n);
    cuda_check_launch();
  }
}

extern "C" void cast_bf16_to_f32_cuda(CudaContext *ctx, float *out, const bf16 *inp, size_t n) {
  if (n == 0) return;
  size_t nvec = (!cuda_simple_mode() && is_aligned16(out) && is_aligned16(inp)) ? n / 8 : 0;
  if (nvec > 0) {
    cast_bf16_to_f32_vec_kernel<<<grid_stride_blocks(ctx, nvec, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        out, as_nv(inp), nvec);
    cuda_check_launch();
  }
  if (nvec * 8 < n) {
    cast_bf16_to_f32_scalar_kernel<<<grid_stride_blocks(ctx, n - nvec * 8, ELEMWISE_THREADS), ELEMWISE_THREADS, 0,
                                     ctx->stream>>>(out, as_nv(inp), nvec * 8, n);
    cuda_check_launch();
  }
}

// ---- residual add: out = a + b in fp32, rounded to bf16 ----
// out, a, b (n): elements [start, n). In place is safe: each thread reads its
// elements before writing them, and no other thread touches them.
__global__ void residual_add_scalar_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *a, const __nv_bfloat16 *b,
                                           size_t start, size_t n) {
  for (size_t i = start + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

// out, a, b (nvec * 8), all 16-byte aligned
__global__ void residual_add_vec_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *a, const __nv_bfloat16 *b,
                                        size_t nvec) {
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += (size_t)gridDim.x * blockDim.x) {
    float fa[8], fb[8];
    unpack_bf16x8(reinterpret_cast<const int4 *>(a)[v], fa);
    unpack_bf16x8(reinterpret_cast<const int4 *>(b)[v], fb);
#pragma unroll
    for (int i = 0; i < 8; i++) fa[i] += fb[i];
    reinterpret_cast<int4 *>(out)[v] = pack_bf16x8(fa);
  }
}

// out, a, b (n). In place allowed.
extern "C" void residual_add_cuda(CudaContext *ctx, bf16 *out, const bf16 *a, const bf16 *b, size_t n) {
  if (n == 0) return;
  size_t nvec = (!cuda_simple_mode() && is_aligned16(out) && is_aligned16(a) && is_aligned16(b)) ? n / 8 : 0;
  if (nvec > 0) {
    residual_add_vec_kernel<<<grid_stride_blocks(ctx, nvec, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        as_nv(out), as_nv(a), as_nv(b), nvec);
    cuda_check_launch();
  }
  if (nvec * 8 < n) {
    residual_add_scalar_kernel<<<grid_stride_blocks(ctx, n - nvec * 8, ELEMWISE_THREADS), ELEMWISE_THREADS, 0,
                                 ctx->stream>>>(as_nv(out), as_nv(a), as_nv(b), nvec * 8, n);
    cuda_check_launch();
  }
}

// ---- scale: out = inp * factor in fp32, rounded to bf16 ----
// The factor is `scale`, or the bf16 at scalar[0] when scalar is not NULL
// (every thread reads it: one cached load, and the host never waits for it).
__device__ __forceinline__ float scale_factor(float scale, const __nv_bfloat16 *scalar) {
  return scalar ? bf16_to_float(scalar[0]) : scale;
}

// out, inp (n): elements [start, n); scalar (1) or NULL. In place is safe as
// for the residual add; out must not hold *scalar (another block could
// overwrite it before this one reads it).
__global__ void scale_scalar_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *inp, float scale,
                                    const __nv_bfloat16 *scalar, size_t start, size_t n) {
  float s = scale_factor(scale, scalar);
  for (size_t i = start + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = float_to_bf16(bf16_to_float(inp[i]) * s);
}

// out, inp (nvec * 8), both 16-byte aligned; scalar (1) or NULL
__global__ void scale_vec_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *inp, float scale,
                                 const __nv_bfloat16 *scalar, size_t nvec) {
  float s = scale_factor(scale, scalar);
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += (size_t)gridDim.x * blockDim.x) {
    float f[8];
    unpack_bf16x8(reinterpret_cast<const int4 *>(inp)[v], f);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] *= s;
    reinterpret_cast<int4 *>(out)[v] = pack_bf16x8(f);
  }
}

// out, inp (n); scalar (1) on device or NULL (then `scale`).
static void scale_launch(CudaContext *ctx, bf16 *out, const bf16 *inp, float scale, const bf16 *scalar, size_t n) {
  if (n == 0) return;
  const __nv_bfloat16 *sc = scalar ? as_nv(scalar) : NULL;
  size_t nvec = (!cuda_simple_mode() && is_aligned16(out) && is_aligned16(inp)) ? n / 8 : 0;
  if (nvec > 0) {
    scale_vec_kernel<<<grid_stride_blocks(ctx, nvec, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        as_nv(out), as_nv(inp), scale, sc, nvec);
    cuda_check_launch();
  }
  if (nvec * 8 < n) {
    scale_scalar_kernel<<<grid_stride_blocks(ctx, n - nvec * 8, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        as_nv(out), as_nv(inp), scale, sc, nvec * 8, n);
    cuda_check_launch();
  }
}

// out, inp (n). In place allowed.
extern "C" void scale_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, float scale, size_t n) {
  scale_launch(ctx, out, inp, scale, NULL, n);
}

// out, inp (n), scalar (1) on device. In place allowed (out == inp), out not over scalar.
extern "C" void scale_by_device_scalar_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const bf16 *scalar,
                                            size_t n) {
  scale_launch(ctx, out, inp, 0.0f, scalar, n);
}

// ---- Gemma 4's per-layer inputs: flat (N, L*P) <-> layer-major (L, N, P) ----
// Element e of the layer-major tensor, (l, n, p), is element (n, l*P + p) of
// the flat one.
__device__ __forceinline__ size_t ple_flat_index(size_t e, int N, int L, int P) {
  size_t p = e % (size_t)P, ln = e / (size_t)P;
  size_t n = ln % (size_t)N, l = ln / (size_t)N;
  return n * ((size_t)L * P) + l * (size_t)P + p;
}

// out (L, N, P) = (normed + embedded) * scale in fp32, rounded once; normed,
// embedded (N, L*P). Each step of a thread takes W consecutive p of one
// (l, n): W = 8 (P % 8 == 0 and 16-byte aligned pointers: 128-bit loads on
// both sides) or 1. Writes are contiguous, reads contiguous within a row of P.
template <int W>
__global__ void ple_combine_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *normed, const __nv_bfloat16 *embedded,
                                   int N, int L, int P, float scale) {
  size_t groups = (size_t)L * N * P / W;
  for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += (size_t)gridDim.x * blockDim.x) {
    size_t e = g * W, f = ple_flat_index(e, N, L, P);
    if (W == 8) {
      float a[8], b[8];
      unpack_bf16x8(*reinterpret_cast<const int4 *>(normed + f), a);
      unpack_bf16x8(*reinterpret_cast<const int4 *>(embedded + f), b);
#pragma unroll
      for (int i = 0; i < 8; i++) a[i] = (a[i] + b[i]) * scale;
      *reinterpret_cast<int4 *>(out + e) = pack_bf16x8(a);
    } else {
      out[e] = float_to_bf16((bf16_to_float(normed[f]) + bf16_to_float(embedded[f])) * scale);
    }
  }
}

// dflat (N, L*P) = dple (L, N, P) * scale, rounded once; W as above.
template <int W>
__global__ void ple_split_kernel(__nv_bfloat16 *dflat, const __nv_bfloat16 *dple, int N, int L, int P, float scale) {
  size_t groups = (size_t)L * N * P / W;
  for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += (size_t)gridDim.x * blockDim.x) {
    size_t e = g * W, f = ple_flat_index(e, N, L, P);
    if (W == 8) {
      float a[8];
      unpack_bf16x8(*reinterpret_cast<const int4 *>(dple + e), a);
#pragma unroll
      for (int i = 0; i < 8; i++) a[i] *= scale;
      *reinterpret_cast<int4 *>(dflat + f) = pack_bf16x8(a);
    } else {
      dflat[f] = float_to_bf16(bf16_to_float(dple[e]) * scale);
    }
  }
}

// out (L, N, P), normed, embedded (N, L*P). Not in place (the layouts differ).
extern "C" void per_layer_inputs_combine_cuda(CudaContext *ctx, bf16 *out, const bf16 *normed, const bf16 *embedded,
                                              int N, int L, int P, float scale) {
  if (N <= 0 || L <= 0 || P <= 0) return;
  size_t n = (size_t)L * N * P;
  int vec = !cuda_simple_mode() && P % 8 == 0 && is_aligned16(out) && is_aligned16(normed) && is_aligned16(embedded);
  if (vec)
    ple_combine_kernel<8><<<grid_stride_blocks(ctx, n / 8, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        as_nv(out), as_nv(normed), as_nv(embedded), N, L, P, scale);
  else
    ple_combine_kernel<1><<<grid_stride_blocks(ctx, n, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        as_nv(out), as_nv(normed), as_nv(embedded), N, L, P, scale);
  cuda_check_launch();
}

// dflat (N, L*P), dple (L, N, P). Not in place.
extern "C" void per_layer_inputs_split_cuda(CudaContext *ctx, bf16 *dflat, const bf16 *dple, int N, int L, int P,
                                            float scale) {
  if (N <= 0 || L <= 0 || P <= 0) return;
  size_t n = (size_t)L * N * P;
  int vec = !cuda_simple_mode() && P % 8 == 0 && is_aligned16(dflat) && is_aligned16(dple);
  if (vec)
    ple_split_kernel<8><<<grid_stride_blocks(ctx, n / 8, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        as_nv(dflat), as_nv(dple), N, L, P, scale);
  else
    ple_split_kernel<1><<<grid_stride_blocks(ctx, n, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(
        as_nv(dflat), as_nv(dple), N, L, P, scale);
  cuda_check_launch();
}

// acc[i] += (double)x[i]: one IEEE double add per element, the host's result.
__global__ void __launch_bounds__(ELEMWISE_THREADS) accumulate_f64_kernel(double *acc, const float *x, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    acc[i] = __dadd_rn(acc[i], (double)x[i]);
}

__global__ void __launch_bounds__(ELEMWISE_THREADS) cast_f64_to_f32_kernel(float *out, const double *in, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = __double2float_rn(in[i]);
}

extern "C" void accumulate_f64_cuda(CudaContext *ctx, double *acc, const float *x, size_t n) {
  if (n == 0) return;
  accumulate_f64_kernel<<<grid_stride_blocks(ctx, n, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(acc, x, n);
  cuda_check_launch();
}

extern "C" void cast_f64_to_f32_cuda(CudaContext *ctx, float *out, const double *in, size_t n) {
  if (n == 0) return;
  cast_f64_to_f32_kernel<<<grid_stride_blocks(ctx, n, ELEMWISE_THREADS), ELEMWISE_THREADS, 0, ctx->stream>>>(out, in, n);
  cuda_check_launch();
}
