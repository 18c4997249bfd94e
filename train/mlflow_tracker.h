// train/mlflow_tracker.h: a training run tracked on an MLflow tracking
// server (docs/tracking.md, "MLflow"). Defines MlflowSettings,
// MlflowTrackerOptions, MlflowRunContext, MlflowTracker,
// mlflow_settings_resolve, mlflow_tracker_open, mlflow_tracker_log_row,
// mlflow_tracker_close, mlflow_tracker_dropped and mlflow_flatten_row.
//
// The training thread only flattens each metrics.jsonl row into a bounded
// queue (train/mlflow_queue.h); one background thread does all HTTP
// (net/mlflow.h): it gets or creates the experiment, creates the run (or
// reopens the one in RUN_DIR/mlflow_run.json after a resume), logs the
// config as params, the inputs' digests as tags, then the queued metrics
// in log-batch requests, retrying with bounded exponential backoff. A
// server that is down or slow never stops or slows training: one warning,
// the oldest metrics dropped when the queue is full, metrics.jsonl complete
// in any case. At the end it flushes for at most flush_s seconds, sets the
// status (FINISHED or FAILED) and uploads config.ini, metrics.jsonl and
// inputs.json as artifacts. While open it holds a SIGTERM handler that
// only sets a flag: the thread then flushes for a few seconds, sets KILLED
// and lets SIGTERM end the process as it would have.
#ifndef FIMI_TRAIN_MLFLOW_TRACKER_H
#define FIMI_TRAIN_MLFLOW_TRACKER_H

#include <stdint.h>

#include "core/error.h"
#include "net/mlflow.h"
#include "train/run_inputs.h"

struct cJSON;
struct Config;

#define MLFLOW_EXPERIMENT_MAX 256
#define MLFLOW_DEFAULT_EXPERIMENT "Default"  // MLflow's own clients' default
#define MLFLOW_DEFAULT_FLUSH_S 10.0
#define MLFLOW_KILL_FLUSH_S 5.0  // at most, after SIGTERM (Slurm's KillWait is 30 s)

typedef struct MlflowSettings {
  char uri[MLFLOW_URL_MAX];  // "": no MLflow
  char experiment[MLFLOW_EXPERIMENT_MAX];
  const char *token;         // MLFLOW_TRACKING_TOKEN (NULL: none)
  double flush_s;            // the end's wait for the queue to drain
} MlflowSettings;

// The effective settings: the config keys track.mlflow_uri and
// track.experiment win when set, else the environment's
// MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME (as MLflow's clients read
// them), else no MLflow and experiment "Default". A config URI that is not
// http(s) is an error; an environment one is warned about and ignored (it
// may be meant for MLflow's Python client, e.g. a file: store).
int mlflow_settings_resolve(MlflowSettings *out, const char *config_uri, const char *config_experiment, double flush_s,
                            const char *env_uri, const char *env_experiment, const char *env_token, FimiError *err);

typedef struct MlflowTrackerOptions {
  MlflowSettings settings;       // settings.uri "": tracking off
  const struct Config *config;   // logged as params, written to RUN_DIR/config.ini
  const char *objective;         // tags
  const char *fimi_version, *git_commit;
  RunInput inputs[RUN_INPUTS_MAX];  // digested into RUN_DIR/inputs.json
  int num_inputs;
  int queue_capacity;            // metrics queued at most (0: 100000)
  double request_timeout_s;      // per HTTP request (0: 10 s)
  double max_backoff_s;          // retries wait 0.5 s, doubling up to this (0: 30 s)
} MlflowTrackerOptions;

typedef struct MlflowRunContext {
  const char *out_dir;     // RUN_DIR: its basename names the run
  int64_t start_step;      // 0: a fresh run; S > 0: resumed after step S
  int world;               // train ranks
  const char *model_type;  // e.g. gemma3_text (NULL: no tag)
  int64_t parameters;      // 0: no tag
} MlflowRunContext;

typedef struct MlflowTracker MlflowTracker;

// Writes RUN_DIR/config.ini, starts the thread and the SIGTERM handler.
// Never waits on the server. NULL with err when the tracker cannot start
// (out of memory, no thread): the caller warns and trains without it.
MlflowTracker *mlflow_tracker_open(const MlflowTrackerOptions *o, const MlflowRunContext *ctx, FimiError *err);

// Queues every number of a metrics.jsonl row (flattened as
// mlflow_flatten_row) at the row's step, time-stamped now. Never blocks
// on the network.
void mlflow_tracker_log_row(MlflowTracker *t, const struct cJSON *row);

// Flushes (at most settings.flush_s seconds), sets the run's status
// (FAILED when failed, else FINISHED), uploads the artifacts, stops the
// thread, restores SIGTERM's previous action and frees t (NULL: no-op).
void mlflow_tracker_close(MlflowTracker *t, int failed);

// Metrics dropped so far (queue full, or refused by the server).
int64_t mlflow_tracker_dropped(MlflowTracker *t);

// A row's numbers as (key, value) calls: nested objects and arrays under
// "a/b" and "a/0", booleans 0 or 1, strings and nulls left out, "step"
// left out, keys over MLFLOW_MAX_KEY left out. Returns how many were left
// out for their key's length.
int mlflow_flatten_row(const struct cJSON *row, void (*emit)(void *ctx, const char *key, double value), void *ctx);

#endif
