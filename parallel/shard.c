// parallel/shard.c: ZeRO-3 shard arithmetic (see shard.h). Pure size_t
// arithmetic; every sum and product that could wrap is checked first.
#include "parallel/shard.h"

#include <stdint.h>
#include <string.h>

int shard_spec_init(ShardSpec *spec, size_t numel, int world, FimiError *err) {
  memset(spec, 0, sizeof *spec);
  if (world < 1) return fimi_fail(err, "shard: world size must be >= 1, got %d", world);
  size_t w = (size_t)world;
  // ceil without numel + w - 1, which could wrap for numel near SIZE_MAX.
  size_t shard = numel / w + (numel % w != 0);
  if (shard != 0 && w > SIZE_MAX / shard)
    return fimi_fail(err, "shard: %zu elements in %d shards of %zu overflow size_t", numel, world, shard);
  spec->numel = numel;
  spec->world = world;
  spec->shard_size = shard;
  spec->padded = shard * w;
  return 0;
}

size_t shard_begin(const ShardSpec *spec, int rank) {
  size_t begin = (size_t)rank * spec->shard_size;  // <= padded: no overflow
  return begin < spec->numel ? begin : spec->numel;
}

size_t shard_real_count(const ShardSpec *spec, int rank) {
  size_t begin = shard_begin(spec, rank);
  size_t left = spec->numel - begin;
  return left < spec->shard_size ? left : spec->shard_size;
}

static int check_rank_and_ranges(const ShardSpec *spec, int rank, const TensorRange *ranges, int num_ranges,
                                 FimiError *err) {
  if (rank < 0 || rank >= spec->world)
    return fimi_fail(err, "shard: rank %d outside a world of %d", rank, spec->world);
  if (num_ranges < 0) return fimi_fail(err, "shard: negative number of tensor ranges (%d)", num_ranges);
  for (int t = 0; t < num_ranges; t++) {
    const TensorRange *r = &ranges[t];
    const char *name = r->name ? r->name : "(unnamed)";
    if (r->offset > spec->numel || r->size > spec->numel - r->offset)
      return fimi_fail(err, "shard: tensor %d \"%s\" [%zu, +%zu) lies outside the flat buffer of %zu elements", t,
                       name, r->offset, r->size, spec->numel);
  }
  return 0;
}

// Intersection of [a0, a1) with [b0, b1); returns its length and start.
static size_t intersect(size_t a0, size_t a1, size_t b0, size_t b1, size_t *start) {
  size_t lo = a0 > b0 ? a0 : b0;
  size_t hi = a1 < b1 ? a1 : b1;
  *start = lo;
  return hi > lo ? hi - lo : 0;
}

int shard_pieces(const ShardSpec *spec, int rank, const TensorRange *ranges, int num_ranges, ShardPiece *out,
                 int *count, FimiError *err) {
  *count = 0;
  if (check_rank_and_ranges(spec, rank, ranges, num_ranges, err) != 0) return -1;
  size_t begin = shard_begin(spec, rank);
  size_t end = begin + shard_real_count(spec, rank);
  for (int t = 0; t < num_ranges; t++) {
    size_t start;
    size_t n = intersect(ranges[t].offset, ranges[t].offset + ranges[t].size, begin, end, &start);
    if (n == 0) continue;
    out[*count] = (ShardPiece){.tensor = t, .tensor_offset = start - ranges[t].offset,
                               .shard_offset = start - begin, .count = n};
    (*count)++;
  }
  return 0;
}

int shard_fill_mask(const ShardSpec *spec, int rank, const TensorRange *ranges, const uint8_t *flags, int num_ranges,
                    uint8_t fill, uint8_t *mask, FimiError *err) {
  if (check_rank_and_ranges(spec, rank, ranges, num_ranges, err) != 0) return -1;
  memset(mask, fill, spec->shard_size);
  size_t begin = shard_begin(spec, rank);
  size_t end = begin + shard_real_count(spec, rank);
  for (int t = 0; t < num_ranges; t++) {
    size_t start;
    size_t n = intersect(ranges[t].offset, ranges[t].offset + ranges[t].size, begin, end, &start);
    if (n) memset(mask + (start - begin), flags[t], n);
  }
  return 0;
}
