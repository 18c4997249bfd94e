// train/loop.c: the training loop: see loop.h.
#include "train/loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/rng.h"
#include "kernels/cpu/blas.h"
#include "optim/clip.h"
#include "train/tensorboard.h"

#define METRICS_MAX_BYTES ((size_t)1 << 30)

void train_loop_config_default(TrainLoopConfig *c) {
  memset(c, 0, sizeof *c);
  c->out_dir = "run";
  c->steps = 100;
  c->micro_batch = 4;
  c->grad_accum = 1;
  c->max_grad_norm = 1.0;
  c->keep_last = 2;
  c->max_shard_bytes = (size_t)5000 * 1000 * 1000;
  c->max_nonfinite_in_row = 5;
  c->data_seed = 42;
  c->shuffle = 1;
  c->rng_seed = 42;
  lr_schedule_default(&c->schedule);
}

static int validate_config(const TrainLoopConfig *c, const TrainObjective *obj, const Dataset *eval,
                           FimiError *err) {
  if (!c->out_dir || !c->out_dir[0]) return fimi_fail(err, "train.out_dir must be set");
  if (c->steps < 1) return fimi_fail(err, "train.steps must be >= 1 (got %lld)", (long long)c->steps);
  if (c->micro_batch < 1 || c->micro_batch > 65536)
    return fimi_fail(err, "train.micro_batch must be in [1, 65536] (got %lld)", (long long)c->micro_batch);
  if (c->grad_accum < 1 || c->grad_accum > 65536)
    return fimi_fail(err, "train.grad_accum must be in [1, 65536] (got %lld)", (long long)c->grad_accum);
  if (c->eval_every < 0 || c->save_every < 0 || c->keep_last < 0 || c->eval_max_rows < 0 || c->stop_at_step < 0)
    return fimi_fail(err, "train.eval_every, save_every, keep_last, eval_max_rows and stop_at_step must be >= 0");
  if (c->max_nonfinite_in_row < 1) return fimi_fail(err, "train.max_nonfinite_in_row must be >= 1");
  if (isnan(c->max_grad_norm)) return fimi_fail(err, "train.max_grad_norm is NaN");
  if (!obj->train_batch || (eval && !obj->eval_batch))
    return fimi_fail(err, "objective %s lacks a train or eval callback", obj->name ? obj->name : "?");
  return lr_schedule_validate(&c->schedule, err);
}

// ---- metrics.jsonl ---------------------------------------------------------------

// After a resume from step S: keep the lines of steps <= S, drop the rest
// (steps after the checkpoint that a killed run logged), so the file reads
// as one uninterrupted run.
static int truncate_metrics(const char *path, int64_t step, FimiError *err) {
  size_t size = 0;
  FILE *probe = fopen(path, "rb");
  if (!probe) return 0;
  fclose(probe);
  char *text = file_read_all(path, METRICS_MAX_BYTES, &size, err);
  if (!text) return -1;
  char *out = malloc(size + 1);
  if (!out) {
    free(text);
    return fimi_fail(err, "out of memory reading %s", path);
  }
  size_t kept = 0;
  for (char *line = text; line < text + size;) {
    char *end = memchr(line, '\n', (size_t)(text + size - line));
    size_t len = end ? (size_t)(end - line) : (size_t)(text + size - line);
    cJSON *obj = cJSON_ParseWithLength(line, len);
    const cJSON *s = obj ? cJSON_GetObjectItemCaseSensitive(obj, "step") : NULL;
    if (cJSON_IsNumber(s) && s->valuedouble <= (double)step) {
      memcpy(out + kept, line, len);
      kept += len;
      out[kept++] = '\n';
    }
    cJSON_Delete(obj);
    line += len + 1;
  }
  int rc = file_write_atomic(path, out, kept, err);
  free(out);
  free(text);
  return rc;
}

typedef struct StepRecord {
  int64_t step;
  double loss, lr, grad_norm, tokens_per_s, elapsed, eval_loss, validation, validation_start;
  int64_t tokens, loss_tokens, skipped;
  int step_skipped, clipped;
} StepRecord;

