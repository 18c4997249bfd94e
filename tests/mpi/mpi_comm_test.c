// tests/mpi/mpi_comm_test.c: the communicator and rank roles under mpirun
// (driven by tests/mpi/mpi_tests.sh at -np 1, 2, 4 and run once without
// mpirun as an Open MPI singleton). Modes:
//   collectives PREFIX  all_gather / reduce_scatter / all_reduce / broadcast /
//                       all_gather_bytes vs a serial float64 reference; default and tiny chunks
//                       give the same bits; every rank writes its results to
//                       PREFIX.rankR so two runs can be compared bitwise.
//   global FILE         one global gradient sum (4 micro-batches spread over
//                       the ranks) by all_reduce and by the ZeRO path
//                       (reduce_scatter + all_gather); rank 0 writes it.
//   compare TOL A B...  (no MPI) max relative difference of the dumps A, B...
//   roles               role split for every env_ranks and explicit lists.
//   roles-invalid       invalid layouts fail with clear errors on every rank.
//   errors              MPI errors come back as FimiError, bad args rejected.
//   bench [N]           (not a test) seconds per collective on N floats, fimi's
//                       fixed-order all_reduce next to MPI_Allreduce.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "parallel/comm.h"
#include "parallel/roles.h"
#include "parallel/shard.h"
#include "../test_util.h"

// ----------------------------------------------------------------------------
// Deterministic test data: a value per (salt, rank, index), independent of
// the world size, so every rank can compute the serial reference.

static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// In [-1, 1) times a scale in {1, 8, 1/8} so magnitudes differ.
static double test_value(uint64_t salt, int rank, size_t i) {
  uint64_t h = mix64(salt * 1000003ull ^ mix64((uint64_t)rank * 7919ull ^ mix64(i)));
  double u = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  static const double scale[3] = {1.0, 8.0, 0.125};
  return u * scale[h % 3];
}

static float value_f32(uint64_t salt, int rank, size_t i) { return (float)test_value(salt, rank, i); }

// Serial float64 reference of op over ranks of f(rank).
static double reference(const double *per_rank, int world, CommOp op) {
  double acc = per_rank[0];
  for (int r = 1; r < world; r++) acc = op == COMM_MAX ? (per_rank[r] > acc ? per_rank[r] : acc) : acc + per_rank[r];
  return op == COMM_MEAN ? acc / world : acc;
}

static void check_rel(double got, double want, double tol, const char *what, size_t i) {
  double scale = fabs(want) > 1e-30 ? fabs(want) : 1e-30;
  CHECK(fabs(got - want) <= tol * scale, "%s [%zu]: got %.9g want %.9g (rel %.3g)", what, i, got, want,
        fabs(got - want) / scale);
}

static const char *op_name(CommOp op) { return op == COMM_SUM ? "sum" : op == COMM_MEAN ? "mean" : "max"; }

static void dump(FILE *f, const void *data, size_t bytes) {
  if (f && bytes) fwrite(data, 1, bytes, f);
}

// Every rank must hold the same bytes as rank 0.
static void check_same_on_all_ranks(Communicator *c, const void *data, size_t bytes, const char *what) {
  FimiError err = {0};
  char *copy = malloc(bytes + 1);
  memcpy(copy, data, bytes);
  CHECK(comm_broadcast(c, copy, bytes, 0, &err) == 0, "broadcast: %s", err.message);
  CHECK(memcmp(copy, data, bytes) == 0, "%s: rank %d differs from rank 0", what, c->rank);
  free(copy);
}

// ----------------------------------------------------------------------------
// collectives

static void test_all_gather(Communicator *c, size_t shard_count, FILE *out) {
  FimiError err = {0};
  size_t full_count = shard_count * (size_t)c->world;
  float *shard = malloc(shard_count * sizeof(float) + 4), *full = malloc(full_count * sizeof(float) + 4);
  for (size_t i = 0; i < shard_count; i++) shard[i] = value_f32(1, c->rank, i);
  for (size_t i = 0; i < full_count; i++) full[i] = NAN;  // poison
  CHECK(comm_all_gather_f32(c, shard, shard_count, full, &err) == 0, "all_gather: %s", err.message);
  size_t bad = 0;
  for (int r = 0; r < c->world; r++)
    for (size_t i = 0; i < shard_count; i++) bad += full[(size_t)r * shard_count + i] != value_f32(1, r, i);
  CHECK(bad == 0, "all_gather of %zu per shard: %zu wrong elements", shard_count, bad);
  dump(out, full, full_count * sizeof(float));
  free(shard);
  free(full);
}

