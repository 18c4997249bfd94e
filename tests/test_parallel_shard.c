// tests/test_parallel_shard.c: the ZeRO-3 shard arithmetic (parallel/shard.h),
// exhaustively on small sizes against brute-force per-element references:
// shards partition the flat buffer in rank order, padding sits only at the
// end, pieces and masks agree with an element-by-element walk, and bad input
// (world 0, overflow, ranges outside the buffer) is an error, not a crash.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/shard.h"
#include "test_util.h"

// Layout checks for one (numel, world): recomputes everything element-wise.
static void check_layout(size_t numel, int world) {
  ShardSpec spec;
  FimiError err = {0};
  CHECK(shard_spec_init(&spec, numel, world, &err) == 0, "init %zu/%d: %s", numel, world, err.message);
  size_t expect_shard = 0;
  while (expect_shard * (size_t)world < numel) expect_shard++;  // smallest s with s*world >= numel
  CHECK(spec.shard_size == expect_shard, "numel %zu world %d: shard %zu, expected %zu", numel, world,
        spec.shard_size, expect_shard);
  CHECK(spec.padded == expect_shard * (size_t)world, "padded %zu", spec.padded);
  size_t next = 0, total = 0;
  int seen_partial = 0;
  for (int r = 0; r < world; r++) {
    size_t b = shard_begin(&spec, r), n = shard_real_count(&spec, r);
    CHECK(b == next, "numel %zu world %d rank %d: begin %zu, expected %zu", numel, world, r, b, next);
    CHECK(n <= spec.shard_size, "count above shard size");
    // Padding only at the end: after the first non-full shard, all are empty.
    if (seen_partial) CHECK(n == 0, "numel %zu world %d rank %d: real elements after a padded shard", numel, world, r);
    if (n < spec.shard_size) seen_partial = 1;
    // Element-wise: flat index f is owned by f / shard_size.
    for (size_t f = b; f < b + n; f++) CHECK(f / spec.shard_size == (size_t)r, "owner of %zu", f);
    next = b + n;
    total += n;
  }
  CHECK(total == numel, "numel %zu world %d: real counts sum to %zu", numel, world, total);
}

// Random ranges (overlapping, empty, at the edges) and a brute-force walk.
static void check_pieces(size_t numel, int world, unsigned *seed) {
  ShardSpec spec;
  FimiError err = {0};
  shard_spec_init(&spec, numel, world, &err);
  enum { MAX_T = 6 };
  TensorRange ranges[MAX_T];
  uint8_t flags[MAX_T];
  int nt = 1 + (int)(rand_r(seed) % MAX_T);
  for (int t = 0; t < nt; t++) {
    size_t off = numel ? (size_t)rand_r(seed) % (numel + 1) : 0;
    size_t size = (size_t)rand_r(seed) % (numel - off + 1);
    ranges[t] = (TensorRange){.name = "t", .offset = off, .size = size};
    flags[t] = (uint8_t)(1 + t);
  }
  for (int r = 0; r < world; r++) {
    ShardPiece pieces[MAX_T];
    int count = -1;
    CHECK(shard_pieces(&spec, r, ranges, nt, pieces, &count, &err) == 0, "pieces: %s", err.message);
    size_t b = shard_begin(&spec, r), n = shard_real_count(&spec, r);
    // Each tensor's brute-force piece: the elements of [b, b+n) it covers.
    int k = 0;
    for (int t = 0; t < nt; t++) {
      size_t first = SIZE_MAX, cnt = 0;
      for (size_t f = b; f < b + n; f++)
        if (f >= ranges[t].offset && f < ranges[t].offset + ranges[t].size) {
          if (first == SIZE_MAX) first = f;
          cnt++;
        }
      if (cnt == 0) continue;
      CHECK(k < count, "numel %zu world %d rank %d: missing piece of tensor %d", numel, world, r, t);
      if (k >= count) return;
      ShardPiece p = pieces[k++];
      CHECK(p.tensor == t && p.count == cnt && p.shard_offset == first - b && p.tensor_offset == first - ranges[t].offset,
            "numel %zu world %d rank %d tensor %d: piece (%d, %zu, %zu, %zu) expected (%zu, %zu, %zu)", numel, world,
            r, t, p.tensor, p.tensor_offset, p.shard_offset, p.count, first - ranges[t].offset, first - b, cnt);
    }
    CHECK(k == count, "numel %zu world %d rank %d: %d pieces, expected %d", numel, world, r, count, k);
    // Mask: later ranges win, padding and uncovered elements get the fill.
    uint8_t mask[64], expect[64];
    CHECK(shard_fill_mask(&spec, r, ranges, flags, nt, 0xEE, mask, &err) == 0, "mask: %s", err.message);
    for (size_t i = 0; i < spec.shard_size; i++) {
      expect[i] = 0xEE;
      size_t f = b + i;
      if (i < n)
        for (int t = 0; t < nt; t++)
          if (f >= ranges[t].offset && f < ranges[t].offset + ranges[t].size) expect[i] = flags[t];
    }
    CHECK(memcmp(mask, expect, spec.shard_size) == 0, "numel %zu world %d rank %d: mask differs", numel, world, r);
  }
}

