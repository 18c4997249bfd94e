// parallel/comm.c: host-buffer collectives over MPI with fixed-order reductions
// (see comm.h for the determinism guarantee).
//
// A reduction is one point-to-point exchange per chunk: rank q owns a piece
// of the elements; every rank sends q its values of q's piece and receives
// every rank's values of its own piece into scratch (rank p's at p * len);
// the owner then reduces scratch in rank order. The volume per rank is
// (world-1)/world of the buffer, like a ring reduce-scatter, but the order
// of additions is fixed by rank, never by the library's algorithm choice.
#include "parallel/comm.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define COMM_TAG 7301  // tag of the reduction exchange; the comm is private

int comm_check_mpi(int rc, const char *call, const Communicator *comm, FimiError *err) {
  if (rc == MPI_SUCCESS) return 0;
  char text[MPI_MAX_ERROR_STRING] = "unknown MPI error";
  int len = 0;
  MPI_Error_string(rc, text, &len);
  if (comm && comm->world > 0)
    return fimi_fail(err, "%s failed on rank %d of %d: %s", call, comm->rank, comm->world, text);
  return fimi_fail(err, "%s failed: %s", call, text);
}

int comm_mpi_init(int *argc, char ***argv, FimiError *err) {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // MPI_Init's own failure cannot be caught (no error handler exists yet).
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (comm_check_mpi(rc, "MPI_Init_thread", NULL, err) != 0) return -1;
    if (provided < MPI_THREAD_FUNNELED)
      log_debug("MPI provides thread level %d < MPI_THREAD_FUNNELED; only the main thread calls MPI anyway", provided);
  }
  return comm_check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", NULL,
                        err);
}

int comm_mpi_finalize(FimiError *err) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 0;
  return comm_check_mpi(MPI_Finalize(), "MPI_Finalize", NULL, err);
}

