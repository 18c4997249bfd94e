// tests/test_env_families.c: every registered task family (env/tasks/).
// For every family and many seeds:
// task_generate succeeds (it validates the task and replays the gold chain),
// the task is deterministic (same seed, same JSON line; the first 25 seeds), survives a JSON
// round trip, and the oracle agent scores reward 1.0 and strict 1.0 with the
// expected ending, while the do-nothing agent scores below 1. Also checks the
// coverage the families must have: use cases, kinds, chain lengths 0/1..8, styles,
// TRANSFER endings, unique names across the registry. And the corpus rules
// of the FiMI paper (section 5.1): 100 families, 50 in the shallow slice
// (gold chains of at most 6 actions) and 50 in the deep slice (up to 8);
// every gold action carries reward-relevant arguments; every edge task
// declares a refusal (a write never called, or a hand-off or out-of-scope
// ending) that one of its declared checks scores; graded families span
// several chain lengths and communication families declare the comm check
// (the only ones that do; the judge only where words are the point, every
// other task seq+db);
// named variants are unique, every task names one of its family's variants
// and every variant occurs; a channel family's app tasks start logged in
// without the verify step.
//
// FIMI_FAMILIES_SEEDS (default 100) sets the seeds per family;
// FIMI_FAMILIES_ONLY restricts the run to one family (for debugging).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/agents.h"
#include "env/bank/tools.h"
#include "env/episode.h"
#include "env/tasks/family.h"
#include "test_util.h"

#define IMAGE_SEED 1
#define FAMILIES 100
#define DETERMINISM_SEEDS 25  // seeds per family generated twice

typedef struct FamilyStats {
  int generated, oracle_ok, distinct, styles[TASK_STYLE_COUNT], min_gold, max_gold;
  int with_variant, variant_seen[16], gold_lengths[TASK_SLICE_DEEP_MAX_GOLD + 2];
} FamilyStats;

// The consent flag is checked apart from the arguments the sequence check
// compares.
static int free_argument(const char *arg) { return strcmp(arg, "customer_confirmed") == 0; }

// Actions of four first-round families whose arguments are all free text or
// the agent's call (a hand-off reason, a service request's wording and
// category): they keep the name-only comparison (and the corpus's
// relevant-arguments gate leaves them out).
static int legacy_name_only(const char *family, const char *tool) {
  static const char *const legacy[][2] = {{"recovery_complaint", "transfer_to_human_agent"},
                                          {"claim_escalate", "transfer_to_human_agent"},
                                          {"request_escalate", "transfer_to_human_agent"},
                                          {"complaint_request", "create_service_request"}};
  for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++)
    if (strcmp(family, legacy[i][0]) == 0 && strcmp(tool, legacy[i][1]) == 0) return 1;
  return 0;
}

// Every gold action with arguments (the consent flag aside) compares at
// least one of them, and no compared value is empty.
static void check_relevant(const Task *t) {
  for (int i = 0; i < t->num_gold; i++) {
    const TaskAction *a = &t->gold[i];
    int arguments = 0;
    for (const cJSON *arg = a->arguments ? a->arguments->child : NULL; arg; arg = arg->next)
      arguments += !free_argument(arg->string);
    CHECK(a->num_relevant > 0 || arguments == 0 || legacy_name_only(t->family, a->name),
          "%s: gold step %d (%s) has arguments but none is reward-relevant", t->id, i, a->name);
    for (int r = 0; r < a->num_relevant; r++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->arguments, a->relevant[r]);
      CHECK(v && !(cJSON_IsString(v) && !*v->valuestring), "%s: gold step %d: relevant %s is empty", t->id, i,
            a->relevant[r]);
    }
  }
}

// An edge task refuses: a write it must never call, a value it must never
// say, or a hand-off or out-of-scope ending; a declared check scores that
// refusal (the judge, or
// the db check for a write that stays uncalled or a hand-off in the chain);
// and a chain that has steps runs a check (a read or the hand-off) first.
static void check_edge(const Task *t) {
  int refuses_write = 0, ends_early = 0, withholds = 0;
  for (int i = 0; i < t->num_assertions; i++) {
    const TaskAssertion *a = &t->assertions[i];
    if (a->rule == TASK_RULE_NOT_CALLED && a->num_args == 1) {
      int k = env_tool_index(a->args[0]);
      refuses_write += k >= 0 && env_tool_writes(k);
    }
    if (a->rule == TASK_RULE_END_IS && a->num_args == 1 && strcmp(a->args[0], "stop") != 0) ends_early = 1;
    withholds += a->rule == TASK_RULE_MENTIONS_NONE;
  }
  int hand_off = 0, reads = 0;
  for (int i = 0; i < t->num_gold; i++) {
    int k = env_tool_index(t->gold[i].name);
    hand_off += strcmp(t->gold[i].name, "transfer_to_human_agent") == 0;
    reads += k >= 0 && !env_tool_writes(k) && strcmp(t->gold[i].name, "verify_customer") != 0;
  }
  CHECK(refuses_write || ends_early || withholds,
        "%s: edge task without a refusal (not_called on a write, mentions_none, or end_is)", t->id);
  int scored = (t->checks & TASK_CHECK_JUDGE) || ((t->checks & TASK_CHECK_DB) && (refuses_write || hand_off));
  CHECK(scored, "%s: no declared check scores the refusal", t->id);
  CHECK(t->num_gold == 0 || reads > 0 || hand_off > 0, "%s: edge chain runs no check before refusing", t->id);
}

