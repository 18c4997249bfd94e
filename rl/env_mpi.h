// rl/env_mpi.h: episodes on env ranks over MPI (docs/grpo.md, "Environment
// ranks"). Defines env_client_mpi_create (the EnvClient of a train rank,
// whose episodes run on its partner env ranks of parallel/roles.h) and
// env_rank_serve (the loop an env rank runs until every partner train rank
// has closed its client).
//
// Routing: episode id e goes to partner env rank e mod (number of partners),
// so the same episode always lands on the same env rank. Each env rank holds
// many open episodes at once (any number of train ranks' episodes), answers
// every request of a batch in one reply message, and never fails the run for
// an episode: an episode the environment cannot run comes back failed with
// its reason (rl/env_client.h). Both sides load the same task file, and
// requests name tasks by index.
#ifndef FIMI_RL_ENV_MPI_H
#define FIMI_RL_ENV_MPI_H

#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/roles.h"
#include "env/tasks/task.h"
#include "rl/env_client.h"

// Train rank side. roles and world must outlive the client; env_client_free
// tells the partner env ranks this train rank is done.
int env_client_mpi_create(EnvClient *client, const TaskList *tasks, const DistRoles *roles, Communicator *world,
                          FimiError *err);

typedef struct EnvServeStats {
  int64_t requests;      // requests answered (open + step + finish)
  int64_t episodes;      // episodes opened
  int64_t failed;        // episodes that came back failed
  double env_seconds;    // inside env_open / env_step / env_score
} EnvServeStats;

// Env rank side: serves the partner train ranks until each has closed its
// client. Fails only on transport errors. customer (NULL: the rule-based
// simulator) plays the customer of every episode at temperature
// (env_world_set_customer_model). stats may be NULL.
struct OpenAIClient;
int env_rank_serve(const TaskList *tasks, const DistRoles *roles, Communicator *world, struct OpenAIClient *customer,
                   double temperature, EnvServeStats *stats, FimiError *err);

#endif
