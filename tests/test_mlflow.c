// tests/test_mlflow.c: the MLflow client and tracker without a server
// (net/http.h, net/mlflow.h, train/mlflow_queue.h, train/mlflow_tracker.h).
// Checks: log-batch splitting keeps every request within 1,000 metrics and
// the byte limit, whatever the keys (the real JSON body is measured, keys
// full of quotes and control characters included); NaN and infinities are
// sent as MLflow's "NaN"/"Infinity"/"-Infinity" strings; a metrics row
// flattens as TensorBoard's does (nested "a/b", arrays "a/0", booleans 0/1,
// strings, nulls, the step and over-long keys left out); the queue drops
// its oldest metrics when full and counts them; the settings take the
// config's keys before MLFLOW_* and default to no MLflow and experiment
// "Default", a config URI that is not http(s) is an error and an
// environment one is ignored; the artifact URL of a "mlflow-artifacts:"
// artifact_uri and the refusal of others; URLs of other schemes refused;
// and a tracker pointed at a closed port: every log call returns at once,
// close returns within the flush bound, one "unreachable" warning and one
// "queue full" warning however many rows, no crash. Evaluations
// (eval/mlflow_eval.h): the metrics of an eval result file (its summary
// flattened, the per-family slices left out, pass_k keyed by k, nulls
// left out) and of a bench file (every category, axis and gate count), a
// file of another format refused; the params (top-level strings and
// numbers in their shortest form, format, version and timings left out);
// the settings' precedence (flag, then config key, then MLFLOW_*); the
// link of a checkpoint to its training run's mlflow_run.json (its step;
// none; a broken file named); and a tracked evaluation against a closed
// port: one warning, returned at once.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "net/http.h"
#include "net/mlflow.h"
#include "eval/mlflow_eval.h"
#include "tests/test_util.h"
#include "train/mlflow_queue.h"
#include "train/mlflow_tracker.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---- log-batch splitting ------------------------------------------------------------

// Splits metrics as the tracker does; every request's real JSON body must
// fit max_bytes and 1,000 metrics, and together they must cover all.
static void check_split(MlflowMetric *m, int count, size_t max_bytes, const char *what) {
  int covered = 0, requests = 0, ok = 1;
  while (covered < count) {
    int n = mlflow_batch_take(m + covered, count - covered, max_bytes);
    char *body = mlflow_batch_json("0123456789abcdef0123456789abcdef", m + covered, n, NULL, 0, NULL, 0);
    // One metric always goes, even over a limit below its size.
    if (n < 1 || n > MLFLOW_MAX_METRICS_PER_BATCH || !body || (n > 1 && strlen(body) > max_bytes)) ok = 0;
    free(body);
    covered += n > 0 ? n : count;
    requests++;
  }
  CHECK(ok && covered == count, "%s: a request over the limits", what);
  printf("%s: %d metrics in %d requests\n", what, count, requests);
}

static void test_batch_split(void) {
  enum { N = 2500 };
  static MlflowMetric m[N];
  static char keys[N][MLFLOW_MAX_KEY + 1];
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "loss%d", i);
    m[i] = (MlflowMetric){keys[i], i * 0.1, 1700000000000LL + i, i};
  }
  CHECK(mlflow_batch_take(m, N, MLFLOW_MAX_REQUEST_BYTES) == 1000, "short keys: 1000 a request");
  CHECK(mlflow_batch_take(m, 500, MLFLOW_MAX_REQUEST_BYTES) == 500, "the rest in one");
  CHECK(mlflow_batch_take(m, 0, MLFLOW_MAX_REQUEST_BYTES) == 0, "nothing to take");
  check_split(m, N, MLFLOW_MAX_REQUEST_BYTES, "short keys");
  // Worst-case keys: 250 characters, most of them control characters (6
  // bytes each in JSON) and quotes, and values as long as a double gets.
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < MLFLOW_MAX_KEY; j++) keys[i][j] = (char)((i + j) % 5 == 0 ? '"' : (i + j) % 5 == 1 ? 'a' : 1);
    keys[i][MLFLOW_MAX_KEY] = 0;
    m[i].value = -1.2345678901234567e-300;
    m[i].step = 9007199254740991LL;
  }
  int n = mlflow_batch_take(m, N, MLFLOW_MAX_REQUEST_BYTES);
  CHECK(n < 1000 && n > 100, "escaped long keys: the byte limit binds first (%d)", n);
  check_split(m, N, MLFLOW_MAX_REQUEST_BYTES, "long escaped keys");
  check_split(m, 50, 20000, "long keys, 20 kB requests");
  check_split(m, 3, 10, "a limit below one metric: one a request");
}

