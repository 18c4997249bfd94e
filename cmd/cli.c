// cmd/cli.c: shared flag parsing and the config schema (see cli.h).
#include "cmd/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/tokenizer.h"
#include "fimi_git_commit.h"  // generated at build time (cmake/fimi_git_commit.cmake)
#include "kernels/cpu/blas.h"
#include "kernels/device.h"
#include "model/gemma.h"

// The config keys fimi understands today. Later layers (optim, train, dpo,
// grpo, env, dist, eval) add their own tables here.
static const ConfigField model_fields[] = {
    {"model", "preset", CONFIG_STRING, "tiny", "named architecture preset (tiny, tiny-gemma2, small-10m, gemma3-270m, ...)"},
    {"model", "config_json", CONFIG_STRING, "", "a Hugging Face config.json; overrides preset when set"},
    {"model", "seed", CONFIG_INT, "1234", "seed of the random initialization"},
    {"model", "recompute", CONFIG_BOOL, "false", "recompute each layer's activations in backward"},
};

static const ConfigField generate_fields[] = {
    {"generate", "max_new_tokens", CONFIG_INT, "32", "tokens to sample per prompt"},
    {"generate", "temperature", CONFIG_FLOAT, "0.8", "softmax temperature; 0 = greedy"},
    {"generate", "top_p", CONFIG_FLOAT, "0.95", "nucleus mass; 1 = no truncation"},
    {"generate", "seed", CONFIG_INT, "0", "sampling seed"},
};

// The CUDA backend (--device cuda, docs/kernels-cuda.md).
static const ConfigField cuda_fields[] = {
    {"cuda", "attention", CONFIG_STRING, "fimi",
     "attention kernels of fimi train --device cuda: fimi (hand-written) or cudnn (cuDNN's fused SDPA, a speed and "
     "correctness reference; no softcap)"},
};

// Rank roles (parallel/roles.h, docs/distributed.md): set at most one of the two.
static const ConfigField dist_fields[] = {
    {"dist", "env_ranks", CONFIG_INT, "0", "the last N ranks are env ranks (CPU only); the rest train"},
    {"dist", "roles", CONFIG_STRING, "", "explicit role per rank, e.g. \"train*6,env*2\"; length = world size"},
    {"dist", "zero3", CONFIG_BOOL, "false",
     "fimi train shards the model ZeRO-3 style (parallel/zero3.h) even at world 1; always on under mpirun with > 1 rank"},
    {"dist", "unit_size", CONFIG_INT, "1",
     "rows (sft) or pairs (dpo) per ZeRO-3 forward/backward call; results do not depend on the world size for a "
     "given unit_size (docs/training.md)"},
    {"dist", "device_collectives", CONFIG_STRING, "auto",
     "collectives of ZeRO-3 across GPUs (fimi train --device cuda under mpirun): nccl, mpi (staged through host "
     "memory) or auto (nccl where built, else mpi)"},
};

// Training (train/loop.h, docs/training.md).
static const ConfigField train_fields[] = {
    {"train", "init", CONFIG_STRING, "", "the model to start from: a directory written by fimi init (or a checkpoint)"},
    {"train", "out_dir", CONFIG_STRING, "run", "metrics.jsonl and step_* checkpoints go here"},
    {"train", "objective", CONFIG_STRING, "sft",
     "the loss: sft (masked token cross-entropy), dpo ([dpo] section) or grpo ([grpo], [env], [rollout])"},
    {"train", "steps", CONFIG_INT, "100", "total optimizer steps (the LR schedule's length)"},
    {"train", "micro_batch", CONFIG_INT, "4", "rows per micro-batch"},
    {"train", "grad_accum", CONFIG_INT, "1", "micro-batches per optimizer step"},
    {"train", "max_grad_norm", CONFIG_FLOAT, "1.0", "global gradient-norm clip; <= 0 disables clipping"},
    {"train", "eval_every", CONFIG_INT, "0", "evaluate on data.eval every N steps (0: only at the end)"},
    {"train", "eval_max_rows", CONFIG_INT, "0", "evaluate on the first N eval rows (0: all)"},
    {"train", "save_every", CONFIG_INT, "0", "checkpoint every N steps (0: only at the end)"},
    {"train", "keep_last", CONFIG_INT, "2", "complete checkpoints to keep (0: all)"},
    {"train", "max_shard_mb", CONFIG_FLOAT, "5000",
     "checkpoint weights above this many MB are sharded with model.safetensors.index.json, as transformers does "
     "(0: one file)"},
    {"train", "max_nonfinite_in_row", CONFIG_INT, "5", "abort after this many skipped (non-finite) steps in a row"},
    {"train", "stop_at_step", CONFIG_INT, "0", "stop (and save) after this step without changing the schedule (0: run all)"},
    {"train", "seed", CONFIG_INT, "42", "seed of the data order (and the loop's RNG)"},
    {"train", "progress", CONFIG_BOOL, "true", "print the live progress line on stderr"},
};

