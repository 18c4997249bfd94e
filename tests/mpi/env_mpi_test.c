// tests/mpi/env_mpi_test.c: episodes on env ranks over MPI (rl/env_mpi.h)
// give exactly the replies of the in-process client (rl/env_local.c). Run by
// tests/mpi/mpi_tests.sh under mpirun as `env_mpi_test play ENV_RANKS` at
// -np 3 (1 train + 2 env), -np 4 (2 train + 2 env) and -np 4 with one env
// rank (3 train ranks on one env rank, all using the same episode ids).
//
// Every rank generates the same task list in-process (2 tasks of each of
// several families, fixed seeds). Each train rank records the turns of every
// episode by letting an agent (oracle or random) play it on a local episode,
// with a malformed turn (random bytes with NULs, a broken tool call, a 100 KB
// turn, an empty turn) put in place of the agent's second turn in some
// episodes. It then replays the same turns, batch by batch, through the MPI
// client and through a local client and compares every reply field bitwise.
// The batches also carry requests that must come back failed while the rest
// of the batch carries on: task indexes -1 and count, an episode opened twice,
// steps and finishes of episodes that are not open (MPI client only: the
// local client treats those as the caller's error). At the end every rank
// adds its counts into one vector: per env rank, the requests, episodes and
// failed replies the train ranks sent and saw must equal env_rank_serve's
// stats, and the env seconds the clients summed must equal the env ranks'.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "parallel/comm.h"
#include "parallel/roles.h"
#include "env/agents.h"
#include "env/episode.h"
#include "env/tasks/family.h"
#include "rl/env_client.h"
#include "rl/env_mpi.h"
#include "../test_util.h"

#define TASKS_PER_FAMILY 2
#define NUM_FAMILIES 6
#define MAX_TURNS 120

static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The same list on every rank: NUM_FAMILIES families spread over the
// registry, TASKS_PER_FAMILY tasks each.
static int make_tasks(TaskList *list, FimiError *err) {
  memset(list, 0, sizeof *list);
  TaskGenContext ctx;
  if (task_gen_context_init(&ctx, 1, err) != 0) return -1;
  int nf = task_family_count() < NUM_FAMILIES ? task_family_count() : NUM_FAMILIES;
  list->tasks = calloc((size_t)nf * TASKS_PER_FAMILY, sizeof *list->tasks);
  int rc = list->tasks ? 0 : fimi_fail(err, "out of memory");
  for (int f = 0; f < nf && rc == 0; f++) {
    const TaskFamily *family = task_family_at(f * task_family_count() / nf);
    for (int i = 0; i < TASKS_PER_FAMILY && rc == 0; i++) {
      rc = task_generate(&ctx, family, mix64(4242u + (uint64_t)f * 101u + (uint64_t)i), &list->tasks[list->count], err);
      if (rc == 0) list->count++;
    }
  }
  task_gen_context_free(&ctx);
  return rc;
}

// ---- scripts ---------------------------------------------------------------

enum { INJECT_NONE = -1, INJECT_BYTES = 0, INJECT_BAD_CALL, INJECT_HUGE, INJECT_EMPTY, INJECT_KINDS };

typedef struct Turn {
  char *text;
  size_t len;
} Turn;

typedef struct Episode {
  int64_t id;
  int task;
  uint64_t seed;
  EnvAgentKind agent;
  int inject;  // INJECT_*: the malformed turn in place of the second agent turn
  Turn *turns;
  int num_turns;
  // replay state
  int open, done, failed, next;
} Episode;

static void malformed_turn(int kind, uint64_t salt, Turn *t) {
  switch (kind) {
    case INJECT_BYTES:
      t->len = 97;
      t->text = malloc(t->len);
      for (size_t i = 0; i < t->len; i++) t->text[i] = (char)(i % 13 == 0 ? 0 : mix64(salt + i) & 0xff);
      break;
    case INJECT_BAD_CALL: {
      const char *s = "<tool_call>{\"name\": \"get_account_balance\", \"arguments\": {\"account_id\": </tool_call>";
      t->len = strlen(s);
      t->text = malloc(t->len);
      memcpy(t->text, s, t->len);
      break;
    }
    case INJECT_HUGE:
      t->len = 100 * 1024;
      t->text = malloc(t->len);
      for (size_t i = 0; i < t->len; i++) t->text[i] = (char)('a' + (i * 7 + salt) % 26);
      memcpy(t->text, "<tool_call>", 11);
      break;
    default:
      t->len = 0;
      t->text = malloc(1);
      break;
  }
}

