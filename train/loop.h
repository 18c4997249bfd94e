// train/loop.h: the one training loop every objective runs through
// (docs/training.md). Defines TrainLoopConfig, TrainSummary and train_run.
//
// Per step: zero the gradients; grad_accum micro-batches of micro_batch rows
// from the DatasetLoader, each through objective->train_batch with weight
// 1/grad_accum; global gradient norm and clipping (optim/clip.h); the LR of
// the step from the schedule (optim/schedule.h, 0-based step); one AdamW
// update through train/state.h. A non-finite loss or gradient norm skips the
// update (counted, warned); max_nonfinite_in_row in a row abort the run.
// Then: a line in OUT/metrics.jsonl, the console progress line, evaluation
// every eval_every steps, a checkpoint every save_every steps (and at the
// last step and at stop_at_step), keeping the last keep_last. With
// tensorboard set, every metrics.jsonl line also goes to a TensorBoard event
// file in OUT/tb/ (train/tensorboard.h); with an MLflow tracking URI, it
// is also queued for the MLflow tracker (train/mlflow_tracker.h), whose run
// ends FINISHED, or FAILED when train_run fails.
//
// World 1 only for now: no MPI. A ZeRO-3 version swaps TrainState's
// functions and all-reduces the gradient sum of squares and the metrics.
#ifndef FIMI_TRAIN_LOOP_H
#define FIMI_TRAIN_LOOP_H

#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/mlflow_tracker.h"
#include "train/objective.h"
#include "train/state.h"

struct cJSON;

typedef struct TrainLoopConfig {
  const char *out_dir;         // metrics.jsonl and step_* checkpoints
  const char *tokenizer_path;  // copied into each checkpoint ("" / NULL: none)
  const char *resume_dir;      // non-empty: continue from its newest complete checkpoint
  int64_t steps;               // total optimizer steps (the schedule's length)
  int64_t micro_batch;         // rows per micro-batch
  int64_t grad_accum;          // micro-batches per step
  double max_grad_norm;        // <= 0: no clipping (norm still reported)
  int64_t eval_every;          // 0: evaluate only at the end (when an eval set is given)
  int64_t eval_max_rows;       // 0: the whole eval set
  int64_t save_every;          // 0: save only at the last step
  int64_t keep_last;           // complete checkpoints kept (0 = all)
  size_t max_shard_bytes;      // checkpoint weights sharded above this (with an index); 0 = one file
  int64_t max_nonfinite_in_row;
  int64_t stop_at_step;        // > 0: stop after this step (saving), schedule unchanged
  uint64_t data_seed;
  int shuffle;
  uint64_t rng_seed;           // the loop's RNG (saved in checkpoints)
  LrSchedule schedule;
  uint64_t config_hash;        // stored in checkpoints, compared on resume
  int progress;                // 1: print the live progress line on stderr
  int tensorboard;             // 1: also OUT/tb/ event files (a failed write warns, training goes on)
  // mlflow.settings.uri non-empty: rank 0 also tracks the run on that MLflow
  // server (a server that is down warns, training goes on).
  MlflowTrackerOptions mlflow;
  // Optional (NULL: none): the objective's own per-step metrics (DPO's
  // rewards, ...). Called once per step after any evaluation, just before
  // the step's metrics.jsonl line is written; adds fields to `line`.
  int (*step_metrics)(void *ctx, int64_t step, struct cJSON *line, FimiError *err);
  void *step_metrics_ctx;
  // Optional: objective state that must survive a resume (DPO's step-1
  // reward baseline), kept in trainer_state.json as the JSON object
  // "objective_state" (at most CHECKPOINT_OBJECTIVE_STATE_MAX bytes printed).
  // save adds fields to `state` before each checkpoint; load gets them back
  // after a resume (only when the checkpoint has them).
  int (*objective_save)(void *ctx, struct cJSON *state, FimiError *err);
  int (*objective_load)(void *ctx, const struct cJSON *state, FimiError *err);
  void *objective_ctx;
  // Optional: called at the start of every step, before its gradients are
  // zeroed (GRPO generates the step's rollouts here from the current weights).
  int (*begin_step)(void *ctx, TrainState *s, int64_t step, FimiError *err);
  // Optional: a validation score, higher is better (GRPO: mean reward on the
  // validation tasks), at the eval cadence (every eval_every steps and at the
  // last step). It takes the place of the eval loss for the best checkpoint:
  // trainer_state.json's best_eval is then the highest score, the step that
  // reached it is saved (also between save_every steps), kept whatever
  // keep_last says, and linked as OUT/best. The score is logged as
  // "validation" in metrics.jsonl; a fresh run (not a resume) also scores
  // the initial weights, logged as "validation_start" on step 1's line.
  int (*validate)(void *ctx, TrainState *s, int64_t step, double *score, FimiError *err);
  // Optional: a short note for the progress line after each step (GRPO:
  // the step's reward), written into buf (size bytes, NUL-terminated).
  void (*progress_note)(void *ctx, char *buf, size_t size);
  void *hooks_ctx;  // for begin_step, validate and progress_note
} TrainLoopConfig;

// Defaults: steps 100, micro_batch 4, grad_accum 1, max_grad_norm 1,
// eval/save only at the end, keep_last 2, weights sharded above 5 GB (as
// fimi init), 5 non-finite steps in a row,
// shuffle with seed 42, constant LR 1e-5.
void train_loop_config_default(TrainLoopConfig *c);

typedef struct TrainSummary {
  int64_t start_step;     // 0, or the step resumed from
  int64_t end_step;       // last step completed
  int64_t skipped;
  double first_loss, last_loss;  // of this invocation's first and last steps
  double eval_loss;       // last evaluation (NAN: none)
  double tokens_per_s;    // this invocation's tokens / its training seconds
  int64_t tokens;
  double seconds;
} TrainSummary;

int train_run(const TrainLoopConfig *c, TrainState *state, const TrainObjective *obj, const Dataset *train,
              const Dataset *eval, TrainSummary *summary, FimiError *err);

#endif
