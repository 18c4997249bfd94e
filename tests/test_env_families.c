// tests/test_env_families.c: every registered task family (env/tasks/).
// For every family and many seeds:
// task_generate succeeds (it validates the task and replays the gold chain),
// the task is deterministic (same seed, same JSON line), survives a JSON
// round trip, and the oracle agent scores reward 1.0 and strict 1.0 with the
// expected ending, while the do-nothing agent scores below 1. Also checks the
// coverage the families must have: use cases, kinds, chain lengths 0/1..8, styles,
// TRANSFER endings, unique names across the registry.
//
// FIMI_FAMILIES_SEEDS (default 100) sets the seeds per family;
// FIMI_FAMILIES_ONLY restricts the run to one family (for debugging).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/agents.h"
#include "env/episode.h"
#include "env/tasks/family.h"
#include "test_util.h"

#define IMAGE_SEED 1

typedef struct FamilyStats {
  int generated, oracle_ok, distinct, styles[TASK_STYLE_COUNT], min_gold, max_gold;
} FamilyStats;

// Number of distinct strings among lines[0..n) (NULL entries skipped).
static int count_distinct(char **lines, int n) {
  int distinct = 0;
  for (int i = 0; i < n; i++) {
    if (!lines[i]) continue;  // that seed failed (already reported)
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = lines[j] && strcmp(lines[i], lines[j]) == 0;
    distinct += !seen;
  }
  return distinct;
}

static void check_family(const TaskGenContext *ctx, EnvWorld *world, const TaskFamily *f, int seeds, FamilyStats *st) {
  memset(st, 0, sizeof *st);
  st->min_gold = 1 << 30;
  char **lines = calloc((size_t)seeds, sizeof *lines);
  char **content = calloc((size_t)seeds, sizeof *content);  // the task without its id (which names the seed)
  for (int s = 0; s < seeds; s++) {
    uint64_t seed = 1000 + (uint64_t)s * 7919;
    FimiError err = {0};
    Task task, again;
    if (task_generate(ctx, f, seed, &task, &err) != 0) {
      CHECK(0, "%s seed %llu: task_generate: %s", f->name, (unsigned long long)seed, err.message);
      continue;
    }
    st->generated++;
    CHECK(strcmp(task.family, f->name) == 0 && task.kind == f->kind && task.use_case == f->use_case,
          "%s: family/kind/use case not those of the family", f->name);
    st->styles[task.style]++;
    if (task.num_gold < st->min_gold) st->min_gold = task.num_gold;
    if (task.num_gold > st->max_gold) st->max_gold = task.num_gold;
    lines[s] = task_to_json_line(&task, &err);
    CHECK(lines[s] != NULL, "%s seed %llu: task_to_json_line: %s", f->name, (unsigned long long)seed, err.message);
    cJSON *json_no_id = task_to_json(&task, &err);
    if (json_no_id) {
      cJSON_DeleteItemFromObjectCaseSensitive(json_no_id, "id");
      content[s] = cJSON_PrintUnformatted(json_no_id);
      cJSON_Delete(json_no_id);
    }
    // Deterministic: the same seed gives the same line.
    if (task_generate(ctx, f, seed, &again, &err) == 0) {
      char *line2 = task_to_json_line(&again, &err);
      CHECK(lines[s] && line2 && strcmp(lines[s], line2) == 0, "%s seed %llu: not deterministic", f->name,
            (unsigned long long)seed);
      free(line2);
      task_free(&again);
    } else {
      CHECK(0, "%s seed %llu: second task_generate failed: %s", f->name, (unsigned long long)seed, err.message);
    }
    // JSON round trip through the strict reader.
    if (lines[s]) {
      cJSON *json = cJSON_Parse(lines[s]);
      Task parsed;
      int rc = json ? task_from_json(json, &parsed, &err) : -1;
      CHECK(rc == 0, "%s seed %llu: task_from_json: %s", f->name, (unsigned long long)seed, err.message);
      if (rc == 0) {
        char *line3 = task_to_json_line(&parsed, &err);
        CHECK(line3 && strcmp(line3, lines[s]) == 0, "%s: JSON round trip changed the task", f->name);
        free(line3);
        task_free(&parsed);
      }
      cJSON_Delete(json);
    }
    // The oracle solves it exactly; doing nothing does not.
    RewardBreakdown r;
    if (agent_run_episode(world, &task, seed, AGENT_ORACLE, &r, &err) != 0) {
      CHECK(0, "%s seed %llu: oracle episode: %s", f->name, (unsigned long long)seed, err.message);
    } else {
      int ok = r.total == 1.0 && r.strict_total == 1.0 && r.end == task.expected_end;
      st->oracle_ok += ok;
      CHECK(ok,
            "%s seed %llu: oracle total %.4f strict %.4f seq %.3f db %.0f comm %.3f judge %.3f end %s (expected %s)"
            " turns %d/%d",
            f->name, (unsigned long long)seed, r.total, r.strict_total, r.seq, r.db, r.comm, r.judge,
            task_end_name(r.end), task_end_name(task.expected_end), r.turns, task.max_turns);
    }
    if (s < 5) {
      RewardBreakdown z;
      if (agent_run_episode(world, &task, seed, AGENT_DO_NOTHING, &z, &err) == 0)
        CHECK(z.total < 1.0, "%s seed %llu: the do-nothing agent scored %.3f", f->name, (unsigned long long)seed,
              z.total);
    }
    task_free(&task);
  }
  st->distinct = count_distinct(content, seeds);
  for (int s = 0; s < seeds; s++) {
    free(lines[s]);
    free(content[s]);
  }
  free(lines);
  free(content);
}

