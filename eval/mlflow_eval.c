// eval/mlflow_eval.c: evaluations as MLflow runs (see mlflow_eval.h). HTTP
// by net/mlflow.c; settings and flattening as training's tracker does them.
#define _GNU_SOURCE
#include "eval/mlflow_eval.h"

#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "core/log.h"

#define RUN_FILE "mlflow_run.json"
#define MAX_TAGS 24
#define MAX_PARAMS 64
#define RESULTS_MAX_BYTES ((size_t)1 << 30)  // a downloaded result file, held in memory
#define SEARCH_PAGE 1000

struct EvalMlflowRun {
  MlflowClient client;
  MlflowRunInfo run;
  char experiment[MLFLOW_EXPERIMENT_MAX];
};

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// ---- settings and the training run -------------------------------------------------

int eval_mlflow_settings(MlflowSettings *out, int *experiment_named, const char *flag_uri, const char *flag_experiment,
                         const Config *config, FimiError *err) {
  const char *uri = flag_uri && flag_uri[0] ? flag_uri : NULL;
  const char *experiment = flag_experiment && flag_experiment[0] ? flag_experiment : NULL;
  if (uri && http_url_check(uri, "--mlflow-uri", err) != 0) return -1;
  if (config && !uri && !(uri = config_get_string(config, "track", "mlflow_uri", err))) return -1;
  if (config && !experiment && !(experiment = config_get_string(config, "track", "experiment", err))) return -1;
  const char *env_experiment = getenv("MLFLOW_EXPERIMENT_NAME");
  *experiment_named = (experiment && experiment[0]) || (env_experiment && env_experiment[0]);
  return mlflow_settings_resolve(out, uri, experiment, MLFLOW_DEFAULT_FLUSH_S, getenv("MLFLOW_TRACKING_URI"),
                                 env_experiment, getenv("MLFLOW_TRACKING_TOKEN"), err);
}

int eval_mlflow_training_link(const char *model_dir, EvalTrainingLink *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  out->step = -1;
  char dir[PATH_MAX], base[PATH_MAX], path[PATH_MAX + 32];
  if (snprintf(dir, sizeof dir, "%s", model_dir) >= (int)sizeof dir) return 1;
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') dir[--n] = 0;  // "run/step_000010/"
  snprintf(base, sizeof base, "%s", dir);
  const char *name = basename(base);
  long long step = -1;
  char tail;
  if (sscanf(name, "step_%lld%c", &step, &tail) == 1 && step >= 0) out->step = step;
  snprintf(path, sizeof path, "%s/" RUN_FILE, dirname(dir));
  if (access(path, F_OK) != 0) return 1;
  cJSON *o = json_parse_file(path, 1 << 20, err);
  int rc = o && json_get_string(o, "tracking_uri", 1, out->tracking_uri, sizeof out->tracking_uri, path, err) == 0 &&
                   json_get_string(o, "experiment_name", 1, out->experiment_name, sizeof out->experiment_name, path,
                                   err) == 0 &&
                   json_get_string(o, "run_id", 1, out->run_id, sizeof out->run_id, path, err) == 0
               ? 0
               : -1;
  cJSON_Delete(o);
  return rc;
}

// ---- what a result file logs --------------------------------------------------------

static int is_format(const cJSON *root, const char *format) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
  return cJSON_IsString(f) && !strcmp(f->valuestring, format);
}

// An eval summary as logged: without "family", pass_k keyed by k.
static cJSON *eval_view(const cJSON *summary) {
  cJSON *view = cJSON_Duplicate(summary, 1);
  if (!view) return NULL;
  cJSON_DeleteItemFromObjectCaseSensitive(view, "family");
  cJSON *list = cJSON_DetachItemFromObjectCaseSensitive(view, "pass_k"), *by_k = cJSON_CreateObject(), *item;
  cJSON_ArrayForEach(item, list) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(item, "k");
    if (!cJSON_IsNumber(k) || !by_k) continue;
    char key[32];
    snprintf(key, sizeof key, "%d", k->valueint);
    cJSON *copy = cJSON_Duplicate(item, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "k");
    if (copy) cJSON_AddItemToObject(by_k, key, copy);
  }
  cJSON_Delete(list);
  if (by_k) cJSON_AddItemToObject(view, "pass_k", by_k);
  return view;
}

