// bench/gpu/bench_gpu_memory_ops.c: bandwidth of the memory-bound CUDA ops at
// Gemma 3 4B shapes, one micro-batch of T = 4096 tokens (hidden C = 2560,
// intermediate 10240, 8 query heads x head_dim 256), and of the optimizer on
// a realistic ZeRO-3 shard (4e9 parameters / 8 GPUs = 5e8 fp32 elements).
// Ops: rmsnorm fwd/bwd, rope fwd/bwd, geglu fwd/bwd, residual_add, adamw
// (with the bf16 stochastic-rounding copy), sum_squares (gradient clipping).
//
// GB/s = the bytes each op MUST move (every input read once, every output
// written once; the count is written beside each op) / time. Scratch traffic
// an implementation adds (partial sums) is not counted, so a kernel that
// moves more than it must shows as a lower GB/s. tests/gpu/check.sh states it
// as a share of bench_gpu_ceilings' copy bandwidth, which counts read + write
// bytes the same way.
//
// The per-token tensors are smaller than four L2 caches (H200: 60 MB), so a
// loop over one buffer set would read from L2 and flatter HBM: each op cycles
// through enough copies of its buffers to touch at least 4x the L2 size.
// No correctness check here (tests/gpu/ does that): error column -1.
// Usage: bench_gpu_memory_ops [substring]  (only the ops whose name contains it)
#include <cuda_runtime.h>

#define BENCH_NAME "bench_gpu_memory_ops"
#include "bench/gpu/bench_gpu.h"
#include "tests/gpu/gpu_test.h"

#define MAX_SETS 16

static const int T = 4096;         // tokens of one micro-batch
static const int C = 2560;         // hidden size
static const int HIDDEN_FF = 10240;  // MLP intermediate size
static const int HEADS = 8, HEAD_DIM = 256;
static const size_t SHARD = 500000000;  // AdamW elements: 4e9 params / 8 ranks

static const char *only = NULL;  // argv[1]
static size_t l2_bytes = 0;

static int wanted(const char *op) { return only == NULL || strstr(op, only) != NULL; }

// How many copies of a working set of `bytes` to cycle through so that one
// pass touches at least 4x the L2 (1 when the set alone is that large).
static int sets_for(double bytes) {
  double want = 4.0 * (double)l2_bytes;
  int sets = (int)((want + bytes - 1.0) / bytes);
  if (sets < 1) sets = 1;
  if (sets > MAX_SETS) sets = MAX_SETS;
  return sets;
}

// Random bf16-rounded values in [-1, 1] shared by every input: tensor k reads
// the pool from offset k * 977, so inputs differ without generating each.
static float *pool = NULL;
static size_t pool_len = 0;
static const float *pool_at(int k, size_t n) {
  size_t offset = (size_t)k * 977;
  if (offset + n > pool_len) {
    fprintf(stderr, BENCH_NAME ": pool too small\n");
    exit(1);
  }
  return pool + offset;
}

static bf16 *random_bf16(CudaContext *ctx, int k, size_t n) { return gpu_bf16_from(ctx, pool_at(k, n), n); }

// Times `iters` calls of the op after sets + 2 warm-up calls (every set
// visited, clocks up); the call uses `s`, the set index. ms per call.
#define TIME_OP(ms_out, sets, iters, ...)               \
  do {                                                  \
    for (int w_ = 0; w_ < (sets) + 2; w_++) {           \
      int s = w_ % (sets);                              \
      (void)s;                                          \
      __VA_ARGS__;                                      \
    }                                                   \
    bench_sync(ctx, "warm-up");                         \
    GpuTimer timer_;                                    \
    gpu_timer_start(&timer_, ctx);                      \
    for (int it_ = 0; it_ < (iters); it_++) {           \
      int s = it_ % (sets);                             \
      (void)s;                                          \
      __VA_ARGS__;                                      \
    }                                                   \
    (ms_out) = gpu_timer_stop_ms(&timer_, ctx, iters);  \
    bench_sync(ctx, "timed loop");                      \
  } while (0)

static void report_gbps(const char *op, const char *shape, double ms, double bytes) {
  gpu_report(op, shape, -1.0, 0.0, ms, 0.0, bytes / (ms * 1e-3) / 1e9);
}