// The turns an agent plays on a local copy of the episode (with the injected
// turn in place of its second turn); stops at done, at an env_step error or
// after MAX_TURNS turns.
static int record_script(EnvWorld *world, const TaskList *tasks, Episode *e, FimiError *err) {
  EnvAgent *agent = NULL;
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  if (agent_create(e->agent, e->seed ^ 0x5151u, &agent, err) != 0) return -1;
  if (env_open(world, &tasks->tasks[e->task], e->seed, &ep, &first, err) != 0) {
    agent_free(agent);
    return -1;
  }
  e->turns = calloc(MAX_TURNS, sizeof *e->turns);
  int rc = 0;
  for (int k = 0; k < MAX_TURNS && rc == 0; k++) {
    Turn *t = &e->turns[e->num_turns];
    if (k == 1 && e->inject != INJECT_NONE) {
      malformed_turn(e->inject, e->seed, t);
    } else {
      char *text = NULL;
      if ((rc = agent_next(agent, ep, &text, err)) != 0) break;
      t->text = text;
      t->len = strlen(text);
    }
    e->num_turns++;
    EnvObservation obs;
    FimiError step_err = {0};
    if (env_step(ep, t->text, t->len, &obs, &step_err) != 0 || obs.done) break;
  }
  env_close(ep);
  agent_free(agent);
  return rc;
}

// ---- comparing replies -----------------------------------------------------

static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void check_same_reply(const EnvReply *m, const EnvReply *l, const char *op, int64_t id) {
  CHECK(m->kind == l->kind, "%s %lld: kind %d vs local %d", op, (long long)id, m->kind, l->kind);
  CHECK(m->done == l->done, "%s %lld: done %d vs local %d", op, (long long)id, m->done, l->done);
  CHECK(m->end == l->end, "%s %lld: end %d vs local %d", op, (long long)id, m->end, l->end);
  CHECK(m->turns == l->turns, "%s %lld: turns %d vs local %d", op, (long long)id, m->turns, l->turns);
  CHECK(m->failed == l->failed, "%s %lld: failed %d vs local %d", op, (long long)id, m->failed, l->failed);
  CHECK(memcmp(m->error, l->error, sizeof m->error) == 0, "%s %lld: error \"%s\" vs local \"%s\"", op, (long long)id,
        m->error, l->error);
  CHECK((m->text == NULL) == (l->text == NULL), "%s %lld: text %s vs local %s", op, (long long)id,
        m->text ? "set" : "NULL", l->text ? "set" : "NULL");
  if (m->text && l->text)
    CHECK(strlen(m->text) == strlen(l->text) && strcmp(m->text, l->text) == 0, "%s %lld: text \"%.80s\" vs \"%.80s\"",
          op, (long long)id, m->text, l->text);
  const RewardBreakdown *a = &m->reward, *b = &l->reward;
  int same = a->checks == b->checks && same_double(a->seq, b->seq) && same_double(a->seq_frac, b->seq_frac) &&
             same_double(a->seq_strict, b->seq_strict) && same_double(a->db, b->db) &&
             same_double(a->comm, b->comm) && same_double(a->judge, b->judge) && same_double(a->total, b->total) &&
             same_double(a->strict_total, b->strict_total) && a->matched == b->matched && a->lcs == b->lcs &&
             a->num_gold == b->num_gold && a->values_said == b->values_said && a->num_values == b->num_values &&
             a->assertions_met == b->assertions_met && a->num_assertions == b->num_assertions &&
             a->db_failed_judge_zeroed == b->db_failed_judge_zeroed && a->end == b->end && a->turns == b->turns;
  CHECK(same, "%s %lld: reward differs (total %.17g vs local %.17g)", op, (long long)id, a->total, b->total);
}

// What each env rank (by world rank) should have counted.
typedef struct Tally {
  int world;
  double *counts;  // [3 * world]: requests, episodes, failed
} Tally;

static int route_rank(const DistRoles *roles, int64_t id) {
  int64_t k = id % roles->num_partners;
  if (k < 0) k += roles->num_partners;
  return roles->partners[k];
}

typedef enum { CALL_OPEN, CALL_STEP, CALL_FINISH } CallKind;
static const char *call_name(CallKind k) { return k == CALL_OPEN ? "open" : k == CALL_STEP ? "step" : "finish"; }

