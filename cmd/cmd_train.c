// cmd/cmd_train.c: `fimi train`: reads the [train] [optim] [data] [model]
// config, loads the initial model and the HDF5 datasets, builds the
// objective (SFT, or DPO with its [dpo] section and reference pass) and runs
// train/loop.h, optionally resuming from the newest complete checkpoint of a
// run directory (docs/training.md, docs/dpo.md). --dry-run validates the
// config and prints the plan without loading the model or data.
// Under mpirun with more than one rank (or with dist.zero3 = true) training
// runs sharded: a ZeRO-3 TrainState (parallel/zero3.h) and an objective whose
// units are dist.unit_size rows (SFT) or pairs (DPO) (docs/training.md,
// "Across ranks").
// --device cuda trains on one GPU (cmd/train_cuda.h; docs/training.md, "On
// one GPU"), or under mpirun on one GPU per train rank with the same
// sharded objectives over parallel/zero3_cuda.h (docs/distributed.md).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd/cli.h"
#include "cmd/train_cuda.h"
#include "cmd/train_grpo.h"
#include "core/fileio.h"
#include "core/log.h"
#include "parallel/comm.h"
#include "parallel/roles.h"
#include "parallel/zero3.h"
#include "dpo/objective.h"
#include "dpo/reference.h"
#include "kernels/device.h"
#include "model/weights.h"
#include "train/loop.h"
#include "train/sft.h"
#include "train/state.h"

static void print_train_help(void) {
  printf(
      "usage: fimi train --config FILE.ini [--set section.key=value ...] [--resume RUN_DIR] [--dry-run [--unit-tokens N]]\n"
      "  trains the model in train.init with train.objective: sft or dpo on data.train, grpo on the\n"
      "  simulated bank's tasks (env.tasks); writes\n"
      "  RUN_DIR/metrics.jsonl and RUN_DIR/step_NNNNNN/ checkpoints (RUN_DIR = train.out_dir).\n"
      "  --resume RUN_DIR continues bit-identically from RUN_DIR's newest complete checkpoint\n"
      "  (and writes there). dpo with dpo.reference = precomputed first adds the initial model's\n"
      "  ref_logp_chosen/ref_logp_rejected to the datasets when they lack them.\n"
      "  --dry-run validates the config, prints the plan and the ZeRO-3 memory per rank at a few world\n"
      "  sizes (from train.init's config.json; --unit-tokens N sets the tokens per row) and exits.\n"
      "  --device cuda trains on GPU 0 (bf16 weights, fp32 master weights and AdamW state on the GPU;\n"
      "  checkpoints are the CPU's format); under mpirun (or with dist.zero3) it runs ZeRO-3\n"
      "  with one GPU per train rank (dist.device_collectives: nccl, mpi or auto).\n"
      "  Keys and defaults: docs/training.md, docs/dpo.md.\n");
}

// Keys that do not change the trajectory stay out of the config hash, so
// changing them on resume raises no warning.
static int hashed_key(const ConfigField *f) {
  static const char *skip[] = {"out_dir", "stop_at_step", "progress", "eval_every", "eval_max_rows",
                               "save_every", "keep_last", "max_nonfinite_in_row", "max_shard_mb"};
  if (strcmp(f->section, "model") && strcmp(f->section, "data") && strcmp(f->section, "optim") &&
      strcmp(f->section, "train") && strcmp(f->section, "dpo") && strcmp(f->section, "grpo") &&
      strcmp(f->section, "env") && strcmp(f->section, "rollout"))
    return 0;
  // Validation and rollout scheduling never change the trajectory.
  if (!strcmp(f->section, "env") && !strcmp(f->key, "val_tasks")) return 0;
  if (!strcmp(f->section, "grpo") && (!strncmp(f->key, "val_", 4) || !strcmp(f->key, "log_rollouts"))) return 0;
  if (!strcmp(f->section, "rollout") && (!strcmp(f->key, "slots") || !strcmp(f->key, "share_prefix"))) return 0;
  if (!strcmp(f->section, "train"))
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
      if (!strcmp(f->key, skip[i])) return 0;
  return 1;
}

static uint64_t config_hash(const Config *config) {
  uint64_t h = 0;
  for (int i = 0; i < config->count; i++) {
    if (!hashed_key(config->fields[i])) continue;
    char line[CONFIG_VALUE_MAX + 128];
    snprintf(line, sizeof line, "%s.%s=%s;", config->fields[i]->section, config->fields[i]->key, config->values[i]);
    h = h * 31 + checkpoint_hash_text(line);
  }
  return h;
}

typedef struct TrainSetup {
  TrainLoopConfig loop;
  AdamWConfig adamw;
  AdamWDecayRules rules;
  const char *init_dir, *train_path, *eval_path, *objective;
  char tokenizer_path[CHECKPOINT_PATH_MAX];
  int recompute;
  const char *cuda_attention;  // cuda.attention: "fimi" or "cudnn"
  int zero3;  // dist.zero3
  int64_t unit_size;  // dist.unit_size: rows (sft) or pairs (dpo) per ZeRO-3 call
  const char *device_collectives;  // dist.device_collectives: auto, nccl or mpi
  Device device;  // --device
  DpoConfig dpo;
  DpoMonitorConfig monitor;
  DpoReferenceKind reference;
  int is_grpo;
  GrpoSetup grpo;
  // Under mpirun: this rank's roles and the world (GRPO's env ranks).
  const DistRoles *roles;
  Communicator *world;
} TrainSetup;

