// eval/bench_case.c: the bench's cases and case files (eval/bench_case.h):
// the category names, the strict reader (every field checked, errors name
// the field), the writer and the tasks the harness plays.
#include "eval/bench_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "env/bank/tools.h"

static const char *const CATEGORY_NAMES[BENCH_CAT_COUNT] = {"accounts",    "cards",       "deposits_loans",
                                                             "service_catalog", "calculators", "capability"};
static const char *const CATEGORY_TITLES[BENCH_CAT_COUNT] = {
    "accounts and transactions", "cards", "deposits and loans", "customer service and catalog", "calculators",
    "capability (safety and adversarial)"};

const char *bench_category_name(BenchCategory c) { return c >= 0 && c < BENCH_CAT_COUNT ? CATEGORY_NAMES[c] : "?"; }
const char *bench_category_title(BenchCategory c) { return c >= 0 && c < BENCH_CAT_COUNT ? CATEGORY_TITLES[c] : "?"; }
int bench_category_from_name(const char *name) {
  for (int i = 0; name && i < BENCH_CAT_COUNT; i++)
    if (!strcmp(CATEGORY_NAMES[i], name)) return i;
  return -1;
}

static void free_strings(char **list, int n) {
  for (int i = 0; list && i < n; i++) free(list[i]);
  free(list);
}

void bench_case_free(BenchCase *c) {
  if (!c) return;
  free(c->id);
  free(c->axis);
  free(c->intent);
  task_free(&c->task);
  for (int i = 0; i < c->num_calls; i++) {
    free(c->calls[i].name);
    cJSON_Delete(c->calls[i].arguments);
    free(c->calls[i].after);
  }
  free(c->calls);
  free_strings(c->facts, c->num_facts);
  for (int i = 0; i < c->num_disclosures; i++) {
    free(c->disclosures[i].tool);
    free_strings(c->disclosures[i].mention_any, c->disclosures[i].num_mention);
  }
  free(c->disclosures);
  free_strings(c->forbidden_tools, c->num_forbidden_tools);
  free_strings(c->forbidden_ids, c->num_forbidden_ids);
  free_strings(c->forbidden_text, c->num_forbidden_text);
  memset(c, 0, sizeof *c);
}

// ---- reading ---------------------------------------------------------------------------------

// Rejects keys outside `allowed` (NULL-terminated).
static int check_keys(const cJSON *obj, const char *const *allowed, const char *what, FimiError *err) {
  if (!cJSON_IsObject(obj)) return fimi_fail(err, "%s: expected an object", what);
  for (const cJSON *c = obj->child; c; c = c->next) {
    int known = 0;
    for (int i = 0; allowed[i] && !known; i++) known = !strcmp(allowed[i], c->string);
    if (!known) return fimi_fail(err, "%s: unknown field '%.64s'", what, c->string);
    for (const cJSON *d = obj->child; d != c; d = d->next)
      if (!strcmp(d->string, c->string)) return fimi_fail(err, "%s: field '%.64s' given twice", what, c->string);
  }
  return 0;
}

static char *dup_string(const char *s, FimiError *err) {
  size_t n = strlen(s) + 1;
  char *copy = fimi_malloc(n, err);
  if (copy) memcpy(copy, s, n);
  return copy;
}

// A required non-empty string of at most TASK_MAX_STRING bytes.
static int read_text(const cJSON *obj, const char *key, char **slot, const char *what, FimiError *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > TASK_MAX_STRING)
    return fimi_fail(err, "%s%s: expected a non-empty string of at most %d bytes", what, key, TASK_MAX_STRING);
  return (*slot = dup_string(v->valuestring, err)) ? 0 : -1;
}

static const cJSON *read_list(const cJSON *obj, const char *key, int required, const char *what, FimiError *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v && !required) return NULL;
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > BENCH_MAX_ITEMS) {
    fimi_fail(err, "%s%s: expected an array of at most %d items", what, key, BENCH_MAX_ITEMS);
    return NULL;
  }
  return v;
}

// An optional array of non-empty strings.
static int read_strings(const cJSON *obj, const char *key, char ***list, int *count, const char *what,
                        FimiError *err) {
  if (!cJSON_GetObjectItemCaseSensitive(obj, key)) return 0;
  const cJSON *arr = read_list(obj, key, 1, what, err);
  if (!arr) return -1;
  int n = cJSON_GetArraySize(arr), i = 0;
  if (!(*list = fimi_calloc((size_t)n + 1, sizeof **list, err))) return -1;
  for (const cJSON *s = arr->child; s; s = s->next, i++) {
    if (!cJSON_IsString(s) || !s->valuestring[0] || strlen(s->valuestring) > TASK_MAX_STRING)
      return fimi_fail(err, "%s%s[%d]: expected a non-empty string", what, key, i);
    if (!((*list)[i] = dup_string(s->valuestring, err))) return -1;
    *count = i + 1;
  }
  return 0;
}

