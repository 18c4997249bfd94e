// env/episode.c: the episode API (env/episode.h): the world of cached images
// and pools, env_open/env_step/env_score/env_close, the goal test the
// simulator ends on, and the shared helpers that apply a task's initial
// state and replay its gold chain.
#include "env/episode.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/text.h"
#include "data/toolcall.h"
#include "env/bank/tools.h"
#include "env/knowledge.h"
#include "env/user_sim.h"
#include "env/user_sim_model.h"

// ---- world -----------------------------------------------------------------

#define ENV_WORLD_MAX_IMAGES 16

typedef struct WorldImage {
  uint64_t seed;
  BankImage image;
  BankPool *pool;
} WorldImage;

// The gold chain's replay of one task: its tool results (the values to
// communicate and confirm), its successful writes and customer (the db
// check's fast path) and, once an episode needed it, the gold state's
// digest. Training and evaluation play each task many times (GRPO's group,
// eval trials) and a task's gold outcome on its image never changes, so the
// world keeps replays by task (gold_key: a hash of what the replay depends
// on) and episodes share them, counted by `refs`.
#define ENV_GOLD_CACHE 4096
typedef struct GoldReplay {
  int refs;
  uint64_t key;
  cJSON *results;
  BankCall *writes;
  int num_writes;
  char customer[BANK_ID_MAX];
  int has_digest;
  uint64_t digest;
} GoldReplay;

static void gold_replay_release(GoldReplay *g) {
  if (!g || --g->refs > 0) return;
  cJSON_Delete(g->results);
  for (int i = 0; i < g->num_writes; i++) {
    free(g->writes[i].name);
    free(g->writes[i].arguments);
  }
  free(g->writes);
  free(g);
}

struct EnvWorld {
  const KnowledgeBase *kb;
  OpenAIClient *customer_model;  // NULL: the rule-based simulator
  double customer_temperature;
  WorldImage images[ENV_WORLD_MAX_IMAGES];
  int num_images;
  GoldReplay *gold[ENV_GOLD_CACHE];  // slot key % ENV_GOLD_CACHE; a newer task replaces an older one
};

void env_world_set_customer_model(EnvWorld *world, OpenAIClient *client, double temperature) {
  world->customer_model = client;
  world->customer_temperature = temperature;
}

int env_world_create(EnvWorld **out, FimiError *err) {
  *out = NULL;
  EnvWorld *w = fimi_calloc(1, sizeof *w, err);
  if (!w) return -1;
  if (!(w->kb = kb_builtin(err))) {
    free(w);
    return -1;
  }
  *out = w;
  return 0;
}

void env_world_free(EnvWorld *w) {
  if (!w) return;
  for (int i = 0; i < ENV_GOLD_CACHE; i++) gold_replay_release(w->gold[i]);
  for (int i = 0; i < w->num_images; i++) {
    bank_pool_free(w->images[i].pool);
    bank_image_free(&w->images[i].image);
  }
  free(w);
}

int env_world_image(EnvWorld *w, uint64_t seed, const BankImage **image, BankPool **pool, FimiError *err) {
  for (int i = 0; i < w->num_images; i++)
    if (w->images[i].seed == seed) {
      *image = &w->images[i].image;
      *pool = w->images[i].pool;
      return 0;
    }
  if (w->num_images >= ENV_WORLD_MAX_IMAGES)
    return fimi_fail(err, "env world: more than %d distinct image seeds in one world", ENV_WORLD_MAX_IMAGES);
  WorldImage *wi = &w->images[w->num_images];
  memset(wi, 0, sizeof *wi);
  wi->seed = seed;
  if (bank_image_build(seed, &wi->image, err) != 0) return -1;
  if (bank_pool_create(&wi->image, w->kb, &wi->pool, err) != 0) {
    bank_image_free(&wi->image);
    return -1;
  }
  w->num_images++;
  *image = &wi->image;
  *pool = wi->pool;
  return 0;
}

// ---- initial state and gold replay -----------------------------------------

int env_apply_initial(BankEpisode *bank, const Task *t, FimiError *err) {
  if (t->today && bank_episode_set_today(bank, t->today, err) != 0)
    return fimi_fail_wrap(err, "task %s: initial.today", t->id ? t->id : "?");
  for (int i = 0; i < t->num_fixture; i++)
    if (bank_episode_exec(bank, t->fixture[i], err) != 0)
      return fimi_fail_wrap(err, "task %s: initial.fixture[%d]", t->id ? t->id : "?", i);
  if (t->authenticated && bank_episode_authenticate(bank, t->authenticated, err) != 0)
    return fimi_fail_wrap(err, "task %s: initial.authenticated", t->id ? t->id : "?");
  bank->confirm_mode = (BankConfirmMode)t->confirm_mode;
  return 0;
}

