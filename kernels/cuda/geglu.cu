// kernels/cuda/geglu.cu: Gemma's gated MLP activation on the GPU,
// out = gelu_tanh(gate) * up. Defines geglu_forward_cuda and
// geglu_backward_cuda (kernels/cuda/ops_cuda.h); kernels/cpu/geglu.c is the
// reference, and the formulas below are its formulas in its operation order:
//   t        = tanh(sqrt(2/pi) * (x + 0.044715 * (x * x * x)))
//   gelu(x)  = 0.5 * x * (1 + t)
//   gelu'(x) = 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2/pi) * (1 + 3 * 0.044715 * x^2)
// tanh is CUDA's tanhf (<= 2 ulp) where the CPU uses vm_tanhf (<= 2.1 ulp).
//
// Memory-bound and elementwise: a grid-stride loop where each thread moves 8
// bf16 per 128-bit load when every pointer is 16-byte aligned; the n % 8 tail
// (or all of it, unaligned or FIMI_CUDA_SIMPLE=1) goes through the scalar
// kernel. Both paths do the same per-element arithmetic.
extern "C" {
#include "core/error.h"
}
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

#define GEGLU_THREADS 256
#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

__device__ __forceinline__ float gelu_tanh_inner(float x) {
  return tanhf(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * (x * x * x)));
}

__device__ __forceinline__ float gelu_tanh_grad(float x, float t) {
  float dinner = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}

__device__ __forceinline__ float geglu_value(float x, float up) { return 0.5f * x * (1.0f + gelu_tanh_inner(x)) * up; }

// ---- forward ----
// out, gate, up (n): elements [start, n)
__global__ void geglu_forward_scalar_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *gate, const __nv_bfloat16 *up,
                                            size_t start, size_t n) {
  for (size_t i = start + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = float_to_bf16(geglu_value(bf16_to_float(gate[i]), bf16_to_float(up[i])));
}

// out, gate, up (nvec * 8), 16-byte aligned
__global__ void geglu_forward_vec_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *gate, const __nv_bfloat16 *up,
                                         size_t nvec) {
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += (size_t)gridDim.x * blockDim.x) {
    float g[8], u[8];
    unpack_bf16x8(reinterpret_cast<const int4 *>(gate)[v], g);
    unpack_bf16x8(reinterpret_cast<const int4 *>(up)[v], u);
#pragma unroll
    for (int i = 0; i < 8; i++) g[i] = geglu_value(g[i], u[i]);
    reinterpret_cast<int4 *>(out)[v] = pack_bf16x8(g);
  }
}

extern "C" void geglu_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *gate, const bf16 *up, size_t n) {
  if (n == 0) return;
  size_t nvec = (!cuda_simple_mode() && is_aligned16(out) && is_aligned16(gate) && is_aligned16(up)) ? n / 8 : 0;
  if (nvec > 0) {
    geglu_forward_vec_kernel<<<grid_stride_blocks(ctx, nvec, GEGLU_THREADS), GEGLU_THREADS, 0, ctx->stream>>>(
        as_nv(out), as_nv(gate), as_nv(up), nvec);
    cuda_check_launch();
  }
  if (nvec * 8 < n) {
    geglu_forward_scalar_kernel<<<grid_stride_blocks(ctx, n - nvec * 8, GEGLU_THREADS), GEGLU_THREADS, 0,
                                  ctx->stream>>>(as_nv(out), as_nv(gate), as_nv(up), nvec * 8, n);
    cuda_check_launch();
  }
}

// ---- backward ----
// dup = dout * gelu(gate) and dgate = dout * up * gelu'(gate), in the CPU's
// operation order; either output may be NULL (skipped).
__device__ __forceinline__ void geglu_grads(float d, float x, float u, float *dgate, float *dup) {
  float t = gelu_tanh_inner(x);
  *dup = d * 0.5f * x * (1.0f + t);
  *dgate = d * u * gelu_tanh_grad(x, t);
}

// dgate, dup (n) or NULL; dout, gate, up (n): elements [start, n)
__global__ void geglu_backward_scalar_kernel(__nv_bfloat16 *dgate, __nv_bfloat16 *dup, const __nv_bfloat16 *dout,
                                             const __nv_bfloat16 *gate, const __nv_bfloat16 *up, size_t start,
                                             size_t n) {
  for (size_t i = start + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float dg, du;
    geglu_grads(bf16_to_float(dout[i]), bf16_to_float(gate[i]), bf16_to_float(up[i]), &dg, &du);
    if (dgate) dgate[i] = float_to_bf16(dg);
    if (dup) dup[i] = float_to_bf16(du);
  }
}

// dgate, dup (nvec * 8) or NULL; dout, gate, up (nvec * 8); all 16-byte aligned
__global__ void geglu_backward_vec_kernel(__nv_bfloat16 *dgate, __nv_bfloat16 *dup, const __nv_bfloat16 *dout,
                                          const __nv_bfloat16 *gate, const __nv_bfloat16 *up, size_t nvec) {
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += (size_t)gridDim.x * blockDim.x) {
    float d[8], g[8], u[8], dg[8], du[8];
    unpack_bf16x8(reinterpret_cast<const int4 *>(dout)[v], d);
    unpack_bf16x8(reinterpret_cast<const int4 *>(gate)[v], g);
    unpack_bf16x8(reinterpret_cast<const int4 *>(up)[v], u);
#pragma unroll
    for (int i = 0; i < 8; i++) geglu_grads(d[i], g[i], u[i], &dg[i], &du[i]);
    if (dgate) reinterpret_cast<int4 *>(dgate)[v] = pack_bf16x8(dg);
    if (dup) reinterpret_cast<int4 *>(dup)[v] = pack_bf16x8(du);
  }
}

extern "C" void geglu_backward_cuda(CudaContext *ctx, bf16 *dgate, bf16 *dup, const bf16 *dout, const bf16 *gate,
                                    const bf16 *up, size_t n) {
  if (n == 0 || (!dgate && !dup)) return;
  int aligned = is_aligned16(dout) && is_aligned16(gate) && is_aligned16(up) && (!dgate || is_aligned16(dgate)) &&
                (!dup || is_aligned16(dup));
  size_t nvec = (!cuda_simple_mode() && aligned) ? n / 8 : 0;
  if (nvec > 0) {
    geglu_backward_vec_kernel<<<grid_stride_blocks(ctx, nvec, GEGLU_THREADS), GEGLU_THREADS, 0, ctx->stream>>>(
        as_nv(dgate), as_nv(dup), as_nv(dout), as_nv(gate), as_nv(up), nvec);
    cuda_check_launch();
  }
  if (nvec * 8 < n) {
    geglu_backward_scalar_kernel<<<grid_stride_blocks(ctx, n - nvec * 8, GEGLU_THREADS), GEGLU_THREADS, 0,
                                   ctx->stream>>>(as_nv(dgate), as_nv(dup), as_nv(dout), as_nv(gate), as_nv(up),
                                                  nvec * 8, n);
    cuda_check_launch();
  }
}
