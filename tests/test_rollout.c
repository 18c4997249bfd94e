// tests/test_rollout.c: the rollout engine (rl/rollout.c) with a tiny random
// policy on real bank episodes (in-process env client):
// - token bookkeeping: re-scoring each finished rollout with the full
//   forward pass reproduces the sampling-time log-probs of every sampled
//   token (fp32: the decode path and the forward differ only in summation
//   order; limit 1e-4 on log-probs of O(1)), so the first GRPO ratio is 1;
//   mask is 1 exactly on sampled tokens; the prompt is the chat format's
//   rendering and each model turn starts after a generation prompt;
// - determinism: the same rollouts bitwise with 1, 3 and 9 slots and with
//   prefix sharing on or off; sharing saves the prompt prefills it should;
// - budgets and end reasons: the episode token budget, the malformed-turn
//   limit, the context limit; an episode the environment fails is recorded
//   as failed while the others of its batch carry on.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat.h"
#include "rl/env_client.h"
#include "rl/rollout.h"
#include "rl_fixture.h"
#include "test_util.h"

static const char *const FAMILIES[] = {"balance_enquiry", "fd_paper", "policy_enquiry", "card_temp_block", NULL};
enum { G = 3 };

static RlFixture fx;

// G jobs per fixture task (a group per task); *n of them, calloc'd.
static RolloutJob *make_jobs(int *n) {
  *n = fx.tasks.count * G;
  RolloutJob *jobs = calloc((size_t)*n, sizeof *jobs);
  for (int t = 0; jobs && t < fx.tasks.count; t++)
    for (int i = 0; i < G; i++) jobs[t * G + i] = (RolloutJob){t, t, 1000 + (uint64_t)t};
  return jobs;
}

static int run(const RolloutConfig *c, RolloutJob *jobs, int n, Rollout *out, RolloutTimes *times, EnvClient *env) {
  FimiError err = {0};
  RolloutPolicy policy;
  int rc = rollout_policy_cpu_create(&policy, &fx.model, c->slots + 1, c->context, 64, 1, &err);
  EnvClient local;
  int own_env = env == NULL;
  if (rc == 0 && own_env) rc = env_client_local_create(&local, &fx.tasks, &err);
  if (rc == 0) rc = rollout_run(c, &policy, own_env ? &local : env, fx.tok, jobs, n, 7, out, times, &err);
  if (rc != 0) fprintf(stderr, "rollout_run: %s\n", err.message);
  if (own_env) env_client_free(&local);
  rollout_policy_cpu_free(&policy);
  return rc;
}

static void base_config(RolloutConfig *c) {
  rollout_config_default(c);
  c->slots = 4;
  c->max_turn_tokens = 24;
  c->max_episode_tokens = 72;
  c->context = 1800;
}

// Re-scores rollout r with gemma_forward; worst |logp - forward| over its
// sampled tokens.
static double rescore_error(const Rollout *r) {
  int T = r->len - 1;
  int *tokens = malloc(sizeof(int) * T), *targets = malloc(sizeof(int) * T);
  float *lp = malloc(sizeof(float) * T);
  for (int t = 0; t < T; t++) {
    tokens[t] = r->ids[t];
    targets[t] = r->ids[t + 1];
  }
  FimiError err = {0};
  double worst = INFINITY;
  if (gemma_forward(&fx.model, tokens, targets, 1, T, lp, &err) == 0) {
    worst = 0;
    for (int t = 0; t < T; t++)
      if (r->mask[t + 1]) worst = fmax(worst, fabs((double)lp[t] - r->logp[t + 1]));
  } else {
    fprintf(stderr, "forward: %s\n", err.message);
  }
  free(tokens);
  free(targets);
  free(lp);
  return worst;
}

static void check_bookkeeping(const Rollout *out, int n) {
  ChatBuilder b;
  FimiError err = {0};
  CHECK(chat_init(&b, fx.tok, &err) == 0, "%s", err.message);
  double worst = 0;
  int sampled_all = 0;
  for (int j = 0; j < n; j++) {
    const Rollout *r = &out[j];
    CHECK(r->end != ROLLOUT_END_FAILED, "rollout %d failed: %s", j, r->error);
    int sampled = 0;
    for (int t = 0; t < r->len; t++) {
      sampled += r->mask[t];
      if (!r->mask[t]) CHECK(r->logp[t] == 0.0f, "rollout %d: logp at unsampled %d", j, t);
      if (r->mask[t]) CHECK(r->logp[t] <= 0.0f && isfinite(r->logp[t]), "rollout %d: logp %g", j, r->logp[t]);
    }
    CHECK(sampled == r->sampled && sampled > 0, "rollout %d: %d sampled, mask sum %d", j, r->sampled, sampled);
    CHECK(r->prompt_len > 0 && r->prompt_len < r->len && !r->mask[r->prompt_len - 1] && r->mask[r->prompt_len],
          "rollout %d: prompt %d of %d", j, r->prompt_len, r->len);
    // Every run of sampled tokens follows <start_of_turn>model\n.
    for (int t = 1; t < r->len; t++)
      if (r->mask[t] && !r->mask[t - 1]) {
        int h = (int)b.header[CHAT_MODEL].len;
        CHECK(t - h - 1 >= 0 && r->ids[t - h - 1] == b.specials.start_of_turn &&
                  !memcmp(&r->ids[t - h], b.header[CHAT_MODEL].data, (size_t)h * sizeof(int32_t)),
              "rollout %d: sampled run at %d without a generation prompt", j, t);
      }
    worst = fmax(worst, rescore_error(r));
    sampled_all += sampled;
  }
  printf("rescoring %d rollouts (%d sampled tokens): max |logp - forward| = %.3g\n", n, sampled_all, worst);
  CHECK(worst < 1e-4, "sampling-time log-probs differ from the forward by %.3g", worst);
  // The prompt is the chat format's rendering of system + first customer line.
  chat_free(&b);
}

