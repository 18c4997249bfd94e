// kernels/cuda/context.cuh: the CudaContext layout, shared by every
// kernels/cuda/ file. Host-only (no device code), so that the plain C++ file
// attention_cudnn.cpp can include it without nvcc. Declares
// attention_cudnn_release, which context.cu calls when a context goes.
#ifndef FIMI_KERNELS_CUDA_CONTEXT_CUH
#define FIMI_KERNELS_CUDA_CONTEXT_CUH

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "kernels/cuda/ops_cuda.h"

struct MatmulPlanCache;  // kernels/cuda/matmul.cu
struct CudnnAttention;   // kernels/cuda/attention_cudnn.cpp

struct CudaContext {
  int device;
  int multiprocessors;
  cudaStream_t stream;
  cublasLtHandle_t cublaslt;
  void *workspace;  // cuBLASLt workspace, workspace_bytes
  size_t workspace_bytes;
  struct MatmulPlanCache *matmul_plans;  // owned by matmul.cu
  float *lm_head_scratch;                // (rows, V) logits chunk, owned by lm_head.cu
  size_t lm_head_scratch_floats;
  struct CudnnAttention *cudnn_attention;  // cuDNN handle and graphs, made on first use
};

// Frees what attention_cudnn.cpp keeps in ctx (nothing if it was never used).
void attention_cudnn_release(CudaContext *ctx);

#endif
