// train/mlflow_tracker.c: an MLflow-tracked training run (see
// mlflow_tracker.h). The training thread touches only the queue (under
// mu); everything else here runs on the tracker's thread.
#define _GNU_SOURCE
#include "train/mlflow_tracker.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/config.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/log.h"
#include "train/mlflow_queue.h"

#define PATH_MAX_LEN 4096
#define MAX_TAGS 32
#define MAX_BATCH_ATTEMPTS 8  // a batch is dropped after this many failed sends
#define POLL_S 0.1            // how often the thread looks at the SIGTERM flag
#define RUN_FILE "mlflow_run.json"

// SIGTERM's handler only sets this (async-signal-safe); the thread acts on
// it. Also the cancel flag of HTTP requests in flight, so a slow request
// does not hold up the kill path.
static volatile sig_atomic_t sigterm_seen;
_Static_assert(sizeof(sig_atomic_t) == sizeof(int), "the cancel flag is read as an int");

typedef enum { SETUP_EXPERIMENT, SETUP_RUN, SETUP_PARAMS, SETUP_TAGS, SETUP_DONE } SetupStage;

struct MlflowTracker {
  MlflowTrackerOptions o;
  MlflowRunContext ctx;
  char out_dir[PATH_MAX_LEN], run_name[256], model_type[64];
  char config_ini[PATH_MAX_LEN], metrics_path[PATH_MAX_LEN], inputs_path[PATH_MAX_LEN], run_file[PATH_MAX_LEN];
  MlflowClient client;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  MlflowQueue queue;      // under mu
  int stop, failed;       // under mu: close() was called, and with which outcome
  int off;                // under mu: tracking turned off (the server refused the run): rows are not queued
  int drop_warned;        // under mu
  struct sigaction old_term;
  // The thread's own state.
  SetupStage stage;
  char experiment_id[MLFLOW_ID_MAX];
  MlflowRunInfo run;
  int reopened;           // the run of mlflow_run.json, continued
  MlflowKeyValue params[CONFIG_MAX_FIELDS], tags[MAX_TAGS + RUN_INPUTS_MAX];
  int num_params, num_tags, params_sent;
  MlflowMetric pending[MLFLOW_MAX_METRICS_PER_BATCH];
  int num_pending, attempts;
  double next_try, backoff;
  int unreachable, disabled, refused_warnings, digested;
  int64_t refused, sent;
  // Every metric of the steps <= logged_through has reached the server;
  // kept in mlflow_run.json, so a resume sends again the steps after it
  // that metrics.jsonl holds (those a SIGTERM or crash kept from the server).
  int64_t logged_through, replay_from;
  char resume_run_id[MLFLOW_ID_MAX];  // "" : create a new run
  double run_file_written;
};

// ---- small helpers ------------------------------------------------------------------

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_sigterm(int sig) {
  (void)sig;
  sigterm_seen = 1;
}

static void add_tag(MlflowTracker *t, const char *key, const char *value) {
  if (t->num_tags >= MAX_TAGS + RUN_INPUTS_MAX || !value || !value[0]) return;
  char *k = strdup(key), *v = strndup(value, MLFLOW_MAX_TAG_VALUE);
  if (!k || !v) {
    free(k);
    free(v);
    return;
  }
  t->tags[t->num_tags++] = (MlflowKeyValue){k, v};
}

static void free_key_values(MlflowKeyValue *kv, int n) {
  for (int i = 0; i < n; i++) {
    free((char *)kv[i].key);
    free((char *)kv[i].value);
  }
}

// ---- settings -----------------------------------------------------------------------

int mlflow_settings_resolve(MlflowSettings *out, const char *config_uri, const char *config_experiment, double flush_s,
                            const char *env_uri, const char *env_experiment, const char *env_token, FimiError *err) {
  memset(out, 0, sizeof *out);
  if (!(flush_s >= 0 && flush_s <= 3600)) return fimi_fail(err, "track.mlflow_flush_s must be in [0, 3600]");
  out->flush_s = flush_s;
  const char *exp = config_experiment && config_experiment[0] ? config_experiment
                    : env_experiment && env_experiment[0]     ? env_experiment
                                                              : MLFLOW_DEFAULT_EXPERIMENT;
  if (strlen(exp) >= sizeof out->experiment)
    return fimi_fail(err, "track.experiment: longer than %zu bytes", sizeof out->experiment - 1);
  strcpy(out->experiment, exp);
  out->token = env_token && env_token[0] ? env_token : NULL;
  int from_config = config_uri && config_uri[0];
  const char *uri = from_config ? config_uri : env_uri && env_uri[0] ? env_uri : "";
  if (!uri[0]) return 0;
  FimiError check = {0};
  if (strlen(uri) >= sizeof out->uri || http_url_check(uri, from_config ? "track.mlflow_uri" : "MLFLOW_TRACKING_URI", &check) != 0) {
    if (from_config) return fimi_fail(err, "%s (fimi talks to an MLflow tracking server over HTTP)", check.message);
    log_warn("MLflow: %s: fimi talks to a tracking server over HTTP only; no MLflow tracking for this run",
             check.message[0] ? check.message : "MLFLOW_TRACKING_URI too long");
    return 0;
  }
  strcpy(out->uri, uri);
  return 0;
}