// Sends the batch to both clients (the MPI one with `extra` requests put in
// the middle) and compares; the local replies stay in lout, the extras'
// replies in xout. Returns -1 when a call failed.
static int call_both(CallKind kind, EnvClient *mpi, EnvClient *local, const DistRoles *roles, Tally *tally,
                     const EnvRequest *req, int n, const EnvRequest *extra, int nx, EnvReply *lout, EnvReply *xout) {
  int total = n + nx, half = n / 2;
  EnvRequest *mreq = calloc((size_t)total, sizeof *mreq);
  EnvReply *mout = calloc((size_t)total, sizeof *mout);
  for (int i = 0; i < half; i++) mreq[i] = req[i];
  for (int j = 0; j < nx; j++) mreq[half + j] = extra[j];
  for (int i = half; i < n; i++) mreq[nx + i] = req[i];
  FimiError err = {0};
  int (*mfn)(void *, const EnvRequest *, int, EnvReply *, FimiError *) =
      kind == CALL_OPEN ? mpi->open : kind == CALL_STEP ? mpi->step : mpi->finish;
  int (*lfn)(void *, const EnvRequest *, int, EnvReply *, FimiError *) =
      kind == CALL_OPEN ? local->open : kind == CALL_STEP ? local->step : local->finish;
  int rc = mfn(mpi->ctx, mreq, total, mout, &err);
  CHECK(rc == 0, "mpi %s of %d: %s", call_name(kind), total, err.message);
  if (rc == 0 && n > 0) {
    rc = lfn(local->ctx, req, n, lout, &err);
    CHECK(rc == 0, "local %s of %d: %s", call_name(kind), n, err.message);
  }
  if (rc == 0) {
    for (int i = 0; i < total; i++) {
      double *c = &tally->counts[3 * route_rank(roles, mreq[i].episode)];
      c[0] += 1;
      if (kind == CALL_OPEN && !mout[i].failed) c[1] += 1;
      if (mout[i].failed) c[2] += 1;
    }
    for (int i = 0; i < n; i++) check_same_reply(&mout[i < half ? i : nx + i], &lout[i], call_name(kind), req[i].episode);
    for (int j = 0; j < nx; j++) {
      xout[j] = mout[half + j];
      memset(&mout[half + j], 0, sizeof mout[half + j]);
    }
  }
  for (int i = 0; i < total; i++) env_reply_clear(&mout[i]);
  free(mreq);
  free(mout);
  return rc;
}

static void check_failed(const EnvReply *r, const char *what, const char *reason) {
  CHECK(r->failed == 1 && r->done == 1, "%s: failed %d done %d, want a failed reply", what, r->failed, r->done);
  CHECK(strstr(r->error, reason) != NULL, "%s: error \"%s\" should say \"%s\"", what, r->error, reason);
  CHECK(r->text == NULL, "%s: a failed reply has no text", what);
}

// ---- the train rank --------------------------------------------------------

