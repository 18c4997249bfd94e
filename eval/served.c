// eval/served.c: episodes played by a served model (see served.h). Threads
// take episodes in order from a shared counter; each has its own EnvWorld
// (worlds are not thread-safe) and writes only its own episodes, which were
// added before the threads started, so the results are in the harness's
// order whatever the timing.
#define _GNU_SOURCE  // strdup
#include "eval/served.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "core/rng.h"
#include "core/text.h"
#include "data/toolcall.h"
#include "env/agent_prompt.h"
#include "eval/episode_record.h"
#include "rl/rollout.h"

// ---- one episode ------------------------------------------------------------------------------

typedef struct ServedEpisode {
  const EvalConfig *c;
  OpenAIClient *client;
  EnvEpisode *ep;
  cJSON *body;        // the request: messages, tools, sampling (owned)
  cJSON *messages;    // in body
  EvalEpisode *e;
  int malformed_in_row;
  int calls_made;     // ids of calls fimi had to make up
  char *unsent;       // the turn that ended the episode on a budget (never sent to the environment)
  int unsent_call;    // it parsed as a tool call
} ServedEpisode;

// The task's catalog as OpenAI function tools.
static cJSON *openai_tools(const Task *task, EnvCatalogMode mode, FimiError *err) {
  cJSON *catalog = env_agent_catalog(task, mode, err);
  if (!catalog) return NULL;
  cJSON *tools = cJSON_CreateArray();
  for (cJSON *t = catalog->child; t; t = t->next) {
    cJSON *tool = cJSON_CreateObject();
    cJSON_AddStringToObject(tool, "type", "function");
    cJSON_AddItemToObject(tool, "function", cJSON_Duplicate(t, 1));
    cJSON_AddItemToArray(tools, tool);
  }
  cJSON_Delete(catalog);
  return tools;
}

static int start_request(ServedEpisode *s, const Task *task, const char *first, FimiError *err) {
  const RolloutConfig *r = &s->c->rollout;
  cJSON *tools = openai_tools(task, r->catalog, err);
  if (!tools) return -1;
  s->body = cJSON_CreateObject();
  s->messages = cJSON_AddArrayToObject(s->body, "messages");
  openai_add_message(s->messages, "system", env_agent_instructions());
  openai_add_message(s->messages, "user", first);
  cJSON_AddItemToObject(s->body, "tools", tools);
  cJSON_AddNumberToObject(s->body, "temperature", r->sampler.temperature);
  cJSON_AddNumberToObject(s->body, "top_p", r->sampler.top_p);
  cJSON_AddNumberToObject(s->body, "max_tokens", r->max_turn_tokens);
  return 0;
}

// The agent turn an answer becomes: the call in fimi's syntax (after the
// text before it), the message, or "" (which the environment reads as a
// broken turn). Malloc'd.
static char *agent_turn(const OpenAIChat *a, FimiError *err) {
  TextBuf t = {0};
  int rc = 0;
  if (a->content && *a->content) rc = text_append_str(&t, a->content, err);
  if (rc == 0 && a->has_call) {
    cJSON *args = a->call_arguments ? cJSON_Parse(a->call_arguments) : NULL;
    FimiError render = {0};
    char *call = cJSON_IsObject(args) ? toolcall_render_call(a->call_name, args, &render) : NULL;
    // Arguments that are not an object, or a name fimi's syntax cannot hold:
    // the raw text, and the environment says what is wrong.
    rc = call ? text_printf(&t, err, "%s%s", t.len ? "\n" : "", call)
              : text_printf(&t, err, "%s<tool_call>{\"name\":\"%s\",\"arguments\":%s}</tool_call>", t.len ? "\n" : "",
                            a->call_name, a->call_arguments ? a->call_arguments : "");
    free(call);
    cJSON_Delete(args);
  }
  if (rc == 0 && !t.data) rc = text_append(&t, "", 0, err);
  if (rc != 0) text_free(&t);
  return rc == 0 ? t.data : NULL;
}