// ---- flattening ---------------------------------------------------------------------

typedef struct Flatten {
  void (*emit)(void *ctx, const char *key, double value);
  void *ctx;
  int too_long;
} Flatten;

static void flatten(Flatten *f, const cJSON *item, char *key, size_t len);

static void flatten_children(Flatten *f, const cJSON *parent, char *key, size_t len, const char *skip) {
  int index = 0;
  for (const cJSON *c = parent->child; c; c = c->next, index++) {
    char number[16];
    const char *name = c->string;
    if (cJSON_IsArray(parent)) {
      snprintf(number, sizeof number, "%d", index);
      name = number;
    }
    if (!name || (skip && !strcmp(name, skip))) continue;
    int n = snprintf(key + len, MLFLOW_MAX_KEY + 2 - len, "%s%s", len ? "/" : "", name);
    if (n >= 0 && len + (size_t)n <= MLFLOW_MAX_KEY) flatten(f, c, key, len + (size_t)n);
    else f->too_long++;
    key[len] = 0;
  }
}

static void flatten(Flatten *f, const cJSON *item, char *key, size_t len) {
  if (cJSON_IsNumber(item)) f->emit(f->ctx, key, item->valuedouble);
  else if (cJSON_IsBool(item)) f->emit(f->ctx, key, cJSON_IsTrue(item) ? 1.0 : 0.0);
  else if (cJSON_IsObject(item) || cJSON_IsArray(item)) flatten_children(f, item, key, len, NULL);
}

int mlflow_flatten_row(const cJSON *row, void (*emit)(void *ctx, const char *key, double value), void *ctx) {
  Flatten f = {emit, ctx, 0};
  char key[MLFLOW_MAX_KEY + 2] = "";
  if (cJSON_IsObject(row)) flatten_children(&f, row, key, 0, "step");
  return f.too_long;
}

// ---- the training thread's side --------------------------------------------------------

typedef struct RowPush {
  MlflowTracker *t;
  int64_t step, ms;
  int dropped;
} RowPush;

static void push_metric(void *ctx, const char *key, double value) {
  RowPush *p = ctx;
  if (mlflow_queue_push(&p->t->queue, key, value, p->ms, p->step) != 0) p->dropped++;
}

void mlflow_tracker_log_row(MlflowTracker *t, const cJSON *row) {
  if (!t) return;
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(row, "step");
  if (!cJSON_IsNumber(step)) return;
  RowPush p = {t, (int64_t)step->valuedouble, wall_ms(), 0};
  pthread_mutex_lock(&t->mu);
  if (!t->off) mlflow_flatten_row(row, push_metric, &p);
  int warn = p.dropped && !t->drop_warned;
  if (warn) t->drop_warned = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  if (warn)
    log_warn("MLflow: the queue of %d metrics is full (the server is slow or down): dropping the oldest; "
             "metrics.jsonl stays complete",
             t->queue.capacity);
}

int64_t mlflow_tracker_dropped(MlflowTracker *t) {
  pthread_mutex_lock(&t->mu);
  int64_t n = t->queue.dropped + t->refused;
  pthread_mutex_unlock(&t->mu);
  return n;
}

// ---- failures and backoff -----------------------------------------------------------

// A request with no answer: warned once, retried after a backoff that
// doubles from 0.5 s up to max_backoff_s.
static void note_unreachable(MlflowTracker *t, const FimiError *err) {
  if (!t->unreachable)
    log_warn("MLflow server %s unreachable (%s): retrying in the background; training goes on, metrics.jsonl "
             "stays complete",
             t->client.base, err->message);
  t->unreachable = 1;
  double cap = t->o.max_backoff_s > 0 ? t->o.max_backoff_s : 30;
  t->backoff = t->backoff > 0 ? (t->backoff * 2 < cap ? t->backoff * 2 : cap) : (0.5 < cap ? 0.5 : cap);
  t->next_try = now_s() + t->backoff;
}

static void note_reachable(MlflowTracker *t) {
  if (t->unreachable) log_info("MLflow server %s reachable again", t->client.base);
  t->unreachable = 0;
  t->backoff = 0;
  t->next_try = 0;
}