// Step 1's line carries what produced the run's CPU numbers: the BLAS, its
// kernel set, who chose it and its threads (kernels/cpu/blas.h).
static int add_run_header(cJSON *line) {
  BlasInfo b;
  blas_info(&b);
  cJSON *run = cJSON_AddObjectToObject(line, "run");
  if (!run || !cJSON_AddStringToObject(run, "blas", b.library) ||
      !cJSON_AddStringToObject(run, "blas_kernels", b.kernels) ||
      !cJSON_AddStringToObject(run, "blas_detected", b.detected) ||
      !cJSON_AddStringToObject(run, "blas_chosen_by", b.chosen_by) ||
      !cJSON_AddNumberToObject(run, "blas_threads", b.threads))
    return -1;
  return 0;
}

// Every metrics.jsonl row also goes to the TensorBoard event file when one
// is open. Its failure costs only the event file: warned once (the writer
// closes itself), training and metrics.jsonl go on.
// The MLflow tracker only queues it (its thread sends it).
static void track_row(TbWriter *tb, MlflowTracker *mlflow, const cJSON *row) {
  FimiError err = {0};
  if (tb_writer_write_row(tb, row, &err) != 0)
    log_warn("TensorBoard events stop here (%s); training goes on, metrics.jsonl stays complete", err.message);
  mlflow_tracker_log_row(mlflow, row);
}

static int write_metrics(FILE *f, TbWriter *tb, MlflowTracker *mlflow, const TrainLoopConfig *c, const StepRecord *r,
                         FimiError *err) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return fimi_fail(err, "out of memory writing metrics");
  cJSON_AddNumberToObject(o, "step", (double)r->step);
  cJSON_AddNumberToObject(o, "loss", r->loss);  // cJSON writes NaN/inf as null
  cJSON_AddNumberToObject(o, "lr", r->lr);
  cJSON_AddNumberToObject(o, "grad_norm", r->grad_norm);
  cJSON_AddNumberToObject(o, "tokens", (double)r->tokens);
  cJSON_AddNumberToObject(o, "loss_tokens", (double)r->loss_tokens);
  cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
  cJSON_AddNumberToObject(o, "elapsed", r->elapsed);
  cJSON_AddNumberToObject(o, "skipped", (double)r->skipped);
  cJSON_AddBoolToObject(o, "step_skipped", r->step_skipped);
  cJSON_AddBoolToObject(o, "clipped", r->clipped);
  if (!isnan(r->eval_loss)) cJSON_AddNumberToObject(o, "eval_loss", r->eval_loss);
  if (!isnan(r->validation)) cJSON_AddNumberToObject(o, "validation", r->validation);
  if (!isnan(r->validation_start)) cJSON_AddNumberToObject(o, "validation_start", r->validation_start);
  if (r->step == 1 && add_run_header(o) != 0) {
    cJSON_Delete(o);
    return fimi_fail(err, "out of memory writing metrics");
  }
  if (c->step_metrics && c->step_metrics(c->step_metrics_ctx, r->step, o, err) != 0) {
    cJSON_Delete(o);
    return -1;
  }
  char *text = cJSON_PrintUnformatted(o);
  int bad = !text || fprintf(f, "%s\n", text) < 0 || fflush(f) != 0;
  if (!bad) track_row(tb, mlflow, o);
  cJSON_Delete(o);
  free(text);
  if (!text) return fimi_fail(err, "out of memory writing metrics");
  return bad ? fimi_fail(err, "cannot write metrics.jsonl") : 0;
}

// RUN_DIR/tb/: a new event file for this invocation, whose rows start at
// first_step. Like a failed write, a failed open warns and training goes on.
static void open_tensorboard(TbWriter *tb, const char *out_dir, int64_t first_step) {
  FimiError err = {0};
  char dir[TB_PATH_MAX];
  if (path_join(dir, sizeof dir, out_dir, "tb", &err) == 0 && tb_writer_open(tb, dir, first_step, &err) == 0) return;
  log_warn("no TensorBoard events (%s); training goes on, metrics.jsonl stays complete", err.message);
}

static void close_tensorboard(TbWriter *tb) {
  FimiError err = {0};
  if (tb_writer_close(tb, &err) != 0) log_warn("TensorBoard events: %s", err.message);
}