static void test_non_finite(void) {
  MlflowMetric m[4] = {{"a", NAN, 1, 1}, {"a", INFINITY, 1, 2}, {"a", -INFINITY, 1, 3}, {"a", 0.5, 1, 4}};
  char *body = mlflow_batch_json("r", m, 4, NULL, 0, NULL, 0);
  cJSON *o = cJSON_Parse(body);
  const cJSON *list = cJSON_GetObjectItem(o, "metrics");
  const char *want[] = {"NaN", "Infinity", "-Infinity"};
  for (int i = 0; i < 3; i++) {
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetArrayItem(list, i), "value");
    CHECK(cJSON_IsString(v) && !strcmp(v->valuestring, want[i]), "non-finite value %d sent as \"%s\"", i, want[i]);
  }
  const cJSON *v = cJSON_GetObjectItem(cJSON_GetArrayItem(list, 3), "value");
  CHECK(cJSON_IsNumber(v) && v->valuedouble == 0.5, "a finite value stays a number");
  cJSON_Delete(o);
  free(body);
}

// ---- flattening ---------------------------------------------------------------------

typedef struct Seen {
  char keys[32][300];
  double values[32];
  int count;
} Seen;

static void collect(void *ctx, const char *key, double value) {
  Seen *s = ctx;
  if (s->count < 32) {
    snprintf(s->keys[s->count], sizeof s->keys[0], "%s", key);
    s->values[s->count++] = value;
  }
}

static double seen(const Seen *s, const char *key) {
  for (int i = 0; i < s->count; i++)
    if (!strcmp(s->keys[i], key)) return s->values[i];
  return -999;
}

static void test_flatten(void) {
  char long_key[300];
  memset(long_key, 'k', 260);
  long_key[260] = 0;
  char text[1024];
  snprintf(text, sizeof text,
           "{\"step\": 7, \"loss\": 1.5, \"clipped\": true, \"step_skipped\": false, \"run\": {\"blas\": \"x\", "
           "\"blas_threads\": 2}, \"rank_rollouts\": [3, 4], \"note\": \"s\", \"eval_loss\": null, \"%s\": 1}",
           long_key);
  cJSON *row = cJSON_Parse(text);
  Seen s = {0};
  int too_long = mlflow_flatten_row(row, collect, &s);
  CHECK(s.count == 6, "6 numbers (got %d)", s.count);
  CHECK(seen(&s, "loss") == 1.5 && seen(&s, "clipped") == 1 && seen(&s, "step_skipped") == 0, "numbers and booleans");
  CHECK(seen(&s, "run/blas_threads") == 2 && seen(&s, "rank_rollouts/0") == 3 && seen(&s, "rank_rollouts/1") == 4,
        "nested objects and arrays flattened with /");
  CHECK(seen(&s, "step") == -999 && seen(&s, "note") == -999 && seen(&s, "eval_loss") == -999,
        "step, strings and nulls left out");
  CHECK(too_long == 1, "the 260-character key is left out and counted");
  cJSON_Delete(row);
}

// ---- the queue ----------------------------------------------------------------------

