// parallel/roles.c: rank layouts from the [dist] config and the role
// communicators (see roles.h).
#include "parallel/roles.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *rank_role_name(RankRole role) { return role == ROLE_ENV ? "env" : "train"; }

void rank_layout_free(RankLayout *layout) {
  free(layout->role);
  free(layout->role_index);
  free(layout->train_world_rank);
  free(layout->env_world_rank);
  memset(layout, 0, sizeof *layout);
}

// One item of dist.roles: "train" or "env", optionally "*N". Skips spaces.
static int parse_role_item(const char *item, size_t len, int number, RankRole *role, long *repeat, FimiError *err) {
  while (len && isspace((unsigned char)item[0])) item++, len--;
  while (len && isspace((unsigned char)item[len - 1])) len--;
  const char *star = memchr(item, '*', len);
  size_t name_len = star ? (size_t)(star - item) : len;
  while (name_len && isspace((unsigned char)item[name_len - 1])) name_len--;
  if (name_len == 5 && !memcmp(item, "train", 5))
    *role = ROLE_TRAIN;
  else if (name_len == 3 && !memcmp(item, "env", 3))
    *role = ROLE_ENV;
  else
    return fimi_fail(err, "dist.roles item %d \"%.*s\": expected train or env, optionally *N", number, (int)len, item);
  *repeat = 1;
  if (!star) return 0;
  char digits[16];
  const char *p = star + 1;
  size_t n = (size_t)(item + len - p);  // the digits after '*', spaces included
  while (n && isspace((unsigned char)*p)) p++, n--;
  if (n == 0 || n >= sizeof digits) return fimi_fail(err, "dist.roles item %d \"%.*s\": bad count", number, (int)len, item);
  memcpy(digits, p, n);
  digits[n] = 0;
  for (size_t i = 0; i < n; i++)
    if (!isdigit((unsigned char)digits[i]))
      return fimi_fail(err, "dist.roles item %d \"%.*s\": bad count", number, (int)len, item);
  errno = 0;
  long v = strtol(digits, NULL, 10);
  if (errno || v < 1 || v > INT_MAX)
    return fimi_fail(err, "dist.roles item %d \"%.*s\": count must be in [1, %d]", number, (int)len, item, INT_MAX);
  *repeat = v;
  return 0;
}

// Fills layout->role from roles_text; the total must equal the world size.
static int roles_from_text(RankLayout *layout, const char *text, FimiError *err) {
  long total = 0;
  int number = 0;
  const char *p = text;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    RankRole role = ROLE_TRAIN;
    long repeat = 0;
    if (parse_role_item(p, len, ++number, &role, &repeat, err) != 0) return -1;
    if (repeat > (long)layout->world - total)
      return fimi_fail(err, "dist.roles lists more than %d ranks, but the world has %d (mpirun -np %d)",
                       layout->world, layout->world, layout->world);
    for (long i = 0; i < repeat; i++) layout->role[total++] = role;
    if (!comma) break;
    p = comma + 1;
  }
  if (total != layout->world)
    return fimi_fail(err, "dist.roles lists %ld ranks, but the world has %d (mpirun -np %d)", total, layout->world,
                     layout->world);
  return 0;
}

static int index_roles(RankLayout *layout, FimiError *err) {
  for (int r = 0; r < layout->world; r++) {
    int *n = layout->role[r] == ROLE_ENV ? &layout->num_env : &layout->num_train;
    layout->role_index[r] = (*n)++;
  }
  if (layout->num_train == 0)
    return fimi_fail(err, "dist: no train rank among the %d ranks (%d env ranks); at least one is needed",
                     layout->world, layout->num_env);
  layout->train_world_rank = fimi_calloc((size_t)layout->num_train, sizeof(int), err);
  layout->env_world_rank = fimi_calloc((size_t)layout->num_env + 1, sizeof(int), err);
  if (!layout->train_world_rank || !layout->env_world_rank) return -1;
  for (int r = 0; r < layout->world; r++) {
    int *table = layout->role[r] == ROLE_ENV ? layout->env_world_rank : layout->train_world_rank;
    table[layout->role_index[r]] = r;
  }
  return 0;
}

