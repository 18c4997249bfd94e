// bench/gpu/bench_gpu_ceilings.c: the card's two ceilings, measured in the
// same run as the tests so that tests/gpu/check.sh can state every other
// result as a share of them:
// - ceiling_gemm_bf16: an 8192^3 bf16 GEMM with fp32 compute and bf16 output
//   through matmul_forward_cuda (cuBLASLt via gemm_bf16), on random data
//   (zeros run faster and would flatter the ceiling); TFLOP/s = 2*M*N*K / time.
// - ceiling_copy_d2d: a device-to-device cudaMemcpyAsync of 1 GiB; GB/s counts
//   the bytes read AND written (2 x 1 GiB per copy), the same convention as the
//   memory-bound ops' GB/s, which count every byte they read and write.
// Each prints one GPU_RESULT line (error not applicable: -1). Exits 77 without
// a device, like the tests.
#include <cuda_runtime.h>

#define BENCH_NAME "bench_gpu_ceilings"
#include "bench/gpu/bench_gpu.h"
#include "tests/gpu/gpu_test.h"

static void bench_gemm(CudaContext *ctx) {
  const int n = 8192;  // M = N = K
  const size_t elems = (size_t)n * n;
  // A and B from different seeds, in [-1, 1]: random mantissas, as in training.
  float *host_a = host_random_bf16(elems, 1.0f, 11);
  float *host_b = host_random_bf16(elems, 1.0f, 12);
  bf16 *a = gpu_bf16_from(ctx, host_a, elems);  // (n, n) = inp (N, C)
  bf16 *b = gpu_bf16_from(ctx, host_b, elems);  // (n, n) = weight (OC, C)
  bf16 *out = gpu_alloc(elems * sizeof(bf16));  // (n, n)
  free(host_a);
  free(host_b);

  // Warm-up: the first call builds the cuBLASLt plan and raises the clocks.
  for (int i = 0; i < 5; i++) matmul_forward_cuda(ctx, out, a, b, n, n, n);
  bench_sync(ctx, "gemm warm-up");
  const int iters = 20;
  GpuTimer timer;
  gpu_timer_start(&timer, ctx);
  for (int i = 0; i < iters; i++) matmul_forward_cuda(ctx, out, a, b, n, n, n);
  double ms = gpu_timer_stop_ms(&timer, ctx, iters);
  bench_sync(ctx, "gemm");
  double tflops = 2.0 * n * (double)n * n / (ms * 1e-3) / 1e12;
  gpu_report("ceiling_gemm_bf16", "8192x8192x8192 bf16->bf16 (out=A@B^T)", -1.0, 0.0, ms, tflops, 0.0);
  cuda_free(a);
  cuda_free(b);
  cuda_free(out);
}

static void bench_copy(CudaContext *ctx) {
  const size_t bytes = (size_t)1 << 30;
  cudaStream_t stream = (cudaStream_t)cuda_context_stream(ctx);
  void *src = gpu_alloc(bytes);
  void *dst = gpu_alloc(bytes);
  // Real pages on both sides (the first touch of fresh memory is not a copy).
  cuda_fill_bytes(ctx, src, 0x3C, bytes);
  cuda_fill_bytes(ctx, dst, 0x00, bytes);
  for (int i = 0; i < 3; i++) bench_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
  bench_sync(ctx, "copy warm-up");
  const int iters = 20;
  GpuTimer timer;
  gpu_timer_start(&timer, ctx);
  for (int i = 0; i < iters; i++) bench_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
  double ms = gpu_timer_stop_ms(&timer, ctx, iters);
  bench_sync(ctx, "copy");
  double gbps = 2.0 * (double)bytes / (ms * 1e-3) / 1e9;  // read + write
  gpu_report("ceiling_copy_d2d", "1 GiB D2D memcpy (GB/s counts read+write)", -1.0, 0.0, ms, 0.0, gbps);
  cuda_free(src);
  cuda_free(dst);
}

int main(void) {
  // Line-buffered: the lines printed so far survive a crash in a later op.
  setvbuf(stdout, NULL, _IOLBF, 0);
  CudaContext *ctx = gpu_test_open(BENCH_NAME);
  bench_gemm(ctx);
  bench_copy(ctx);
  return gpu_test_close(ctx, BENCH_NAME);
}
