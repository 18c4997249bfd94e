// kernels/cuda/matmul.cu: every GPU matmul, through cuBLASLt. Defines
// gemm_bf16 (kernels/cuda/matmul.cuh), its per-shape plan cache
// (matmul_plan_cache_free is called by cuda_context_destroy),
// matmul_forward_cuda and matmul_backward_cuda (kernels/cuda/ops_cuda.h).
//
// Row-major on column-major: a row-major (R, C) matrix is the same memory as
// a column-major (C, R) one, so out (M, N) = op(a) @ op(b) is computed as the
// column-major out^T (N, M) = op(b)^T @ op(a)^T: cuBLASLt's A is our b, its B
// is our a, and its (m, n, k) is our (N, M, K).
//
// Plans: the matmul descriptor, the four layouts and the heuristic's first
// algorithm are built once per key (shape, transposes, output type,
// accumulate, pointer alignments) and kept in a small array on the context;
// a known key never asks the heuristic again. The pointer alignments are in
// the key because the heuristic is told them: callers such as the LM head
// pass pointers into the middle of buffers, which may be less aligned than
// cudaMalloc's 256 bytes, and an algorithm chosen for 256-byte alignment may
// not run on them.
//
// FIMI_CUDA_SIMPLE=1 (or a shape cuBLASLt has no algorithm for) uses a plain
// shared-memory tiled kernel instead: slow, but obviously correct, so that a
// failing GPU test can tell a wrong operand mapping from a wrong test.
extern "C" {
#include "core/error.h"
}
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cublaslt_lazy.cuh"
#include "kernels/cuda/matmul.cuh"

void matmul_plan_cache_free(CudaContext *ctx);

typedef struct MatmulKey {
  int M, N, K;
  int transpose_a, transpose_b;
  int out_type, accumulate;
  int align_a, align_b, align_out;  // pointer alignment in bytes, capped at 256
} MatmulKey;

typedef struct MatmulPlan {
  MatmulKey key;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t layout_a, layout_b, layout_out;  // cuBLASLt's A (our b), B (our a), C = D
  cublasLtMatmulAlgo_t algo;
  int has_algo;  // 0: cuBLASLt offered nothing, the simple kernel runs this shape
} MatmulPlan;

struct MatmulPlanCache {
  MatmulPlan *plans;  // (count) of (capacity)
  int count, capacity;
};

static int pointer_alignment(const void *p) {
  uintptr_t addr = (uintptr_t)p;
  uintptr_t low = addr & (~addr + 1);  // lowest set bit
  if (addr == 0 || low > 256) return 256;
  return (int)low;
}

// ---- the simple kernel: out (M, N) = op(a) @ op(b) (+ out) ----
#define SIMPLE_TILE 16

// out (M, N) bf16 or fp32; a (M, K) or (K, M); b (K, N) or (N, K).
// Block (16, 16), grid (ceil(N/16), ceil(M/16)): each thread owns one output,
// the K loop goes through 16-wide shared tiles (zero-padded at the edges).
__global__ void gemm_simple_kernel(void *out, int out_f32, const __nv_bfloat16 *a, const __nv_bfloat16 *b, int M,
                                   int N, int K, int transpose_a, int transpose_b, int accumulate) {
  __shared__ float tile_a[SIMPLE_TILE][SIMPLE_TILE + 1];  // [m][k]
  __shared__ float tile_b[SIMPLE_TILE][SIMPLE_TILE + 1];  // [k][n]
  int tx = threadIdx.x, ty = threadIdx.y;
  int m = blockIdx.y * SIMPLE_TILE + ty;
  int n = blockIdx.x * SIMPLE_TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += SIMPLE_TILE) {
    // tile_a[ty][tx] = op(a)[m][k0 + tx], tile_b[ty][tx] = op(b)[k0 + ty][n]
    int ka = k0 + tx, kb = k0 + ty;
    float va = 0.0f, vb = 0.0f;
    if (m < M && ka < K)
      va = bf16_to_float(transpose_a ? a[(size_t)ka * M + m] : a[(size_t)m * K + ka]);
    if (n < N && kb < K)
      vb = bf16_to_float(transpose_b ? b[(size_t)n * K + kb] : b[(size_t)kb * N + n]);
    tile_a[ty][tx] = va;
    tile_b[ty][tx] = vb;
    __syncthreads();
    for (int kk = 0; kk < SIMPLE_TILE; kk++) acc += tile_a[ty][kk] * tile_b[kk][tx];
    __syncthreads();
  }
  if (m >= M || n >= N) return;
  size_t idx = (size_t)m * N + n;
  if (out_f32) {
    float *o = (float *)out;
    o[idx] = accumulate ? o[idx] + acc : acc;
  } else {
    __nv_bfloat16 *o = (__nv_bfloat16 *)out;
    o[idx] = float_to_bf16(accumulate ? bf16_to_float(o[idx]) + acc : acc);
  }
}

