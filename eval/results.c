// eval/results.c: EvalResults, its JSON form, writing and reading it back.
#include "eval/results.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "eval/summary.h"

#define EVAL_RESULTS_FORMAT "fimi-eval-results"
#define EVAL_RESULTS_VERSION 1
#define EVAL_RESULTS_MAX_BYTES ((size_t)4 << 30)

EvalEpisode *eval_results_add(EvalResults *r, FimiError *err) {
  if (r->count == r->cap) {
    int cap = r->cap ? 2 * r->cap : 64;
    EvalEpisode *grown = realloc(r->episodes, (size_t)cap * sizeof *grown);
    if (!grown) {
      fimi_fail(err, "out of memory (%d episodes)", cap);
      return NULL;
    }
    r->episodes = grown;
    r->cap = cap;
  }
  EvalEpisode *e = &r->episodes[r->count++];
  memset(e, 0, sizeof *e);
  return e;
}

static char *copy_string(const char *s, FimiError *err) {
  char *c = strdup(s ? s : "");
  if (!c) fimi_fail(err, "out of memory");
  return c;
}

int eval_episode_set_task(EvalEpisode *e, const Task *task, FimiError *err) {
  e->task_id = copy_string(task->id, err);
  e->family = e->task_id ? copy_string(task->family, err) : NULL;
  if (!e->family) return -1;
  e->kind = task->kind;
  e->use_case = task->use_case;
  e->num_gold = task->num_gold;
  return 0;
}

static void episode_free(EvalEpisode *e) {
  free(e->task_id);
  free(e->family);
  cJSON_Delete(e->trajectory);
}

void eval_results_free(EvalResults *r) {
  for (int i = 0; i < r->count; i++) episode_free(&r->episodes[i]);
  free(r->episodes);
  memset(r, 0, sizeof *r);
}

// ---- writing ------------------------------------------------------------------------------

// Seeds are 64-bit: JSON numbers (doubles) would round them, so they are hex strings.
static void add_seed(cJSON *o, const char *key, uint64_t seed) {
  char text[24];
  snprintf(text, sizeof text, "0x%016" PRIx64, seed);
  cJSON_AddStringToObject(o, key, text);
}

static cJSON *episode_to_json(const EvalEpisode *e) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "task_id", e->task_id);
  cJSON_AddStringToObject(o, "family", e->family);
  cJSON_AddStringToObject(o, "kind", task_kind_name(e->kind));
  cJSON_AddStringToObject(o, "use_case", task_use_case_name(e->use_case));
  cJSON_AddNumberToObject(o, "num_gold", e->num_gold);
  cJSON_AddNumberToObject(o, "trial", e->trial);
  add_seed(o, "env_seed", e->env_seed);
  cJSON_AddStringToObject(o, "end", e->end);
  cJSON_AddBoolToObject(o, "failed", e->failed);
  cJSON_AddNumberToObject(o, "turns", e->turns);
  cJSON_AddNumberToObject(o, "tool_calls", e->tool_calls);
  cJSON_AddNumberToObject(o, "tool_errors", e->tool_errors);
  cJSON_AddNumberToObject(o, "malformed", e->malformed);
  cJSON_AddNumberToObject(o, "generated_tokens", (double)e->generated);
  cJSON_AddNumberToObject(o, "tokens", (double)e->tokens);
  cJSON_AddItemToObject(o, "reward", reward_to_json(&e->reward));
  cJSON_AddItemToObject(o, "trajectory", e->trajectory ? cJSON_Duplicate(e->trajectory, 1) : cJSON_CreateArray());
  return o;
}

static void add_info(cJSON *o, const EvalRunInfo *info) {
  cJSON_AddStringToObject(o, "format", EVAL_RESULTS_FORMAT);
  cJSON_AddNumberToObject(o, "version", EVAL_RESULTS_VERSION);
  cJSON_AddStringToObject(o, "label", info->label);
  cJSON_AddStringToObject(o, "model", info->model);
  cJSON_AddStringToObject(o, "tasks_file", info->tasks_file);
  cJSON_AddNumberToObject(o, "trials", info->trials);
  add_seed(o, "seed", info->seed);
  cJSON_AddNumberToObject(o, "temperature", info->temperature);
  cJSON_AddNumberToObject(o, "top_p", info->top_p);
  cJSON_AddNumberToObject(o, "success", info->success);
  cJSON_AddNumberToObject(o, "parameters", (double)info->parameters);
  cJSON_AddNumberToObject(o, "seconds", info->seconds);
}