// A refused request: the first few are warned (MLflow's message says why).
static void note_refused(MlflowTracker *t, const FimiError *err) {
  if (t->refused_warnings++ < 3) log_warn("MLflow: %s", err->message);
}

// The per-request timeout: the usual one, or what is left before deadline.
static void limit_timeout(MlflowTracker *t, double deadline) {
  double timeout = t->o.request_timeout_s > 0 ? t->o.request_timeout_s : 10;
  if (deadline > 0 && deadline - now_s() < timeout) timeout = deadline - now_s() > 0.1 ? deadline - now_s() : 0.1;
  t->client.timeout_s = timeout;
}

// ---- setting up the run (the thread) ------------------------------------------------

static int write_run_file(MlflowTracker *t) {
  cJSON *o = cJSON_CreateObject();
  FimiError err = {0};
  int rc = -1;
  if (o && cJSON_AddStringToObject(o, "tracking_uri", t->client.base) &&
      cJSON_AddStringToObject(o, "experiment_name", t->o.settings.experiment) &&
      cJSON_AddStringToObject(o, "experiment_id", t->run.experiment_id) &&
      cJSON_AddStringToObject(o, "run_id", t->run.run_id) &&
      cJSON_AddStringToObject(o, "artifact_uri", t->run.artifact_uri) &&
      cJSON_AddNumberToObject(o, "metrics_logged_through_step", (double)t->logged_through))
    rc = json_write_file(t->run_file, o, &err);
  t->run_file_written = now_s();
  cJSON_Delete(o);
  if (rc != 0) log_warn("MLflow: cannot write %s (%s): a resume will start a new MLflow run", t->run_file, err.message);
  return rc;
}

// The run id of RUN_DIR/mlflow_run.json when it names this tracking server
// (a resume continues that run); 0 when there is one.
static int read_run_file(MlflowTracker *t, char *run_id, size_t size) {
  FimiError err = {0};
  FILE *probe = fopen(t->run_file, "rb");
  if (!probe) return -1;
  fclose(probe);
  cJSON *o = json_parse_file(t->run_file, 1 << 20, &err);
  char uri[MLFLOW_URL_MAX] = "";
  int64_t through = t->ctx.start_step;  // absent: assume all were sent
  int rc = o && json_get_string(o, "tracking_uri", 1, uri, sizeof uri, t->run_file, &err) == 0 &&
                   json_get_string(o, "run_id", 1, run_id, size, t->run_file, &err) == 0 &&
                   json_get_int64(o, "metrics_logged_through_step", 0, &through, t->run_file, &err) == 0
               ? 0
               : -1;
  t->replay_from = through < t->ctx.start_step ? through : t->ctx.start_step;
  cJSON_Delete(o);
  if (rc != 0) log_warn("MLflow: %s: %s; starting a new MLflow run", t->run_file, err.message);
  else if (strcmp(uri, t->client.base)) {
    log_info("MLflow: %s names another tracking server (%s): starting a new run on %s", t->run_file, uri,
             t->client.base);
    rc = -1;
  }
  return rc;
}

// Params already on a reopened run are not sent again (MLflow refuses to
// change one); a value that changed is warned about once.
static void skip_logged_params(MlflowTracker *t, const cJSON *logged) {
  int kept = 0, changed = 0;
  char first[300] = "";
  for (int i = 0; i < t->num_params; i++) {
    const cJSON *match = NULL, *p;
    cJSON_ArrayForEach(p, logged) {
      const cJSON *k = cJSON_GetObjectItemCaseSensitive(p, "key");
      if (cJSON_IsString(k) && !strcmp(k->valuestring, t->params[i].key)) match = p;
    }
    const cJSON *v = match ? cJSON_GetObjectItemCaseSensitive(match, "value") : NULL;
    if (!match) {
      t->params[kept++] = t->params[i];
      continue;
    }
    if (!cJSON_IsString(v) || strcmp(v->valuestring, t->params[i].value)) {
      if (!changed++) snprintf(first, sizeof first, "%s", t->params[i].key);
    }
    free((char *)t->params[i].key);
    free((char *)t->params[i].value);
  }
  t->num_params = kept;
  if (changed)
    log_warn("MLflow: %d config value%s (%s%s) differ from the params the run logged first; MLflow keeps the first "
             "values, this invocation's config is in the artifact config.ini",
             changed, changed > 1 ? "s" : "", first, changed > 1 ? ", ..." : "");
}

