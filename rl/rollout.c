// rl/rollout.c: the rollout engine (rl/rollout.h). One loop: fill free slots
// with waiting episodes, sample one token for every slot in a model turn,
// close the turns that ended (one batched env step for all of them), append
// and prefill the observations, finish the episodes that ended (one batched
// score), then one batched decode step for the slots still in a turn.
#include "rl/rollout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/progress.h"
#include "core/rng.h"
#include "data/chat.h"
#include "data/toolcall.h"

static const char *const end_names[ROLLOUT_END_COUNT] = {"stop",         "transfer", "out_of_scope", "turn_budget",
                                                         "token_budget", "context",  "malformed",    "failed"};

const char *rollout_end_name(RolloutEnd end) {
  return end >= 0 && end < ROLLOUT_END_COUNT ? end_names[end] : "?";
}

void rollout_config_default(RolloutConfig *c) {
  memset(c, 0, sizeof *c);
  c->sampler = (SamplerConfig){1.0f, 1.0f};
  c->slots = 8;
  c->max_turn_tokens = 256;
  c->max_episode_tokens = 1024;
  c->context = 2048;
  c->max_malformed = 3;
  c->share_prefix = 1;
  c->catalog = ENV_CATALOG_FAMILY;
}

int rollout_config_validate(const RolloutConfig *c, FimiError *err) {
  if (!(c->sampler.temperature >= 0) || !(c->sampler.top_p > 0 && c->sampler.top_p <= 1))
    return fimi_fail(err, "grpo.temperature must be >= 0 and grpo.top_p in (0, 1]");
  if (c->slots < 1 || c->slots > 4096) return fimi_fail(err, "rollout.slots must be in [1, 4096] (got %d)", c->slots);
  if (c->max_turn_tokens < 1) return fimi_fail(err, "grpo.max_turn_tokens must be >= 1");
  if (c->max_episode_tokens < 1) return fimi_fail(err, "grpo.max_episode_tokens must be >= 1");
  if (c->context < 8) return fimi_fail(err, "grpo.context must be >= 8 (got %d)", c->context);
  if (c->max_malformed < 1) return fimi_fail(err, "grpo.max_malformed must be >= 1");
  if (!env_catalog_mode_name(c->catalog)) return fimi_fail(err, "env.catalog: invalid mode");
  return 0;
}

void rollout_free(Rollout *r) {
  free(r->ids);
  free(r->mask);
  free(r->logp);
  memset(r, 0, sizeof *r);
}

// ---- the CPU policy ----------------------------------------------------------------

typedef struct CpuPolicy {
  GemmaModel *model;
  GemmaKVCache cache;
} CpuPolicy;

static int cpu_prefill(void *ctx, int slot, const int *tokens, int n, float *logits, FimiError *err) {
  CpuPolicy *p = ctx;
  return gemma_prefill(p->model, &p->cache, slot, tokens, n, logits, err);
}

static int cpu_decode(void *ctx, const int *tokens, const int *active, float *logits, FimiError *err) {
  CpuPolicy *p = ctx;
  return gemma_decode_step(p->model, &p->cache, tokens, active, logits, err);
}

static int cpu_copy(void *ctx, int dst, int src, FimiError *err) {
  CpuPolicy *p = ctx;
  return gemma_kv_cache_copy_sequence(&p->cache, &p->model->config, dst, src, err);
}

static void cpu_reset(void *ctx, int slot) { ((CpuPolicy *)ctx)->cache.lengths[slot] = 0; }

// Positions past a sequence's length are never read and are overwritten
// as it grows again, so the length alone truncates it.
static void cpu_truncate(void *ctx, int slot, int length) {
  int *cached = &((CpuPolicy *)ctx)->cache.lengths[slot];
  if (length >= 0 && length < *cached) *cached = length;
}

int rollout_policy_cpu_create(RolloutPolicy *p, GemmaModel *model, int slots, int capacity, int chunk,
                              int row_invariant, FimiError *err) {
  memset(p, 0, sizeof *p);
  CpuPolicy *cpu = fimi_calloc(1, sizeof *cpu, err);
  if (!cpu) return -1;
  cpu->model = model;
  if (gemma_kv_cache_create_rows(&cpu->cache, &model->config, slots, capacity, chunk, err) != 0) {
    free(cpu);
    return fimi_fail_wrap(err, "rollout policy");
  }
  cpu->cache.row_invariant = row_invariant;
  *p = (RolloutPolicy){cpu_prefill, cpu_decode,       cpu_copy, cpu_reset, cpu_truncate,
                       cpu,         model->config.vocab_size, slots,    capacity};
  return 0;
}