// Run tracking (train/, docs/tracking.md): views of metrics.jsonl for
// outside tools. Never part of the config hash: they do not change training.
static const ConfigField track_fields[] = {
    {"track", "tensorboard", CONFIG_BOOL, "false",
     "also write every metrics.jsonl line to a TensorBoard event file in train.out_dir/tb/"},
    {"track", "mlflow_uri", CONFIG_STRING, "",
     "also log the run to this MLflow tracking server (http://host:5000); empty: MLFLOW_TRACKING_URI, else no MLflow"},
    {"track", "experiment", CONFIG_STRING, "",
     "the MLflow experiment (created when missing); empty: MLFLOW_EXPERIMENT_NAME, else Default"},
    {"track", "mlflow_flush_s", CONFIG_FLOAT, "10",
     "at the end of training, wait at most this many seconds for queued metrics to reach MLflow"},
};

// AdamW and the LR schedule (optim/, docs/optimizer.md).
static const ConfigField optim_fields[] = {
    {"optim", "lr", CONFIG_FLOAT, "1e-5", "peak learning rate"},
    {"optim", "schedule", CONFIG_STRING, "cosine", "constant, constant_with_warmup, linear or cosine"},
    {"optim", "warmup_steps", CONFIG_INT, "0", "linear warmup steps (wins over warmup_ratio when > 0)"},
    {"optim", "warmup_ratio", CONFIG_FLOAT, "0", "warmup as a fraction of train.steps"},
    {"optim", "min_lr_ratio", CONFIG_FLOAT, "0", "cosine floor as a fraction of lr"},
    {"optim", "beta1", CONFIG_FLOAT, "0.9", "AdamW beta1"},
    {"optim", "beta2", CONFIG_FLOAT, "0.999", "AdamW beta2"},
    {"optim", "eps", CONFIG_FLOAT, "1e-8", "AdamW epsilon"},
    {"optim", "weight_decay", CONFIG_FLOAT, "0", "decoupled weight decay (not on norms; embeddings per decay_embeddings)"},
    {"optim", "decay_embeddings", CONFIG_BOOL, "false", "apply weight decay to the (tied) embedding too"},
};

// Training data (data/dataset.h, docs/datasets.md).
static const ConfigField data_fields[] = {
    {"data", "train", CONFIG_STRING, "", "HDF5 dataset from fimi data tokenize (required for training)"},
    {"data", "eval", CONFIG_STRING, "", "held-out HDF5 dataset for the eval loss (optional)"},
    {"data", "shuffle", CONFIG_BOOL, "true", "shuffle rows each epoch (deterministic per train.seed)"},
};

