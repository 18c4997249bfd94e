// net/mlflow.h: a client of MLflow's tracking server REST API (2.0), over
// net/http.h. Defines MlflowClient, MlflowMetric, MlflowKeyValue,
// MlflowRunInfo, the MLFLOW_* limits, mlflow_client_init,
// mlflow_experiment_get, mlflow_experiment_get_or_create, mlflow_run_create,
// mlflow_run_get, mlflow_run_update, mlflow_runs_search, mlflow_log_batch,
// mlflow_batch_take, mlflow_batch_json, mlflow_artifact_url,
// mlflow_artifact_upload and mlflow_artifact_download.
//
// Every call is one or two requests and fails with a message naming the
// URL and MLflow's error_code/message. Return values: 0 done, -1 refused
// (a 4xx answer, a malformed one: retrying will not help), HTTP_TRANSIENT
// (no answer, a timeout, 429 or a 5xx: worth retrying later), and for
// mlflow_run_get and mlflow_experiment_get MLFLOW_NOT_FOUND.
#ifndef FIMI_NET_MLFLOW_H
#define FIMI_NET_MLFLOW_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "net/http.h"

struct cJSON;

// The server's limits (mlflow/utils/validation.py): entities per
// runs/log-batch request, bytes of its JSON body, key and value lengths.
#define MLFLOW_MAX_METRICS_PER_BATCH 1000
#define MLFLOW_MAX_PARAMS_TAGS_PER_BATCH 100
#define MLFLOW_MAX_ENTITIES_PER_BATCH 1000
#define MLFLOW_MAX_REQUEST_BYTES 1000000
#define MLFLOW_MAX_KEY 250
#define MLFLOW_MAX_PARAM_VALUE 6000
#define MLFLOW_MAX_TAG_VALUE 8000

#define MLFLOW_NOT_FOUND 1
#define MLFLOW_URL_MAX 2048
#define MLFLOW_ID_MAX 128

typedef struct MlflowClient {
  char base[MLFLOW_URL_MAX];  // the tracking URI without a trailing '/'
  const char *token;          // MLFLOW_TRACKING_TOKEN (NULL: none)
  double timeout_s;           // per request
  const volatile int *cancel; // optional: aborts a request in flight (http.h)
} MlflowClient;

typedef struct MlflowMetric {
  const char *key;
  double value;  // NaN and infinities are sent as "NaN", "Infinity", "-Infinity"
  int64_t timestamp_ms;
  int64_t step;
} MlflowMetric;

typedef struct MlflowKeyValue {
  const char *key;
  const char *value;
} MlflowKeyValue;

typedef struct MlflowRunInfo {
  char run_id[MLFLOW_ID_MAX];
  char experiment_id[MLFLOW_ID_MAX];
  char status[32];
  char artifact_uri[MLFLOW_URL_MAX];
} MlflowRunInfo;

// uri: http(s)://host[:port][/prefix]; anything else is an error naming it.
int mlflow_client_init(MlflowClient *c, const char *uri, const char *token, double timeout_s, FimiError *err);

// The id of the experiment named name; MLFLOW_NOT_FOUND when the server
// has none of that name.
int mlflow_experiment_get(const MlflowClient *c, const char *name, char *id, size_t id_size, FimiError *err);

// The id of the experiment named name, created when missing (and looked up
// again when another client created it meanwhile).
int mlflow_experiment_get_or_create(const MlflowClient *c, const char *name, char *id, size_t id_size, FimiError *err);

int mlflow_run_create(const MlflowClient *c, const char *experiment_id, const char *run_name, int64_t start_ms,
                      const MlflowKeyValue *tags, int num_tags, MlflowRunInfo *out, FimiError *err);

// The run's info, and when params is not NULL its params as a cJSON array
// of {key, value} (the caller deletes it). MLFLOW_NOT_FOUND when the server
// does not know the run.
int mlflow_run_get(const MlflowClient *c, const char *run_id, MlflowRunInfo *out, struct cJSON **params,
                   FimiError *err);

// status: RUNNING, FINISHED, FAILED or KILLED; end_ms <= 0: none sent.
int mlflow_run_update(const MlflowClient *c, const char *run_id, const char *status, int64_t end_ms, FimiError *err);

// One page of runs/search in one experiment: filter in MLflow's search
// syntax (e.g. "tags.`fimi.kind` = 'eval'"; NULL: all runs), order_by one
// clause (e.g. "attributes.start_time ASC"; NULL: the server's order),
// page_token "" or NULL for the first page. *runs gets the answer's
// "runs" array (the caller deletes it; empty when none), next_token the
// token of the next page ("" on the last one).
int mlflow_runs_search(const MlflowClient *c, const char *experiment_id, const char *filter, const char *order_by,
                       int max_results, const char *page_token, struct cJSON **runs, char *next_token,
                       size_t next_token_size, FimiError *err);

// One runs/log-batch request. The caller keeps it within the limits
// (mlflow_batch_take); longer keys and values are refused here.
int mlflow_log_batch(const MlflowClient *c, const char *run_id, const MlflowMetric *metrics, int num_metrics,
                     const MlflowKeyValue *params, int num_params, const MlflowKeyValue *tags, int num_tags,
                     FimiError *err);

// How many of metrics[0..count) the next log-batch request can carry: at
// most MLFLOW_MAX_METRICS_PER_BATCH, and a body under max_bytes (the JSON
// size of each metric is bounded from above). At least 1 when count > 0.
int mlflow_batch_take(const MlflowMetric *metrics, int count, size_t max_bytes);

// The runs/log-batch body (malloc'd JSON text; NULL when out of memory).
char *mlflow_batch_json(const char *run_id, const MlflowMetric *metrics, int num_metrics, const MlflowKeyValue *params,
                        int num_params, const MlflowKeyValue *tags, int num_tags);

// The URL an artifact named name is uploaded to (PUT), from the run's
// artifact_uri: "mlflow-artifacts:/P" (the server's proxied store) maps to
// BASE/api/2.0/mlflow-artifacts/artifacts/P/name; an http(s) URI holding
// /api/2.0/mlflow-artifacts/artifacts/ is used as it is. Any other scheme
// (s3:, file:, ...: the client would write there itself) is an error
// saying so.
int mlflow_artifact_url(const MlflowClient *c, const char *artifact_uri, const char *name, char *out, size_t out_size,
                        FimiError *err);

int mlflow_artifact_upload(const MlflowClient *c, const char *artifact_uri, const char *name, const char *path,
                           FimiError *err);

// GET of the artifact named name of a run (the URL as mlflow_artifact_url):
// *body (malloc'd, NUL-terminated) and *size; MLFLOW_NOT_FOUND when the
// server has no such artifact, -1 when it is over max_bytes or refused.
int mlflow_artifact_download(const MlflowClient *c, const char *artifact_uri, const char *name, size_t max_bytes,
                             char **body, size_t *size, FimiError *err);

#endif
