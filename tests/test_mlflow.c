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
// "queue full" warning however many rows, no crash.
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

int main(void) {
  char dir[] = "/tmp/fimi_test_mlflow_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  test_batch_split();
  test_non_finite();
  test_flatten();
  test_queue();
  test_settings();
  test_tracker_without_server(dir);
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (test_failures == 0 && system(cmd) != 0) printf("could not remove %s\n", dir);
  TEST_MAIN_END();
}