int env_run_gold_step(BankEpisode *bank, const Task *t, int i, cJSON *results, FimiError *err) {
  if (i < 0 || i >= t->num_gold) return fimi_fail(err, "task %s: no gold step %d", t->id ? t->id : "?", i);
  const TaskAction *a = &t->gold[i];
  if (a->confirm) bank->confirmation_given = 1;
  ToolResult r;
  env_tool_call_json(bank, a->name, a->arguments, &r);
  if (!r.ok) {
    fimi_fail(err, "task %s: gold[%d] %s failed: %.300s", t->id ? t->id : "?", i, a->name,
              r.text ? r.text : "(out of memory)");
    tool_result_free(&r);
    return -1;
  }
  if (results) {
    cJSON_AddItemToArray(results, r.json);
    r.json = NULL;
  }
  tool_result_free(&r);
  return 0;
}

int env_run_gold(BankEpisode *bank, const Task *t, int steps, cJSON *results, FimiError *err) {
  for (int i = 0; i < steps && i < t->num_gold; i++)
    if (env_run_gold_step(bank, t, i, results, err) != 0) return -1;
  return 0;
}

char *env_resolve_value(const cJSON *gold_results, const TaskValueRef *ref, FimiError *err) {
  const cJSON *step = cJSON_GetArrayItem(gold_results, ref->step);
  const cJSON *v = step ? task_json_path(step, ref->path ? ref->path : "") : NULL;
  char *text = v ? task_json_scalar_text(v) : NULL;
  if (!text || !*text) {
    free(text);
    fimi_fail(err, "value '%s': gold step %d has no scalar at path '%s'", ref->name, ref->step,
              ref->path ? ref->path : "");
    return NULL;
  }
  return text;
}

// ---- episode ---------------------------------------------------------------

int env_state_digest(BankEpisode *bank, uint64_t *digest, FimiError *err);

struct EnvEpisode {
  const Task *task;
  BankEpisode *bank;
  GoldReplay *gold;       // shared with the world's cache
  char **values;          // resolved task->communicate
  int *value_known_from;  // per value: first message after a tool result that held it (reward.h)
  char **confirm_values;  // resolved task->confirms ("" when none)
  UserSim sim;
  UserSimModel *model_sim;  // the served model playing the customer, or NULL
  EnvTurn *turns;
  int num_turns, cap_turns;
  char **messages;  // agent messages (also tool-call preambles), for comm and the judge
  int num_messages, cap_messages;
  int turns_used;
  int done;
  TaskEnd end;
  char *obs;  // last observation text
  ToolCallSyntax syntax;  // how the agent's calls are read and results written
  BankPool *pool;
  EnvWorld *world;
};

static int push_turn(EnvEpisode *ep, EnvTurnKind kind, const char *text, size_t len, FimiError *err) {
  if (ep->num_turns == ep->cap_turns) {
    int cap = ep->cap_turns ? ep->cap_turns * 2 : 32;
    EnvTurn *bigger = realloc(ep->turns, sizeof *bigger * (size_t)cap);
    if (!bigger) return fimi_fail(err, "env: out of memory");
    ep->turns = bigger;
    ep->cap_turns = cap;
  }
  char *copy = fimi_malloc(len + 1, err);
  if (!copy) return -1;
  memcpy(copy, text, len);
  copy[len] = 0;
  ep->turns[ep->num_turns++] = (EnvTurn){kind, copy};
  return 0;
}

static int push_message(EnvEpisode *ep, const char *text, size_t len, FimiError *err) {
  if (ep->num_messages == ep->cap_messages) {
    int cap = ep->cap_messages ? ep->cap_messages * 2 : 16;
    char **bigger = realloc(ep->messages, sizeof *bigger * (size_t)cap);
    if (!bigger) return fimi_fail(err, "env: out of memory");
    ep->messages = bigger;
    ep->cap_messages = cap;
  }
  char *copy = fimi_malloc(len + 1, err);
  if (!copy) return -1;
  memcpy(copy, text, len);
  copy[len] = 0;
  ep->messages[ep->num_messages++] = copy;
  return 0;
}

static void free_list(char **list, int n) {
  for (int i = 0; list && i < n; i++) free(list[i]);
  free(list);
}

void env_close(EnvEpisode *ep) {
  if (!ep) return;
  if (ep->bank) bank_pool_release(ep->bank);
  gold_replay_release(ep->gold);
  free_list(ep->values, ep->task->num_communicate);
  free(ep->value_known_from);
  free_list(ep->confirm_values, ep->task->num_confirms);
  for (int i = 0; i < ep->num_turns; i++) free(ep->turns[i].text);
  free(ep->turns);
  free_list(ep->messages, ep->num_messages);
  free(ep->obs);
  if (ep->model_sim) user_sim_model_free(ep->model_sim);
  free(ep->model_sim);
  free(ep);
}

static char *copy_text(const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy) memcpy(copy, s, n);
  return copy;
}

static int copy_gold_writes(GoldReplay *g, const BankEpisode *gold, FimiError *err) {
  g->writes = calloc((size_t)gold->num_calls + 1, sizeof *g->writes);
  if (!g->writes) return fimi_fail(err, "env: out of memory");
  for (int i = 0; i < gold->num_calls; i++) {
    const BankCall *c = &gold->calls[i];
    if (!c->ok || !env_tool_writes(env_tool_index(c->name))) continue;
    BankCall *w = &g->writes[g->num_writes++];
    w->ok = 1;
    w->name = copy_text(c->name);
    w->arguments = copy_text(c->arguments);
    if (!w->name || !w->arguments) return fimi_fail(err, "env: out of memory");
  }
  snprintf(g->customer, sizeof g->customer, "%s", gold->customer_id);
  return 0;
}