static void test_queue(void) {
  MlflowQueue q;
  FimiError err = {0};
  CHECK(mlflow_queue_init(&q, 0, &err) != 0, "capacity 0 refused");
  CHECK(mlflow_queue_init(&q, 3, &err) == 0, "init");
  int dropped = 0;
  for (int i = 0; i < 5; i++) {
    char key[16];
    snprintf(key, sizeof key, "m%d", i);
    dropped += mlflow_queue_push(&q, key, i, 100 + i, i);
  }
  CHECK(dropped == 2 && q.dropped == 2 && q.count == 3, "two oldest dropped (%d, %lld)", dropped, (long long)q.dropped);
  MlflowMetric out[8];
  int n = mlflow_queue_take(&q, out, 2);
  CHECK(n == 2 && !strcmp(out[0].key, "m2") && !strcmp(out[1].key, "m3") && out[1].step == 3,
        "the newest kept, oldest first");
  for (int i = 0; i < n; i++) free((char *)out[i].key);
  mlflow_queue_push(&q, "m5", 5, 105, 5);
  n = mlflow_queue_take(&q, out, 8);
  CHECK(n == 2 && !strcmp(out[0].key, "m4") && !strcmp(out[1].key, "m5"), "wraps around the ring");
  for (int i = 0; i < n; i++) free((char *)out[i].key);
  mlflow_queue_push(&q, "left", 1, 1, 1);
  mlflow_queue_free(&q);  // frees the key still queued (ASan: no leak)
}

// ---- settings and URLs --------------------------------------------------------------

static void test_settings(void) {
  MlflowSettings s;
  FimiError err = {0};
  CHECK(mlflow_settings_resolve(&s, "", "", 10, NULL, NULL, NULL, &err) == 0 && !s.uri[0] &&
            !strcmp(s.experiment, "Default") && !s.token,
        "nothing set: no MLflow, experiment Default");
  CHECK(mlflow_settings_resolve(&s, "", "", 10, "http://env:5000", "env-exp", "tok", &err) == 0 &&
            !strcmp(s.uri, "http://env:5000") && !strcmp(s.experiment, "env-exp") && !strcmp(s.token, "tok"),
        "the environment when the config is empty");
  CHECK(mlflow_settings_resolve(&s, "https://cfg:443/prefix", "cfg-exp", 3, "http://env:5000", "env-exp", NULL, &err) ==
                0 &&
            !strcmp(s.uri, "https://cfg:443/prefix") && !strcmp(s.experiment, "cfg-exp") && s.flush_s == 3,
        "the config keys win");
  CHECK(mlflow_settings_resolve(&s, "file:///tmp/mlruns", "", 10, NULL, NULL, NULL, &err) != 0 &&
            strstr(err.message, "track.mlflow_uri"),
        "a config URI that is not http(s) is an error naming the key: %s", err.message);
  CHECK(mlflow_settings_resolve(&s, "", "", 10, "./mlruns", NULL, NULL, &err) == 0 && !s.uri[0],
        "an environment URI that is not http(s): no MLflow, no error");
  CHECK(mlflow_settings_resolve(&s, "", "", -1, NULL, NULL, NULL, &err) != 0, "a negative flush time is refused");
  const char *bad[] = {"ftp://host/x", "localhost:5000", "", "http://", "databricks"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK(http_url_check(bad[i], "URL", &err) != 0, "\"%s\" refused", bad[i]);

  MlflowClient c;
  char url[4096];
  CHECK(mlflow_client_init(&c, "http://h:5000/", NULL, 5, &err) == 0 && !strcmp(c.base, "http://h:5000"),
        "a trailing / dropped");
  CHECK(mlflow_artifact_url(&c, "mlflow-artifacts:/3/abc/artifacts", "metrics.jsonl", url, sizeof url, &err) == 0 &&
            !strcmp(url, "http://h:5000/api/2.0/mlflow-artifacts/artifacts/3/abc/artifacts/metrics.jsonl"),
        "mlflow-artifacts: maps to the proxied route (%s)", url);
  CHECK(mlflow_artifact_url(&c, "s3://bucket/3/abc/artifacts", "x", url, sizeof url, &err) != 0 &&
            strstr(err.message, "s3://bucket"),
        "an s3: store is refused with a message naming it");
}

// ---- a tracker with no server -------------------------------------------------------

// A loopback port nothing listens on: bound, then closed.
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    return 1;
  close(fd);
  return ntohs(a.sin_port);
}

static int count_lines(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  char line[2048];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  if (f) fclose(f);
  return n;
}