// The MLflow run of this invocation (rank 0). A tracker that cannot start
// warns and training goes on without it.
static MlflowTracker *open_mlflow(const TrainLoopConfig *c, const TrainState *s, int64_t start_step) {
  static const char *types[] = {[GEMMA_FAMILY_GEMMA2] = "gemma2", [GEMMA_FAMILY_GEMMA3] = "gemma3_text",
                                [GEMMA_FAMILY_GEMMA4] = "gemma4_text"};
  const GemmaConfig *cfg = &s->model->config;
  MlflowRunContext ctx = {c->out_dir, start_step, s->world > 0 ? s->world : 1,
                          cfg->family >= GEMMA_FAMILY_GEMMA2 && cfg->family <= GEMMA_FAMILY_GEMMA4 ? types[cfg->family]
                                                                                                   : NULL,
                          gemma_config_param_count(cfg)};
  FimiError err = {0};
  MlflowTracker *t = mlflow_tracker_open(&c->mlflow, &ctx, &err);
  if (!t) log_warn("no MLflow tracking (%s); training goes on, metrics.jsonl stays complete", err.message);
  return t;
}

// ---- evaluation -------------------------------------------------------------------

// Mean loss over the first eval_max_rows rows (all when 0) of the eval set,
// in order, micro_batch rows at a time; NAN when no row has a loss token.
static int evaluate(const TrainLoopConfig *c, TrainState *s, const TrainObjective *obj, const Dataset *eval,
                    double *loss, FimiError *err) {
  int64_t rows = eval->rows;
  if (c->eval_max_rows > 0 && c->eval_max_rows < rows) rows = c->eval_max_rows;
  int64_t *idx = fimi_malloc((size_t)c->micro_batch * sizeof *idx, err);
  if (!idx) return -1;
  double sum = 0, count = 0;
  int rc = 0;
  for (int64_t start = 0; rc == 0 && start < rows; start += c->micro_batch) {
    int64_t n = rows - start < c->micro_batch ? rows - start : c->micro_batch;
    for (int64_t i = 0; i < n; i++) idx[i] = start + i;
    rc = obj->eval_batch(obj->ctx, s->model, eval, idx, n, &sum, &count, err);
  }
  free(idx);
  *loss = count > 0 ? sum / count : NAN;
  return rc;
}

// ---- one step ---------------------------------------------------------------------

static int accumulate(const TrainLoopConfig *c, TrainState *s, const TrainObjective *obj, const Dataset *train,
                      DatasetLoader *loader, int64_t *idx, StepRecord *r, FimiError *err) {
  double weight = 1.0 / (double)c->grad_accum;
  r->loss = 0;
  for (int64_t a = 0; a < c->grad_accum; a++) {
    int64_t count = 0;
    if (dataset_loader_next(loader, c->micro_batch, idx, &count, NULL, err) != 0) return -1;
    TrainBatchResult res;
    if (obj->train_batch(obj->ctx, s->model, train, idx, count, weight, &res, err) != 0)
      return fimi_fail_wrap(err, "step %lld, micro-batch %lld", (long long)r->step, (long long)a);
    r->loss += res.loss * weight;
    r->tokens += res.tokens;
    r->loss_tokens += res.loss_tokens;
  }
  return 0;
}

// Updates the parameters unless the loss or gradient is not finite; then
// counts the skip and fails after max_nonfinite_in_row skips in a row.
static int apply_update(const TrainLoopConfig *c, TrainState *s, TrainerState *ts, StepRecord *r, FimiError *err) {
  ClipResult clip;
  r->lr = lr_schedule_lr(&c->schedule, (long)(r->step - 1));
  if (train_state_clip_step(s, r->lr, c->max_grad_norm, isfinite(r->loss), &clip, err) != 0) return -1;
  r->grad_norm = clip.norm;
  r->clipped = clip.clipped;
  if (isfinite(r->loss) && clip.finite) {
    ts->nonfinite_in_row = 0;
    return 0;
  }
  r->step_skipped = 1;
  ts->skipped++;
  ts->nonfinite_in_row++;
  log_warn("step %lld: non-finite %s (loss %g, grad norm %g): update skipped (%lld in a row, %lld in all)",
           (long long)r->step, isfinite(r->loss) ? "gradient" : "loss", r->loss, clip.norm,
           (long long)ts->nonfinite_in_row, (long long)ts->skipped);
  if (ts->nonfinite_in_row >= c->max_nonfinite_in_row)
    return fimi_fail(err,
                     "step %lld: %lld steps in a row had a non-finite loss or gradient (train.max_nonfinite_in_row "
                     "= %lld): the run diverged; lower optim.lr or check the data",
                     (long long)r->step, (long long)ts->nonfinite_in_row, (long long)c->max_nonfinite_in_row);
  return 0;
}

