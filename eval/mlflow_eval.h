// eval/mlflow_eval.h: evaluations logged as MLflow runs, and read back
// for the ladder (docs/tracking.md, "Evaluations"). Defines
// EvalTrainingLink, EvalMlflowOptions, EvalMlflowRun, eval_mlflow_settings,
// eval_mlflow_training_link, eval_mlflow_summary_metrics,
// eval_mlflow_params, eval_mlflow_start, eval_mlflow_finish and
// eval_mlflow_fetch_results.
//
// Unlike training's tracker (train/mlflow_tracker.h) this is synchronous:
// one run per `fimi eval` or `fimi eval bench`, created before the episodes
// are played, its params, metrics and artifacts sent once the command has
// written its files. A server that cannot be reached or refuses costs one
// warning: the evaluation, its files and its exit code are the same as
// without MLflow.
#ifndef FIMI_EVAL_MLFLOW_EVAL_H
#define FIMI_EVAL_MLFLOW_EVAL_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/config.h"
#include "core/error.h"
#include "eval/results.h"
#include "net/mlflow.h"
#include "train/mlflow_tracker.h"

#define EVAL_MLFLOW_KIND_EVAL "eval"
#define EVAL_MLFLOW_KIND_BENCH "eval_bench"

// What RUN_DIR/mlflow_run.json of a tracked training run says, for a model
// directory that is one of its checkpoints (RUN_DIR/step_000180).
typedef struct EvalTrainingLink {
  char tracking_uri[MLFLOW_URL_MAX];
  char experiment_name[MLFLOW_EXPERIMENT_MAX];
  char run_id[MLFLOW_ID_MAX];
  int64_t step;  // the checkpoint's step (step_N), -1 for another directory name
} EvalTrainingLink;

// The settings of an evaluation: flag_uri and flag_experiment (the
// command's --mlflow-uri and --experiment; NULL or "": not given) win over
// the config's track.mlflow_uri and track.experiment (config may be NULL),
// which win over MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME, as
// mlflow_settings_resolve does for training. *experiment_named is 1 when
// one of them named the experiment (else it is "Default", or the training
// run's experiment: eval_mlflow_start).
int eval_mlflow_settings(MlflowSettings *out, int *experiment_named, const char *flag_uri, const char *flag_experiment,
                         const Config *config, FimiError *err);

// 0 and *out when model_dir's parent holds mlflow_run.json; 1 when it
// holds none; -1 with err when the file is there but unreadable.
int eval_mlflow_training_link(const char *model_dir, EvalTrainingLink *out, FimiError *err);

// The metrics of a result file of fimi eval ("fimi-eval-results") or of
// fimi eval bench ("fimi-eval-bench"), parsed: every number of its
// "summary" flattened as training's metrics are (mlflow_flatten_row:
// "overall/reward", "kind/happy/strict", "band/always_fail",
// "categories/accounts/pass_hat_n", ...), except an eval's per-family
// slices (in the artifact); an eval's pass_k list is keyed by k
// ("pass_k/2/pass_hat_k"). Plus "seconds". -1 for another format.
int eval_mlflow_summary_metrics(const cJSON *root, void (*emit)(void *ctx, const char *key, double value), void *ctx);

// Its params: every top-level string and number of the file but format,
// version and timings (label, model, tasks_file, trials, seed,
// temperature, ...), numbers printed as %.17g trimmed ("0.7", "2").
// Returns how many were emitted.
int eval_mlflow_params(const cJSON *root, void (*emit)(void *ctx, const char *key, const char *value), void *ctx);

typedef struct EvalMlflowOptions {
  MlflowSettings settings;  // settings.uri "": no MLflow
  int experiment_named;     // eval_mlflow_settings'
  const char *kind;         // EVAL_MLFLOW_KIND_*: tag fimi.kind
  const char *command;      // "fimi eval": tag mlflow.source.name
  const char *run_name;     // the evaluation's label
  const char *model;        // --model DIR, or NULL
  const char *agent;        // --agent NAME, or NULL
  const char *results;      // the result file (--out): its name is the artifact of tag fimi.results
  const char *fimi_version, *git_commit;
  double timeout_s;         // per request (0: 10 s)
} EvalMlflowOptions;

typedef struct EvalMlflowRun EvalMlflowRun;

// Creates the run (RUNNING, with its tags) in the experiment, created when
// missing; when no experiment was named and the model is a checkpoint of a
// training run tracked on the same server, the training run's experiment.
// NULL when settings.uri is "" or, with one warning, when the server
// cannot be reached or refuses.
EvalMlflowRun *eval_mlflow_start(const EvalMlflowOptions *o);

// failed == 0: the params and metrics of the result file out_path, the
// files of artifacts (NULL-terminated; out_path among them), status
// FINISHED; failed: status FAILED. Failures are warnings. Frees run (NULL:
// no-op).
void eval_mlflow_finish(EvalMlflowRun *run, const char *out_path, const char *const *artifacts, int failed);

// The ladder's input: every FINISHED run of kind "eval" in the experiment,
// oldest first, its result file (the artifact of tag fimi.results) read
// back. A run whose file is missing or broken is skipped with a warning;
// none left is an error. *runs is malloc'd (eval_results_free each).
int eval_mlflow_fetch_results(const MlflowSettings *s, const char *experiment, EvalResults **runs, int *count,
                              FimiError *err);

#endif
