// kernels/cuda/common.cuh: what every kernels/cuda/*.cu file shares. Defines
// cuda_check / cuda_check_launch (abort with file:line and the CUDA message),
// bf16 <-> float helpers, warp and block reductions,
// the counter-based hash used for stochastic rounding and sampling, and
// ceil_div, cuda_simple_mode, is_aligned16, grid_stride_blocks and the
// 8 x bf16 pack/unpack of 128-bit loads (the CudaContext layout itself is in
// context.cuh). Included only by .cu files.
#ifndef FIMI_KERNELS_CUDA_COMMON_CUH
#define FIMI_KERNELS_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/ops_cuda.h"

// A failed CUDA call inside an op is a programming or device error (ops return
// void, as on CPU): report where and stop, as llm.c's cudaCheck does.
static inline void cuda_check_at(cudaError_t status, const char *file, int line) {
  if (status != cudaSuccess) {
    fprintf(stderr, "fimi: CUDA error at %s:%d: %s\n", file, line, cudaGetErrorString(status));
    exit(EXIT_FAILURE);
  }
}
#define cuda_check(call) cuda_check_at((call), __FILE__, __LINE__)
// After every kernel launch: catches bad launch configurations at once.
#define cuda_check_launch() cuda_check_at(cudaGetLastError(), __FILE__, __LINE__)

static inline void cublas_check_at(cublasStatus_t status, const char *file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "fimi: cuBLAS error %d at %s:%d\n", (int)status, file, line);
    exit(EXIT_FAILURE);
  }
}
#define cublas_check(call) cublas_check_at((call), __FILE__, __LINE__)

#include "kernels/cuda/context.cuh"

// FIMI_CUDA_SIMPLE set to a nonzero value: ops take their plain reference
// kernels (scalar loads, no tensor cores), so that tests/gpu/check.sh can tell
// a wrong fast kernel from a wrong test. Read at every call (a getenv costs
// nothing next to a launch) so that a test can compare both in one process.
static inline int cuda_simple_mode(void) {
  const char *s = getenv("FIMI_CUDA_SIMPLE");
  return s && s[0] && !(s[0] == '0' && s[1] == 0);
}

// 128-bit vector loads need 16-byte aligned addresses.
static inline int is_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
static inline size_t ceil_div_size(size_t a, size_t b) { return (a + b - 1) / b; }

// Blocks of `threads` for a grid-stride loop over `items`: enough to fill the
// GPU several times over (32 per SM), never more than the items need.
static inline unsigned grid_stride_blocks(const CudaContext *ctx, size_t items, int threads) {
  size_t needed = ceil_div_size(items, (size_t)threads);
  size_t cap = (size_t)(ctx->multiprocessors > 0 ? ctx->multiprocessors : 1) * 32;
  if (needed > cap) needed = cap;
  return (unsigned)(needed > 0 ? needed : 1);
}

__device__ __forceinline__ float bf16_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ __nv_bfloat16 float_to_bf16(float x) { return __float2bfloat16_rn(x); }

// bf16 pointers of the C API are the same memory as __nv_bfloat16.
static inline __nv_bfloat16 *as_nv(bf16 *p) { return reinterpret_cast<__nv_bfloat16 *>(p); }
static inline const __nv_bfloat16 *as_nv(const bf16 *p) { return reinterpret_cast<const __nv_bfloat16 *>(p); }

// 8 bf16 in one 128-bit word <-> 8 floats. Element 2i is the low half of word
// i (little-endian), and a bf16 is the upper 16 bits of a float.
__device__ __forceinline__ void unpack_bf16x8(int4 raw, float f[8]) {
  unsigned w[4] = {(unsigned)raw.x, (unsigned)raw.y, (unsigned)raw.z, (unsigned)raw.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ int4 pack_bf16x8(const float f[8]) {
  unsigned w[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    unsigned lo = __bfloat16_as_ushort(float_to_bf16(f[2 * i]));
    unsigned hi = __bfloat16_as_ushort(float_to_bf16(f[2 * i + 1]));
    w[i] = lo | (hi << 16);
  }
  return make_int4((int)w[0], (int)w[1], (int)w[2], (int)w[3]);
}

__device__ __forceinline__ float warp_reduce_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
__device__ __forceinline__ float warp_reduce_max(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// Sum over a block of up to 1024 threads (blockDim.x a multiple of 32). The
// order is fixed by the launch shape, so the result is deterministic. All
// threads get the sum. `shared` holds 32 floats.
__device__ __forceinline__ float block_reduce_sum(float x, float *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_reduce_sum(x);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : 0.0f;
  return warp_reduce_sum(x);
}

// A 64-bit counter-based hash (splitmix64 finalizer): random bits from
// (seed, index) alone, so results do not depend on the launch configuration.
__device__ __forceinline__ uint64_t hash_u64(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Stochastic rounding of fp32 to bf16: adding 16 uniform random bits below the
// bf16 mantissa then truncating rounds up with probability equal to the
// fraction of the gap, so E[result] = x (unbiased). Inf/NaN pass through.
__device__ __forceinline__ __nv_bfloat16 float_to_bf16_stochastic(float x, uint32_t random16) {
  uint32_t bits = __float_as_uint(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return __float2bfloat16_rn(x);
  bits += random16 & 0xffffu;
  bits &= 0xffff0000u;
  return __ushort_as_bfloat16((unsigned short)(bits >> 16));
}

#endif