// The [dpo] section (read and validated whatever the objective, so that a
// typo fails early).
static int read_dpo(const Config *c, TrainSetup *t, FimiError *err) {
  dpo_config_default(&t->dpo);
  dpo_monitor_config_default(&t->monitor);
  const char *loss, *reference;
  int64_t window = 0;
  if (!(loss = config_get_string(c, "dpo", "loss", err)) || !(reference = config_get_string(c, "dpo", "reference", err)) ||
      config_get_float(c, "dpo", "beta", &t->dpo.beta, err) ||
      config_get_float(c, "dpo", "rpo_alpha", &t->dpo.rpo_alpha, err) ||
      config_get_float(c, "dpo", "monitor_margin", &t->monitor.threshold, err) ||
      config_get_int(c, "dpo", "monitor_window", &window, err))
    return -1;
  if (dpo_loss_type_parse(loss, &t->dpo.loss_type, err) != 0) return fimi_fail_wrap(err, "dpo.loss");
  if (dpo_reference_kind_parse(reference, &t->reference, err) != 0) return -1;
  if (window < 1 || window > 1000000) return fimi_fail(err, "dpo.monitor_window must be in [1, 1000000]");
  t->monitor.window = (int)window;
  if (dpo_config_validate(&t->dpo, err) != 0) return fimi_fail_wrap(err, "dpo");
  return dpo_monitor_config_validate(&t->monitor, err) != 0 ? fimi_fail_wrap(err, "dpo.monitor") : 0;
}

// [track] MLflow keys and the MLFLOW_* environment (train/mlflow_tracker.h),
// and what the run's tags, params and inputs.json record.
static int read_mlflow(const Config *c, TrainSetup *t, FimiError *err) {
  MlflowTrackerOptions *m = &t->loop.mlflow;
  memset(m, 0, sizeof *m);
  const char *uri, *experiment, *env_tasks, *val_tasks;
  double flush_s = 0;
  if (!(uri = config_get_string(c, "track", "mlflow_uri", err)) ||
      !(experiment = config_get_string(c, "track", "experiment", err)) ||
      config_get_float(c, "track", "mlflow_flush_s", &flush_s, err) != 0 ||
      !(env_tasks = config_get_string(c, "env", "tasks", err)) ||
      !(val_tasks = config_get_string(c, "env", "val_tasks", err)))
    return -1;
  if (mlflow_settings_resolve(&m->settings, uri, experiment, flush_s, getenv("MLFLOW_TRACKING_URI"),
                              getenv("MLFLOW_EXPERIMENT_NAME"), getenv("MLFLOW_TRACKING_TOKEN"), err) != 0)
    return -1;
  m->config = c;
  m->objective = t->objective;
  m->fimi_version = cli_fimi_version();
  m->git_commit = cli_git_commit();
  const char *names[] = {"data.train", "data.eval", "env.tasks", "env.val_tasks", "tokenizer"};
  const char *paths[] = {t->is_grpo ? "" : t->train_path, t->is_grpo ? "" : t->eval_path, t->is_grpo ? env_tasks : "",
                         t->is_grpo ? val_tasks : "", t->tokenizer_path};
  for (int i = 0; i < 5; i++) m->inputs[m->num_inputs++] = (RunInput){.name = names[i], .path = paths[i]};
  return 0;
}

static int read_int(const Config *c, const char *section, const char *key, int64_t *out, FimiError *err) {
  return config_get_int(c, section, key, out, err);
}

