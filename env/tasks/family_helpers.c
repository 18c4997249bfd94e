// env/tasks/family_helpers.c: the helpers the task families share
// (env/tasks/family_helpers.h): style and persona choice, the opening line,
// gold steps from formatted JSON, reading replayed gold outputs, assertions.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "env/bank/money.h"
#include "env/tasks/family_helpers.h"

int fam_pick_reason(Task *t, Rng *rng, const char *const reasons[TASK_STYLE_COUNT][2], FimiError *err) {
  t->style = (TaskStyle)task_gen_range(rng, 0, TASK_STYLE_COUNT - 1);
  return task_set(&t->reason, err, "%s", reasons[t->style][rng_next_u64(rng) % 2]);
}

int fam_assert_rule(Task *t, const char *text, TaskRule rule, const char *a, const char *b, FimiError *err) {
  const char *args[3] = {a, b, NULL};
  return task_add_assertion(t, text, rule, args, err);
}

void fam_rng(Rng *rng, const char *family, uint64_t seed) {
  // FNV-1a of the family name, mixed with the seed: independent streams per family.
  rng_seed(rng, hash_fnv1a_text(HASH_FNV1A_SHORT_BASIS, family) ^ (seed * 0x9E3779B97F4A7C15ULL));
}

const char *fam_choose(Rng *rng, const char *const *options, int n) {
  return options[rng_next_u64(rng) % (uint64_t)n];
}

TaskStyle fam_style(Task *t, Rng *rng) {
  t->style = (TaskStyle)(rng_next_u64(rng) % TASK_STYLE_COUNT);
  return t->style;
}

int fam_open(Task *t, Rng *rng, const char *const *personas, int n, FimiError *err, const char *english,
            const char *hinglish, const char *fragmentary, ...) {
  const char *fmt = t->style == TASK_STYLE_ENGLISH ? english : t->style == TASK_STYLE_HINGLISH ? hinglish : fragmentary;
  char reason[1024];
  va_list ap;
  va_start(ap, fragmentary);
  int len = vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  if (len < 0 || len >= (int)sizeof reason) return fimi_fail(err, "task families: reason for the call too long");
  if (task_set(&t->persona, err, "%s", fam_choose(rng, personas, n)) != 0) return -1;
  return task_set(&t->reason, err, "%s", reason);
}

int fam_pick(const TaskGenContext *ctx, Rng *rng, const char *sql, int ncols, char cols[][TASK_GEN_COL_MAX],
            FimiError *err) {
  return task_gen_pick(ctx, rng, sql, NULL, ncols, cols, err);
}

int fam_gold(Task *t, FimiError *err, const char *name, const char *relevant_csv, int confirm, const char *fmt, ...) {
  char json[2048];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(json, sizeof json, fmt, ap);
  va_end(ap);
  if (len < 0 || len >= (int)sizeof json) return fimi_fail(err, "task families: arguments of %s too long", name);
  return task_add_gold(t, name, json, relevant_csv, confirm, err);
}

int fam_replay_text(const TaskGenContext *ctx, const Task *t, int step, const char *path, char *out, size_t size,
                   FimiError *err) {
  cJSON *results = NULL;
  if (task_gen_replay(ctx, t, &results, err) != 0) return -1;
  const cJSON *value = task_json_path(cJSON_GetArrayItem(results, step), path);
  char *text = value ? task_json_scalar_text(value) : NULL;
  int ok = text && strlen(text) < size;
  if (ok) memcpy(out, text, strlen(text) + 1);
  free(text);
  cJSON_Delete(results);
  return ok ? 0 : fimi_fail(err, "task families: gold step %d of %s has no value at '%s'", step, t->family, path);
}

int fam_assert(Task *t, FimiError *err, const char *text, TaskRule rule, ...) {
  const char *args[16];
  int n = 0;
  va_list ap;
  va_start(ap, rule);
  for (const char *a = va_arg(ap, const char *); a && n < 15; a = va_arg(ap, const char *)) args[n++] = a;
  va_end(ap);
  args[n] = NULL;
  return task_add_assertion(t, text, rule, args, err);
}

int fam_field(Task *t, FimiError *err, const char *name, const char *value, ...) {
  if (task_add_field(t, name, value, err) != 0) return -1;
  va_list ap;
  va_start(ap, value);
  int rc = 0;
  for (const char *k = va_arg(ap, const char *); k && rc == 0; k = va_arg(ap, const char *))
    rc = task_add_field_keyword(t, name, k, err);
  va_end(ap);
  return rc;
}

void fam_finish(Task *t, int checks) {
  t->checks = checks;
  t->max_turns = 16 + 2 * (t->num_fields + t->num_gold + t->num_confirms);
}

int fam_variant(Task *t, FimiError *err, const char *prefix) {
  return task_set(&t->variant, err, "%s/%s", prefix, t->family);
}

int fam_account_variant(const TaskGenContext *ctx, Task *t, const char *account_id, FimiError *err) {
  char type[1][TASK_GEN_COL_MAX];
  const char *binds[] = {account_id, NULL};
  if (task_gen_first(ctx, "SELECT account_type FROM accounts WHERE account_id = ?", binds, 1, type, err) != 0) return -1;
  return fam_variant(t, err, type[0]);
}

void fam_rupees(int64_t paise, char out[32]) {
  snprintf(out, 32, "%s%lld.%02lld", paise < 0 ? "-" : "", (long long)(paise < 0 ? -paise : paise) / 100,
           (long long)(paise < 0 ? -paise : paise) % 100);
}

void fam_rupees_tool(int64_t paise, char out[32]) {
  cJSON *number = cJSON_CreateNumber(bank_paise_to_rupees(paise));
  char *text = number ? cJSON_PrintUnformatted(number) : NULL;
  snprintf(out, 32, "%s", text ? text : "");
  free(text);
  cJSON_Delete(number);
}