cJSON *eval_results_to_json(const EvalResults *r, FimiError *err) {
  cJSON *o = cJSON_CreateObject();
  cJSON *summary = o ? eval_summary_json(r, err) : NULL;
  cJSON *episodes = summary ? cJSON_CreateArray() : NULL;
  if (!episodes) {
    cJSON_Delete(o);
    cJSON_Delete(summary);
    if (err && !err->message[0]) fimi_fail(err, "out of memory");
    return NULL;
  }
  add_info(o, &r->info);
  cJSON_AddItemToObject(o, "summary", summary);
  cJSON_AddItemToObject(o, "episodes", episodes);
  for (int i = 0; i < r->count; i++) {
    cJSON *e = episode_to_json(&r->episodes[i]);
    if (!e) {
      cJSON_Delete(o);
      fimi_fail(err, "out of memory");
      return NULL;
    }
    cJSON_AddItemToArray(episodes, e);
  }
  return o;
}

int eval_results_write(const EvalResults *r, const char *path, FimiError *err) {
  cJSON *o = eval_results_to_json(r, err);
  if (!o) return fimi_fail_wrap(err, "%s", path);
  int rc = json_write_file(path, o, err);
  cJSON_Delete(o);
  return rc;
}

// ---- reading ------------------------------------------------------------------------------

static int get_seed(const cJSON *o, const char *key, uint64_t *out, const char *what, FimiError *err) {
  char text[32], *end = NULL;
  if (json_get_string(o, key, 1, text, sizeof text, what, err) != 0) return -1;
  *out = strtoull(text, &end, 16);
  if (end == text || *end) return fimi_fail(err, "%s.%s: not a hex seed: \"%s\"", what, key, text);
  return 0;
}

static int get_owned_string(const cJSON *o, const char *key, char **out, const char *what, FimiError *err) {
  char text[TASK_MAX_STRING + 1];
  if (json_get_string(o, key, 1, text, sizeof text, what, err) != 0) return -1;
  *out = copy_string(text, err);
  return *out ? 0 : -1;
}

static int get_enum(const cJSON *o, const char *key, int (*from_name)(const char *), int *out, const char *what,
                    FimiError *err) {
  char text[64];
  if (json_get_string(o, key, 1, text, sizeof text, what, err) != 0) return -1;
  *out = from_name(text);
  if (*out < 0) return fimi_fail(err, "%s.%s: unknown value \"%s\"", what, key, text);
  return 0;
}