// ---- the run ----------------------------------------------------------------------

// Every rank learns whether all succeeded; a rank that did not fail itself
// reports the other's failure.
static int agree(TrainState *s, int rc, const char *what, FimiError *err) {
  if (s->ops->all_ok(s->ops_ctx, rc == 0)) return 0;
  return rc != 0 ? -1 : fimi_fail(err, "%s: another rank failed (its message is in its log)", what);
}

// Replicated: the model and its optimizer. Sharded: every rank reads the
// full weights and its own optimizer shard, then sets its shards.
static int agree_if_sharded(TrainState *s, int rc, const char *what, FimiError *err) {
  return s->ops ? agree(s, rc, what, err) : rc;
}

static int load_checkpoint(TrainState *s, const char *path, TrainerState *ts, FimiError *err) {
  if (!s->ops) return checkpoint_load(path, s->model, &s->opt, ts, err);
  int rc = checkpoint_load_shard(path, s->model, s->ops->optimizer(s->ops_ctx), ts, s->rank, s->world, err);
  if (agree(s, rc, path, err) != 0) return -1;
  return agree(s, s->ops->load(s->ops_ctx, s->model, err), path, err);
}

static int start_or_resume(const TrainLoopConfig *c, TrainState *s, TrainerState *ts, Rng *rng, FimiError *err) {
  memset(ts, 0, sizeof *ts);
  ts->best_eval = NAN;
  ts->data_seed = c->data_seed;
  ts->config_hash = c->config_hash;
  rng_seed(rng, c->rng_seed);
  char path[CHECKPOINT_PATH_MAX];
  int64_t step = 0;
  const char *dir = c->resume_dir && c->resume_dir[0] ? c->resume_dir : c->out_dir;
  int found = s->rank == 0 && checkpoint_clean_temp(dir, err) < 0 ? -1 : 0;
  if (found == 0) found = checkpoint_find_latest(dir, path, sizeof path, &step, err);
  // Sharded: every rank must take the same branch below (all see one out_dir).
  if (s->ops && agree(s, found < 0 ? -1 : 0, dir, err) != 0) return -1;
  if (found < 0) return -1;
  if (!(c->resume_dir && c->resume_dir[0])) {
    if (found)
      return fimi_fail(err, "%s already holds checkpoints (%s): resume with --resume %s or pick another train.out_dir",
                       c->out_dir, path, c->out_dir);
    return 0;
  }
  if (!found) return fimi_fail(err, "--resume %s: no complete checkpoint (step_* with DONE) there", dir);
  if (load_checkpoint(s, path, ts, err) != 0) return fimi_fail_wrap(err, "resuming");
  if (ts->data_seed != c->data_seed)
    return fimi_fail(err, "%s: data seed %llu differs from train.seed %llu: the data order would change", path,
                     (unsigned long long)ts->data_seed, (unsigned long long)c->data_seed);
  if (ts->config_hash != c->config_hash)
    log_warn("%s was written with a different training config: continuing with the new one", path);
  ts->config_hash = c->config_hash;
  memcpy(rng->state, ts->rng, sizeof rng->state);
  if (c->objective_load && ts->objective_state[0]) {
    cJSON *state = cJSON_Parse(ts->objective_state);
    int rc = state ? c->objective_load(c->objective_ctx, state, err) : fimi_fail(err, "bad objective_state");
    cJSON_Delete(state);
    if (rc != 0) return fimi_fail_wrap(err, "%s: objective_state", path);
  }
  log_info("resuming from %s (step %lld)", path, (long long)ts->step);
  return 0;
}

// Sharded: every rank gathers the weights (collective); rank 0 writes the
// model and the trainer state, every rank its optimizer shard (checkpoint.h).
static int save_sharded(const TrainLoopConfig *c, TrainState *s, const TrainerState *ts, FimiError *err) {
  char tmp[CHECKPOINT_PATH_MAX], what[64];
  snprintf(what, sizeof what, "checkpoint step %lld", (long long)ts->step);
  int rc = train_state_sync_model(s, err);
  if (rc == 0) rc = s->rank == 0 ? checkpoint_begin_save(c->out_dir, ts->step, tmp, sizeof tmp, err)
                                 : checkpoint_temp_dir(c->out_dir, ts->step, tmp, sizeof tmp, err);
  if (rc == 0 && s->rank == 0) rc = checkpoint_write_model(tmp, s->model, c->tokenizer_path, c->max_shard_bytes, err);
  if (agree(s, rc, what, err) != 0) return -1;
  rc = checkpoint_write_optimizer_shard(tmp, s->ops->optimizer(s->ops_ctx), s->rank, s->world, err);
  if (agree(s, rc, what, err) != 0) return -1;
  if (s->rank == 0) rc = checkpoint_finish_save(c->out_dir, tmp, ts, (int)c->keep_last, err);
  return agree(s, rc, what, err);
}

