// eval/harness.h: the held-out harness (docs/evaluation.md). Plays every
// task of a task file `trials` times, either with a model through the
// rollout engine of rl/rollout.h (the episode path GRPO trains on, never a
// copy of it) or with one of env/agents.h's scripted agents, and records
// each episode in EvalResults. Defines EvalConfig, eval_env_seed,
// eval_run_policy and eval_run_agent.
//
// Every model and agent meets the same episodes: trial t of task T opens
// T's seeded database with the simulator seed eval_env_seed(seed, T.id, t),
// which depends on the task's id, not its position in the file. Model
// episode g (task-major order) samples from stream g of one call
// (rollout_run_part), played in chunks of EVAL_CHUNK episodes or slots if
// more (a progress line after each), so a fixed seed gives the same
// results whatever rollout.slots is (bitwise on the CPU with a
// row-invariant policy).
#ifndef FIMI_EVAL_HARNESS_H
#define FIMI_EVAL_HARNESS_H

#include <stdint.h>

#include "core/error.h"
#include "env/agents.h"
#include "eval/results.h"
#include "rl/env_client.h"
#include "rl/rollout.h"

#define EVAL_CHUNK 64

typedef struct EvalConfig {
  int trials;             // eval.trials: episodes per task
  uint64_t seed;          // eval.seed
  double success;         // eval.success: an episode succeeds when its reward >= this
  RolloutConfig rollout;  // eval.temperature/top_p into sampler, [rollout] and [grpo] budgets
  int progress;           // print a progress line with ETA on stderr
  int chunk;              // model episodes per rollout call (and progress line); results do not depend on it
  // env.simulator = model: the served model playing the customer (borrowed;
  // NULL: the rule-based simulator) and its temperature. eval_run_agent and
  // eval_run_served set it on their worlds; a model's EnvClient is the
  // caller's to set (env_world_set_customer_model).
  struct OpenAIClient *customer;
  double customer_temperature;
} EvalConfig;

// 1 trial, seed 1, success 1.0, rollout_config_default with greedy
// sampling (temperature 0), progress on, chunk EVAL_CHUNK.
void eval_config_default(EvalConfig *c);
int eval_config_validate(const EvalConfig *c, FimiError *err);

// The simulator seed of trial `trial` of the task with id `task_id`.
uint64_t eval_env_seed(uint64_t seed, const char *task_id, int trial);

// Plays env's tasks x trials with the policy; appends to out (whose info the
// caller fills). An episode the environment fails is recorded (failed,
// end "failed"), never fatal.
int eval_run_policy(const EvalConfig *c, RolloutPolicy *policy, EnvClient *env, const Tokenizer *tok,
                    EvalResults *out, FimiError *err);
// The same episodes played by a scripted agent in this process.
int eval_run_agent(const EvalConfig *c, EnvAgentKind kind, const TaskList *tasks, EvalResults *out, FimiError *err);

#endif