// Replays the gold chain on its own pooled copy into g: the results, the
// writes and the customer, and the state digest as well when `digest`.
static int replay_gold(const Task *task, BankPool *pool, GoldReplay *g, int digest, FimiError *err) {
  BankEpisode *gold = NULL;
  if (bank_pool_acquire(pool, &gold, err) != 0) return -1;
  cJSON *results = cJSON_CreateArray();
  int rc = results ? 0 : fimi_fail(err, "env: out of memory");
  if (rc == 0) rc = env_apply_initial(gold, task, err);
  if (rc == 0) rc = env_run_gold(gold, task, task->num_gold, results, err);
  if (rc == 0 && digest) rc = env_state_digest(gold, &g->digest, err);
  if (rc == 0 && digest) g->has_digest = 1;
  if (rc == 0 && !g->results) {
    rc = copy_gold_writes(g, gold, err);
    g->results = results;
    results = NULL;
  }
  cJSON_Delete(results);
  bank_pool_release(gold);
  return rc;
}

static uint64_t fnv_text(uint64_t h, const char *s) { return hash_fnv1a(h, s ? s : "", s ? strlen(s) + 1 : 1); }

// A JSON value's hash: types, keys, strings and numbers, depth first.
static uint64_t fnv_json(uint64_t h, const cJSON *j) {
  for (; j; j = j->next) {
    h = hash_fnv1a(fnv_text(h, j->string), &j->type, sizeof j->type);
    if (cJSON_IsString(j)) h = fnv_text(h, j->valuestring);
    if (cJSON_IsNumber(j)) h = hash_fnv1a(h, &j->valuedouble, sizeof j->valuedouble);
    h = hash_fnv1a(fnv_json(h, j->child), "}", 1);
  }
  return h;
}

// What the gold chain's outcome depends on: the image, the initial state and
// the gold calls (hashing these directly costs a tenth of printing the task).
static uint64_t gold_key(const Task *t) {
  uint64_t h = hash_fnv1a(HASH_FNV1A_SHORT_BASIS, &t->image_seed, sizeof t->image_seed);
  h = fnv_text(fnv_text(h, t->today), t->authenticated);
  h = hash_fnv1a(h, &t->confirm_mode, sizeof t->confirm_mode);
  for (int i = 0; i < t->num_fixture; i++) h = fnv_text(h, t->fixture[i]);
  h = hash_fnv1a(h, &t->num_fixture, sizeof t->num_fixture);
  for (int i = 0; i < t->num_gold; i++) {
    h = fnv_json(fnv_text(h, t->gold[i].name), t->gold[i].arguments);
    h = hash_fnv1a(h, &t->gold[i].confirm, sizeof t->gold[i].confirm);
  }
  return hash_mix64(hash_fnv1a(h, &t->num_gold, sizeof t->num_gold));
}

// The task's gold replay, from the world's cache or replayed now (and
// cached); the caller holds a reference.
static GoldReplay *gold_replay_get(EnvWorld *world, const Task *task, BankPool *pool, FimiError *err) {
  uint64_t key = gold_key(task);
  GoldReplay **slot = &world->gold[key % ENV_GOLD_CACHE];
  if (*slot && (*slot)->key == key) {
    (*slot)->refs++;
    return *slot;
  }
  GoldReplay *g = fimi_calloc(1, sizeof *g, err);
  if (!g) return NULL;
  g->refs = 1;
  g->key = key;
  if (replay_gold(task, pool, g, 0, err) != 0) {
    gold_replay_release(g);
    return NULL;
  }
  gold_replay_release(*slot);
  *slot = g;
  g->refs++;
  return g;
}

static int resolve_values(EnvEpisode *ep, FimiError *err) {
  const Task *t = ep->task;
  ep->values = calloc((size_t)t->num_communicate + 1, sizeof(char *));
  ep->value_known_from = malloc(((size_t)t->num_communicate + 1) * sizeof(int));
  for (int i = 0; ep->value_known_from && i < t->num_communicate; i++) ep->value_known_from[i] = INT_MAX;
  ep->confirm_values = calloc((size_t)t->num_confirms + 1, sizeof(char *));
  if (!ep->values || !ep->value_known_from || !ep->confirm_values) return fimi_fail(err, "env: out of memory");
  for (int i = 0; i < t->num_communicate; i++)
    if (!(ep->values[i] = env_resolve_value(ep->gold->results, &t->communicate[i], err)))
      return fimi_fail_wrap(err, "task %s: communicate[%d]", t->id, i);
  for (int i = 0; i < t->num_confirms; i++) {
    ep->confirm_values[i] = t->confirms[i].step >= 0 ? env_resolve_value(ep->gold->results, &t->confirms[i], err)
                                                     : calloc(1, 1);
    if (!ep->confirm_values[i]) return fimi_fail_wrap(err, "task %s: confirms[%d]", t->id, i);
  }
  return 0;
}

