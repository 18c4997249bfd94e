// parallel/comm_nccl.c: NCCL collectives on device buffers (see comm_nccl.h);
// no MPI here (the MPI bootstrap is comm_nccl_mpi.c), so the GPU check builds
// it. Compiled only with the CUDA backend and NCCL; unverified on a GPU so far.
#include "parallel/comm_nccl.h"

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

static int check_cuda(cudaError_t rc, const char *call, FimiError *err) {
  if (rc == cudaSuccess) return 0;
  return fimi_fail(err, "%s failed: %s (%s)", call, cudaGetErrorString(rc), cudaGetErrorName(rc));
}

static int check_nccl(ncclResult_t rc, const char *call, const DeviceComm *dc, FimiError *err) {
  if (rc == ncclSuccess) return 0;
  const char *detail = ncclGetLastError(dc ? dc->nccl : NULL);
  return fimi_fail(err, "%s failed on rank %d of %d: %s%s%s", call, dc ? dc->rank : -1, dc ? dc->world : -1,
                   ncclGetErrorString(rc), detail && detail[0] ? ": " : "", detail ? detail : "");
}

static ncclDataType_t nccl_type(DeviceDtype dtype) { return dtype == DEVICE_BF16 ? ncclBfloat16 : ncclFloat32; }

static int nccl_op(CommOp op, ncclRedOp_t *out, FimiError *err) {
  switch (op) {
    case COMM_SUM: *out = ncclSum; return 0;
    case COMM_MEAN: *out = ncclAvg; return 0;
    case COMM_MAX: *out = ncclMax; return 0;
  }
  return fimi_fail(err, "device comm: unknown op %d", (int)op);
}

static int check_ready(const DeviceComm *dc, const char *what, FimiError *err) {
  if (!dc || !dc->nccl) return fimi_fail(err, "%s: device communicator not initialized", what);
  return 0;
}

_Static_assert(sizeof(ncclUniqueId) == DEVICE_COMM_ID_BYTES, "DEVICE_COMM_ID_BYTES is NCCL's unique id size");

int device_comm_unique_id(unsigned char id[DEVICE_COMM_ID_BYTES], FimiError *err) {
  ncclUniqueId u;
  memset(&u, 0, sizeof u);
  if (check_nccl(ncclGetUniqueId(&u), "ncclGetUniqueId", NULL, err) != 0) return -1;
  memcpy(id, &u, DEVICE_COMM_ID_BYTES);
  return 0;
}