// The assistant message of the answer in the history, and the id of its
// call (one is made up when the server gave none, or when the environment
// answers a turn that was not a call with a tool error).
static void add_answer(ServedEpisode *s, const OpenAIChat *a, int tool_turn, char *id, size_t id_size) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", "assistant");
  if (a->content) cJSON_AddStringToObject(m, "content", a->content);
  else cJSON_AddNullToObject(m, "content");
  if (tool_turn) {
    if (a->has_call && a->call_id[0]) snprintf(id, id_size, "%s", a->call_id);
    else snprintf(id, id_size, "call_fimi_%d", s->calls_made++);
    cJSON *args = a->has_call && a->call_arguments ? cJSON_Parse(a->call_arguments) : NULL;
    cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    cJSON_AddStringToObject(call, "id", id);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON_AddStringToObject(fn, "name", a->has_call ? a->call_name : "invalid_tool_call");
    // Arguments that are not an object are sent as {}: the tool message says what was wrong.
    cJSON_AddStringToObject(fn, "arguments", cJSON_IsObject(args) ? a->call_arguments : "{}");
    cJSON_Delete(args);
    cJSON_AddItemToObject(call, "function", fn);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(m, "tool_calls"), call);
  }
  cJSON_AddItemToArray(s->messages, m);
}

// A server without a parser for fimi's calls (transformers serve, vLLM
// without a tool parser) returns the call as text, and one that decodes
// without special tokens drops its <tool_call> tags as well: read as the
// model turn it is (or, tags gone, as the bare {"name", "arguments"}
// object), it becomes the answer's tool call, the text before it the
// content, so the turn and the history carry it as a call.
static int bare_call(const char *text, ToolCallParse *p) {
  const char *start = text + strspn(text, " \t\r\n");
  if (*start != '{') return 0;
  TextBuf wrapped = {0};
  if (text_printf(&wrapped, NULL, "<tool_call>%s</tool_call>", start) != 0) return 0;
  int ok = toolcall_parse(wrapped.data, wrapped.len, p) == TOOLCALL_TOOL_CALL;
  p->text = NULL, p->text_len = 0;  // pointed into wrapped
  text_free(&wrapped);
  if (!ok) toolcall_parse_free(p);
  return ok;
}

static void read_call_in_text(OpenAIChat *a) {
  if (a->has_call || !a->content) return;
  ToolCallParse p;
  int call = toolcall_parse(a->content, strlen(a->content), &p) == TOOLCALL_TOOL_CALL;
  if (!call) toolcall_parse_free(&p);
  if (!call && !(call = bare_call(a->content, &p))) return;
  char *args = strlen(p.name) < sizeof a->call_name ? cJSON_PrintUnformatted(p.arguments) : NULL;
  char *preface = p.text_len ? strndup(p.text, p.text_len) : NULL;
  if (args) {
    a->has_call = 1;
    a->calls = 1;
    snprintf(a->call_name, sizeof a->call_name, "%s", p.name);
    a->call_arguments = args;
    free(a->content);
    a->content = preface;
  } else {
    free(preface);
  }
  toolcall_parse_free(&p);
}

// The tool message of the environment's tool turn {"name", "result"|"error"}
// (with the call's name: fimi serve and templates that render fimi's tool
// turns read it; other servers ignore it).
static void add_tool_result(ServedEpisode *s, const char *text, const char *id) {
  cJSON *turn = cJSON_Parse(text);
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(turn, "result");
  const cJSON *error = cJSON_GetObjectItemCaseSensitive(turn, "error");
  char *content = NULL;
  if (result) {
    content = cJSON_PrintUnformatted(result);
  } else {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "error", cJSON_IsString(error) ? error->valuestring : text);
    content = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(turn, "name");
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", "tool");
  cJSON_AddStringToObject(m, "tool_call_id", id);
  if (cJSON_IsString(name)) cJSON_AddStringToObject(m, "name", name->valuestring);
  cJSON_AddStringToObject(m, "content", content ? content : text);
  cJSON_AddItemToArray(s->messages, m);
  free(content);
  cJSON_Delete(turn);
}

// The episode's end when the server refused a request.
static const char *refusal_end(const OpenAIChat *a) {
  return strcmp(a->error_code, "context_length_exceeded") == 0 ? rollout_end_name(ROLLOUT_END_CONTEXT)
                                                                 : rollout_end_name(ROLLOUT_END_FAILED);
}

