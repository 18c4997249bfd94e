// kernels/cuda/context.cu: the CUDA context and the host <-> device helpers of
// kernels/cuda/ops_cuda.h. Defines cuda_context_create/destroy/sync/stream,
// cuda_malloc/cuda_free, the bf16 and fp32
// upload/download helpers (host-side fp32 <-> bf16 conversion through a
// bounded staging buffer), cuda_fill_bytes and cuda_copy_rows.
//
// cuda_context_create is where a user arrives with --device cuda, so every
// failure there (no device, driver mismatch, out of memory) is a FimiError,
// never an abort. The transfer helpers return void like the ops: a failure
// there is a device or programming error and aborts through cuda_check.
//
// Every transfer runs on ctx->stream, which is a blocking stream (it also
// synchronizes with the legacy default stream), so an upload is ordered after
// the kernels queued before it and a download sees their results.
extern "C" {
#include "core/error.h"
}
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cublaslt_lazy.cuh"

// Owned by kernels/cuda/matmul.cu: frees the per-shape cuBLASLt plans.
void matmul_plan_cache_free(CudaContext *ctx);

#define CUDA_WORKSPACE_BYTES ((size_t)32 << 20)
// Elements converted per staging round in the bf16 transfers (4 MiB of bf16):
// bounds the host memory a transfer of a large weight needs.
#define CUDA_STAGING_ELEMS ((size_t)2 << 20)
// cudaMallocAsync pool memory kept across synchronizations (ops such as the
// RMSNorm backward and the embedding backward take small stream-ordered
// scratch blocks; without a threshold the pool returns them to the driver at
// every sync and the next call pays for a fresh allocation).
#define CUDA_POOL_KEEP_BYTES ((uint64_t)256 << 20)

// Releases whatever a partially built context holds (NULL members skipped).
static void context_release(CudaContext *ctx) {
  if (!ctx) return;
  if (ctx->stream) cudaStreamSynchronize(ctx->stream);
  matmul_plan_cache_free(ctx);
  attention_cudnn_release(ctx);
  if (ctx->lm_head_scratch) cudaFree(ctx->lm_head_scratch);
  if (ctx->workspace) cudaFree(ctx->workspace);
  if (ctx->cublaslt) cublaslt.destroy(ctx->cublaslt);
  if (ctx->stream) cudaStreamDestroy(ctx->stream);
  free(ctx);
}

extern "C" int cuda_context_create(CudaContext **out, int device, FimiError *err) {
  *out = NULL;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return fimi_fail(err, "--device cuda: no usable CUDA device (%s)", cudaGetErrorString(status));
  }
  if (count <= 0) return fimi_fail(err, "--device cuda: no CUDA device found");
  if (device < 0 || device >= count)
    return fimi_fail(err, "--device cuda: device %d does not exist (%d visible)", device, count);
  status = cudaSetDevice(device);
  if (status != cudaSuccess) return fimi_fail(err, "cudaSetDevice(%d): %s", device, cudaGetErrorString(status));
  cudaDeviceProp prop;
  status = cudaGetDeviceProperties(&prop, device);
  if (status != cudaSuccess)
    return fimi_fail(err, "cudaGetDeviceProperties(%d): %s", device, cudaGetErrorString(status));

  CudaContext *ctx = (CudaContext *)calloc(1, sizeof *ctx);
  if (!ctx) return fimi_fail(err, "out of host memory for the CUDA context");
  ctx->device = device;
  ctx->multiprocessors = prop.multiProcessorCount;
  status = cudaStreamCreate(&ctx->stream);
  if (status != cudaSuccess) {
    ctx->stream = NULL;
    context_release(ctx);
    return fimi_fail(err, "cudaStreamCreate on device %d: %s", device, cudaGetErrorString(status));
  }
  if (cublaslt_load(err) != 0) {
    context_release(ctx);
    return -1;
  }
  cublasStatus_t bstatus = cublaslt.create(&ctx->cublaslt);
  if (bstatus != CUBLAS_STATUS_SUCCESS) {
    ctx->cublaslt = NULL;
    context_release(ctx);
    return fimi_fail(err, "cublasLtCreate on device %d failed (status %d)", device, (int)bstatus);
  }
  status = cudaMalloc(&ctx->workspace, CUDA_WORKSPACE_BYTES);
  if (status != cudaSuccess) {
    ctx->workspace = NULL;
    context_release(ctx);
    return fimi_fail(err, "cudaMalloc of the %zu MiB cuBLASLt workspace on device %d: %s",
                     CUDA_WORKSPACE_BYTES >> 20, device, cudaGetErrorString(status));
  }
  ctx->workspace_bytes = CUDA_WORKSPACE_BYTES;
  // Keep a little stream-ordered scratch in the device's default pool (see
  // CUDA_POOL_KEEP_BYTES). Not fatal: without it the scratch is only slower.
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
    uint64_t keep = CUDA_POOL_KEEP_BYTES;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  }
  cudaGetLastError();  // the optional pool setting must not leave a sticky error behind
  *out = ctx;
  return 0;
}

extern "C" void cuda_context_destroy(CudaContext *ctx) { context_release(ctx); }

