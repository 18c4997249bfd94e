// parallel/comm_nccl_mpi.c: device_comm_init (parallel/comm_nccl.h), the NCCL
// communicator bootstrapped over MPI: rank 0's unique id broadcast to every
// rank of the host communicator. Compiled with comm_nccl.c (CUDA and NCCL).
#include "parallel/comm.h"
#include "parallel/comm_nccl.h"

#include <string.h>

int device_comm_init(DeviceComm *dc, Communicator *host, int cuda_device, FimiError *err) {
  memset(dc, 0, sizeof *dc);
  if (!host || host->mpi == MPI_COMM_NULL) return fimi_fail(err, "device_comm_init: host communicator not initialized");
  unsigned char id[DEVICE_COMM_ID_BYTES];
  memset(id, 0, sizeof id);
  // Every rank joins the broadcast, also when rank 0 failed to make an id
  // (it then sends zeros and fails below with its own message).
  int made = host->rank != 0 || device_comm_unique_id(id, err) == 0;
  if (comm_broadcast(host, id, sizeof id, 0, err) != 0) return fimi_fail_wrap(err, "sending the ncclUniqueId");
  if (!made) return -1;
  return device_comm_init_id(dc, id, host->rank, host->world, cuda_device, err);
}