// ---- RMSNorm: inp (T, C) -> out (T, C), rstd (T) fp32, weight (C) ----
static void bench_rmsnorm(CudaContext *ctx) {
  if (!wanted("rmsnorm")) return;
  const size_t n = (size_t)T * C;
  // forward moves: read inp 2n + weight 2C, write out 2n + rstd 4T.
  const double fwd_bytes = 2.0 * n + 2.0 * C + 2.0 * n + 4.0 * T;
  // backward moves: read dout 2n, inp 2n, weight 2C, rstd 4T; write dinp 2n;
  // dweight (C) fp32 read and written once (accumulated): 8C.
  const double bwd_bytes = 2.0 * n + 2.0 * n + 2.0 * C + 4.0 * T + 2.0 * n + 8.0 * C;
  const int sets = sets_for(bwd_bytes);
  bf16 *inp[MAX_SETS], *out[MAX_SETS], *dout[MAX_SETS], *dinp[MAX_SETS];
  float *rstd[MAX_SETS];
  bf16 *weight = random_bf16(ctx, 0, C);                  // (C)
  float *dweight = gpu_alloc((size_t)C * sizeof(float));  // (C)
  cuda_fill_bytes(ctx, dweight, 0, (size_t)C * sizeof(float));
  for (int s = 0; s < sets; s++) {
    inp[s] = random_bf16(ctx, 1 + s, n);        // (T, C)
    dout[s] = random_bf16(ctx, 20 + s, n);      // (T, C)
    out[s] = gpu_alloc(n * sizeof(bf16));       // (T, C)
    dinp[s] = gpu_alloc(n * sizeof(bf16));      // (T, C)
    rstd[s] = gpu_alloc((size_t)T * sizeof(float));  // (T)
  }
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d C=%d (%d sets)", T, C, sets);
  double ms;
  TIME_OP(ms, sets, 100, rmsnorm_forward_cuda(ctx, out[s], rstd[s], inp[s], weight, T, C, 1e-6f));
  report_gbps("bench_rmsnorm_forward", shape, ms, fwd_bytes);
  TIME_OP(ms, sets, 100,
          rmsnorm_backward_cuda(ctx, dinp[s], dweight, dout[s], inp[s], weight, rstd[s], T, C));
  report_gbps("bench_rmsnorm_backward", shape, ms, bwd_bytes);
  for (int s = 0; s < sets; s++) {
    cuda_free(inp[s]);
    cuda_free(dout[s]);
    cuda_free(out[s]);
    cuda_free(dinp[s]);
    cuda_free(rstd[s]);
  }
  cuda_free(weight);
  cuda_free(dweight);
}

// ---- RoPE on the queries: x (T, HEADS, HEAD_DIM), positions (T) ----
static void bench_rope(CudaContext *ctx) {
  if (!wanted("rope")) return;
  const size_t n = (size_t)T * HEADS * HEAD_DIM;
  // forward and backward each move: read x 2n + positions 4T, write 2n.
  const double bytes = 2.0 * n + 4.0 * T + 2.0 * n;
  const int sets = sets_for(bytes);
  bf16 *x[MAX_SETS], *y[MAX_SETS];
  int *positions = gpu_alloc((size_t)T * sizeof(int));  // (T)
  int *host_pos = malloc((size_t)T * sizeof(int));
  for (int t = 0; t < T; t++) host_pos[t] = t;
  cuda_upload_i32(ctx, positions, host_pos, (size_t)T);
  free(host_pos);
  for (int s = 0; s < sets; s++) {
    x[s] = random_bf16(ctx, 40 + s, n);   // (T, HEADS, HEAD_DIM)
    y[s] = gpu_alloc(n * sizeof(bf16));   // (T, HEADS, HEAD_DIM)
  }
  char shape[96];
  snprintf(shape, sizeof shape, "T=%d nh=%d hd=%d theta=1e6 (%d sets)", T, HEADS, HEAD_DIM, sets);
  double ms;
  TIME_OP(ms, sets, 100, rope_forward_cuda(ctx, y[s], x[s], positions, T, HEADS, HEAD_DIM, 1e6f, 1.0f));
  report_gbps("bench_rope_forward", shape, ms, bytes);
  TIME_OP(ms, sets, 100, rope_backward_cuda(ctx, y[s], x[s], positions, T, HEADS, HEAD_DIM, 1e6f, 1.0f));
  report_gbps("bench_rope_backward", shape, ms, bytes);
  for (int s = 0; s < sets; s++) {
    cuda_free(x[s]);
    cuda_free(y[s]);
  }
  cuda_free(positions);
}

