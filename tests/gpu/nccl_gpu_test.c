// tests/gpu/nccl_gpu_test.c: the NCCL backend of the device collectives
// (parallel/comm_nccl.c, parallel/comm_device.h) on one GPU, a world of one
// made without MPI (device_comm_init_local), so tests/gpu/check.sh runs it on
// a bare GPU machine. At world 1 every collective is a copy (sum, max and
// broadcast: the identity), so results are exact; what is checked is that
// NCCL runs here and the ordering against the compute stream: inputs written
// by compute-stream kernels just before a collective, outputs poisoned
// (NaN) before it and read by the compute stream after wait(ticket). Also
// times the bf16 all-gather (a device copy at world 1). Exits 77 without a
// GPU. Built only where NCCL is found (tests/gpu/CMakeLists.txt).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_nccl.h"
#include "gpu_test.h"

#define NAME "nccl_gpu_test"

// Host values, bf16-exact, a few thousand distinct.
static float *host_values(size_t n, uint64_t seed) { return host_random_bf16(n, 2.0f, seed); }

// max |got - want| (NaN: INFINITY).
static double max_abs_diff(const float *got, const float *want, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)want[i]);
    if (!(d == d)) return INFINITY;
    if (d > worst) worst = d;
  }
  return worst;
}

// all_gather_bf16 with `ticket` of a shard the compute stream writes just
// before (a cast), read back by the compute stream after the wait.
static void check_all_gather(CudaContext *ctx, DeviceCollectives *coll, size_t n, int ticket) {
  FimiError err = {0};
  float *want = host_values(n, 11 + (uint64_t)ticket);
  float *src = gpu_alloc(n * sizeof(float));
  cuda_upload_f32(ctx, src, want, n);
  bf16 *shard = gpu_poisoned(ctx, n * sizeof(bf16)), *full = gpu_poisoned(ctx, n * sizeof(bf16));
  float *out = gpu_poisoned(ctx, n * sizeof(float));
  cast_f32_to_bf16_cuda(ctx, shard, src, n);
  int rc = coll->all_gather_bf16(coll->impl, shard, n, full, ticket, &err);
  if (rc == 0) rc = coll->wait(coll->impl, ticket, &err);
  cast_bf16_to_f32_cuda(ctx, out, full, n);
  if (rc == 0) rc = cuda_context_sync(ctx, &err);
  float *got = host_from_f32(ctx, out, n);
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu ticket %d", n, ticket);
  if (rc != 0) fprintf(stderr, "%s: all_gather: %s\n", NAME, err.message);
  gpu_report("nccl_all_gather_bf16 (world 1)", shape, rc == 0 ? max_abs_diff(got, want, n) : INFINITY, 0.0, 0, 0, 0);
  free(want), free(got), cuda_free(src), cuda_free(shard), cuda_free(full), cuda_free(out);
}

// all_to_all_f32 with `ticket`: send written by the compute stream (a
// cast from bf16), recv read by it after the wait (a cast to bf16 and back).
static void check_all_to_all(CudaContext *ctx, DeviceCollectives *coll, size_t n, int ticket) {
  FimiError err = {0};
  float *want = host_values(n, 21 + (uint64_t)ticket);
  bf16 *src = gpu_bf16_from(ctx, want, n);
  float *send = gpu_poisoned(ctx, n * sizeof(float)), *recv = gpu_poisoned(ctx, n * sizeof(float));
  bf16 *back = gpu_poisoned(ctx, n * sizeof(bf16));
  cast_bf16_to_f32_cuda(ctx, send, src, n);
  int rc = coll->all_to_all_f32(coll->impl, send, n, recv, ticket, &err);
  if (rc == 0) rc = coll->wait(coll->impl, ticket, &err);
  cast_f32_to_bf16_cuda(ctx, back, recv, n);
  if (rc == 0) rc = cuda_context_sync(ctx, &err);
  float *got = host_from_bf16(ctx, back, n);
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu ticket %d", n, ticket);
  if (rc != 0) fprintf(stderr, "%s: all_to_all: %s\n", NAME, err.message);
  gpu_report("nccl_all_to_all_f32 (world 1)", shape, rc == 0 ? max_abs_diff(got, want, n) : INFINITY, 0.0, 0, 0, 0);
  free(want), free(got), cuda_free(src), cuda_free(send), cuda_free(recv), cuda_free(back);
}