int comm_init(Communicator *comm, MPI_Comm mpi, FimiError *err) {
  memset(comm, 0, sizeof *comm);
  comm->mpi = MPI_COMM_NULL;
  if (mpi == MPI_COMM_NULL) return fimi_fail(err, "comm_init: MPI_COMM_NULL (this rank is not in that communicator)");
  // A private duplicate: fimi's messages never match another library's.
  if (comm_check_mpi(MPI_Comm_dup(mpi, &comm->mpi), "MPI_Comm_dup", NULL, err) != 0) return -1;
  if (comm_check_mpi(MPI_Comm_set_errhandler(comm->mpi, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", NULL, err) ||
      comm_check_mpi(MPI_Comm_rank(comm->mpi, &comm->rank), "MPI_Comm_rank", NULL, err) ||
      comm_check_mpi(MPI_Comm_size(comm->mpi, &comm->world), "MPI_Comm_size", NULL, err)) {
    comm_free(comm);
    return -1;
  }
  size_t w = (size_t)comm->world;
  comm->chunk_bytes = COMM_DEFAULT_CHUNK_BYTES;
  comm->requests = fimi_calloc(2 * w, sizeof *comm->requests, err);
  comm->piece_offset = fimi_calloc(w, sizeof *comm->piece_offset, err);
  comm->piece_count = fimi_calloc(w, sizeof *comm->piece_count, err);
  comm->counts = fimi_calloc(w, sizeof *comm->counts, err);
  comm->displs = fimi_calloc(w, sizeof *comm->displs, err);
  if (!comm->requests || !comm->piece_offset || !comm->piece_count || !comm->counts || !comm->displs) {
    comm_free(comm);
    return -1;
  }
  return 0;
}

void comm_free(Communicator *comm) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // A zeroed struct holds 0, which is not MPI_COMM_NULL in Open MPI (a pointer).
  if (comm->mpi != MPI_COMM_NULL && comm->mpi != (MPI_Comm)0 && !finalized) MPI_Comm_free(&comm->mpi);
  free(comm->scratch);
  free(comm->requests);
  free(comm->piece_offset);
  free(comm->piece_count);
  free(comm->counts);
  free(comm->displs);
  memset(comm, 0, sizeof *comm);
  comm->mpi = MPI_COMM_NULL;
}

static int check_ready(const Communicator *comm, const char *what, FimiError *err) {
  if (!comm || comm->mpi == MPI_COMM_NULL || comm->world < 1)
    return fimi_fail(err, "%s: communicator not initialized", what);
  return 0;
}

// Elements of `elem_bytes` a rank may own per chunk so that world of them fit
// in chunk_bytes (and one message stays below INT_MAX bytes); at least 1.
static size_t chunk_elems(const Communicator *comm, size_t elem_bytes) {
  size_t budget = comm->chunk_bytes < (size_t)INT_MAX ? comm->chunk_bytes : (size_t)INT_MAX;
  size_t n = budget / ((size_t)comm->world * elem_bytes);
  return n ? n : 1;
}

static int grow_scratch(Communicator *comm, size_t bytes, FimiError *err) {
  if (bytes <= comm->scratch_bytes) return 0;
  void *p = realloc(comm->scratch, bytes);
  if (!p) return fimi_fail(err, "comm: out of memory for a %zu-byte reduction buffer", bytes);
  comm->scratch = p;
  comm->scratch_bytes = bytes;
  return 0;
}

// ----------------------------------------------------------------------------
// The fixed-order reduction. piece_offset/piece_count describe, for every rank
// q, the elements of `in` (same layout on all ranks) that q reduces. This
// rank's result (piece_count[rank] elements) goes to out, which may alias its
// own piece of `in` (all sends are complete before out is written).

typedef enum { ELEM_F32, ELEM_F64 } ElemType;

// acc (len doubles) = op over p = 0, 1, ..., world-1 of contribution p, in
// that order for every element; rank-outer loops keep the reads sequential.
static void reduce_rank_order(const void *scratch, size_t len, int world, ElemType type, CommOp op, double *acc,
                              void *out) {
  for (int p = 0; p < world; p++) {
    const float *f = (const float *)scratch + (size_t)p * len;
    const double *d = (const double *)scratch + (size_t)p * len;
    for (size_t i = 0; i < len; i++) {
      double v = type == ELEM_F32 ? (double)f[i] : d[i];
      if (p == 0)
        acc[i] = v;
      else if (op != COMM_MAX)
        acc[i] += v;
      else if (v != v || (acc[i] == acc[i] && v > acc[i]))  // a NaN wins: non-finite grads stay visible
        acc[i] = v;
    }
  }
  for (size_t i = 0; i < len; i++) {
    double v = op == COMM_MEAN ? acc[i] / world : acc[i];
    if (type == ELEM_F32)
      ((float *)out)[i] = (float)v;
    else
      ((double *)out)[i] = v;
  }
}

static int exchange_and_reduce(Communicator *comm, const void *in, ElemType type, CommOp op, void *out,
                               FimiError *err) {
  size_t esize = type == ELEM_F32 ? sizeof(float) : sizeof(double);
  MPI_Datatype mtype = type == ELEM_F32 ? MPI_FLOAT : MPI_DOUBLE;
  int me = comm->rank, world = comm->world;
  size_t len = comm->piece_count[me];
  // world contributions of len elements, then len double accumulators.
  size_t contrib_bytes = (size_t)world * len * esize;
  contrib_bytes += (sizeof(double) - contrib_bytes % sizeof(double)) % sizeof(double);
  if (grow_scratch(comm, contrib_bytes + len * sizeof(double) + 1, err) != 0) return -1;
  char *scratch = comm->scratch;
  const char *src = in;
  int nreq = 0;
  for (int p = 0; p < world; p++) {
    if (p == me) continue;
    int rc = MPI_Irecv(scratch + (size_t)p * len * esize, (int)len, mtype, p, COMM_TAG, comm->mpi,
                       &comm->requests[nreq++]);
    if (comm_check_mpi(rc, "MPI_Irecv", comm, err) != 0) return -1;
  }
  for (int q = 0; q < world; q++) {
    if (q == me) continue;
    int rc = MPI_Isend(src + comm->piece_offset[q] * esize, (int)comm->piece_count[q], mtype, q, COMM_TAG, comm->mpi,
                       &comm->requests[nreq++]);
    if (comm_check_mpi(rc, "MPI_Isend", comm, err) != 0) return -1;
  }
  memcpy(scratch + (size_t)me * len * esize, src + comm->piece_offset[me] * esize, len * esize);
  if (comm_check_mpi(MPI_Waitall(nreq, comm->requests, MPI_STATUSES_IGNORE), "MPI_Waitall", comm, err) != 0)
    return -1;
  reduce_rank_order(scratch, len, world, type, op, (double *)(scratch + contrib_bytes), out);
  return 0;
}

static int check_op(CommOp op, const char *what, FimiError *err) {
  if (op != COMM_SUM && op != COMM_MEAN && op != COMM_MAX) return fimi_fail(err, "%s: unknown op %d", what, (int)op);
  return 0;
}

int comm_reduce_scatter_f32(Communicator *comm, const float *full, size_t shard_count, float *shard, CommOp op,
                            FimiError *err) {
  if (check_ready(comm, "reduce_scatter", err) || check_op(op, "reduce_scatter", err)) return -1;
  if (shard_count > SIZE_MAX / sizeof(float) / (size_t)comm->world)
    return fimi_fail(err, "reduce_scatter: %zu floats per shard x %d ranks overflow", shard_count, comm->world);
  if (shard_count && (!full || !shard)) return fimi_fail(err, "reduce_scatter: NULL buffer");
  // One rank: sum, mean and max of a single value are the value, bit for bit
  // what the general path computes (float -> double -> float is exact).
  if (comm->world == 1) {
    if (shard_count) memmove(shard, full, shard_count * sizeof(float));
    return 0;
  }
  size_t chunk = chunk_elems(comm, sizeof(float));
  for (size_t off = 0; off < shard_count; off += chunk) {
    size_t len = shard_count - off < chunk ? shard_count - off : chunk;
    for (int q = 0; q < comm->world; q++) {
      comm->piece_offset[q] = (size_t)q * shard_count + off;
      comm->piece_count[q] = len;
    }
    if (exchange_and_reduce(comm, full, ELEM_F32, op, shard + off, err) != 0)
      return fimi_fail_wrap(err, "reduce_scatter of %zu floats per shard", shard_count);
  }
  return 0;
}

// All-reduce of one block of at most world * chunk elements: rank q reduces
// the q-th equal padded piece in place, then MPI_Allgatherv (pure data
// movement) hands every rank all pieces.
static int all_reduce_block(Communicator *comm, void *block, size_t n, ElemType type, CommOp op, FimiError *err) {
  size_t esize = type == ELEM_F32 ? sizeof(float) : sizeof(double);
  size_t w = (size_t)comm->world, piece = n / w + (n % w != 0);
  for (int q = 0; q < comm->world; q++) {
    size_t begin = (size_t)q * piece < n ? (size_t)q * piece : n;
    size_t count = n - begin < piece ? n - begin : piece;
    comm->piece_offset[q] = begin;
    comm->piece_count[q] = count;
    comm->counts[q] = (int)count;  // <= chunk <= INT_MAX / esize
    comm->displs[q] = (int)begin;  // n <= INT_MAX / esize
  }
  char *mine = (char *)block + comm->piece_offset[comm->rank] * esize;
  if (exchange_and_reduce(comm, block, type, op, mine, err) != 0) return -1;
  MPI_Datatype mtype = type == ELEM_F32 ? MPI_FLOAT : MPI_DOUBLE;
  int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, mtype, block, comm->counts, comm->displs, mtype, comm->mpi);
  return comm_check_mpi(rc, "MPI_Allgatherv", comm, err);
}