// A resumed run continues its MLflow run: RUNNING again. 0, MLFLOW_NOT_FOUND
// (a new run is created instead), or a failure.
static int reopen_run(MlflowTracker *t, const char *run_id, FimiError *err) {
  cJSON *logged = NULL;
  int rc = mlflow_run_get(&t->client, run_id, &t->run, &logged, err);
  if (rc == 0) rc = mlflow_run_update(&t->client, run_id, "RUNNING", 0, err);
  if (rc == 0) {
    skip_logged_params(t, logged);
    t->reopened = 1;
    log_info("MLflow: continuing run %s (experiment %s)", t->run.run_id, t->run.experiment_id);
  }
  cJSON_Delete(logged);
  return rc;
}

typedef struct Replay {
  MlflowTracker *t;
  int64_t step, ms;
} Replay;

static void replay_metric(void *ctx, const char *key, double value) {
  Replay *r = ctx;
  mlflow_queue_push(&r->t->queue, key, value, r->ms, r->step);
}

// The rows of metrics.jsonl after replay_from (up to the checkpoint the
// run resumed from; train_run has dropped the later ones), queued again.
static void replay_metrics(MlflowTracker *t) {
  if (t->replay_from >= t->ctx.start_step) return;
  FimiError err = {0};
  size_t size = 0;
  char *text = file_read_all(t->metrics_path, (size_t)1 << 30, &size, &err);
  int64_t rows = 0;
  for (char *line = text; text && line < text + size;) {
    char *end = memchr(line, '\n', (size_t)(text + size - line));
    size_t len = end ? (size_t)(end - line) : (size_t)(text + size - line);
    cJSON *row = cJSON_ParseWithLength(line, len);
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(row, "step");
    if (cJSON_IsNumber(step) && step->valuedouble > (double)t->replay_from &&
        step->valuedouble <= (double)t->ctx.start_step) {
      Replay r = {t, (int64_t)step->valuedouble, wall_ms()};
      pthread_mutex_lock(&t->mu);
      mlflow_flatten_row(row, replay_metric, &r);
      pthread_mutex_unlock(&t->mu);
      rows++;
    }
    cJSON_Delete(row);
    line += len + 1;
  }
  free(text);
  if (rows > 0)
    log_info("MLflow: queueing steps %lld..%lld of metrics.jsonl (the server has not received them)",
             (long long)t->replay_from + 1, (long long)t->ctx.start_step);
}

static int create_run(MlflowTracker *t, FimiError *err) {
  if (t->resume_run_id[0]) {
    int rc = reopen_run(t, t->resume_run_id, err);
    if (rc != MLFLOW_NOT_FOUND) return rc;
    log_warn("MLflow: the server does not know run %s of %s: starting a new run (with the steps after %lld)",
             t->resume_run_id, t->run_file, (long long)t->replay_from);
    t->resume_run_id[0] = 0;
  }
  int rc = mlflow_run_create(&t->client, t->experiment_id, t->run_name, wall_ms(), t->tags, t->num_tags, &t->run, err);
  if (rc == 0)
    log_info("MLflow: run %s in experiment \"%s\" (%s)", t->run.run_id, t->o.settings.experiment, t->experiment_id);
  return rc;
}

static int log_params(MlflowTracker *t, FimiError *err) {
  while (t->params_sent < t->num_params) {
    int n = t->num_params - t->params_sent;
    if (n > MLFLOW_MAX_PARAMS_TAGS_PER_BATCH) n = MLFLOW_MAX_PARAMS_TAGS_PER_BATCH;
    int rc = mlflow_log_batch(&t->client, t->run.run_id, NULL, 0, t->params + t->params_sent, n, NULL, 0, err);
    if (rc != 0) return rc;
    t->params_sent += n;
  }
  return 0;
}

// RUN_DIR/inputs.json, and a tag fimi.sha256.NAME per input read.
static void digest_inputs(MlflowTracker *t) {
  FimiError err = {0};
  if (t->digested) return;
  t->digested = 1;
  if (run_inputs_write(t->inputs_path, t->o.inputs, t->o.num_inputs, &sigterm_seen, &err) != 0)
    log_warn("MLflow: %s", err.message);
  for (int i = 0; i < t->o.num_inputs; i++) {
    char key[128];
    snprintf(key, sizeof key, "fimi.sha256.%s", t->o.inputs[i].name);
    add_tag(t, key, t->o.inputs[i].sha256);
  }
}