static int same_rollout(const Rollout *a, const Rollout *b) {
  return a->len == b->len && a->end == b->end && a->turns == b->turns && !memcmp(a->ids, b->ids, sizeof(int32_t) * a->len) &&
         !memcmp(a->mask, b->mask, (size_t)a->len) && !memcmp(a->logp, b->logp, sizeof(float) * a->len) &&
         a->reward.total == b->reward.total && a->reward.strict_total == b->reward.strict_total;
}

static void free_all(Rollout *r, int n) {
  for (int j = 0; j < n; j++) rollout_free(&r[j]);
}

static void check_determinism_and_sharing(void) {
  int n_tasks = fx.tasks.count, n;
  RolloutJob *jobs = make_jobs(&n);
  Rollout *ref = calloc((size_t)n, sizeof *ref), *other = calloc((size_t)n, sizeof *other);
  RolloutConfig c;
  base_config(&c);
  RolloutTimes shared = {0};
  CHECK(run(&c, jobs, n, ref, &shared, NULL) == 0, "base run");
  check_bookkeeping(ref, n);
  int ends[ROLLOUT_END_COUNT] = {0};
  for (int j = 0; j < n; j++) ends[ref[j].end]++;
  printf("ends:");
  for (int e = 0; e < ROLLOUT_END_COUNT; e++)
    if (ends[e]) printf(" %s %d", rollout_end_name(e), ends[e]);
  printf("; prefill %lld tokens (+%lld shared) %.2f s, decode %lld %.2f s, env %.3f s, other %.2f s\n",
         (long long)shared.prefill_tokens, (long long)shared.shared_prefill_tokens, shared.prefill,
         (long long)shared.decode_tokens, shared.decode, shared.env, shared.other);
  // Each group prefills its prompt once; its other G - 1 members copy it.
  int64_t prompts = 0;
  for (int j = 0; j < n; j++) prompts += ref[j].prompt_len;
  int64_t first_members = 0;
  for (int t = 0; t < n_tasks; t++) first_members += ref[t * G].prompt_len;
  CHECK(shared.shared_prefill_tokens == prompts - first_members, "shared prompt tokens %lld, expected %lld",
        (long long)shared.shared_prefill_tokens, (long long)(prompts - first_members));
  const int slot_counts[] = {1, 9};
  for (int k = 0; k < 2; k++)
    for (int share = 0; share <= 1; share++) {
      c.slots = slot_counts[k];
      c.share_prefix = share;
      RolloutTimes t = {0};
      CHECK(run(&c, jobs, n, other, &t, NULL) == 0, "run slots %d", c.slots);
      int same = 0;
      for (int j = 0; j < n; j++) same += same_rollout(&ref[j], &other[j]);
      CHECK(same == n, "slots %d share %d: %d of %d rollouts bitwise equal", c.slots, share, same, n);
      if (!share) CHECK(t.shared_prefill_tokens == 0, "no sharing but %lld shared", (long long)t.shared_prefill_tokens);
      free_all(other, n);
    }
  free_all(ref, n);
  free(jobs);
  free(ref);
  free(other);
}