void rollout_policy_cpu_free(RolloutPolicy *p) {
  CpuPolicy *cpu = p->ctx;
  if (cpu) {
    gemma_kv_cache_free(&cpu->cache);
    free(cpu);
  }
  memset(p, 0, sizeof *p);
}

// ---- one episode in a slot ---------------------------------------------------------

typedef struct Slot {
  int job;            // -1: free
  int cached;         // ids in the policy's cache for this slot
  int feed;           // token to decode next, -1 none (turn closed)
  Rng rng;
  ChatBuilder chat;
  int32_t *turn;      // (max_turn_tokens) this model turn's sampled ids
  float *turn_logp;
  int turn_len;
  int malformed_in_row;
  float *logp;        // (chat.ids.len) parallel to the builder's ids
  size_t logp_cap;
  int ending;         // set when the episode ends this round
  RolloutEnd end;
} Slot;

typedef struct Engine {
  const RolloutConfig *c;
  RolloutPolicy *policy;
  EnvClient *env;
  const Tokenizer *tok;
  const RolloutJob *jobs;
  Rollout *out;
  Slot *slots;
  float *logits;       // (policy->slots, V)
  int prefix_slot;     // -1: no sharing
  int prefix_group;    // group whose prompt the prefix slot holds (-1 none)
  int32_t *prefix_ids; // its prompt ids
  int prefix_len;
  RolloutTimes *times;
  uint64_t seed;
  int first;           // stream index of jobs[0] (rollout_run_part)
} Engine;

// Ids that may follow a model turn's last sampled id when it is closed:
// <end_of_turn> and "\n" (chat_append_generated). An episode's ids, closing
// ones included, must fit in grpo.context, which may equal the model's
// positions.
static int closing_len(const Slot *s) { return 1 + (int)s->chat.newline.len; }

// 1 when a slot's ids leave room for one sampled id and the turn's closing.
static int turn_fits(const Engine *e, const Slot *s) {
  return (int)s->chat.ids.len + 1 + closing_len(s) <= e->c->context;
}

static int grow_logp(Slot *s, size_t need, FimiError *err) {
  if (need <= s->logp_cap) return 0;
  size_t cap = need * 2 > 256 ? need * 2 : 256;
  float *bigger = realloc(s->logp, cap * sizeof *bigger);
  if (!bigger) return fimi_fail(err, "rollout: out of memory");
  s->logp = bigger;
  s->logp_cap = cap;
  return 0;
}

// Zeros for the ids the builder appended beyond those logp already covers.
static int pad_logp(Slot *s, size_t from, FimiError *err) {
  if (grow_logp(s, s->chat.ids.len, err) != 0) return -1;
  for (size_t i = from; i < s->chat.ids.len; i++) s->logp[i] = 0.0f;
  return 0;
}

// Feeds ids[cached..len) of the slot to the policy; logits row of the slot.
static int prefill_pending(Engine *e, int slot, FimiError *err) {
  Slot *s = &e->slots[slot];
  int n = (int)s->chat.ids.len - s->cached;
  if (n <= 0) return fimi_fail(err, "rollout: nothing to prefill in slot %d", slot);
  double t0 = monotonic_seconds();
  int rc = e->policy->prefill(e->policy->ctx, slot, s->chat.ids.data + s->cached, n,
                              e->logits + (size_t)slot * e->policy->vocab, err);
  e->times->prefill += monotonic_seconds() - t0;
  e->times->prefill_tokens += n;
  s->cached += n;
  return rc;
}

static void mark_end(Slot *s, RolloutEnd end) {
  s->ending = 1;
  s->end = end;
  s->feed = -1;
}