int main(void) {
  const char *env_seeds = getenv("FIMI_FAMILIES_SEEDS"), *only = getenv("FIMI_FAMILIES_ONLY");
  int seeds = env_seeds ? atoi(env_seeds) : 100;
  if (seeds < 1) seeds = 1;
  FimiError err = {0};
  TaskGenContext ctx;
  EnvWorld *world = NULL;
  if (task_gen_context_init(&ctx, IMAGE_SEED, &err) != 0 || env_world_create(&world, &err) != 0) {
    fprintf(stderr, "setup: %s\n", err.message);
    return 1;
  }
  int count = task_family_count();
  CHECK(count >= 62, "only %d families in the registry (need >= 62)", count);
  int use_cases[TASK_USE_COUNT] = {0}, kinds[TASK_KIND_COUNT] = {0}, transfer = 0, min_gold = 1 << 30, max_gold = 0;
  int total_generated = 0, total_ok = 0;
  for (int i = 0; i < count; i++) {
    const TaskFamily *f = task_family_at(i);
    CHECK(task_family_find(f->name) == f, "family name %s is not unique in the registry", f->name);
    use_cases[f->use_case]++;
    kinds[f->kind]++;
    if (only && strcmp(only, f->name) != 0) continue;
    FamilyStats st;
    check_family(&ctx, world, f, seeds, &st);
    total_generated += st.generated;
    total_ok += st.oracle_ok;
    // Variety: the seed must change the task, and all three styles appear.
    if (seeds >= 50) {
      CHECK(st.distinct >= 5, "%s: only %d distinct tasks over %d seeds", f->name, st.distinct, seeds);
      for (int k = 0; k < TASK_STYLE_COUNT; k++)
        CHECK(st.styles[k] > 0, "%s: style %s never generated", f->name, task_style_name((TaskStyle)k));
    }
    if (st.generated) {
      if (st.min_gold < min_gold) min_gold = st.min_gold;
      if (st.max_gold > max_gold) max_gold = st.max_gold;
    }
    Task probe;
    if (task_generate(&ctx, f, 1, &probe, &err) == 0) {
      transfer += probe.expected_end == TASK_END_TRANSFER;
      task_free(&probe);
    }
    printf("%-24s %-15s %-6s generated %3d oracle 1.0 %3d distinct %3d gold %d..%d\n", f->name,
           task_use_case_name(f->use_case), task_kind_name(f->kind), st.generated, st.oracle_ok, st.distinct,
           st.min_gold, st.max_gold);
  }
  for (int u = 0; u < TASK_USE_COUNT; u++)
    CHECK(use_cases[u] >= 4, "use case %s has %d families (want >= 4)", task_use_case_name((TaskUseCase)u),
          use_cases[u]);
  for (int k = 0; k < TASK_KIND_COUNT; k++)
    CHECK(kinds[k] >= 3, "kind %s has %d families (want >= 3)", task_kind_name((TaskKind)k), kinds[k]);
  if (!only) {
    // 0 is an out-of-scope refusal (no tool at all); 8 the deepest chain.
    CHECK(min_gold <= 1 && max_gold == 8, "gold chains span %d..%d actions, want 0 or 1..8", min_gold, max_gold);
    CHECK(transfer >= 2, "only %d families end with TRANSFER", transfer);
  }
  printf("families %d, tasks %d, oracle reward 1.0 on %d\n", count, total_generated, total_ok);
  env_world_free(world);
  task_gen_context_free(&ctx);
  TEST_MAIN_END();
}
