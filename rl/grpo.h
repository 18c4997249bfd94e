// rl/grpo.h: the GRPO objective on the shared training loop (docs/grpo.md).
// Defines GrpoConfig (the [grpo] section), GrpoStepStats, GrpoObjective and
// the hooks it gives train/loop.h: begin_step (rollouts of the step's B
// tasks x G, rewards, advantages), train_batch (the clipped policy loss on
// a micro-batch of rollouts), validate (mean reward on the validation
// tasks), step_metrics and the state a resume restores.
//
// A step: B tasks from the task file in a shuffled, resumable order (the
// same loader as datasets: data/dataset.h), each played G times from one
// shared simulator seed with per-rollout sampling streams; reward per
// rollout = strict_total (grpo.reward = strict, Eq. 3 with Eq. 4's order
// gate) or total (set); advantages per group; then the loop's micro-batches
// are rollouts: rows index the step's B * G rollouts in order, so
// train.micro_batch * train.grad_accum must equal B * G. With max_draws D >
// 1 (dynamic sampling, as DAPO's), groups whose rollouts all scored alike
// are replaced by groups of further batches of B tasks that differ, up to
// D batches a step. updates_per_batch
// = K reuses one batch of rollouts for K optimizer steps (the ratio against
// the sampling-time log-probs is then no longer 1 after the first).
//
// Across train ranks (grpo_objective_set_rollout_comm), each rank plays its
// share of a call's rollouts (grpo_rollout_share: whole groups in contiguous
// blocks) and the finished rollouts are exchanged
// (grpo_rollouts_all_gather), so every rank then holds the whole set,
// bitwise what one rank playing all of them gets (rollout j samples from
// stream j wherever it is played, rl/rollout.h).
#ifndef FIMI_RL_GRPO_H
#define FIMI_RL_GRPO_H

#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "parallel/comm.h"
#include "rl/env_client.h"
#include "rl/grpo_loss.h"
#include "rl/rollout.h"
#include "train/loop.h"
#include "train/objective.h"
#include "train/state.h"

typedef enum { GRPO_REWARD_STRICT = 0, GRPO_REWARD_SET = 1 } GrpoRewardKind;

typedef struct GrpoConfig {
  int tasks_per_step;        // grpo.tasks_per_step: B
  int group_size;            // grpo.group_size: G
  GrpoRewardKind reward;     // grpo.reward: strict | set
  int scale_by_std;          // grpo.scale_by_std
  double adv_eps;            // grpo.adv_eps
  double pass_threshold;     // grpo.pass_threshold: a rollout passes at reward >= it (all-fail groups)
  int updates_per_batch;     // grpo.updates_per_batch
  int max_draws;             // grpo.max_draws: batches of B tasks a step may draw to fill it with signal groups
  GrpoLossConfig loss;       // grpo.clip_low, clip_high, kl_coef, loss_aggregation
  RolloutConfig rollout;     // sampling, budgets, slots, catalog
  int val_tasks;             // grpo.val_tasks: validation tasks scored (0: all)
  int val_greedy;            // grpo.val_greedy: validation samples greedily (1) or like training (0)
  int log_rollouts;          // grpo.log_rollouts: every N steps write the step's rollouts (0: never)
  uint64_t seed;             // train.seed
} GrpoConfig;

// B 16, G 4, strict, scale_by_std, eps 1e-4, pass 1.0, 1 update per batch,
// grpo_loss_config_default, rollout_config_default, all val tasks, greedy.
void grpo_config_default(GrpoConfig *c);
int grpo_config_validate(const GrpoConfig *c, FimiError *err);
int grpo_reward_kind_parse(const char *name, GrpoRewardKind *out, FimiError *err);

// What one train rank did in a call's rollouts (metrics rank_*: one entry
// per train rank, measured by the rank that played them).
typedef struct GrpoRankWork {
  int64_t rollouts;                       // rollouts it played
  int64_t prefill_tokens, decode_tokens;  // its engine's work (RolloutTimes)
} GrpoRankWork;

// The rollouts [*first, *first + *count) of a call of n that train rank
// `rank` of `world` plays: whole groups of `group` rollouts in contiguous
// blocks when there are at least `world` groups (a group's prompt is then
// prefilled once), else single rollouts in contiguous blocks; block sizes
// differ by at most one unit.
void grpo_rollout_share(int n, int group, int rank, int world, int *first, int *count);

// Collective over the train ranks: this rank played out[first .. first +
// count) of grpo_rollout_share(n, group, ...) (ok = 0: it failed, and then
// every rank fails), with `mine` its work; afterwards every rank holds all n
// rollouts (its own untouched, the others' unpacked into out, which must be
// zeroed or freed there) and all[r] each rank's work (world entries).
int grpo_rollouts_all_gather(Communicator *comm, Rollout *out, int n, int group, int ok, const GrpoRankWork *mine,
                             GrpoRankWork *all, FimiError *err);