static int all_reduce(Communicator *comm, void *data, size_t count, ElemType type, CommOp op, FimiError *err) {
  const char *what = type == ELEM_F32 ? "all_reduce (float)" : "all_reduce (double)";
  if (check_ready(comm, what, err) || check_op(op, what, err)) return -1;
  if (count && !data) return fimi_fail(err, "%s: NULL buffer", what);
  if (comm->world == 1) return 0;  // as in reduce_scatter: the identity, exactly
  size_t esize = type == ELEM_F32 ? sizeof(float) : sizeof(double);
  size_t block = chunk_elems(comm, esize) * (size_t)comm->world;
  for (size_t off = 0; off < count; off += block) {
    size_t n = count - off < block ? count - off : block;
    if (all_reduce_block(comm, (char *)data + off * esize, n, type, op, err) != 0)
      return fimi_fail_wrap(err, "%s of %zu elements", what, count);
  }
  return 0;
}

int comm_all_reduce_f32(Communicator *comm, float *data, size_t count, CommOp op, FimiError *err) {
  return all_reduce(comm, data, count, ELEM_F32, op, err);
}

int comm_all_reduce_f64(Communicator *comm, double *data, size_t count, CommOp op, FimiError *err) {
  return all_reduce(comm, data, count, ELEM_F64, op, err);
}