static int read_setup(const Config *c, TrainSetup *t, FimiError *err) {
  TrainLoopConfig *l = &t->loop;
  train_loop_config_default(l);
  adamw_config_default(&t->adamw);
  adamw_decay_rules_default(&t->rules);
  int64_t seed = 0, warmup = 0;
  double warmup_ratio = 0;
  int shuffle = 1, progress = 1;
  const char *schedule;
  if (!(t->init_dir = config_get_string(c, "train", "init", err)) ||
      !(l->out_dir = config_get_string(c, "train", "out_dir", err)) ||
      !(t->objective = config_get_string(c, "train", "objective", err)) ||
      !(t->train_path = config_get_string(c, "data", "train", err)) ||
      !(t->eval_path = config_get_string(c, "data", "eval", err)) ||
      !(schedule = config_get_string(c, "optim", "schedule", err)) ||
      !(t->cuda_attention = config_get_string(c, "cuda", "attention", err)))
    return -1;
  if (strcmp(t->cuda_attention, "fimi") != 0 && strcmp(t->cuda_attention, "cudnn") != 0)
    return fimi_fail(err, "cuda.attention: unknown value '%s' (expected fimi or cudnn)", t->cuda_attention);
  if (read_int(c, "train", "steps", &l->steps, err) || read_int(c, "train", "micro_batch", &l->micro_batch, err) ||
      read_int(c, "train", "grad_accum", &l->grad_accum, err) ||
      config_get_float(c, "train", "max_grad_norm", &l->max_grad_norm, err) ||
      read_int(c, "train", "eval_every", &l->eval_every, err) ||
      read_int(c, "train", "eval_max_rows", &l->eval_max_rows, err) ||
      read_int(c, "train", "save_every", &l->save_every, err) || read_int(c, "train", "keep_last", &l->keep_last, err) ||
      read_int(c, "train", "max_nonfinite_in_row", &l->max_nonfinite_in_row, err) ||
      read_int(c, "train", "stop_at_step", &l->stop_at_step, err) || read_int(c, "train", "seed", &seed, err) ||
      config_get_bool(c, "train", "progress", &progress, err) || config_get_bool(c, "data", "shuffle", &shuffle, err) ||
      config_get_bool(c, "track", "tensorboard", &l->tensorboard, err) ||
      config_get_float(c, "optim", "lr", &l->schedule.base_lr, err) ||
      read_int(c, "optim", "warmup_steps", &warmup, err) ||
      config_get_float(c, "optim", "warmup_ratio", &warmup_ratio, err) ||
      config_get_float(c, "optim", "min_lr_ratio", &l->schedule.min_lr_ratio, err) ||
      config_get_float(c, "optim", "beta1", &t->adamw.beta1, err) ||
      config_get_float(c, "optim", "beta2", &t->adamw.beta2, err) ||
      config_get_float(c, "optim", "eps", &t->adamw.eps, err) ||
      config_get_float(c, "optim", "weight_decay", &t->adamw.weight_decay, err) ||
      config_get_bool(c, "optim", "decay_embeddings", &t->rules.decay_embeddings, err) ||
      config_get_bool(c, "model", "recompute", &t->recompute, err) ||
      config_get_bool(c, "dist", "zero3", &t->zero3, err) || read_int(c, "dist", "unit_size", &t->unit_size, err))
    return -1;
  if (t->unit_size < 1 || t->unit_size > 1 << 20) return fimi_fail(err, "dist.unit_size must be in [1, 1048576]");
  if (!(t->device_collectives = config_get_string(c, "dist", "device_collectives", err))) return -1;
  if (strcmp(t->device_collectives, "auto") && strcmp(t->device_collectives, "nccl") &&
      strcmp(t->device_collectives, "mpi"))
    return fimi_fail(err, "dist.device_collectives: unknown value '%s' (expected auto, nccl or mpi)",
                     t->device_collectives);
  double shard_mb = 0;
  if (config_get_float(c, "train", "max_shard_mb", &shard_mb, err) != 0) return -1;
  if (!(shard_mb >= 0 && shard_mb <= 1e9)) return fimi_fail(err, "train.max_shard_mb must be in [0, 1e9] (0: one file)");
  l->max_shard_bytes = (size_t)(shard_mb * 1e6);
  if (lr_schedule_kind_parse(schedule, &l->schedule.kind, err) != 0) return fimi_fail_wrap(err, "optim.schedule");
  if (seed < 0) return fimi_fail(err, "train.seed must be >= 0");
  if (!(warmup_ratio >= 0 && warmup_ratio < 1)) return fimi_fail(err, "optim.warmup_ratio must be in [0, 1)");
  if (warmup < 0) return fimi_fail(err, "optim.warmup_steps must be >= 0");
  l->schedule.total_steps = (long)l->steps;
  l->schedule.warmup_steps = warmup > 0 ? (long)warmup : lr_warmup_steps_from_ratio(warmup_ratio, (long)l->steps);
  l->data_seed = l->rng_seed = (uint64_t)seed;
  l->shuffle = shuffle;
  l->progress = progress;
  l->config_hash = config_hash(c);
  if (!t->init_dir[0]) return fimi_fail(err, "train.init must name the starting model (a directory from fimi init)");
  t->is_grpo = !strcmp(t->objective, "grpo");
  if (!t->is_grpo && !t->train_path[0]) return fimi_fail(err, "data.train must name an HDF5 dataset (fimi data tokenize)");
  if (strcmp(t->objective, "sft") && strcmp(t->objective, "dpo") && !t->is_grpo)
    return fimi_fail(err, "train.objective \"%s\" is not known (sft, dpo or grpo)", t->objective);
  if (read_dpo(c, t, err) != 0) return -1;
  if (t->is_grpo && grpo_setup_read(c, (uint64_t)seed, &t->grpo, err) != 0) return -1;
  // Checked here too (not only when the objective starts), so --dry-run catches it.
  if (t->is_grpo && l->micro_batch * l->grad_accum != (int64_t)t->grpo.grpo.tasks_per_step * t->grpo.grpo.group_size)
    return fimi_fail(err, "train.micro_batch (%lld) x train.grad_accum (%lld) must equal grpo.tasks_per_step x "
                     "grpo.group_size (%d rollouts a step)", (long long)l->micro_batch, (long long)l->grad_accum,
                     t->grpo.grpo.tasks_per_step * t->grpo.grpo.group_size);
  struct stat st;
  if (path_join(t->tokenizer_path, sizeof t->tokenizer_path, t->init_dir, "tokenizer.json", err) != 0) return -1;
  if (stat(t->tokenizer_path, &st) != 0) {
    log_warn("%s has no tokenizer.json: checkpoints will lack one", t->init_dir);
    t->tokenizer_path[0] = 0;
  }
  l->tokenizer_path = t->tokenizer_path;
  if (read_mlflow(c, t, err) != 0) return -1;
  return adamw_config_validate(&t->adamw, err);
}

static int parse_train_args(int argc, char **argv, const char **resume, int *dry_run, int64_t *unit_tokens,
                            FimiError *err) {
  *resume = NULL;
  *dry_run = 0;
  *unit_tokens = 0;
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i], *value;
    if (!strcmp(flag, "--dry-run")) {
      *dry_run = 1;
      continue;
    }
    if (!strcmp(flag, "--unit-tokens")) {
      char *end = NULL;
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      long long v = strtoll(value, &end, 10);
      if (*end || v < 1 || v > (1 << 24)) return fimi_fail(err, "--unit-tokens: expected 1..16777216, got \"%s\"", value);
      *unit_tokens = v;
      continue;
    }
    if (strcmp(flag, "--resume")) return fimi_fail(err, "unknown option %s (see fimi train --help)", flag);
    if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
    *resume = value;
  }
  return 0;
}

static void print_summary(const TrainSummary *s, const char *out_dir) {
  if (s->end_step == s->start_step) {
    printf("fimi train: %s is already at step %lld: nothing to do\n", out_dir, (long long)s->end_step);
    return;
  }
  printf("fimi train: steps %lld..%lld, loss %.4f -> %.4f", (long long)s->start_step + 1, (long long)s->end_step,
         s->first_loss, s->last_loss);
  if (!isnan(s->eval_loss)) printf(", eval loss %.4f", s->eval_loss);
  printf(", %.0f tokens/s, %lld skipped, %s\n", s->tokens_per_s, (long long)s->skipped, out_dir);
}