// The objective's state into ts->objective_state (JSON text).
static int save_objective_state(const TrainLoopConfig *c, TrainerState *ts, FimiError *err) {
  ts->objective_state[0] = 0;
  if (!c->objective_save) return 0;
  cJSON *state = cJSON_CreateObject();
  int rc = state ? c->objective_save(c->objective_ctx, state, err) : fimi_fail(err, "out of memory");
  char *text = rc == 0 ? cJSON_PrintUnformatted(state) : NULL;
  if (rc == 0 && (!text || strlen(text) >= sizeof ts->objective_state))
    rc = fimi_fail(err, "the objective's checkpoint state exceeds %d bytes", CHECKPOINT_OBJECTIVE_STATE_MAX - 1);
  if (rc == 0) strcpy(ts->objective_state, text);
  free(text);
  cJSON_Delete(state);
  return rc;
}

static int save(const TrainLoopConfig *c, TrainState *s, TrainerState *ts, const Rng *rng, double elapsed,
                FimiError *err) {
  memcpy(ts->rng, rng->state, sizeof ts->rng);
  ts->elapsed = elapsed;
  if (save_objective_state(c, ts, err) != 0) return -1;
  if (s->ops) return save_sharded(c, s, ts, err);
  return checkpoint_save(c->out_dir, s->model, &s->opt, ts, c->tokenizer_path, (int)c->keep_last, c->max_shard_bytes,
                         err);
}

