// tests/slurm/layout_agree.c: launch/layout.sh must describe the ranks the
// way fimi itself will number and pair them. For a set of layouts (the
// paper's 5 x 8 DPO and GRPO ones, and every small one: 1-3 nodes, 1-3 GPUs,
// 0-3 env ranks per node, 1..N train nodes, 0 or 2 env ranks on train nodes)
// it runs `layout.sh --roles` and `--table`, builds fimi's RankLayout from
// that dist.roles value (parallel/roles.h, as `fimi train --set dist.roles=...`
// does) and checks, for every world rank: the role, the index within the
// role, the partner list (rank_layout_partners), the GPU (the local rank on
// its node for train ranks, none for env ranks) and that each node's ranks
// are consecutive world ranks starting at local rank 0.
// Usage: layout_agree PATH/TO/launch/layout.sh
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/roles.h"

static int failures = 0;

#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) {                               \
      fprintf(stderr, "FAIL %s: ", spec);        \
      fprintf(stderr, __VA_ARGS__);              \
      fprintf(stderr, "\n");                     \
      failures++;                                \
      return;                                    \
    }                                            \
  } while (0)

// Runs `bash script ARGS MODE`; returns its stdout (malloc'd) or NULL.
static char *run_layout(const char *script, const char *args, const char *mode) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "bash '%s' %s %s", script, args, mode);
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *out = malloc(cap);
  size_t got;
  while (out && (got = fread(out + n, 1, cap - 1 - n, p)) > 0) {
    n += got;
    if (n + 1 >= cap) out = realloc(out, cap *= 2);
  }
  int rc = pclose(p);
  if (!out || rc != 0) {
    free(out);
    return NULL;
  }
  out[n] = 0;
  return out;
}

// Compares one table line (rank host node local role index gpu cores partners)
// with fimi's layout.
static void check_layout(const char *spec, const char *script, const char *args) {
  char *roles = run_layout(script, args, "--roles");
  char *table = run_layout(script, args, "--table");
  CHECK(roles && table, "layout.sh %s failed", args);
  roles[strcspn(roles, "\n")] = 0;
  int world = 0;
  for (const char *p = table; *p; p++) world += *p == '\n';
  RankLayout layout;
  FimiError err = {0};
  CHECK(rank_layout_build(&layout, world, 0, roles, &err) == 0, "fimi refuses dist.roles=%s: %s", roles, err.message);
  int *partners = calloc((size_t)world + 1, sizeof(int));
  int prev_node = -1, prev_local = -1;
  char *save = NULL;
  char *line = strtok_r(table, "\n", &save);
  for (int r = 0; r < world; r++, line = strtok_r(NULL, "\n", &save)) {
    int rank, node, local, index;
    char host[128], role[16], gpu[16], cores[64], plist[4096];
    if (!line || sscanf(line, "%d\t%127s\t%d\t%d\t%15s\t%d\t%15s\t%63s\t%4095s", &rank, host, &node, &local, role,
                        &index, gpu, cores, plist) != 9) {
      fprintf(stderr, "FAIL %s: line %d unreadable: %s\n", spec, r, line ? line : "(none)");
      failures++;
      break;
    }
    int bad = rank != r || strcmp(role, rank_role_name(layout.role[r])) || index != layout.role_index[r];
    // A node's ranks are consecutive and start at local rank 0.
    bad |= node == prev_node ? local != prev_local + 1 : (local != 0 || node != prev_node + 1);
    char want_gpu[16];
    if (layout.role[r] == ROLE_TRAIN) snprintf(want_gpu, sizeof want_gpu, "%d", local);
    else snprintf(want_gpu, sizeof want_gpu, "-");
    bad |= strcmp(gpu, want_gpu) != 0;
    int count = rank_layout_partners(&layout, r, partners);
    char want[4096] = "";
    size_t used = 0;
    for (int i = 0; i < count; i++) used += snprintf(want + used, sizeof want - used, "%s%d", i ? "," : "", partners[i]);
    if (count == 0) snprintf(want, sizeof want, "-");
    bad |= strcmp(want, plist) != 0;
    if (bad) {
      fprintf(stderr, "FAIL %s: rank %d: layout.sh says \"%s\"; fimi: %s index %d, gpu %s, partners %s\n", spec, r,
              line, rank_role_name(layout.role[r]), layout.role_index[r], want_gpu, want);
      failures++;
      break;
    }
    prev_node = node, prev_local = local;
  }
  free(partners);
  rank_layout_free(&layout);
  free(roles);
  free(table);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: layout_agree PATH/TO/launch/layout.sh\n");
    return 2;
  }
  int layouts = 0;
  // The paper's layouts: DPO 5 x 8 GPUs; GRPO 8 train ranks + 32 env ranks;
  // 5 x (8 + 2) with env ranks beside every node's train ranks.
  const char *paper[] = {"--nodes 5 --gpus 8", "--nodes 5 --gpus 8 --train-nodes 1 --env-on-train-nodes 0 --env-per-node 8",
                         "--nodes 5 --gpus 8 --env-per-node 2 --cores-per-node 112"};
  for (size_t i = 0; i < sizeof paper / sizeof paper[0]; i++, layouts++) check_layout(paper[i], argv[1], paper[i]);
  for (int nodes = 1; nodes <= 3; nodes++)
    for (int gpus = 1; gpus <= 3; gpus++)
      for (int env = 0; env <= 3; env++)
        for (int train_nodes = 1; train_nodes <= nodes; train_nodes++)
          for (int env0 = 0; env0 <= 2; env0 += 2) {
            if (train_nodes < nodes && env == 0) continue;  // a CPU node without ranks (refused, checked below)
            char spec[256];
            snprintf(spec, sizeof spec, "--nodes %d --gpus %d --env-per-node %d --train-nodes %d --env-on-train-nodes %d",
                     nodes, gpus, env, train_nodes, env0);
            check_layout(spec, argv[1], spec);
            layouts++;
          }
  // Layouts fimi could not run are refused by layout.sh itself.
  const char *refused[] = {"--nodes 2 --gpus 2 --train-nodes 1", "--nodes 2 --gpus 0", "--nodes 2 --gpus 2 --train-nodes 3",
                           "--nodes 3 --gpus 8 --hosts a,b", "--nodes x --gpus 1"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char *out = run_layout(argv[1], refused[i], "--roles 2>/dev/null");
    if (out) {
      fprintf(stderr, "FAIL: layout.sh %s should be refused, printed %s\n", refused[i], out);
      failures++;
    }
    free(out);
  }
  printf("%d layouts compared with parallel/roles.c, %d refused layouts, %d failures\n", layouts,
         (int)(sizeof refused / sizeof refused[0]), failures);
  return failures ? 1 : 0;
}
