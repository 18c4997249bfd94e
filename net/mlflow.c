// net/mlflow.c: MLflow tracking REST client (see mlflow.h). JSON by cJSON,
// HTTP by net/http.c.
#include "net/mlflow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define API "/api/2.0/mlflow/"
#define ARTIFACTS_API "/api/2.0/mlflow-artifacts/artifacts/"
#define ARTIFACTS_SCHEME "mlflow-artifacts:"

int mlflow_client_init(MlflowClient *c, const char *uri, const char *token, double timeout_s, FimiError *err) {
  memset(c, 0, sizeof *c);
  if (http_url_check(uri, "MLflow tracking URI", err) != 0) return -1;
  size_t n = strlen(uri);
  while (n > 0 && uri[n - 1] == '/') n--;
  if (n >= sizeof c->base) return fimi_fail(err, "MLflow tracking URI longer than %zu bytes", sizeof c->base - 1);
  memcpy(c->base, uri, n);
  c->base[n] = 0;
  c->token = token && token[0] ? token : NULL;
  c->timeout_s = timeout_s > 0 ? timeout_s : 30;
  return 0;
}

// ---- requests -----------------------------------------------------------------------

// MLflow's own words for a refused request: "HTTP 400 INVALID_PARAMETER_VALUE: ...".
static void describe_error(const HttpResponse *r, char *out, size_t size) {
  cJSON *body = cJSON_ParseWithLength(r->body, r->size);
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(body, "error_code");
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(body, "message");
  if (cJSON_IsString(code) && cJSON_IsString(msg))
    snprintf(out, size, "HTTP %ld %s: %.300s", r->status, code->valuestring, msg->valuestring);
  else
    snprintf(out, size, "HTTP %ld: %.200s", r->status, r->body);
  cJSON_Delete(body);
}

// -1 (or HTTP_TRANSIENT for 429 and 5xx, the answers worth a retry) with err
// naming the request and the server's error, for a status outside 2xx; 0 otherwise.
static int fail_on_status(const HttpResponse *r, const char *method, const char *url, FimiError *err) {
  if (r->status >= 200 && r->status < 300) return 0;
  char why[512];
  describe_error(r, why, sizeof why);
  fimi_fail(err, "%s %s: %s", method, url, why);
  return r->status == 429 || r->status >= 500 ? HTTP_TRANSIENT : -1;
}

static int is_not_found(const HttpResponse *r) {
  if (r->status != 404) return 0;
  cJSON *body = cJSON_ParseWithLength(r->body, r->size);
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(body, "error_code");
  int found = cJSON_IsString(code) && !strcmp(code->valuestring, "RESOURCE_DOES_NOT_EXIST");
  cJSON_Delete(body);
  return found;
}

// One call: *answer gets the parsed JSON of a 2xx answer (NULL allowed when
// the caller needs none). not_found (may be NULL) is set for MLflow's
// RESOURCE_DOES_NOT_EXIST.
static int call(const MlflowClient *c, const char *method, const char *path, const char *body, cJSON **answer,
                int *not_found, FimiError *err) {
  char url[MLFLOW_URL_MAX * 2];
  if (snprintf(url, sizeof url, "%s%s", c->base, path) >= (int)sizeof url)
    return fimi_fail(err, "MLflow: URL too long (%s%.64s...)", c->base, path);
  HttpRequest req = {.method = method, .url = url, .bearer_token = c->token, .timeout_s = c->timeout_s,
                     .cancel = c->cancel};
  if (body) {
    req.content_type = "application/json";
    req.body = body;
    req.body_size = strlen(body);
  }
  HttpResponse r;
  int rc = http_request(&req, &r, err);
  if (rc != 0) return rc;
  if (answer) *answer = NULL;
  if (not_found) *not_found = is_not_found(&r);
  rc = fail_on_status(&r, method, url, err);
  if (rc == 0 && answer && !(*answer = cJSON_ParseWithLength(r.body, r.size)))
    rc = fimi_fail(err, "%s %s: the answer is not JSON (%.120s)", method, url, r.body);
  http_response_free(&r);
  return rc;
}

static int post_json(const MlflowClient *c, const char *path, cJSON *body, cJSON **answer, FimiError *err) {
  char *text = body ? cJSON_PrintUnformatted(body) : NULL;
  cJSON_Delete(body);
  if (!text) return fimi_fail(err, "out of memory building an MLflow request");
  int rc = call(c, "POST", path, text, answer, NULL, err);
  free(text);
  return rc;
}