// A Gemma-like layer: which shard elements are norm weights (no decay).
static void check_layer_example(void) {
  const TensorRange layer[] = {
      {"input_layernorm.weight", 0, 8},  {"self_attn.q_proj.weight", 8, 64}, {"post_attention_layernorm.weight", 72, 8},
      {"mlp.down_proj.weight", 80, 128}, {"post_feedforward_layernorm.weight", 208, 8},
  };
  const uint8_t decay[] = {0, 1, 0, 1, 0};
  ShardSpec spec;
  FimiError err = {0};
  CHECK(shard_spec_init(&spec, 216, 5, &err) == 0, "init");
  CHECK(spec.shard_size == 44 && spec.padded == 220, "216 over 5: shard %zu padded %zu", spec.shard_size, spec.padded);
  size_t decayed = 0, real = 0;
  for (int r = 0; r < 5; r++) {
    uint8_t mask[44];
    shard_fill_mask(&spec, r, layer, decay, 5, 0, mask, &err);
    for (size_t i = 0; i < shard_real_count(&spec, r); i++) decayed += mask[i], real++;
  }
  CHECK(real == 216 && decayed == 192, "decayed %zu of %zu, expected 192 of 216", decayed, real);
  // Rank 1 holds [44, 88): end of q_proj and all of post_attention_layernorm and the start of down_proj.
  ShardPiece p[5];
  int n = 0;
  shard_pieces(&spec, 1, layer, 5, p, &n, &err);
  CHECK(n == 3, "rank 1: %d pieces", n);
  if (n == 3) {
    CHECK(p[0].tensor == 1 && p[0].tensor_offset == 36 && p[0].shard_offset == 0 && p[0].count == 28, "q_proj piece");
    CHECK(p[1].tensor == 2 && p[1].tensor_offset == 0 && p[1].shard_offset == 28 && p[1].count == 8, "norm piece");
    CHECK(p[2].tensor == 3 && p[2].tensor_offset == 0 && p[2].shard_offset == 36 && p[2].count == 8, "down piece");
  }
}

static void check_errors(void) {
  ShardSpec spec;
  FimiError err = {0};
  CHECK(shard_spec_init(&spec, 10, 0, &err) == -1 && strstr(err.message, "world"), "world 0: %s", err.message);
  CHECK(shard_spec_init(&spec, 10, -3, &err) == -1, "negative world");
  CHECK(shard_spec_init(&spec, SIZE_MAX, 2, &err) == -1 && strstr(err.message, "overflow"), "overflow: %s",
        err.message);
  CHECK(shard_spec_init(&spec, SIZE_MAX, 1, &err) == 0 && spec.shard_size == SIZE_MAX, "SIZE_MAX in one shard");
  CHECK(shard_spec_init(&spec, SIZE_MAX - 1, 2, &err) == 0 && spec.shard_size == SIZE_MAX / 2, "SIZE_MAX-1 in two");
  shard_spec_init(&spec, 100, 4, &err);
  ShardPiece p[2];
  int n;
  TensorRange outside = {"lm_head.weight", 90, 11};
  CHECK(shard_pieces(&spec, 0, &outside, 1, p, &n, &err) == -1 && strstr(err.message, "lm_head.weight"),
        "range outside: %s", err.message);
  TensorRange wraps = {"wrap", 1, SIZE_MAX};
  CHECK(shard_pieces(&spec, 0, &wraps, 1, p, &n, &err) == -1, "offset + size wraps");
  TensorRange ok = {"ok", 0, 100};
  CHECK(shard_pieces(&spec, 4, &ok, 1, p, &n, &err) == -1 && strstr(err.message, "rank 4"), "rank 4: %s",
        err.message);
  CHECK(shard_pieces(&spec, -1, &ok, 1, p, &n, &err) == -1, "rank -1");
  uint8_t mask[25], flag = 1;
  CHECK(shard_fill_mask(&spec, 0, &outside, &flag, 1, 0, mask, &err) == -1, "mask range outside");
}

int main(void) {
  unsigned seed = 12345;
  for (size_t numel = 0; numel <= 48; numel++)
    for (int world = 1; world <= 9; world++) {
      check_layout(numel, world);
      for (int rep = 0; rep < 8; rep++) check_pieces(numel, world, &seed);
    }
  check_layer_example();
  check_errors();
  TEST_MAIN_END();
}
