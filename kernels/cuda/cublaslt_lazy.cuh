// kernels/cuda/cublaslt_lazy.cuh: cuBLASLt loaded at run time (dlopen) the
// first time a CUDA context is created, instead of linked. Defines
// CublasLtApi (one pointer per cuBLASLt function fimi calls), cublaslt (the
// loaded table) and cublaslt_load.
// Why: linking libcublasLt costs every fimi process ~150 MiB of resident
// memory and startup time (its relocations are processed at load, measured
// with ctypes: RSS 13 -> 161 MiB), on CPU-only runs and GPU-less machines too.
#ifndef FIMI_KERNELS_CUDA_CUBLASLT_LAZY_CUH
#define FIMI_KERNELS_CUDA_CUBLASLT_LAZY_CUH

#include <cublasLt.h>

#include "core/error.h"

typedef struct CublasLtApi {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtDestroy) destroy;
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&cublasLtMatmulDescDestroy) matmul_desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&cublasLtMatrixLayoutCreate) matrix_layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) matrix_layout_destroy;
  decltype(&cublasLtMatmulPreferenceCreate) matmul_preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) matmul_preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) matmul_preference_set_attribute;
  decltype(&cublasLtMatmulAlgoGetHeuristic) matmul_algo_get_heuristic;
  decltype(&cublasLtMatmul) matmul;
} CublasLtApi;

// Filled by cublaslt_load; valid once it returned 0.
extern CublasLtApi cublaslt;

// Loads libcublasLt.so.13 (or libcublasLt.so) once per process and resolves
// every function; a clear error when the library or a symbol is missing.
// Not thread-safe on its first call (cuda_context_create calls it).
int cublaslt_load(FimiError *err);

#endif