static void print_plan(const TrainSetup *t) {
  const TrainLoopConfig *l = &t->loop;
  printf("fimi train --dry-run: config is valid\n");
  if (t->is_grpo) printf("  objective grpo, init %s\n", t->init_dir);
  else
    printf("  objective %s, init %s, data %s (eval %s)\n", t->objective, t->init_dir, t->train_path,
           t->eval_path[0] ? t->eval_path : "none");
  printf("  steps %lld, micro_batch %lld, grad_accum %lld, lr %g (%s, warmup %ld), recompute %s\n",
         (long long)l->steps, (long long)l->micro_batch, (long long)l->grad_accum, l->schedule.base_lr,
         lr_schedule_kind_name(l->schedule.kind), l->schedule.warmup_steps, t->recompute ? "on" : "off");
  printf("  save_every %lld, keep_last %lld, max_shard_mb %g, out_dir %s\n", (long long)l->save_every,
         (long long)l->keep_last, l->max_shard_bytes / 1e6, l->out_dir);
  if (l->tensorboard) printf("  TensorBoard events in %s/tb\n", l->out_dir);
  if (l->mlflow.settings.uri[0])
    printf("  MLflow: %s, experiment \"%s\"%s\n", l->mlflow.settings.uri, l->mlflow.settings.experiment,
           l->mlflow.settings.token ? " (token from MLFLOW_TRACKING_TOKEN)" : "");

  if (!strcmp(t->objective, "dpo"))
    printf("  dpo: loss %s, beta %g, reference %s, monitor margin %g over %d steps\n",
           dpo_loss_type_name(t->dpo.loss_type), t->dpo.beta,
           t->reference == DPO_REFERENCE_MODEL ? "model" : "precomputed", t->monitor.threshold, t->monitor.window);
}

// The model --dry-run plans for: train.init's config.json, or, when there
// is none yet, the [model] section (preset or config_json). 0, or -1 with
// err saying why.
static int plan_model(const TrainSetup *t, const CliOptions *opts, GemmaConfig *cfg, FimiError *err) {
  char path[CHECKPOINT_PATH_MAX];
  struct stat st;
  if (path_join(path, sizeof path, t->init_dir, "config.json", err) != 0) return -1;
  if (stat(path, &st) == 0) return gemma_config_load_json(cfg, path, err);
  if (cli_model_config(opts, cfg, err) != 0) return -1;
  printf("  (train.init %s has no config.json yet: planning for the [model] section's architecture)\n", t->init_dir);
  return 0;
}

// --dry-run: ZeRO-3 memory per rank (parallel/zero3.h) at a few world sizes, for
// units of unit_tokens tokens (default: the model's positions, capped at
// 4096; a DPO unit is a pair: two rows).
static void print_memory_plan(const TrainSetup *t, const GemmaConfig *model, const char *why, int64_t unit_tokens) {
  FimiError err = {0};
  if (!model) {
    printf("  memory per rank: not estimated (%s)\n", why);
    return;
  }
  GemmaConfig cfg = *model;
  int rows = strcmp(t->objective, "dpo") ? 1 : 2;
  int64_t row_tokens = unit_tokens > 0 ? unit_tokens : cfg.max_position_embeddings < 4096 ? cfg.max_position_embeddings : 4096;
  int tokens = (int)(rows * row_tokens);
  printf("  memory per rank, ZeRO-3 on the CPU backend (fp32; docs/distributed.md), units of %d token%s%s:\n", tokens,
         tokens > 1 ? "s" : "", rows == 2 ? " (one pair)" : "");
  static const int worlds[] = {1, 2, 4, 8, 40};
  for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++) {
    Zero3Memory m;
    if (zero3_memory_estimate(&cfg, worlds[i], tokens, t->recompute, &m, &err) != 0) {
      printf("    world %d: %s\n", worlds[i], err.message);
      continue;
    }
    printf("    world %2d: %8.1f MiB (shards + globals %.1f, buffers %.1f, activations %.1f) + full model %.1f MiB\n",
           worlds[i], m.total / 1048576.0, m.state / 1048576.0, m.buffers / 1048576.0, m.activations / 1048576.0,
           m.full_model / 1048576.0);
  }
  printf("  device memory per GPU, ZeRO-3 on the CUDA backend (bf16 weights; docs/distributed.md), recompute %d:\n",
         t->recompute);
  for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++) {
    Zero3Memory m;
    if (zero3_gpu_memory_estimate(&cfg, worlds[i], tokens, t->recompute, &m, &err) != 0) {
      printf("    world %d: %s\n", worlds[i], err.message);
      continue;
    }
    printf("    world %2d: %8.1f MiB (shards + globals %.1f, buffers %.1f, activations %.1f)\n", worlds[i],
           m.total / 1048576.0, m.state / 1048576.0, m.buffers / 1048576.0, m.activations / 1048576.0);
  }
}

// DPO with precomputed reference log-probs: add them to the datasets that
// lack them, with the initial model (before any checkpoint is loaded).
static int ensure_reference(TrainSetup *t, GemmaModel *model, FimiError *err) {
  if (strcmp(t->objective, "dpo") || t->reference != DPO_REFERENCE_PRECOMPUTED) return 0;
  const char *paths[2] = {t->train_path, t->eval_path};
  for (int i = 0; i < 2; i++) {
    if (!paths[i][0]) continue;
    int computed = 0;
    if (dpo_reference_ensure(model, paths[i], t->loop.micro_batch, &computed, err) != 0)
      return fimi_fail_wrap(err, i ? "data.eval" : "data.train");
    if (computed) log_info("%s: wrote ref_logp_chosen and ref_logp_rejected", paths[i]);
  }
  return 0;
}

// dpo.reference = model: a frozen copy of the initial model, loaded before
// train_run restores a checkpoint into the policy. *have = 0 otherwise.
static int load_reference(const TrainSetup *t, GemmaModel *reference, int *have, FimiError *err) {
  *have = 0;
  if (strcmp(t->objective, "dpo") || t->reference != DPO_REFERENCE_MODEL) return 0;
  if (gemma_load_pretrained(reference, t->init_dir, err) != 0) return fimi_fail_wrap(err, "dpo reference model");
  reference->recompute = t->recompute;
  *have = 1;
  return 0;
}

// The loop's hooks into the DPO objective: per-step metrics and the state a
// resume restores.
static void use_dpo_hooks(TrainSetup *t, DpoObjective *dpo) {
  t->loop.step_metrics = dpo_objective_step_metrics;
  t->loop.step_metrics_ctx = dpo;
  t->loop.objective_save = dpo_objective_state_save;
  t->loop.objective_load = dpo_objective_state_load;
  t->loop.objective_ctx = dpo;
}

