// tests/test_eval.c: the evaluation layer (eval/).
//   stats: pass^k and pass@k against enumeration of every k-subset of the
//     trials; the sign test against a float64 binomial sum built by the
//     pmf recurrence (a second implementation), symmetry and range; the band.
//   results: a synthetic run written and read back gives the same summary
//     JSON; a broken field is named with its episode index.
//   harness: the oracle through eval_run_agent scores exactly 1.0 on every
//     task of a task per family, simulator seeds follow task ids (not file
//     order), a failing task is recorded, not fatal; a tiny random model
//     through eval_run_policy gives bitwise the same episodes at 1 and 5
//     slots and in chunks of 3, and its trajectory holds exactly its
//     sampled turns.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/harness.h"
#include "eval/results.h"
#include "eval/stats.h"
#include "eval/summary.h"
#include "rl_fixture.h"
#include "test_util.h"

// ---- stats -------------------------------------------------------------------------------------

// Over every k-subset of n trials whose first c succeed: the share where all
// (all = 1) or any (all = 0) of the subset succeed.
static double enumerate_subsets(int n, int c, int k, int all) {
  long hits = 0, total = 0;
  for (unsigned mask = 0; mask < (1u << n); mask++) {
    if (__builtin_popcount(mask) != k) continue;
    int successes = __builtin_popcount(mask & ((1u << c) - 1));
    total++;
    hits += all ? successes == k : successes > 0;
  }
  return (double)hits / total;
}

static void test_pass_k(void) {
  for (int n = 1; n <= 8; n++)
    for (int c = 0; c <= n; c++)
      for (int k = 1; k <= n; k++) {
        CHECK_CLOSE(eval_pass_hat_k(n, c, k), enumerate_subsets(n, c, k, 1), 1e-12, "pass^k");
        CHECK_CLOSE(eval_pass_at_k(n, c, k), enumerate_subsets(n, c, k, 0), 1e-12, "pass@k");
      }
  CHECK(isnan(eval_pass_hat_k(3, 1, 4)) && isnan(eval_pass_hat_k(3, 4, 1)) && isnan(eval_pass_at_k(3, 1, 0)),
        "outside the domain is NaN");
}

// 2 * P[X <= m], X ~ Binomial(n, 1/2), with pmf(i+1) = pmf(i) (n-i)/(i+1).
static double sign_test_reference(int wins, int losses) {
  int n = wins + losses, m = wins < losses ? wins : losses;
  double pmf = pow(0.5, n), tail = 0;
  for (int i = 0; i <= m; i++) {
    tail += pmf;
    pmf *= (double)(n - i) / (i + 1);
  }
  return 2 * tail > 1 ? 1 : 2 * tail;
}

static void test_sign_test(void) {
  for (int w = 0; w <= 40; w++)
    for (int l = 0; l <= 40; l++) {
      if (w + l == 0) continue;
      double p = eval_sign_test_p(w, l);
      CHECK_CLOSE(p, sign_test_reference(w, l), 1e-9, "sign test");
      CHECK(p == eval_sign_test_p(l, w) && p > 0 && p <= 1, "sign test symmetric, in (0, 1]: %d %d", w, l);
    }
  CHECK(eval_sign_test_p(0, 0) == 1.0, "no untied pairs: p = 1");
  CHECK_CLOSE(eval_sign_test_p(0, 5), 0.0625, 1e-12, "0 of 5: 2/32");
  // Large n: the log-space sum still agrees with the recurrence (both finite here).
  CHECK_CLOSE(eval_sign_test_p(400, 600) / sign_test_reference(400, 600), 1.0, 1e-6, "sign test at n = 1000");
  double tiny = eval_sign_test_p(10, 3000);
  CHECK(tiny >= 0 && tiny < 1e-300, "a one-sided n = 3010 is tiny, not NaN: %g", tiny);
}