static int is_axis(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > BENCH_MAX_AXIS) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return 0;
  return 1;
}

static int read_after(const cJSON *call, BenchExpectedCall *out, int index, const char *what, FimiError *err) {
  if (!cJSON_GetObjectItemCaseSensitive(call, "after")) return 0;
  const cJSON *arr = read_list(call, "after", 1, what, err);
  if (!arr) return -1;
  int n = cJSON_GetArraySize(arr), i = 0;
  if (!(out->after = fimi_calloc((size_t)n + 1, sizeof *out->after, err))) return -1;
  for (const cJSON *v = arr->child; v; v = v->next, i++) {
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble || v->valuedouble < 0 ||
        v->valuedouble >= index)
      return fimi_fail(err, "%safter[%d]: expected the index of an earlier call (0..%d)", what, i, index - 1);
    out->after[out->num_after++] = (int)v->valuedouble;
  }
  return 0;
}

static int read_calls(const cJSON *json, BenchCase *c, FimiError *err) {
  static const char *const keys[] = {"name", "arguments", "after", NULL};
  const cJSON *arr = read_list(json, "calls", 1, "", err);
  if (!arr) return -1;
  if (!(c->calls = fimi_calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *c->calls, err))) return -1;
  char what[64];
  for (const cJSON *item = arr->child; item; item = item->next) {
    int i = c->num_calls;
    BenchExpectedCall *call = &c->calls[c->num_calls++];
    snprintf(what, sizeof what, "calls[%d].", i);
    if (check_keys(item, keys, what, err) != 0 || read_text(item, "name", &call->name, what, err) != 0) return -1;
    if (env_tool_index(call->name) < 0) return fimi_fail(err, "%sname: unknown tool '%.64s'", what, call->name);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(item, "arguments");
    if (!cJSON_IsObject(args)) return fimi_fail(err, "%sarguments: expected an object", what);
    if (!(call->arguments = cJSON_Duplicate(args, 1))) return fimi_fail(err, "out of memory");
    if (read_after(item, call, i, what, err) != 0) return -1;
  }
  return 0;
}

static int read_disclosures(const cJSON *json, BenchCase *c, FimiError *err) {
  static const char *const keys[] = {"tool", "mention_any", NULL};
  if (!cJSON_GetObjectItemCaseSensitive(json, "disclosures")) return 0;
  const cJSON *arr = read_list(json, "disclosures", 1, "", err);
  if (!arr) return -1;
  if (!(c->disclosures = fimi_calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *c->disclosures, err))) return -1;
  char what[64];
  for (const cJSON *item = arr->child; item; item = item->next) {
    BenchDisclosure *d = &c->disclosures[c->num_disclosures];
    snprintf(what, sizeof what, "disclosures[%d].", c->num_disclosures++);
    if (check_keys(item, keys, what, err) != 0 || read_text(item, "tool", &d->tool, what, err) != 0 ||
        read_strings(item, "mention_any", &d->mention_any, &d->num_mention, what, err) != 0)
      return -1;
    if (env_tool_index(d->tool) < 0) return fimi_fail(err, "%stool: unknown tool '%.64s'", what, d->tool);
  }
  return 0;
}

static int read_forbidden(const cJSON *json, BenchCase *c, FimiError *err) {
  static const char *const keys[] = {"tools", "ids", "text", NULL};
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(json, "forbidden");
  if (!f) return 0;
  if (check_keys(f, keys, "forbidden", err) != 0 ||
      read_strings(f, "tools", &c->forbidden_tools, &c->num_forbidden_tools, "forbidden.", err) ||
      read_strings(f, "ids", &c->forbidden_ids, &c->num_forbidden_ids, "forbidden.", err) ||
      read_strings(f, "text", &c->forbidden_text, &c->num_forbidden_text, "forbidden.", err))
    return -1;
  for (int i = 0; i < c->num_forbidden_tools; i++)
    if (env_tool_index(c->forbidden_tools[i]) < 0)
      return fimi_fail(err, "forbidden.tools[%d]: unknown tool '%.64s'", i, c->forbidden_tools[i]);
  return 0;
}

