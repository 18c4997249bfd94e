// rl/rollout.h: the rollout engine (docs/grpo.md, "Rollouts"). Plays many
// episodes of the bank at once against a policy with a KV cache: batched
// decode over slots, prompts and observations prefilled in chunks, the G
// rollouts of a task sharing one prefill of their prompt, continuous
// batching (a slot whose episode ends takes the next waiting one). Defines
// RolloutPolicy (the model behind callbacks: CPU here, GPU in cmd/),
// RolloutConfig, RolloutEnd, Rollout, RolloutJob and rollout_run.
//
// Token bookkeeping never re-renders: an episode's ids are its prompt
// (<bos>, system turn, first customer turn, generation prompt) rendered once,
// then each sampled token exactly as sampled, then each observation rendered
// as its own turn (data/chat.h) and appended. mask is 1 exactly on sampled
// tokens (including the policy's own <end_of_turn>); logp holds each sampled
// token's log-probability under the policy at temperature 1 when it was
// sampled, so re-scoring the ids with the forward pass reproduces it.
//
// Determinism: rollout j samples from its own stream
// rng_seed(seed ^ (j + 1) * 0x9E3779B97F4A7C15), and the engine's schedule
// depends only on the jobs and the config (env replies come back in request
// order, rl/env_client.h), so the rollouts are the same whatever the env
// transport; with a row-invariant CPU policy each row's logits do not depend
// on the other rows of a batch, so they are also the same whatever
// rollout.slots is (tested).
#ifndef FIMI_RL_ROLLOUT_H
#define FIMI_RL_ROLLOUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/tokenizer.h"
#include "env/agent_prompt.h"
#include "env/reward.h"
#include "model/decode.h"
#include "rl/env_client.h"

// The policy with `slots` KV-cache sequences of `capacity` tokens each.
typedef struct RolloutPolicy {
  // Appends n tokens to sequence `slot`, writes the next-token logits (V).
  int (*prefill)(void *ctx, int slot, const int *tokens, int n, float *logits, FimiError *err);
  // One token for each active sequence (tokens, active: slots entries);
  // logits (slots, V) rows of active sequences are written.
  int (*decode)(void *ctx, const int *tokens, const int *active, float *logits, FimiError *err);
  // Sequence dst becomes a copy of sequence src.
  int (*copy)(void *ctx, int dst, int src, FimiError *err);
  // Empties sequence slot.
  void (*reset)(void *ctx, int slot);
  // Keeps the first `length` cached tokens of sequence slot (length <= what
  // it holds): `fimi serve` reuses a cached prompt prefix this way.
  void (*truncate)(void *ctx, int slot, int length);
  void *ctx;
  int vocab, slots, capacity;
} RolloutPolicy;

// A CPU policy over model (borrowed) with its own cache; free with
// rollout_policy_cpu_free. chunk: tokens per prefill pass; row_invariant:
// decode rows one GEMM each (model/decode.h), which makes rollouts bitwise
// the same whatever rollout.slots is, at some decode speed.
int rollout_policy_cpu_create(RolloutPolicy *p, GemmaModel *model, int slots, int capacity, int chunk,
                              int row_invariant, FimiError *err);
void rollout_policy_cpu_free(RolloutPolicy *p);

typedef struct RolloutConfig {
  SamplerConfig sampler;     // grpo.temperature, grpo.top_p
  int slots;                 // rollout.slots: episodes decoded together
  int max_turn_tokens;       // grpo.max_turn_tokens: sampled tokens per model turn
  int max_episode_tokens;    // grpo.max_episode_tokens: sampled tokens per episode
  int context;               // grpo.context: tokens per episode (prompt + everything after)
  int max_malformed;         // grpo.max_malformed: malformed model turns in a row that end an episode
  int share_prefix;          // rollout.share_prefix: one prompt prefill per group
  EnvCatalogMode catalog;    // env.catalog
} RolloutConfig;

