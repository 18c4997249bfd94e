// kernels/cuda/adamw.cu: the optimizer ops on the GPU (kernels/cuda/ops_cuda.h).
// Defines adamw_update_cuda (AdamW on fp32 master weights and moments, then
// the bf16 working copy with stochastic rounding), round_bf16_stochastic_cuda
// (that rounding alone, for a resume) and sum_squares_cuda (the
// double sum of squares behind the global gradient norm).
//
// adamw_update_cuda follows kernels/cpu/adamw.c operation for operation
// (torch.optim.AdamW's single-tensor path, docs/optimizer.md): the scalars
// (bias corrections, step size, 1 - lr*wd) are computed on the host in double
// exactly as the CPU does and cast to fp32 where it casts; per element every
// fp32 operation is written with an explicitly rounded intrinsic (__fmul_rn,
// __fadd_rn, __fdiv_rn, __fsqrt_rn), so nvcc cannot contract a product and a
// sum into an FMA. The GPU therefore rounds each operation as the C source
// says; the CPU build may differ by an ulp where GCC contracts (-march=native).
// Elementwise, so the result does not depend on the launch shape; a float4
// kernel (all pointers 16-byte aligned) and a scalar kernel (tail, unaligned
// pointers, or FIMI_CUDA_SIMPLE=1) compute bitwise the same values.
//
// sum_squares_cuda: SUMSQ_BLOCKS x SUMSQ_THREADS threads, a constant grid, each
// thread summing x[i]^2 in double over i = thread, thread + stride, ... in
// increasing order; a block reduction in double gives one partial per block;
// one block then adds the SUMSQ_BLOCKS partials by a fixed tree. The order
// depends on n only: deterministic, no atomics. The partials are a
// stream-ordered allocation (cudaMallocAsync from the device's pool).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

#define ADAMW_THREADS 256
#define SUMSQ_BLOCKS 1024
#define SUMSQ_THREADS 256

// One step's scalars, as kernels/cpu/adamw.c derives them.
typedef struct AdamWScalars {
  float decay;          // 1 - lr * wd
  int decays;           // wd != 0
  float weight1;        // 1 - beta1
  float beta2;          // beta2
  float weight2;        // 1 - beta2
  float neg_step_size;  // -(lr / (1 - beta1^t))
  float bc2_sqrt;       // sqrt(1 - beta2^t)
  float eps;
  float grad_scale;
} AdamWScalars;

// torch's lerp: start + w * (end - start) for |w| < 0.5, else
// end - (end - start) * (1 - w).
__device__ __forceinline__ float lerp_torch(float start, float end, float weight) {
  float diff = __fsub_rn(end, start);
  return fabsf(weight) < 0.5f ? __fadd_rn(start, __fmul_rn(weight, diff))
                              : __fsub_rn(end, __fmul_rn(diff, __fsub_rn(1.0f, weight)));
}

// One element of the update: *p, *m, *v updated from g; kernels/cpu/adamw.c's
// loop body with every operation rounded as written there.
__device__ __forceinline__ void adamw_element(float *p, float *m, float *v, float grad, const AdamWScalars &s) {
  float g = s.grad_scale == 1.0f ? grad : __fmul_rn(grad, s.grad_scale);
  float pi = s.decays ? __fmul_rn(*p, s.decay) : *p;
  float mi = lerp_torch(*m, g, s.weight1);
  float vi = __fadd_rn(__fmul_rn(*v, s.beta2), __fmul_rn(__fmul_rn(s.weight2, g), g));  // v*beta2 + (w2*g)*g
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
  *p = __fadd_rn(pi, __fmul_rn(s.neg_step_size, __fdiv_rn(mi, denom)));
  *m = mi;
  *v = vi;
}

// The bf16 working copy of element i: stochastic rounding with 16 random bits
// from hash(seed, i), so the bits depend on (seed, i) only. Callers pass i
// counted from index0 (the element's index in a larger buffer), so a buffer
// updated in pieces (ZeRO-3 shards) gets the bits it gets updated whole.
__device__ __forceinline__ __nv_bfloat16 working_copy(float p, uint64_t seed, size_t i) {
  return float_to_bf16_stochastic(p, (uint32_t)hash_u64(seed, (uint64_t)i));
}

