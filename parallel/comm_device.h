// parallel/comm_device.h: the collectives ZeRO-3 on the GPU needs, on device
// buffers, behind one interface with two backends. Defines DeviceCollectives
// (a table of calls plus its backend's state), device_collectives_mpi (any
// MPI: stages every buffer through host memory; the CI backend on the host
// stand-in of kernels/cuda/ops_cuda.h, and a fallback where NCCL is absent)
// and device_collectives_free; the NCCL backend is device_collectives_nccl
// in parallel/comm_nccl.h.
//
// Ordering (both backends): a collective reads its input after all work the
// compute stream (the CudaContext's) has been given before the call, and
// may run on while the compute stream goes on: later compute work sees its
// output (and may overwrite its input) only after wait(ticket). Tickets
// 0 .. DEVICE_TICKETS-1 name the collectives in flight; a ticket is reused
// only after its wait. The MPI backend completes each inside its call.
// Pure data movement both: their results are bitwise the same on every
// backend. fimi keeps every reduction for the owner to do in a fixed order
// (parallel/zero3_cuda.h), so nothing here sums.
// Only compiled with the CUDA backend (FIMI_HAVE_CUDA).
#ifndef FIMI_PARALLEL_COMM_DEVICE_H
#define FIMI_PARALLEL_COMM_DEVICE_H

#ifdef FIMI_HAVE_CUDA

#include <stddef.h>
#include <string.h>

#include "core/error.h"
#include "kernels/cuda/ops_cuda.h"

struct Communicator;  // parallel/comm.h (MPI): only the MPI backend needs it

#define DEVICE_TICKETS 4

typedef struct DeviceCollectives {
  const char *backend;  // "mpi" or "nccl"
  int rank, world;
  void *impl;           // the backend's state, owned
  // full (world * count, device) = every rank's shard (count, device) in rank order.
  int (*all_gather_bf16)(void *impl, const bf16 *shard, size_t count, bf16 *full, int ticket, FimiError *err);
  // Later compute work waits for collective `ticket`.
  int (*wait)(void *impl, int ticket, FimiError *err);
  // recv[q * count + i] = rank q's send[rank * count + i] (send, recv: world * count, device).
  int (*all_to_all_f32)(void *impl, const float *send, size_t count, float *recv, int ticket, FimiError *err);
  void (*free)(void *impl);
} DeviceCollectives;

// The MPI backend over comm (borrowed, must outlive dc) for ctx's device.
int device_collectives_mpi(DeviceCollectives *dc, struct Communicator *comm, CudaContext *ctx, FimiError *err);
// The same, deferred (tests): each collective's output is poisoned at the
// call and the collective runs at its wait (or when its ticket is reused),
// so a read of an output or a write of an input before the wait shows.
// Every rank must wait in the same order (zero3_cuda's code paths do).
int device_collectives_mpi_deferred(DeviceCollectives *dc, struct Communicator *comm, CudaContext *ctx,
                                    FimiError *err);
// 0, or -1 with err naming `what` when ticket is outside [0, DEVICE_TICKETS)
// (the backends' argument check).
static inline int device_ticket_check(int ticket, const char *what, FimiError *err) {
  if (ticket < 0 || ticket >= DEVICE_TICKETS)
    return fimi_fail(err, "device %s: ticket %d outside [0, %d)", what, ticket, DEVICE_TICKETS);
  return 0;
}

// Frees the backend's state (any backend; here so that a build without MPI,
// the GPU check's, has it too).
static inline void device_collectives_free(DeviceCollectives *dc) {
  if (!dc) return;
  if (dc->free) dc->free(dc->impl);
  memset(dc, 0, sizeof *dc);
}

#endif  // FIMI_HAVE_CUDA
#endif