// A string field of a parsed answer into out; -1 naming the field when
// missing or too long (a malformed answer).
static int get_text(const cJSON *obj, const char *key, char *out, size_t size, const char *what, FimiError *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
    return fimi_fail(err, "MLflow %s: the answer lacks a valid \"%s\"", what, key);
  strcpy(out, v->valuestring);
  return 0;
}

// ---- experiments and runs ------------------------------------------------------------

int mlflow_experiment_get(const MlflowClient *c, const char *name, char *id, size_t id_size, FimiError *err) {
  char escaped[1024], path[1200];
  if (http_escape(name, escaped, sizeof escaped) != 0) return fimi_fail(err, "MLflow experiment name too long");
  snprintf(path, sizeof path, API "experiments/get-by-name?experiment_name=%s", escaped);
  cJSON *answer = NULL;
  int not_found = 0, rc = call(c, "GET", path, NULL, &answer, &not_found, err);
  if (rc != 0) return not_found ? MLFLOW_NOT_FOUND : rc;
  rc = get_text(cJSON_GetObjectItemCaseSensitive(answer, "experiment"), "experiment_id", id, id_size,
                "experiments/get-by-name", err);
  cJSON_Delete(answer);
  return rc;
}

int mlflow_experiment_get_or_create(const MlflowClient *c, const char *name, char *id, size_t id_size, FimiError *err) {
  int rc = mlflow_experiment_get(c, name, id, id_size, err);
  if (rc != MLFLOW_NOT_FOUND) return rc;
  cJSON *body = cJSON_CreateObject(), *answer = NULL;
  if (body) cJSON_AddStringToObject(body, "name", name);
  rc = post_json(c, API "experiments/create", body, &answer, err);
  if (rc == 0) rc = get_text(answer, "experiment_id", id, id_size, "experiments/create", err);
  cJSON_Delete(answer);
  // Another client may have created it since: RESOURCE_ALREADY_EXISTS.
  if (rc == -1) rc = mlflow_experiment_get(c, name, id, id_size, err) == 0 ? 0 : -1;
  return rc;
}

static int add_key_values(cJSON *obj, const char *name, const MlflowKeyValue *kv, int n) {
  if (n <= 0) return 0;
  cJSON *arr = cJSON_AddArrayToObject(obj, name);
  for (int i = 0; arr && i < n; i++) {
    cJSON *item = cJSON_CreateObject();
    if (!item || !cJSON_AddStringToObject(item, "key", kv[i].key) ||
        !cJSON_AddStringToObject(item, "value", kv[i].value ? kv[i].value : "")) {
      cJSON_Delete(item);
      return -1;
    }
    cJSON_AddItemToArray(arr, item);
  }
  return arr ? 0 : -1;
}

static int read_run_info(const cJSON *answer, MlflowRunInfo *out, const char *what, FimiError *err) {
  const cJSON *info = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(answer, "run"), "info");
  memset(out, 0, sizeof *out);
  if (get_text(info, "run_id", out->run_id, sizeof out->run_id, what, err) != 0 ||
      get_text(info, "experiment_id", out->experiment_id, sizeof out->experiment_id, what, err) != 0)
    return -1;
  // Optional in the API; an empty artifact_uri means no artifacts.
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(info, "status");
  if (cJSON_IsString(v)) snprintf(out->status, sizeof out->status, "%s", v->valuestring);
  v = cJSON_GetObjectItemCaseSensitive(info, "artifact_uri");
  if (cJSON_IsString(v) && strlen(v->valuestring) < sizeof out->artifact_uri) strcpy(out->artifact_uri, v->valuestring);
  return 0;
}

int mlflow_run_create(const MlflowClient *c, const char *experiment_id, const char *run_name, int64_t start_ms,
                      const MlflowKeyValue *tags, int num_tags, MlflowRunInfo *out, FimiError *err) {
  cJSON *body = cJSON_CreateObject(), *answer = NULL;
  if (body && (!cJSON_AddStringToObject(body, "experiment_id", experiment_id) ||
               !cJSON_AddStringToObject(body, "run_name", run_name) ||
               !cJSON_AddNumberToObject(body, "start_time", (double)start_ms) ||
               add_key_values(body, "tags", tags, num_tags) != 0)) {
    cJSON_Delete(body);
    body = NULL;
  }
  int rc = post_json(c, API "runs/create", body, &answer, err);
  if (rc == 0) rc = read_run_info(answer, out, "runs/create", err);
  cJSON_Delete(answer);
  return rc;
}