// What one step measured (metrics.jsonl; docs/grpo.md lists the fields).
typedef struct GrpoStepStats {
  int rollouts, failed;
  double reward_mean, reward_std;
  double seq, seq_frac, db, comm, judge, total, strict_total;  // means over rollouts
  GrpoGroupStats groups;     // of the step's first draw of B tasks
  int draws;                 // batches of B tasks drawn (1 without dynamic sampling)
  int signal_groups;         // groups of the trained batch whose rewards differ
  GrpoLossStats loss;        // summed over the step's micro-batches
  double gen_tokens, turns, tool_calls, tool_errors, malformed;  // means per episode
  int ends[ROLLOUT_END_COUNT];
  RolloutTimes times;         // this rank's own rollouts
  double update_seconds, rollout_seconds;
  double exchange_seconds;     // in grpo_rollouts_all_gather (waiting for the other ranks included)
} GrpoStepStats;

// How the objective runs the policy model for rollouts and the reference for
// KL. make_policy builds a RolloutPolicy over the current weights (CPU: the
// loop's model; ZeRO-3: the gathered full model; GPU: a bf16 copy) and
// free_policy releases it after the step's rollouts.
typedef struct GrpoModelAccess {
  int (*make_policy)(void *ctx, TrainState *s, int slots, int capacity, RolloutPolicy *out, FimiError *err);
  void (*free_policy)(void *ctx, RolloutPolicy *p);
  void *ctx;
} GrpoModelAccess;

// The training-side model calls when they are not the loop's GemmaModel
// (ZeRO-3 across ranks: cmd/cmd_train.c). A micro-batch's rollouts are cut
// into units of `unit` rollouts, unit u runs on rank u % world as its call
// u / world (ranks without a unit in the last round run unit 0 with zero
// gradients), and the loss sums are all-reduced: parallel/zero3.h's unit rule.
typedef struct GrpoModelOps {
  int (*forward)(void *ctx, const int *tokens, const int *targets, int B, int T, float *logprobs, FimiError *err);
  int (*backward)(void *ctx, const float *dlogprobs, FimiError *err);
  int (*all_reduce_sum)(void *ctx, double *data, int count, FimiError *err);
  void *ctx;
  int rank, world, unit;
} GrpoModelOps;

typedef struct GrpoObjective {
  GrpoConfig config;
  const TaskList *tasks;      // training tasks (borrowed)
  const TaskList *val;        // validation tasks (borrowed; NULL: none)
  EnvClient *env;             // over `tasks` (borrowed)
  EnvClient *val_env;         // over `val` (borrowed)
  const Tokenizer *tok;       // borrowed
  GemmaModel *reference;      // frozen initial model for KL (NULL when kl_coef == 0)
  GrpoModelAccess access;
  const GrpoModelOps *ops;    // NULL: the loop's model, one process
  DatasetLoader task_loader;  // the task order (resumable)
  int pad_id, max_len;
  // The step's rollouts and their advantages.
  Rollout *rollouts;          // (B * G)
  double *adv;                // (B * G)
  double total_tokens, total_seqs;
  int64_t batch_step;         // step whose begin_step made the rollouts
  // One micro-batch: (rows, T) arrays.
  int *tokens, *targets;
  float *mask, *old_logp, *ref_logp, *logp, *dlogp;
  double *row_adv;
  size_t cap;
  GrpoStepStats last;         // the last step's statistics
  double last_val;            // the last validation score (NAN: none)
  double best_val;            // the best validation score of this invocation (NAN: none)
  GrpoStepStats last_val_stats;
  Dataset rows;               // a dataset of B * G empty rows: the loop's micro-batch indices
  Communicator *comm;         // the train ranks that split the rollouts (NULL: this rank plays all)
  GrpoRankWork *work;         // (train ranks) the last step's rollouts, per rank
  GrpoRankWork *val_work;     // (train ranks) the last validation's
  int work_ranks;             // entries of work and val_work
  const char *out_dir;        // the loop's train.out_dir (rollout logs go to OUT/rollouts/)
} GrpoObjective;

// Sets up the objective and fills obj (train_batch) and the hooks of loop
// (begin_step, validate, step_metrics, objective_save/load). The task
// loader shuffles with config->seed.
int grpo_objective_init(GrpoObjective *g, const GrpoConfig *config, const GemmaConfig *model, const TaskList *tasks,
                        const TaskList *val, EnvClient *env, EnvClient *val_env, const Tokenizer *tok,
                        GemmaModel *reference, const GrpoModelAccess *access, TrainObjective *obj,
                        TrainLoopConfig *loop, FimiError *err);
void grpo_objective_free(GrpoObjective *g);
// Runs the training-side model through ops (borrowed) from now on.
void grpo_objective_set_model_ops(GrpoObjective *g, const GrpoModelOps *ops);
// Splits every call's rollouts (training and validation) across the ranks
// of comm (borrowed; the train ranks, each running this objective in step);
// world 1 or NULL: this rank plays all.
int grpo_objective_set_rollout_comm(GrpoObjective *g, Communicator *comm, FimiError *err);
// The validation score of the current weights (what the loop's validate
// hook runs): mean reward over the validation tasks; stats may be NULL.
int grpo_validate(GrpoObjective *g, TrainState *s, double *score, GrpoStepStats *stats, FimiError *err);

// A CPU GrpoModelAccess over the loop's model (world 1) or, sharded, the
// full model the TrainState gathers into (train_state_sync_model); settings
// (borrowed, must outlive a) from [rollout].
typedef struct GrpoCpuAccess {
  int prefill_chunk;  // rollout.prefill_chunk
  int row_invariant;  // rollout.row_invariant
} GrpoCpuAccess;
void grpo_access_cpu(GrpoModelAccess *a, const GrpoCpuAccess *settings);

#endif