// The declared checks follow docs/tasks.md ("Declared checks"): comm only in
// communication families, which must declare it; the judge only where what is
// said is the point (an out-of-scope ending or data withheld: mentions_none);
// everything else exactly seq and db.
static void check_declared(const TaskFamily *f, const Task *t) {
  int said = 0;
  for (int i = 0; i < t->num_assertions; i++) {
    const TaskAssertion *a = &t->assertions[i];
    said += a->rule == TASK_RULE_MENTIONS_NONE ||
            (a->rule == TASK_RULE_END_IS && a->num_args == 1 && strcmp(a->args[0], "out_of_scope") == 0);
  }
  int comm_family = (f->flags & TASK_FAMILY_COMMUNICATION) != 0;
  CHECK(comm_family == ((t->checks & TASK_CHECK_COMM) != 0), "%s: declares comm %s a communication family", t->id,
        comm_family ? "not, yet is" : "without being");
  if (t->checks & TASK_CHECK_JUDGE) CHECK(said, "%s: declares the judge with nothing only words show", t->id);
  if (!comm_family && !(t->checks & TASK_CHECK_JUDGE))
    CHECK(t->checks == (TASK_CHECK_SEQ | TASK_CHECK_DB), "%s: declares %d, not seq+db", t->id, t->checks);
}