static void test_reduce_scatter(Communicator *c, size_t shard_count, CommOp op, FILE *out) {
  FimiError err = {0};
  int W = c->world;
  size_t full_count = shard_count * (size_t)W;
  float *full = malloc(full_count * sizeof(float) + 4), *shard = malloc(shard_count * sizeof(float) + 4);
  double *per_rank = malloc(sizeof(double) * (size_t)W);
  for (size_t j = 0; j < full_count; j++) full[j] = value_f32(2, c->rank, j);
  for (size_t i = 0; i < shard_count; i++) shard[i] = NAN;
  CHECK(comm_reduce_scatter_f32(c, full, shard_count, shard, op, &err) == 0, "reduce_scatter: %s", err.message);
  for (size_t i = 0; i < shard_count; i++) {
    for (int r = 0; r < W; r++) per_rank[r] = value_f32(2, r, (size_t)c->rank * shard_count + i);
    check_rel(shard[i], reference(per_rank, W, op), 1e-6, op_name(op), i);
    if (test_failures > 20) break;
  }
  // In place (the shard is this rank's slice of full): the same bits.
  float *mine = full + (size_t)c->rank * shard_count;
  CHECK(comm_reduce_scatter_f32(c, full, shard_count, mine, op, &err) == 0, "in place: %s", err.message);
  CHECK(shard_count == 0 || memcmp(mine, shard, shard_count * sizeof(float)) == 0, "in-place reduce_scatter differs");
  dump(out, shard, shard_count * sizeof(float));
  free(full);
  free(shard);
  free(per_rank);
}

static void test_all_reduce_f32(Communicator *c, size_t n, CommOp op, FILE *out) {
  FimiError err = {0};
  float *data = malloc(n * sizeof(float) + 4);
  double *per_rank = malloc(sizeof(double) * (size_t)c->world);
  for (size_t i = 0; i < n; i++) data[i] = value_f32(3, c->rank, i);
  if (op == COMM_MAX && n > 2) data[n / 2] = c->rank == c->world - 1 ? NAN : data[n / 2];  // NaN must win
  CHECK(comm_all_reduce_f32(c, data, n, op, &err) == 0, "all_reduce f32: %s", err.message);
  for (size_t i = 0; i < n; i++) {
    if (op == COMM_MAX && n > 2 && i == n / 2) {
      CHECK(data[i] != data[i], "max with a NaN input gave %g", data[i]);
      continue;
    }
    for (int r = 0; r < c->world; r++) per_rank[r] = value_f32(3, r, i);
    check_rel(data[i], reference(per_rank, c->world, op), 1e-6, op_name(op), i);
    if (test_failures > 20) break;
  }
  check_same_on_all_ranks(c, data, n * sizeof(float), "all_reduce f32");
  dump(out, data, n * sizeof(float));
  free(data);
  free(per_rank);
}

static void test_all_reduce_f64(Communicator *c, size_t n, CommOp op, FILE *out) {
  FimiError err = {0};
  double *data = malloc(n * sizeof(double) + 8), *per_rank = malloc(sizeof(double) * (size_t)c->world);
  for (size_t i = 0; i < n; i++) data[i] = test_value(4, c->rank, i) * 1e3;
  CHECK(comm_all_reduce_f64(c, data, n, op, &err) == 0, "all_reduce f64: %s", err.message);
  for (size_t i = 0; i < n; i++) {
    for (int r = 0; r < c->world; r++) per_rank[r] = test_value(4, r, i) * 1e3;
    check_rel(data[i], reference(per_rank, c->world, op), 1e-12, op_name(op), i);
    if (test_failures > 20) break;
  }
  check_same_on_all_ranks(c, data, n * sizeof(double), "all_reduce f64");
  dump(out, data, n * sizeof(double));
  free(data);
  free(per_rank);
}