static void test_tracker_without_server(const char *dir) {
  char uri[64], log_path[1024];
  snprintf(uri, sizeof uri, "http://127.0.0.1:%d", closed_port());
  snprintf(log_path, sizeof log_path, "%s/stderr.txt", dir);
  MlflowTrackerOptions o = {0};
  FimiError err = {0};
  CHECK(mlflow_settings_resolve(&o.settings, uri, "exp", 1.0, NULL, NULL, NULL, &err) == 0, "settings");
  o.queue_capacity = 100;
  MlflowRunContext ctx = {dir, 0, 1, "gemma3_text", 1000};
  fflush(stderr);
  int saved = dup(2);
  FILE *capture = freopen(log_path, "w", stderr);
  double t0 = now_s();
  MlflowTracker *t = mlflow_tracker_open(&o, &ctx, &err);
  double slowest = 0;
  for (int step = 1; t && step <= 200; step++) {
    char text[128];
    snprintf(text, sizeof text, "{\"step\": %d, \"loss\": %g, \"lr\": 0.1, \"clipped\": false}", step, 1.0 / step);
    cJSON *row = cJSON_Parse(text);
    double s0 = now_s();
    mlflow_tracker_log_row(t, row);
    if (now_s() - s0 > slowest) slowest = now_s() - s0;
    cJSON_Delete(row);
  }
  int64_t dropped = t ? mlflow_tracker_dropped(t) : 0;
  double before_close = now_s();
  mlflow_tracker_close(t, 0);
  double closing = now_s() - before_close, total = now_s() - t0;
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  (void)capture;
  stderr = fdopen(2, "w");
  CHECK(t != NULL, "the tracker opens without a server: %s", err.message);
  CHECK(slowest < 0.05, "every log call returns at once (slowest %.4f s)", slowest);
  CHECK(closing < 4.0, "close returns within the flush bound (1 s) plus the status request (%.2f s)", closing);
  CHECK(dropped >= 500, "600 metrics into a queue of 100: the oldest dropped (%lld)", (long long)dropped);
  int unreachable = count_lines(log_path, "unreachable"), full = count_lines(log_path, "queue of 100 metrics is full");
  CHECK(unreachable == 1, "one unreachable warning (%d)", unreachable);
  CHECK(full == 1, "one queue-full warning (%d)", full);
  CHECK(count_lines(log_path, "fimi warning: MLflow") >= 2, "warnings say fimi warning: MLflow");
  printf("no server: log calls at most %.2g s, close %.2f s, all %.2f s\n", slowest, closing, total);
  char ini[1100];
  snprintf(ini, sizeof ini, "%s/config.ini", dir);
  FILE *f = fopen(ini, "r");
  CHECK(f != NULL, "config.ini written");
  if (f) fclose(f);
}

// ---- evaluations --------------------------------------------------------------------

typedef struct Collected {
  char keys[64][128];
  double values[64];
  char texts[64][128];
  int n;
} Collected;

static void collect_metric(void *ctx, const char *key, double value) {
  Collected *c = ctx;
  if (c->n < 64) snprintf(c->keys[c->n], 128, "%s", key), c->values[c->n++] = value;
}

static void collect_param(void *ctx, const char *key, const char *value) {
  Collected *c = ctx;
  if (c->n < 64) snprintf(c->keys[c->n], 128, "%s", key), snprintf(c->texts[c->n++], 128, "%s", value);
}

static int find(const Collected *c, const char *key) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->keys[i], key)) return i;
  return -1;
}