int eval_mlflow_summary_metrics(const cJSON *root, void (*emit)(void *ctx, const char *key, double value), void *ctx) {
  const cJSON *summary = cJSON_GetObjectItemCaseSensitive(root, "summary");
  if (!cJSON_IsObject(summary)) return -1;
  cJSON *view;
  if (is_format(root, "fimi-eval-results")) view = eval_view(summary);
  else if (is_format(root, "fimi-eval-bench")) view = cJSON_Duplicate(summary, 1);
  else return -1;
  if (!view) return -1;
  mlflow_flatten_row(view, emit, ctx);
  cJSON_Delete(view);
  const cJSON *seconds = cJSON_GetObjectItemCaseSensitive(root, "seconds");
  if (cJSON_IsNumber(seconds)) emit(ctx, "seconds", seconds->valuedouble);
  return 0;
}

int eval_mlflow_params(const cJSON *root, void (*emit)(void *ctx, const char *key, const char *value), void *ctx) {
  static const char *const skip[] = {"format", "version", "seconds", "episodes_per_second", "cases_per_second", NULL};
  int n = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    int skipped = !item->string;
    for (int i = 0; !skipped && skip[i]; i++) skipped = !strcmp(item->string, skip[i]);
    if (skipped) continue;
    if (cJSON_IsString(item)) {
      emit(ctx, item->string, item->valuestring);
      n++;
    } else if (cJSON_IsNumber(item)) {
      char *text = cJSON_PrintUnformatted(item);  // the shortest form that reads back: "0.7"
      if (text) emit(ctx, item->string, text), n++;
      free(text);
    }
  }
  return n;
}

// ---- the run ------------------------------------------------------------------------

typedef struct KeyValues {
  MlflowKeyValue kv[MAX_PARAMS];
  char *owned[2 * MAX_PARAMS];
  int n, num_owned;
} KeyValues;

static void kv_add(KeyValues *k, const char *key, const char *value) {
  if (k->n >= MAX_PARAMS || !value || !value[0] || k->num_owned + 2 > 2 * MAX_PARAMS) return;
  char *kc = strndup(key, MLFLOW_MAX_KEY), *vc = strndup(value, MLFLOW_MAX_PARAM_VALUE);
  if (!kc || !vc) {
    free(kc);
    free(vc);
    return;
  }
  k->owned[k->num_owned++] = kc;
  k->owned[k->num_owned++] = vc;
  k->kv[k->n++] = (MlflowKeyValue){kc, vc};
}

static void kv_emit(void *ctx, const char *key, const char *value) { kv_add(ctx, key, value); }

static void kv_free(KeyValues *k) {
  for (int i = 0; i < k->num_owned; i++) free(k->owned[i]);
  k->n = k->num_owned = 0;
}

static void collect_tags(const EvalMlflowOptions *o, const EvalTrainingLink *link, int linked, KeyValues *tags) {
  char text[PATH_MAX];
  kv_add(tags, "mlflow.source.name", o->command);
  kv_add(tags, "mlflow.source.type", "LOCAL");
  snprintf(text, sizeof text, "%.40s", o->git_commit ? o->git_commit : "");
  if (strlen(text) == 40) kv_add(tags, "mlflow.source.git.commit", text);  // the bare hash: a link in MLflow's UI
  const char *user = getenv("USER");
  struct passwd *pw = user ? NULL : getpwuid(getuid());
  kv_add(tags, "mlflow.user", user ? user : pw ? pw->pw_name : NULL);
  kv_add(tags, "fimi.version", o->fimi_version);
  kv_add(tags, "fimi.git_commit", o->git_commit);
  kv_add(tags, "fimi.kind", o->kind);
  if (o->results) snprintf(text, sizeof text, "%s", o->results), kv_add(tags, "fimi.results", basename(text));
  if (o->model) kv_add(tags, "fimi.model", realpath(o->model, text) ? text : o->model);
  if (o->agent) snprintf(text, sizeof text, "agent:%s", o->agent), kv_add(tags, "fimi.model", text);
  if (gethostname(text, sizeof text) == 0) text[sizeof text - 1] = 0, kv_add(tags, "fimi.host", text);
  if (linked) {
    kv_add(tags, "fimi.training_run_id", link->run_id);
    kv_add(tags, "fimi.training_experiment", link->experiment_name);
    if (strcmp(link->tracking_uri, o->settings.uri)) kv_add(tags, "fimi.training_tracking_uri", link->tracking_uri);
    if (link->step >= 0) snprintf(text, sizeof text, "%lld", (long long)link->step), kv_add(tags, "fimi.training_step", text);
  }
}