static void gemm_simple(CudaContext *ctx, void *out, GemmOut out_type, const bf16 *a, const bf16 *b, int M, int N,
                        int K, int transpose_a, int transpose_b, int accumulate) {
  dim3 block(SIMPLE_TILE, SIMPLE_TILE);
  dim3 grid((unsigned)ceil_div(N, SIMPLE_TILE), (unsigned)ceil_div(M, SIMPLE_TILE));
  if (grid.y > 65535u) {
    fprintf(stderr, "fimi: gemm_simple: M = %d too large for the simple kernel\n", M);
    exit(EXIT_FAILURE);
  }
  gemm_simple_kernel<<<grid, block, 0, ctx->stream>>>(out, out_type == GEMM_OUT_F32, as_nv(a), as_nv(b), M, N, K,
                                                      transpose_a, transpose_b, accumulate);
  cuda_check_launch();
}

// ---- plan cache ----
static void plan_destroy(MatmulPlan *p) {
  if (p->layout_out) cublaslt.matrix_layout_destroy(p->layout_out);
  if (p->layout_b) cublaslt.matrix_layout_destroy(p->layout_b);
  if (p->layout_a) cublaslt.matrix_layout_destroy(p->layout_a);
  if (p->desc) cublaslt.matmul_desc_destroy(p->desc);
}

void matmul_plan_cache_free(CudaContext *ctx) {
  if (!ctx || !ctx->matmul_plans) return;
  struct MatmulPlanCache *cache = ctx->matmul_plans;
  for (int i = 0; i < cache->count; i++) plan_destroy(&cache->plans[i]);
  free(cache->plans);
  free(cache);
  ctx->matmul_plans = NULL;
}

// Builds descriptors and layouts for key and asks the heuristic once.
static void plan_build(CudaContext *ctx, MatmulPlan *p, const MatmulKey *k) {
  memset(p, 0, sizeof *p);
  p->key = *k;
  cublasOperation_t op_a = k->transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our b
  cublasOperation_t op_b = k->transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B is our a
  cublas_check(cublaslt.matmul_desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublas_check(cublaslt.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  cublas_check(cublaslt.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  uint64_t M = (uint64_t)k->M, N = (uint64_t)k->N, K = (uint64_t)k->K;
  // our b: row-major (N, K) = column-major (K rows, N cols), or row-major (K, N) = column-major (N, K)
  if (k->transpose_b)
    cublas_check(cublaslt.matrix_layout_create(&p->layout_a, CUDA_R_16BF, K, N, (int64_t)K));
  else
    cublas_check(cublaslt.matrix_layout_create(&p->layout_a, CUDA_R_16BF, N, K, (int64_t)N));
  // our a: row-major (K, M) = column-major (M, K), or row-major (M, K) = column-major (K, M)
  if (k->transpose_a)
    cublas_check(cublaslt.matrix_layout_create(&p->layout_b, CUDA_R_16BF, M, K, (int64_t)M));
  else
    cublas_check(cublaslt.matrix_layout_create(&p->layout_b, CUDA_R_16BF, K, M, (int64_t)K));
  // out: row-major (M, N) = column-major (N, M)
  cudaDataType_t out_dtype = k->out_type == GEMM_OUT_F32 ? CUDA_R_32F : CUDA_R_16BF;
  cublas_check(cublaslt.matrix_layout_create(&p->layout_out, out_dtype, N, M, (int64_t)N));

  cublasLtMatmulPreference_t pref;
  cublas_check(cublaslt.matmul_preference_create(&pref));
  uint64_t workspace = ctx->workspace_bytes;
  uint32_t align_a = (uint32_t)k->align_b, align_b = (uint32_t)k->align_a, align_out = (uint32_t)k->align_out;
  cublas_check(cublaslt.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                    sizeof workspace));
  cublas_check(cublaslt.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                    sizeof align_a));
  cublas_check(cublaslt.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                    sizeof align_b));
  cublas_check(cublaslt.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out,
                                                    sizeof align_out));
  cublas_check(cublaslt.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out,
                                                    sizeof align_out));
  cublasLtMatmulHeuristicResult_t result;
  memset(&result, 0, sizeof result);
  int returned = 0;
  cublasStatus_t status = cublaslt.matmul_algo_get_heuristic(ctx->cublaslt, p->desc, p->layout_a, p->layout_b,
                                                         p->layout_out, p->layout_out, pref, 1, &result, &returned);
  cublaslt.matmul_preference_destroy(pref);
  if (status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
      result.workspaceSize <= ctx->workspace_bytes) {
    p->algo = result.algo;
    p->has_algo = 1;
  } else {
    fprintf(stderr,
            "fimi: cuBLASLt has no algorithm for M=%d N=%d K=%d ta=%d tb=%d out=%s acc=%d (status %d); "
            "using the simple kernel for this shape\n",
            k->M, k->N, k->K, k->transpose_a, k->transpose_b, k->out_type == GEMM_OUT_F32 ? "f32" : "bf16",
            k->accumulate, (int)status);
  }
}