static int open_model_customer(EnvEpisode *ep, uint64_t seed, const char *opening, FimiError *err) {
  if (!(ep->model_sim = fimi_calloc(1, sizeof *ep->model_sim, err))) return -1;
  return user_sim_model_open(ep->model_sim, ep->world->customer_model, ep->task, seed, ep->world->customer_temperature,
                             opening, (const char *const *)ep->confirm_values, err);
}

int env_open(EnvWorld *world, const Task *task, uint64_t seed, EnvEpisode **out, const char **first_message,
             FimiError *err) {
  *out = NULL;
  const BankImage *image = NULL;
  BankPool *pool = NULL;
  if (env_world_image(world, task->image_seed, &image, &pool, err) != 0) return -1;
  EnvEpisode *ep = fimi_calloc(1, sizeof *ep, err);
  if (!ep) return -1;
  ep->task = task;
  ep->pool = pool;
  ep->world = world;
  if (!(ep->gold = gold_replay_get(world, task, pool, err)) || resolve_values(ep, err) != 0 ||
      bank_pool_acquire(pool, &ep->bank, err) != 0 || env_apply_initial(ep->bank, task, err) != 0) {
    env_close(ep);
    return -1;
  }
  const char *opening = NULL;
  user_sim_open(&ep->sim, task, seed, &opening);
  if (world->customer_model && open_model_customer(ep, seed, opening, err) != 0) {
    env_close(ep);
    return -1;
  }
  // A task that starts logged in (the app channel) tells the agent so in
  // the first message: the session, then what the customer wrote.
  char *session = NULL;
  if (task->authenticated && task_set(&session, err, "%s%s] %s", ENV_APP_SESSION, task->authenticated, opening) != 0) {
    env_close(ep);
    return -1;
  }
  const char *first = session ? session : opening;
  if (push_turn(ep, ENV_TURN_CUSTOMER, first, strlen(first), err) != 0) {
    free(session);
    env_close(ep);
    return -1;
  }
  free(session);
  *first_message = ep->turns[ep->num_turns - 1].text;
  *out = ep;
  return 0;
}

static RewardInput reward_input(const EnvEpisode *ep, int db_equal) {
  RewardInput in = {0};
  in.task = ep->task;
  in.calls = ep->bank->calls;
  in.num_calls = ep->bank->num_calls;
  in.messages = (const char *const *)ep->messages;
  in.num_messages = ep->num_messages;
  in.values = (const char *const *)ep->values;
  in.num_values = ep->task->num_communicate;
  in.value_known_from = ep->value_known_from;
  in.db_equal = db_equal;
  in.end = ep->end;
  in.turns = ep->turns_used;
  return in;
}

// The simulator's "goal met": every required value said, every gold write
// done (a successful matching call), every rubric rule met except END_IS.
// A TRANSFER task's goal is the hand-off itself, which ends it directly.
static int goal_met(const EnvEpisode *ep) {
  const Task *t = ep->task;
  if (t->expected_end == TASK_END_TRANSFER) return 0;
  RewardInput in = reward_input(ep, 0);
  for (int i = 0; i < t->num_communicate; i++)
    if (!reward_value_said(&in, i)) return 0;
  for (int g = 0; g < t->num_gold; g++) {
    int index = env_tool_index(t->gold[g].name);
    if (!env_tool_writes(index)) continue;
    int done = 0;
    for (int c = 0; c < in.num_calls && !done; c++)
      done = in.calls[c].ok && reward_call_matches(&t->gold[g], in.calls[c].name, in.calls[c].arguments);
    if (!done) return 0;
  }
  for (int a = 0; a < t->num_assertions; a++)
    if (t->assertions[a].rule != TASK_RULE_END_IS && !reward_rule_met(&t->assertions[a], &in)) return 0;
  return 1;
}

static int set_obs(EnvEpisode *ep, char *text, FimiError *err) {
  if (!text) return -1;
  free(ep->obs);
  ep->obs = text;
  (void)err;
  return 0;
}

// The values to communicate that this successful call's result holds may be
// said from the next message on (the call's own preamble came before it).
static void note_values_in_result(EnvEpisode *ep, const cJSON *result) {
  for (int i = 0; i < ep->task->num_communicate; i++)
    if (ep->value_known_from[i] == INT_MAX && reward_result_holds(result, ep->values[i]))
      ep->value_known_from[i] = ep->num_messages;
}

static int step_tool_call(EnvEpisode *ep, ToolCallParse *parse, EnvObservation *obs, FimiError *err) {
  if (parse->text_len > 0 && push_message(ep, parse->text, parse->text_len, err) != 0) return -1;
  ToolResult r;
  env_tool_call_json(ep->bank, parse->name, parse->arguments, &r);
  if (!r.ok && !r.text) return fimi_fail(err, "env: out of memory running %s", parse->name);
  if (r.ok) note_values_in_result(ep, r.json);
  char *rendered = NULL;
  if (r.ok) {
    rendered = toolcall_render_result_syntax(ep->syntax, parse->name, r.json, err);
  } else {
    rendered = toolcall_render_error_syntax(ep->syntax, parse->name, r.text, err);
  }
  tool_result_free(&r);
  if (set_obs(ep, rendered, err) != 0) return -1;
  obs->kind = ENV_OBS_TOOL;
  if (ep->bank->transferred_to_human) {
    ep->done = 1;
    ep->end = TASK_END_TRANSFER;
  }
  return push_turn(ep, ENV_TURN_TOOL, ep->obs, strlen(ep->obs), err);
}

