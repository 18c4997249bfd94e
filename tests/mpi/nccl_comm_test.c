// tests/mpi/nccl_comm_test.c: parallel/comm_nccl on device buffers: init (the
// ncclUniqueId travels over MPI), all_gather, reduce_scatter (sum, mean),
// all_reduce (sum, max) on fp32 and all_gather on bf16, and broadcast,
// against a serial float64 reference. Rank r uses GPU r % (GPUs on the node).
// Exits 77 (ctest: skipped) when no GPU is visible. Built only with CUDA and
// NCCL; so far compiled, never run on a GPU (docs/distributed.md).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "parallel/comm.h"
#include "parallel/comm_nccl.h"
#include "../test_util.h"

static float value(int salt, int rank, size_t i) {
  uint32_t h = (uint32_t)(salt * 2654435761u) ^ (uint32_t)(rank * 40503u) ^ (uint32_t)(i * 2246822519u);
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
  return (float)((double)(h >> 8) / 16777216.0 * 2.0 - 1.0);
}

static int to_device(const void *host, size_t bytes, void **dev) {
  return cudaMalloc(dev, bytes ? bytes : 1) == cudaSuccess && cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

int main(int argc, char **argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  FimiError err = {0};
  Communicator host;
  DeviceComm dc;
  if (comm_mpi_init(&argc, &argv, &err) || comm_init(&host, MPI_COMM_WORLD, &err) ||
      device_comm_init(&dc, &host, host.rank % devices, &err)) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  const int W = host.world, me = host.rank;
  const size_t S = 100003;  // shard elements: odd, not a multiple of anything
  float *h_full = malloc(S * W * sizeof(float)), *h_shard = malloc(S * sizeof(float));
  void *d_full = NULL, *d_shard = NULL;
  // all_gather fp32
  for (size_t i = 0; i < S; i++) h_shard[i] = value(1, me, i);
  CHECK(to_device(h_shard, S * 4, &d_shard) && cudaMalloc(&d_full, S * W * 4) == cudaSuccess, "cuda alloc");
  CHECK(device_comm_all_gather(&dc, d_shard, S, d_full, DEVICE_F32, &err) == 0, "%s", err.message);
  CHECK(device_comm_synchronize(&dc, &err) == 0, "%s", err.message);
  cudaMemcpy(h_full, d_full, S * W * 4, cudaMemcpyDeviceToHost);
  size_t bad = 0;
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < S; i++) bad += h_full[(size_t)r * S + i] != value(1, r, i);
  CHECK(bad == 0, "all_gather: %zu wrong", bad);
  // reduce_scatter sum and mean
  for (int op = 0; op < 2; op++) {
    for (size_t j = 0; j < S * W; j++) h_full[j] = value(2, me, j);
    cudaMemcpy(d_full, h_full, S * W * 4, cudaMemcpyHostToDevice);
    CHECK(device_comm_reduce_scatter(&dc, d_full, S, d_shard, DEVICE_F32, op ? COMM_MEAN : COMM_SUM, &err) == 0, "%s",
          err.message);
    CHECK(device_comm_synchronize(&dc, &err) == 0, "%s", err.message);
    cudaMemcpy(h_shard, d_shard, S * 4, cudaMemcpyDeviceToHost);
    double worst = 0;
    for (size_t i = 0; i < S; i++) {
      double ref = 0;
      for (int r = 0; r < W; r++) ref += value(2, r, (size_t)me * S + i);
      if (op) ref /= W;
      double e = fabs(h_shard[i] - ref) / (fabs(ref) > 1e-3 ? fabs(ref) : 1e-3);
      worst = e > worst ? e : worst;
    }
    CHECK(worst <= 1e-5, "reduce_scatter %s: rel %.3g", op ? "mean" : "sum", worst);
  }
  // all_reduce max
  for (size_t i = 0; i < S; i++) h_shard[i] = value(3, me, i);
  cudaMemcpy(d_shard, h_shard, S * 4, cudaMemcpyHostToDevice);
  CHECK(device_comm_all_reduce(&dc, d_shard, S, DEVICE_F32, COMM_MAX, &err) == 0, "%s", err.message);
  CHECK(device_comm_synchronize(&dc, &err) == 0, "%s", err.message);
  cudaMemcpy(h_shard, d_shard, S * 4, cudaMemcpyDeviceToHost);
  bad = 0;
  for (size_t i = 0; i < S; i++) {
    float m = value(3, 0, i);
    for (int r = 1; r < W; r++) m = value(3, r, i) > m ? value(3, r, i) : m;
    bad += h_shard[i] != m;
  }
  CHECK(bad == 0, "all_reduce max: %zu wrong", bad);
  // bf16 all_gather moves bits: compare raw halves.
  uint16_t *h16 = malloc(S * W * 2);
  for (size_t i = 0; i < S; i++) h16[i] = (uint16_t)(i * 31 + (size_t)me * 7);
  cudaMemcpy(d_shard, h16, S * 2, cudaMemcpyHostToDevice);
  CHECK(device_comm_all_gather(&dc, d_shard, S, d_full, DEVICE_BF16, &err) == 0, "%s", err.message);
  CHECK(device_comm_synchronize(&dc, &err) == 0, "%s", err.message);
  cudaMemcpy(h16, d_full, S * W * 2, cudaMemcpyDeviceToHost);
  bad = 0;
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < S; i++) bad += h16[(size_t)r * S + i] != (uint16_t)(i * 31 + (size_t)r * 7);
  CHECK(bad == 0, "bf16 all_gather: %zu wrong", bad);
  // broadcast from the last rank
  unsigned char *bytes = (unsigned char *)h16;
  for (size_t i = 0; i < 4099; i++) bytes[i] = me == W - 1 ? (unsigned char)(i * 13) : 0;
  cudaMemcpy(d_shard, bytes, 4099, cudaMemcpyHostToDevice);
  CHECK(device_comm_broadcast(&dc, d_shard, 4099, W - 1, &err) == 0, "%s", err.message);
  CHECK(device_comm_synchronize(&dc, &err) == 0, "%s", err.message);
  cudaMemcpy(bytes, d_shard, 4099, cudaMemcpyDeviceToHost);
  bad = 0;
  for (size_t i = 0; i < 4099; i++) bad += bytes[i] != (unsigned char)(i * 13);
  CHECK(bad == 0, "broadcast: %zu wrong", bad);
  CHECK(device_comm_broadcast(&dc, d_shard, 1, W, &err) == -1, "root out of range accepted");
  cudaFree(d_full), cudaFree(d_shard), free(h_full), free(h_shard), free(h16);
  device_comm_free(&dc);
  comm_free(&host);
  comm_mpi_finalize(&err);
  TEST_MAIN_END();
}
