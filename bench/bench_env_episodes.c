// bench/bench_env_episodes.c: oracle episodes per second on one CPU core,
// end to end: env_open (a pooled copy of the image for the agent and one for
// the gold replay, fixture, gold chain, values), the oracle's turns through
// the tool-call parser, the tools and the simulated customer, env_score
// (digest of the mutable tables, sequence/LCS, comm, judge) and env_close.
// The world keeps each task's gold replay (env/episode.c), so a task's first
// episode replays its gold chain and later ones do not: both rates are
// printed (GRPO plays each task G times, evaluation once per trial).
// Tasks come from every registered family (generated before timing) on the
// default 30-customer bank, or with --customers C on a bank of C customers
// (the corpus bank is 2,000; docs/corpus.md). Prints the image's build time
// and size, what one episode's database costs (fresh copy, pooled, digest),
// episodes per second (wall and per CPU second) over all families and per
// family.
//
// Usage: bench_env_episodes [--episodes N] (default 4000) [--per-family K] (default 20)
//                           [--customers C] (default 30) [--table 0|1] (default 1: the per-family table;
//                           0 leaves it out, e.g. under callgrind)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env/agents.h"
#include "env/episode.h"
#include "env/tasks/family.h"

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// CPU time of this process: episodes per CPU second is the rate of one core
// even when other processes share the machine (wall time then inflates).
static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, const FimiError *err) {
  fprintf(stderr, "bench_env_episodes: %s: %s\n", what, err->message);
  exit(1);
}

// Runs `count` oracle episodes cycling over tasks[0..n); returns seconds.
static double run(EnvWorld *world, const Task *tasks, int n, int count, int *imperfect) {
  FimiError err = {0};
  double start = now_seconds();
  for (int i = 0; i < count; i++) {
    RewardBreakdown r;
    if (agent_run_episode(world, &tasks[i % n], (uint64_t)i, AGENT_ORACLE, &r, &err) != 0) die("episode", &err);
    *imperfect += r.total != 1.0;
  }
  return now_seconds() - start;
}

// The same with the db check forced through the digest path (both copies'
// mutable tables hashed, the gold chain replayed again): what an episode
// costs when the agent's writes differ from the gold chain's.
static double run_digest(EnvWorld *world, const Task *tasks, int n, int count) {
  FimiError err = {0};
  double start = now_seconds();
  for (int i = 0; i < count; i++) {
    EnvAgent *agent = NULL;
    EnvEpisode *ep = NULL;
    const char *first = NULL;
    if (agent_create(AGENT_ORACLE, (uint64_t)i, &agent, &err) || env_open(world, &tasks[i % n], (uint64_t)i, &ep, &first, &err))
      die("open", &err);
    EnvObservation obs = {0};
    while (!obs.done) {
      char *turn = NULL;
      if (agent_next(agent, ep, &turn, &err) || env_step(ep, turn, strlen(turn), &obs, &err)) die("step", &err);
      free(turn);
    }
    int equal = 0;
    RewardBreakdown r;
    if (env_episode_db_equal(ep, 0, &equal, &err) || env_score(ep, &r, &err)) die("score", &err);
    env_close(ep);
    agent_free(agent);
  }
  return now_seconds() - start;
}

// What one episode's database costs on this image, three ways: a fresh copy
// (bank_episode_open + close), a fresh copy and its first query (the schema
// parse), a pooled episode (acquire, one query, release: a transaction on a
// kept connection); and one state digest (the db check's slow path).
static void time_copies(const BankImage *image) {
  FimiError err = {0};
  int fresh_n = image->size > (4 << 20) ? 50 : 200, pooled_n = 2000, digest_n = 20;
  char today[11];
  double t = cpu_seconds();
  for (int i = 0; i < fresh_n; i++) {
    BankEpisode *ep = NULL;
    if (bank_episode_open(image, NULL, &ep, &err) != 0) die("fresh copy", &err);
    bank_episode_close(ep);
  }
  double fresh = (cpu_seconds() - t) / fresh_n;
  t = cpu_seconds();
  for (int i = 0; i < fresh_n; i++) {
    BankEpisode *ep = NULL;
    if (bank_episode_open(image, NULL, &ep, &err) != 0 || bank_episode_today(ep, today, &err) != 0) die("query", &err);
    bank_episode_close(ep);
  }
  double fresh_query = (cpu_seconds() - t) / fresh_n;
  BankPool *pool = NULL;
  BankEpisode *ep = NULL;
  if (bank_pool_create(image, NULL, &pool, &err) != 0 || bank_pool_acquire(pool, &ep, &err) != 0) die("pool", &err);
  bank_pool_release(ep);
  t = cpu_seconds();
  for (int i = 0; i < pooled_n; i++) {
    if (bank_pool_acquire(pool, &ep, &err) != 0 || bank_episode_today(ep, today, &err) != 0) die("pooled", &err);
    bank_pool_release(ep);
  }
  double pooled = (cpu_seconds() - t) / pooled_n;
  if (bank_pool_acquire(pool, &ep, &err) != 0) die("pool", &err);
  uint64_t digest = 0;
  t = cpu_seconds();
  for (int i = 0; i < digest_n; i++)
    if (env_state_digest(ep, &digest, &err) != 0) die("digest", &err);
  double digest_s = (cpu_seconds() - t) / digest_n;
  bank_pool_release(ep);
  bank_pool_free(pool);
  printf("per episode (CPU us): fresh copy %.0f, fresh copy + first query %.0f, pooled %.1f; state digest %.0f\n",
         1e6 * fresh, 1e6 * fresh_query, 1e6 * pooled, 1e6 * digest_s);
}