int train_run(const TrainLoopConfig *c, TrainState *s, const TrainObjective *obj, const Dataset *train,
              const Dataset *eval, TrainSummary *summary, FimiError *err) {
  memset(summary, 0, sizeof *summary);
  summary->eval_loss = NAN;
  if (validate_config(c, obj, eval, err) != 0) return -1;
  if (dir_create(c->out_dir, err) != 0) return -1;
  TrainerState ts;
  Rng rng;
  if (start_or_resume(c, s, &ts, &rng, err) != 0) return -1;
  DatasetLoader loader;
  if (dataset_loader_init(&loader, train->rows, c->data_seed, 0, 1, c->shuffle, err) != 0) return -1;
  char metrics_path[CHECKPOINT_PATH_MAX];
  int64_t *idx = fimi_malloc((size_t)c->micro_batch * sizeof *idx, err);
  int rc = idx ? 0 : -1;
  if (rc == 0 && ts.step > 0) rc = dataset_loader_seek(&loader, ts.cursor, err);
  if (rc == 0) rc = path_join(metrics_path, sizeof metrics_path, c->out_dir, "metrics.jsonl", err);
  // Only rank 0 owns metrics.jsonl (other ranks would race on its rewrite).
  if (rc == 0 && ts.step > 0 && s->rank == 0) rc = truncate_metrics(metrics_path, ts.step, err);
  FILE *metrics = NULL;
  if (rc == 0 && s->rank == 0 && !(metrics = fopen(metrics_path, ts.step > 0 ? "ab" : "wb")))
    rc = fimi_fail(err, "cannot open %s for writing", metrics_path);
  TbWriter tb = {0};
  if (rc == 0 && metrics && c->tensorboard) open_tensorboard(&tb, c->out_dir, ts.step + 1);
  MlflowTracker *mlflow = rc == 0 && metrics && c->mlflow.settings.uri[0] ? open_mlflow(c, s, ts.step) : NULL;
  summary->start_step = summary->end_step = ts.step;
  // A fresh run with a validation hook scores the initial weights first: the
  // baseline, logged as "validation_start" on step 1's line.
  double validation_start = NAN;
  if (rc == 0 && c->validate && ts.step == 0)
    rc = agree_if_sharded(s, c->validate(c->hooks_ctx, s, 0, &validation_start, err), "validation", err);
  double t0 = monotonic_seconds(), elapsed0 = ts.elapsed;
  Progress progress;
  // The progress line counts this invocation's steps, so its rate and ETA
  // are right after a resume too; the label names the resumed step.
  char label[64] = "train";
  if (ts.step > 0) snprintf(label, sizeof label, "train (resumed at step %lld)", (long long)ts.step);
  if (c->progress) progress_start(&progress, label, c->steps - ts.step, stderr);
  for (int64_t step = ts.step + 1; rc == 0 && step <= c->steps; step++) {
    double step_t0 = monotonic_seconds();
    StepRecord r = {.step = step, .eval_loss = NAN, .validation = NAN, .validation_start = validation_start};
    validation_start = NAN;
    if (c->begin_step && (rc = agree_if_sharded(s, c->begin_step(c->hooks_ctx, s, step, err), "begin_step", err)) != 0)
      break;
    train_state_zero_grad(s);
    rc = accumulate(c, s, obj, train, &loader, idx, &r, err);
    if (rc == 0) rc = apply_update(c, s, &ts, &r, err);
    if (rc != 0) break;
    ts.step = step;
    ts.cursor = loader.cursor;
    ts.tokens_seen += r.tokens;
    double now = monotonic_seconds();
    r.tokens_per_s = r.tokens / (now - step_t0 > 1e-9 ? now - step_t0 : 1e-9);
    r.elapsed = elapsed0 + (now - t0);
    r.skipped = ts.skipped;
    // Evaluation does not run at stop_at_step, so a stopped and resumed run
    // logs exactly what an uninterrupted one does.
    if (eval && ((c->eval_every > 0 && step % c->eval_every == 0) || step == c->steps)) {
      if ((rc = evaluate(c, s, obj, eval, &r.eval_loss, err)) != 0) break;
      summary->eval_loss = r.eval_loss;
      if (isfinite(r.eval_loss) && !(r.eval_loss >= ts.best_eval)) {
        ts.best_eval = r.eval_loss;
        ts.best_eval_step = step;
      }
    }
    int new_best = 0;
    if (c->validate && ((c->eval_every > 0 && step % c->eval_every == 0) || step == c->steps)) {
      rc = agree_if_sharded(s, c->validate(c->hooks_ctx, s, step, &r.validation, err), "validation", err);
      if (rc != 0) break;
      if (isfinite(r.validation) && !(r.validation <= ts.best_eval)) {
        ts.best_eval = r.validation;
        ts.best_eval_step = step;
        new_best = 1;
      }
    }
    if (metrics && (rc = write_metrics(metrics, &tb, mlflow, c, &r, err)) != 0) break;
    if (summary->end_step == summary->start_step) summary->first_loss = r.loss;
    summary->last_loss = r.loss;
    summary->end_step = step;
    summary->tokens += r.tokens;
    if (c->progress) {
      char extra[256], note[96] = "";
      if (c->progress_note) c->progress_note(c->hooks_ctx, note, sizeof note);
      snprintf(extra, sizeof extra, "loss %.4f | lr %.3g | gnorm %.3g%s%s%s", r.loss, r.lr, r.grad_norm,
               isnan(r.eval_loss) ? "" : " | eval", note[0] ? " | " : "", note);
      progress_update(&progress, step - summary->start_step, (double)summary->tokens, "tok", extra);
    }
    if (new_best || (c->save_every > 0 && step % c->save_every == 0) || step == c->steps || step == c->stop_at_step)
      rc = save(c, s, &ts, &rng, elapsed0 + (monotonic_seconds() - t0), err);
    if (rc == 0 && new_best && s->rank == 0) rc = checkpoint_link_best(c->out_dir, step, err);
    if (c->validate && s->ops) rc = agree(s, rc, "best checkpoint", err);
    if (step == c->stop_at_step) break;
  }
  if (c->progress) progress_finish(&progress);
  summary->seconds = monotonic_seconds() - t0;
  summary->tokens_per_s = summary->seconds > 0 ? summary->tokens / summary->seconds : 0;
  summary->skipped = ts.skipped;
  if (metrics) fclose(metrics);
  close_tensorboard(&tb);
  mlflow_tracker_close(mlflow, rc != 0);  // after metrics.jsonl is closed: it is an artifact
  free(idx);
  dataset_loader_free(&loader);
  return rc;
}
