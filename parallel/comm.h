// parallel/comm.h: the host-buffer communicator. Defines Communicator (a private
// duplicate of an MPI communicator with its rank and size), comm_mpi_init /
// comm_mpi_finalize, and the collectives ZeRO-3 and the training loop use:
// all_gather (equal float shards -> full buffer), reduce_scatter (full
// gradient buffer -> this rank's shard, sum or mean), all_reduce (sum, mean,
// max on floats and doubles), broadcast (bytes) and barrier.
//
// Determinism (docs/distributed.md): MPI_Reduce_scatter_block and
// MPI_Allreduce on floats are not bitwise deterministic across MPI
// implementations, algorithms and world sizes (the summation order is the
// library's choice). fimi does not use them. Every reduction here is fixed
// order: each element's owner rank receives all ranks' values for it (plain
// point-to-point messages, pure data movement) and adds them in rank order
// 0, 1, ..., world-1, float inputs in a double accumulator, rounded to float
// once. So results are bitwise reproducible run to run at a given world size,
// identical on every rank (all_reduce = fixed-order reduce + gather of the
// owners' results), and the same global sum computed at world 1, 2 and 4
// differs only by the rounding of the per-rank partial sums.
//
// Errors: the communicator uses MPI_ERRORS_RETURN, so a failed MPI call
// becomes a FimiError naming the call and MPI's error string instead of an
// abort. Collectives must be called by every rank of the communicator in the
// same order with the same counts (MPI's rule); counts are not exchanged.
// After a failed collective the communicator is in an unknown state (messages
// may be in flight): report the error and end the job, do not retry.
#ifndef FIMI_PARALLEL_COMM_H
#define FIMI_PARALLEL_COMM_H

#include <stddef.h>

#include <mpi.h>

#include "core/error.h"
#include "parallel/comm_op.h"

typedef struct Communicator {
  MPI_Comm mpi;   // private duplicate; MPI_COMM_NULL when not initialized
  int rank;       // this process's rank in mpi
  int world;      // number of ranks in mpi
  // Bytes of received values a reduction holds at once (world x chunk); also
  // the largest single message. Default COMM_DEFAULT_CHUNK_BYTES; tests set it
  // tiny to exercise the chunked paths on small buffers.
  size_t chunk_bytes;
  void *scratch;  // receive buffer of a reduction, grown on demand
  size_t scratch_bytes;
  // Per-rank tables of the point-to-point exchange, allocated by comm_init:
  MPI_Request *requests;  // 2 * world
  size_t *piece_offset;   // world: where rank q's piece starts in the input
  size_t *piece_count;    // world: its length in elements
  int *counts, *displs;   // world: MPI_Allgatherv arguments
} Communicator;

#define COMM_DEFAULT_CHUNK_BYTES ((size_t)64 << 20)

// MPI_Init_thread (MPI_THREAD_FUNNELED: only the main thread calls MPI) unless
// MPI is already initialized, and MPI_ERRORS_RETURN on MPI_COMM_WORLD.
// Started without mpirun, Open MPI runs as a singleton world of 1.
int comm_mpi_init(int *argc, char ***argv, FimiError *err);
// MPI_Finalize if initialized and not yet finalized.
int comm_mpi_finalize(FimiError *err);

// Wraps a duplicate of `mpi` (e.g. MPI_COMM_WORLD or a split communicator).
int comm_init(Communicator *comm, MPI_Comm mpi, FimiError *err);
void comm_free(Communicator *comm);

// full[r * shard_count + i] = shard of rank r, element i.
// full holds world * shard_count floats; shard_count is the same on all ranks.
int comm_all_gather_f32(Communicator *comm, const float *shard, size_t shard_count, float *full, FimiError *err);
// shard[i] = op over ranks r of full_r[rank * shard_count + i]; op is COMM_SUM
// or COMM_MEAN (COMM_MAX works too). full holds world * shard_count floats on
// every rank; shard may be this rank's own slice of full (in place).
int comm_reduce_scatter_f32(Communicator *comm, const float *full, size_t shard_count, float *shard, CommOp op,
                            FimiError *err);
// In place: data[i] = op over ranks of data_r[i]; the same bits on every rank.
int comm_all_reduce_f32(Communicator *comm, float *data, size_t count, CommOp op, FimiError *err);
int comm_all_reduce_f64(Communicator *comm, double *data, size_t count, CommOp op, FimiError *err);
// bytes from rank root to all ranks.
int comm_broadcast(Communicator *comm, void *data, size_t bytes, int root, FimiError *err);
int comm_barrier(Communicator *comm, FimiError *err);
// This rank's index among the ranks of comm on its node (shared memory),
// and how many there are: picks one GPU per rank on a node. Collective.
int comm_node_local_rank(Communicator *comm, int *local_rank, int *local_size, FimiError *err);
// Every rank's `bytes` bytes of `mine` to every rank, lengths not known in
// advance: counts (world entries, the caller's array) gets each rank's length
// and *all a new buffer (free() it; never NULL on success) with the pieces
// concatenated in rank order. Pure data movement: MPI_Allgatherv when the
// total fits one message of chunk_bytes, else one chunked broadcast per rank.
int comm_all_gather_bytes(Communicator *comm, const void *mine, size_t bytes, size_t *counts, void **all,
                          FimiError *err);

// "MPI_Allgather failed on rank 1 of 4: <MPI's error string>" when rc != MPI_SUCCESS.
int comm_check_mpi(int rc, const char *call, const Communicator *comm, FimiError *err);

#endif