static void test_band(void) {
  EvalBand b = {0};
  eval_band_add(&b, 2, 0);
  eval_band_add(&b, 2, 1);
  eval_band_add(&b, 2, 2);
  eval_band_add(&b, 2, 2);
  CHECK(b.always_fail == 1 && b.split == 1 && b.always_pass == 2, "band %d %d %d", b.always_fail, b.split,
        b.always_pass);
}

// ---- results -----------------------------------------------------------------------------------

static void fill_synthetic(EvalResults *r, int tasks, int trials) {
  FimiError err = {0};
  memset(r, 0, sizeof *r);
  snprintf(r->info.label, sizeof r->info.label, "synthetic");
  snprintf(r->info.model, sizeof r->info.model, "none");
  snprintf(r->info.tasks_file, sizeof r->info.tasks_file, "none.jsonl");
  r->info.trials = trials;
  r->info.seed = 0xfedcba9876543210ULL;
  r->info.success = 1.0;
  r->info.parameters = 1000;
  Rng rng;
  rng_seed(&rng, 7);
  for (int t = 0; t < tasks; t++)
    for (int k = 0; k < trials; k++) {
      EvalEpisode *e = eval_results_add(r, &err);
      char id[32];
      snprintf(id, sizeof id, "task-%d", t);
      e->task_id = strdup(id);
      e->family = strdup(t % 2 ? "odd_family" : "even_family");
      e->kind = (TaskKind)(t % TASK_KIND_COUNT);
      e->use_case = (TaskUseCase)(t % TASK_USE_COUNT);
      e->num_gold = 2 + t % 9;
      e->trial = k;
      e->env_seed = eval_env_seed(1, id, k);
      e->reward.checks = t % 3 ? TASK_CHECK_ALL : (TASK_CHECK_SEQ | TASK_CHECK_COMM);
      int pass = rng_uniform(&rng) < 0.4f;
      e->reward.total = pass ? 1.0 : 0.5 * rng_uniform(&rng);
      e->reward.strict_total = e->reward.total * (rng_uniform(&rng) < 0.7f);
      e->reward.seq = e->reward.seq_frac = e->reward.db = e->reward.comm = e->reward.judge = e->reward.total;
      e->reward.end = TASK_END_STOP;
      snprintf(e->end, sizeof e->end, "stop");
      e->turns = 3 + k, e->tool_calls = 1, e->generated = 40 + t, e->tokens = 900 + t;
      e->trajectory = cJSON_CreateArray();
    }
}

static char *summary_text(const EvalResults *r) {
  FimiError err = {0};
  cJSON *s = eval_summary_json(r, &err);
  char *text = s ? cJSON_PrintUnformatted(s) : NULL;
  cJSON_Delete(s);
  return text;
}

static void test_round_trip(void) {
  FimiError err = {0};
  EvalResults r, back;
  fill_synthetic(&r, 13, 3);
  char path[] = "test_eval_results.json";
  CHECK(eval_results_write(&r, path, &err) == 0, "write: %s", err.message);
  CHECK(eval_results_read(path, &back, &err) == 0, "read: %s", err.message);
  char *a = summary_text(&r), *b = summary_text(&back);
  CHECK(a && b && !strcmp(a, b), "summary after a round trip differs");
  CHECK(back.count == 39 && back.info.seed == r.info.seed && back.episodes[5].env_seed == r.episodes[5].env_seed,
        "episodes and 64-bit seeds survive");
  // The band and pass^k of the summary against the tallies by hand.
  cJSON *s = eval_summary_json(&r, &err);
  const cJSON *pass = cJSON_GetArrayItem(cJSON_GetObjectItem(s, "pass_k"), 1);
  double want = 0;
  EvalTaskTally *t = NULL;
  int n = 0;
  eval_task_tallies(&r, &t, &n, &err);
  for (int i = 0; i < n; i++) want += (double)t[i].successes * (t[i].successes - 1) / 6.0;
  CHECK(n == 13 && pass && cJSON_GetObjectItem(pass, "k")->valueint == 2, "pass_k[1] is k = 2");
  if (pass) CHECK_CLOSE(cJSON_GetObjectItem(pass, "pass_hat_k")->valuedouble, want / n, 1e-12, "pass^2 = C(c,2)/C(3,2)");
  free(t);
  cJSON_Delete(s);
  free(a);
  free(b);
  eval_results_free(&back);
  // A broken field is named.
  cJSON *o = eval_results_to_json(&r, &err);
  cJSON *reward = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "episodes"), 4), "reward");
  cJSON_ReplaceItemInObject(reward, "db", cJSON_CreateString("high"));
  char *text = cJSON_Print(o);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  memset(&err, 0, sizeof err);
  CHECK(eval_results_read(path, &back, &err) != 0 && strstr(err.message, "episodes[4].reward") &&
            strstr(err.message, "db"),
        "broken field named: %s", err.message);
  free(text);
  cJSON_Delete(o);
  unlink(path);
  eval_results_free(&r);
}

