// eval/harness.c: the held-out harness: episodes, seeds, the rollout
// engine's output turned into EvalEpisodes, scripted agents.
#include "eval/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/progress.h"
#include "core/rng.h"
#include "data/toolcall.h"
#include "eval/episode_record.h"

void eval_config_default(EvalConfig *c) {
  memset(c, 0, sizeof *c);
  c->trials = 1;
  c->seed = 1;
  c->success = 1.0;
  rollout_config_default(&c->rollout);
  c->rollout.sampler.temperature = 0.0f;
  c->progress = 1;
  c->chunk = EVAL_CHUNK;
}

int eval_config_validate(const EvalConfig *c, FimiError *err) {
  if (c->trials < 1 || c->trials > 1000) return fimi_fail(err, "eval.trials: %d, must be in [1, 1000]", c->trials);
  if (c->chunk < 1) return fimi_fail(err, "eval chunk: %d, must be >= 1", c->chunk);
  if (!(c->success > 0.0 && c->success <= 1.0))
    return fimi_fail(err, "eval.success: %g, must be in (0, 1]", c->success);
  return rollout_config_validate(&c->rollout, err);
}

uint64_t eval_env_seed(uint64_t seed, const char *task_id, int trial) {
  return rng_mix(rng_mix(seed, hash_fnv1a_text(HASH_FNV1A_SHORT_BASIS, task_id)), (uint64_t)trial);
}

// ---- progress -------------------------------------------------------------------------------

static void progress_note(Progress *p, const EvalResults *out, int first, int done, int on) {
  if (!on) return;
  double reward = 0;
  for (int i = first; i < out->count; i++) reward += out->episodes[i].reward.total;
  char extra[64];
  snprintf(extra, sizeof extra, "reward %.3f", out->count > first ? reward / (out->count - first) : 0.0);
  progress_update(p, done, done, "episodes", extra);
}

// ---- model episodes ---------------------------------------------------------------------------

// How many leading ids spell the turn's role line ("model\n"): the
// shortest prefix whose text ends at its first newline (0: none in the
// first few). Decoded apart from the body because a run of byte tokens
// that is not valid UTF-8 decodes to U+FFFD as a whole (as `tokenizers`
// does), which would swallow the newline of a role line followed by
// broken sampled bytes.
static int role_tokens(const Tokenizer *tok, const int32_t *ids, int n, FimiError *err) {
  for (int k = 1; k <= n && k <= 8; k++) {
    char *text = NULL;
    size_t len = 0;
    if (tokenizer_decode(tok, ids, (size_t)k, 0, &text, &len, err) != 0) return -1;
    char *newline = memchr(text, '\n', len);
    int ends = newline && newline == text + len - 1;
    free(text);
    if (newline) return ends ? k : 0;
  }
  return 0;
}

// One chat turn of the ids: the role line and the text up to <end_of_turn>.
static int add_turn(cJSON *trajectory, const Tokenizer *tok, const int32_t *ids, int n, int sampled, FimiError *err) {
  int k = role_tokens(tok, ids, n, err);
  char *role = NULL, *text = NULL;
  size_t role_len = 0, len = 0;
  if (k < 0 || tokenizer_decode(tok, ids, (size_t)k, 0, &role, &role_len, err) != 0) return -1;
  if (tokenizer_decode(tok, ids + k, (size_t)(n - k), 0, &text, &len, err) != 0) {
    free(role);
    return -1;
  }
  if (role_len > 0) role[role_len - 1] = '\0';  // the newline
  cJSON *turn = cJSON_CreateObject();
  cJSON_AddStringToObject(turn, "role", role);
  cJSON_AddStringToObject(turn, "text", text);
  cJSON_AddBoolToObject(turn, "sampled", sampled);
  cJSON_AddItemToArray(trajectory, turn);
  free(role);
  free(text);
  return 0;
}

// The rollout's ids cut at <start_of_turn> ... <end_of_turn> into turns; a
// turn cut by a budget runs to the end. Tokens outside turns (<bos>) are
// not shown.
static cJSON *rollout_trajectory(const Rollout *r, const Tokenizer *tok, FimiError *err) {
  const TokenizerSpecials *sp = tokenizer_specials(tok);
  cJSON *trajectory = cJSON_CreateArray();
  if (!trajectory) {
    fimi_fail(err, "out of memory");
    return NULL;
  }
  int i = 0;
  while (i < r->len) {
    if (r->ids[i] != sp->start_of_turn) {
      i++;
      continue;
    }
    int start = i + 1, end = start, sampled = 0;
    while (end < r->len && r->ids[end] != sp->end_of_turn) sampled |= r->mask[end++];
    if (end < r->len) sampled |= r->mask[end];  // the policy's own <end_of_turn>
    if (add_turn(trajectory, tok, r->ids + start, end - start, sampled, err) != 0) {
      cJSON_Delete(trajectory);
      return NULL;
    }
    i = end + 1;
  }
  return trajectory;
}