// GRPO (rl/, docs/grpo.md): read when train.objective = grpo.
static const ConfigField grpo_fields[] = {
    {"grpo", "tasks_per_step", CONFIG_INT, "16", "B: tasks per step (paper: 16)"},
    {"grpo", "group_size", CONFIG_INT, "4", "G: rollouts per task, compared with each other (paper: 4)"},
    {"grpo", "reward", CONFIG_STRING, "strict", "strict (seq check gated on order, the paper's signal) or set"},
    {"grpo", "scale_by_std", CONFIG_BOOL, "true", "divide advantages by the group's std (false: Dr. GRPO)"},
    {"grpo", "adv_eps", CONFIG_FLOAT, "1e-4", "added to the group std (TRL's 1e-4)"},
    {"grpo", "pass_threshold", CONFIG_FLOAT, "1.0", "a rollout passes at reward >= this (all-fail/all-pass groups)"},
    {"grpo", "updates_per_batch", CONFIG_INT, "1", "optimizer steps per batch of rollouts"},
    {"grpo", "max_draws", CONFIG_INT, "1",
     "dynamic sampling: batches of tasks_per_step tasks a step may draw so that every group's rewards differ (1: off)"},
    {"grpo", "clip_low", CONFIG_FLOAT, "0.2", "ratio clipped below at 1 - clip_low"},
    {"grpo", "clip_high", CONFIG_FLOAT, "0.2", "ratio clipped above at 1 + clip_high (DAPO: 0.28)"},
    {"grpo", "kl_coef", CONFIG_FLOAT, "0", "k3 KL penalty to the initial model (0: none)"},
    {"grpo", "loss_aggregation", CONFIG_STRING, "token_mean", "token_mean, seq_mean_token_mean or seq_mean_token_sum"},
    {"grpo", "temperature", CONFIG_FLOAT, "1.0", "sampling temperature of rollouts"},
    {"grpo", "top_p", CONFIG_FLOAT, "1.0", "nucleus mass of rollouts"},
    {"grpo", "max_turn_tokens", CONFIG_INT, "256", "sampled tokens per model turn at most"},
    {"grpo", "max_episode_tokens", CONFIG_INT, "1024", "sampled tokens per episode at most"},
    {"grpo", "context", CONFIG_INT, "2048", "tokens per episode at most (prompt included)"},
    {"grpo", "max_malformed", CONFIG_INT, "3", "malformed model turns in a row that end an episode"},
    {"grpo", "val_tasks", CONFIG_INT, "0", "validation tasks scored every train.eval_every steps (0: all of env.val_tasks)"},
    {"grpo", "val_greedy", CONFIG_BOOL, "true", "validation samples greedily (false: like training)"},
    {"grpo", "log_rollouts", CONFIG_INT, "0",
     "every N steps write the step's rollouts (ids, loss mask, sampling log-probs, reward, advantage) to "
     "OUT/rollouts/step_NNNNNN.jsonl (0: never)"},
};

// The environment GRPO plays (env/, docs/environment.md).
static const ConfigField env_fields[] = {
    {"env", "tasks", CONFIG_STRING, "", "training tasks: a JSONL task file (fimi env sample)"},
    {"env", "val_tasks", CONFIG_STRING, "", "validation tasks (optional): scored every train.eval_every steps"},
    {"env", "catalog", CONFIG_STRING, "family", "tools in the system prompt: all, area or family (docs/environment.md)"},
    {"env", "simulator", CONFIG_STRING, "rules",
     "who plays the customer: rules (the deterministic simulator) or model (a served model: simulator_*)"},
    {"env", "simulator_endpoint", CONFIG_STRING, "", "simulator = model: the chat-completions base URL (.../v1)"},
    {"env", "simulator_model", CONFIG_STRING, "", "simulator = model: the served model's name"},
    {"env", "simulator_api_key_file", CONFIG_STRING, "", "simulator = model: its API key (first line), else $OPENAI_API_KEY"},
    {"env", "simulator_temperature", CONFIG_FLOAT, "0.0", "simulator = model: sampling temperature of the customer"},
    {"env", "simulator_cache", CONFIG_STRING, "",
     "simulator = model: keep every answer in this folder (record; a rerun answers from it)"},
    {"env", "simulator_cache_mode", CONFIG_STRING, "record", "record, or replay (answers only from simulator_cache)"},
};