static void test_broadcast(Communicator *c, size_t bytes, int root, FILE *out) {
  FimiError err = {0};
  unsigned char *buf = malloc(bytes + 1);
  for (size_t i = 0; i < bytes; i++) buf[i] = c->rank == root ? (unsigned char)mix64(i + 17 * (size_t)root) : 0xAB;
  CHECK(comm_broadcast(c, buf, bytes, root, &err) == 0, "broadcast: %s", err.message);
  size_t bad = 0;
  for (size_t i = 0; i < bytes; i++) bad += buf[i] != (unsigned char)mix64(i + 17 * (size_t)root);
  CHECK(bad == 0, "broadcast of %zu bytes from %d: %zu wrong", bytes, root, bad);
  dump(out, buf, bytes);
  free(buf);
}

// Rank r contributes (base * (r + 1)) % 5003 bytes (rank 1 none when base is
// odd); everyone must get every rank's bytes in rank order.
static void test_all_gather_bytes(Communicator *c, size_t base, FILE *out) {
  FimiError err = {0};
  int W = c->world;
  size_t mine = c->rank == 1 && base % 2 ? 0 : base * (size_t)(c->rank + 1) % 5003;
  unsigned char *buf = malloc(mine + 1);
  for (size_t i = 0; i < mine; i++) buf[i] = (unsigned char)mix64(i * 31 + (size_t)c->rank);
  size_t *counts = malloc((size_t)W * sizeof *counts);
  void *all = NULL;
  CHECK(comm_all_gather_bytes(c, buf, mine, counts, &all, &err) == 0 && all, "all_gather_bytes: %s", err.message);
  size_t at = 0, bad = 0;
  for (int r = 0; all && r < W; r++) {
    size_t want = r == 1 && base % 2 ? 0 : base * (size_t)(r + 1) % 5003;
    CHECK(counts[r] == want, "all_gather_bytes: rank %d's count %zu, want %zu", r, counts[r], want);
    for (size_t i = 0; i < want && counts[r] == want; i++)
      bad += ((unsigned char *)all)[at + i] != (unsigned char)mix64(i * 31 + (size_t)r);
    at += counts[r];
  }
  CHECK(bad == 0, "all_gather_bytes (base %zu): %zu wrong bytes", base, bad);
  if (all) dump(out, all, at);
  free(all);
  free(counts);
  free(buf);
}

static void run_collectives(Communicator *c, FILE *out, int small_only) {
  static const size_t shards[] = {0, 1, 7, 1000, 65536};
  static const size_t counts[] = {0, 1, 3, 1001, 262147};
  const CommOp ops[] = {COMM_SUM, COMM_MEAN, COMM_MAX};
  for (int k = 0; k < 5; k++) {
    if (small_only && shards[k] > 1000) continue;
    test_all_gather(c, shards[k], out);
    for (int o = 0; o < 3; o++) test_reduce_scatter(c, shards[k], ops[o], out);
    for (int o = 0; o < 3; o++) test_all_reduce_f32(c, counts[k], ops[o], out);
    for (int o = 0; o < 3; o++) test_all_reduce_f64(c, counts[k], ops[o], out);
    for (int root = 0; root < c->world; root++) test_broadcast(c, counts[k] * 3, root, out);
    test_all_gather_bytes(c, counts[k] % 5003 + (size_t)k, out);
  }
  FimiError err = {0};
  CHECK(comm_barrier(c, &err) == 0, "barrier: %s", err.message);
}