// The DeviceComm calls on its own stream: all_reduce (sum, max), reduce
// scatter (mean), all_gather and broadcast at world 1 leave the data as it is.
static void check_device_comm(CudaContext *ctx, DeviceComm *dc, size_t n) {
  FimiError err = {0};
  float *want = host_values(n, 31);
  float *a = gpu_alloc(n * sizeof(float)), *b = gpu_poisoned(ctx, n * sizeof(float));
  cuda_upload_f32(ctx, a, want, n);
  int rc = cuda_context_sync(ctx, &err);  // the NCCL stream does not wait for the compute stream here
  if (rc == 0) rc = device_comm_all_reduce(dc, a, n, DEVICE_F32, COMM_SUM, &err);
  if (rc == 0) rc = device_comm_all_reduce(dc, a, n, DEVICE_F32, COMM_MAX, &err);
  if (rc == 0) rc = device_comm_reduce_scatter(dc, a, n, b, DEVICE_F32, COMM_MEAN, &err);
  if (rc == 0) rc = device_comm_broadcast(dc, b, n * sizeof(float), 0, &err);
  if (rc == 0) rc = device_comm_all_gather(dc, b, n, a, DEVICE_F32, &err);
  if (rc == 0) rc = device_comm_synchronize(dc, &err);
  float *got = host_from_f32(ctx, a, n);
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  if (rc != 0) fprintf(stderr, "%s: device comm: %s\n", NAME, err.message);
  gpu_report("nccl_reduce_chain_f32 (world 1)", shape, rc == 0 ? max_abs_diff(got, want, n) : INFINITY, 0.0, 0, 0, 0);
  free(want), free(got), cuda_free(a), cuda_free(b);
}

// GB/s of a 256 MiB bf16 all-gather (read + write), after a warm-up.
static void time_all_gather(CudaContext *ctx, DeviceCollectives *coll) {
  size_t n = (size_t)128 << 20;
  FimiError err = {0};
  bf16 *shard = gpu_poisoned(ctx, n * sizeof(bf16)), *full = gpu_poisoned(ctx, n * sizeof(bf16));
  int reps = GPU_TEST_REPS(20), rc = 0;
  GpuTimer timer;
  for (int r = -1; rc == 0 && r < reps; r++) {
    if (r == 0) gpu_timer_start(&timer, ctx);
    rc = coll->all_gather_bf16(coll->impl, shard, n, full, 0, &err);
    if (rc == 0) rc = coll->wait(coll->impl, 0, &err);
  }
  double ms = rc == 0 ? gpu_timer_stop_ms(&timer, ctx, reps) : 0;
  if (rc != 0) fprintf(stderr, "%s: timed all_gather: %s\n", NAME, err.message);
  gpu_report("nccl_all_gather_bf16 (world 1)", "n=128Mi, timed", rc == 0 ? -1.0 : INFINITY, 0.0, ms, 0,
             ms > 0 ? 2.0 * n * sizeof(bf16) / (ms * 1e6) : 0);
  cuda_free(shard), cuda_free(full);
}

int main(void) {
  CudaContext *ctx = gpu_test_open(NAME);
  FimiError err = {0};
  DeviceComm dc;
  DeviceCollectives coll;
  if (device_comm_init_local(&dc, 0, &err) != 0 || device_collectives_nccl(&coll, &dc, ctx, &err) != 0) {
    fprintf(stderr, "%s: %s\n", NAME, err.message);
    gpu_report("nccl_init (world 1)", "-", INFINITY, 0.0, 0, 0, 0);
    return gpu_test_close(ctx, NAME);
  }
  for (int ticket = 0; ticket < DEVICE_TICKETS; ticket++) {
    check_all_gather(ctx, &coll, 4099, ticket);
    check_all_to_all(ctx, &coll, 4099, ticket);
  }
  check_all_gather(ctx, &coll, (size_t)3 << 20, 1);
  check_all_to_all(ctx, &coll, (size_t)3 << 20, 2);
  check_device_comm(ctx, &dc, 100003);
  time_all_gather(ctx, &coll);
  device_collectives_free(&coll);
  device_comm_free(&dc);
  return gpu_test_close(ctx, NAME);
}