// The rollout engine (rl/rollout.h).
static const ConfigField rollout_fields[] = {
    {"rollout", "slots", CONFIG_INT, "8", "episodes decoded together (continuous batching)"},
    {"rollout", "share_prefix", CONFIG_BOOL, "true", "one prompt prefill per group of G rollouts"},
    {"rollout", "row_invariant", CONFIG_BOOL, "true",
     "CPU: one GEMM per decode row, so rollouts are bitwise the same whatever rollout.slots (slower decode)"},
    {"rollout", "prefill_chunk", CONFIG_INT, "64", "tokens per prefill pass"},
};

// Evaluation (eval/, docs/evaluation.md): fimi eval.
static const ConfigField eval_fields[] = {
    {"eval", "trials", CONFIG_INT, "1", "episodes per task (the learnable band and pass^k need >= 2)"},
    {"eval", "seed", CONFIG_INT, "1", "simulator phrasing and sampling seed: the same episodes for every model"},
    {"eval", "success", CONFIG_FLOAT, "1.0", "an episode succeeds when its reward (total) is >= this"},
    {"eval", "temperature", CONFIG_FLOAT, "0.0", "sampling temperature of the model's turns; 0 = greedy"},
    {"eval", "top_p", CONFIG_FLOAT, "1.0", "nucleus mass of the model's turns"},
    {"eval", "judge", CONFIG_STRING, "rules",
     "who decides the reward's judge check: rules (the task's rubric rules) or model (a served model: judge_*)"},
    {"eval", "judge_endpoint", CONFIG_STRING, "", "judge = model: the chat-completions base URL (.../v1)"},
    {"eval", "judge_model", CONFIG_STRING, "", "judge = model: the served model's name"},
    {"eval", "judge_api_key_file", CONFIG_STRING, "", "judge = model: its API key (first line), else $OPENAI_API_KEY"},
    {"eval", "judge_cache", CONFIG_STRING, "", "judge = model: keep every answer in this folder"},
    {"eval", "judge_cache_mode", CONFIG_STRING, "record", "record, or replay (answers only from judge_cache)"},
    {"eval", "timing", CONFIG_BOOL, "true",
     "write the run's wall time into the result file (false: 0, so that a run replayed from a served model's "
     "cache writes a byte-identical file)"},
};

// DPO (dpo/, docs/dpo.md): read when train.objective = dpo.
static const ConfigField dpo_fields[] = {
    {"dpo", "beta", CONFIG_FLOAT, "0.1", "DPO temperature beta (> 0)"},
    {"dpo", "rpo_alpha", CONFIG_FLOAT, "0", "TRL's rpo_alpha: adds this times the chosen side's token-mean NLL "
     "to the loss (0: off)"},
    {"dpo", "loss", CONFIG_STRING, "sigmoid", "sigmoid, ipo or hinge (TRL's loss_type)"},
    {"dpo", "reference", CONFIG_STRING, "precomputed", "precomputed (ref_logp_* in the datasets, computed by fimi train "
     "when missing) or model (a frozen copy of train.init in memory)"},
    {"dpo", "monitor_margin", CONFIG_FLOAT, "5.0", "divergence monitor: warn when rewards/margins stays above this"},
    {"dpo", "monitor_window", CONFIG_INT, "10", "divergence monitor: ... for this many consecutive steps"},
};

int cli_wants_help(int argc, char **argv, int from) {
  for (int i = from; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  return 0;
}

int cli_is_one_of(const char *arg, const char *const *names) {
  for (; *names; names++)
    if (!strcmp(arg, *names)) return 1;
  return 0;
}

const char *cli_flag_value(int argc, char **argv, int *i, FimiError *err) {
  if (*i + 1 >= argc) {
    fimi_fail(err, "%s needs a value", argv[*i]);
    return NULL;
  }
  *i += 1;
  return argv[*i];
}

int cli_parse_int(const char *flag, const char *text, long min, long max, long *out, FimiError *err) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || !*text || *end || v < min || v > max)
    return fimi_fail(err, "%s: expected an integer in [%ld, %ld], got \"%s\"", flag, min, max, text);
  *out = v;
  return 0;
}