int rank_layout_build(RankLayout *layout, int world, int env_ranks, const char *roles_text, FimiError *err) {
  memset(layout, 0, sizeof *layout);
  int have_text = roles_text && roles_text[0];
  if (world < 1) return fimi_fail(err, "dist: world size must be >= 1, got %d", world);
  if (env_ranks < 0) return fimi_fail(err, "dist.env_ranks must be >= 0, got %d", env_ranks);
  if (have_text && env_ranks > 0)
    return fimi_fail(err, "dist.env_ranks = %d and dist.roles are both set; use one of them", env_ranks);
  if (env_ranks >= world)
    return fimi_fail(err, "dist.env_ranks = %d leaves no train rank in a world of %d ranks (mpirun -np %d)", env_ranks,
                     world, world);
  layout->world = world;
  layout->role = fimi_calloc((size_t)world, sizeof *layout->role, err);
  layout->role_index = fimi_calloc((size_t)world, sizeof *layout->role_index, err);
  if (!layout->role || !layout->role_index) goto fail;
  if (have_text) {
    if (roles_from_text(layout, roles_text, err) != 0) goto fail;
  } else {
    for (int r = 0; r < world; r++) layout->role[r] = r >= world - env_ranks ? ROLE_ENV : ROLE_TRAIN;
  }
  if (index_roles(layout, err) != 0) goto fail;
  return 0;
fail:
  rank_layout_free(layout);
  return -1;
}

// Reads dist.env_ranks and dist.roles (the schema rows are in cmd/cli.c).
static int read_dist_keys(const Config *config, int *env_ranks, const char **roles, FimiError *err) {
  int64_t value = 0;
  if (config_get_int(config, "dist", "env_ranks", &value, err) != 0) return -1;
  if (value < 0 || value > INT_MAX)
    return fimi_fail(err, "dist.env_ranks must be in [0, %d], got %lld", INT_MAX, (long long)value);
  *env_ranks = (int)value;
  *roles = config_get_string(config, "dist", "roles", err);
  return *roles ? 0 : -1;
}

int rank_layout_from_config(RankLayout *layout, const Config *config, int world, FimiError *err) {
  memset(layout, 0, sizeof *layout);
  int env_ranks;
  const char *roles;
  if (read_dist_keys(config, &env_ranks, &roles, err) != 0) return -1;
  return rank_layout_build(layout, world, env_ranks, roles, err);
}

int rank_layout_partners(const RankLayout *layout, int world_rank, int *out) {
  if (world_rank < 0 || world_rank >= layout->world || layout->num_env == 0) return 0;
  int m = layout->num_train < layout->num_env ? layout->num_train : layout->num_env;
  int mine = layout->role_index[world_rank] % m;
  int count = 0;
  for (int r = 0; r < layout->world; r++)
    if (layout->role[r] != layout->role[world_rank] && layout->role_index[r] % m == mine) out[count++] = r;
  return count;
}

int dist_roles_init(DistRoles *roles, Communicator *world, int env_ranks, const char *roles_text, FimiError *err) {
  memset(roles, 0, sizeof *roles);
  roles->role_comm.mpi = MPI_COMM_NULL;
  if (!world || world->mpi == MPI_COMM_NULL) return fimi_fail(err, "dist roles: world communicator not initialized");
  if (rank_layout_build(&roles->layout, world->world, env_ranks, roles_text, err) != 0) return -1;
  RankLayout *layout = &roles->layout;
  roles->world_rank = world->rank;
  roles->role = layout->role[world->rank];
  roles->role_index = layout->role_index[world->rank];
  roles->partners = fimi_calloc((size_t)world->world, sizeof(int), err);
  if (!roles->partners) goto fail;
  roles->num_partners = rank_layout_partners(layout, world->rank, roles->partners);
  MPI_Comm split = MPI_COMM_NULL;
  int rc = MPI_Comm_split(world->mpi, (int)roles->role, world->rank, &split);
  if (comm_check_mpi(rc, "MPI_Comm_split", world, err) != 0) goto fail;
  rc = comm_init(&roles->role_comm, split, err);
  MPI_Comm_free(&split);  // role_comm holds its own duplicate
  if (rc != 0) goto fail;
  if (roles->role_comm.rank != roles->role_index) {
    fimi_fail(err, "dist roles: rank %d is %s rank %d in the layout but %d in the split communicator", world->rank,
              rank_role_name(roles->role), roles->role_index, roles->role_comm.rank);
    goto fail;
  }
  return 0;
fail:
  dist_roles_free(roles);
  return -1;
}

int dist_roles_from_config(DistRoles *roles, Communicator *world, const Config *config, FimiError *err) {
  memset(roles, 0, sizeof *roles);
  roles->role_comm.mpi = MPI_COMM_NULL;
  int env_ranks;
  const char *text;
  if (read_dist_keys(config, &env_ranks, &text, err) != 0) return -1;
  return dist_roles_init(roles, world, env_ranks, text, err);
}

void dist_roles_free(DistRoles *roles) {
  rank_layout_free(&roles->layout);
  comm_free(&roles->role_comm);
  free(roles->partners);
  memset(roles, 0, sizeof *roles);
  roles->role_comm.mpi = MPI_COMM_NULL;
}