// One stage of the setup; 0 when it is done.
static int setup_stage(MlflowTracker *t, FimiError *err) {
  switch (t->stage) {
    case SETUP_EXPERIMENT:
      return mlflow_experiment_get_or_create(&t->client, t->o.settings.experiment, t->experiment_id,
                                             sizeof t->experiment_id, err);
    case SETUP_RUN: {
      int rc = create_run(t, err);
      if (rc == 0) write_run_file(t);
      return rc;
    }
    case SETUP_PARAMS:
      return log_params(t, err);
    case SETUP_TAGS:
      digest_inputs(t);  // on the thread: a large dataset takes seconds to hash
      return mlflow_log_batch(&t->client, t->run.run_id, NULL, 0, NULL, 0, t->tags, t->num_tags, err);
    case SETUP_DONE:
      return 0;
  }
  return 0;
}

// Runs the setup stages that are left. A refusal of the experiment or the
// run (a bad experiment name, a token the server rejects, an answer that is
// not MLflow's) turns tracking off for the run, with a warning; one of the
// params or tags is warned about and the run goes on.
static int setup(MlflowTracker *t, FimiError *err) {
  while (t->stage != SETUP_DONE) {
    int rc = setup_stage(t, err);
    if (rc == HTTP_TRANSIENT) return rc;
    if (rc != 0 && t->stage < SETUP_PARAMS) {
      log_warn("MLflow: %s: no MLflow tracking for this run (metrics.jsonl stays complete)", err->message);
      t->disabled = 1;
      pthread_mutex_lock(&t->mu);
      t->off = 1;
      MlflowMetric m;
      while (mlflow_queue_take(&t->queue, &m, 1) == 1) free((char *)m.key);
      pthread_mutex_unlock(&t->mu);
      return -1;
    }
    if (rc != 0) note_refused(t, err);
    t->stage++;
  }
  return 0;
}

// ---- sending metrics (the thread) ---------------------------------------------------

static void refill_pending(MlflowTracker *t) {
  pthread_mutex_lock(&t->mu);
  t->num_pending += mlflow_queue_take(&t->queue, t->pending + t->num_pending,
                                      MLFLOW_MAX_METRICS_PER_BATCH - t->num_pending);
  pthread_mutex_unlock(&t->mu);
}

// Frees the first n pending metrics (sent or dropped) and moves the rest up.
static void consume_pending(MlflowTracker *t, int n) {
  for (int i = 0; i < n; i++) free((char *)t->pending[i].key);
  memmove(t->pending, t->pending + n, (size_t)(t->num_pending - n) * sizeof *t->pending);
  t->num_pending -= n;
  t->attempts = 0;
}

static void drop_pending(MlflowTracker *t, int n) {
  pthread_mutex_lock(&t->mu);
  t->refused += n;
  pthread_mutex_unlock(&t->mu);
  consume_pending(t, n);
}

// After a batch whose last metric has step `last`: that step is complete
// unless more of it may still be queued. The run file is refreshed every
// 10 s (and at the end), so a crash costs a resume at most that much again.
static void advance_logged_through(MlflowTracker *t, int64_t last) {
  pthread_mutex_lock(&t->mu);
  int more = t->queue.count > 0 || t->num_pending > 0;
  pthread_mutex_unlock(&t->mu);
  int64_t through = more ? last - 1 : last;
  if (through > t->logged_through) t->logged_through = through;
  if (now_s() - t->run_file_written > 10) write_run_file(t);
}

// One request's worth of work: the next setup stage, or one log-batch.
// deadline > 0 bounds its timeout (the end's flush).
static void work_once(MlflowTracker *t, double deadline) {
  FimiError err = {0};
  limit_timeout(t, deadline);
  if (t->stage != SETUP_DONE) {
    int rc = setup(t, &err);
    if (rc == HTTP_TRANSIENT && !sigterm_seen) note_unreachable(t, &err);
    else if (rc == 0) note_reachable(t);
    return;
  }
  refill_pending(t);
  if (t->num_pending == 0) return;
  int n = mlflow_batch_take(t->pending, t->num_pending, MLFLOW_MAX_REQUEST_BYTES);
  int rc = mlflow_log_batch(&t->client, t->run.run_id, t->pending, n, NULL, 0, NULL, 0, &err);
  if (rc == 0) {
    note_reachable(t);
    t->sent += n;
    int64_t last = t->pending[n - 1].step;
    consume_pending(t, n);
    advance_logged_through(t, last);
  } else if (rc == HTTP_TRANSIENT && sigterm_seen) {
    return;  // cancelled by SIGTERM: the kill path sends it again
  } else if (rc == HTTP_TRANSIENT) {
    note_unreachable(t, &err);
    if (++t->attempts >= MAX_BATCH_ATTEMPTS) drop_pending(t, n);
  } else {
    note_refused(t, &err);
    drop_pending(t, n);
  }
}

static int has_work(MlflowTracker *t) {
  return !t->disabled && (t->stage != SETUP_DONE || t->num_pending > 0 || t->queue.count > 0);
}