// ---- GeGLU: gate, up (T, HIDDEN_FF) -> out (T, HIDDEN_FF) ----
static void bench_geglu(CudaContext *ctx) {
  if (!wanted("geglu")) return;
  const size_t n = (size_t)T * HIDDEN_FF;
  // forward moves: read gate 2n, up 2n, write out 2n.
  const double fwd_bytes = 6.0 * n;
  // backward moves: read dout, gate, up (6n), write dgate, dup (4n).
  const double bwd_bytes = 10.0 * n;
  const int sets = sets_for(fwd_bytes);
  bf16 *gate[MAX_SETS], *up[MAX_SETS], *out[MAX_SETS], *dgate[MAX_SETS], *dup[MAX_SETS];
  for (int s = 0; s < sets; s++) {
    gate[s] = random_bf16(ctx, 60 + s, n);  // (T, HIDDEN_FF)
    up[s] = random_bf16(ctx, 80 + s, n);    // (T, HIDDEN_FF)
    out[s] = gpu_alloc(n * sizeof(bf16));   // (T, HIDDEN_FF), also dout
    dgate[s] = gpu_alloc(n * sizeof(bf16)); // (T, HIDDEN_FF)
    dup[s] = gpu_alloc(n * sizeof(bf16));   // (T, HIDDEN_FF)
  }
  char shape[96];
  snprintf(shape, sizeof shape, "n=%zu (T=%d x %d, %d sets)", n, T, HIDDEN_FF, sets);
  double ms;
  TIME_OP(ms, sets, 50, geglu_forward_cuda(ctx, out[s], gate[s], up[s], n));
  report_gbps("bench_geglu_forward", shape, ms, fwd_bytes);
  // dout = the forward's output: finite, nonzero values.
  TIME_OP(ms, sets, 50, geglu_backward_cuda(ctx, dgate[s], dup[s], out[s], gate[s], up[s], n));
  report_gbps("bench_geglu_backward", shape, ms, bwd_bytes);
  for (int s = 0; s < sets; s++) {
    cuda_free(gate[s]);
    cuda_free(up[s]);
    cuda_free(out[s]);
    cuda_free(dgate[s]);
    cuda_free(dup[s]);
  }
}

// ---- residual add: out = a + b, (T, C) ----
static void bench_residual(CudaContext *ctx) {
  if (!wanted("residual")) return;
  const size_t n = (size_t)T * C;
  // moves: read a 2n, b 2n, write out 2n.
  const double bytes = 6.0 * n;
  const int sets = sets_for(bytes);
  bf16 *a[MAX_SETS], *b[MAX_SETS], *out[MAX_SETS];
  for (int s = 0; s < sets; s++) {
    a[s] = random_bf16(ctx, 100 + s, n);  // (T, C)
    b[s] = random_bf16(ctx, 120 + s, n);  // (T, C)
    out[s] = gpu_alloc(n * sizeof(bf16)); // (T, C)
  }
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d C=%d (%d sets)", T, C, sets);
  double ms;
  TIME_OP(ms, sets, 100, residual_add_cuda(ctx, out[s], a[s], b[s], n));
  report_gbps("bench_residual_add", shape, ms, bytes);
  for (int s = 0; s < sets; s++) {
    cuda_free(a[s]);
    cuda_free(b[s]);
    cuda_free(out[s]);
  }
}

// Fills dst (n) fp32 with `host` (chunk) repeated: one upload, then copies
// that double the filled prefix (log2(n / chunk) device copies).
static void fill_tiled_f32(CudaContext *ctx, float *dst, size_t n, const float *host, size_t chunk) {
  cudaStream_t stream = (cudaStream_t)cuda_context_stream(ctx);
  size_t done = n < chunk ? n : chunk;
  cuda_upload_f32(ctx, dst, host, done);
  bench_sync(ctx, "upload");
  while (done < n) {
    size_t count = done < n - done ? done : n - done;
    bench_check(cudaMemcpyAsync(dst + done, dst, count * sizeof(float), cudaMemcpyDeviceToDevice, stream), "fill");
    done += count;
  }
  bench_sync(ctx, "fill");
}

