// parallel/comm_device.c: the MPI backend of DeviceCollectives (see
// comm_device.h): each collective copies its device input to a host buffer
// (the copies of ops_cuda.h wait for the compute stream), runs the host
// Communicator's or MPI's collective, and copies the result back. bf16 goes
// over the wire as float (exact both ways: a bf16 value is a float whose low
// 16 bits are 0), twice the bytes NCCL would move: this backend is for tests
// and small runs, not for speed.
#ifdef FIMI_HAVE_CUDA

#include "parallel/comm_device.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct MpiDeviceCollectives {
  Communicator *comm;
  CudaContext *ctx;
  float *send, *recv;  // host staging, grown on demand
  size_t capacity;     // floats each
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

static int mpi_all_gather_bf16(void *impl, const bf16 *shard, size_t count, bf16 *full, int ticket, FimiError *err) {
  MpiDeviceCollectives *m = impl;
  size_t total = count * (size_t)m->comm->world;
  if (ticket < 0 || ticket >= DEVICE_GATHER_TICKETS)
    return fimi_fail(err, "device all_gather: ticket %d outside [0, %d)", ticket, DEVICE_GATHER_TICKETS);
  if (reserve(m, total, err) != 0) return -1;
  cuda_download_bf16(m->ctx, m->send, shard, count);
  if (comm_all_gather_f32(m->comm, m->send, count, m->recv, err) != 0) return fimi_fail_wrap(err, "device all_gather");
  cuda_upload_bf16(m->ctx, full, m->recv, total);
  return 0;
}

static int mpi_wait(void *impl, int ticket, FimiError *err) {
  (void)impl;
  if (ticket < 0 || ticket >= DEVICE_GATHER_TICKETS)
    return fimi_fail(err, "device wait: ticket %d outside [0, %d)", ticket, DEVICE_GATHER_TICKETS);
  return 0;  // the gather completed inside its call
}

static int mpi_all_to_all_f32(void *impl, const float *send, size_t count, float *recv, FimiError *err) {
  MpiDeviceCollectives *m = impl;
  size_t total = count * (size_t)m->comm->world;
  if (count > (size_t)INT_MAX) return fimi_fail(err, "device all_to_all: %zu floats per rank exceed MPI's int", count);
  if (reserve(m, total, err) != 0) return -1;
  cuda_download_f32(m->ctx, m->send, send, total);
  int rc = MPI_Alltoall(m->send, (int)count, MPI_FLOAT, m->recv, (int)count, MPI_FLOAT, m->comm->mpi);
  if (comm_check_mpi(rc, "MPI_Alltoall (device staging)", m->comm, err) != 0) return -1;
  cuda_upload_f32(m->ctx, recv, m->recv, total);
  return 0;
}

static void mpi_free(void *impl) {
  MpiDeviceCollectives *m = impl;
  if (!m) return;
  free(m->send);
  free(m->recv);
  free(m);
}

int device_collectives_mpi(DeviceCollectives *dc, Communicator *comm, CudaContext *ctx, FimiError *err) {
  memset(dc, 0, sizeof *dc);
  if (!comm || comm->mpi == MPI_COMM_NULL) return fimi_fail(err, "device collectives (mpi): no host communicator");
  MpiDeviceCollectives *m = calloc(1, sizeof *m);
  if (!m) return fimi_fail(err, "device collectives (mpi): out of memory");
  m->comm = comm;
  m->ctx = ctx;
  *dc = (DeviceCollectives){"mpi", comm->rank, comm->world, m, mpi_all_gather_bf16, mpi_wait, mpi_all_to_all_f32,
                            mpi_free};
  return 0;
}

void device_collectives_free(DeviceCollectives *dc) {
  if (!dc) return;
  if (dc->free) dc->free(dc->impl);
  memset(dc, 0, sizeof *dc);
}

#endif  // FIMI_HAVE_CUDA
