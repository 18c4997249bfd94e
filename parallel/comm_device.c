// parallel/comm_device.c: the MPI backend of DeviceCollectives (see
// comm_device.h): each collective copies its device input to a host buffer
// (the copies of ops_cuda.h wait for the compute stream), runs the host
// Communicator's or MPI's collective, and copies the result back. bf16 goes
// over the wire as float (exact both ways: a bf16 value is a float whose low
// 16 bits are 0), twice the bytes NCCL would move: this backend is for tests
// and small runs, not for speed. The deferred variant (tests) runs each
// collective only at its wait, or when its ticket is reused, after
// poisoning the output at the call: code that reads an output before its
// wait, or writes an input before it, gets NaNs or wrong sums instead of
// passing by luck, as it could on NCCL's own stream.
#ifdef FIMI_HAVE_CUDA

#include "parallel/comm_device.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

typedef enum { PENDING_NONE = 0, PENDING_GATHER, PENDING_ALL_TO_ALL } PendingKind;

// A collective issued and not yet run (deferred mode).
typedef struct Pending {
  PendingKind kind;
  const void *send;
  void *recv;
  size_t count;
} Pending;

typedef struct MpiDeviceCollectives {
  Communicator *comm;
  CudaContext *ctx;
  float *send, *recv;  // host staging, grown on demand
  size_t capacity;     // floats each
  int deferred;
  Pending pending[DEVICE_TICKETS];
} MpiDeviceCollectives;

static int reserve(MpiDeviceCollectives *m, size_t floats, FimiError *err) {
  if (floats <= m->capacity) return 0;
  float *send = realloc(m->send, floats * sizeof(float));
  if (send) m->send = send;
  float *recv = send ? realloc(m->recv, floats * sizeof(float)) : NULL;
  if (recv) m->recv = recv;
  if (!send || !recv) return fimi_fail(err, "device collectives (mpi): out of host memory for %zu floats", floats);
  m->capacity = floats;
  return 0;
}

static int run_all_gather_bf16(MpiDeviceCollectives *m, const bf16 *shard, size_t count, bf16 *full, FimiError *err) {
  size_t total = count * (size_t)m->comm->world;
  if (reserve(m, total, err) != 0) return -1;
  cuda_download_bf16(m->ctx, m->send, shard, count);
  if (comm_all_gather_f32(m->comm, m->send, count, m->recv, err) != 0) return fimi_fail_wrap(err, "device all_gather");
  cuda_upload_bf16(m->ctx, full, m->recv, total);
  return 0;
}

static int run_all_to_all_f32(MpiDeviceCollectives *m, const float *send, size_t count, float *recv, FimiError *err) {
  size_t total = count * (size_t)m->comm->world;
  if (count > (size_t)INT_MAX) return fimi_fail(err, "device all_to_all: %zu floats per rank exceed MPI's int", count);
  if (reserve(m, total, err) != 0) return -1;
  cuda_download_f32(m->ctx, m->send, send, total);
  int rc = MPI_Alltoall(m->send, (int)count, MPI_FLOAT, m->recv, (int)count, MPI_FLOAT, m->comm->mpi);
  if (comm_check_mpi(rc, "MPI_Alltoall (device staging)", m->comm, err) != 0) return -1;
  cuda_upload_f32(m->ctx, recv, m->recv, total);
  return 0;
}

// Runs the collective pending on ticket, if any (deferred mode).
static int run_pending(MpiDeviceCollectives *m, int ticket, FimiError *err) {
  Pending p = m->pending[ticket];
  m->pending[ticket].kind = PENDING_NONE;
  if (p.kind == PENDING_GATHER) return run_all_gather_bf16(m, p.send, p.count, p.recv, err);
  if (p.kind == PENDING_ALL_TO_ALL) return run_all_to_all_f32(m, p.send, p.count, p.recv, err);
  return 0;
}

// Deferred mode: the output poisoned (0xFF bytes: NaN in bf16 and fp32), the
// call kept for the wait. A ticket reused before its wait runs the older
// call first (NCCL would have run it first on its stream).
static int defer(MpiDeviceCollectives *m, int ticket, PendingKind kind, const void *send, void *recv, size_t count,
                 size_t recv_bytes, FimiError *err) {
  if (run_pending(m, ticket, err) != 0) return -1;
  cuda_fill_bytes(m->ctx, recv, 0xFF, recv_bytes);
  m->pending[ticket] = (Pending){kind, send, recv, count};
  return 0;
}

static int mpi_all_gather_bf16(void *impl, const bf16 *shard, size_t count, bf16 *full, int ticket, FimiError *err) {
  MpiDeviceCollectives *m = impl;
  if (device_ticket_check(ticket, "all_gather", err) != 0) return -1;
  if (m->deferred)
    return defer(m, ticket, PENDING_GATHER, shard, full, count, count * (size_t)m->comm->world * sizeof(bf16), err);
  return run_all_gather_bf16(m, shard, count, full, err);
}

static int mpi_wait(void *impl, int ticket, FimiError *err) {
  MpiDeviceCollectives *m = impl;
  if (device_ticket_check(ticket, "wait", err) != 0) return -1;
  return run_pending(m, ticket, err);  // without deferral the collective completed inside its call
}

static int mpi_all_to_all_f32(void *impl, const float *send, size_t count, float *recv, int ticket, FimiError *err) {
  MpiDeviceCollectives *m = impl;
  if (device_ticket_check(ticket, "all_to_all", err) != 0) return -1;
  if (m->deferred)
    return defer(m, ticket, PENDING_ALL_TO_ALL, send, recv, count, count * (size_t)m->comm->world * sizeof(float),
                 err);
  return run_all_to_all_f32(m, send, count, recv, err);
}

static void mpi_free(void *impl) {
  MpiDeviceCollectives *m = impl;
  if (!m) return;
  free(m->send);
  free(m->recv);
  free(m);
}

static int create_mpi(DeviceCollectives *dc, Communicator *comm, CudaContext *ctx, int deferred, FimiError *err) {
  memset(dc, 0, sizeof *dc);
  if (!comm || comm->mpi == MPI_COMM_NULL) return fimi_fail(err, "device collectives (mpi): no host communicator");
  MpiDeviceCollectives *m = calloc(1, sizeof *m);
  if (!m) return fimi_fail(err, "device collectives (mpi): out of memory");
  m->comm = comm;
  m->ctx = ctx;
  m->deferred = deferred;
  *dc = (DeviceCollectives){deferred ? "mpi-deferred" : "mpi", comm->rank, comm->world, m, mpi_all_gather_bf16,
                            mpi_wait, mpi_all_to_all_f32, mpi_free};
  return 0;
}

int device_collectives_mpi(DeviceCollectives *dc, Communicator *comm, CudaContext *ctx, FimiError *err) {
  return create_mpi(dc, comm, ctx, 0, err);
}

int device_collectives_mpi_deferred(DeviceCollectives *dc, Communicator *comm, CudaContext *ctx, FimiError *err) {
  return create_mpi(dc, comm, ctx, 1, err);
}

#endif  // FIMI_HAVE_CUDA