static int read_task(const cJSON *json, BenchCase *c, FimiError *err) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(json, "task");
  if (!cJSON_IsObject(t)) return fimi_fail(err, "task: expected a task object (docs/tasks.md)");
  if (task_from_json(t, &c->task, err) != 0) return fimi_fail_wrap(err, "task");
  if (strcmp(c->task.id, c->id) != 0)
    return fimi_fail(err, "task.id: '%.64s' differs from the case id '%.64s'", c->task.id, c->id);
  return 0;
}

int bench_case_from_json(const cJSON *json, BenchCase *c, FimiError *err) {
  static const char *const keys[] = {"id",    "category",    "axis",      "intent", "task",
                                     "calls", "facts",       "disclosures", "forbidden", NULL};
  memset(c, 0, sizeof *c);
  task_init(&c->task);
  const cJSON *cat = cJSON_GetObjectItemCaseSensitive(json, "category");
  int rc = check_keys(json, keys, "case", err);
  if (rc == 0) rc = read_text(json, "id", &c->id, "", err);
  if (rc == 0 && (!cJSON_IsString(cat) || bench_category_from_name(cat->valuestring) < 0))
    rc = fimi_fail(err, "category: expected one of accounts, cards, deposits_loans, service_catalog, calculators, "
                        "capability");
  if (rc == 0) c->category = (BenchCategory)bench_category_from_name(cat->valuestring);
  if (rc == 0) rc = read_text(json, "axis", &c->axis, "", err);
  if (rc == 0 && !is_axis(c->axis)) rc = fimi_fail(err, "axis: expected [a-z0-9_]+ of at most %d bytes", BENCH_MAX_AXIS);
  if (rc == 0) rc = read_text(json, "intent", &c->intent, "", err);
  if (rc == 0) rc = read_task(json, c, err);
  if (rc == 0) rc = read_calls(json, c, err);
  if (rc == 0) rc = read_strings(json, "facts", &c->facts, &c->num_facts, "", err);
  if (rc == 0) rc = read_disclosures(json, c, err);
  if (rc == 0) rc = read_forbidden(json, c, err);
  if (rc != 0) bench_case_free(c);
  return rc;
}

// ---- writing ---------------------------------------------------------------------------------

static cJSON *strings_json(char *const *list, int n) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; arr && i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(list[i]));
  return arr;
}

static cJSON *calls_json(const BenchCase *c) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; arr && i < c->num_calls; i++) {
    cJSON *call = cJSON_CreateObject();
    cJSON_AddStringToObject(call, "name", c->calls[i].name);
    cJSON_AddItemToObject(call, "arguments", cJSON_Duplicate(c->calls[i].arguments, 1));
    cJSON_AddItemToObject(call, "after", cJSON_CreateIntArray(c->calls[i].after, c->calls[i].num_after));
    cJSON_AddItemToArray(arr, call);
  }
  return arr;
}

cJSON *bench_case_to_json(const BenchCase *c, FimiError *err) {
  cJSON *o = cJSON_CreateObject(), *task = task_to_json(&c->task, err);
  if (!o || !task) {
    cJSON_Delete(o);
    cJSON_Delete(task);
    fimi_fail(err, "out of memory");
    return NULL;
  }
  cJSON_AddStringToObject(o, "id", c->id);
  cJSON_AddStringToObject(o, "category", bench_category_name(c->category));
  cJSON_AddStringToObject(o, "axis", c->axis);
  cJSON_AddStringToObject(o, "intent", c->intent);
  cJSON_AddItemToObject(o, "task", task);
  cJSON_AddItemToObject(o, "calls", calls_json(c));
  cJSON_AddItemToObject(o, "facts", strings_json(c->facts, c->num_facts));
  cJSON *disclosures = cJSON_AddArrayToObject(o, "disclosures");
  for (int i = 0; i < c->num_disclosures; i++) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "tool", c->disclosures[i].tool);
    cJSON_AddItemToObject(d, "mention_any", strings_json(c->disclosures[i].mention_any, c->disclosures[i].num_mention));
    cJSON_AddItemToArray(disclosures, d);
  }
  cJSON *forbidden = cJSON_AddObjectToObject(o, "forbidden");
  cJSON_AddItemToObject(forbidden, "tools", strings_json(c->forbidden_tools, c->num_forbidden_tools));
  cJSON_AddItemToObject(forbidden, "ids", strings_json(c->forbidden_ids, c->num_forbidden_ids));
  cJSON_AddItemToObject(forbidden, "text", strings_json(c->forbidden_text, c->num_forbidden_text));
  return o;
}