static MatmulPlan *plan_lookup(CudaContext *ctx, const MatmulKey *key) {
  if (!ctx->matmul_plans) {
    ctx->matmul_plans = (struct MatmulPlanCache *)calloc(1, sizeof(struct MatmulPlanCache));
    if (!ctx->matmul_plans) {
      fprintf(stderr, "fimi: out of host memory for the matmul plan cache\n");
      exit(EXIT_FAILURE);
    }
  }
  struct MatmulPlanCache *cache = ctx->matmul_plans;
  // A model has a few dozen distinct shapes: a linear scan is cheaper than
  // the GEMM by orders of magnitude.
  for (int i = 0; i < cache->count; i++)
    if (memcmp(&cache->plans[i].key, key, sizeof *key) == 0) return &cache->plans[i];
  if (cache->count == cache->capacity) {
    int capacity = cache->capacity ? cache->capacity * 2 : 32;
    MatmulPlan *grown = (MatmulPlan *)realloc(cache->plans, (size_t)capacity * sizeof(MatmulPlan));
    if (!grown) {
      fprintf(stderr, "fimi: out of host memory for the matmul plan cache\n");
      exit(EXIT_FAILURE);
    }
    cache->plans = grown;
    cache->capacity = capacity;
  }
  MatmulPlan *p = &cache->plans[cache->count];
  plan_build(ctx, p, key);
  cache->count++;
  return p;
}

void gemm_bf16(CudaContext *ctx, void *out, GemmOut out_type, const bf16 *a, const bf16 *b, int M, int N, int K,
               int transpose_a, int transpose_b, int accumulate) {
  if (M <= 0 || N <= 0) return;
  size_t out_elem = out_type == GEMM_OUT_F32 ? sizeof(float) : sizeof(bf16);
  if (K <= 0) {
    // an empty sum: out = 0, or unchanged when accumulating
    if (!accumulate) cuda_check(cudaMemsetAsync(out, 0, (size_t)M * N * out_elem, ctx->stream));
    return;
  }
  if (cuda_simple_mode()) {
    gemm_simple(ctx, out, out_type, a, b, M, N, K, transpose_a, transpose_b, accumulate);
    return;
  }
  MatmulKey key;
  memset(&key, 0, sizeof key);  // the key is compared with memcmp: no stray padding bytes
  key.M = M;
  key.N = N;
  key.K = K;
  key.transpose_a = transpose_a != 0;
  key.transpose_b = transpose_b != 0;
  key.out_type = (int)out_type;
  key.accumulate = accumulate != 0;
  key.align_a = pointer_alignment(a);
  key.align_b = pointer_alignment(b);
  key.align_out = pointer_alignment(out);
  MatmulPlan *p = plan_lookup(ctx, &key);
  if (!p->has_algo) {
    gemm_simple(ctx, out, out_type, a, b, M, N, K, transpose_a, transpose_b, accumulate);
    return;
  }
  float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  cublas_check(cublaslt.matmul(ctx->cublaslt, p->desc, &alpha, b, p->layout_a, a, p->layout_b, &beta, out,
                              p->layout_out, out, p->layout_out, &p->algo, ctx->workspace, ctx->workspace_bytes,
                              ctx->stream));
}

// out (N, OC) = inp (N, C) @ weight (OC, C)^T
extern "C" void matmul_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const bf16 *weight, int N, int C,
                                    int OC) {
  gemm_bf16(ctx, out, GEMM_OUT_BF16, inp, weight, N, OC, C, 0, 1, 0);
}

// dinp (N, C) = dout (N, OC) @ weight (OC, C), overwritten;
// dweight (OC, C) += dout^T @ inp (N, C), fp32.
extern "C" void matmul_backward_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                                     const bf16 *weight, int N, int C, int OC) {
  if (N <= 0 || C <= 0) return;
  if (dinp) gemm_bf16(ctx, dinp, GEMM_OUT_BF16, dout, weight, N, C, OC, 0, 0, 0);
  if (dweight) gemm_bf16(ctx, dweight, GEMM_OUT_F32, dout, inp, OC, C, N, 1, 0, 1);
}