static double seconds_to_ts(double s, struct timespec *ts) {
  clock_gettime(CLOCK_REALTIME, ts);
  double whole = floor(s);
  ts->tv_sec += (time_t)whole;
  ts->tv_nsec += (long)((s - whole) * 1e9);
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
  return s;
}

typedef enum { EVENT_WORK, EVENT_STOP, EVENT_KILL } Event;

// Sleeps until there is work whose backoff has passed, close() was called,
// or SIGTERM came (looked at every POLL_S).
static Event next_event(MlflowTracker *t) {
  pthread_mutex_lock(&t->mu);
  Event e;
  for (;;) {
    if (sigterm_seen) e = EVENT_KILL;
    else if (t->stop) e = EVENT_STOP;
    else if (has_work(t) && now_s() >= t->next_try) e = EVENT_WORK;
    else {
      struct timespec ts;
      seconds_to_ts(POLL_S, &ts);
      pthread_cond_timedwait(&t->cv, &t->mu, &ts);
      continue;
    }
    break;
  }
  pthread_mutex_unlock(&t->mu);
  return e;
}

// Sends what is queued until it is all sent or the deadline passes; the
// backoff waits are cut short by the deadline too.
static void drain(MlflowTracker *t, double deadline, int stop_on_sigterm) {
  pthread_mutex_lock(&t->mu);
  int work = has_work(t);
  pthread_mutex_unlock(&t->mu);
  while (work && now_s() < deadline && !(stop_on_sigterm && sigterm_seen)) {
    if (now_s() < t->next_try) {
      double wait = (t->next_try < deadline ? t->next_try : deadline) - now_s();
      struct timespec ts = {(time_t)wait, (long)((wait - floor(wait)) * 1e9)};
      nanosleep(&ts, NULL);
      continue;
    }
    work_once(t, deadline);
    pthread_mutex_lock(&t->mu);
    work = has_work(t);
    pthread_mutex_unlock(&t->mu);
  }
}

static int64_t unsent(MlflowTracker *t) {
  pthread_mutex_lock(&t->mu);
  int64_t n = t->num_pending + t->queue.count;
  pthread_mutex_unlock(&t->mu);
  return n;
}

static void set_status(MlflowTracker *t, const char *status, double timeout) {
  if (t->stage < SETUP_PARAMS) return;  // no run
  FimiError err = {0};
  t->client.timeout_s = timeout;
  if (mlflow_run_update(&t->client, t->run.run_id, status, wall_ms(), &err) != 0)
    log_warn("MLflow: run %s stays RUNNING on the server: %s", t->run.run_id, err.message);
}

static void upload_artifacts(MlflowTracker *t, double deadline) {
  if (t->stage < SETUP_PARAMS || !t->run.artifact_uri[0]) return;
  FimiError err = {0};
  char url[MLFLOW_URL_MAX * 2];
  // A store the server does not proxy (s3:, file:, ...): one warning for all.
  if (mlflow_artifact_url(&t->client, t->run.artifact_uri, "x", url, sizeof url, &err) != 0) {
    log_warn("%s (they are all in %s)", err.message, t->out_dir);
    return;
  }
  const char *paths[] = {t->config_ini, t->metrics_path, t->inputs_path};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    if (now_s() >= deadline) {
      log_warn("MLflow: track.mlflow_flush_s passed before every artifact was uploaded (they are all in %s)", t->out_dir);
      return;
    }
    limit_timeout(t, deadline);
    char name[PATH_MAX_LEN];
    snprintf(name, sizeof name, "%s", paths[i]);
    int rc = mlflow_artifact_upload(&t->client, t->run.artifact_uri, basename(name), paths[i], &err);
    if (rc != 0) log_warn("MLflow: artifact not uploaded: %s", err.message);
    if (rc == HTTP_TRANSIENT) return;  // no answer: the rest would fail too
  }
}

// SIGTERM: a few seconds to send what is queued, KILLED, then the signal's
// default action, so the process ends as a SIGTERM'd one does (Slurm and
// mpirun see the usual exit status).
static void die_killed(MlflowTracker *t) {
  t->client.cancel = NULL;  // the flag that cancelled requests stays set
  // Training goes on until the signal is raised again: what it logs from
  // now on stays in metrics.jsonl only, so the flush ends.
  pthread_mutex_lock(&t->mu);
  t->off = 1;
  pthread_mutex_unlock(&t->mu);
  double budget = t->o.settings.flush_s < MLFLOW_KILL_FLUSH_S ? t->o.settings.flush_s : MLFLOW_KILL_FLUSH_S;
  log_warn("MLflow: SIGTERM: sending what is queued (at most %.0f s), then marking run %s KILLED", budget,
           t->run.run_id[0] ? t->run.run_id : "(none yet)");
  t->next_try = 0;
  drain(t, now_s() + budget, 0);
  if (t->stage > SETUP_RUN) write_run_file(t);
  set_status(t, "KILLED", 2.0);
  signal(SIGTERM, SIG_DFL);
  raise(SIGTERM);
  _exit(128 + SIGTERM);  // not reached: SIGTERM's default action ends the process
}