int main(int argc, char **argv) {
  int episodes = 4000, per_family = 20, customers = BANK_DEFAULT_CUSTOMERS, table = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--episodes") == 0) episodes = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--per-family") == 0) per_family = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--customers") == 0) customers = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--table") == 0) table = atoi(argv[i + 1]);
  }
  if (episodes < 1 || per_family < 1 || customers < 1 || customers > BANK_MAX_CUSTOMERS) {
    fprintf(stderr, "usage: bench_env_episodes [--episodes N] [--per-family K] [--customers C] [--table 0|1]\n");
    return 2;
  }
  FimiError err = {0};
  TaskGenContext ctx;
  EnvWorld *world = NULL;
  uint64_t image_seed = bank_image_seed(1, customers);
  BankImage timed;
  double build_start = now_seconds();
  if (bank_image_build(image_seed, &timed, &err) != 0) die("image", &err);
  printf("image: %d customers, %lld bytes, built in %.1f ms\n", timed.num_customers, (long long)timed.size,
         1e3 * (now_seconds() - build_start));
  time_copies(&timed);
  bank_image_free(&timed);
  if (task_gen_context_init(&ctx, image_seed, &err) != 0 || env_world_create(&world, &err) != 0) die("setup", &err);
  int families = task_family_count();
  Task *tasks = calloc((size_t)families * (size_t)per_family, sizeof *tasks);
  if (!tasks) return 1;
  for (int f = 0; f < families; f++)
    for (int i = 0; i < per_family; i++)
      if (task_generate(&ctx, task_family_at(f), 77 + (uint64_t)i, &tasks[f * per_family + i], &err) != 0)
        die("generate", &err);
  int total_tasks = families * per_family, imperfect = 0;
  // First plays: every task once on a world whose gold-replay cache has not
  // seen it (the image and pool warmed on another task first).
  run(world, tasks, 1, 1, &imperfect);
  double cpu = cpu_seconds();
  double seconds = run(world, tasks + 1, total_tasks - 1, total_tasks - 1, &imperfect);
  cpu = cpu_seconds() - cpu;
  printf("first play of each task (gold chain replayed): %d in %.3f s = %.0f episodes/s; %.0f per CPU second\n",
         total_tasks - 1, seconds, (total_tasks - 1) / seconds, (total_tasks - 1) / cpu);
  imperfect = 0;
  cpu = cpu_seconds();
  seconds = run(world, tasks, total_tasks, episodes, &imperfect);
  cpu = cpu_seconds() - cpu;
  printf("oracle episodes, all %d families, tasks played again (gold replay cached): %d in %.3f s = %.0f episodes/s (%.1f us each); %.3f CPU s = %.0f per CPU second%s\n",
         families, episodes, seconds, episodes / seconds, 1e6 * seconds / episodes, cpu, episodes / cpu,
         imperfect ? " [SOME NOT 1.0]" : "");
  int slow_count = episodes / 4 > 100 ? episodes / 4 : 100;
  cpu = cpu_seconds();
  double slow = run_digest(world, tasks, total_tasks, slow_count);
  cpu = cpu_seconds() - cpu;
  printf("with the db check forced through digests: %d in %.3f s = %.0f episodes/s (%.1f us each); %.0f per CPU second\n",
         slow_count, slow, slow_count / slow, 1e6 * slow / slow_count, slow_count / cpu);
  if (table) printf("| family | episodes/s | us/episode | gold steps |\n|---|---:|---:|---:|\n");
  for (int f = 0; table && f < families; f++) {
    int count = episodes / families > 50 ? episodes / families : 50;
    double s = run(world, &tasks[f * per_family], per_family, count, &imperfect);
    printf("| %s | %.0f | %.1f | %d |\n", task_family_at(f)->name, count / s, 1e6 * s / count,
           tasks[f * per_family].num_gold);
  }
  for (int i = 0; i < total_tasks; i++) task_free(&tasks[i]);
  free(tasks);
  env_world_free(world);
  task_gen_context_free(&ctx);
  return imperfect ? 1 : 0;
}