static int mode_collectives(Communicator *c, const char *prefix) {
  char path[4096];
  snprintf(path, sizeof path, "%s.rank%d", prefix, c->rank);
  FILE *out = fopen(path, "wb");
  CHECK(out != NULL, "cannot write %s", path);
  run_collectives(c, out, 0);
  if (out) fclose(out);
  // The chunked paths (tiny messages, many rounds) must give the same bits
  // as one round: the order of additions depends on ranks only.
  snprintf(path, sizeof path, "%s.small.rank%d", prefix, c->rank);
  char path_tiny[4096];
  snprintf(path_tiny, sizeof path_tiny, "%s.tiny.rank%d", prefix, c->rank);
  FILE *a = fopen(path, "wb"), *b = fopen(path_tiny, "wb");
  run_collectives(c, a, 1);
  c->chunk_bytes = 40;  // 10 floats / 5 doubles per round over all ranks
  run_collectives(c, b, 1);
  c->chunk_bytes = COMM_DEFAULT_CHUNK_BYTES;
  fclose(a);
  fclose(b);
  FimiError err = {0};
  size_t na = 0, nb = 0;
  char *da = file_read_all(path, (size_t)1 << 30, &na, &err), *db = file_read_all(path_tiny, (size_t)1 << 30, &nb, &err);
  CHECK(da && db && na == nb && na > 0 && memcmp(da, db, na) == 0, "tiny chunks change the results (%zu vs %zu bytes)",
        na, nb);
  free(da);
  free(db);
  remove(path);
  remove(path_tiny);
  return 0;
}

// ----------------------------------------------------------------------------
// global: the same reduction at any world size.

#define GLOBAL_N 10007
#define GLOBAL_MICRO 4

static int mode_global(Communicator *c, const char *path) {
  FimiError err = {0};
  ShardSpec spec;
  CHECK(shard_spec_init(&spec, GLOBAL_N, c->world, &err) == 0, "%s", err.message);
  float *grad = calloc(spec.padded, sizeof(float)), *via_allreduce = calloc(GLOBAL_N, sizeof(float));
  float *shard = calloc(spec.shard_size + 1, sizeof(float)), *gathered = calloc(spec.padded, sizeof(float));
  double loss = 0;
  // Micro-batch k is processed by rank k % world; a rank sums its own in k order.
  for (int k = c->rank; k < GLOBAL_MICRO; k += c->world) {
    for (size_t i = 0; i < GLOBAL_N; i++) grad[i] += value_f32(5, k, i);
    loss += test_value(6, k, 0);
  }
  memcpy(via_allreduce, grad, GLOBAL_N * sizeof(float));
  CHECK(comm_all_reduce_f32(c, via_allreduce, GLOBAL_N, COMM_SUM, &err) == 0, "%s", err.message);
  CHECK(comm_all_reduce_f64(c, &loss, 1, COMM_SUM, &err) == 0, "%s", err.message);
  // ZeRO path: reduce-scatter into the shard, all-gather the shards.
  CHECK(comm_reduce_scatter_f32(c, grad, spec.shard_size, shard, COMM_SUM, &err) == 0, "%s", err.message);
  CHECK(comm_all_gather_f32(c, shard, spec.shard_size, gathered, &err) == 0, "%s", err.message);
  CHECK(memcmp(gathered, via_allreduce, GLOBAL_N * sizeof(float)) == 0, "ZeRO path differs from all_reduce");
  for (size_t i = GLOBAL_N; i < spec.padded; i++) CHECK(gathered[i] == 0, "padding %zu not zero", i);
  double ref_loss = 0;
  for (int k = 0; k < GLOBAL_MICRO; k++) {
    ref_loss += test_value(6, k, 0);
  }
  check_rel(loss, ref_loss, 1e-12, "loss", 0);
  double *got = malloc(GLOBAL_N * sizeof(double)), *want = malloc(GLOBAL_N * sizeof(double));
  for (size_t i = 0; i < GLOBAL_N; i++) {
    want[i] = 0;
    for (int k = 0; k < GLOBAL_MICRO; k++) want[i] += value_f32(5, k, i);
    got[i] = via_allreduce[i];
  }
  double rel = max_rel_error(got, want, GLOBAL_N);
  CHECK(rel <= 1e-6, "global sum vs float64 reference: rel %.3g", rel);
  if (c->rank == 0) {
    printf("world %d: global sum rel. error vs float64 reference %.3g\n", c->world, rel);
    CHECK(file_write_atomic(path, via_allreduce, GLOBAL_N * sizeof(float), &err) == 0, "%s", err.message);
  }
  free(grad), free(via_allreduce), free(shard), free(gathered), free(got), free(want);
  return 0;
}