static void finish(MlflowTracker *t) {
  pthread_mutex_lock(&t->mu);
  int failed = t->failed;
  pthread_mutex_unlock(&t->mu);
  double deadline = now_s() + t->o.settings.flush_s;
  t->next_try = 0;  // the end's flush tries at once, whatever the backoff
  drain(t, deadline, 1);
  if (sigterm_seen) die_killed(t);
  int64_t left = unsent(t), dropped = mlflow_tracker_dropped(t);
  if (left > 0 || dropped > 0)
    log_warn("MLflow: %lld metric value%s not logged (%lld unsent after track.mlflow_flush_s = %g s, %lld dropped); "
             "metrics.jsonl has them all",
             (long long)(left + dropped), left + dropped > 1 ? "s" : "", (long long)left, t->o.settings.flush_s,
             (long long)dropped);
  if (t->stage > SETUP_RUN) write_run_file(t);
  // The status even when the deadline has passed: a run left RUNNING misleads.
  set_status(t, failed ? "FAILED" : "FINISHED", 2.0);
  upload_artifacts(t, deadline);
}

static void *tracker_thread(void *arg) {
  MlflowTracker *t = arg;
  for (;;) {
    Event e = next_event(t);
    if (e == EVENT_KILL) die_killed(t);
    if (e == EVENT_STOP) break;
    work_once(t, 0);
  }
  finish(t);
  return NULL;
}

// ---- open and close (the training thread) -------------------------------------------

// RUN_DIR/config.ini: the effective config (file, then --set), one line per
// key, readable by fimi train --config.
static int write_config_ini(const MlflowTracker *t, FimiError *err) {
  const Config *c = t->o.config;
  size_t cap = 256 + (size_t)(c ? c->count : 0) * (CONFIG_VALUE_MAX + 160), used = 0;
  char *text = fimi_malloc(cap, err);
  if (!text) return -1;
  used += (size_t)snprintf(text, cap, "; the effective config of fimi train in %s (file and --set)\n", t->out_dir);
  const char *section = "";
  for (int i = 0; c && i < c->count; i++) {
    const ConfigField *f = c->fields[i];
    if (strcmp(f->section, section))
      used += (size_t)snprintf(text + used, cap - used, "%s[%s]\n", used > 0 ? "\n" : "", f->section);
    section = f->section;
    used += (size_t)snprintf(text + used, cap - used, "%s = %s\n", f->key, c->values[i]);
  }
  int rc = file_write_atomic(t->config_ini, text, used, err);
  free(text);
  return rc;
}

static int collect_params(MlflowTracker *t) {
  const Config *c = t->o.config;
  for (int i = 0; c && i < c->count && i < CONFIG_MAX_FIELDS; i++) {
    char key[MLFLOW_MAX_KEY + 1];
    snprintf(key, sizeof key, "%s.%s", c->fields[i]->section, c->fields[i]->key);
    char *k = strdup(key), *v = strdup(c->values[i]);
    if (!k || !v) {
      free(k);
      free(v);
      return -1;
    }
    t->params[t->num_params++] = (MlflowKeyValue){k, v};
  }
  return 0;
}

static void collect_tags(MlflowTracker *t) {
  char text[PATH_MAX_LEN];
  add_tag(t, "mlflow.source.name", "fimi train");
  add_tag(t, "mlflow.source.type", "LOCAL");
  // MLflow shows this one as a commit link: the bare hash, without "-dirty".
  snprintf(text, sizeof text, "%.40s", t->o.git_commit ? t->o.git_commit : "");
  if (strlen(text) == 40) add_tag(t, "mlflow.source.git.commit", text);
  const char *user = getenv("USER");
  struct passwd *pw = user ? NULL : getpwuid(getuid());
  add_tag(t, "mlflow.user", user ? user : pw ? pw->pw_name : NULL);
  add_tag(t, "fimi.version", t->o.fimi_version);
  add_tag(t, "fimi.git_commit", t->o.git_commit);
  add_tag(t, "fimi.objective", t->o.objective);
  add_tag(t, "fimi.model_type", t->model_type);
  if (t->ctx.parameters > 0) snprintf(text, sizeof text, "%lld", (long long)t->ctx.parameters), add_tag(t, "fimi.parameters", text);
  snprintf(text, sizeof text, "%d", t->ctx.world);
  add_tag(t, "fimi.world_size", text);
  if (gethostname(text, sizeof text) == 0) text[sizeof text - 1] = 0, add_tag(t, "fimi.host", text);
  add_tag(t, "fimi.run_dir", realpath(t->out_dir, text) ? text : t->out_dir);
  add_tag(t, "fimi.slurm_job_id", getenv("SLURM_JOB_ID"));
  snprintf(text, sizeof text, "%lld", (long long)t->ctx.start_step);
  add_tag(t, "fimi.start_step", text);
}

