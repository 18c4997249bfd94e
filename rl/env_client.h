// rl/env_client.h: episodes of the bank as the rollout engine sees them, one
// interface whether they run in this process or on env ranks over MPI
// (docs/grpo.md, "Environment ranks"). Defines EnvRequest, EnvReply,
// EnvClient (a struct of callbacks) and the in-process client
// (env_client_local_create); rl/env_mpi.h adds the MPI client and the env
// rank's server loop.
//
// Calls are batched: the engine sends every request of a decode step at once
// (the MPI client fans them out over its env ranks and waits for all
// replies), so no episode waits on another episode's turn of the model. A
// batch's replies come back in request order, so the engine's schedule, and
// with it every token, is the same however fast each env rank answers.
//
// Episodes are named by the caller: `episode` is any id unique among this
// client's open episodes. An episode that fails inside the environment (a
// task that cannot be opened, an internal error) comes back with failed = 1
// and the reason, and counts as closed; the call itself fails only when the
// transport does (an env rank is gone), and then the run must stop.
#ifndef FIMI_RL_ENV_CLIENT_H
#define FIMI_RL_ENV_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/toolcall.h"
#include "env/reward.h"
#include "env/tasks/task.h"

typedef struct EnvRequest {
  int64_t episode;   // the caller's id for the episode
  int task;          // open: index into the client's task list
  uint64_t seed;     // open: the simulator's phrasing seed
  ToolCallSyntax syntax;  // open: the syntax of the agent's calls and the tool turns (0: JSON)
  const char *text;  // step: the agent turn (any bytes; borrowed)
  size_t len;
} EnvRequest;

typedef enum { ENV_REPLY_CUSTOMER = 0, ENV_REPLY_TOOL = 1 } EnvReplyKind;

typedef struct EnvReply {
  EnvReplyKind kind;  // open: CUSTOMER (the first message)
  char *text;         // malloc'd (env_reply_clear frees): customer line or tool turn content
  int done;
  TaskEnd end;        // how the episode ended (NONE while running)
  int turns;          // agent turns used so far
  int failed;         // the environment failed this episode; error says why
  char error[FIMI_ERROR_MESSAGE_MAX + 160];
  RewardBreakdown reward;  // finish: the episode's reward (zeros when failed)
} EnvReply;

void env_reply_clear(EnvReply *reply);

typedef struct EnvClient {
  // open: requests carry episode, task, seed; replies the first customer line.
  int (*open)(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err);
  // step: requests carry episode and text; replies the observation.
  int (*step)(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err);
  // finish: requests carry episode; scores and closes it (reply.reward).
  int (*finish)(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err);
  void (*free)(void *ctx);
  void *ctx;
  const TaskList *tasks;  // borrowed: what `task` indexes
  // Seconds spent inside the environment's own calls (env_open/step/score),
  // summed over the env ranks' replies for the MPI client.
  double env_seconds;
} EnvClient;

// Episodes run here, on one EnvWorld (single thread). tasks must outlive
// the client; do not copy an EnvClient after creating it.
int env_client_local_create(EnvClient *client, const TaskList *tasks, FimiError *err);
// The in-process client's world (for env_world_set_customer_model).
struct EnvWorld;
struct EnvWorld *env_client_local_world(EnvClient *client);
void env_client_free(EnvClient *client);

#endif