// ----------------------------------------------------------------------------
// Data movement only: MPI's own collectives are deterministic here.

int comm_all_gather_f32(Communicator *comm, const float *shard, size_t shard_count, float *full, FimiError *err) {
  if (check_ready(comm, "all_gather", err) != 0) return -1;
  if (shard_count > (size_t)PTRDIFF_MAX / sizeof(float) / (size_t)comm->world)
    return fimi_fail(err, "all_gather: %zu floats per shard x %d ranks overflow", shard_count, comm->world);
  if (shard_count && (!full || !shard)) return fimi_fail(err, "all_gather: NULL buffer");
  size_t chunk = chunk_elems(comm, sizeof(float)) * (size_t)comm->world;  // per-rank message, like a reduction block
  if (shard_count <= chunk) {
    int rc = MPI_Allgather(shard, (int)shard_count, MPI_FLOAT, full, (int)shard_count, MPI_FLOAT, comm->mpi);
    return comm_check_mpi(rc, "MPI_Allgather", comm, err);
  }
  // Large shards: gather column chunks; a resized type places rank r's chunk
  // at r * shard_count + off in full.
  for (size_t off = 0; off < shard_count; off += chunk) {
    int len = (int)(shard_count - off < chunk ? shard_count - off : chunk);
    MPI_Datatype column, placed;
    int rc = MPI_Type_contiguous(len, MPI_FLOAT, &column);
    if (comm_check_mpi(rc, "MPI_Type_contiguous", comm, err) != 0) return -1;
    rc = MPI_Type_create_resized(column, 0, (MPI_Aint)(shard_count * sizeof(float)), &placed);
    MPI_Type_free(&column);
    if (comm_check_mpi(rc, "MPI_Type_create_resized", comm, err) != 0) return -1;
    rc = MPI_Type_commit(&placed);
    if (rc == MPI_SUCCESS) rc = MPI_Allgather(shard + off, len, MPI_FLOAT, full + off, 1, placed, comm->mpi);
    MPI_Type_free(&placed);
    if (comm_check_mpi(rc, "MPI_Allgather", comm, err) != 0) return -1;
  }
  return 0;
}

int comm_broadcast(Communicator *comm, void *data, size_t bytes, int root, FimiError *err) {
  if (check_ready(comm, "broadcast", err) != 0) return -1;
  if (root < 0 || root >= comm->world)
    return fimi_fail(err, "broadcast: root %d outside a world of %d", root, comm->world);
  if (bytes && !data) return fimi_fail(err, "broadcast: NULL buffer");
  size_t chunk = comm->chunk_bytes < (size_t)INT_MAX ? comm->chunk_bytes : (size_t)INT_MAX;
  if (chunk == 0) chunk = 1;
  for (size_t off = 0; off < bytes; off += chunk) {
    int len = (int)(bytes - off < chunk ? bytes - off : chunk);
    int rc = MPI_Bcast((char *)data + off, len, MPI_BYTE, root, comm->mpi);
    if (comm_check_mpi(rc, "MPI_Bcast", comm, err) != 0) return -1;
  }
  return 0;
}