static int step_message(EnvEpisode *ep, const char *text, size_t len, EnvObservation *obs, FimiError *err) {
  if (push_message(ep, text, len, err) != 0) return -1;
  UserSimReply reply;
  const char *message = ep->messages[ep->num_messages - 1];
  if (ep->model_sim) {
    if (user_sim_model_reply(ep->model_sim, message, &reply, err) != 0) return -1;
  } else {
    user_sim_reply(&ep->sim, message, goal_met(ep), (const char *const *)ep->confirm_values, &reply);
  }
  if (reply.confirmed) ep->bank->confirmation_given = 1;
  if (reply.end != TASK_END_NONE) {
    ep->done = 1;
    ep->end = reply.end;
  }
  size_t n = strlen(reply.text);
  char *copy = fimi_malloc(n + 1, err);
  if (!copy) return -1;
  memcpy(copy, reply.text, n + 1);
  set_obs(ep, copy, err);
  obs->kind = ENV_OBS_CUSTOMER;
  return push_turn(ep, ENV_TURN_CUSTOMER, ep->obs, n, err);
}

int env_step(EnvEpisode *ep, const char *turn, size_t len, EnvObservation *obs, FimiError *err) {
  memset(obs, 0, sizeof *obs);
  if (ep->done) return fimi_fail(err, "env_step: the episode has ended (%s)", task_end_name(ep->end));
  ep->turns_used++;
  ToolCallParse parse;
  ToolCallKind kind = toolcall_parse_syntax(ep->syntax, turn ? turn : "", turn ? len : 0, &parse);
  // The raw turn is recorded as sent (capped by the parser's limit).
  size_t keep = len > TOOLCALL_MAX_TEXT_BYTES ? TOOLCALL_MAX_TEXT_BYTES : len;
  int rc = push_turn(ep, kind == TOOLCALL_MESSAGE ? ENV_TURN_AGENT_MESSAGE : ENV_TURN_AGENT_CALL, turn ? turn : "",
                     turn ? keep : 0, err);
  if (rc == 0 && kind == TOOLCALL_TOOL_CALL) {
    rc = step_tool_call(ep, &parse, obs, err);
  } else if (rc == 0 && kind == TOOLCALL_MESSAGE) {
    rc = step_message(ep, parse.text, parse.text_len, obs, err);
  } else if (rc == 0) {
    char *rendered = toolcall_render_error_syntax(ep->syntax, parse.name[0] ? parse.name : NULL, parse.message, err);
    rc = set_obs(ep, rendered, err);
    obs->kind = ENV_OBS_TOOL;
    if (rc == 0) rc = push_turn(ep, ENV_TURN_TOOL, ep->obs, strlen(ep->obs), err);
  }
  toolcall_parse_free(&parse);
  if (rc != 0) return -1;
  if (!ep->done && ep->turns_used >= ep->task->max_turns) {
    ep->done = 1;
    ep->end = TASK_END_BUDGET;
  }
  obs->text = ep->obs;
  obs->done = ep->done;
  obs->end = ep->end;
  return 0;
}

// ---- state digest ----------------------------------------------------------

// One row's hash from its typed values (an SQL aggregate, so the values are
// read inside SQLite's VM without a mutex-locked API call per column): the
// type tag, then the int64/double bits or the text/blob bytes and length.
static uint64_t row_hash(int argc, sqlite3_value **argv) {
  uint64_t h = HASH_FNV1A_SHORT_BASIS;
  for (int i = 0; i < argc; i++) {
    int type = sqlite3_value_type(argv[i]);
    unsigned char tag = (unsigned char)type;
    h = hash_fnv1a(h, &tag, 1);
    if (type == SQLITE_INTEGER) {
      int64_t v = sqlite3_value_int64(argv[i]);
      h = hash_fnv1a(h, &v, sizeof v);
    } else if (type == SQLITE_FLOAT) {
      double v = sqlite3_value_double(argv[i]);
      h = hash_fnv1a(h, &v, sizeof v);
    } else if (type != SQLITE_NULL) {
      const void *bytes = type == SQLITE_TEXT ? (const void *)sqlite3_value_text(argv[i]) : sqlite3_value_blob(argv[i]);
      int n = sqlite3_value_bytes(argv[i]);
      h = hash_fnv1a(h, &n, sizeof n);
      if (bytes) h = hash_fnv1a(h, bytes, (size_t)n);
    }
  }
  return hash_mix64(h);
}

static void row_sum_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  uint64_t *sum = sqlite3_aggregate_context(ctx, sizeof *sum);
  if (sum) *sum += row_hash(argc, argv);
}

static void row_sum_final(sqlite3_context *ctx) {
  uint64_t *sum = sqlite3_aggregate_context(ctx, 0);
  sqlite3_result_int64(ctx, sum ? (sqlite3_int64)*sum : 0);
}