// ---- harness -----------------------------------------------------------------------------------

static void test_oracle(void) {
  FimiError err = {0};
  TaskList list = {0};
  int families = task_family_count();
  const char **names = calloc((size_t)families + 1, sizeof *names);
  for (int f = 0; f < families; f++) names[f] = task_family_at(f)->name;
  CHECK(rl_fixture_tasks(&list, names, 1, &err) == 0, "tasks: %s", err.message);
  EvalConfig c;
  eval_config_default(&c);
  c.trials = 2;
  c.progress = 0;
  EvalResults r = {0};
  r.info.success = 1.0;
  CHECK(eval_run_agent(&c, AGENT_ORACLE, &list, &r, &err) == 0, "oracle: %s", err.message);
  int perfect = 0;
  for (int i = 0; i < r.count; i++) perfect += r.episodes[i].reward.total == 1.0 && r.episodes[i].reward.strict_total == 1.0;
  CHECK(r.count == 2 * families && perfect == r.count, "oracle: %d of %d episodes at exactly 1.0", perfect, r.count);
  EvalSlice s;
  eval_slice_compute(&r, NULL, NULL, &s);
  CHECK(s.reward == 1.0 && s.strict == 1.0 && s.success == 1.0 && s.seq == 1.0, "oracle slice at 1.0");
  // Seeds follow task ids: the list reversed meets the same simulator lines.
  uint64_t first = r.episodes[0].env_seed;
  Task tmp = list.tasks[0];
  list.tasks[0] = list.tasks[list.count - 1];
  list.tasks[list.count - 1] = tmp;
  EvalResults rev = {0};
  CHECK(eval_run_agent(&c, AGENT_ORACLE, &list, &rev, &err) == 0, "reversed: %s", err.message);
  CHECK(rev.count == r.count && !strcmp(rev.episodes[rev.count - 2].task_id, r.episodes[0].task_id) &&
            rev.episodes[rev.count - 2].env_seed == first,
        "same task id, same seed, whatever the order");
  // A task the environment cannot open is a recorded failure.
  free(list.tasks[0].gold[0].name);
  list.tasks[0].gold[0].name = strdup("no_such_tool");
  EvalResults bad = {0};
  CHECK(eval_run_agent(&c, AGENT_ORACLE, &list, &bad, &err) == 0, "a failing task is not fatal: %s", err.message);
  CHECK(bad.count == r.count && bad.episodes[0].failed && !strcmp(bad.episodes[0].end, "failed") &&
            bad.episodes[0].reward.total == 0 && !bad.episodes[2].failed,
        "failure recorded on its episode only");
  eval_results_free(&r);
  eval_results_free(&rev);
  eval_results_free(&bad);
  task_list_free(&list);
  free(names);
}