// Elements [begin, n) one per thread (grid-stride). param, m, v, grad (n),
// bf16_param (n) or NULL.
__global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_scalar_kernel(float *param, float *m, float *v, const float *grad, __nv_bfloat16 *bf16_param, size_t begin,
                        size_t n, AdamWScalars s, uint64_t seed, size_t index0) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = begin + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float p = param[i], mi = m[i], vi = v[i];
    adamw_element(&p, &mi, &vi, grad[i], s);
    param[i] = p;
    m[i] = mi;
    v[i] = vi;
    if (bf16_param) bf16_param[i] = working_copy(p, seed, index0 + i);
  }
}

// Elements [0, 4 * n4) four per thread as float4 (all pointers 16-byte
// aligned, bf16_param 8-byte aligned). Same per-element arithmetic and
// random bits as the scalar kernel.
__global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_vec4_kernel(float4 *param, float4 *m, float4 *v, const float4 *grad, __nv_bfloat16 *bf16_param, size_t n4,
                      AdamWScalars s, uint64_t seed, size_t index0) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n4; j += stride) {
    float4 p = param[j], mj = m[j], vj = v[j], g = grad[j];
    adamw_element(&p.x, &mj.x, &vj.x, g.x, s);
    adamw_element(&p.y, &mj.y, &vj.y, g.y, s);
    adamw_element(&p.z, &mj.z, &vj.z, g.z, s);
    adamw_element(&p.w, &mj.w, &vj.w, g.w, s);
    param[j] = p;
    m[j] = mj;
    v[j] = vj;
    if (bf16_param) {
      size_t i = index0 + 4 * j;
      // little-endian: the element at the lower address is the low half
      uint2 packed;
      packed.x = (uint32_t)__bfloat16_as_ushort(working_copy(p.x, seed, i)) |
                 ((uint32_t)__bfloat16_as_ushort(working_copy(p.y, seed, i + 1)) << 16);
      packed.y = (uint32_t)__bfloat16_as_ushort(working_copy(p.z, seed, i + 2)) |
                 ((uint32_t)__bfloat16_as_ushort(working_copy(p.w, seed, i + 3)) << 16);
      reinterpret_cast<uint2 *>(bf16_param)[j] = packed;
    }
  }
}

// out[i] = working_copy(in[i], seed, index0 + i) for i in [0, n): the
// rounding alone, with the bits adamw_update_cuda's kernels give element i.
__global__ void __launch_bounds__(ADAMW_THREADS)
    round_stochastic_kernel(__nv_bfloat16 *out, const float *in, size_t n, uint64_t seed, size_t index0) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = working_copy(in[i], seed, index0 + i);
}

static int aligned_to(const void *p, uintptr_t bytes) { return ((uintptr_t)p % bytes) == 0; }

extern "C" void round_bf16_stochastic_cuda(CudaContext *ctx, bf16 *out, const float *in, size_t n, uint64_t seed,
                                           size_t index0) {
  if (n == 0) return;
  round_stochastic_kernel<<<grid_stride_blocks(ctx, n, ADAMW_THREADS), ADAMW_THREADS, 0, ctx->stream>>>(
      (__nv_bfloat16 *)out, in, n, seed, index0);
  cuda_check_launch();
}