// Registers the aggregate once per connection (re-registering would expire
// the connection's cached statements).
static int ensure_row_sum(sqlite3 *db) {
  sqlite3_stmt *probe = NULL;
  if (sqlite3_prepare_v2(db, "SELECT fimi_row_sum(1)", -1, &probe, NULL) == SQLITE_OK) {
    sqlite3_finalize(probe);
    return 0;
  }
  sqlite3_finalize(probe);
  return sqlite3_create_function_v2(db, "fimi_row_sum", -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, NULL,
                                    row_sum_step, row_sum_final, NULL) == SQLITE_OK ? 0 : -1;
}

// Columns that hold the customer's or the agent's own words (tool arguments
// such as a dispute's description or a hand-off reason). The db check
// compares what the bank did, not how it was phrased, so these are left out
// of the digest; the row itself (its existence, ids, amounts, dates, status)
// still counts.
static const char *const FREE_TEXT_COLUMNS[][2] = {
    {"transfers", "remarks"},          {"disputes", "reason"},          {"disputes", "description"},
    {"service_requests", "description"}, {"insurance_claims", "description"},
};

static int is_free_text_column(const char *table, const char *column) {
  for (size_t i = 0; i < sizeof FREE_TEXT_COLUMNS / sizeof FREE_TEXT_COLUMNS[0]; i++)
    if (!strcmp(FREE_TEXT_COLUMNS[i][0], table) && !strcmp(FREE_TEXT_COLUMNS[i][1], column)) return 1;
  return 0;
}

// One statement over every table: "SELECT 'name', fimi_row_sum(c1, ...),
// count(*) FROM "name" UNION ALL ..." in name order, built from the schema
// (free-text columns left out).
static char *digest_sql(sqlite3 *db, FimiError *err) {
  TextBuf out = {0};
  sqlite3_stmt *tables = NULL, *cols = NULL;
  int rc = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                                  " ORDER BY name", -1, &tables, NULL);
  int bad = rc != SQLITE_OK;
  while (!bad && sqlite3_step(tables) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(tables, 0);
    bad |= text_printf(&out, NULL, "%sSELECT '%s', fimi_row_sum(", out.len ? " UNION ALL " : "", name);
    bad |= sqlite3_prepare_v2(db, "SELECT name FROM pragma_table_info(?) ORDER BY cid", -1, &cols, NULL) != SQLITE_OK;
    if (bad) break;
    sqlite3_bind_text(cols, 1, name, -1, SQLITE_TRANSIENT);
    for (int k = 0; sqlite3_step(cols) == SQLITE_ROW;) {
      const char *column = (const char *)sqlite3_column_text(cols, 0);
      if (is_free_text_column(name, column)) continue;
      bad |= text_printf(&out, NULL, "%s\"%s\"", k++ ? ", " : "", column);
    }
    sqlite3_finalize(cols);
    cols = NULL;
    bad |= text_printf(&out, NULL, "), count(*) FROM \"%s\"", name);
  }
  sqlite3_finalize(tables);
  if (bad || !out.data) {
    free(out.data);
    fimi_fail(err, "env: building the digest query: %s", sqlite3_errmsg(db));
    return NULL;
  }
  return out.data;
}

// The canonical state of every table of the copy as one 64-bit value: per
// table, the SUM of mixed row hashes (order-independent, so no ORDER BY and
// no dependence on page layout or rowids) and the row count, chained over
// the tables in name order. Reference tables are included: they are equal in
// both copies unless something changed them, which should count.
int env_state_digest_full(BankEpisode *bank, uint64_t *digest, FimiError *err) {
  // The schema is the same for every copy (bank_schema_sql): build the query once.
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char *sql = NULL;
  pthread_mutex_lock(&lock);
  if (!sql) sql = digest_sql(bank->db, err);
  pthread_mutex_unlock(&lock);
  if (!sql) return -1;
  if (ensure_row_sum(bank->db) != 0) return fimi_fail(err, "env: registering the digest function");
  sqlite3_stmt *stmt = bank_stmt_get(bank, sql);
  if (!stmt) return fimi_fail(err, "env: digest query: %s", sqlite3_errmsg(bank->db));
  uint64_t h = HASH_FNV1A_SHORT_BASIS;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(stmt, 0);
    uint64_t sum = (uint64_t)sqlite3_column_int64(stmt, 1), count = (uint64_t)sqlite3_column_int64(stmt, 2);
    h = hash_fnv1a(h, name, strlen(name) + 1);
    h = hash_fnv1a(h, &sum, sizeof sum);
    h = hash_fnv1a(h, &count, sizeof count);
  }
  bank_stmt_put(bank, stmt);
  if (rc != SQLITE_DONE) return fimi_fail(err, "env: digest query: %s", sqlite3_errmsg(bank->db));
  *digest = h;
  return 0;
}

// ---- the digest from the change log ---------------------------------------
//
// Both the agent's and the gold chain's copies start as the pool's image, so
// a table's (row-hash sum, count) is the image's plus, for every row the
// episode wrote (BankEpisode.changes), the row's hash now minus its hash in
// the image (a missing row counts 0). That is env_state_digest_full's value
// exactly, at a cost proportional to the rows written: the image's sums are
// computed once per pool, and each written row is looked up by rowid in the
// episode's copy and in the pool's unwritten view.