// The tracking URIs of mlflow_run.json and of the settings name the same
// server (a trailing '/' aside).
static int same_server(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  while (na > 0 && a[na - 1] == '/') na--;
  while (nb > 0 && b[nb - 1] == '/') nb--;
  return na == nb && !strncmp(a, b, na);
}

EvalMlflowRun *eval_mlflow_start(const EvalMlflowOptions *o) {
  if (!o->settings.uri[0]) return NULL;
  FimiError err = {0};
  EvalTrainingLink link;
  int linked = 0;
  if (o->model) {
    int rc = eval_mlflow_training_link(o->model, &link, &err);
    if (rc < 0) log_warn("MLflow: %s: the evaluation is not linked to its training run", err.message);
    linked = rc == 0;
  }
  EvalMlflowRun *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  snprintf(r->experiment, sizeof r->experiment, "%s",
           !o->experiment_named && linked && same_server(link.tracking_uri, o->settings.uri) ? link.experiment_name
                                                                                           : o->settings.experiment);
  KeyValues tags = {0};
  collect_tags(o, &link, linked, &tags);
  char experiment_id[MLFLOW_ID_MAX];
  int rc = mlflow_client_init(&r->client, o->settings.uri, o->settings.token, o->timeout_s > 0 ? o->timeout_s : 10, &err);
  if (rc == 0) rc = mlflow_experiment_get_or_create(&r->client, r->experiment, experiment_id, sizeof experiment_id, &err);
  if (rc == 0)
    rc = mlflow_run_create(&r->client, experiment_id, o->run_name, wall_ms(), tags.kv, tags.n, &r->run, &err);
  kv_free(&tags);
  if (rc != 0) {
    log_warn("MLflow: %s: this evaluation is not logged to MLflow (its files are written as usual)", err.message);
    free(r);
    return NULL;
  }
  log_info("MLflow: run %s in experiment \"%s\" (%s)", r->run.run_id, r->experiment, o->settings.uri);
  return r;
}

typedef struct Metrics {
  MlflowMetric *m;
  int n, cap;
  int64_t ms;
} Metrics;

static void metric_emit(void *ctx, const char *key, double value) {
  Metrics *ms = ctx;
  if (ms->n == ms->cap) {
    int cap = ms->cap ? 2 * ms->cap : 256;
    MlflowMetric *grown = realloc(ms->m, (size_t)cap * sizeof *grown);
    if (!grown) return;
    ms->m = grown;
    ms->cap = cap;
  }
  char *k = strdup(key);
  if (k) ms->m[ms->n++] = (MlflowMetric){k, value, ms->ms, 0};
}

static void metrics_free(Metrics *ms) {
  for (int i = 0; i < ms->n; i++) free((char *)ms->m[i].key);
  free(ms->m);
}

// Params and metrics of the result file; 0, or the failing request's code.
static int log_results(EvalMlflowRun *r, const char *out_path, FimiError *err) {
  cJSON *root = json_parse_file(out_path, (size_t)4 << 30, err);
  if (!root) return -1;
  KeyValues params = {0};
  Metrics ms = {.ms = wall_ms()};
  eval_mlflow_params(root, kv_emit, &params);
  int rc = eval_mlflow_summary_metrics(root, metric_emit, &ms) == 0
               ? 0
               : fimi_fail(err, "%s: no summary of fimi eval or fimi eval bench in it", out_path);
  cJSON_Delete(root);
  if (rc == 0 && params.n > 0) rc = mlflow_log_batch(&r->client, r->run.run_id, NULL, 0, params.kv, params.n, NULL, 0, err);
  for (int done = 0; rc == 0 && done < ms.n;) {
    int n = mlflow_batch_take(ms.m + done, ms.n - done, MLFLOW_MAX_REQUEST_BYTES);
    rc = mlflow_log_batch(&r->client, r->run.run_id, ms.m + done, n, NULL, 0, NULL, 0, err);
    done += n;
  }
  kv_free(&params);
  metrics_free(&ms);
  return rc;
}

static void upload(EvalMlflowRun *r, const char *const *artifacts) {
  FimiError err = {0};
  for (int i = 0; artifacts && artifacts[i]; i++) {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s", artifacts[i]);
    if (mlflow_artifact_upload(&r->client, r->run.artifact_uri, basename(name), artifacts[i], &err) != 0) {
      log_warn("MLflow: artifact not uploaded: %s", err.message);
      return;  // the others would fail the same way
    }
  }
}

