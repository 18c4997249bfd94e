// tests/test_env_task.c: the task format (env/tasks/task.h, docs/tasks.md): a
// builder-made task and one generated task of every registered family
// survive JSON -> Task -> JSON unchanged; the strict reader rejects each kind
// of malformed task naming the field (and the line in a JSONL file); JSON
// paths and scalar texts resolve as documented; generation is deterministic;
// the optional variant key round-trips, is absent when unset and must name
// the task's family; family metadata (variants, training-sample membership)
// reads as documented.
#include <stdlib.h>
#include <string.h>

#include "env/episode.h"
#include "env/tasks/task.h"
#include "env/tasks/family.h"
#include "test_util.h"

static int build_task(Task *t, FimiError *err) {
  task_init(t);
  const char *words[] = {"limit", "cap", NULL};
  const char *tool[] = {"get_transfer_limits", NULL};
  if (task_set(&t->id, err, "t-%d", 1) || task_set(&t->family, err, "hand_made") ||
      task_set(&t->persona, err, "A tester") || task_set(&t->reason, err, "Kuch help chahiye \xe2\x82\xb9 please") ||
      task_add_field(t, "customer_id", "NVC10001", err) || task_add_field(t, "amount", "5000", err) ||
      task_add_field_keyword(t, "amount", "how much", err) || task_add_fixture(t, "UPDATE clock SET today = today", err) ||
      task_set(&t->today, err, "2026-01-20") ||
      task_add_gold(t, "get_transfer_limits", "{}", NULL, 0, err) < 0 ||
      task_add_gold(t, "get_deposit_loan_rates", "{\"product_type\":\"fd\",\"x\":[1,2.5,{\"a\":null}]}",
                    "product_type", 1, err) < 0 ||
      task_add_communicate(t, "imps", 0, "imps_per_transaction_limit", err) ||
      task_add_confirm(t, "nothing in particular", -1, NULL, err) ||
      task_add_confirm(t, "the first rate", 1, "rates.0.rate_percent", err) ||
      task_add_assertion(t, "mentions the limit", TASK_RULE_MENTIONS_ANY, words, err) ||
      task_add_assertion(t, "checks limits", TASK_RULE_CALLED, tool, err))
    return -1;
  t->kind = TASK_KIND_EDGE;
  t->use_case = TASK_USE_ACCOUNTS_KYC;
  t->style = TASK_STYLE_HINGLISH;
  t->image_seed = 7;
  t->max_turns = 9;
  t->expected_end = TASK_END_OUT_OF_SCOPE;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_COMM | TASK_CHECK_JUDGE;
  t->authenticated = NULL;
  return 0;
}

static void test_round_trip_builder(void) {
  FimiError err = {0};
  Task t, back;
  CHECK(build_task(&t, &err) == 0, "build: %s", err.message);
  CHECK(task_validate(&t, &err) == 0, "validate: %s", err.message);
  char *line = task_to_json_line(&t, &err);
  CHECK(line != NULL, "to_json: %s", err.message);
  cJSON *json = cJSON_Parse(line);
  CHECK(task_from_json(json, &back, &err) == 0, "from_json: %s", err.message);
  cJSON_Delete(json);
  char *again = task_to_json_line(&back, &err);
  CHECK(line && again && strcmp(line, again) == 0, "round trip changed the line:\n%s\n%s", line, again);
  // Field by field, so a writer and reader that drop the same field both fail.
  CHECK(back.kind == TASK_KIND_EDGE && back.use_case == TASK_USE_ACCOUNTS_KYC && back.style == TASK_STYLE_HINGLISH,
        "enums");
  CHECK(back.image_seed == 7 && back.max_turns == 9 && back.expected_end == TASK_END_OUT_OF_SCOPE, "numbers");
  CHECK(back.checks == (TASK_CHECK_SEQ | TASK_CHECK_COMM | TASK_CHECK_JUDGE), "checks %d", back.checks);
  CHECK(back.num_fields == 2 && strcmp(back.fields[1].value, "5000") == 0 && back.fields[1].num_keywords == 1, "fields");
  CHECK(back.num_gold == 2 && back.gold[1].confirm == 1 && back.gold[1].num_relevant == 1, "gold");
  CHECK(back.num_confirms == 2 && back.confirms[0].step == -1 && back.confirms[1].step == 1, "confirms");
  CHECK(back.num_fixture == 1 && back.today && strcmp(back.today, "2026-01-20") == 0, "initial");
  CHECK(strcmp(back.reason, t.reason) == 0, "utf-8 reason survives");
  free(line);
  free(again);
  task_free(&t);
  task_free(&back);
}