static void print_dpo_summary(const TrainSummary *summary, const DpoObjective *dpo) {
  if (summary->end_step <= summary->start_step) return;
  printf("fimi train: dpo rewards/accuracies %.3f, margins %.4f", dpo->last.rewards_accuracies,
         dpo->last.rewards_margins);
  if (dpo->have_eval)
    printf(", eval accuracy %.3f, eval loss %.4f", dpo->last_eval.rewards_accuracies, dpo->last_eval.loss);
  printf("\n");
}

// Across ranks rank 0 alone adds the reference log-probs (one writer per
// file); the others wait for it before opening the datasets.
static int reference_pass(TrainSetup *t, GemmaModel *model, Communicator *comm, FimiError *err) {
  int rc = !comm || comm->rank == 0 ? ensure_reference(t, model, err) : 0;
  if (!comm) return rc;
  double bad = rc != 0;
  FimiError reduce_err = {0};
  if (comm_all_reduce_f64(comm, &bad, 1, COMM_MAX, &reduce_err) != 0) return fimi_fail(err, "%s", reduce_err.message);
  if (bad != 0 && rc == 0) rc = fimi_fail(err, "rank 0 failed to add the reference log-probs (see its message)");
  return rc;
}

// GRPO in one process (or one train rank with env ranks): the rollouts and
// the update on the loop's model, or on the GPU (gpu not NULL; the KL
// reference stays on the CPU).
static int run_grpo(TrainSetup *t, GemmaModel *model, TrainState *state, CudaTrainer *gpu, FimiError *err) {
  GrpoRun *run = fimi_calloc(1, sizeof *run, err);
  if (!run) return -1;
  TrainObjective obj;
  int rc = grpo_run_init(run, &t->grpo, model, t->init_dir, t->tokenizer_path, t->roles, t->world, &obj, &t->loop, err);
  if (rc == 0 && gpu)
    grpo_objective_set_model_ops(&run->objective,
                                 cuda_trainer_use_grpo(gpu, t->grpo.prefill_chunk, &run->objective.access));
  if (rc == 0) {
    TrainSummary summary;
    rc = train_run(&t->loop, state, &obj, &run->objective.rows, NULL, &summary, err);
    if (rc == 0) print_summary(&summary, t->loop.out_dir);
    if (rc == 0) grpo_run_print_summary(run);
  }
  grpo_run_free(run);
  free(run);
  return rc;
}

// gpu: the objective's model calls go to the GPU (NULL: the CPU model).
static int run_objective(TrainSetup *t, GemmaModel *model, TrainState *state, CudaTrainer *gpu, const Dataset *train,
                         const Dataset *eval, FimiError *err) {
  TrainObjective obj;
  SftObjective sft;
  DpoObjective dpo;
  GemmaModel reference;
  memset(&sft, 0, sizeof sft);
  memset(&dpo, 0, sizeof dpo);
  int is_dpo = !strcmp(t->objective, "dpo"), have_reference = 0;
  if (t->is_grpo) return run_grpo(t, model, state, gpu, err);
  int rc = load_reference(t, &reference, &have_reference, err);
  if (rc == 0 && is_dpo) {
    rc = dpo_objective_init(&dpo, &model->config, &t->dpo, &t->monitor, have_reference ? &reference : NULL, &obj,
                            err);
    use_dpo_hooks(t, &dpo);
    if (rc == 0 && gpu) cuda_trainer_use_dpo(gpu, &dpo);
  } else if (rc == 0) {
    sft_objective_init(&sft, &model->config, &obj);
    if (gpu) cuda_trainer_use_sft(gpu, &sft);
  }
  if (rc == 0) {
    TrainSummary summary;
    rc = train_run(&t->loop, state, &obj, train, eval, &summary, err);
    if (rc == 0) print_summary(&summary, t->loop.out_dir);
    if (rc == 0 && is_dpo) print_dpo_summary(&summary, &dpo);
  }
  if (is_dpo) dpo_objective_free(&dpo);
  else sft_objective_free(&sft);
  if (have_reference) gemma_model_free(&reference);
  return rc;
}

// ---- across ranks (ZeRO-3) ----------------------------------------------------------

// The sharded objectives. THE UNIT RULE of parallel/zero3.h: a unit is
// dist.unit_size consecutive rows (SFT) or pairs (DPO: dpo/objective.h,
// DpoModelOps) of the micro-batch (the last one may be shorter); unit u goes
// to rank u % world as its call u / world; when the units do
// not fill the last round, the ranks without one run a dummy unit (unit 0
// with zero dlogprobs: it adds exact zeros). SFT dlogprobs are -mask * weight
// / (loss tokens of the WHOLE micro-batch), as in train/sft.c, so the
// gradients match the single-process run; losses are all-reduced.
typedef struct Sharded {
  const ShardedModelOps *ops;  // the ZeRO-3 model: s->z (--device cpu) or s->gpu's
  void *model;                 // ops' context
  Zero3 z;
  int have_z;
  CudaSharded *gpu;            // --device cuda
  Communicator *comm;
  SftObjective sft;   // pad_id, max_len, and the whole micro-batch (for counts)
  SftBatch unit;      // one unit: unit_size rows
  int64_t unit_size;  // dist.unit_size
  DpoObjective dpo;
  DpoModelOps dpo_ops;
  GemmaModel reference;  // dpo.reference = model: replicated on every rank
  int have_reference;
  GrpoRun *grpo;         // train.objective = grpo
} Sharded;

