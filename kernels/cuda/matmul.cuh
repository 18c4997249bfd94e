// kernels/cuda/matmul.cuh: the general cuBLASLt GEMM that every GPU matmul
// goes through (matmul.cu implements it; lm_head.cu and the benchmarks use it
// directly). Defines gemm_bf16 and GemmOut. Row-major, as the rest of fimi.
#ifndef FIMI_KERNELS_CUDA_MATMUL_CUH
#define FIMI_KERNELS_CUDA_MATMUL_CUH

#include "kernels/cuda/common.cuh"

typedef enum { GEMM_OUT_BF16 = 0, GEMM_OUT_F32 = 1 } GemmOut;

// out (M, N) = op(a) @ op(b) (+ out when accumulate), bf16 inputs, fp32 compute.
// a is stored (M, K), or (K, M) when transpose_a; b is stored (K, N), or (N, K)
// when transpose_b. out is bf16 or fp32 (out_type); accumulate (beta = 1)
// needs the fp32 output. The cuBLASLt descriptors and the heuristic's algorithm
// are cached per (shape, transposes, out_type, accumulate) in ctx.
void gemm_bf16(CudaContext *ctx, void *out, GemmOut out_type, const bf16 *a, const bf16 *b, int M, int N, int K,
               int transpose_a, int transpose_b, int accumulate);

#endif