int mlflow_run_get(const MlflowClient *c, const char *run_id, MlflowRunInfo *out, cJSON **params, FimiError *err) {
  char escaped[MLFLOW_ID_MAX * 3 + 1], path[MLFLOW_ID_MAX * 3 + 64];
  if (params) *params = NULL;
  if (http_escape(run_id, escaped, sizeof escaped) != 0) return fimi_fail(err, "MLflow run id too long");
  snprintf(path, sizeof path, API "runs/get?run_id=%s", escaped);
  cJSON *answer = NULL;
  int not_found = 0, rc = call(c, "GET", path, NULL, &answer, &not_found, err);
  if (rc != 0) return not_found ? MLFLOW_NOT_FOUND : rc;
  rc = read_run_info(answer, out, "runs/get", err);
  if (rc == 0 && params) {
    cJSON *data = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(answer, "run"), "data");
    cJSON *list = cJSON_DetachItemFromObjectCaseSensitive(data, "params");
    *params = cJSON_IsArray(list) ? list : cJSON_CreateArray();
    if (!cJSON_IsArray(list)) cJSON_Delete(list);
  }
  cJSON_Delete(answer);
  return rc;
}

int mlflow_run_update(const MlflowClient *c, const char *run_id, const char *status, int64_t end_ms, FimiError *err) {
  cJSON *body = cJSON_CreateObject();
  if (body && (!cJSON_AddStringToObject(body, "run_id", run_id) || !cJSON_AddStringToObject(body, "status", status) ||
               (end_ms > 0 && !cJSON_AddNumberToObject(body, "end_time", (double)end_ms)))) {
    cJSON_Delete(body);
    body = NULL;
  }
  return post_json(c, API "runs/update", body, NULL, err);
}

int mlflow_runs_search(const MlflowClient *c, const char *experiment_id, const char *filter, const char *order_by,
                       int max_results, const char *page_token, cJSON **runs, char *next_token,
                       size_t next_token_size, FimiError *err) {
  *runs = NULL;
  if (next_token_size > 0) next_token[0] = 0;
  cJSON *body = cJSON_CreateObject(), *answer = NULL, *ids = cJSON_CreateStringArray(&experiment_id, 1);
  cJSON *order = order_by ? cJSON_CreateStringArray(&order_by, 1) : NULL;
  int ok = body && ids && cJSON_AddItemToObject(body, "experiment_ids", ids);
  if (!ok) cJSON_Delete(ids);
  if (ok && order) ok = cJSON_AddItemToObject(body, "order_by", order);
  else cJSON_Delete(order);
  if (ok && filter) ok = cJSON_AddStringToObject(body, "filter", filter) != NULL;
  if (ok) ok = cJSON_AddNumberToObject(body, "max_results", max_results > 0 ? max_results : 1000) != NULL;
  if (ok && page_token && page_token[0]) ok = cJSON_AddStringToObject(body, "page_token", page_token) != NULL;
  if (!ok) {
    cJSON_Delete(body);
    body = NULL;
  }
  int rc = post_json(c, API "runs/search", body, &answer, err);
  if (rc != 0) return rc;
  cJSON *list = cJSON_DetachItemFromObjectCaseSensitive(answer, "runs");
  const cJSON *token = cJSON_GetObjectItemCaseSensitive(answer, "next_page_token");
  if (list && !cJSON_IsArray(list)) {
    cJSON_Delete(list);
    cJSON_Delete(answer);
    return fimi_fail(err, "MLflow runs/search: the answer's \"runs\" is not a list");
  }
  if (cJSON_IsString(token) && strlen(token->valuestring) >= next_token_size) {
    cJSON_Delete(list);
    cJSON_Delete(answer);
    return fimi_fail(err, "MLflow runs/search: next_page_token too long");
  }
  if (cJSON_IsString(token)) strcpy(next_token, token->valuestring);
  cJSON_Delete(answer);
  *runs = list ? list : cJSON_CreateArray();
  return *runs ? 0 : fimi_fail(err, "out of memory");
}