// temperature 1, top_p 1, slots 8, 256 tokens a turn, 1024 an episode,
// context 2048, 3 malformed turns, prefix sharing on, catalog family.
void rollout_config_default(RolloutConfig *c);
int rollout_config_validate(const RolloutConfig *c, FimiError *err);

// Why an episode ended: the customer simulator (stop, transfer, out of
// scope) or the environment's turn budget, or one of the engine's limits.
typedef enum {
  ROLLOUT_END_STOP = 0,
  ROLLOUT_END_TRANSFER,
  ROLLOUT_END_OUT_OF_SCOPE,
  ROLLOUT_END_TURN_BUDGET,
  ROLLOUT_END_TOKEN_BUDGET,
  ROLLOUT_END_CONTEXT,
  ROLLOUT_END_MALFORMED,
  ROLLOUT_END_FAILED,  // the environment failed the episode (error says why)
  ROLLOUT_END_COUNT
} RolloutEnd;

// "stop", "transfer", "out_of_scope", "turn_budget", "token_budget",
// "context", "malformed", "failed".
const char *rollout_end_name(RolloutEnd end);

typedef struct Rollout {
  int task;            // index in the client's task list
  int group;           // the job's group
  uint64_t env_seed;   // the simulator's seed (shared by a group)
  int32_t *ids;        // (len) the whole episode, exactly as the policy saw it
  uint8_t *mask;       // (len) 1 on sampled tokens
  float *logp;         // (len) sampling-time log-prob on sampled tokens, 0 elsewhere
  int len, cap;
  int prompt_len;      // tokens before the first sampled one
  RewardBreakdown reward;
  RolloutEnd end;
  int turns;           // model turns
  int tool_calls;      // model turns that parsed as a tool call
  int tool_errors;     // tool turns that came back as an error (incl. parse errors)
  int malformed;       // model turns cut at max_turn_tokens or with a broken call
  int sampled;         // sampled tokens (sum of mask)
  char error[FIMI_ERROR_MESSAGE_MAX + 160];  // ROLLOUT_END_FAILED: why
} Rollout;

void rollout_free(Rollout *r);

// One episode to play: task index, group (rollouts of a group share
// env_seed and, with share_prefix, one prompt prefill; a group's jobs must
// be adjacent), the simulator seed.
typedef struct RolloutJob {
  int task;
  int group;
  uint64_t env_seed;
} RolloutJob;

typedef struct RolloutTimes {
  double prefill, decode, env, other;  // seconds
  int64_t prefill_tokens, decode_tokens, shared_prefill_tokens;
} RolloutTimes;

// Plays jobs[0..n) to the end; out[j] (zeroed by the caller or freed
// rollouts) gets rollout j. Fails only on the policy's or the transport's
// errors (an episode's own failures are recorded in it). times may be NULL
// (added to, not cleared).
int rollout_run(const RolloutConfig *c, RolloutPolicy *policy, EnvClient *env, const Tokenizer *tok,
                const RolloutJob *jobs, int n, uint64_t seed, Rollout *out, RolloutTimes *times, FimiError *err);
// rollout_run for rollouts first .. first + n - 1 of a larger call: job j
// here samples from the stream of rollout first + j, so the parts of a call
// split across train ranks give exactly its rollouts (rollout_run is first 0).
int rollout_run_part(const RolloutConfig *c, RolloutPolicy *policy, EnvClient *env, const Tokenizer *tok,
                     const RolloutJob *jobs, int n, int first, uint64_t seed, Rollout *out, RolloutTimes *times,
                     FimiError *err);

// A finished rollout as bytes (native byte order: the ranks run one binary),
// for the exchange between train ranks: every field, ids, mask, logp and the
// error text. rollout_unpack reads one from in[0..size) into r (zeroed or
// freed), sets *used, and fails on a truncated or inconsistent record.
size_t rollout_packed_size(const Rollout *r);
void rollout_pack(const Rollout *r, uint8_t *out);  // writes rollout_packed_size(r) bytes
int rollout_unpack(const uint8_t *in, size_t size, Rollout *r, size_t *used, FimiError *err);

#endif