// Runs this rank's units of rows[0..count); *mask_logp gets the sum of
// mask * logprob over them (double). backward: zero3_forward_backward with
// dlogprobs scaled by scale, else zero3_forward.
static int sharded_units(Sharded *s, const Dataset *ds, const int64_t *rows, int64_t count, int backward,
                         float scale, double *mask_logp, FimiError *err) {
  int world = s->comm->world, rank = s->comm->rank;
  int64_t k = s->unit_size, units = (count + k - 1) / k;
  int64_t rounds = (units + world - 1) / world;
  *mask_logp = 0;
  for (int64_t j = 0; j < rounds; j++) {
    int64_t u = j * world + rank;
    int real = u < units;
    int64_t first = real ? u * k : 0, rows_in = count - first < k ? count - first : k;
    if (sft_batch_build(&s->unit, ds, &rows[first], rows_in, s->sft.pad_id, s->sft.max_len, err) != 0) return -1;
    SftBatch *b = &s->unit;
    size_t n = (size_t)b->B * (size_t)b->T;
    for (size_t i = 0; i < n; i++) b->dlogprobs[i] = real ? -b->mask[i] * scale : 0.0f;
    int rc = backward ? s->ops->forward_backward(s->model, b->tokens, b->targets, b->B, b->T, b->dlogprobs,
                                                 b->logprobs, err)
                      : s->ops->forward(s->model, b->tokens, b->targets, b->B, b->T, b->logprobs, err);
    if (rc != 0) return fimi_fail_wrap(err, "rank %d, unit %lld", rank, (long long)u);
    if (real)
      for (size_t i = 0; i < n; i++) *mask_logp += (double)b->mask[i] * (double)b->logprobs[i];
  }
  return comm_all_reduce_f64(s->comm, mask_logp, 1, COMM_SUM, err);
}

static int sharded_train_batch(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                               double weight, TrainBatchResult *out, FimiError *err) {
  Sharded *s = ctx;
  (void)model;  // the weights live in s->z
  memset(out, 0, sizeof *out);
  // Every rank holds the same row list, so the counts need no communication.
  if (sft_batch_build(&s->sft.batch, ds, rows, count, s->sft.pad_id, s->sft.max_len, err) != 0) return -1;
  out->tokens = s->sft.batch.tokens_real;
  out->loss_tokens = s->sft.batch.loss_tokens;
  if (out->loss_tokens == 0) return 0;  // same decision on every rank
  float scale = (float)(weight / (double)out->loss_tokens);
  double sum = 0;
  if (sharded_units(s, ds, rows, count, 1, scale, &sum, err) != 0) return -1;
  out->loss = -sum / (double)out->loss_tokens;
  return 0;
}

static int sharded_eval_batch(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                              double *loss_sum, double *count_out, FimiError *err) {
  Sharded *s = ctx;
  (void)model;
  if (sft_batch_build(&s->sft.batch, ds, rows, count, s->sft.pad_id, s->sft.max_len, err) != 0) return -1;
  int64_t loss_tokens = s->sft.batch.loss_tokens;
  if (loss_tokens == 0) return 0;
  double sum = 0;
  if (sharded_units(s, ds, rows, count, 0, 0.0f, &sum, err) != 0) return -1;
  *loss_sum += -sum;
  *count_out += (double)loss_tokens;
  return 0;
}

// DpoModelOps / GrpoModelOps over the ZeRO-3 model.
static int sharded_forward(void *ctx, const int *tokens, const int *targets, int B, int T, float *logprobs,
                           FimiError *err) {
  Sharded *s = ctx;
  return s->ops->forward(s->model, tokens, targets, B, T, logprobs, err);
}

static int sharded_backward(void *ctx, const float *dlogprobs, FimiError *err) {
  Sharded *s = ctx;
  return s->ops->backward(s->model, dlogprobs, err);
}

static int sharded_all_reduce_sum(void *ctx, double *data, int count, FimiError *err) {
  return comm_all_reduce_f64(((Sharded *)ctx)->comm, data, (size_t)count, COMM_SUM, err);
}

static void sharded_zero_grad(void *ctx) {
  Sharded *s = ctx;
  s->ops->zero_grads(s->model);
}

static int sharded_clip_step(void *ctx, double lr, double max_norm, int update, ClipResult *out, FimiError *err) {
  Sharded *s = ctx;
  if (update) return s->ops->step(s->model, lr, max_norm, out, err);
  // A non-finite loss (the same on every rank): no update, norm not computed.
  *out = (ClipResult){.norm = NAN, .scale = 1.0f, .finite = 0, .clipped = 0};
  return 0;
}

static int sharded_gather(void *ctx, GemmaModel *dst, FimiError *err) {
  Sharded *s = ctx;
  return s->ops->gather(s->model, dst, err);
}

static AdamW *sharded_optimizer(void *ctx) {
  Sharded *s = ctx;
  return s->ops->optimizer(s->model);
}

static int sharded_load(void *ctx, const GemmaModel *src, FimiError *err) {
  Sharded *s = ctx;
  return s->ops->load(s->model, src, err);
}

static int sharded_all_ok(void *ctx, int ok) {
  Sharded *s = ctx;
  double bad = ok ? 0.0 : 1.0;
  FimiError err = {0};
  if (comm_all_reduce_f64(s->comm, &bad, 1, COMM_MAX, &err) != 0) return 0;
  return bad == 0.0;
}

// The CPU ZeRO-3 model (parallel/zero3.h) as ShardedModelOps.
static int cpu_forward_backward(void *z, const int *tokens, const int *targets, int B, int T, const float *dlogprobs,
                                float *logprobs, FimiError *err) {
  return zero3_forward_backward(z, tokens, targets, B, T, dlogprobs, logprobs, err);
}
static int cpu_forward(void *z, const int *tokens, const int *targets, int B, int T, float *logprobs, FimiError *err) {
  return zero3_forward(z, tokens, targets, B, T, logprobs, err);
}
static int cpu_backward(void *z, const float *dlogprobs, FimiError *err) { return zero3_backward(z, dlogprobs, err); }
static void cpu_zero_grads(void *z) { zero3_zero_grads(z); }
static int cpu_step(void *z, double lr, double max_norm, ClipResult *out, FimiError *err) {
  return zero3_step(z, lr, max_norm, out, err);
}
static int cpu_gather(void *z, GemmaModel *dst, FimiError *err) { return zero3_gather_full_weights(z, dst, err); }
static AdamW *cpu_optimizer(void *z) { return &((Zero3 *)z)->opt; }
static int cpu_load(void *z, const GemmaModel *src, FimiError *err) { return zero3_load_full_weights(z, src, err); }

static const ShardedModelOps cpu_sharded_ops = {cpu_forward_backward, cpu_forward, cpu_backward,  cpu_zero_grads,
                                                cpu_step,             cpu_gather,  cpu_optimizer, cpu_load};

