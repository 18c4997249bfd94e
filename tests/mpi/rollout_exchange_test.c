// tests/mpi/rollout_exchange_test.c: splitting a call's rollouts across
// train ranks and exchanging them (rl/grpo.h: grpo_rollout_share,
// grpo_rollouts_all_gather; rl/rollout.h: the packed form). Run by
// tests/mpi/mpi_tests.sh at -np 1, 2, 3 and 4.
// - grpo_rollout_share (no MPI): for many (n, group, world) the shares cover
//   0..n-1 once, in rank order, differ by at most one unit, and are whole
//   groups when there are at least `world` groups.
// - pack / unpack: a round trip keeps every field; truncated records and bad
//   headers are refused.
// - the exchange: each rank fills only its share with synthetic rollouts
//   (lengths 0 to 300, every end reason, failed ones with error texts up to
//   the field's size) and after grpo_rollouts_all_gather every rank holds all
//   of them, field for field, and every rank's work; with tiny message
//   chunks (the broadcast path) too. A rank that reports a failure makes
//   every rank fail, naming it.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"
#include "rl/grpo.h"
#include "rl/rollout.h"
#include "../test_util.h"

static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Rollout j of call `salt`, the same on every rank.
static void make_rollout(uint64_t salt, int j, Rollout *r) {
  uint64_t h = mix64(salt * 7919 + (uint64_t)j);
  memset(r, 0, sizeof *r);
  r->task = (int)(h % 97);
  r->group = j / 3;
  r->env_seed = mix64(h);
  r->end = (RolloutEnd)(h % ROLLOUT_END_COUNT);
  r->len = r->cap = j % 5 == 4 ? 0 : (int)(mix64(h + 1) % 301);
  r->prompt_len = r->len / 3;
  r->turns = (int)(h >> 8 & 15);
  r->tool_calls = (int)(h >> 12 & 7);
  r->tool_errors = (int)(h >> 15 & 3);
  r->malformed = (int)(h >> 17 & 3);
  r->reward.seq = (double)(h >> 20 & 1023) / 1023.0;
  r->reward.strict_total = -r->reward.seq / 3.0;
  r->reward.num_gold = (int)(h >> 30 & 31);
  r->reward.end = TASK_END_TRANSFER;
  if (r->end == ROLLOUT_END_FAILED) {
    size_t n = j % 2 ? sizeof r->error - 1 : (size_t)(h % 200);
    for (size_t i = 0; i < n; i++) r->error[i] = (char)('a' + (mix64(h + i) % 26));
  }
  r->ids = malloc((size_t)r->len * sizeof *r->ids + 4);
  r->mask = malloc((size_t)r->len + 1);
  r->logp = malloc((size_t)r->len * sizeof *r->logp + 4);
  for (int t = 0; t < r->len; t++) {
    uint64_t v = mix64(h + 100 + (uint64_t)t);
    r->ids[t] = (int32_t)(v % 262144);
    r->mask[t] = t >= r->prompt_len && (v >> 20 & 1);
    r->logp[t] = r->mask[t] ? -(float)(v >> 24 & 0xffff) / 4096.0f : 0.0f;
    r->sampled += r->mask[t];
  }
}

static int same_rollout(const Rollout *a, const Rollout *b) {
  size_t n = (size_t)a->len;
  return a->task == b->task && a->group == b->group && a->env_seed == b->env_seed && a->len == b->len &&
         a->prompt_len == b->prompt_len && a->end == b->end && a->turns == b->turns &&
         a->tool_calls == b->tool_calls && a->tool_errors == b->tool_errors && a->malformed == b->malformed &&
         a->sampled == b->sampled && !strcmp(a->error, b->error) &&
         !memcmp(&a->reward, &b->reward, sizeof a->reward) && (!n || !memcmp(a->ids, b->ids, n * sizeof *a->ids)) &&
         (!n || !memcmp(a->mask, b->mask, n)) && (!n || !memcmp(a->logp, b->logp, n * sizeof *a->logp));
}

static void check_shares(void) {
  for (int world = 1; world <= 9; world++)
    for (int group = 1; group <= 5; group++)
      for (int n = 0; n <= 40; n++) {
        int next = 0, lo = 1 << 30, hi = -1;
        int unit = n / group >= world ? group : 1;
        for (int r = 0; r < world; r++) {
          int first = -1, count = -1;
          grpo_rollout_share(n, group, r, world, &first, &count);
          CHECK(first == next && count >= 0, "share n %d group %d world %d rank %d: [%d, +%d) after %d", n, group,
                world, r, first, count, next);
          if (unit == group && first + count < n)
            CHECK(count % group == 0 && first % group == 0, "share n %d group %d world %d rank %d: cuts a group",
                  n, group, world, r);
          int units = (count + unit - 1) / unit;
          lo = units < lo ? units : lo;
          hi = units > hi ? units : hi;
          next = first + count;
        }
        CHECK(next == n && hi - lo <= 1, "share n %d group %d world %d: covers %d, units %d..%d", n, group, world,
              next, lo, hi);
      }
}