static int mode_compare(int argc, char **argv) {
  double tol = atof(argv[2]);
  FimiError err = {0};
  size_t n0 = 0;
  char *base = file_read_all(argv[3], (size_t)1 << 30, &n0, &err);
  CHECK(base && n0 == GLOBAL_N * sizeof(float), "%s: %s", argv[3], err.message);
  if (!base) TEST_MAIN_END();
  double *a = malloc(GLOBAL_N * sizeof(double)), *b = malloc(GLOBAL_N * sizeof(double));
  for (size_t i = 0; i < GLOBAL_N; i++) a[i] = ((float *)base)[i];
  for (int k = 4; k < argc; k++) {
    size_t n = 0;
    char *other = file_read_all(argv[k], (size_t)1 << 30, &n, &err);
    CHECK(other && n == n0, "%s: %s", argv[k], err.message);
    if (!other || n != n0) continue;
    for (size_t i = 0; i < GLOBAL_N; i++) b[i] = ((float *)other)[i];
    double rel = max_rel_error(b, a, GLOBAL_N);
    printf("%s vs %s: max rel. difference %.3g (%s)\n", argv[k], argv[3], rel,
           memcmp(other, base, n0) ? "not bitwise equal" : "bitwise equal");
    CHECK(rel <= tol, "%s vs %s: rel %.3g > %g", argv[k], argv[3], rel, tol);
    free(other);
  }
  free(base), free(a), free(b);
  TEST_MAIN_END();
}

// ----------------------------------------------------------------------------
// roles

// Independent statement of the pairing rule, checked against the layout.
static void check_pairing(const RankLayout *L) {
  int T = L->num_train, E = L->num_env;
  int *partners = malloc(sizeof(int) * (size_t)L->world + 4);
  for (int r = 0; r < L->world; r++) {
    int n = rank_layout_partners(L, r, partners);
    int t = L->role_index[r];
    if (E == 0) {
      CHECK(n == 0, "no env ranks but %d partners", n);
      continue;
    }
    if (L->role[r] == ROLE_TRAIN) {
      // E <= T: exactly env t % E. E > T: envs t, t + T, ...
      int expect = E <= T ? 1 : (E - t + T - 1) / T;
      CHECK(n == expect, "world %d T %d E %d: train %d has %d env partners, expected %d", L->world, T, E, t, n, expect);
      for (int k = 0; k < n; k++) {
        int e = L->role_index[partners[k]];
        CHECK(L->role[partners[k]] == ROLE_ENV, "partner not an env rank");
        CHECK(E <= T ? e == t % E : e % T == t, "train %d paired with env %d", t, e);
        CHECK(k == 0 || partners[k] > partners[k - 1], "partners not increasing");
      }
    } else {
      int expect = E <= T ? (T - t + E - 1) / E : 1;
      CHECK(n == expect, "world %d T %d E %d: env %d serves %d trains, expected %d", L->world, T, E, t, n, expect);
      for (int k = 0; k < n; k++) CHECK(L->role[partners[k]] == ROLE_TRAIN, "env partner not a train rank");
    }
  }
  free(partners);
}

static void check_layout_pure(void) {
  FimiError err = {0};
  for (int world = 1; world <= 12; world++)
    for (int env = 0; env < world; env++) {
      RankLayout L;
      CHECK(rank_layout_build(&L, world, env, NULL, &err) == 0, "world %d env %d: %s", world, env, err.message);
      CHECK(L.num_train == world - env && L.num_env == env, "counts");
      for (int r = 0; r < world; r++) {
        RankRole want = r >= world - env ? ROLE_ENV : ROLE_TRAIN;
        CHECK(L.role[r] == want, "world %d env %d rank %d: role %s", world, env, r, rank_role_name(L.role[r]));
        CHECK(L.role_index[r] == (want == ROLE_ENV ? r - (world - env) : r), "index of rank %d", r);
      }
      check_pairing(&L);
      rank_layout_free(&L);
    }
  RankLayout L;
  CHECK(rank_layout_build(&L, 6, 0, " env , train*3,env* 1 ,train", &err) == 0, "explicit list: %s", err.message);
  if (L.world == 6) {
    static const RankRole want[6] = {ROLE_ENV, ROLE_TRAIN, ROLE_TRAIN, ROLE_TRAIN, ROLE_ENV, ROLE_TRAIN};
    for (int r = 0; r < 6; r++) CHECK(L.role[r] == want[r], "explicit list rank %d", r);
    CHECK(L.env_world_rank[1] == 4 && L.train_world_rank[3] == 5 && L.role_index[5] == 3, "explicit indices");
    check_pairing(&L);
  }
  rank_layout_free(&L);
}