// ---- log-batch ----------------------------------------------------------------------

// The JSON bytes of a string once escaped, at most (cJSON writes a control
// character as \u00XX, a quote or backslash as two bytes).
static size_t escaped_size(const char *s) {
  size_t n = 2;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += *p < 0x20 ? 6 : (*p == '"' || *p == '\\') ? 2 : 1;
  return n;
}

// {"key":K,"value":V,"timestamp":T,"step":S}, plus a comma: 36 bytes of
// syntax, a double in at most 26 bytes ("-Infinity" as a string: 11), two
// integers in at most 20 each.
static size_t metric_json_bound(const MlflowMetric *m) { return escaped_size(m->key) + 36 + 26 + 20 + 20; }

int mlflow_batch_take(const MlflowMetric *metrics, int count, size_t max_bytes) {
  // The body's envelope: {"run_id":"<id>","metrics":[]} with room to spare.
  size_t used = 64 + MLFLOW_ID_MAX;
  int n = 0;
  while (n < count && n < MLFLOW_MAX_METRICS_PER_BATCH) {
    size_t size = metric_json_bound(&metrics[n]);
    if (n > 0 && used + size > max_bytes) break;
    used += size;
    n++;
  }
  return n;
}

// MLflow's JSON API takes non-finite doubles as protobuf's JSON strings.
static cJSON *metric_value(double v) {
  if (isnan(v)) return cJSON_CreateString("NaN");
  if (isinf(v)) return cJSON_CreateString(v > 0 ? "Infinity" : "-Infinity");
  return cJSON_CreateNumber(v);
}

static int add_metrics(cJSON *body, const MlflowMetric *m, int n) {
  if (n <= 0) return 0;
  cJSON *arr = cJSON_AddArrayToObject(body, "metrics");
  for (int i = 0; arr && i < n; i++) {
    cJSON *item = cJSON_CreateObject(), *value = metric_value(m[i].value);
    if (!item || !value || !cJSON_AddStringToObject(item, "key", m[i].key) ||
        !cJSON_AddItemToObject(item, "value", value) ||
        !cJSON_AddNumberToObject(item, "timestamp", (double)m[i].timestamp_ms) ||
        !cJSON_AddNumberToObject(item, "step", (double)m[i].step)) {
      cJSON_Delete(item);
      if (!item) cJSON_Delete(value);
      return -1;
    }
    cJSON_AddItemToArray(arr, item);
  }
  return arr ? 0 : -1;
}

char *mlflow_batch_json(const char *run_id, const MlflowMetric *metrics, int num_metrics, const MlflowKeyValue *params,
                        int num_params, const MlflowKeyValue *tags, int num_tags) {
  cJSON *body = cJSON_CreateObject();
  char *text = NULL;
  if (body && cJSON_AddStringToObject(body, "run_id", run_id) && add_metrics(body, metrics, num_metrics) == 0 &&
      add_key_values(body, "params", params, num_params) == 0 && add_key_values(body, "tags", tags, num_tags) == 0)
    text = cJSON_PrintUnformatted(body);
  cJSON_Delete(body);
  return text;
}

static int check_batch(const MlflowMetric *metrics, int num_metrics, const MlflowKeyValue *params, int num_params,
                       const MlflowKeyValue *tags, int num_tags, FimiError *err) {
  if (num_metrics > MLFLOW_MAX_METRICS_PER_BATCH || num_params > MLFLOW_MAX_PARAMS_TAGS_PER_BATCH ||
      num_tags > MLFLOW_MAX_PARAMS_TAGS_PER_BATCH || num_metrics + num_params + num_tags > MLFLOW_MAX_ENTITIES_PER_BATCH)
    return fimi_fail(err, "MLflow log-batch: %d metrics, %d params, %d tags exceed the server's limits", num_metrics,
                     num_params, num_tags);
  for (int i = 0; i < num_metrics; i++)
    if (strlen(metrics[i].key) > MLFLOW_MAX_KEY) return fimi_fail(err, "MLflow: metric name longer than 250: %.64s...", metrics[i].key);
  for (int i = 0; i < num_params; i++)
    if (strlen(params[i].key) > MLFLOW_MAX_KEY || strlen(params[i].value) > MLFLOW_MAX_PARAM_VALUE)
      return fimi_fail(err, "MLflow: param %.64s: key or value over the server's limits", params[i].key);
  for (int i = 0; i < num_tags; i++)
    if (strlen(tags[i].key) > MLFLOW_MAX_KEY || strlen(tags[i].value) > MLFLOW_MAX_TAG_VALUE)
      return fimi_fail(err, "MLflow: tag %.64s: key or value over the server's limits", tags[i].key);
  return 0;
}