// param, m, v (n) fp32 updated in place; grad (n) fp32; bf16_param (n) or NULL
extern "C" void adamw_update_cuda(CudaContext *ctx, float *param, float *m, float *v, const float *grad,
                                  bf16 *bf16_param, size_t n, const AdamWStep *step, uint64_t seed,
                                  size_t index0) {
  if (n == 0) return;
  // Python-float arithmetic of torch's _single_tensor_adam, in double, then
  // fp32 where torch hands a scalar to an fp32 tensor op (as kernels/cpu/adamw.c).
  double t = (double)step->step;
  double bias_correction1 = 1.0 - pow(step->beta1, t);
  double bias_correction2 = 1.0 - pow(step->beta2, t);
  AdamWScalars s;
  s.decay = (float)(1.0 - step->lr * step->weight_decay);
  s.decays = step->weight_decay != 0.0;
  s.weight1 = (float)(1.0 - step->beta1);
  s.beta2 = (float)step->beta2;
  s.weight2 = (float)(1.0 - step->beta2);
  s.neg_step_size = (float)(-(step->lr / bias_correction1));
  s.bc2_sqrt = (float)sqrt(bias_correction2);
  s.eps = (float)step->eps;
  s.grad_scale = step->grad_scale;
  __nv_bfloat16 *out16 = bf16_param ? as_nv(bf16_param) : NULL;
  size_t done = 0;
  int vec = !cuda_simple_mode() && aligned_to(param, 16) && aligned_to(m, 16) && aligned_to(v, 16) &&
            aligned_to(grad, 16) && (!bf16_param || aligned_to(bf16_param, 8));
  if (vec && n >= 4) {
    size_t n4 = n / 4;
    adamw_vec4_kernel<<<grid_stride_blocks(ctx, n4, ADAMW_THREADS), ADAMW_THREADS, 0, ctx->stream>>>(
        (float4 *)param, (float4 *)m, (float4 *)v, (const float4 *)grad, out16, n4, s, seed, index0);
    cuda_check_launch();
    done = 4 * n4;
  }
  if (done < n) {
    adamw_scalar_kernel<<<grid_stride_blocks(ctx, n - done, ADAMW_THREADS), ADAMW_THREADS, 0, ctx->stream>>>(
        param, m, v, grad, out16, done, n, s, seed, index0);
    cuda_check_launch();
  }
}

// Sum over a block in double (blockDim.x a multiple of 32); all threads get
// it, the same bits in every thread (each butterfly step adds a + b on one
// lane and b + a on the other: the same value). shared: 32 doubles.
__device__ __forceinline__ double block_reduce_sum_double(double x, double *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : 0.0;
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// partials (SUMSQ_BLOCKS) = per-block sums of x[i]^2 (n). Grid SUMSQ_BLOCKS x
// SUMSQ_THREADS exactly (the order of the sums depends on it). Four loads
// are issued before the four adds, which keep the order i, i + stride, ...
__global__ void __launch_bounds__(SUMSQ_THREADS)
    sum_squares_partial_kernel(double *partials, const float *x, size_t n) {
  __shared__ double shared[32];
  size_t stride = (size_t)SUMSQ_BLOCKS * SUMSQ_THREADS;
  size_t i = (size_t)blockIdx.x * SUMSQ_THREADS + threadIdx.x;
  double acc = 0.0;
  for (; i < n && n - i > 3 * stride; i += 4 * stride) {  // i + 3*stride < n, without overflow
    float a = x[i], b = x[i + stride], c = x[i + 2 * stride], d = x[i + 3 * stride];
    acc += (double)a * (double)a;
    acc += (double)b * (double)b;
    acc += (double)c * (double)c;
    acc += (double)d * (double)d;
  }
  for (; i < n; i += stride) acc += (double)x[i] * (double)x[i];
  acc = block_reduce_sum_double(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// out (1) = sum of partials (SUMSQ_BLOCKS); one block of SUMSQ_BLOCKS threads.
__global__ void __launch_bounds__(SUMSQ_BLOCKS) sum_squares_final_kernel(double *out, const double *partials) {
  __shared__ double shared[32];
  double x = block_reduce_sum_double(partials[threadIdx.x], shared);
  if (threadIdx.x == 0) out[0] = x;
}

// out (1) double on device = sum of x[i]^2, x (n) fp32 on device
extern "C" void sum_squares_cuda(CudaContext *ctx, double *out, const float *x, size_t n) {
  if (n == 0) {
    cuda_check(cudaMemsetAsync(out, 0, sizeof(double), ctx->stream));
    return;
  }
  double *partials = NULL;  // (SUMSQ_BLOCKS)
  cuda_check(cudaMallocAsync((void **)&partials, sizeof(double) * SUMSQ_BLOCKS, ctx->stream));
  sum_squares_partial_kernel<<<SUMSQ_BLOCKS, SUMSQ_THREADS, 0, ctx->stream>>>(partials, x, n);
  cuda_check_launch();
  sum_squares_final_kernel<<<1, SUMSQ_BLOCKS, 0, ctx->stream>>>(out, partials);
  cuda_check_launch();
  cuda_check(cudaFreeAsync(partials, ctx->stream));
}