static int episodes_equal(const EvalEpisode *a, const EvalEpisode *b) {
  char *ta = cJSON_PrintUnformatted(a->trajectory), *tb = cJSON_PrintUnformatted(b->trajectory);
  int same = ta && tb && !strcmp(ta, tb) && a->env_seed == b->env_seed && a->generated == b->generated &&
             a->tokens == b->tokens && !memcmp(&a->reward, &b->reward, sizeof a->reward) && !strcmp(a->end, b->end);
  free(ta);
  free(tb);
  return same;
}

static int run_model(RlFixture *fx, int slots, int chunk, EvalResults *out, FimiError *err) {
  EvalConfig c;
  eval_config_default(&c);
  c.chunk = chunk;
  c.trials = 2;
  c.progress = 0;
  c.rollout.slots = slots;
  c.rollout.max_turn_tokens = 12;
  c.rollout.max_episode_tokens = 30;
  c.rollout.sampler = (SamplerConfig){1.0f, 1.0f};
  EnvClient env;
  RolloutPolicy p;
  memset(out, 0, sizeof *out);
  if (env_client_local_create(&env, &fx->tasks, err) != 0) return -1;
  int rc = rollout_policy_cpu_create(&p, &fx->model, slots, c.rollout.context, 32, 1, err);
  if (rc == 0) rc = eval_run_policy(&c, &p, &env, fx->tok, out, err);
  if (rc == 0) rollout_policy_cpu_free(&p);
  env_client_free(&env);
  return rc;
}

static void test_model(void) {
  static const char *const FAMILIES[] = {"kyc_status_check", "fd_paper", NULL};
  FimiError err = {0};
  RlFixture fx;
  if (rl_fixture_init(&fx, FAMILIES, 2, ENV_CATALOG_FAMILY, 600, 5, &err) != 0) {
    CHECK(0, "fixture: %s", err.message);
    return;
  }
  EvalResults one, five, cut;
  CHECK(run_model(&fx, 1, EVAL_CHUNK, &one, &err) == 0, "1 slot: %s", err.message);
  CHECK(run_model(&fx, 5, EVAL_CHUNK, &five, &err) == 0, "5 slots: %s", err.message);
  CHECK(run_model(&fx, 1, 3, &cut, &err) == 0, "chunks of 3: %s", err.message);
  int same = one.count == 8 && five.count == 8 && cut.count == 8;
  for (int i = 0; same && i < one.count; i++)
    same = episodes_equal(&one.episodes[i], &five.episodes[i]) && episodes_equal(&one.episodes[i], &cut.episodes[i]);
  CHECK(same, "episodes bitwise the same at 1 and 5 slots, and in chunks of 3");
  // The sampled turns of the trajectory are the model's turns, and trials differ.
  for (int i = 0; i < one.count; i++) {
    const EvalEpisode *e = &one.episodes[i];
    int sampled = 0, users = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, e->trajectory) {
      int is_model = !strcmp(cJSON_GetObjectItem(t, "role")->valuestring, "model");
      sampled += cJSON_IsTrue(cJSON_GetObjectItem(t, "sampled"));
      users += !strcmp(cJSON_GetObjectItem(t, "role")->valuestring, "user");
      CHECK(is_model == cJSON_IsTrue(cJSON_GetObjectItem(t, "sampled")), "sampled turns are the model's, role \"%s\"",
            cJSON_GetObjectItem(t, "role")->valuestring);
    }
    CHECK(sampled == e->turns && users >= 1 && e->generated > 0 && e->tokens > e->generated,
          "episode %d: %d sampled turns, %d model turns", i, sampled, e->turns);
  }
  CHECK(one.episodes[0].env_seed != one.episodes[1].env_seed && !episodes_equal(&one.episodes[0], &one.episodes[1]),
        "the two trials of a task are different episodes");
  eval_results_free(&one);
  eval_results_free(&five);
  eval_results_free(&cut);
  rl_fixture_free(&fx);
}

int main(void) {
  test_pass_k();
  test_sign_test();
  test_band();
  test_round_trip();
  test_oracle();
  test_model();
  TEST_MAIN_END();
}