static int set_paths(MlflowTracker *t, const MlflowRunContext *ctx, FimiError *err) {
  if (snprintf(t->out_dir, sizeof t->out_dir, "%s", ctx->out_dir) >= (int)sizeof t->out_dir)
    return fimi_fail(err, "train.out_dir too long");
  char copy[PATH_MAX_LEN];
  snprintf(copy, sizeof copy, "%s", ctx->out_dir);
  size_t n = strlen(copy);
  while (n > 1 && copy[n - 1] == '/') copy[--n] = 0;  // "run/" names the run "run"
  snprintf(t->run_name, sizeof t->run_name, "%s", basename(copy));
  snprintf(t->model_type, sizeof t->model_type, "%s", ctx->model_type ? ctx->model_type : "");
  if (path_join(t->config_ini, sizeof t->config_ini, ctx->out_dir, "config.ini", err) != 0 ||
      path_join(t->metrics_path, sizeof t->metrics_path, ctx->out_dir, "metrics.jsonl", err) != 0 ||
      path_join(t->inputs_path, sizeof t->inputs_path, ctx->out_dir, "inputs.json", err) != 0 ||
      path_join(t->run_file, sizeof t->run_file, ctx->out_dir, RUN_FILE, err) != 0)
    return -1;
  return 0;
}

static void tracker_free(MlflowTracker *t) {
  mlflow_queue_free(&t->queue);
  for (int i = 0; i < t->num_pending; i++) free((char *)t->pending[i].key);
  free_key_values(t->params, t->num_params);
  free_key_values(t->tags, t->num_tags);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}

static int start(MlflowTracker *t, const MlflowTrackerOptions *o, const MlflowRunContext *ctx, FimiError *err) {
  t->o = *o;
  t->ctx = *ctx;
  if (set_paths(t, ctx, err) != 0) return -1;
  if (mlflow_client_init(&t->client, o->settings.uri, o->settings.token, o->request_timeout_s, err) != 0) return -1;
  t->client.cancel = (const volatile int *)&sigterm_seen;
  if (mlflow_queue_init(&t->queue, o->queue_capacity > 0 ? o->queue_capacity : 100000, err) != 0) return -1;
  if (collect_params(t) != 0) return fimi_fail(err, "out of memory");
  collect_tags(t);
  // A resume continues the run of mlflow_run.json: the steps the server
  // missed are queued before any new one, so the queue stays in step order.
  // (A run that had no MLflow run yet gets its whole history.)
  if (ctx->start_step > 0 && read_run_file(t, t->resume_run_id, sizeof t->resume_run_id) != 0) t->resume_run_id[0] = 0;
  if (ctx->start_step > 0) replay_metrics(t);
  t->logged_through = t->replay_from;
  if (write_config_ini(t, err) != 0) return -1;
  sigterm_seen = 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigterm;
  sa.sa_flags = SA_RESTART;  // the training thread's reads and writes go on undisturbed
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGTERM, &sa, &t->old_term) != 0) return fimi_fail(err, "cannot install a SIGTERM handler");
  int rc = pthread_create(&t->thread, NULL, tracker_thread, t);
  if (rc != 0) {
    sigaction(SIGTERM, &t->old_term, NULL);
    return fimi_fail(err, "cannot start the MLflow thread: %s", strerror(rc));
  }
  return 0;
}

MlflowTracker *mlflow_tracker_open(const MlflowTrackerOptions *o, const MlflowRunContext *ctx, FimiError *err) {
  MlflowTracker *t = fimi_calloc(1, sizeof *t, err);
  if (!t) return NULL;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  if (start(t, o, ctx, err) != 0) {
    tracker_free(t);
    return NULL;
  }
  log_info("MLflow: tracking to %s, experiment \"%s\"", t->client.base, o->settings.experiment);
  return t;
}

void mlflow_tracker_close(MlflowTracker *t, int failed) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  t->stop = 1;
  t->failed = failed;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->thread, NULL);
  sigaction(SIGTERM, &t->old_term, NULL);
  tracker_free(t);
}