static RolloutEnd end_from_task(TaskEnd end) {
  switch (end) {
    case TASK_END_STOP: return ROLLOUT_END_STOP;
    case TASK_END_TRANSFER: return ROLLOUT_END_TRANSFER;
    case TASK_END_OUT_OF_SCOPE: return ROLLOUT_END_OUT_OF_SCOPE;
    default: return ROLLOUT_END_TURN_BUDGET;
  }
}

// The prompt: <bos>, system turn, first customer turn, generation prompt.
static int build_prompt(Engine *e, Slot *s, const Task *task, const char *first, FimiError *err) {
  char *system = env_agent_system_text_syntax(task, e->c->catalog, chat_tool_syntax(&s->chat), err);
  if (!system) return -1;
  chat_reset(&s->chat);
  int rc = chat_begin(&s->chat, err);
  if (rc == 0) rc = chat_append_turn(&s->chat, CHAT_SYSTEM, system, strlen(system), err);
  if (rc == 0) rc = chat_append_turn(&s->chat, CHAT_USER, first, strlen(first), err);
  if (rc == 0) rc = chat_append_generation_prompt(&s->chat, err);
  free(system);
  return rc == 0 ? pad_logp(s, 0, err) : fimi_fail_wrap(err, "task %s: prompt", task->id);
}

// The prompt into the slot's cache: copied from the group's shared prefill
// when the prefix slot holds the same ids, else prefilled (into the prefix
// slot first when sharing, so the group's next members can copy it).
static int load_prompt(Engine *e, int slot, const RolloutJob *job, FimiError *err) {
  Slot *s = &e->slots[slot];
  int V = e->policy->vocab, n = (int)s->chat.ids.len;
  e->policy->reset(e->policy->ctx, slot);
  s->cached = 0;
  if (e->prefix_slot < 0) return prefill_pending(e, slot, err);
  int same = e->prefix_group == job->group && e->prefix_len == n &&
             !memcmp(e->prefix_ids, s->chat.ids.data, (size_t)n * sizeof(int32_t));
  if (!same) {
    int32_t *ids = realloc(e->prefix_ids, (size_t)n * sizeof *ids);
    if (!ids) return fimi_fail(err, "rollout: out of memory");
    e->prefix_ids = ids;
    memcpy(ids, s->chat.ids.data, (size_t)n * sizeof *ids);
    e->prefix_len = n;
    e->prefix_group = job->group;
    e->policy->reset(e->policy->ctx, e->prefix_slot);
    double t0 = monotonic_seconds();
    int rc = e->policy->prefill(e->policy->ctx, e->prefix_slot, ids, n, e->logits + (size_t)e->prefix_slot * V, err);
    e->times->prefill += monotonic_seconds() - t0;
    e->times->prefill_tokens += n;
    if (rc != 0) {
      e->prefix_group = -1;
      return -1;
    }
  } else {
    e->times->shared_prefill_tokens += n;
  }
  if (e->policy->copy(e->policy->ctx, slot, e->prefix_slot, err) != 0) return -1;
  memcpy(e->logits + (size_t)slot * V, e->logits + (size_t)e->prefix_slot * V, (size_t)V * sizeof(float));
  s->cached = n;
  return 0;
}

// Copies the finished episode into its Rollout.
static int store_rollout(Engine *e, Slot *s, FimiError *err) {
  Rollout *r = &e->out[s->job];
  size_t n = s->chat.ids.len;
  r->ids = malloc(n * sizeof *r->ids);
  r->mask = malloc(n);
  r->logp = malloc(n * sizeof *r->logp);
  if (!r->ids || !r->mask || !r->logp) return fimi_fail(err, "rollout: out of memory");
  memcpy(r->ids, s->chat.ids.data, n * sizeof *r->ids);
  memcpy(r->mask, s->chat.mask, n);
  memcpy(r->logp, s->logp, n * sizeof *r->logp);
  r->len = r->cap = (int)n;
  r->sampled = 0;
  for (size_t i = 0; i < n; i++) r->sampled += r->mask[i];
  r->end = s->end;
  return 0;
}

// ---- the loop's phases ------------------------------------------------------------------