static const TrainStateOps sharded_ops = {sharded_zero_grad, sharded_clip_step, sharded_gather,
                                          sharded_optimizer, sharded_load,     sharded_all_ok};

// The objective on the sharded model: SFT with the unit functions above, or
// DPO through DpoModelOps.
static int sharded_objective(TrainSetup *t, GemmaModel *model, Sharded *s, TrainObjective *obj, FimiError *err) {
  if (t->is_grpo) {
    // Every train rank plays its share of the step's rollouts on the
    // gathered weights and the ranks exchange them (all then hold the same
    // set); the update runs in ZeRO-3 units.
    if (!(s->grpo = fimi_calloc(1, sizeof *s->grpo, err))) return -1;
    if (grpo_run_init(s->grpo, &t->grpo, model, t->init_dir, t->tokenizer_path, t->roles, t->world, obj, &t->loop,
                      err) != 0 ||
        grpo_objective_set_rollout_comm(&s->grpo->objective, s->comm, err) != 0)
      return -1;
    s->grpo->ops = (GrpoModelOps){sharded_forward, sharded_backward, sharded_all_reduce_sum, s, s->comm->rank,
                                  s->comm->world, (int)s->unit_size};
    grpo_objective_set_model_ops(&s->grpo->objective, &s->grpo->ops);
    return 0;
  }
  sft_objective_init(&s->sft, &model->config, obj);
  if (strcmp(t->objective, "dpo")) {
    obj->ctx = s;
    obj->train_batch = sharded_train_batch;
    obj->eval_batch = sharded_eval_batch;
    return 0;
  }
  if (load_reference(t, &s->reference, &s->have_reference, err) != 0) return -1;
  if (dpo_objective_init(&s->dpo, &model->config, &t->dpo, &t->monitor, s->have_reference ? &s->reference : NULL,
                         obj, err) != 0)
    return -1;
  s->dpo_ops = (DpoModelOps){sharded_forward, sharded_backward, sharded_all_reduce_sum, s, s->comm->rank,
                             s->comm->world, (int)s->unit_size};
  dpo_objective_set_model_ops(&s->dpo, &s->dpo_ops);
  use_dpo_hooks(t, &s->dpo);
  return 0;
}

// The ZeRO-3 model of --device: the CPU's (parallel/zero3.h) or the GPUs'
// (cmd/train_cuda.h), holding model's weights.
static int create_sharded_model(TrainSetup *t, GemmaModel *model, const Zero3Config *zc, Sharded *s, FimiError *err) {
  if (t->device == DEVICE_CUDA) {
    CudaTrainerOptions options = {t->cuda_attention, t->recompute};
    if (cuda_sharded_create(&s->gpu, model, zc, s->comm, t->loop.rng_seed, &options, t->device_collectives, &s->ops,
                            err) != 0)
      return -1;
    s->model = s->gpu;
    return 0;
  }
  if (zero3_create(&s->z, &model->config, zc, s->comm, 1, err) != 0) return -1;
  s->have_z = 1;
  s->ops = &cpu_sharded_ops;
  s->model = &s->z;
  return zero3_load_full_weights(&s->z, model, err);
}

static int run_sharded(TrainSetup *t, GemmaModel *model, Communicator *comm, const Dataset *train,
                       const Dataset *eval, FimiError *err) {
  Sharded *s = fimi_calloc(1, sizeof *s, err);
  if (!s) return -1;
  s->comm = comm;
  s->unit_size = t->unit_size;
  Zero3Config zc;
  zero3_config_default(&zc);
  zc.adamw = t->adamw;
  zc.decay = t->rules;
  zc.recompute = t->recompute;
  TrainObjective obj;
  int rc = sharded_objective(t, model, s, &obj, err);
  if (rc == 0) rc = create_sharded_model(t, model, &zc, s, err);
  if (rc == 0 && s->grpo && s->gpu) cuda_sharded_use_grpo(s->gpu, t->grpo.prefill_chunk, &s->grpo->objective.access);
  if (rc == 0) {
    TrainState state;
    train_state_init_sharded(&state, model, &sharded_ops, s, comm->rank, comm->world);
    if (comm->rank != 0) t->loop.progress = 0;
    TrainSummary summary;
    rc = train_run(&t->loop, &state, &obj, s->grpo ? &s->grpo->objective.rows : train, eval, &summary, err);
    if (rc == 0 && comm->rank == 0) {
      print_summary(&summary, t->loop.out_dir);
      if (s->grpo) grpo_run_print_summary(s->grpo);
      if (!strcmp(t->objective, "dpo")) print_dpo_summary(&summary, &s->dpo);
      printf("fimi train: ZeRO-3 across %d rank%s%s\n", comm->world, comm->world > 1 ? "s" : "",
             s->gpu ? ", one GPU each" : "");
    }
    train_state_free(&state);
  }
  if (s->have_z) zero3_free(&s->z);
  cuda_sharded_free(s->gpu);
  sft_batch_free(&s->unit);
  sft_objective_free(&s->sft);
  dpo_objective_free(&s->dpo);
  if (s->have_reference) gemma_model_free(&s->reference);
  if (s->grpo) grpo_run_free(s->grpo);
  free(s->grpo);
  free(s);
  return rc;
}