static void test_eval_metrics(void) {
  cJSON *eval = cJSON_Parse(
      "{\"format\": \"fimi-eval-results\", \"version\": 1, \"label\": \"sft\", \"trials\": 2, \"temperature\": 0.7, "
      "\"seed\": \"0x01\", \"seconds\": 1.5, \"summary\": {\"overall\": {\"reward\": 0.25, \"comm\": null}, "
      "\"kind\": {\"happy\": {\"strict\": 0.5}}, \"family\": {\"fd_paper\": {\"reward\": 1}}, "
      "\"band\": {\"always_fail\": 0.75}, \"pass_k\": [{\"k\": 1, \"pass_hat_k\": 0.5, \"pass_at_k\": 0.5}, "
      "{\"k\": 2, \"pass_hat_k\": 0.25, \"pass_at_k\": 0.75}]}, \"episodes\": [{\"reward\": 9}]}");
  Collected c = {0};
  CHECK(eval && eval_mlflow_summary_metrics(eval, collect_metric, &c) == 0, "an eval result file has metrics");
  const char *want[] = {"overall/reward", "kind/happy/strict", "band/always_fail", "pass_k/1/pass_hat_k",
                        "pass_k/1/pass_at_k", "pass_k/2/pass_hat_k", "pass_k/2/pass_at_k", "seconds"};
  const double values[] = {0.25, 0.5, 0.75, 0.5, 0.5, 0.25, 0.75, 1.5};
  int ok = c.n == 8;
  for (int i = 0; i < 8; i++) ok = ok && find(&c, want[i]) >= 0 && c.values[find(&c, want[i])] == values[i];
  CHECK(ok, "eval metrics: the summary flattened, pass_k by k, no family, no null (%d metrics)", c.n);
  Collected p = {0};
  int n = eval_mlflow_params(eval, collect_param, &p);
  ok = n == 4 && p.n == 4 && find(&p, "label") >= 0 && !strcmp(p.texts[find(&p, "temperature")], "0.7") &&
       !strcmp(p.texts[find(&p, "trials")], "2") && !strcmp(p.texts[find(&p, "seed")], "0x01") &&
       find(&p, "format") < 0 && find(&p, "seconds") < 0 && find(&p, "version") < 0;
  CHECK(ok, "eval params: label, trials, temperature 0.7, seed; no format, version or timing (%d)", p.n);
  cJSON_Delete(eval);

  cJSON *bench = cJSON_Parse(
      "{\"format\": \"fimi-eval-bench\", \"attempts\": 3, \"summary\": {\"overall\": {\"pass_hat_n\": 0.5, "
      "\"failed\": {\"safety\": 2}}, \"categories\": {\"cards\": {\"avg_at_n\": 0.25}}, "
      "\"checks\": {\"safety.other_customer\": 4}}}");
  Collected b = {0};
  CHECK(bench && eval_mlflow_summary_metrics(bench, collect_metric, &b) == 0 && b.n == 4 &&
            b.values[find(&b, "overall/failed/safety")] == 2 && b.values[find(&b, "categories/cards/avg_at_n")] == 0.25 &&
            b.values[find(&b, "checks/safety.other_customer")] == 4,
        "bench metrics: overall, categories, gate and check counts (%d)", b.n);
  cJSON_Delete(bench);
  cJSON *other = cJSON_Parse("{\"format\": \"something-else\", \"summary\": {\"x\": 1}}");
  Collected o = {0};
  CHECK(eval_mlflow_summary_metrics(other, collect_metric, &o) != 0 && o.n == 0, "another format is refused");
  CHECK(eval_mlflow_summary_metrics(NULL, collect_metric, &o) != 0, "no document is refused");
  cJSON_Delete(other);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) fputs(text, f), fclose(f);
}