// The schema rows as cmd/cli.c declares them (the test cannot link cmd/).
static const ConfigField test_dist_fields[] = {
    {"dist", "env_ranks", CONFIG_INT, "0", "env ranks"},
    {"dist", "roles", CONFIG_STRING, "", "role list"},
};

static void check_split(Communicator *world, DistRoles *roles, const char *what) {
  FimiError err = {0};
  const RankLayout *L = &roles->layout;
  int expect_size = roles->role == ROLE_TRAIN ? L->num_train : L->num_env;
  CHECK(roles->role_comm.world == expect_size, "%s: role comm of %d, expected %d", what, roles->role_comm.world,
        expect_size);
  CHECK(roles->role_comm.rank == roles->role_index, "%s: role rank", what);
  // Membership: the sum of world ranks over the role comm is the layout's.
  double sum = world->rank, want = 0;
  for (int r = 0; r < L->world; r++) want += L->role[r] == roles->role ? r : 0;
  CHECK(comm_all_reduce_f64(&roles->role_comm, &sum, 1, COMM_SUM, &err) == 0, "%s", err.message);
  CHECK(sum == want, "%s: role comm holds ranks summing to %g, expected %g", what, sum, want);
  // Both sides agree on the pairing: each rank sends its partner list length.
  double n = roles->num_partners;
  double counts[2] = {roles->role == ROLE_TRAIN ? n : 0, roles->role == ROLE_ENV ? n : 0};
  CHECK(comm_all_reduce_f64(world, counts, 2, COMM_SUM, &err) == 0, "%s", err.message);
  CHECK(counts[0] == counts[1], "%s: train side counts %g pairs, env side %g", what, counts[0], counts[1]);
}

static int mode_roles(Communicator *world) {
  FimiError err = {0};
  if (world->rank == 0) check_layout_pure();
  for (int env = 0; env < world->world; env++) {
    DistRoles roles;
    CHECK(dist_roles_init(&roles, world, env, NULL, &err) == 0, "env_ranks %d: %s", env, err.message);
    char what[64];
    snprintf(what, sizeof what, "env_ranks=%d", env);
    check_split(world, &roles, what);
    dist_roles_free(&roles);
  }
  if (world->world >= 2) {  // env first, through the config as a user writes it
    Config config;
    memset(&config, 0, sizeof config);
    char list[64];
    snprintf(list, sizeof list, "env,train*%d", world->world - 1);
    CHECK(config_add_fields(&config, test_dist_fields, 2, &err) == 0 &&
              config_set(&config, "dist", "roles", list, "test", &err) == 0,
          "%s", err.message);
    DistRoles roles;
    CHECK(dist_roles_from_config(&roles, world, &config, &err) == 0, "roles %s: %s", list, err.message);
    CHECK(roles.role == (world->rank == 0 ? ROLE_ENV : ROLE_TRAIN), "rank %d role %s", world->rank,
          rank_role_name(roles.role));
    CHECK(roles.role_index == (world->rank == 0 ? 0 : world->rank - 1), "role index");
    check_split(world, &roles, list);
    dist_roles_free(&roles);
  }
  CHECK(comm_barrier(world, &err) == 0, "%s", err.message);
  return 0;
}