// Everything after the config: model, data, objective, loop.
static int run_training(TrainSetup *t, Communicator *comm, FimiError *err) {
  GemmaModel model;
  if (gemma_load_pretrained(&model, t->init_dir, err) != 0) return fimi_fail_wrap(err, "train.init");
  model.recompute = t->recompute;
  Dataset train = {0}, eval = {0};
  int have_eval = t->eval_path[0] != 0, have_train = 0;
  DatasetKind kind = strcmp(t->objective, "dpo") ? DATASET_SFT : DATASET_DPO;
  TrainState state;
  int state_ok = 0, rc = reference_pass(t, &model, comm, err);
  if (t->is_grpo) have_eval = 0;  // GRPO validates on env.val_tasks, not on a dataset
  if (rc == 0 && !t->is_grpo && dataset_open(t->train_path, model.config.vocab_size, &train, err) != 0)
    rc = fimi_fail_wrap(err, "data.train");
  have_train = rc == 0 && !t->is_grpo;
  if (rc == 0 && have_eval && dataset_open(t->eval_path, model.config.vocab_size, &eval, err) != 0) {
    rc = fimi_fail_wrap(err, "data.eval");
    have_eval = 0;
  }
  if (rc == 0 && !t->is_grpo && (train.kind != kind || (have_eval && eval.kind != kind)))
    rc = fimi_fail(err, "train.objective %s needs %s datasets (fimi data tokenize --kind %s)", t->objective,
                   dataset_kind_name(kind), dataset_kind_name(kind));
  CudaTrainer *gpu = NULL;
  if (rc == 0 && comm) {
    rc = run_sharded(t, &model, comm, &train, have_eval ? &eval : NULL, err);
  } else {
    if (rc == 0 && t->device == DEVICE_CUDA) {
      CudaTrainerOptions options = {t->cuda_attention, t->recompute};
      rc = cuda_trainer_create(&gpu, &model, &t->adamw, &t->rules, t->loop.rng_seed, &options, &state, err);
      if (rc == 0 && !strcmp(t->objective, "dpo") && t->reference == DPO_REFERENCE_MODEL)
        log_warn("dpo.reference = model: the reference model runs on the CPU (slow); "
                 "dpo.reference = precomputed computes it once instead");
    } else if (rc == 0) {
      rc = train_state_init(&state, &model, &t->adamw, &t->rules, err);
    }
    state_ok = rc == 0;
    if (rc == 0) rc = run_objective(t, &model, &state, gpu, &train, have_eval ? &eval : NULL, err);
  }
  if (state_ok) train_state_free(&state);
  cuda_trainer_free(gpu);
  if (have_train) dataset_close(&train);
  if (have_eval) dataset_close(&eval);
  gemma_model_free(&model);
  return rc;
}

// Under mpirun. Ranks have roles ([dist] env_ranks / roles, parallel/roles.h):
// train ranks run ZeRO-3 on their own communicator (the world split by
// role); env ranks serve rollouts, which SFT and DPO do not use, so they
// only wait for the train ranks. World 1 without dist.zero3 is the plain path.
static int run_on_ranks(TrainSetup *setup, const Config *config, Communicator *world, FimiError *err) {
  DistRoles roles;
  if (dist_roles_from_config(&roles, world, config, err) != 0) return -1;
  int rc = 0;
  setup->roles = &roles;
  setup->world = world;
  if (roles.role == ROLE_ENV && setup->is_grpo) {
    rc = grpo_serve_env(&setup->grpo, &roles, world, err);
  } else if (roles.role == ROLE_ENV) {
    if (roles.role_index == 0)
      log_info("%d env rank%s idle: train.objective %s uses no environment", roles.layout.num_env,
               roles.layout.num_env > 1 ? "s" : "", setup->objective);
  } else {
    Communicator *train = &roles.role_comm;
    int sharded = setup->zero3 || train->world > 1;
    rc = run_training(setup, sharded ? train : NULL, err);
  }
  // Env ranks leave when training is over; a failed train rank aborts all.
  FimiError barrier_err = {0};
  if (rc == 0 && comm_barrier(world, &barrier_err) != 0) rc = fimi_fail(err, "%s", barrier_err.message);
  dist_roles_free(&roles);
  return rc;
}

// Open MPI's, MPICH's and PMIx's launchers set these in each rank's
// environment; without them MPI is never initialized (a plain run).
static int launched_by_mpirun(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int cmd_train(int argc, char **argv) {
  FimiError err = {0};
  CliOptions opts;
  int rest = cli_parse_common(&opts, argc, argv, &err);
  if (rest < 0) return cli_fail("train", &err);
  for (int i = 1; i < rest; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      print_train_help();
      return 0;
    }
  const char *resume = NULL;
  int dry_run = 0;
  int64_t unit_tokens = 0;
  if (parse_train_args(rest, argv, &resume, &dry_run, &unit_tokens, &err) != 0) {
    fprintf(stderr, "fimi train: %s\n", err.message);
    return CLI_EXIT_USAGE;
  }
  if (cli_load_config(&opts, &err) != 0) return cli_fail("train", &err);
  if (device_require(opts.device, &err) != 0) return cli_fail("train", &err);
  cli_log_blas();
  if (resume && config_set(&opts.config, "train", "out_dir", resume, "--resume", &err) != 0)
    return cli_fail("train", &err);
  TrainSetup setup;
  if (read_setup(&opts.config, &setup, &err) != 0) return cli_fail("train", &err);
  setup.loop.resume_dir = resume;
  setup.device = opts.device;
  if (dry_run) {
    print_plan(&setup);
    GemmaConfig plan_cfg;
    int have_cfg = plan_model(&setup, &opts, &plan_cfg, &err) == 0;
    if (setup.is_grpo)
      grpo_setup_print(&setup.grpo, have_cfg ? &plan_cfg : NULL, err.message, setup.loop.micro_batch,
                       setup.loop.grad_accum);
    print_memory_plan(&setup, have_cfg ? &plan_cfg : NULL, err.message, unit_tokens);
    return 0;
  }
  if (!setup.zero3 && !launched_by_mpirun()) return run_training(&setup, NULL, &err) == 0 ? 0 : cli_fail("train", &err);
  // Under mpirun: every rank runs this; world 1 without dist.zero3 is the
  // plain path.
  Communicator comm;
  if (comm_mpi_init(&argc, &argv, &err) != 0) return cli_fail("train", &err);
  int rc = comm_init(&comm, MPI_COMM_WORLD, &err);
  if (rc == 0) {
    rc = run_on_ranks(&setup, &opts.config, &comm, &err);
    if (rc != 0) {
      // One rank failing leaves the others blocked in a collective.
      fprintf(stderr, "fimi train: rank %d: %s\n", comm.rank, err.message);
      if (comm.world > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    comm_free(&comm);
  }
  FimiError ferr = {0};
  comm_mpi_finalize(&ferr);
  return rc == 0 ? 0 : cli_fail("train", &err);
}