static void play(const TaskList *tasks, const DistRoles *roles, Communicator *world, Tally *tally, double *client_secs) {
  FimiError err = {0};
  int train = roles->role_index;
  int ne = 2 * tasks->count;
  Episode *eps = calloc((size_t)ne, sizeof *eps);
  EnvWorld *rec_world = NULL;
  CHECK(env_world_create(&rec_world, &err) == 0, "env_world_create: %s", err.message);
  int injected[INJECT_KINDS] = {0};
  for (int i = 0; i < ne && rec_world; i++) {
    Episode *e = &eps[i];
    // The same ids on every train rank (the env ranks key episodes by
    // sender too), different phrasing seeds per train rank.
    e->id = i;
    e->task = i / 2;
    e->agent = i % 2 ? AGENT_RANDOM : AGENT_ORACLE;
    e->seed = 1000u + (uint64_t)i + 7919u * (uint64_t)train;
    e->inject = i % 3 == 1 ? (i / 3) % INJECT_KINDS : INJECT_NONE;
    if (e->inject != INJECT_NONE) injected[e->inject]++;
    CHECK(record_script(rec_world, tasks, e, &err) == 0, "recording episode %d: %s", i, err.message);
  }
  for (int k = 0; k < INJECT_KINDS; k++) CHECK(injected[k] > 0, "malformed turn kind %d never used", k);
  env_world_free(rec_world);

  EnvClient mpi, local;
  int have_mpi = env_client_mpi_create(&mpi, tasks, roles, world, &err) == 0;
  CHECK(have_mpi, "env_client_mpi_create: %s", err.message);
  CHECK(env_client_local_create(&local, tasks, &err) == 0, "env_client_local_create: %s", err.message);
  EnvRequest *req = calloc((size_t)ne + 2, sizeof *req);
  EnvReply *lout = calloc((size_t)ne + 2, sizeof *lout);
  EnvReply xout[3];
  int ok = have_mpi;

  // open: every episode, plus the two bad task indexes (both clients)
  int n = 0;
  for (int i = 0; i < ne; i++) req[n++] = (EnvRequest){.episode = eps[i].id, .task = eps[i].task, .seed = eps[i].seed};
  int bad_lo = n / 3, bad_hi = 2 * n / 3;
  memmove(&req[bad_hi + 1], &req[bad_hi], (size_t)(n - bad_hi) * sizeof *req);
  req[bad_hi] = (EnvRequest){.episode = 9001, .task = tasks->count, .seed = 1};
  n++;
  memmove(&req[bad_lo + 1], &req[bad_lo], (size_t)(n - bad_lo) * sizeof *req);
  req[bad_lo] = (EnvRequest){.episode = 9000, .task = -1, .seed = 1};
  n++;
  if (ok) ok = call_both(CALL_OPEN, &mpi, &local, roles, tally, req, n, NULL, 0, lout, xout) == 0;
  for (int i = 0; ok && i < n; i++) {
    if (req[i].episode >= 9000) {
      check_failed(&lout[i], "open of a bad task index", "task index");
    } else {
      Episode *e = &eps[req[i].episode];
      CHECK(!lout[i].failed && lout[i].text && lout[i].text[0], "open %lld: %s", (long long)e->id, lout[i].error);
      e->open = !lout[i].failed;
    }
    env_reply_clear(&lout[i]);
  }
  // an episode opened twice (MPI only): failed, the open one carries on
  if (ok) {
    EnvRequest twice = {.episode = eps[0].id, .task = eps[0].task, .seed = eps[0].seed};
    ok = call_both(CALL_OPEN, &mpi, &local, roles, tally, NULL, 0, &twice, 1, lout, xout) == 0;
    if (ok) check_failed(&xout[0], "second open of an episode", "already open");
    env_reply_clear(&xout[0]);
  }

  // steps: one turn of every running episode per batch
  for (int round = 0; ok; round++) {
    n = 0;
    for (int i = 0; i < ne; i++) {
      Episode *e = &eps[i];
      if (e->open && !e->done && e->next < e->num_turns)
        req[n++] = (EnvRequest){.episode = e->id, .text = e->turns[e->next].text, .len = e->turns[e->next].len};
    }
    if (n == 0) break;
    // In the first batch, steps of episodes that are not open (never
    // opened, and one whose open failed) ride along on the MPI client.
    EnvRequest ghost[2] = {{.episode = 777777, .text = "hello", .len = 5}, {.episode = 9000, .text = "hi", .len = 2}};
    int nx = round == 0 ? 2 : 0;
    ok = call_both(CALL_STEP, &mpi, &local, roles, tally, req, n, ghost, nx, lout, xout) == 0;
    for (int j = 0; ok && j < nx; j++) {
      check_failed(&xout[j], "step of an episode that is not open", "not open");
      env_reply_clear(&xout[j]);
    }
    for (int i = 0; ok && i < n; i++) {
      Episode *e = &eps[req[i].episode];
      e->next++;
      if (lout[i].failed) e->failed = 1, e->open = 0;
      if (lout[i].done) e->done = 1;
      env_reply_clear(&lout[i]);
    }
  }

  // finish: every episode still open, plus one that is not (MPI only)
  n = 0;
  for (int i = 0; i < ne; i++)
    if (eps[i].open) req[n++] = (EnvRequest){.episode = eps[i].id};
  EnvRequest ghost = {.episode = -5};
  if (ok) ok = call_both(CALL_FINISH, &mpi, &local, roles, tally, req, n, &ghost, 1, lout, xout) == 0;
  if (ok) {
    check_failed(&xout[0], "finish of an episode that is not open", "not open");
    env_reply_clear(&xout[0]);
  }
  int oracle_ones = 0, finished = 0;
  for (int i = 0; ok && i < n; i++) {
    Episode *e = &eps[req[i].episode];
    finished++;
    CHECK(lout[i].done && !lout[i].failed, "finish %lld: %s", (long long)e->id, lout[i].error);
    if (e->agent == AGENT_ORACLE && e->inject == INJECT_NONE) {
      CHECK(lout[i].reward.total == 1.0, "oracle episode %lld (task %s) scored %.6f, want 1", (long long)e->id,
            tasks->tasks[e->task].id, lout[i].reward.total);
      oracle_ones++;
    }
    env_reply_clear(&lout[i]);
  }
  CHECK(!ok || finished == ne, "%d of %d episodes finished", finished, ne);
  CHECK(!ok || oracle_ones > 0, "no clean oracle episode to check");
  CHECK(!ok || mpi.env_seconds > 0, "the MPI client counted no env seconds");
  *client_secs = have_mpi ? mpi.env_seconds : 0;
  if (train == 0) printf("train rank 0: %d episodes, %d oracle episodes at reward 1\n", ne, oracle_ones);
  // Always say goodbye, so the env ranks end even when a check failed.
  if (have_mpi) env_client_free(&mpi);
  env_client_free(&local);
  for (int i = 0; i < ne; i++) {
    for (int k = 0; k < eps[i].num_turns; k++) free(eps[i].turns[k].text);
    free(eps[i].turns);
  }
  free(eps);
  free(req);
  free(lout);
}