// Opens waiting jobs into free slots (one batched open), builds and loads
// their prompts. *next advances over the jobs taken.
static int fill_slots(Engine *e, int n_jobs, int *next, FimiError *err) {
  int free_slots[4096], taken = 0;
  for (int i = 0; i < e->c->slots && *next + taken < n_jobs; i++)
    if (e->slots[i].job < 0) free_slots[taken++] = i;
  if (taken == 0) return 0;
  EnvRequest *req = calloc((size_t)taken, sizeof *req);
  EnvReply *rep = calloc((size_t)taken, sizeof *rep);
  int rc = req && rep ? 0 : fimi_fail(err, "rollout: out of memory");
  for (int i = 0; rc == 0 && i < taken; i++) {
    const RolloutJob *job = &e->jobs[*next + i];
    req[i] = (EnvRequest){.episode = *next + i, .task = job->task, .seed = job->env_seed,
                          .syntax = chat_tool_syntax(&e->slots[0].chat)};
  }
  double t0 = monotonic_seconds();
  if (rc == 0) rc = e->env->open(e->env->ctx, req, taken, rep, err);
  e->times->env += monotonic_seconds() - t0;
  for (int i = 0; rc == 0 && i < taken; i++) {
    int j = *next + i, slot = free_slots[i];
    Rollout *r = &e->out[j];
    const RolloutJob *job = &e->jobs[j];
    r->task = job->task;
    r->group = job->group;
    r->env_seed = job->env_seed;
    if (rep[i].failed) {
      r->end = ROLLOUT_END_FAILED;
      snprintf(r->error, sizeof r->error, "%s", rep[i].error);
      continue;  // the client closed it; the slot stays free for the next round
    }
    Slot *s = &e->slots[slot];
    s->job = j;
    s->feed = -1;
    s->turn_len = 0;
    s->malformed_in_row = 0;
    s->ending = 0;
    rng_seed(&s->rng, e->seed ^ ((uint64_t)(e->first + j + 1) * 0x9E3779B97F4A7C15ULL));
    const Task *task = &e->env->tasks->tasks[job->task];
    rc = build_prompt(e, s, task, rep[i].text, err);
    r->prompt_len = (int)s->chat.ids.len;
    if (rc == 0 && !turn_fits(e, s)) {
      mark_end(s, ROLLOUT_END_CONTEXT);
      continue;
    }
    if (rc == 0) rc = load_prompt(e, slot, job, err);
  }
  *next += taken;
  for (int i = 0; rep && i < taken; i++) env_reply_clear(&rep[i]);
  free(req);
  free(rep);
  return rc;
}

static double log_softmax_at(const float *logits, int V, int tok) {
  double mx = -INFINITY, sum = 0;
  for (int v = 0; v < V; v++)
    if (logits[v] > mx) mx = logits[v];
  for (int v = 0; v < V; v++) sum += exp((double)logits[v] - mx);
  return (double)logits[tok] - mx - log(sum);
}

// Samples one token for every slot in a model turn; a slot whose turn ends
// (a stop token, the turn's or the episode's token limit, the context) gets
// feed -1, the others feed the token to the next decode step.
static void sample_all(Engine *e) {
  int V = e->policy->vocab;
  int32_t eot = e->slots[0].chat.specials.end_of_turn, eos = e->slots[0].chat.specials.eos;
  for (int i = 0; i < e->c->slots; i++) {
    Slot *s = &e->slots[i];
    if (s->job < 0 || s->ending) continue;
    const float *row = e->logits + (size_t)i * V;
    int tok = sample_token(row, V, &e->c->sampler, &s->rng);
    s->turn[s->turn_len] = tok;
    s->turn_logp[s->turn_len] = (float)log_softmax_at(row, V, tok);
    s->turn_len++;
    int sampled_total = e->out[s->job].sampled + s->turn_len;
    int stop = tok == eot || (eos >= 0 && tok == eos);
    int full = s->turn_len >= e->c->max_turn_tokens || sampled_total >= e->c->max_episode_tokens ||
               s->cached + 1 + closing_len(s) >= e->c->context;
    s->feed = stop || full ? -1 : tok;
  }
}

// 1 when the observation is a tool turn carrying an error.
static int is_tool_error(const Slot *s, const EnvReply *rep) {
  return rep->kind == ENV_REPLY_TOOL && toolcall_result_is_error(chat_tool_syntax(&s->chat), rep->text);
}