int device_comm_init_id(DeviceComm *dc, const unsigned char id[DEVICE_COMM_ID_BYTES], int rank, int world,
                        int cuda_device, FimiError *err) {
  memset(dc, 0, sizeof *dc);
  if (world < 1 || rank < 0 || rank >= world)
    return fimi_fail(err, "device_comm_init: rank %d outside a world of %d", rank, world);
  dc->rank = rank;
  dc->world = world;
  dc->cuda_device = cuda_device;
  int devices = 0;
  if (check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount", err) != 0) return -1;
  if (cuda_device < 0 || cuda_device >= devices)
    return fimi_fail(err, "device_comm_init: rank %d asks for CUDA device %d, this node has %d", rank, cuda_device,
                     devices);
  if (check_cuda(cudaSetDevice(cuda_device), "cudaSetDevice", err) != 0) return -1;
  cudaStream_t stream = NULL;
  if (check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", err) != 0) return -1;
  dc->stream = stream;
  ncclUniqueId u;
  memcpy(&u, id, DEVICE_COMM_ID_BYTES);
  ncclComm_t comm = NULL;
  if (check_nccl(ncclCommInitRank(&comm, world, u, rank), "ncclCommInitRank", dc, err) != 0) {
    device_comm_free(dc);
    return -1;
  }
  dc->nccl = comm;
  return 0;
}

int device_comm_init_local(DeviceComm *dc, int cuda_device, FimiError *err) {
  unsigned char id[DEVICE_COMM_ID_BYTES];
  memset(dc, 0, sizeof *dc);
  if (check_cuda(cudaSetDevice(cuda_device), "cudaSetDevice", err) != 0) return -1;
  if (device_comm_unique_id(id, err) != 0) return -1;
  return device_comm_init_id(dc, id, 0, 1, cuda_device, err);
}

void device_comm_free(DeviceComm *dc) {
  if (dc->nccl) {
    ncclCommFinalize(dc->nccl);
    ncclCommDestroy(dc->nccl);
  }
  if (dc->stream) cudaStreamDestroy(dc->stream);
  memset(dc, 0, sizeof *dc);
}

int device_comm_all_gather(DeviceComm *dc, const void *shard, size_t shard_count, void *full, DeviceDtype dtype,
                           FimiError *err) {
  if (check_ready(dc, "device all_gather", err) != 0) return -1;
  ncclResult_t rc = ncclAllGather(shard, full, shard_count, nccl_type(dtype), dc->nccl, dc->stream);
  return check_nccl(rc, "ncclAllGather", dc, err);
}

int device_comm_reduce_scatter(DeviceComm *dc, const void *full, size_t shard_count, void *shard, DeviceDtype dtype,
                               CommOp op, FimiError *err) {
  ncclRedOp_t nop = ncclSum;
  if (check_ready(dc, "device reduce_scatter", err) || nccl_op(op, &nop, err)) return -1;
  ncclResult_t rc = ncclReduceScatter(full, shard, shard_count, nccl_type(dtype), nop, dc->nccl, dc->stream);
  return check_nccl(rc, "ncclReduceScatter", dc, err);
}

int device_comm_all_reduce(DeviceComm *dc, void *data, size_t count, DeviceDtype dtype, CommOp op, FimiError *err) {
  ncclRedOp_t nop = ncclSum;
  if (check_ready(dc, "device all_reduce", err) || nccl_op(op, &nop, err)) return -1;
  ncclResult_t rc = ncclAllReduce(data, data, count, nccl_type(dtype), nop, dc->nccl, dc->stream);
  return check_nccl(rc, "ncclAllReduce", dc, err);
}

int device_comm_broadcast(DeviceComm *dc, void *data, size_t bytes, int root, FimiError *err) {
  if (check_ready(dc, "device broadcast", err) != 0) return -1;
  if (root < 0 || root >= dc->world)
    return fimi_fail(err, "device broadcast: root %d outside a world of %d", root, dc->world);
  ncclResult_t rc = ncclBroadcast(data, data, bytes, ncclUint8, root, dc->nccl, dc->stream);
  return check_nccl(rc, "ncclBroadcast", dc, err);
}

int device_comm_synchronize(DeviceComm *dc, FimiError *err) {
  if (check_ready(dc, "device synchronize", err) != 0) return -1;
  if (check_cuda(cudaStreamSynchronize(dc->stream), "cudaStreamSynchronize", err) != 0) return -1;
  ncclResult_t async = ncclSuccess;
  if (check_nccl(ncclCommGetAsyncError(dc->nccl, &async), "ncclCommGetAsyncError", dc, err) != 0) return -1;
  return check_nccl(async, "NCCL (asynchronous error)", dc, err);
}

int device_comm_all_to_all(DeviceComm *dc, const void *send, size_t count, void *recv, DeviceDtype dtype,
                           FimiError *err) {
  if (check_ready(dc, "device all_to_all", err) != 0) return -1;
  size_t bytes = count * (dtype == DEVICE_BF16 ? 2 : 4);
  if (check_nccl(ncclGroupStart(), "ncclGroupStart", dc, err) != 0) return -1;
  ncclResult_t rc = ncclSuccess;
  for (int q = 0; q < dc->world && rc == ncclSuccess; q++) {
    rc = ncclSend((const char *)send + (size_t)q * bytes, count, nccl_type(dtype), q, dc->nccl, dc->stream);
    if (rc == ncclSuccess)
      rc = ncclRecv((char *)recv + (size_t)q * bytes, count, nccl_type(dtype), q, dc->nccl, dc->stream);
  }
  ncclResult_t end = ncclGroupEnd();
  if (check_nccl(rc, "ncclSend/ncclRecv", dc, err) != 0) return -1;
  return check_nccl(end, "ncclGroupEnd", dc, err);
}

// ---- DeviceCollectives over NCCL -------------------------------------------------

typedef struct NcclCollectives {
  DeviceComm *dc;
  cudaStream_t compute;
  cudaEvent_t compute_ready;           // recorded on compute before each collective
  cudaEvent_t done[DEVICE_TICKETS];    // recorded on dc->stream after collective `ticket`
} NcclCollectives;

// The collective's stream waits for everything the compute stream has been given.
static int after_compute(NcclCollectives *n, FimiError *err) {
  if (check_cuda(cudaEventRecord(n->compute_ready, n->compute), "cudaEventRecord", err) != 0) return -1;
  return check_cuda(cudaStreamWaitEvent(n->dc->stream, n->compute_ready, 0), "cudaStreamWaitEvent", err);
}

static int nccl_all_gather_bf16(void *impl, const bf16 *shard, size_t count, bf16 *full, int ticket, FimiError *err) {
  NcclCollectives *n = impl;
  if (device_ticket_check(ticket, "all_gather", err) != 0 || after_compute(n, err) != 0 ||
      device_comm_all_gather(n->dc, shard, count, full, DEVICE_BF16, err) != 0)
    return -1;
  return check_cuda(cudaEventRecord(n->done[ticket], n->dc->stream), "cudaEventRecord", err);
}

static int nccl_wait(void *impl, int ticket, FimiError *err) {
  NcclCollectives *n = impl;
  if (device_ticket_check(ticket, "wait", err) != 0) return -1;
  return check_cuda(cudaStreamWaitEvent(n->compute, n->done[ticket], 0), "cudaStreamWaitEvent", err);
}

static int nccl_all_to_all_f32(void *impl, const float *send, size_t count, float *recv, int ticket, FimiError *err) {
  NcclCollectives *n = impl;
  if (device_ticket_check(ticket, "all_to_all", err) != 0 || after_compute(n, err) != 0 ||
      device_comm_all_to_all(n->dc, send, count, recv, DEVICE_F32, err) != 0)
    return -1;
  return check_cuda(cudaEventRecord(n->done[ticket], n->dc->stream), "cudaEventRecord", err);
}

static void nccl_collectives_free(void *impl) {
  NcclCollectives *n = impl;
  if (!n) return;
  if (n->compute_ready) cudaEventDestroy(n->compute_ready);
  for (int t = 0; t < DEVICE_TICKETS; t++)
    if (n->done[t]) cudaEventDestroy(n->done[t]);
  free(n);
}

int device_collectives_nccl(DeviceCollectives *out, DeviceComm *dc, CudaContext *ctx, FimiError *err) {
  memset(out, 0, sizeof *out);
  if (check_ready(dc, "device_collectives_nccl", err) != 0) return -1;
  NcclCollectives *n = calloc(1, sizeof *n);
  if (!n) return fimi_fail(err, "device collectives (nccl): out of memory");
  n->dc = dc;
  n->compute = (cudaStream_t)cuda_context_stream(ctx);
  // Timing off: these events only order streams.
  int rc = check_cuda(cudaEventCreateWithFlags(&n->compute_ready, cudaEventDisableTiming), "cudaEventCreate", err);
  for (int t = 0; rc == 0 && t < DEVICE_TICKETS; t++)
    rc = check_cuda(cudaEventCreateWithFlags(&n->done[t], cudaEventDisableTiming), "cudaEventCreate", err);
  if (rc != 0) {
    nccl_collectives_free(n);
    return -1;
  }
  *out = (DeviceCollectives){"nccl", dc->rank, dc->world, n, nccl_all_gather_bf16, nccl_wait, nccl_all_to_all_f32,
                             nccl_collectives_free};
  return 0;
}