int mlflow_log_batch(const MlflowClient *c, const char *run_id, const MlflowMetric *metrics, int num_metrics,
                     const MlflowKeyValue *params, int num_params, const MlflowKeyValue *tags, int num_tags,
                     FimiError *err) {
  if (check_batch(metrics, num_metrics, params, num_params, tags, num_tags, err) != 0) return -1;
  char *text = mlflow_batch_json(run_id, metrics, num_metrics, params, num_params, tags, num_tags);
  if (!text) return fimi_fail(err, "out of memory building an MLflow log-batch request");
  int rc = strlen(text) > MLFLOW_MAX_REQUEST_BYTES
               ? fimi_fail(err, "MLflow log-batch: %zu bytes exceed the server's %d", strlen(text), MLFLOW_MAX_REQUEST_BYTES)
               : call(c, "POST", API "runs/log-batch", text, NULL, NULL, err);
  free(text);
  return rc;
}

// ---- artifacts ----------------------------------------------------------------------

int mlflow_artifact_url(const MlflowClient *c, const char *artifact_uri, const char *name, char *out, size_t out_size,
                        FimiError *err) {
  int n;
  if (!strncmp(artifact_uri, ARTIFACTS_SCHEME, strlen(ARTIFACTS_SCHEME))) {
    const char *p = artifact_uri + strlen(ARTIFACTS_SCHEME);
    while (*p == '/') p++;
    n = snprintf(out, out_size, "%s" ARTIFACTS_API "%s/%s", c->base, p, name);
  } else if ((!strncmp(artifact_uri, "http://", 7) || !strncmp(artifact_uri, "https://", 8)) &&
             strstr(artifact_uri, ARTIFACTS_API)) {
    n = snprintf(out, out_size, "%s/%s", artifact_uri, name);
  } else {
    return fimi_fail(err,
                     "MLflow artifact_uri \"%s\" is not served by the tracking server (start it with artifact "
                     "serving, the default of `mlflow server`): artifacts are not uploaded",
                     artifact_uri);
  }
  if (n < 0 || (size_t)n >= out_size) return fimi_fail(err, "MLflow artifact URL too long (%s)", artifact_uri);
  return 0;
}

int mlflow_artifact_upload(const MlflowClient *c, const char *artifact_uri, const char *name, const char *path,
                           FimiError *err) {
  char url[MLFLOW_URL_MAX * 2];
  if (mlflow_artifact_url(c, artifact_uri, name, url, sizeof url, err) != 0) return -1;
  HttpRequest req = {.method = "PUT", .url = url, .bearer_token = c->token, .upload_path = path,
                     .content_type = "application/octet-stream", .timeout_s = c->timeout_s, .cancel = c->cancel};
  HttpResponse r;
  int rc = http_request(&req, &r, err);
  if (rc != 0) return rc;
  rc = fail_on_status(&r, "PUT", url, err);
  http_response_free(&r);
  return rc;
}

int mlflow_artifact_download(const MlflowClient *c, const char *artifact_uri, const char *name, size_t max_bytes,
                             char **body, size_t *size, FimiError *err) {
  char url[MLFLOW_URL_MAX * 2];
  *body = NULL;
  *size = 0;
  if (mlflow_artifact_url(c, artifact_uri, name, url, sizeof url, err) != 0) return -1;
  HttpRequest req = {.method = "GET", .url = url, .bearer_token = c->token, .timeout_s = c->timeout_s,
                     .cancel = c->cancel, .max_response = max_bytes};
  HttpResponse r;
  int rc = http_request(&req, &r, err);
  if (rc != 0) return rc;
  if ((rc = fail_on_status(&r, "GET", url, err)) != 0) {
    if (r.status == 404) rc = MLFLOW_NOT_FOUND;
    http_response_free(&r);
    return rc;
  }
  *body = r.body;
  *size = r.size;
  return 0;
}