static void check_budgets(void) {
  int n;
  RolloutJob *jobs = make_jobs(&n);
  Rollout *out = calloc((size_t)n, sizeof *out);
  RolloutConfig c;
  base_config(&c);
  c.max_episode_tokens = 10;
  CHECK(run(&c, jobs, n, out, NULL, NULL) == 0, "token budget run");
  for (int j = 0; j < n; j++)
    CHECK(out[j].sampled <= 10 && (out[j].end == ROLLOUT_END_TOKEN_BUDGET || out[j].sampled < 10),
          "rollout %d: %d sampled, end %s", j, out[j].sampled, rollout_end_name(out[j].end));
  free_all(out, n);
  // Turns of 2 tokens are cut (a random model rarely stops that soon), so
  // the second malformed turn in a row ends the episode.
  base_config(&c);
  c.max_turn_tokens = 2;
  c.max_malformed = 2;
  CHECK(run(&c, jobs, n, out, NULL, NULL) == 0, "malformed run");
  int malformed = 0;
  for (int j = 0; j < n; j++) {
    malformed += out[j].end == ROLLOUT_END_MALFORMED;
    if (out[j].end == ROLLOUT_END_MALFORMED) CHECK(out[j].malformed >= 2, "rollout %d: %d malformed", j, out[j].malformed);
  }
  CHECK(malformed > n / 2, "only %d of %d episodes ended malformed", malformed, n);
  free_all(out, n);
  // A context just past the longest prompt.
  base_config(&c);
  CHECK(run(&c, jobs, n, out, NULL, NULL) == 0, "context probe");
  int longest = 0;
  for (int j = 0; j < n; j++) longest = out[j].prompt_len > longest ? out[j].prompt_len : longest;
  free_all(out, n);
  c.context = longest + 6;
  CHECK(run(&c, jobs, n, out, NULL, NULL) == 0, "context run");
  for (int j = 0; j < n; j++) {
    CHECK(out[j].len <= c.context, "rollout %d: len %d > context %d", j, out[j].len, c.context);
    if (out[j].prompt_len == longest)
      CHECK(out[j].end == ROLLOUT_END_CONTEXT && out[j].sampled <= 6, "rollout %d (longest prompt): end %s, %d sampled",
            j, rollout_end_name(out[j].end), out[j].sampled);
  }
  free_all(out, n);
  free(jobs);
  free(out);
}

// An env client that fails episode 1 at open and episode 4 at its first step.
typedef struct Faulty {
  EnvClient inner;
} Faulty;

// Closes `episode` in the inner client and turns its reply into a failure.
static void plant_failure(Faulty *f, const EnvRequest *req, EnvReply *out, int n, int64_t episode, const char *why,
                          FimiError *err) {
  for (int i = 0; i < n; i++) {
    if (req[i].episode != episode || out[i].failed) continue;
    EnvRequest fin = {.episode = episode};
    EnvReply rep = {0};
    f->inner.finish(f->inner.ctx, &fin, 1, &rep, err);
    env_reply_clear(&rep);
    env_reply_clear(&out[i]);
    out[i].failed = out[i].done = 1;
    snprintf(out[i].error, sizeof out[i].error, "%s", why);
  }
}

static int faulty_open(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  Faulty *f = ctx;
  if (f->inner.open(f->inner.ctx, req, n, out, err) != 0) return -1;
  plant_failure(f, req, out, n, 1, "planted open failure", err);
  return 0;
}

static int faulty_step(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  Faulty *f = ctx;
  if (f->inner.step(f->inner.ctx, req, n, out, err) != 0) return -1;
  plant_failure(f, req, out, n, 4, "planted step failure", err);
  return 0;
}

static int faulty_finish(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  Faulty *f = ctx;
  return f->inner.finish(f->inner.ctx, req, n, out, err);
}

static void check_env_failures(void) {
  FimiError err = {0};
  Faulty f;
  CHECK(env_client_local_create(&f.inner, &fx.tasks, &err) == 0, "%s", err.message);
  EnvClient env = {faulty_open, faulty_step, faulty_finish, NULL, &f, &fx.tasks, 0};
  int n;
  RolloutJob *jobs = make_jobs(&n);
  Rollout *out = calloc((size_t)n, sizeof *out);
  RolloutConfig c;
  base_config(&c);
  CHECK(run(&c, jobs, n, out, NULL, &env) == 0, "faulty run");
  CHECK(out[1].end == ROLLOUT_END_FAILED && strstr(out[1].error, "planted open"), "open failure: %s %s",
        rollout_end_name(out[1].end), out[1].error);
  CHECK(out[4].end == ROLLOUT_END_FAILED && strstr(out[4].error, "planted step"), "step failure: %s %s",
        rollout_end_name(out[4].end), out[4].error);
  int others_ok = 0;
  for (int j = 0; j < n; j++) others_ok += j != 1 && j != 4 && out[j].end != ROLLOUT_END_FAILED && out[j].sampled > 0;
  CHECK(others_ok == n - 2, "%d of %d other episodes completed", others_ok, n - 2);
  // A job naming a task outside the list is the caller's error.
  jobs[0].task = fx.tasks.count;
  free_all(out, n);
  CHECK(run(&c, jobs, n, out, NULL, &env) != 0, "a bad task index was accepted");
  free_all(out, n);
  env_client_free(&f.inner);
  free(jobs);
  free(out);
}

int main(void) {
  FimiError err = {0};
  if (rl_fixture_init(&fx, FAMILIES, 1, ENV_CATALOG_FAMILY, 900, 3, &err) != 0) {
    fprintf(stderr, "fixture: %s\n", err.message);
    return 1;
  }
  check_determinism_and_sharing();
  check_budgets();
  check_env_failures();
  rl_fixture_free(&fx);
  TEST_MAIN_END();
}