// One request and one env step. 1: the episode ended (e->end set); 0: go
// on; -1: the run must stop (err), OPENAI_REFUSED: recorded as the end.
static int step(ServedEpisode *s, int turn, FimiError *err) {
  const RolloutConfig *r = &s->c->rollout;
  EvalEpisode *e = s->e;
  cJSON_DeleteItemFromObjectCaseSensitive(s->body, "seed");
  cJSON_AddNumberToObject(s->body, "seed", (double)(rng_mix(e->env_seed, (uint64_t)turn) >> 12));
  OpenAIChat a;
  int rc = openai_chat(s->client, s->body, &a, err);
  if (rc == OPENAI_REFUSED) {
    snprintf(e->end, sizeof e->end, "%s", refusal_end(&a));
    e->failed = strcmp(e->end, "failed") == 0;
    openai_chat_free(&a);
    return OPENAI_REFUSED;
  }
  if (rc != 0) return -1;
  read_call_in_text(&a);
  e->turns++;
  e->generated += a.completion_tokens;
  e->tokens += a.prompt_tokens - a.cached_tokens + a.completion_tokens;  // what the server computed
  char *text = agent_turn(&a, err);
  if (!text) {
    openai_chat_free(&a);
    return -1;
  }
  // As the rollout engine counts them: cut at the turn budget, or a call
  // that does not parse (here also an answer the client could not use).
  ToolCallParse parse;
  ToolCallKind kind = toolcall_parse(text, strlen(text), &parse);
  toolcall_parse_free(&parse);
  int malformed = a.malformed || kind == TOOLCALL_ERROR || strcmp(a.finish_reason, "length") == 0;
  e->malformed += malformed;
  s->malformed_in_row = malformed ? s->malformed_in_row + 1 : 0;
  // The engine's budgets end the episode before the environment sees the turn.
  const char *end = e->generated >= r->max_episode_tokens ? rollout_end_name(ROLLOUT_END_TOKEN_BUDGET)
                    : s->malformed_in_row >= r->max_malformed ? rollout_end_name(ROLLOUT_END_MALFORMED)
                                                              : NULL;
  if (end) {
    s->unsent = text;
    s->unsent_call = kind == TOOLCALL_TOOL_CALL;
    openai_chat_free(&a);
    snprintf(e->end, sizeof e->end, "%s", end);
    return 1;
  }
  EnvObservation obs = {0};
  rc = env_step(s->ep, text, strlen(text), &obs, err);
  free(text);
  if (rc != 0) {  // the environment (or its model-played customer) failed this episode, not the run
    openai_chat_free(&a);
    snprintf(e->end, sizeof e->end, "%s", rollout_end_name(ROLLOUT_END_FAILED));
    e->failed = 1;
    return OPENAI_REFUSED;
  }
  if (rc == 0) {
    char id[160];
    add_answer(s, &a, obs.kind == ENV_OBS_TOOL, id, sizeof id);
    if (obs.kind == ENV_OBS_TOOL) add_tool_result(s, obs.text, id);
    else openai_add_message(s->messages, "user", obs.text);
  }
  openai_chat_free(&a);
  if (rc != 0) return -1;
  if (obs.done) snprintf(e->end, sizeof e->end, "%s", eval_agent_end_name(obs.end));
  return obs.done;
}

// The turn a budget ended the episode on, last in the trajectory (the
// environment never saw it), as a model's episode records it.
static int add_unsent_turn(ServedEpisode *s) {
  if (!s->unsent) return 0;
  cJSON *turn = cJSON_CreateObject();
  cJSON_AddStringToObject(turn, "role", "model");
  cJSON_AddStringToObject(turn, "text", s->unsent);
  cJSON_AddBoolToObject(turn, "sampled", 1);
  cJSON_AddItemToArray(s->e->trajectory, turn);
  s->e->tool_calls += s->unsent_call;
  return 0;
}

// The system turn first in the trajectory, as a model's episode records it.
static int add_system_turn(EvalEpisode *e, const Task *task, EnvCatalogMode mode, FimiError *err) {
  char *text = env_agent_system_text(task, mode, err);
  if (!text) return -1;
  cJSON *turn = cJSON_CreateObject();
  cJSON_AddStringToObject(turn, "role", "system");
  cJSON_AddStringToObject(turn, "text", text);
  cJSON_AddBoolToObject(turn, "sampled", 0);
  cJSON_InsertItemInArray(e->trajectory, 0, turn);
  free(text);
  return 0;
}