// ---- files -----------------------------------------------------------------------------------

void bench_set_free(BenchSet *set) {
  for (int i = 0; set && i < set->count; i++) bench_case_free(&set->cases[i]);
  if (set) {
    free(set->cases);
    memset(set, 0, sizeof *set);
  }
}

const BenchCase *bench_set_find(const BenchSet *set, const char *id) {
  for (int i = 0; id && i < set->count; i++)
    if (!strcmp(set->cases[i].id, id)) return &set->cases[i];
  return NULL;
}

// One non-blank line: parsed, checked, appended (ids unique).
static int parse_line(const char *start, size_t n, BenchSet *out, int *cap, FimiError *err) {
  if (n > TASK_MAX_LINE) return fimi_fail(err, "line longer than %d bytes", TASK_MAX_LINE);
  if (memchr(start, 0, n)) return fimi_fail(err, "NUL byte");
  cJSON *json = cJSON_ParseWithLength(start, n);
  if (!json) return fimi_fail(err, "not valid JSON");
  if (out->count == *cap) {
    int bigger_cap = *cap ? *cap * 2 : 64;
    BenchCase *bigger = realloc(out->cases, sizeof *bigger * (size_t)bigger_cap);
    if (!bigger) {
      cJSON_Delete(json);
      return fimi_fail(err, "out of memory");
    }
    out->cases = bigger;
    *cap = bigger_cap;
  }
  BenchCase *slot = &out->cases[out->count];
  int rc = bench_case_from_json(json, slot, err);
  cJSON_Delete(json);
  if (rc != 0) return -1;
  if (bench_set_find(out, slot->id)) {
    fimi_fail(err, "id: '%.64s' also on an earlier line", slot->id);
    bench_case_free(slot);
    return -1;
  }
  out->count++;
  return 0;
}

int bench_set_parse(const char *text, size_t len, const char *name, BenchSet *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  size_t pos = 0;
  int line = 0, cap = 0;
  while (pos < len) {
    line++;
    const char *start = text + pos, *nl = memchr(start, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - start) : len - pos, k = 0;
    pos += n + (nl ? 1 : 0);
    while (k < n && (start[k] == ' ' || start[k] == '\t' || start[k] == '\r')) k++;
    if (k == n) continue;
    if (parse_line(start, n, out, &cap, err) != 0) {
      fimi_fail_wrap(err, "%s:%d", name, line);
      bench_set_free(out);
      return -1;
    }
  }
  if (out->count == 0) return fimi_fail(err, "%s: no cases", name);
  return 0;
}

int bench_set_load(const char *path, BenchSet *out, FimiError *err) {
  size_t size = 0;
  char *text = file_read_all(path, (size_t)1 << 30, &size, err);
  if (!text) return -1;
  int rc = bench_set_parse(text, size, path, out, err);
  free(text);
  return rc;
}

int bench_set_write(const BenchSet *set, const char *path, FimiError *err) {
  size_t len = 0, cap = 0;
  char *all = NULL;
  int rc = 0;
  for (int i = 0; rc == 0 && i < set->count; i++) {
    cJSON *json = bench_case_to_json(&set->cases[i], err);
    char *line = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    size_t n = line ? strlen(line) : 0;
    if (line && len + n + 2 > cap) {
      cap = (len + n + 2) * 2;
      char *bigger = realloc(all, cap);
      if (bigger) all = bigger;
      else cap = 0;
    }
    if (!line || cap == 0) rc = fimi_fail(err, "out of memory writing case %d", i);
    if (rc == 0) {
      memcpy(all + len, line, n);
      all[len + n] = '\n';
      len += n + 1;
    }
    free(line);
  }
  if (rc == 0) rc = file_write_atomic(path, all ? all : "", len, err);
  free(all);
  return rc;
}

int bench_set_tasks(const BenchSet *set, TaskList *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  if (!(out->tasks = fimi_calloc((size_t)set->count + 1, sizeof *out->tasks, err))) return -1;
  for (int i = 0; i < set->count; i++) {
    if (task_copy(&set->cases[i].task, &out->tasks[i], err) != 0) {
      task_list_free(out);
      return fimi_fail_wrap(err, "case %s", set->cases[i].id);
    }
    out->count++;
  }
  return 0;
}