// Closes a slot's ended turn into the builder; *text gets its decoded text
// (without the final stop token), *malformed whether it is cut or a broken call.
static int close_turn(Engine *e, Slot *s, char **text, size_t *len, int *malformed, FimiError *err) {
  int32_t eot = s->chat.specials.end_of_turn, eos = s->chat.specials.eos;
  int n = s->turn_len, last = s->turn[n - 1];
  int stopped = last == eot || (eos >= 0 && last == eos);
  size_t before = s->chat.ids.len;
  if (chat_append_generated(&s->chat, s->turn, (size_t)n, err) != 0) return -1;
  if (pad_logp(s, before, err) != 0) return -1;
  memcpy(s->logp + before, s->turn_logp, (size_t)n * sizeof(float));
  e->out[s->job].sampled += n;
  e->out[s->job].turns++;
  if (tokenizer_decode(e->tok, s->turn, (size_t)(stopped ? n - 1 : n), 0, text, len, err) != 0) return -1;
  ToolCallParse parse;
  ToolCallKind kind = chat_parse_model_turn(&s->chat, *text, *len, &parse);
  toolcall_parse_free(&parse);
  *malformed = !stopped || kind == TOOLCALL_ERROR;
  if (kind == TOOLCALL_TOOL_CALL) e->out[s->job].tool_calls++;
  s->turn_len = 0;
  return 0;
}

// Ends the turns that finished this round: one batched env step, then each
// observation appended and prefilled (or the episode marked as ending).
static int step_turns(Engine *e, FimiError *err) {
  int n = 0, idx[4096];
  char *texts[4096];
  size_t lens[4096];
  int rc = 0;
  for (int i = 0; rc == 0 && i < e->c->slots; i++) {
    Slot *s = &e->slots[i];
    if (s->job < 0 || s->ending || s->feed >= 0 || s->turn_len == 0) continue;
    int malformed = 0;
    char *text = NULL;
    size_t len = 0;
    rc = close_turn(e, s, &text, &len, &malformed, err);
    if (rc != 0) {
      free(text);
      break;
    }
    Rollout *r = &e->out[s->job];
    r->malformed += malformed;
    s->malformed_in_row = malformed ? s->malformed_in_row + 1 : 0;
    if (r->sampled >= e->c->max_episode_tokens) mark_end(s, ROLLOUT_END_TOKEN_BUDGET);
    else if (s->malformed_in_row >= e->c->max_malformed) mark_end(s, ROLLOUT_END_MALFORMED);
    else if ((int)s->chat.ids.len >= e->c->context) mark_end(s, ROLLOUT_END_CONTEXT);
    if (s->ending) {
      free(text);
      continue;
    }
    idx[n] = i;
    texts[n] = text;
    lens[n] = len;
    n++;
  }
  EnvRequest *req = n ? calloc((size_t)n, sizeof *req) : NULL;
  EnvReply *rep = n ? calloc((size_t)n, sizeof *rep) : NULL;
  if (rc == 0 && n && (!req || !rep)) rc = fimi_fail(err, "rollout: out of memory");
  for (int k = 0; rc == 0 && k < n; k++)
    req[k] = (EnvRequest){.episode = e->slots[idx[k]].job, .text = texts[k], .len = lens[k]};
  double t0 = monotonic_seconds();
  if (rc == 0 && n) rc = e->env->step(e->env->ctx, req, n, rep, err);
  e->times->env += monotonic_seconds() - t0;
  for (int k = 0; rc == 0 && k < n; k++) {
    Slot *s = &e->slots[idx[k]];
    Rollout *r = &e->out[s->job];
    if (rep[k].failed) {
      snprintf(r->error, sizeof r->error, "%s", rep[k].error);
      mark_end(s, ROLLOUT_END_FAILED);
      continue;
    }
    r->tool_errors += is_tool_error(s, &rep[k]);
    ChatRole role = rep[k].kind == ENV_REPLY_TOOL ? CHAT_TOOL : CHAT_USER;
    size_t before = s->chat.ids.len;
    FimiError turn_err = {0};
    if (chat_append_turn(&s->chat, role, rep[k].text, strlen(rep[k].text), &turn_err) != 0) {
      snprintf(r->error, sizeof r->error, "observation: %s", turn_err.message);
      mark_end(s, ROLLOUT_END_FAILED);
      continue;
    }
    if (rep[k].done) {
      // The episode ended; its last observation stays only if it fits.
      if ((int)s->chat.ids.len > e->c->context) chat_truncate(&s->chat, before);
      if ((rc = pad_logp(s, before, err)) != 0) break;
      mark_end(s, end_from_task(rep[k].end));
      continue;
    }
    if ((rc = chat_append_generation_prompt(&s->chat, err)) != 0 || (rc = pad_logp(s, before, err)) != 0) break;
    if (!turn_fits(e, s)) {
      // The observation and a next turn do not fit: the rollout ends after
      // the model's last turn (an observation is never trained on).
      chat_truncate(&s->chat, before);
      mark_end(s, ROLLOUT_END_CONTEXT);
      continue;
    }
    rc = prefill_pending(e, idx[k], err);
  }
  for (int k = 0; k < n; k++) {
    free(texts[k]);
    if (rep) env_reply_clear(&rep[k]);
  }
  free(req);
  free(rep);
  return rc;
}