extern "C" int cuda_context_sync(CudaContext *ctx, FimiError *err) {
  cudaError_t status = cudaStreamSynchronize(ctx->stream);
  if (status == cudaSuccess) status = cudaGetLastError();
  if (status != cudaSuccess) return fimi_fail(err, "CUDA device %d: %s", ctx->device, cudaGetErrorString(status));
  return 0;
}

extern "C" void *cuda_context_stream(CudaContext *ctx) { return (void *)ctx->stream; }

extern "C" int cuda_malloc(void **out, size_t bytes, FimiError *err) {
  *out = NULL;
  if (bytes == 0) return 0;
  cudaError_t status = cudaMalloc(out, bytes);
  if (status != cudaSuccess) {
    *out = NULL;
    cudaGetLastError();  // out of memory is not sticky, but clear it for the next check
    return fimi_fail(err, "cudaMalloc(%zu bytes = %.1f MiB): %s", bytes, (double)bytes / (1 << 20),
                     cudaGetErrorString(status));
  }
  return 0;
}

extern "C" void cuda_free(void *ptr) {
  if (ptr) cuda_check(cudaFree(ptr));
}

// fp32 -> bf16 bits, round to nearest even (as host_round_bf16 in the tests
// and __float2bfloat16_rn on device). NaN stays a (quiet) NaN: adding the
// rounding bias could carry a NaN payload into the exponent and make an Inf.
static inline uint16_t host_float_to_bf16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) {
    uint16_t hi = (uint16_t)(bits >> 16);
    if (bits & 0x007fffffu) hi |= 0x0040u;  // NaN: keep it a NaN after truncation
    return hi;
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static inline float host_bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float x;
  memcpy(&x, &bits, 4);
  return x;
}

static void *staging_alloc(size_t bytes) {
  void *p = malloc(bytes);
  if (!p) {
    fprintf(stderr, "fimi: out of host memory for a %zu-byte transfer staging buffer\n", bytes);
    exit(EXIT_FAILURE);
  }
  return p;
}

// dst (n) device bf16, src (n) host fp32. Synchronous.
extern "C" void cuda_upload_bf16(CudaContext *ctx, bf16 *dst, const float *src, size_t n) {
  if (n == 0) return;
  size_t chunk = n < CUDA_STAGING_ELEMS ? n : CUDA_STAGING_ELEMS;
  uint16_t *staging = (uint16_t *)staging_alloc(chunk * sizeof(uint16_t));  // (chunk)
  for (size_t start = 0; start < n; start += chunk) {
    size_t count = n - start < chunk ? n - start : chunk;
    for (size_t i = 0; i < count; i++) staging[i] = host_float_to_bf16(src[start + i]);
    cuda_check(cudaMemcpyAsync(dst + start, staging, count * sizeof(uint16_t), cudaMemcpyHostToDevice, ctx->stream));
    // the staging buffer is rewritten next round: wait for this copy
    cuda_check(cudaStreamSynchronize(ctx->stream));
  }
  free(staging);
}

// dst (n) host fp32, src (n) device bf16. Synchronous.
extern "C" void cuda_download_bf16(CudaContext *ctx, float *dst, const bf16 *src, size_t n) {
  if (n == 0) return;
  size_t chunk = n < CUDA_STAGING_ELEMS ? n : CUDA_STAGING_ELEMS;
  uint16_t *staging = (uint16_t *)staging_alloc(chunk * sizeof(uint16_t));  // (chunk)
  for (size_t start = 0; start < n; start += chunk) {
    size_t count = n - start < chunk ? n - start : chunk;
    cuda_check(cudaMemcpyAsync(staging, src + start, count * sizeof(uint16_t), cudaMemcpyDeviceToHost, ctx->stream));
    cuda_check(cudaStreamSynchronize(ctx->stream));
    for (size_t i = 0; i < count; i++) dst[start + i] = host_bf16_to_float(staging[i]);
  }
  free(staging);
}

// Plain copies, synchronous so that the caller may free or reuse its host buffer at once.
static void copy_sync(CudaContext *ctx, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return;
  cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, ctx->stream));
  cuda_check(cudaStreamSynchronize(ctx->stream));
}

// dst (n) device, src (n) host
extern "C" void cuda_upload_f32(CudaContext *ctx, float *dst, const float *src, size_t n) {
  copy_sync(ctx, dst, src, n * sizeof(float), cudaMemcpyHostToDevice);
}

// dst (n) host, src (n) device
extern "C" void cuda_download_f32(CudaContext *ctx, float *dst, const float *src, size_t n) {
  copy_sync(ctx, dst, src, n * sizeof(float), cudaMemcpyDeviceToHost);
}

// dst (n) device, src (n) host
extern "C" void cuda_upload_i32(CudaContext *ctx, int *dst, const int *src, size_t n) {
  copy_sync(ctx, dst, src, n * sizeof(int), cudaMemcpyHostToDevice);
}

// dst (n bytes) device; asynchronous on ctx's stream.
extern "C" void cuda_fill_bytes(CudaContext *ctx, void *dst, int byte, size_t n) {
  if (n == 0) return;
  cuda_check(cudaMemsetAsync(dst, byte, n, ctx->stream));
}

extern "C" void cuda_copy_rows(CudaContext *ctx, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                               size_t row_bytes, size_t rows) {
  if (rows == 0 || row_bytes == 0) return;
  cuda_check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice,
                               ctx->stream));
}
