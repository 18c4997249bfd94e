// parallel/comm_nccl.h: collectives on device buffers over NCCL. Defines
// DeviceComm (an NCCL communicator over the same ranks as a host
// Communicator, one GPU per rank, and the CUDA stream its collectives are
// enqueued on), device_comm_init (rank 0 creates the ncclUniqueId and
// broadcasts it over MPI), all_gather / reduce_scatter / all_reduce /
// broadcast / all_to_all on fp32 or bf16 device buffers, and
// device_collectives_nccl, the NCCL backend of parallel/comm_device.h
// (events order its stream against the compute stream).
//
// Built only when the CUDA backend is built and NCCL is found (FIMI_HAVE_NCCL,
// parallel/CMakeLists.txt). Status: compiled, not yet run on a GPU (see
// docs/distributed.md). Determinism: unlike parallel/comm.h, the order of NCCL's
// reductions is NCCL's (ring/tree, protocol, channel count): reproducible run
// to run on the same ranks and topology in practice, not across world sizes.
// Calls are asynchronous on `stream`: buffers must not be touched until
// device_comm_synchronize (or later work on the same stream).
#ifndef FIMI_PARALLEL_COMM_NCCL_H
#define FIMI_PARALLEL_COMM_NCCL_H

#include <stddef.h>

#include "core/error.h"
#include "parallel/comm_device.h"
#include "parallel/comm_op.h"

struct Communicator;  // parallel/comm.h (MPI): only device_comm_init needs it

#define DEVICE_COMM_ID_BYTES 128  // NCCL_UNIQUE_ID_BYTES

struct ncclComm;     // ncclComm_t
struct CUstream_st;  // cudaStream_t

typedef enum { DEVICE_F32 = 0, DEVICE_BF16 = 1 } DeviceDtype;

typedef struct DeviceComm {
  struct ncclComm *nccl;
  struct CUstream_st *stream;  // created by device_comm_init, owned
  int rank, world, cuda_device;
} DeviceComm;

// Collective over host: selects cuda_device on this rank and joins an NCCL
// communicator with host->world ranks, NCCL rank = host->rank (rank 0's
// unique id broadcast over MPI; comm_nccl_mpi.c).
int device_comm_init(DeviceComm *dc, struct Communicator *host, int cuda_device, FimiError *err);
// The pieces without MPI: a new unique id (one rank makes it, every rank
// joins with it), joining as `rank` of `world` on cuda_device, and a world of
// one on cuda_device (the GPU check: tests/gpu/nccl_gpu_test.c).
int device_comm_unique_id(unsigned char id[DEVICE_COMM_ID_BYTES], FimiError *err);
int device_comm_init_id(DeviceComm *dc, const unsigned char id[DEVICE_COMM_ID_BYTES], int rank, int world,
                        int cuda_device, FimiError *err);
int device_comm_init_local(DeviceComm *dc, int cuda_device, FimiError *err);
void device_comm_free(DeviceComm *dc);

// Same meaning as the host versions in parallel/comm.h; pointers are device memory.
int device_comm_all_gather(DeviceComm *dc, const void *shard, size_t shard_count, void *full, DeviceDtype dtype,
                           FimiError *err);
int device_comm_reduce_scatter(DeviceComm *dc, const void *full, size_t shard_count, void *shard, DeviceDtype dtype,
                               CommOp op, FimiError *err);
int device_comm_all_reduce(DeviceComm *dc, void *data, size_t count, DeviceDtype dtype, CommOp op, FimiError *err);
int device_comm_broadcast(DeviceComm *dc, void *data, size_t bytes, int root, FimiError *err);
// recv[q * count + i] = rank q's send[rank * count + i] (world * count each):
// ncclSend / ncclRecv to and from every rank in one group (NCCL has no
// all-to-all call). Pure data movement.
int device_comm_all_to_all(DeviceComm *dc, const void *send, size_t count, void *recv, DeviceDtype dtype,
                           FimiError *err);
// Waits for the stream: NCCL errors detected asynchronously surface here.
int device_comm_synchronize(DeviceComm *dc, FimiError *err);

// The DeviceCollectives of dc (borrowed: must outlive out) against ctx's
// compute stream: every collective's stream first waits for an event
// recorded on the compute stream; a gather records its own event, which
// wait(ticket) makes the compute stream wait for; an all-to-all makes the
// compute stream wait at once. No host synchronization.
int device_collectives_nccl(DeviceCollectives *out, DeviceComm *dc, CudaContext *ctx, FimiError *err);

#endif