int main(int argc, char **argv) {
  FimiError err = {0};
  if (argc < 3 || strcmp(argv[1], "play") != 0) {
    fprintf(stderr, "usage: env_mpi_test play ENV_RANKS\n");
    return 2;
  }
  if (comm_mpi_init(&argc, &argv, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  double t0 = monotonic_seconds();
  Communicator world;
  DistRoles roles;
  if (comm_init(&world, MPI_COMM_WORLD, &err) != 0 || dist_roles_init(&roles, &world, atoi(argv[2]), NULL, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  TaskList tasks;
  if (make_tasks(&tasks, &err) != 0) {
    fprintf(stderr, "tasks: %s\n", err.message);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  Tally tally = {world.world, calloc((size_t)3 * world.world + 1, sizeof(double))};
  double *sum = tally.counts;
  if (roles.role == ROLE_TRAIN) {
    double secs = 0;
    play(&tasks, &roles, &world, &tally, &secs);
    sum[3 * world.world] += secs;
  } else {
    EnvServeStats stats;
    CHECK(env_rank_serve(&tasks, &roles, &world, NULL, 0, &stats, &err) == 0, "env_rank_serve: %s", err.message);
    CHECK(stats.requests > 0 && stats.episodes > 0 && stats.failed > 0,
          "env rank %d: %lld requests, %lld episodes, %lld failed", world.rank, (long long)stats.requests,
          (long long)stats.episodes, (long long)stats.failed);
    CHECK(stats.env_seconds > 0, "env rank %d: no env seconds", world.rank);
    double *c = &sum[3 * world.rank];
    c[0] -= (double)stats.requests;
    c[1] -= (double)stats.episodes;
    c[2] -= (double)stats.failed;
    sum[3 * world.world] -= stats.env_seconds;
    printf("env rank %d: %lld requests, %lld episodes, %lld failed, %.3f s in the environment\n", world.rank,
           (long long)stats.requests, (long long)stats.episodes, (long long)stats.failed, stats.env_seconds);
  }
  // The train ranks' tallies minus the env ranks' stats: all zero.
  double total_secs = 0;
  if (roles.role == ROLE_ENV) total_secs = -sum[3 * world.world];
  CHECK(comm_all_reduce_f64(&world, &total_secs, 1, COMM_SUM, &err) == 0, "all_reduce: %s", err.message);
  CHECK(comm_all_reduce_f64(&world, sum, (size_t)3 * world.world + 1, COMM_SUM, &err) == 0, "all_reduce: %s",
        err.message);
  static const char *what[3] = {"requests", "episodes", "failed"};
  for (int r = 0; r < world.world; r++)
    for (int k = 0; k < 3; k++)
      CHECK(sum[3 * r + k] == 0, "rank %d: the train ranks' %s and env_rank_serve's differ by %g", r, what[k],
            sum[3 * r + k]);
  CHECK(total_secs > 0 && fabs(sum[3 * world.world]) <= 1e-9 * total_secs,
        "env seconds: clients and env ranks differ by %g of %g", sum[3 * world.world], total_secs);
  if (world.rank == 0) printf("world %d, %d tasks, %.2f s\n", world.world, tasks.count, monotonic_seconds() - t0);
  free(sum);
  task_list_free(&tasks);
  dist_roles_free(&roles);
  comm_free(&world);
  comm_mpi_finalize(&err);
  TEST_MAIN_END();
}