static int episode_from_json(const cJSON *o, EvalEpisode *e, const char *what, FimiError *err) {
  char sub[1280];
  int kind, use_case;
  if (!cJSON_IsObject(o)) return fimi_fail(err, "%s: not an object", what);
  if (get_owned_string(o, "task_id", &e->task_id, what, err) != 0 ||
      get_owned_string(o, "family", &e->family, what, err) != 0 ||
      get_enum(o, "kind", task_kind_from_name, &kind, what, err) != 0 ||
      get_enum(o, "use_case", task_use_case_from_name, &use_case, what, err) != 0 ||
      json_get_int(o, "num_gold", 1, &e->num_gold, what, err) != 0 ||
      json_get_int(o, "trial", 1, &e->trial, what, err) != 0 || get_seed(o, "env_seed", &e->env_seed, what, err) != 0 ||
      json_get_string(o, "end", 1, e->end, sizeof e->end, what, err) != 0 ||
      json_get_bool(o, "failed", 1, &e->failed, what, err) != 0 ||
      json_get_int(o, "turns", 1, &e->turns, what, err) != 0 ||
      json_get_int(o, "tool_calls", 1, &e->tool_calls, what, err) != 0 ||
      json_get_int(o, "tool_errors", 1, &e->tool_errors, what, err) != 0 ||
      json_get_int(o, "malformed", 1, &e->malformed, what, err) != 0 ||
      json_get_int64(o, "generated_tokens", 1, &e->generated, what, err) != 0 ||
      json_get_int64(o, "tokens", 1, &e->tokens, what, err) != 0)
    return -1;
  e->kind = (TaskKind)kind;
  e->use_case = (TaskUseCase)use_case;
  if (e->trial < 0) return fimi_fail(err, "%s.trial: negative", what);
  snprintf(sub, sizeof sub, "%s.reward", what);
  if (reward_from_json(cJSON_GetObjectItemCaseSensitive(o, "reward"), &e->reward, sub, err) != 0) return -1;
  const cJSON *trajectory = cJSON_GetObjectItemCaseSensitive(o, "trajectory");
  if (!cJSON_IsArray(trajectory)) return fimi_fail(err, "%s.trajectory: missing or not an array", what);
  e->trajectory = cJSON_Duplicate(trajectory, 1);
  return e->trajectory ? 0 : fimi_fail(err, "out of memory");
}

static int info_from_json(const cJSON *o, EvalRunInfo *info, const char *what, FimiError *err) {
  char format[64];
  int version;
  if (json_get_string(o, "format", 1, format, sizeof format, what, err) != 0) return -1;
  if (strcmp(format, EVAL_RESULTS_FORMAT))
    return fimi_fail(err, "%s.format: \"%s\", expected \"%s\"", what, format, EVAL_RESULTS_FORMAT);
  if (json_get_int(o, "version", 1, &version, what, err) != 0) return -1;
  if (version != EVAL_RESULTS_VERSION)
    return fimi_fail(err, "%s.version: %d, this fimi reads version %d", what, version, EVAL_RESULTS_VERSION);
  if (json_get_string(o, "label", 1, info->label, sizeof info->label, what, err) != 0 ||
      json_get_string(o, "model", 1, info->model, sizeof info->model, what, err) != 0 ||
      json_get_string(o, "tasks_file", 1, info->tasks_file, sizeof info->tasks_file, what, err) != 0 ||
      json_get_int(o, "trials", 1, &info->trials, what, err) != 0 || get_seed(o, "seed", &info->seed, what, err) != 0 ||
      json_get_double(o, "temperature", 1, &info->temperature, what, err) != 0 ||
      json_get_double(o, "top_p", 1, &info->top_p, what, err) != 0 ||
      json_get_double(o, "success", 1, &info->success, what, err) != 0 ||
      json_get_int64(o, "parameters", 1, &info->parameters, what, err) != 0 ||
      json_get_double(o, "seconds", 1, &info->seconds, what, err) != 0)
    return -1;
  if (info->trials < 1) return fimi_fail(err, "%s.trials: %d, must be >= 1", what, info->trials);
  return 0;
}

int eval_results_read(const char *path, EvalResults *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  cJSON *root = json_parse_file(path, EVAL_RESULTS_MAX_BYTES, err);
  if (!root) return -1;
  int rc = eval_results_from_json(root, path, out, err);
  cJSON_Delete(root);
  return rc;
}

int eval_results_from_json(const cJSON *root, const char *path, EvalResults *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  int rc = info_from_json(root, &out->info, path, err);
  const cJSON *episodes = cJSON_GetObjectItemCaseSensitive(root, "episodes");
  if (rc == 0 && !cJSON_IsArray(episodes)) rc = fimi_fail(err, "%s.episodes: missing or not an array", path);
  const cJSON *item;
  int index = 0;
  if (rc == 0) cJSON_ArrayForEach(item, episodes) {
      char what[1200];
      snprintf(what, sizeof what, "%s: episodes[%d]", path, index++);
      EvalEpisode *e = eval_results_add(out, err);
      if (!e || episode_from_json(item, e, what, err) != 0) {
        rc = -1;
        break;
      }
    }
  if (rc != 0) eval_results_free(out);
  return rc;
}