int cli_parse_float(const char *flag, const char *text, double *out, FimiError *err) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || !*text || *end || !isfinite(v)) return fimi_fail(err, "%s: expected a number, got \"%s\"", flag, text);
  *out = v;
  return 0;
}

static int parse_log_level(const char *text, FimiError *err) {
  static const char *names[] = {"debug", "info", "warn", "error", "quiet"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(text, names[i])) {
      log_set_level((LogLevel)i);
      return 0;
    }
  return fimi_fail(err, "--log-level: expected debug, info, warn, error or quiet, got \"%s\"", text);
}

int cli_parse_common(CliOptions *opts, int argc, char **argv, FimiError *err) {
  memset(opts, 0, sizeof *opts);
  opts->device = DEVICE_CPU;
  int kept = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = NULL;
    if (!strcmp(arg, "--config")) {
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      opts->config_path = value;
    } else if (!strcmp(arg, "--set")) {
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      if (opts->num_overrides >= CLI_MAX_OVERRIDES) return fimi_fail(err, "too many --set options");
      opts->overrides[opts->num_overrides++] = value;
    } else if (!strcmp(arg, "--device")) {
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      if (device_parse(value, &opts->device, err) != 0) return -1;
    } else if (!strcmp(arg, "--log-level")) {
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      if (parse_log_level(value, err) != 0) return -1;
    } else {
      argv[kept++] = argv[i];
    }
  }
  return kept;
}

int cli_load_config(CliOptions *opts, FimiError *err) {
  memset(&opts->config, 0, sizeof opts->config);
  if (config_add_fields(&opts->config, model_fields, sizeof model_fields / sizeof model_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, generate_fields, sizeof generate_fields / sizeof generate_fields[0], err) != 0)
    return -1;
  if (config_add_fields(&opts->config, dist_fields, sizeof dist_fields / sizeof dist_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, train_fields, sizeof train_fields / sizeof train_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, track_fields, sizeof track_fields / sizeof track_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, cuda_fields, sizeof cuda_fields / sizeof cuda_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, optim_fields, sizeof optim_fields / sizeof optim_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, data_fields, sizeof data_fields / sizeof data_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, dpo_fields, sizeof dpo_fields / sizeof dpo_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, grpo_fields, sizeof grpo_fields / sizeof grpo_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, env_fields, sizeof env_fields / sizeof env_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, rollout_fields, sizeof rollout_fields / sizeof rollout_fields[0], err) != 0)
    return -1;
  if (config_add_fields(&opts->config, eval_fields, sizeof eval_fields / sizeof eval_fields[0], err) != 0) return -1;
  if (opts->config_path && config_load_file(&opts->config, opts->config_path, err) != 0) return -1;
  for (int i = 0; i < opts->num_overrides; i++)
    if (config_apply_override(&opts->config, opts->overrides[i], err) != 0) return -1;
  return 0;
}

const char *cli_fimi_version(void) { return FIMI_VERSION; }
const char *cli_git_commit(void) { return FIMI_GIT_COMMIT; }

int cli_fail(const char *command, const FimiError *err) {
  fprintf(stderr, "fimi %s: %s\n", command, err && err->failed ? err->message : "failed");
  return CLI_EXIT_FAILURE;
}

int parse_token_ids(const char *text, int vocab, int **ids, int *count, FimiError *err) {
  int capacity = 16, n = 0;
  int *out = malloc(sizeof(int) * (size_t)capacity);
  if (!out) return fimi_fail(err, "out of memory");
  const char *p = text;
  while (*p) {
    char *end = NULL;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno) {
      free(out);
      return fimi_fail(err, "token ids: expected an integer at position %d (\"%.20s\")", n, p);
    }
    if (v < 0 || v >= vocab) {
      free(out);
      return fimi_fail(err, "token ids: id %ld at position %d is outside the vocabulary [0, %d)", v, n, vocab);
    }
    if (n == capacity) {
      capacity *= 2;
      int *grown = realloc(out, sizeof(int) * (size_t)capacity);
      if (!grown) {
        free(out);
        return fimi_fail(err, "out of memory");
      }
      out = grown;
    }
    out[n++] = (int)v;
    p = end;
    while (*p == ' ') p++;
    if (*p == ',') p++;
    else if (*p) {
      free(out);
      return fimi_fail(err, "token ids: unexpected character '%c' after position %d (expected ',')", *p, n - 1);
    }
  }
  if (n == 0) {
    free(out);
    return fimi_fail(err, "token ids: empty list");
  }
  *ids = out;
  *count = n;
  return 0;
}