// Replaces the first occurrence of `from` in text (malloc'd result).
static char *replace(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  if (!at) return NULL;
  size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
  char *out = malloc(n);
  snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
  return out;
}

static void test_validation_errors(void) {
  FimiError err = {0};
  Task t;
  CHECK(build_task(&t, &err) == 0, "build");
  char *line = task_to_json_line(&t, &err);
  task_free(&t);
  struct {
    const char *from, *to, *expect;
  } cases[] = {
      {"\"id\":\"t-1\"", "\"id\":\"t-1\",\"colour\":1", "unknown field 'colour'"},
      {"\"id\":\"t-1\"", "\"id\":\"\"", "id: empty"},
      {"\"id\":\"t-1\",", "", "id: missing"},
      {"\"kind\":\"edge\"", "\"kind\":\"weird\"", "kind: unknown value"},
      {"\"style\":\"hinglish\"", "\"style\":3", "style: missing or not a string"},
      {"\"name\":\"get_transfer_limits\",\"arguments\"", "\"name\":\"get_transfer_limitz\",\"arguments\"",
       "gold[0].name: unknown tool"},
      {"\"relevant\":[\"product_type\"]", "\"relevant\":[\"tenure\"]", "gold[1].relevant[0]"},
      {"\"arguments\":{}", "\"arguments\":[]", "gold[0].arguments"},
      {"\"step\":0", "\"step\":5", "communicate[0].step"},
      {"\"checks\":[\"seq\",\"comm\",\"judge\"]", "\"checks\":[]", "checks: must declare"},
      {"\"checks\":[\"seq\",\"comm\",\"judge\"]", "\"checks\":[\"seq\",\"seq\"]", "given twice"},
      {"\"checks\":[\"seq\",\"comm\",\"judge\"]", "\"checks\":[\"speed\"]", "checks[0]"},
      {"\"max_turns\":9", "\"max_turns\":0", "max_turns"},
      {"\"max_turns\":9", "\"max_turns\":2.5", "max_turns"},
      {"\"today\":\"2026-01-20\"", "\"today\":\"2026-02-30\"", "initial.today"},
      {"\"image_seed\":7", "\"image_seed\":-1", "initial.image_seed"},
      {"\"confirm_mode\":\"conversation\"", "\"confirm_mode\":\"maybe\"", "initial.confirm_mode"},
      {"\"rule\":\"called\"", "\"rule\":\"called_twice\"", "assertions[1].rule"},
      {"\"args\":[\"get_transfer_limits\"]", "\"args\":[\"a\",\"b\"]", "assertions[1].args"},
      {"\"expected_end\":\"out_of_scope\"", "\"expected_end\":\"budget\"", "expected_end"},
      {"\"max_turns\":9", "\"max_turns\":9,\"max_turns\":10", "given twice"},
      {"\"value\":\"5000\"", "\"value\":\"\"", "fields[1].value"},
      {"\"name\":\"amount\"", "\"name\":\"customer_id\"", "appears twice"},
      {"\"persona\":\"A tester\"", "\"persona\":\"bad \\u0001 byte\"", "persona"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *bad = replace(line, cases[i].from, cases[i].to);
    CHECK(bad != NULL, "case %zu: pattern %s not in line", i, cases[i].from);
    if (!bad) continue;
    TaskList list;
    fimi_error_clear(&err);
    int rc = task_list_parse(bad, strlen(bad), "cases.jsonl", &list, &err);
    CHECK(rc != 0, "case %zu (%s) was accepted", i, cases[i].expect);
    CHECK(rc != 0 && strstr(err.message, cases[i].expect) && strstr(err.message, "cases.jsonl:1"),
          "case %zu: message '%s' lacks '%s' or the line", i, err.message, cases[i].expect);
    free(bad);
  }
  // Line numbers count blank lines; duplicate ids and broken JSON are caught.
  size_t n = strlen(line) * 3 + 64;
  char *file = malloc(n);
  snprintf(file, n, "\n%s\n\n{not json\n", line);
  TaskList list;
  CHECK(task_list_parse(file, strlen(file), "f.jsonl", &list, &err) != 0 && strstr(err.message, "f.jsonl:4"),
        "broken JSON on line 4: %s", err.message);
  snprintf(file, n, "%s\n%s\n", line, line);
  CHECK(task_list_parse(file, strlen(file), "f.jsonl", &list, &err) != 0 && strstr(err.message, "f.jsonl:2") &&
            strstr(err.message, "earlier line"),
        "duplicate id: %s", err.message);
  snprintf(file, n, "%s\n\n", line);
  CHECK(task_list_parse(file, strlen(file), "f.jsonl", &list, &err) == 0 && list.count == 1, "good file: %s",
        err.message);
  CHECK(task_list_find(&list, "t-1") != NULL && task_list_find(&list, "t-2") == NULL, "find");
  task_list_free(&list);
  CHECK(task_list_load("/nonexistent/tasks.jsonl", &list, &err) != 0 && strstr(err.message, "/nonexistent"),
        "missing file: %s", err.message);
  free(file);
  free(line);
}

static void test_variant(void) {
  FimiError err = {0};
  Task t, back;
  CHECK(build_task(&t, &err) == 0, "build");
  char *plain = task_to_json_line(&t, &err);
  CHECK(plain && !strstr(plain, "variant"), "an unset variant is not written: %s", plain ? plain : "");
  CHECK(task_set(&t.variant, &err, "savings/hand_made") == 0 && task_validate(&t, &err) == 0, "variant valid: %s",
        err.message);
  char *line = task_to_json_line(&t, &err);
  CHECK(line && strstr(line, ",\"variant\":\"savings/hand_made\"}"), "variant written last: %s", line ? line : "");
  cJSON *json = line ? cJSON_Parse(line) : NULL;
  CHECK(json && task_from_json(json, &back, &err) == 0 && back.variant && strcmp(back.variant, "savings/hand_made") == 0,
        "variant read back: %s", err.message);
  if (json) task_free(&back);
  cJSON_Delete(json);
  struct {
    const char *to, *expect;
  } cases[] = {{"\"variant\":\"hand_made\"", "variant: 'hand_made' is not '<prefix>/hand_made'"},
               {"\"variant\":\"savings/other_family\"", "variant: 'savings/other_family'"},
               {"\"variant\":\"/hand_made\"", "variant: '/hand_made'"},
               {"\"variant\":7", "variant: expected a string"}};
  for (size_t i = 0; line && i < sizeof cases / sizeof cases[0]; i++) {
    char *bad = replace(line, "\"variant\":\"savings/hand_made\"", cases[i].to);
    TaskList list;
    int rc = bad ? task_list_parse(bad, strlen(bad), "v.jsonl", &list, &err) : 0;
    CHECK(rc != 0 && strstr(err.message, cases[i].expect) && strstr(err.message, "v.jsonl:1"),
          "variant case %zu: '%s' lacks '%s'", i, rc ? err.message : "accepted", cases[i].expect);
    free(bad);
  }
  free(line);
  free(plain);
  task_free(&t);
  // Family metadata: named variants "<prefix>/<family>", training-sample flags.
  TaskFamily f = {"demo", TASK_USE_ACCOUNTS_KYC, TASK_KIND_HAPPY, "demo", NULL, TASK_SLICE_DEEP, TASK_FAMILY_GRADED,
                  "neft,imps,upi"};
  char name[32];
  CHECK(task_family_variant_count(&f) == 3, "three variants");
  CHECK(task_family_variant(&f, 0, name, sizeof name) == 0 && strcmp(name, "neft/demo") == 0, "first: %s", name);
  CHECK(task_family_variant(&f, 2, name, sizeof name) == 0 && strcmp(name, "upi/demo") == 0, "last: %s", name);
  CHECK(task_family_variant(&f, 3, name, sizeof name) == -1 && task_family_variant(&f, -1, name, sizeof name) == -1,
        "out of range");
  CHECK(task_family_variant(&f, 0, name, 6) == -1, "too long for the buffer");
  CHECK(!task_family_in_training_sample(&f), "graded: not in the training sample");
  f.flags = TASK_FAMILY_COMMUNICATION;
  CHECK(!task_family_in_training_sample(&f), "communication: not in the training sample");
  f.flags = 0;
  f.variants = NULL;
  CHECK(task_family_in_training_sample(&f) && task_family_variant_count(&f) == 0, "plain family, no variants");
}

static void test_json_path(void) {
  cJSON *j = cJSON_Parse("{\"a\":[{\"b\":12.5},{\"b\":\"x\"}],\"n\":500000,\"t\":true}");
  char *s = task_json_scalar_text(task_json_path(j, "a.0.b"));
  CHECK(s && strcmp(s, "12.5") == 0, "a.0.b = %s", s ? s : "NULL");
  free(s);
  s = task_json_scalar_text(task_json_path(j, "a.1.b"));
  CHECK(s && strcmp(s, "x") == 0, "a.1.b");
  free(s);
  s = task_json_scalar_text(task_json_path(j, "n"));
  CHECK(s && strcmp(s, "500000") == 0, "n = %s", s ? s : "NULL");
  free(s);
  CHECK(task_json_path(j, "a.2.b") == NULL && task_json_path(j, "a.x") == NULL && task_json_path(j, "n.z") == NULL,
        "missing paths are NULL");
  CHECK(task_json_scalar_text(task_json_path(j, "a")) == NULL, "an array is not a scalar");
  cJSON_Delete(j);
}

// Every registered family: a generated task validates, round-trips, and the
// same seed gives the same task (the registry is iterated, so families added
// later are covered).
static void test_families(void) {
  FimiError err = {0};
  TaskGenContext ctx;
  CHECK(task_gen_context_init(&ctx, 1, &err) == 0, "context: %s", err.message);
  CHECK(task_family_count() >= 8, "only %d families", task_family_count());
  int kinds = 0, uses = 0;
  for (int f = 0; f < task_family_count(); f++) {
    const TaskFamily *fam = task_family_at(f);
    CHECK(task_family_find(fam->name) == fam, "find %s", fam->name);
    for (int g = 0; g < f; g++) CHECK(strcmp(task_family_at(g)->name, fam->name) != 0, "duplicate %s", fam->name);
    kinds |= 1 << fam->kind;
    uses |= 1 << fam->use_case;
    for (uint64_t seed = 1; seed <= 3; seed++) {
      Task a, b, c;
      if (task_generate(&ctx, fam, seed, &a, &err) != 0) {
        CHECK(0, "generate %s/%llu: %s", fam->name, (unsigned long long)seed, err.message);
        continue;
      }
      CHECK(task_generate(&ctx, fam, seed, &b, &err) == 0, "generate again");
      char *la = task_to_json_line(&a, &err), *lb = task_to_json_line(&b, &err);
      CHECK(la && lb && strcmp(la, lb) == 0, "%s: same seed, different task", fam->name);
      CHECK(task_copy(&a, &c, &err) == 0, "copy %s: %s", fam->name, err.message);
      char *lc = task_to_json_line(&c, &err);
      CHECK(la && lc && strcmp(la, lc) == 0, "%s: round trip changed the task", fam->name);
      CHECK(strcmp(a.family, fam->name) == 0, "family name recorded");
      free(la), free(lb), free(lc);
      task_free(&a), task_free(&b), task_free(&c);
    }
  }
  CHECK(kinds == 15, "families cover kinds mask %d (want all four)", kinds);
  CHECK(uses == 31, "families cover use cases mask %d (want all five)", uses);
  CHECK(task_family_find("no_such_family") == NULL, "unknown family");
  task_gen_context_free(&ctx);
}

// task_remove_gold: a step a value comes from stays (error, nothing
// changed); removing another shifts later steps' value references down.
static void test_remove_gold(void) {
  FimiError err = {0};
  Task t;
  if (build_task(&t, &err) != 0) {
    CHECK(0, "build: %s", err.message);
    return;
  }
  CHECK(task_remove_gold(&t, 0, &err) != 0 && strstr(err.message, "gold[0]") && t.num_gold == 2,
        "step 0 feeds communicate[0]: refused (%s)", err.message);
  CHECK(task_remove_gold(&t, 2, &err) != 0, "no step 2");
  free(t.communicate[0].name);
  free(t.communicate[0].path);
  t.num_communicate = 0;  // drop the value that pins step 0 (and the comm check it fed)
  t.checks &= ~TASK_CHECK_COMM;
  CHECK(task_remove_gold(&t, 0, &err) == 0 && t.num_gold == 1 && strcmp(t.gold[0].name, "get_deposit_loan_rates") == 0,
        "step 0 removed: %s", err.message);
  CHECK(t.confirms[0].step == -1 && t.confirms[1].step == 0, "confirm refs shifted: %d %d", t.confirms[0].step,
        t.confirms[1].step);
  CHECK(task_validate(&t, &err) == 0, "still valid: %s", err.message);
  task_free(&t);
}

int main(void) {
  test_round_trip_builder();
  test_validation_errors();
  test_json_path();
  test_variant();
  test_families();
  test_remove_gold();
  TEST_MAIN_END();
}