// Scores and stores every episode that ended this round (one batched
// finish), and frees their slots.
static int finish_ended(Engine *e, FimiError *err) {
  int n = 0, idx[4096];
  for (int i = 0; i < e->c->slots; i++)
    if (e->slots[i].job >= 0 && e->slots[i].ending) idx[n++] = i;
  if (n == 0) return 0;
  EnvRequest *req = calloc((size_t)n, sizeof *req);
  EnvReply *rep = calloc((size_t)n, sizeof *rep);
  int rc = req && rep ? 0 : fimi_fail(err, "rollout: out of memory"), m = 0, map[4096];
  // A failed episode is already closed by the client: nothing to finish.
  for (int k = 0; rc == 0 && k < n; k++)
    if (e->slots[idx[k]].end != ROLLOUT_END_FAILED) {
      map[m] = k;
      req[m++] = (EnvRequest){.episode = e->slots[idx[k]].job};
    }
  double t0 = monotonic_seconds();
  if (rc == 0 && m) rc = e->env->finish(e->env->ctx, req, m, rep, err);
  e->times->env += monotonic_seconds() - t0;
  for (int q = 0; rc == 0 && q < m; q++) {
    Slot *s = &e->slots[idx[map[q]]];
    Rollout *r = &e->out[s->job];
    r->reward = rep[q].reward;
    if (rep[q].failed) {
      s->end = ROLLOUT_END_FAILED;
      snprintf(r->error, sizeof r->error, "%s", rep[q].error);
    }
  }
  for (int k = 0; rc == 0 && k < n; k++) {
    Slot *s = &e->slots[idx[k]];
    rc = store_rollout(e, s, err);
    e->policy->reset(e->policy->ctx, idx[k]);
    s->job = -1;
    s->ending = 0;
  }
  for (int q = 0; rep && q < m; q++) env_reply_clear(&rep[q]);
  free(req);
  free(rep);
  return rc;
}

// One batched decode step for the slots still in a turn.
static int decode_all(Engine *e, int *tokens, int *active, FimiError *err) {
  int any = 0;
  for (int i = 0; i < e->policy->slots; i++) {
    Slot *s = i < e->c->slots ? &e->slots[i] : NULL;
    active[i] = s && s->job >= 0 && !s->ending && s->feed >= 0;
    tokens[i] = active[i] ? s->feed : 0;
    any += active[i];
  }
  if (!any) return 0;
  double t0 = monotonic_seconds();
  int rc = e->policy->decode(e->policy->ctx, tokens, active, e->logits, err);
  e->times->decode += monotonic_seconds() - t0;
  e->times->decode_tokens += any;
  for (int i = 0; i < e->c->slots; i++)
    if (active[i]) e->slots[i].cached++;
  return rc;
}

static int any_busy(const Engine *e) {
  for (int i = 0; i < e->c->slots; i++)
    if (e->slots[i].job >= 0) return 1;
  return 0;
}

static void engine_free(Engine *e) {
  for (int i = 0; e->slots && i < e->c->slots; i++) {
    chat_free(&e->slots[i].chat);
    free(e->slots[i].turn);
    free(e->slots[i].turn_logp);
    free(e->slots[i].logp);
  }
  free(e->slots);
  free(e->logits);
  free(e->prefix_ids);
}