int comm_barrier(Communicator *comm, FimiError *err) {
  if (check_ready(comm, "barrier", err) != 0) return -1;
  return comm_check_mpi(MPI_Barrier(comm->mpi), "MPI_Barrier", comm, err);
}

int comm_node_local_rank(Communicator *comm, int *local_rank, int *local_size, FimiError *err) {
  *local_rank = 0, *local_size = 1;
  if (check_ready(comm, "node_local_rank", err) != 0) return -1;
  MPI_Comm node = MPI_COMM_NULL;
  int rc = comm_check_mpi(MPI_Comm_split_type(comm->mpi, MPI_COMM_TYPE_SHARED, comm->rank, MPI_INFO_NULL, &node),
                          "MPI_Comm_split_type", comm, err);
  if (rc == 0) rc = comm_check_mpi(MPI_Comm_rank(node, local_rank), "MPI_Comm_rank", comm, err);
  if (rc == 0) rc = comm_check_mpi(MPI_Comm_size(node, local_size), "MPI_Comm_size", comm, err);
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  return rc;
}

// Lengths first (one uint64 per rank), then the bytes: one MPI_Allgatherv
// when they fit a message of chunk_bytes, else each rank broadcasts its piece
// in chunks (comm_broadcast), so any total works.
int comm_all_gather_bytes(Communicator *comm, const void *mine, size_t bytes, size_t *counts, void **all,
                          FimiError *err) {
  *all = NULL;
  if (check_ready(comm, "all_gather_bytes", err) != 0) return -1;
  if (bytes && !mine) return fimi_fail(err, "all_gather_bytes: NULL buffer");
  int world = comm->world;
  uint64_t *lengths = fimi_malloc((size_t)world * sizeof *lengths, err);
  if (!lengths) return -1;
  uint64_t own = bytes;
  int rc = MPI_Allgather(&own, 1, MPI_UINT64_T, lengths, 1, MPI_UINT64_T, comm->mpi);
  if (comm_check_mpi(rc, "MPI_Allgather", comm, err) != 0) {
    free(lengths);
    return -1;
  }
  size_t total = 0;
  for (int r = 0; r < world; r++) {
    if (lengths[r] > SIZE_MAX - total) {
      free(lengths);
      return fimi_fail(err, "all_gather_bytes: the ranks' lengths overflow");
    }
    counts[r] = (size_t)lengths[r];
    total += counts[r];
  }
  free(lengths);
  char *out = fimi_malloc(total ? total : 1, err);
  if (!out) return -1;
  size_t budget = comm->chunk_bytes < (size_t)INT_MAX ? comm->chunk_bytes : (size_t)INT_MAX;
  if (total <= budget) {
    for (int r = 0, off = 0; r < world; r++) {
      comm->counts[r] = (int)counts[r];
      comm->displs[r] = off;
      off += (int)counts[r];
    }
    rc = MPI_Allgatherv(mine, (int)bytes, MPI_BYTE, out, comm->counts, comm->displs, MPI_BYTE, comm->mpi);
    rc = comm_check_mpi(rc, "MPI_Allgatherv", comm, err);
  } else {
    rc = 0;
    size_t at = 0;
    for (int r = 0; rc == 0 && r < world; at += counts[r], r++) {
      if (r == comm->rank && bytes) memcpy(out + at, mine, bytes);
      rc = comm_broadcast(comm, out + at, counts[r], r, err);
    }
  }
  if (rc != 0) {
    free(out);
    return fimi_fail_wrap(err, "all_gather_bytes of %zu bytes", total);
  }
  *all = out;
  return 0;
}
