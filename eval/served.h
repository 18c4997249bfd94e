// eval/served.h: the held-out harness with a served model as the agent
// (docs/serving.md, "Served models as agents"): every episode of the
// harness (the same tasks, trials, simulator seeds and reward as
// eval_run_policy and eval_run_agent) played through net/'s chat-completions
// client. Defines EvalServedConfig and eval_run_served.
//
// One episode: the system message is the bank's instructions, `tools` the
// task's catalog (env.catalog) as OpenAI function schemas, the first user
// message the customer's opening line. Each answer becomes one agent turn:
// a tool call is rendered in fimi's call syntax (its text before the call
// kept), anything else is the message. Customer replies come back as user
// messages, tool results as tool messages ({"error": ...} for a failed
// call), so `fimi serve` shows its model exactly the turns a rollout would
// (up to re-tokenizing the model's own turns). Budgets are the rollout
// engine's: max_tokens = grpo.max_turn_tokens per answer (an answer cut
// there is malformed), grpo.max_episode_tokens of generated tokens,
// grpo.max_malformed malformed answers in a row; a refusal with code
// context_length_exceeded ends the episode as "context", any other refusal
// as "failed". A malformed answer (no content and no call, arguments that
// are not an object, several calls) is a malformed turn, never a crash.
// Token columns are the server's usage: generated = completion tokens,
// tokens = prompt + completion tokens of every request.
#ifndef FIMI_EVAL_SERVED_H
#define FIMI_EVAL_SERVED_H

#include "eval/harness.h"
#include "net/openai_client.h"

typedef struct EvalServedConfig {
  int concurrency;  // episodes played at once (threads); results do not depend on it
} EvalServedConfig;

// Plays the tasks x trials with the served model; appends to out in the
// harness's order (task-major). Fails when the server cannot be reached
// (after the client's retries) or a replay misses its cache; an episode
// the server refuses is recorded, never fatal.
int eval_run_served(const EvalConfig *c, const EvalServedConfig *s, OpenAIClient *client, const TaskList *tasks,
                    EvalResults *out, FimiError *err);

#endif
