// parallel/roles.h: rank roles. Defines RankRole, RankLayout (which world rank
// is a train rank or an env rank, from the [dist] config: `env_ranks = N`
// makes the last N ranks env ranks, or `roles` lists them explicitly), the
// round-robin pairing of train and env ranks, and DistRoles: this rank's
// role, its index within the role, its partners, and a Communicator over the
// ranks of its role (MPI_Comm_split of the world), which is the train
// communicator ZeRO-3 runs on.
//
// Pairing (docs/distributed.md): with T train and E env ranks and
// m = min(T, E), train index t and env index e are partners iff
// t mod m == e mod m. So with E <= T env rank e serves trains e, e+E, ...
// and every train rank has exactly one env rank; with E > T every train rank
// t is served by envs t, t+T, ...; nobody is left without a partner.
#ifndef FIMI_PARALLEL_ROLES_H
#define FIMI_PARALLEL_ROLES_H

#include "core/config.h"
#include "core/error.h"
#include "parallel/comm.h"

typedef enum { ROLE_TRAIN = 0, ROLE_ENV = 1 } RankRole;

// Pure description of the layout; the same on every rank (no MPI).
typedef struct RankLayout {
  int world, num_train, num_env;
  RankRole *role;         // [world]
  int *role_index;        // [world]: position among the ranks of the same role
  int *train_world_rank;  // [num_train]: world rank of train index t
  int *env_world_rank;    // [num_env]: world rank of env index e
} RankLayout;

// Builds the layout for `world` ranks from env_ranks (>= 0) or from roles_text
// ("train*6,env*2", "train,train,env", ...; NULL or "" = not set). At most one
// of them may be set. Errors name the key (dist.env_ranks, dist.roles), the
// offending item and the world size.
int rank_layout_build(RankLayout *layout, int world, int env_ranks, const char *roles_text, FimiError *err);
// The same from a Config holding the [dist] keys (see cmd/cli.c).
int rank_layout_from_config(RankLayout *layout, const Config *config, int world, FimiError *err);
void rank_layout_free(RankLayout *layout);
// World ranks of the partners of world_rank (the other role, round robin),
// in increasing order; out needs room for num_env (train) or num_train (env).
int rank_layout_partners(const RankLayout *layout, int world_rank, int *out);
const char *rank_role_name(RankRole role);

typedef struct DistRoles {
  RankLayout layout;
  int world_rank;
  RankRole role;
  int role_index;     // == role_comm.rank
  Communicator role_comm;  // the ranks of this rank's role (train or env)
  int *partners;      // world ranks, see rank_layout_partners
  int num_partners;
} DistRoles;

// Collective over world: every rank must call it with the same layout
// arguments. Splits world by role (key = world rank, so role_comm ranks
// follow world order).
int dist_roles_init(DistRoles *roles, Communicator *world, int env_ranks, const char *roles_text, FimiError *err);
int dist_roles_from_config(DistRoles *roles, Communicator *world, const Config *config, FimiError *err);
void dist_roles_free(DistRoles *roles);

#endif