static void expect_layout_error(Communicator *world, int env, const char *text, const char *needle) {
  FimiError err = {0};
  DistRoles roles;
  int rc = dist_roles_init(&roles, world, env, text, &err);
  CHECK(rc == -1, "env_ranks %d roles \"%s\": accepted at world %d", env, text ? text : "", world->world);
  CHECK(rc == 0 || strstr(err.message, needle), "env_ranks %d roles \"%s\": message \"%s\" lacks \"%s\"", env,
        text ? text : "", err.message, needle);
  if (world->rank == 0 && rc == -1) printf("  expected error: %s\n", err.message);
  if (rc == 0) dist_roles_free(&roles);
}

static int mode_roles_invalid(Communicator *world) {
  int W = world->world;
  char text[64];
  expect_layout_error(world, W, NULL, "leaves no train rank");
  expect_layout_error(world, W + 3, NULL, "leaves no train rank");
  expect_layout_error(world, -1, NULL, "must be >= 0");
  expect_layout_error(world, 1, "train", "both set");
  snprintf(text, sizeof text, "train*%d", W + 1);
  expect_layout_error(world, 0, text, "but the world has");
  snprintf(text, sizeof text, "env*%d", W);
  expect_layout_error(world, 0, text, "no train rank");
  expect_layout_error(world, 0, "train,gpu", "item 2 \"gpu\"");
  expect_layout_error(world, 0, "train*0", "count must be");
  expect_layout_error(world, 0, "train*x", "bad count");
  expect_layout_error(world, 0, "train*99999999999999999999", "bad count");
  expect_layout_error(world, 0, "train,,env", "item 2");
  if (W > 1) expect_layout_error(world, 0, "train", "lists 1 ranks, but the world has");
  // Through the config: the same message names the key.
  Config config;
  memset(&config, 0, sizeof config);
  FimiError err = {0};
  snprintf(text, sizeof text, "%d", W);
  config_add_fields(&config, test_dist_fields, 2, &err);
  CHECK(config_set(&config, "dist", "env_ranks", text, "test", &err) == 0, "%s", err.message);
  DistRoles roles;
  CHECK(dist_roles_from_config(&roles, world, &config, &err) == -1 && strstr(err.message, "dist.env_ranks"),
        "config env_ranks = world: \"%s\"", err.message);
  // Nothing was left half-split: the world still works.
  CHECK(comm_barrier(world, &err) == 0, "barrier after errors: %s", err.message);
  return 0;
}

// ----------------------------------------------------------------------------
// errors

static int mode_errors(Communicator *c) {
  FimiError err = {0};
  Communicator none;
  memset(&none, 0, sizeof none);
  none.mpi = MPI_COMM_NULL;
  float x = 1;
  CHECK(comm_all_reduce_f32(&none, &x, 1, COMM_SUM, &err) == -1 && strstr(err.message, "not initialized"), "%s",
        err.message);
  CHECK(comm_init(&none, MPI_COMM_NULL, &err) == -1 && strstr(err.message, "MPI_COMM_NULL"), "%s", err.message);
  comm_free(&none);  // freeing a failed or zeroed communicator is harmless
  DistRoles zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  dist_roles_free(&zeroed);
  CHECK(comm_broadcast(c, &x, 4, c->world, &err) == -1 && strstr(err.message, "root"), "%s", err.message);
  CHECK(comm_all_reduce_f32(c, &x, 1, (CommOp)7, &err) == -1 && strstr(err.message, "unknown op"), "%s", err.message);
  CHECK(comm_reduce_scatter_f32(c, &x, SIZE_MAX / 2, &x, COMM_SUM, &err) == -1 && strstr(err.message, "overflow"),
        "%s", err.message);
  CHECK(comm_all_gather_f32(c, &x, SIZE_MAX / 2, &x, &err) == -1 && strstr(err.message, "overflow"), "%s",
        err.message);
  CHECK(comm_all_reduce_f64(c, NULL, 3, COMM_SUM, &err) == -1 && strstr(err.message, "NULL"), "%s", err.message);
  size_t counts[64];
  void *all = &x;
  CHECK(c->world > 64 || (comm_all_gather_bytes(c, NULL, 3, counts, &all, &err) == -1 && !all &&
                          strstr(err.message, "NULL")),
        "all_gather_bytes of NULL: %s", err.message);
  // A real MPI error (negative count) is returned, not fatal, and named.
  int rc = MPI_Bcast(&x, -1, MPI_FLOAT, 0, c->mpi);
  CHECK(rc != MPI_SUCCESS, "MPI_Bcast with count -1 succeeded");
  CHECK(comm_check_mpi(rc, "MPI_Bcast", c, &err) == -1 && strstr(err.message, "MPI_Bcast failed on rank") &&
            strstr(err.message, "count"),
        "%s", err.message);
  if (c->rank == 0) printf("  MPI error as FimiError: %s\n", err.message);
  CHECK(comm_barrier(c, &err) == 0, "barrier after errors: %s", err.message);
  return 0;
}