int cli_get_int(const Config *c, const char *section, const char *key, int *out, FimiError *err) {
  int64_t v = 0;
  if (config_get_int(c, section, key, &v, err) != 0) return -1;
  if (v < -(1 << 30) || v > (1 << 30)) return fimi_fail(err, "%s.%s: %lld is out of range", section, key, (long long)v);
  *out = (int)v;
  return 0;
}

int cli_rollout_settings(const Config *c, RolloutConfig *r, int *row_invariant, int *prefill_chunk, FimiError *err) {
  const char *catalog;
  if (cli_get_int(c, "grpo", "max_turn_tokens", &r->max_turn_tokens, err) ||
      cli_get_int(c, "grpo", "max_episode_tokens", &r->max_episode_tokens, err) ||
      cli_get_int(c, "grpo", "context", &r->context, err) ||
      cli_get_int(c, "grpo", "max_malformed", &r->max_malformed, err) ||
      !(catalog = config_get_string(c, "env", "catalog", err)) ||
      cli_get_int(c, "rollout", "slots", &r->slots, err) ||
      config_get_bool(c, "rollout", "share_prefix", &r->share_prefix, err) ||
      config_get_bool(c, "rollout", "row_invariant", row_invariant, err) ||
      cli_get_int(c, "rollout", "prefill_chunk", prefill_chunk, err))
    return -1;
  if (env_catalog_mode_parse(catalog, &r->catalog, err) != 0) return -1;
  if (*prefill_chunk < 1 || *prefill_chunk > 65536) return fimi_fail(err, "rollout.prefill_chunk must be in [1, 65536]");
  return 0;
}

int cli_sibling_path(const char *json_path, const char *suffix, char *out, size_t size, FimiError *err) {
  size_t n = strlen(json_path);
  int cut = n > 5 && !strcmp(json_path + n - 5, ".json");
  if ((size_t)snprintf(out, size, "%.*s%s", (int)(cut ? n - 5 : n), json_path, suffix) >= size)
    return fimi_fail(err, "%s: path too long", json_path);
  return 0;
}

int cli_speaks_for_the_job(void) {
  static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
    const char *v = getenv(rank_vars[i]);
    if (v && *v && strcmp(v, "0")) return 0;
  }
  return 1;
}

static void blas_line(char *line, int size) {
  BlasInfo info;
  blas_info(&info);
  blas_describe(&info, line, size);
}

void cli_print_blas(FILE *out) {
  char line[320];
  blas_line(line, sizeof line);
  fprintf(out, "BLAS: %s\n", line);
}

void cli_log_blas(void) {
  if (!cli_speaks_for_the_job() || log_get_level() > LOG_INFO) return;
  char line[320];
  blas_line(line, sizeof line);
  log_info("BLAS: %s", line);
}

int cli_stop_tokens(const GemmaConfig *cfg, const Tokenizer *tok, int *stops) {
  _Static_assert(CLI_MAX_STOP_TOKENS >= GEMMA_MAX_EXTRA_EOS + 3, "room for every stop id");
  int n = 0;
  stops[n++] = cfg->eos_token_id;
  for (int i = 0; i < cfg->num_extra_eos; i++) stops[n++] = cfg->extra_eos_token_ids[i];
  if (tok && tokenizer_specials(tok)->end_of_turn >= 0) stops[n++] = tokenizer_specials(tok)->end_of_turn;
  if (tok && tokenizer_specials(tok)->eos >= 0) stops[n++] = tokenizer_specials(tok)->eos;
  return n;
}