void eval_mlflow_finish(EvalMlflowRun *r, const char *out_path, const char *const *artifacts, int failed) {
  if (!r) return;
  FimiError err = {0};
  int rc = failed ? 0 : log_results(r, out_path, &err);
  if (rc != 0) log_warn("MLflow: run %s: %s", r->run.run_id, err.message);
  if (!failed && rc != HTTP_TRANSIENT && r->run.artifact_uri[0]) upload(r, artifacts);
  if (rc != HTTP_TRANSIENT && mlflow_run_update(&r->client, r->run.run_id, failed ? "FAILED" : "FINISHED", wall_ms(), &err) != 0)
    log_warn("MLflow: run %s stays RUNNING on the server: %s", r->run.run_id, err.message);
  free(r);
}

// ---- the ladder's runs --------------------------------------------------------------

static const char *run_tag(const cJSON *run, const char *key) {
  const cJSON *tags = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "data"), "tags"), *t;
  cJSON_ArrayForEach(t, tags) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(t, "key"), *v = cJSON_GetObjectItemCaseSensitive(t, "value");
    if (cJSON_IsString(k) && cJSON_IsString(v) && !strcmp(k->valuestring, key)) return v->valuestring;
  }
  return NULL;
}

static const char *run_info(const cJSON *run, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "info"), key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

// One run's result file into *out; -1 with err when it cannot be had.
static int fetch_one(const MlflowClient *c, const cJSON *run, EvalResults *out, FimiError *err) {
  const char *id = run_info(run, "run_id"), *uri = run_info(run, "artifact_uri"), *name = run_tag(run, "fimi.results");
  if (!id) return fimi_fail(err, "MLflow runs/search: a run without a run_id");
  if (!uri || !uri[0]) return fimi_fail(err, "run %s: no artifact_uri", id);
  if (!name) return fimi_fail(err, "run %s: no fimi.results tag (not logged by fimi eval)", id);
  char *body = NULL, what[MLFLOW_URL_MAX + 256];
  size_t size = 0;
  int rc = mlflow_artifact_download(c, uri, name, RESULTS_MAX_BYTES, &body, &size, err);
  if (rc != 0) return fimi_fail_wrap(err, "run %s: artifact %s", id, name);
  snprintf(what, sizeof what, "run %s: %s", id, name);
  cJSON *root = json_parse_text(body, size, what, err);
  free(body);
  rc = root ? eval_results_from_json(root, what, out, err) : -1;
  cJSON_Delete(root);
  return rc;
}

int eval_mlflow_fetch_results(const MlflowSettings *s, const char *experiment, EvalResults **runs, int *count,
                              FimiError *err) {
  *runs = NULL;
  *count = 0;
  MlflowClient c;
  char experiment_id[MLFLOW_ID_MAX], token[4096] = "", next[4096] = "";
  if (mlflow_client_init(&c, s->uri, s->token, 30, err) != 0) return -1;
  int rc = mlflow_experiment_get(&c, experiment, experiment_id, sizeof experiment_id, err);
  if (rc == MLFLOW_NOT_FOUND) return fimi_fail(err, "%s has no MLflow experiment \"%s\"", s->uri, experiment);
  if (rc != 0) return -1;
  int cap = 0, skipped = 0;
  do {
    cJSON *page = NULL, *run;
    rc = mlflow_runs_search(&c, experiment_id, "tags.`fimi.kind` = '" EVAL_MLFLOW_KIND_EVAL "' and attributes.status = 'FINISHED'",
                            "attributes.start_time ASC", SEARCH_PAGE, token, &page, next, sizeof next, err);
    snprintf(token, sizeof token, "%s", next);
    cJSON_ArrayForEach(run, page) {
      if (*count == cap) {
        cap = cap ? 2 * cap : 16;
        EvalResults *grown = realloc(*runs, (size_t)cap * sizeof *grown);
        if (!grown) {
          rc = fimi_fail(err, "out of memory");
          break;
        }
        *runs = grown;
      }
      FimiError why = {0};
      if (fetch_one(&c, run, &(*runs)[*count], &why) == 0) (*count)++;
      else log_warn("MLflow: %s: left out of the ladder", why.message), skipped++;
    }
    cJSON_Delete(page);
  } while (rc == 0 && token[0]);
  if (rc == 0 && *count == 0)
    rc = fimi_fail(err, "MLflow experiment \"%s\" on %s has no finished fimi eval run%s", experiment, s->uri,
                   skipped ? " with a readable result file" : "");
  if (rc != 0) {
    for (int i = 0; i < *count; i++) eval_results_free(&(*runs)[i]);
    free(*runs);
    *runs = NULL;
    *count = 0;
  }
  return rc;
}