// Episodes still open after an error are finished (closed) so the client
// holds none.
static void abandon_open(Engine *e) {
  FimiError ignored = {0};
  for (int i = 0; i < e->c->slots; i++) {
    Slot *s = &e->slots[i];
    if (s->job < 0 || s->end == ROLLOUT_END_FAILED) continue;
    EnvRequest req = {.episode = s->job};
    EnvReply rep = {0};
    if (e->env->finish(e->env->ctx, &req, 1, &rep, &ignored) == 0) env_reply_clear(&rep);
  }
}

static int engine_init(Engine *e, FimiError *err) {
  const RolloutConfig *c = e->c;
  int need = c->slots + (c->share_prefix ? 1 : 0);
  if (e->policy->slots < need)
    return fimi_fail(err, "rollout: the policy has %d sequences, rollout.slots %d%s needs %d", e->policy->slots,
                     c->slots, c->share_prefix ? " + 1 shared prompt" : "", need);
  if (e->policy->capacity < c->context)
    return fimi_fail(err, "rollout: KV capacity %d < grpo.context %d", e->policy->capacity, c->context);
  if (c->slots > 4096) return fimi_fail(err, "rollout.slots > 4096");
  e->prefix_slot = c->share_prefix ? c->slots : -1;
  e->prefix_group = -1;
  e->slots = fimi_calloc((size_t)c->slots, sizeof *e->slots, err);
  e->logits = e->slots ? fimi_malloc((size_t)e->policy->slots * e->policy->vocab * sizeof(float), err) : NULL;
  if (!e->logits) return -1;
  for (int i = 0; i < c->slots; i++) {
    Slot *s = &e->slots[i];
    s->job = -1;
    s->turn = malloc((size_t)c->max_turn_tokens * sizeof *s->turn);
    s->turn_logp = malloc((size_t)c->max_turn_tokens * sizeof *s->turn_logp);
    if (!s->turn || !s->turn_logp) return fimi_fail(err, "rollout: out of memory");
    if (chat_init(&s->chat, e->tok, err) != 0) return -1;
  }
  return 0;
}

int rollout_run_part(const RolloutConfig *c, RolloutPolicy *policy, EnvClient *env, const Tokenizer *tok,
                     const RolloutJob *jobs, int n, int first, uint64_t seed, Rollout *out, RolloutTimes *times,
                     FimiError *err) {
  if (rollout_config_validate(c, err) != 0) return -1;
  if (first < 0 || n < 0) return fimi_fail(err, "rollout part: first %d, count %d", first, n);
  RolloutTimes local = {0};
  Engine e = {.c = c, .policy = policy, .env = env, .tok = tok, .jobs = jobs, .out = out,
              .times = times ? times : &local, .seed = seed, .first = first};
  for (int j = 0; j < n; j++)
    if (jobs[j].task < 0 || jobs[j].task >= env->tasks->count)
      return fimi_fail(err, "rollout job %d: task index %d outside the %d tasks", j, jobs[j].task, env->tasks->count);
  int rc = engine_init(&e, err);
  int *tokens = rc == 0 ? fimi_calloc((size_t)policy->slots, 2 * sizeof(int), err) : NULL;
  if (rc == 0 && !tokens) rc = -1;
  double t0 = monotonic_seconds(), timed0 = e.times->prefill + e.times->decode + e.times->env;
  for (int next = 0; rc == 0 && (next < n || any_busy(&e));) {
    rc = fill_slots(&e, n, &next, err);
    if (rc == 0) rc = finish_ended(&e, err);  // prompts too long for the context
    if (rc != 0 || !any_busy(&e)) continue;
    sample_all(&e);
    rc = step_turns(&e, err);
    if (rc == 0) rc = finish_ended(&e, err);
    if (rc == 0) rc = decode_all(&e, tokens, tokens + policy->slots, err);
  }
  RolloutTimes *t = e.times;
  t->other += monotonic_seconds() - t0 - (t->prefill + t->decode + t->env - timed0);
  if (rc != 0) abandon_open(&e);
  free(tokens);
  engine_free(&e);
  return rc == 0 ? 0 : fimi_fail_wrap(err, "rollouts");
}

