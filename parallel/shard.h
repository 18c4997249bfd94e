// parallel/shard.h: the ZeRO-3 sharding arithmetic (pure functions, no MPI).
// Defines ShardSpec (a flat buffer of numel elements split into `world`
// equal padded shards), the begin/count of each rank's real elements,
// TensorRange / ShardPiece and shard_pieces(), which maps named tensor
// ranges of the flat buffer onto the part of them a rank's shard holds (so the
// optimizer knows which of its shard elements are, e.g., norm weights that get
// no weight decay), and shard_fill_mask(), the same as a per-element mask.
//
// Layout (docs/distributed.md): shard_size = ceil(numel / world); rank r owns
// flat elements [r*shard_size, min((r+1)*shard_size, numel)); the remaining
// slots of its shard, at its end, are padding (always 0 in gathers). Padding
// is therefore at the end of the last shards only, and a rank may hold no
// real element at all (numel = 5, world = 4: shard 2, rank 3 has none).
#ifndef FIMI_PARALLEL_SHARD_H
#define FIMI_PARALLEL_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct ShardSpec {
  size_t numel;       // real elements of the flat buffer
  int world;          // number of shards
  size_t shard_size;  // ceil(numel / world): elements per shard, padding included
  size_t padded;      // shard_size * world: length of the gathered buffer
} ShardSpec;

// Fails when world < 1 or shard_size * world overflows size_t.
int shard_spec_init(ShardSpec *spec, size_t numel, int world, FimiError *err);
// First flat index owned by rank (== numel when it owns no real element).
size_t shard_begin(const ShardSpec *spec, int rank);
// Real (non-padding) elements in rank's shard: 0 <= count <= shard_size.
size_t shard_real_count(const ShardSpec *spec, int rank);

// One named tensor inside the flat buffer: elements [offset, offset + size).
typedef struct TensorRange {
  const char *name;
  size_t offset;
  size_t size;
} TensorRange;

// The part of tensor `tensor` (an index into the ranges array) in a shard:
// `count` elements starting at `tensor_offset` within the tensor, which sit at
// `shard_offset` within the rank's shard.
typedef struct ShardPiece {
  int tensor;
  size_t tensor_offset;
  size_t shard_offset;
  size_t count;
} ShardPiece;

// Writes the non-empty intersections of the ranges with rank's shard to out
// (capacity num_ranges suffices: a tensor meets a shard in at most one
// contiguous piece), in the order of the ranges, and their number to *count.
// Every range must lie inside [0, numel); an invalid one is an error naming it.
int shard_pieces(const ShardSpec *spec, int rank, const TensorRange *ranges, int num_ranges, ShardPiece *out,
                 int *count, FimiError *err);

// mask[i] (i < shard_size) = flags[t] for the tensor t covering shard element
// i, `fill` for padding and for elements no range covers. Later ranges win
// where ranges overlap. Validates like shard_pieces.
int shard_fill_mask(const ShardSpec *spec, int rank, const TensorRange *ranges, const uint8_t *flags, int num_ranges,
                    uint8_t fill, uint8_t *mask, FimiError *err);

#endif