// ----------------------------------------------------------------------------
// bench: best of 5 of each collective on n floats (numbers for docs).

static double best_of(Communicator *c, int what, float *a, float *b, size_t n) {
  FimiError err = {0};
  double best = 1e30;
  size_t shard = n / (size_t)c->world;
  for (int rep = 0; rep < 5; rep++) {
    MPI_Barrier(c->mpi);
    double t0 = MPI_Wtime();
    if (what == 0) comm_all_reduce_f32(c, a, n, COMM_SUM, &err);
    if (what == 1) MPI_Allreduce(MPI_IN_PLACE, a, (int)n, MPI_FLOAT, MPI_SUM, c->mpi);
    if (what == 2) comm_reduce_scatter_f32(c, a, shard, b, COMM_SUM, &err);
    if (what == 3) MPI_Reduce_scatter_block(a, b, (int)shard, MPI_FLOAT, MPI_SUM, c->mpi);
    if (what == 4) comm_all_gather_f32(c, b, shard, a, &err);
    double t = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, c->mpi);
    best = t < best ? t : best;
    for (size_t i = 0; i < n; i++) a[i] = value_f32(7, c->rank, i);  // keep values bounded
  }
  CHECK(!err.failed, "%s", err.message);
  return best;
}

static int mode_bench(Communicator *c, size_t n) {
  n -= n % (size_t)c->world;
  float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) a[i] = value_f32(7, c->rank, i);
  static const char *names[] = {"all_reduce (fixed order)", "MPI_Allreduce", "reduce_scatter (fixed order)",
                                "MPI_Reduce_scatter_block", "all_gather (MPI_Allgather)"};
  for (int what = 0; what < 5; what++) {
    double t = best_of(c, what, a, b, n);
    if (c->rank == 0)
      printf("world %d  %-30s %10zu floats  %8.2f ms  %7.2f GB/s of buffer\n", c->world, names[what], n, t * 1e3,
             n * 4.0 / t / 1e9);
  }
  free(a), free(b);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "compare")) return mode_compare(argc, argv);
  FimiError err = {0};
  if (comm_mpi_init(&argc, &argv, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  Communicator world;
  if (comm_init(&world, MPI_COMM_WORLD, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "collectives") && argc > 2)
    mode_collectives(&world, argv[2]);
  else if (!strcmp(mode, "global") && argc > 2)
    mode_global(&world, argv[2]);
  else if (!strcmp(mode, "roles"))
    mode_roles(&world);
  else if (!strcmp(mode, "roles-invalid"))
    mode_roles_invalid(&world);
  else if (!strcmp(mode, "errors"))
    mode_errors(&world);
  else if (!strcmp(mode, "bench"))
    mode_bench(&world, argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : (size_t)1 << 24);
  else {
    fprintf(stderr, "usage: mpi_comm_test collectives PREFIX | global FILE | roles | roles-invalid | errors | "
                    "compare TOL A B... | bench [N]\n");
    return 2;
  }
  // Every rank's verdict decides: a failure anywhere fails the run.
  double failed = test_failures;
  comm_all_reduce_f64(&world, &failed, 1, COMM_MAX, &err);
  if (world.rank == 0) printf("%s at world %d: ", mode, world.world);
  comm_free(&world);
  comm_mpi_finalize(&err);
  if (failed > 0 && test_failures == 0) test_failures = 1;
  TEST_MAIN_END();
}