int rollout_run(const RolloutConfig *c, RolloutPolicy *policy, EnvClient *env, const Tokenizer *tok,
                const RolloutJob *jobs, int n, uint64_t seed, Rollout *out, RolloutTimes *times, FimiError *err) {
  return rollout_run_part(c, policy, env, tok, jobs, n, 0, seed, out, times, err);
}

// ---- the packed form ----------------------------------------------------------------------
// Header (the fixed-size fields), RewardBreakdown as raw struct bytes, the
// error text, then ids, mask and logp of len tokens each.

typedef struct PackedHeader {
  int32_t task, group, len, prompt_len, end, turns, tool_calls, tool_errors, malformed, sampled;
  uint64_t env_seed;
  uint32_t error_len, pad;
} PackedHeader;

static size_t packed_body(int len) { return (size_t)len * (sizeof(int32_t) + 1 + sizeof(float)); }

size_t rollout_packed_size(const Rollout *r) {
  return sizeof(PackedHeader) + sizeof(RewardBreakdown) + strlen(r->error) + packed_body(r->len);
}

static uint8_t *put(uint8_t *at, const void *data, size_t n) {
  if (n) memcpy(at, data, n);
  return at + n;
}

void rollout_pack(const Rollout *r, uint8_t *out) {
  PackedHeader h = {r->task, r->group, r->len, r->prompt_len, (int32_t)r->end, r->turns, r->tool_calls,
                    r->tool_errors, r->malformed, r->sampled, r->env_seed, (uint32_t)strlen(r->error), 0};
  out = put(out, &h, sizeof h);
  out = put(out, &r->reward, sizeof r->reward);
  out = put(out, r->error, h.error_len);
  out = put(out, r->ids, (size_t)r->len * sizeof *r->ids);
  out = put(out, r->mask, (size_t)r->len);
  put(out, r->logp, (size_t)r->len * sizeof *r->logp);
}

int rollout_unpack(const uint8_t *in, size_t size, Rollout *r, size_t *used, FimiError *err) {
  PackedHeader h;
  size_t fixed = sizeof h + sizeof r->reward;
  if (size < fixed) return fimi_fail(err, "packed rollout: %zu bytes, the header alone is %zu", size, fixed);
  memcpy(&h, in, sizeof h);
  if (h.len < 0 || h.end < 0 || h.end >= ROLLOUT_END_COUNT || h.error_len >= sizeof r->error)
    return fimi_fail(err, "packed rollout: bad header (len %d, end %d, error of %u bytes)", h.len, h.end,
                     h.error_len);
  size_t need = fixed + h.error_len + packed_body(h.len);
  if (size < need) return fimi_fail(err, "packed rollout: %zu bytes, its %d tokens need %zu", size, h.len, need);
  memset(r, 0, sizeof *r);
  size_t n = (size_t)h.len;
  r->ids = malloc(n ? n * sizeof *r->ids : 1);
  r->mask = malloc(n ? n : 1);
  r->logp = malloc(n ? n * sizeof *r->logp : 1);
  if (!r->ids || !r->mask || !r->logp) {
    rollout_free(r);
    return fimi_fail(err, "packed rollout: out of memory for %d tokens", h.len);
  }
  const uint8_t *at = in + sizeof h;
  memcpy(&r->reward, at, sizeof r->reward);
  at += sizeof r->reward;
  memcpy(r->error, at, h.error_len);
  r->error[h.error_len] = 0;
  at += h.error_len;
  memcpy(r->ids, at, n * sizeof *r->ids);
  at += n * sizeof *r->ids;
  memcpy(r->mask, at, n);
  at += n;
  memcpy(r->logp, at, n * sizeof *r->logp);
  r->task = h.task;
  r->group = h.group;
  r->env_seed = h.env_seed;
  r->len = r->cap = h.len;
  r->prompt_len = h.prompt_len;
  r->end = (RolloutEnd)h.end;
  r->turns = h.turns;
  r->tool_calls = h.tool_calls;
  r->tool_errors = h.tool_errors;
  r->malformed = h.malformed;
  r->sampled = h.sampled;
  *used = need;
  return 0;
}