typedef struct DigestTable {
  char *name;
  char *row_sql;  // "SELECT fimi_row_sum(...), count(*) FROM t WHERE rowid = ?"
  uint64_t sum, count;
} DigestTable;

typedef struct DigestBase {
  DigestTable *tables;  // name order, as in digest_sql
  int count;
} DigestBase;

static void digest_base_free(void *p) {
  DigestBase *base = p;
  if (!base) return;
  for (int i = 0; i < base->count; i++) free(base->tables[i].name), free(base->tables[i].row_sql);
  free(base->tables);
  free(base);
}

// The hash and count (0 or 1) of one row of a table, by rowid.
static int row_by_id(BankEpisode *bank, const char *sql, int64_t rowid, uint64_t *hash, uint64_t *count) {
  sqlite3_stmt *stmt = bank_stmt_get(bank, sql);
  if (!stmt) return -1;
  sqlite3_bind_int64(stmt, 1, rowid);
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    *hash = (uint64_t)sqlite3_column_int64(stmt, 0);
    *count = (uint64_t)sqlite3_column_int64(stmt, 1);
  }
  bank_stmt_put(bank, stmt);
  return rc == SQLITE_ROW ? 0 : -1;
}

// Splits env_state_digest_full's query into per-table rows on the view: the
// image's sums, and per table the by-rowid query over the same columns.
static DigestBase *digest_base_build(BankEpisode *view, FimiError *err) {
  char *sql = digest_sql(view->db, err);
  if (!sql || ensure_row_sum(view->db) != 0) {
    free(sql);
    return NULL;
  }
  DigestBase *base = calloc(1, sizeof *base);
  sqlite3_stmt *stmt = NULL;
  int bad = !base || sqlite3_prepare_v2(view->db, sql, -1, &stmt, NULL) != SQLITE_OK;
  int cap = 0;
  while (!bad && sqlite3_step(stmt) == SQLITE_ROW) {
    if (base->count == cap) {
      cap = cap ? cap * 2 : 32;
      DigestTable *grown = realloc(base->tables, (size_t)cap * sizeof *grown);
      if (!grown) {
        bad = 1;
        break;
      }
      base->tables = grown;
    }
    DigestTable *t = &base->tables[base->count];
    memset(t, 0, sizeof *t);
    base->count++;
    const char *name = (const char *)sqlite3_column_text(stmt, 0);
    TextBuf n = {0}, q = {0};
    bad |= text_printf(&n, NULL, "%s", name);
    t->name = n.data;
    t->sum = (uint64_t)sqlite3_column_int64(stmt, 1);
    t->count = (uint64_t)sqlite3_column_int64(stmt, 2);
    // This table's part of the full query, with a rowid condition.
    char marker[256];
    snprintf(marker, sizeof marker, "SELECT '%s', fimi_row_sum(", name);
    const char *start = strstr(sql, marker);
    const char *end = start ? strstr(start, ", count(*) FROM") : NULL;
    bad |= !start || !end;
    if (!bad) {
      start += strlen("SELECT '") + strlen(name) + strlen("', ");
      bad |= text_printf(&q, NULL, "SELECT %.*s, count(*) FROM \"%s\" WHERE rowid = ?", (int)(end - start), start, name);
    }
    t->row_sql = q.data;
  }
  sqlite3_finalize(stmt);
  free(sql);
  if (bad) {
    digest_base_free(base);
    fimi_fail(err, "env: building the change digest's baseline");
    return NULL;
  }
  return base;
}

static int cmp_change(const void *a, const void *b) {
  const BankChange *x = a, *y = b;
  if (x->table != y->table) return x->table < y->table ? -1 : 1;
  return x->rowid < y->rowid ? -1 : x->rowid > y->rowid;
}

// The digest of a pooled episode from its change log (same value as
// env_state_digest_full). 1 when it cannot be used (not pooled, untracked
// writes, a written table the baseline lacks): the caller digests all.
static int changed_digest(BankEpisode *bank, uint64_t *digest, FimiError *err) {
  if (!bank->pool || bank->changes_untracked) return 1;
  BankEpisode *view = bank_pool_view(bank->pool, err);
  if (!view) return -1;
  DigestBase *base = bank_pool_user(bank->pool);
  if (!base) {
    if (!(base = digest_base_build(view, err))) return -1;
    bank_pool_set_user(bank->pool, base, digest_base_free);
  }
  // Which baseline table each logged table name is.
  int map[BANK_CHANGE_TABLES];
  for (int k = 0; k < bank->num_change_tables; k++) {
    map[k] = -1;
    for (int i = 0; i < base->count; i++)
      if (strcmp(base->tables[i].name, bank->change_tables[k]) == 0) map[k] = i;
    if (map[k] < 0) return 1;
  }
  if (ensure_row_sum(bank->db) != 0 || ensure_row_sum(view->db) != 0)
    return fimi_fail(err, "env: registering the digest function");
  qsort(bank->changes, (size_t)bank->num_changes, sizeof *bank->changes, cmp_change);
  uint64_t h = HASH_FNV1A_SHORT_BASIS;
  for (int i = 0; i < base->count; i++) {
    const DigestTable *t = &base->tables[i];
    uint64_t sum = t->sum, count = t->count;
    for (int c = 0; c < bank->num_changes; c++) {
      const BankChange *ch = &bank->changes[c];
      if (map[ch->table] != i || (c > 0 && ch->table == bank->changes[c - 1].table && ch->rowid == bank->changes[c - 1].rowid))
        continue;
      uint64_t now_hash = 0, now_count = 0, was_hash = 0, was_count = 0;
      if (row_by_id(bank, t->row_sql, ch->rowid, &now_hash, &now_count) != 0 ||
          row_by_id(view, t->row_sql, ch->rowid, &was_hash, &was_count) != 0)
        return fimi_fail(err, "env: change digest query on %s: %s", t->name, sqlite3_errmsg(bank->db));
      sum += now_hash - was_hash;
      count += now_count - was_count;
    }
    h = hash_fnv1a(h, t->name, strlen(t->name) + 1);
    h = hash_fnv1a(h, &sum, sizeof sum);
    h = hash_fnv1a(h, &count, sizeof count);
  }
  *digest = h;
  return 0;
}

