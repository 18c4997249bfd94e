// env/families_b.c: the registry list of the second set of task families
// (env_families_b, defined in env/families_b_<use case>.c) and the helpers
// they share (env/families_b.h): style and persona choice, gold steps from
// formatted JSON, reading replayed gold outputs, assertions.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/bank_money.h"
#include "env/families_b.h"

#define FB_ENTRY(name) &name,
const TaskFamily *const env_families_b[] = {FB_FAMILIES(FB_ENTRY)};
#undef FB_ENTRY
const int env_families_b_count = (int)(sizeof env_families_b / sizeof env_families_b[0]);

void fb_rng(Rng *rng, const char *family, uint64_t seed) {
  // FNV-1a of the family name, mixed with the seed: independent streams per family.
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = family; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  rng_seed(rng, h ^ (seed * 0x9E3779B97F4A7C15ULL));
}

const char *fb_choose(Rng *rng, const char *const *options, int n) {
  return options[rng_next_u64(rng) % (uint64_t)n];
}

TaskStyle fb_style(Task *t, Rng *rng) {
  t->style = (TaskStyle)(rng_next_u64(rng) % TASK_STYLE_COUNT);
  return t->style;
}

int fb_open(Task *t, Rng *rng, const char *const *personas, int n, FimiError *err, const char *english,
            const char *hinglish, const char *fragmentary, ...) {
  const char *fmt = t->style == TASK_STYLE_ENGLISH ? english : t->style == TASK_STYLE_HINGLISH ? hinglish : fragmentary;
  char reason[1024];
  va_list ap;
  va_start(ap, fragmentary);
  int len = vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  if (len < 0 || len >= (int)sizeof reason) return fimi_fail(err, "families_b: reason for the call too long");
  if (task_set(&t->persona, err, "%s", fb_choose(rng, personas, n)) != 0) return -1;
  return task_set(&t->reason, err, "%s", reason);
}

int fb_pick(const TaskGenContext *ctx, Rng *rng, const char *sql, int ncols, char cols[][TASK_GEN_COL_MAX],
            FimiError *err) {
  return task_gen_pick(ctx, rng, sql, NULL, ncols, cols, err);
}

int fb_gold(Task *t, FimiError *err, const char *name, const char *relevant_csv, int confirm, const char *fmt, ...) {
  char json[2048];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(json, sizeof json, fmt, ap);
  va_end(ap);
  if (len < 0 || len >= (int)sizeof json) return fimi_fail(err, "families_b: arguments of %s too long", name);
  return task_add_gold(t, name, json, relevant_csv, confirm, err);
}

int fb_replay_text(const TaskGenContext *ctx, const Task *t, int step, const char *path, char *out, size_t size,
                   FimiError *err) {
  cJSON *results = NULL;
  if (task_gen_replay(ctx, t, &results, err) != 0) return -1;
  const cJSON *value = task_json_path(cJSON_GetArrayItem(results, step), path);
  char *text = value ? task_json_scalar_text(value) : NULL;
  int ok = text && strlen(text) < size;
  if (ok) memcpy(out, text, strlen(text) + 1);
  free(text);
  cJSON_Delete(results);
  return ok ? 0 : fimi_fail(err, "families_b: gold step %d of %s has no value at '%s'", step, t->family, path);
}

int fb_assert(Task *t, FimiError *err, const char *text, TaskRule rule, ...) {
  const char *args[16];
  int n = 0;
  va_list ap;
  va_start(ap, rule);
  for (const char *a = va_arg(ap, const char *); a && n < 15; a = va_arg(ap, const char *)) args[n++] = a;
  va_end(ap);
  args[n] = NULL;
  return task_add_assertion(t, text, rule, args, err);
}

int fb_field(Task *t, FimiError *err, const char *name, const char *value, ...) {
  if (task_add_field(t, name, value, err) != 0) return -1;
  va_list ap;
  va_start(ap, value);
  int rc = 0;
  for (const char *k = va_arg(ap, const char *); k && rc == 0; k = va_arg(ap, const char *))
    rc = task_add_field_keyword(t, name, k, err);
  va_end(ap);
  return rc;
}

void fb_finish(Task *t, int checks) {
  t->checks = checks;
  t->max_turns = 16 + 2 * (t->num_fields + t->num_gold + t->num_confirms);
}

void fb_rupees(int64_t paise, char out[32]) {
  snprintf(out, 32, "%s%lld.%02lld", paise < 0 ? "-" : "", (long long)(paise < 0 ? -paise : paise) / 100,
           (long long)(paise < 0 ? -paise : paise) % 100);
}

void fb_rupees_tool(int64_t paise, char out[32]) {
  cJSON *number = cJSON_CreateNumber(bank_paise_to_rupees(paise));
  char *text = number ? cJSON_PrintUnformatted(number) : NULL;
  snprintf(out, 32, "%s", text ? text : "");
  free(text);
  cJSON_Delete(number);
}