// ---- AdamW on a shard: param, m, v, grad (SHARD) fp32, bf16 copy (SHARD) ----
static void bench_adamw(CudaContext *ctx) {
  if (!wanted("adamw") && !wanted("sum_squares")) return;
  const size_t n = SHARD;
  const size_t chunk = (size_t)1 << 24;  // 16M values uploaded, then tiled
  float *param = gpu_alloc(n * sizeof(float));  // (n)
  float *m = gpu_alloc(n * sizeof(float));      // (n)
  float *v = gpu_alloc(n * sizeof(float));      // (n)
  float *grad = gpu_alloc(n * sizeof(float));   // (n)
  bf16 *param_bf16 = gpu_alloc(n * sizeof(bf16));  // (n)
  double *sum = gpu_alloc(sizeof(double));      // (1)
  float *host = malloc(chunk * sizeof(float));
  const float *p0 = pool_at(0, chunk), *p1 = pool_at(1, chunk), *p2 = pool_at(2, chunk), *p3 = pool_at(3, chunk);
  // Weights ~0.05, moments of a typical size, v > 0 as it always is.
  for (size_t i = 0; i < chunk; i++) host[i] = 0.05f * p0[i];
  fill_tiled_f32(ctx, param, n, host, chunk);
  for (size_t i = 0; i < chunk; i++) host[i] = 1e-3f * p1[i];
  fill_tiled_f32(ctx, m, n, host, chunk);
  for (size_t i = 0; i < chunk; i++) host[i] = 1e-6f * fabsf(p2[i]) + 1e-8f;
  fill_tiled_f32(ctx, v, n, host, chunk);
  for (size_t i = 0; i < chunk; i++) host[i] = 1e-3f * p3[i];
  fill_tiled_f32(ctx, grad, n, host, chunk);
  free(host);

  char shape[96];
  snprintf(shape, sizeof shape, "n=%zu (4e9 params / 8 ranks)", n);
  double ms;
  if (wanted("adamw")) {
    AdamWStep step = {.lr = 1e-5, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .step = 10,
                      .grad_scale = 1.0f};
    // moves: read param, m, v, grad (16 B), write param, m, v (12 B) and the
    // bf16 copy (2 B): 30 B per element.
    const double bytes = 30.0 * (double)n;
    TIME_OP(ms, 1, 10, adamw_update_cuda(ctx, param, m, v, grad, param_bf16, n, &step, 1234 + (uint64_t)s, 0));
    report_gbps("bench_adamw_update", shape, ms, bytes);
  }
  if (wanted("sum_squares")) {
    // moves: read x (4 B per element); the 8-byte result is negligible.
    const double bytes = 4.0 * (double)n;
    TIME_OP(ms, 1, 20, sum_squares_cuda(ctx, sum, grad, n));
    report_gbps("bench_sum_squares", shape, ms, bytes);
  }
  cuda_free(param);
  cuda_free(m);
  cuda_free(v);
  cuda_free(grad);
  cuda_free(param_bf16);
  cuda_free(sum);
}

int main(int argc, char **argv) {
  // Line-buffered: the lines printed so far survive a crash in a later op.
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) only = argv[1];
  CudaContext *ctx = gpu_test_open(BENCH_NAME);
  int l2 = 0;
  bench_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "L2 size");
  l2_bytes = l2 > 0 ? (size_t)l2 : ((size_t)64 << 20);
  // The largest per-token input (T x HIDDEN_FF) plus room for the offsets.
  pool_len = (size_t)T * HIDDEN_FF + 977 * 160;
  pool = host_random_bf16(pool_len, 1.0f, 7);

  bench_rmsnorm(ctx);
  bench_rope(ctx);
  bench_geglu(ctx);
  bench_residual(ctx);
  bench_adamw(ctx);
  free(pool);
  return gpu_test_close(ctx, BENCH_NAME);
}