int env_state_digest(BankEpisode *bank, uint64_t *digest, FimiError *err) {
  int rc = changed_digest(bank, digest, err);
  return rc == 1 ? env_state_digest_full(bank, digest, err) : rc;
}

// The gold state's digest: kept with the task's gold replay once computed,
// else by replaying the gold chain again on a fresh copy.
static int gold_digest(EnvEpisode *ep, uint64_t *digest, FimiError *err) {
  GoldReplay *g = ep->gold;
  if (!g->has_digest && replay_gold(ep->task, ep->pool, g, 1, err) != 0) return -1;
  *digest = g->digest;
  return 0;
}

// The db check. Fast path: tools are deterministic functions of the state,
// the arguments and the authenticated customer; reads never change the state
// and failed writes roll back. So when the agent's successful writes are the
// gold chain's writes (same names and argument texts, same order) for the
// same customer, the final states are equal without looking. Otherwise the
// states are compared by digest (env_state_digest), replaying the gold
// chain again on a fresh copy.
int env_episode_db_equal(EnvEpisode *ep, int allow_fast_path, int *equal, FimiError *err) {
  const BankEpisode *b = ep->bank;
  if (allow_fast_path) {
    const GoldReplay *g = ep->gold;
    int k = 0, same = strcmp(b->customer_id, g->customer) == 0 || g->num_writes == 0;
    for (int i = 0; i < b->num_calls && same; i++) {
      const BankCall *c = &b->calls[i];
      if (!c->ok || !env_tool_writes(env_tool_index(c->name))) continue;
      same = k < g->num_writes && strcmp(c->name, g->writes[k].name) == 0 &&
             strcmp(c->arguments, g->writes[k].arguments) == 0;
      k++;
    }
    if (same && k == g->num_writes) {
      *equal = 1;
      return 0;
    }
  }
  uint64_t gold = 0, agent = 0;
  if (gold_digest(ep, &gold, err) != 0 || env_state_digest(ep->bank, &agent, err) != 0) return -1;
  *equal = gold == agent;
  return 0;
}

int env_score(EnvEpisode *ep, RewardBreakdown *out, FimiError *err) {
  int equal = 0;
  if (env_episode_db_equal(ep, 1, &equal, err) != 0) return -1;
  RewardInput in = reward_input(ep, equal);
  if (reward_compute(&in, out, err) != 0) return -1;
  out->simulator_model = ep->model_sim != NULL;
  out->simulator_drift = ep->model_sim ? user_sim_model_drift_total(ep->model_sim) : 0;
  return 0;
}

int env_set_tool_syntax(EnvEpisode *ep, ToolCallSyntax syntax, FimiError *err) {
  if (!toolcall_syntax_name(syntax)) return fimi_fail(err, "env: tool-call syntax %d is neither json nor gemma4", (int)syntax);
  if (ep->turns_used > 0 && syntax != ep->syntax)
    return fimi_fail(err, "env: the tool-call syntax is chosen before the first agent turn (task %s)",
                     ep->task->id ? ep->task->id : "?");
  ep->syntax = syntax;
  return 0;
}

ToolCallSyntax env_tool_syntax(const EnvEpisode *ep) { return ep->syntax; }
const Task *env_episode_task(const EnvEpisode *ep) { return ep->task; }
BankEpisode *env_episode_bank(EnvEpisode *ep) { return ep->bank; }
int env_episode_turns_used(const EnvEpisode *ep) { return ep->turns_used; }
int env_episode_num_turns(const EnvEpisode *ep) { return ep->num_turns; }
const EnvTurn *env_episode_turn(const EnvEpisode *ep, int i) {
  return i >= 0 && i < ep->num_turns ? &ep->turns[i] : NULL;
}
const cJSON *env_episode_gold_results(const EnvEpisode *ep) { return ep->gold->results; }
int env_episode_num_values(const EnvEpisode *ep) { return ep->task->num_communicate; }
const char *env_episode_value(const EnvEpisode *ep, int i) {
  return i >= 0 && i < ep->task->num_communicate ? ep->values[i] : NULL;
}
const char *env_episode_confirm_value(const EnvEpisode *ep, int i) {
  return i >= 0 && i < ep->task->num_confirms ? ep->confirm_values[i] : NULL;
}