static int record_rollout(EvalEpisode *e, const Rollout *r, const Task *task, int trial, const Tokenizer *tok,
                          FimiError *err) {
  if (eval_episode_set_task(e, task, err) != 0) return -1;
  e->trial = trial;
  e->env_seed = r->env_seed;
  e->reward = r->reward;
  snprintf(e->end, sizeof e->end, "%s", rollout_end_name(r->end));
  e->failed = r->end == ROLLOUT_END_FAILED;
  e->turns = r->turns;
  e->tool_calls = r->tool_calls;
  e->tool_errors = r->tool_errors;
  e->malformed = r->malformed;
  e->generated = r->sampled;
  e->tokens = r->len;
  e->trajectory = rollout_trajectory(r, tok, err);
  if (e->trajectory && e->failed) {
    cJSON *note = cJSON_CreateObject();
    cJSON_AddStringToObject(note, "role", "error");
    cJSON_AddStringToObject(note, "text", r->error);
    cJSON_AddItemToArray(e->trajectory, note);
  }
  return e->trajectory ? 0 : -1;
}

// Jobs [first, first + n) of the tasks x trials order (task-major).
static int play_chunk(const EvalConfig *c, RolloutPolicy *policy, EnvClient *env, const Tokenizer *tok, int first,
                      int n, EvalResults *out, FimiError *err) {
  RolloutJob *jobs = fimi_malloc((size_t)n * sizeof *jobs, err);
  Rollout *played = jobs ? fimi_calloc((size_t)n, sizeof *played, err) : NULL;
  int rc = played ? 0 : -1;
  for (int j = 0; rc == 0 && j < n; j++) {
    int g = first + j, task = g / c->trials, trial = g % c->trials;
    jobs[j] = (RolloutJob){task, j, eval_env_seed(c->seed, env->tasks->tasks[task].id, trial)};
  }
  // One call's streams cut into parts: episode g samples from stream g
  // whatever the chunk it is played in.
  uint64_t stream = rng_mix(c->seed, 0xe7a1ULL);
  if (rc == 0) rc = rollout_run_part(&c->rollout, policy, env, tok, jobs, n, first, stream, played, NULL, err);
  for (int j = 0; rc == 0 && j < n; j++) {
    EvalEpisode *e = eval_results_add(out, err);
    int g = first + j;
    rc = e ? record_rollout(e, &played[j], &env->tasks->tasks[jobs[j].task], g % c->trials, tok, err) : -1;
  }
  for (int j = 0; played && j < n; j++) rollout_free(&played[j]);
  free(played);
  free(jobs);
  return rc;
}

int eval_run_policy(const EvalConfig *c, RolloutPolicy *policy, EnvClient *env, const Tokenizer *tok,
                    EvalResults *out, FimiError *err) {
  if (eval_config_validate(c, err) != 0) return -1;
  RolloutConfig rc = c->rollout;
  rc.share_prefix = 0;  // one episode per (task, trial): nothing to share
  EvalConfig run = *c;
  run.rollout = rc;
  int total = env->tasks->count * c->trials, first_episode = out->count;
  int chunk = c->chunk > policy->slots ? c->chunk : policy->slots;
  Progress p;
  if (c->progress) progress_start(&p, "eval", total, stderr);
  for (int first = 0; first < total; first += chunk) {
    int n = total - first < chunk ? total - first : chunk;
    if (play_chunk(&run, policy, env, tok, first, n, out, err) != 0)
      return fimi_fail_wrap(err, "episodes %d..%d", first, first + n - 1);
    progress_note(&p, out, first_episode, first + n, c->progress);
  }
  if (c->progress) progress_finish(&p);
  return 0;
}

// ---- scripted agents ----------------------------------------------------------------------------

static int play_agent(EnvWorld *world, EnvAgentKind kind, const Task *task, int trial, uint64_t seed, EvalEpisode *e,
                      FimiError *err) {
  if (eval_episode_set_task(e, task, err) != 0) return -1;
  e->trial = trial;
  e->env_seed = seed;
  EnvAgent *agent = NULL;
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  if (agent_create(kind, seed, &agent, err) != 0) return -1;
  EnvObservation obs = {0};
  int rc = env_open(world, task, seed, &ep, &first, err);
  if (rc == 0) rc = agent_play(agent, ep, &obs, err);
  if (rc == 0) rc = env_score(ep, &e->reward, err);
  if (rc == 0) rc = eval_record_env_turns(e, ep, err);
  if (rc == 0) {
    e->turns = env_episode_turns_used(ep);
    snprintf(e->end, sizeof e->end, "%s", eval_agent_end_name(obs.end));
  }
  if (ep) env_close(ep);
  agent_free(agent);
  return rc == 0 ? 0 : eval_record_failure(e, err);
}

int eval_run_agent(const EvalConfig *c, EnvAgentKind kind, const TaskList *tasks, EvalResults *out, FimiError *err) {
  if (eval_config_validate(c, err) != 0) return -1;
  EnvWorld *world = NULL;
  if (env_world_create(&world, err) != 0) return -1;
  env_world_set_customer_model(world, c->customer, c->customer_temperature);
  int total = tasks->count * c->trials, rc = 0, first_episode = out->count;
  Progress p;
  if (c->progress) progress_start(&p, "eval", total, stderr);
  for (int g = 0; rc == 0 && g < total; g++) {
    const Task *task = &tasks->tasks[g / c->trials];
    EvalEpisode *e = eval_results_add(out, err);
    rc = e ? play_agent(world, kind, task, g % c->trials, eval_env_seed(c->seed, task->id, g % c->trials), e, err)
           : -1;
    if (rc != 0) fimi_fail_wrap(err, "task %s, trial %d", task->id, g % c->trials);
    if (rc == 0 && ((g + 1) % c->chunk == 0 || g + 1 == total)) progress_note(&p, out, first_episode, g + 1, c->progress);
  }
  if (c->progress) progress_finish(&p);
  env_world_free(world);
  return rc;
}