// The variant a task names, as an index into its family's variants (-1: none).
static int variant_index(const TaskFamily *f, const Task *t) {
  char name[160];
  for (int v = 0; t->variant && task_family_variant(f, v, name, sizeof name) == 0; v++)
    if (strcmp(name, t->variant) == 0) return v;
  return -1;
}

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
    if (task.num_gold <= TASK_SLICE_DEEP_MAX_GOLD) st->gold_lengths[task.num_gold]++;
    check_relevant(&task);
    if (task.kind == TASK_KIND_EDGE) check_edge(&task);
    check_declared(f, &task);
    if (f->flags & TASK_FAMILY_CHANNELS) {  // the app channel: logged in, no verify step
      int app = task.variant && strncmp(task.variant, TASK_APP_PREFIX, strlen(TASK_APP_PREFIX)) == 0;
      int verifies = task.num_gold > 0 && strcmp(task.gold[0].name, "verify_customer") == 0;
      CHECK(app == (task.authenticated != NULL) && app == !verifies, "%s: channel %s, authenticated %s, verify %d",
            task.id, app ? "app" : "call", task.authenticated ? task.authenticated : "-", verifies);
    }
    if (f->flags & TASK_FAMILY_COMMUNICATION)
      CHECK((task.checks & TASK_CHECK_COMM) && task.num_communicate > 0,
            "%s: a communication task must declare comm and name a value", task.id);
    if (task.variant) {
      int v = variant_index(f, &task);
      CHECK(v >= 0, "%s: variant %s is not one of its family's (%s)", task.id, task.variant, f->variants);
      st->with_variant++;
      if (v >= 0 && v < 16) st->variant_seen[v]++;
    }
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
    // Deterministic: the same seed gives the same line (checked on the
    // first seeds of each family: generation is the test's largest cost).
    if (s < DETERMINISM_SEEDS) {
      int rc = task_generate(ctx, f, seed, &again, &err);
      CHECK(rc == 0, "%s seed %llu: second task_generate failed: %s", f->name, (unsigned long long)seed, err.message);
      char *line2 = rc == 0 ? task_to_json_line(&again, &err) : NULL;
      CHECK(rc != 0 || (lines[s] && line2 && strcmp(lines[s], line2) == 0), "%s seed %llu: not deterministic",
            f->name, (unsigned long long)seed);
      free(line2);
      if (rc == 0) task_free(&again);
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
  CHECK(count == FAMILIES, "%d families in the registry (want %d)", count, FAMILIES);
  int use_cases[TASK_USE_COUNT] = {0}, kinds[TASK_KIND_COUNT] = {0}, transfer = 0, min_gold = 1 << 30, max_gold = 0;
  int slices[TASK_SLICE_COUNT] = {0}, graded = 0, communication = 0, variants = 0;
  int total_generated = 0, total_ok = 0;
  for (int i = 0; i < count; i++) {
    const TaskFamily *f = task_family_at(i);
    CHECK(task_family_find(f->name) == f, "family name %s is not unique in the registry", f->name);
    use_cases[f->use_case]++;
    kinds[f->kind]++;
    slices[f->slice]++;
    graded += (f->flags & TASK_FAMILY_GRADED) != 0;
    communication += (f->flags & TASK_FAMILY_COMMUNICATION) != 0;
    CHECK(task_family_in_training_sample(f) == !(f->flags & (TASK_FAMILY_GRADED | TASK_FAMILY_COMMUNICATION)),
          "%s: training-sample membership disagrees with its flags", f->name);
    int nv = task_family_variant_count(f);
    CHECK(nv >= 1 && nv <= 16, "%s: %d named variants (want 1..16)", f->name, nv);
    for (int v = 0; v < nv; v++) {
      char name[160], other[160];
      CHECK(task_family_variant(f, v, name, sizeof name) == 0 && strchr(name, '/') && name[0] != '/',
            "%s: variant %d has no prefix", f->name, v);
      for (int j = 0; j < i; j++)
        for (int w = 0; task_family_variant(task_family_at(j), w, other, sizeof other) == 0; w++)
          CHECK(strcmp(name, other) != 0, "variant %s named twice", name);
      for (int w = 0; w < v; w++)
        CHECK(task_family_variant(f, w, other, sizeof other) == 0 && strcmp(name, other) != 0,
              "variant %s named twice", name);
    }
    variants += nv;
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
      // The slice rule: shallow chains at most 6 actions, deep at most 8.
      int cap = f->slice == TASK_SLICE_SHALLOW ? TASK_SLICE_SHALLOW_MAX_GOLD : TASK_SLICE_DEEP_MAX_GOLD;
      CHECK(st.max_gold <= cap, "%s: %s slice but a gold chain of %d actions (max %d)", f->name,
            f->slice == TASK_SLICE_SHALLOW ? "shallow" : "deep", st.max_gold, cap);
      // Every family records a variant on every task.
      CHECK(st.with_variant == st.generated, "%s: %d of %d tasks record a variant", f->name, st.with_variant,
            st.generated);
      if (st.with_variant && seeds >= 50)
        for (int v = 0; v < nv && v < 16; v++)
          CHECK(st.variant_seen[v] > 0, "%s: variant %d never generated over %d seeds", f->name, v, seeds);
      int lengths = 0;
      for (int g = 0; g <= TASK_SLICE_DEEP_MAX_GOLD; g++) lengths += st.gold_lengths[g] > 0;
      if ((f->flags & TASK_FAMILY_GRADED) && seeds >= 50)
        CHECK(lengths >= 3, "%s: a graded family spans %d chain lengths (want an easy, a medium, a hard)", f->name,
              lengths);
      if (st.min_gold < min_gold) min_gold = st.min_gold;
      if (st.max_gold > max_gold) max_gold = st.max_gold;
    }
    Task probe;
    if (task_generate(&ctx, f, 1, &probe, &err) == 0) {
      transfer += probe.expected_end == TASK_END_TRANSFER;
      task_free(&probe);
    }
    printf("%-24s %-15s %-6s %-7s generated %3d oracle 1.0 %3d distinct %3d gold %d..%d variants %d%s%s\n",
           f->name, task_use_case_name(f->use_case), task_kind_name(f->kind),
           f->slice == TASK_SLICE_SHALLOW ? "shallow" : "deep", st.generated, st.oracle_ok, st.distinct, st.min_gold,
           st.max_gold, nv, f->flags & TASK_FAMILY_GRADED ? " graded" : "",
           f->flags & TASK_FAMILY_COMMUNICATION ? " communication" : "");
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
  // The two rounds of the corpus, 50 families each; graded and
  // communication families among the second round.
  CHECK(slices[TASK_SLICE_SHALLOW] == FAMILIES / 2 && slices[TASK_SLICE_DEEP] == FAMILIES / 2,
        "slices: %d shallow, %d deep (want %d each)", slices[TASK_SLICE_SHALLOW], slices[TASK_SLICE_DEEP], FAMILIES / 2);
  CHECK(graded >= 5 && communication >= 5, "%d graded and %d communication families (want >= 5 each)", graded,
        communication);
  printf("slices: %d shallow, %d deep; %d graded, %d communication; %d named variants\n", slices[TASK_SLICE_SHALLOW],
         slices[TASK_SLICE_DEEP], graded, communication, variants);
  printf("families %d, tasks %d, oracle reward 1.0 on %d\n", count, total_generated, total_ok);
  env_world_free(world);
  task_gen_context_free(&ctx);
  TEST_MAIN_END();
}