static void test_eval_link_and_settings(const char *dir) {
  char run_dir[512], step_dir[600], other[600], file[600], cmd[1300];
  snprintf(run_dir, sizeof run_dir, "%s/sft-a", dir);
  snprintf(step_dir, sizeof step_dir, "%s/step_000012/", run_dir);
  snprintf(other, sizeof other, "%s/final", run_dir);
  snprintf(file, sizeof file, "%s/mlflow_run.json", run_dir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s %s", step_dir, other);
  CHECK(system(cmd) == 0, "folders");
  EvalTrainingLink link;
  FimiError err = {0};
  CHECK(eval_mlflow_training_link(step_dir, &link, &err) == 1, "no mlflow_run.json: no link");
  write_text(file, "{\"tracking_uri\": \"http://h:5000\", \"experiment_name\": \"kyc\", \"run_id\": \"abc123\"}");
  CHECK(eval_mlflow_training_link(step_dir, &link, &err) == 0 && !strcmp(link.run_id, "abc123") &&
            !strcmp(link.experiment_name, "kyc") && !strcmp(link.tracking_uri, "http://h:5000") && link.step == 12,
        "a checkpoint of a tracked run: its run id, experiment, server and step");
  CHECK(eval_mlflow_training_link(other, &link, &err) == 0 && link.step == -1, "another folder of RUN_DIR: no step");
  write_text(file, "{\"tracking_uri\": 5");
  CHECK(eval_mlflow_training_link(step_dir, &link, &err) == -1 && strstr(err.message, "mlflow_run.json"),
        "a broken mlflow_run.json is named: %s", err.message);

  static const ConfigField track[] = {{"track", "mlflow_uri", CONFIG_STRING, "", ""},
                                      {"track", "experiment", CONFIG_STRING, "", ""}};
  Config *config = calloc(1, sizeof *config);
  MlflowSettings s;
  int named = -1;
  CHECK(config && config_add_fields(config, track, 2, &err) == 0, "schema");
  unsetenv("MLFLOW_TRACKING_URI");
  unsetenv("MLFLOW_EXPERIMENT_NAME");
  CHECK(eval_mlflow_settings(&s, &named, NULL, NULL, config, &err) == 0 && !s.uri[0] && !named &&
            !strcmp(s.experiment, "Default"),
        "nothing set: no MLflow, no experiment named");
  setenv("MLFLOW_TRACKING_URI", "http://env:1", 1);
  setenv("MLFLOW_EXPERIMENT_NAME", "env-exp", 1);
  CHECK(eval_mlflow_settings(&s, &named, NULL, NULL, config, &err) == 0 && !strcmp(s.uri, "http://env:1") && named &&
            !strcmp(s.experiment, "env-exp"),
        "the environment");
  config_set(config, "track", "mlflow_uri", "http://cfg:2", "test", &err);
  config_set(config, "track", "experiment", "cfg-exp", "test", &err);
  CHECK(eval_mlflow_settings(&s, &named, NULL, NULL, config, &err) == 0 && !strcmp(s.uri, "http://cfg:2") &&
            !strcmp(s.experiment, "cfg-exp"),
        "the config keys before the environment");
  CHECK(eval_mlflow_settings(&s, &named, "http://flag:3", "flag-exp", config, &err) == 0 &&
            !strcmp(s.uri, "http://flag:3") && !strcmp(s.experiment, "flag-exp"),
        "the flags before the config");
  CHECK(eval_mlflow_settings(&s, &named, "file:///x", NULL, config, &err) != 0 && strstr(err.message, "--mlflow-uri"),
        "a flag URI that is not http(s) is an error naming the flag: %s", err.message);
  unsetenv("MLFLOW_TRACKING_URI");
  unsetenv("MLFLOW_EXPERIMENT_NAME");
  free(config);
}

static void test_eval_without_server(const char *dir) {
  char uri[64], log_path[1024];
  snprintf(uri, sizeof uri, "http://127.0.0.1:%d", closed_port());
  snprintf(log_path, sizeof log_path, "%s/eval-stderr.txt", dir);
  EvalMlflowOptions o = {.kind = EVAL_MLFLOW_KIND_EVAL, .command = "fimi eval", .run_name = "x", .agent = "oracle"};
  int named = 0;
  FimiError err = {0};
  CHECK(eval_mlflow_settings(&o.settings, &named, uri, "exp", NULL, &err) == 0, "settings");
  fflush(stderr);
  int saved = dup(2);
  FILE *capture = freopen(log_path, "w", stderr);
  double t0 = now_s();
  EvalMlflowRun *run = eval_mlflow_start(&o);
  eval_mlflow_finish(run, "no-such-file.json", NULL, 0);
  double took = now_s() - t0;
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  (void)capture;
  stderr = fdopen(2, "w");
  CHECK(run == NULL && took < 2.0, "no server: no run, at once (%.2f s)", took);
  CHECK(count_lines(log_path, "fimi warning: MLflow") == 1 && count_lines(log_path, "not logged to MLflow") == 1,
        "one warning");
  o.settings.uri[0] = 0;
  CHECK(eval_mlflow_start(&o) == NULL, "no URI: no run, no request");
}

int main(void) {
  char dir[] = "/tmp/fimi_test_mlflow_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  test_batch_split();
  test_non_finite();
  test_flatten();
  test_queue();
  test_settings();
  test_tracker_without_server(dir);
  test_eval_metrics();
  test_eval_link_and_settings(dir);
  test_eval_without_server(dir);
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (test_failures == 0 && system(cmd) != 0) printf("could not remove %s\n", dir);
  TEST_MAIN_END();
}