static void check_pack(void) {
  FimiError err = {0};
  for (int j = 0; j < 40; j++) {
    Rollout a, b = {0};
    make_rollout(5, j, &a);
    size_t size = rollout_packed_size(&a), used = 0;
    uint8_t *buf = malloc(size + 1);
    rollout_pack(&a, buf);
    CHECK(rollout_unpack(buf, size, &b, &used, &err) == 0 && used == size && same_rollout(&a, &b),
          "rollout %d: round trip (%s)", j, err.message);
    rollout_free(&b);
    CHECK(rollout_unpack(buf, size - 1, &b, &used, &err) == -1 && strstr(err.message, "packed rollout"),
          "rollout %d: a record one byte short was accepted", j);
    buf[4 * 2] = 0xff, buf[4 * 2 + 1] = 0xff, buf[4 * 2 + 2] = 0xff, buf[4 * 2 + 3] = 0xff;  // len = -1
    CHECK(rollout_unpack(buf, size, &b, &used, &err) == -1 && strstr(err.message, "bad header"),
          "rollout %d: a negative length was accepted (%s)", j, err.message);
    free(buf);
    rollout_free(&a);
  }
}

// One call of n rollouts in groups of `group`: every rank fills its share,
// exchanges, and compares everything with the expected set.
static void check_exchange(Communicator *c, int n, int group, uint64_t salt) {
  FimiError err = {0};
  Rollout *out = calloc((size_t)n + 1, sizeof *out);
  int first = 0, count = 0;
  grpo_rollout_share(n, group, c->rank, c->world, &first, &count);
  for (int j = first; j < first + count; j++) make_rollout(salt, j, &out[j]);
  GrpoRankWork mine = {count, 1000 + c->rank, 7 * (int64_t)count}, *all = calloc((size_t)c->world, sizeof *all);
  CHECK(grpo_rollouts_all_gather(c, out, n, group, 1, &mine, all, &err) == 0, "exchange n %d: %s", n, err.message);
  int bad = 0;
  for (int j = 0; j < n; j++) {
    Rollout want;
    make_rollout(salt, j, &want);
    bad += !same_rollout(&out[j], &want);
    rollout_free(&want);
  }
  CHECK(bad == 0, "exchange n %d group %d world %d (chunk %zu): %d rollouts differ", n, group, c->world,
        c->chunk_bytes, bad);
  for (int q = 0; q < c->world; q++) {
    int qf = 0, qc = 0;
    grpo_rollout_share(n, group, q, c->world, &qf, &qc);
    CHECK(all[q].rollouts == qc && all[q].prefill_tokens == 1000 + q && all[q].decode_tokens == 7 * (int64_t)qc,
          "exchange n %d: rank %d's work", n, q);
  }
  for (int j = 0; j < n; j++) rollout_free(&out[j]);
  free(out);
  free(all);
}

// The last rank reports a failure: every rank's call fails; the others name it.
static void check_failure(Communicator *c) {
  FimiError err = {0};
  int n = 8, group = 2, first = 0, count = 0, failing = c->world - 1;
  Rollout *out = calloc((size_t)n, sizeof *out);
  grpo_rollout_share(n, group, c->rank, c->world, &first, &count);
  for (int j = first; j < first + count; j++) make_rollout(3, j, &out[j]);
  GrpoRankWork mine = {count, 0, 0}, *all = calloc((size_t)c->world, sizeof *all);
  int rc = grpo_rollouts_all_gather(c, out, n, group, c->rank != failing, &mine, all, &err);
  char want[64];
  snprintf(want, sizeof want, "train rank %d failed its rollouts", failing);
  CHECK(rc == -1 && strstr(err.message, want), "rank %d with rank %d failing: rc %d, \"%s\"", c->rank, failing, rc,
        err.message);
  for (int j = 0; j < n; j++) rollout_free(&out[j]);
  free(out);
  free(all);
  CHECK(comm_barrier(c, &err) == 0, "barrier after a failed exchange: %s", err.message);
}

int main(int argc, char **argv) {
  FimiError err = {0};
  if (comm_mpi_init(&argc, &argv, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  Communicator c;
  if (comm_init(&c, MPI_COMM_WORLD, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  if (c.rank == 0) {
    check_shares();
    check_pack();
  }
  static const int calls[][2] = {{0, 4}, {1, 1}, {3, 1}, {8, 4}, {64, 4}, {10, 5}, {37, 1}};
  for (int chunk = 0; chunk < 2; chunk++) {
    c.chunk_bytes = chunk ? 100 : COMM_DEFAULT_CHUNK_BYTES;  // tiny: the per-rank broadcasts
    for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++)
      check_exchange(&c, calls[k][0], calls[k][1], 11 + k);
  }
  c.chunk_bytes = COMM_DEFAULT_CHUNK_BYTES;
  if (c.world > 1) check_failure(&c);
  // A failure on any rank fails the run.
  double failed = test_failures;
  comm_all_reduce_f64(&c, &failed, 1, COMM_MAX, &err);
  if (c.rank == 0) printf("exchange at world %d: ", c.world);
  comm_free(&c);
  comm_mpi_finalize(&err);
  if (failed > 0 && test_failures == 0) test_failures = 1;
  TEST_MAIN_END();
}
