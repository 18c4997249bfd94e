// cmd/train_grpo.h: `fimi train` with train.objective = grpo: the [grpo]
// [env] [rollout] sections, the tasks, tokenizer, environment (in-process, or
// env ranks under mpirun) and the GRPO objective of rl/grpo.h wired to the
// loop (docs/grpo.md). Defines GrpoSetup, GrpoRun and their functions.
#ifndef FIMI_CMD_TRAIN_GRPO_H
#define FIMI_CMD_TRAIN_GRPO_H

#include "core/config.h"
#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/roles.h"
#include "rl/grpo.h"
#include "train/loop.h"

typedef struct GrpoSetup {
  GrpoConfig grpo;
  const char *tasks_path, *val_path;  // env.tasks, env.val_tasks
  int row_invariant;                  // rollout.row_invariant
  int prefill_chunk;                  // rollout.prefill_chunk
  const Config *config;               // borrowed: env.simulator and its keys, read when the env starts
} GrpoSetup;

// Reads and validates the sections (seed: train.seed). Errors name the key.
int grpo_setup_read(const Config *c, uint64_t seed, GrpoSetup *out, FimiError *err);
// --dry-run: the GRPO plan and the rollout memory for model (NULL: not
// estimated, because of `why`).
void grpo_setup_print(const GrpoSetup *g, const GemmaConfig *model, const char *why, int64_t micro_batch,
                      int64_t grad_accum);

typedef struct GrpoRun {
  GrpoSetup setup;
  TaskList tasks, val;
  int have_val;
  Tokenizer *tok;
  EnvClient env, val_env;
  int have_env, have_val_env;
  GemmaModel reference;
  int have_reference;
  struct OpenAIClient *customer;  // env.simulator = model (NULL: rules)
  GrpoObjective objective;
  GrpoModelOps ops;
  GrpoCpuAccess cpu;
} GrpoRun;

// Loads tasks and tokenizer, opens the environment (roles with env ranks:
// the MPI client to this train rank's partners; else in-process), builds
// the objective over `model` and fills obj and loop's hooks. init_dir
// gives the KL reference when grpo.kl_coef > 0. Do not copy a GrpoRun.
int grpo_run_init(GrpoRun *run, const GrpoSetup *setup, GemmaModel *model, const char *init_dir,
                  const char *tokenizer_path, const DistRoles *roles, Communicator *world, TrainObjective *obj,
                  TrainLoopConfig *loop, FimiError *err);
void grpo_run_free(GrpoRun *run);
void grpo_run_print_summary(const GrpoRun *run);

// An env rank's whole job: load the same task files and serve episodes
// until the train ranks are done.
int grpo_serve_env(const GrpoSetup *setup, const DistRoles *roles, Communicator *world, FimiError *err);

#endif