static int play_served(const EvalConfig *c, OpenAIClient *client, EnvWorld *world, const Task *task, int trial,
                       EvalEpisode *e, FimiError *err) {
  if (eval_episode_set_task(e, task, err) != 0) return -1;
  e->trial = trial;
  e->env_seed = eval_env_seed(c->seed, task->id, trial);
  ServedEpisode s = {.c = c, .client = client, .e = e};
  const char *first = NULL;
  int rc = env_open(world, task, e->env_seed, &s.ep, &first, err);
  if (rc == 0) rc = start_request(&s, task, first, err);
  for (int turn = 0; rc == 0; turn++) {
    rc = step(&s, turn, err);
    if (rc == 1) rc = 0;
    else if (rc == 0) continue;
    break;
  }
  FimiError refusal = {0};
  if (rc == OPENAI_REFUSED) {  // recorded, not fatal
    refusal = *err;
    memset(err, 0, sizeof *err);
    rc = 0;
  }
  if (rc == 0 && !e->failed) rc = env_score(s.ep, &e->reward, err);  // a failed episode scores 0
  if (rc == 0) rc = eval_record_env_turns(e, s.ep, err);
  if (rc == 0) rc = add_system_turn(e, task, c->rollout.catalog, err);
  if (rc == 0) rc = add_unsent_turn(&s);
  if (rc == 0 && e->failed) rc = eval_record_failure(e, &refusal);  // zero reward, the refusal last
  if (s.ep) env_close(s.ep);
  cJSON_Delete(s.body);
  free(s.unsent);
  return rc;
}

// ---- episodes on threads -------------------------------------------------------------------------

typedef struct ServedRun {
  const EvalConfig *c;
  OpenAIClient *client;
  const TaskList *tasks;
  EvalResults *out;
  int first, total;
  pthread_mutex_t lock;
  int next, done, stop;
  double reward;
  FimiError err;  // the first failure that stops the run
  Progress progress;
} ServedRun;

static void *served_thread(void *arg) {
  ServedRun *run = arg;
  EnvWorld *world = NULL;
  FimiError err = {0};
  int rc = env_world_create(&world, &err);
  if (rc == 0) env_world_set_customer_model(world, run->c->customer, run->c->customer_temperature);
  for (;;) {
    pthread_mutex_lock(&run->lock);
    int g = rc == 0 && !run->stop && run->next < run->total ? run->next++ : -1;
    pthread_mutex_unlock(&run->lock);
    if (g < 0) break;
    const Task *task = &run->tasks->tasks[g / run->c->trials];
    EvalEpisode *e = &run->out->episodes[run->first + g];
    rc = play_served(run->c, run->client, world, task, g % run->c->trials, e, &err);
    if (rc != 0) fimi_fail_wrap(&err, "task %s, trial %d", task->id, g % run->c->trials);
    pthread_mutex_lock(&run->lock);
    run->done++;
    run->reward += e->reward.total;
    if (run->c->progress) {
      char extra[64];
      snprintf(extra, sizeof extra, "reward %.3f", run->reward / run->done);
      progress_update(&run->progress, run->done, run->done, "episodes", extra);
    }
    pthread_mutex_unlock(&run->lock);
  }
  if (rc != 0) {
    pthread_mutex_lock(&run->lock);
    if (!run->stop) run->err = err;
    run->stop = 1;
    pthread_mutex_unlock(&run->lock);
  }
  env_world_free(world);
  return NULL;
}

int eval_run_served(const EvalConfig *c, const EvalServedConfig *s, OpenAIClient *client, const TaskList *tasks,
                    EvalResults *out, FimiError *err) {
  if (eval_config_validate(c, err) != 0) return -1;
  ServedRun run = {.c = c, .client = client, .tasks = tasks, .out = out, .first = out->count,
                   .total = tasks->count * c->trials};
  if (run.total == 0) return 0;
  for (int g = 0; g < run.total; g++)
    if (!eval_results_add(out, err)) return -1;
  int threads = s->concurrency < 1 ? 1 : s->concurrency > run.total ? run.total : s->concurrency;
  pthread_t *ids = calloc((size_t)threads, sizeof *ids);
  if (!ids) return fimi_fail(err, "out of memory");
  pthread_mutex_init(&run.lock, NULL);
  if (c->progress) progress_start(&run.progress, "eval", run.total, stderr);
  int started = 0;
  while (started < threads && pthread_create(&ids[started], NULL, served_thread, &run) == 0) started++;
  for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
  if (c->progress) progress_finish(&run.progress);
  pthread_mutex_destroy(&run.lock);
  free(ids);
  if (started == 0) return fimi_fail(err, "eval: no threads for the served episodes");
  if (run.stop) {
    *err = run.err;
    return -1;
  }
  return 0;
}
