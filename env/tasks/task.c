// env/tasks/task.c: the Task struct's lifetime, builders, validator and JSONL
// reader/writer (docs/tasks.md). Defines everything declared in env/tasks/task.h.
// Task files are untrusted: the reader rejects unknown and duplicate keys,
// wrong types, over-long strings and out-of-range numbers, naming the field.
#include "env/tasks/task.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "env/bank/db.h"
#include "env/bank/money.h"
#include "env/bank/tools.h"

// ---- enum names ----------------------------------------------------------

static const char *const kind_names[TASK_KIND_COUNT] = {"happy", "seq", "edge", "tools"};
static const char *const use_case_names[TASK_USE_COUNT] = {"accounts_kyc", "deposits_loans", "insurance",
                                                           "gov_schemes", "cross_cutting"};
static const char *const style_names[TASK_STYLE_COUNT] = {"english", "hinglish", "fragmentary"};
static const char *const end_names[TASK_END_COUNT] = {"none", "stop", "transfer", "out_of_scope", "budget"};
static const char *const rule_names[TASK_RULE_COUNT] = {"mentions_any", "mentions_none", "called",
                                                        "not_called",   "called_before", "end_is"};
static const char *const check_names[4] = {"seq", "db", "comm", "judge"};

static const char *name_at(const char *const *names, int count, int value) {
  return value >= 0 && value < count ? names[value] : "?";
}
static int index_of(const char *const *names, int count, const char *name) {
  if (!name) return -1;
  for (int i = 0; i < count; i++)
    if (strcmp(names[i], name) == 0) return i;
  return -1;
}

const char *task_kind_name(TaskKind v) { return name_at(kind_names, TASK_KIND_COUNT, v); }
const char *task_use_case_name(TaskUseCase v) { return name_at(use_case_names, TASK_USE_COUNT, v); }
const char *task_style_name(TaskStyle v) { return name_at(style_names, TASK_STYLE_COUNT, v); }
const char *task_end_name(TaskEnd v) { return name_at(end_names, TASK_END_COUNT, v); }
const char *task_rule_name(TaskRule v) { return name_at(rule_names, TASK_RULE_COUNT, v); }
int task_kind_from_name(const char *n) { return index_of(kind_names, TASK_KIND_COUNT, n); }
int task_use_case_from_name(const char *n) { return index_of(use_case_names, TASK_USE_COUNT, n); }
int task_style_from_name(const char *n) { return index_of(style_names, TASK_STYLE_COUNT, n); }
int task_end_from_name(const char *n) { return index_of(end_names, TASK_END_COUNT, n); }
int task_rule_from_name(const char *n) { return index_of(rule_names, TASK_RULE_COUNT, n); }

// ---- lifetime ------------------------------------------------------------

void task_init(Task *t) {
  memset(t, 0, sizeof *t);
  t->image_seed = 1;
  t->checks = TASK_CHECK_ALL;
  t->max_turns = 30;
  t->expected_end = TASK_END_STOP;
  t->confirm_mode = BANK_CONFIRM_CONVERSATION;
}

static void free_strings(char **list, int n) {
  for (int i = 0; i < n; i++) free(list[i]);
  free(list);
}
static void free_ref(TaskValueRef *r) {
  free(r->name);
  free(r->path);
}

static void free_action(TaskAction *a) {
  free(a->name);
  cJSON_Delete(a->arguments);
  free_strings(a->relevant, a->num_relevant);
}

void task_free(Task *t) {
  if (!t) return;
  free(t->id);
  free(t->family);
  free(t->persona);
  free(t->reason);
  for (int i = 0; i < t->num_fields; i++) {
    free(t->fields[i].name);
    free(t->fields[i].value);
    free_strings(t->fields[i].keywords, t->fields[i].num_keywords);
  }
  free(t->fields);
  free(t->today);
  free_strings(t->fixture, t->num_fixture);
  free(t->authenticated);
  free(t->variant);
  for (int i = 0; i < t->num_gold; i++) free_action(&t->gold[i]);
  free(t->gold);
  for (int i = 0; i < t->num_communicate; i++) free_ref(&t->communicate[i]);
  free(t->communicate);
  for (int i = 0; i < t->num_confirms; i++) free_ref(&t->confirms[i]);
  free(t->confirms);
  for (int i = 0; i < t->num_assertions; i++) {
    free(t->assertions[i].text);
    free_strings(t->assertions[i].args, t->assertions[i].num_args);
  }
  free(t->assertions);
  task_init(t);
}

// ---- builders ------------------------------------------------------------

static char *dup_string(const char *s, FimiError *err) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *copy = fimi_malloc(n + 1, err);
  if (copy) memcpy(copy, s, n + 1);
  return copy;
}

int task_set(char **slot, FimiError *err, const char *fmt, ...) {
  char *text = NULL;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return fimi_fail(err, "task_set: bad format");
    text = fimi_malloc((size_t)n + 1, err);
    if (!text) return -1;
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  free(*slot);
  *slot = text;
  return 0;
}

// Grows an array of `size`-byte items by one zeroed item; returns it.
static void *grow(void **items, int *count, size_t size, FimiError *err) {
  if (*count >= TASK_MAX_ITEMS) {
    fimi_fail(err, "more than %d items in one list", TASK_MAX_ITEMS);
    return NULL;
  }
  void *bigger = realloc(*items, (size_t)(*count + 1) * size);
  if (!bigger) {
    fimi_fail(err, "out of memory");
    return NULL;
  }
  *items = bigger;
  char *item = (char *)bigger + (size_t)*count * size;
  memset(item, 0, size);
  (*count)++;
  return item;
}

static int push_string(char ***list, int *count, const char *s, FimiError *err) {
  char *copy = dup_string(s, err);
  if (!copy) return -1;
  char **slot = grow((void **)list, count, sizeof(char *), err);
  if (!slot) {
    free(copy);
    return -1;
  }
  *slot = copy;
  return 0;
}

int task_add_field(Task *t, const char *name, const char *value, FimiError *err) {
  TaskField *f = grow((void **)&t->fields, &t->num_fields, sizeof *f, err);
  if (!f) return -1;
  f->name = dup_string(name, err);
  f->value = dup_string(value, err);
  return f->name && f->value ? 0 : -1;
}

int task_add_field_keyword(Task *t, const char *field, const char *keyword, FimiError *err) {
  for (int i = 0; i < t->num_fields; i++)
    if (strcmp(t->fields[i].name, field) == 0)
      return push_string(&t->fields[i].keywords, &t->fields[i].num_keywords, keyword, err);
  return fimi_fail(err, "no field '%s'", field);
}

int task_remove_gold(Task *t, int index, FimiError *err) {
  if (index < 0 || index >= t->num_gold) return fimi_fail(err, "gold[%d]: no such step", index);
  for (int i = 0; i < t->num_communicate + t->num_confirms; i++) {
    TaskValueRef *r = i < t->num_communicate ? &t->communicate[i] : &t->confirms[i - t->num_communicate];
    if (r->step == index) return fimi_fail(err, "gold[%d]: a value to communicate or confirm comes from it", index);
  }
  free_action(&t->gold[index]);
  memmove(&t->gold[index], &t->gold[index + 1], sizeof *t->gold * (size_t)(t->num_gold - index - 1));
  t->num_gold--;
  for (int i = 0; i < t->num_communicate + t->num_confirms; i++) {
    TaskValueRef *r = i < t->num_communicate ? &t->communicate[i] : &t->confirms[i - t->num_communicate];
    if (r->step > index) r->step--;
  }
  return 0;
}

int task_add_fixture(Task *t, const char *sql, FimiError *err) { return push_string(&t->fixture, &t->num_fixture, sql, err); }

static int split_csv(const char *csv, char ***list, int *count, FimiError *err) {
  if (!csv) return 0;
  const char *p = csv;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > 0) {
      char buf[128];
      if (n >= sizeof buf) return fimi_fail(err, "argument name too long in '%s'", csv);
      memcpy(buf, p, n);
      buf[n] = 0;
      if (push_string(list, count, buf, err) != 0) return -1;
    }
    p += n + (end ? 1 : 0);
  }
  return 0;
}

int task_add_gold_json(Task *t, const char *name, cJSON *arguments, const char *relevant_csv, int confirm,
                       FimiError *err) {
  if (!cJSON_IsObject(arguments)) {
    cJSON_Delete(arguments);
    return fimi_fail(err, "gold action %s: arguments must be a JSON object", name);
  }
  TaskAction *a = grow((void **)&t->gold, &t->num_gold, sizeof *a, err);
  if (!a) {
    cJSON_Delete(arguments);
    return -1;
  }
  a->arguments = arguments;
  a->confirm = confirm ? 1 : 0;
  a->name = dup_string(name, err);
  if (!a->name || split_csv(relevant_csv, &a->relevant, &a->num_relevant, err) != 0) return -1;
  return t->num_gold - 1;
}

int task_add_gold(Task *t, const char *name, const char *arguments_json, const char *relevant_csv, int confirm,
                  FimiError *err) {
  cJSON *args = cJSON_Parse(arguments_json ? arguments_json : "{}");
  if (!args) return fimi_fail(err, "gold action %s: arguments are not valid JSON: %s", name, arguments_json);
  return task_add_gold_json(t, name, args, relevant_csv, confirm, err);
}

static int add_ref(TaskValueRef **list, int *count, const char *name, int step, const char *path, FimiError *err) {
  TaskValueRef *r = grow((void **)list, count, sizeof *r, err);
  if (!r) return -1;
  r->step = step;
  r->name = dup_string(name, err);
  r->path = path ? dup_string(path, err) : NULL;
  return r->name && (r->path || !path) ? 0 : -1;
}

int task_add_communicate(Task *t, const char *name, int step, const char *path, FimiError *err) {
  return add_ref(&t->communicate, &t->num_communicate, name, step, path, err);
}
int task_add_confirm(Task *t, const char *what, int step, const char *path, FimiError *err) {
  return add_ref(&t->confirms, &t->num_confirms, what, step, path, err);
}

int task_add_assertion(Task *t, const char *text, TaskRule rule, const char *const *args, FimiError *err) {
  TaskAssertion *a = grow((void **)&t->assertions, &t->num_assertions, sizeof *a, err);
  if (!a) return -1;
  a->rule = rule;
  a->text = dup_string(text, err);
  if (!a->text) return -1;
  for (int i = 0; args && args[i]; i++)
    if (push_string(&a->args, &a->num_args, args[i], err) != 0) return -1;
  return 0;
}

// ---- validation ----------------------------------------------------------

// Valid UTF-8 without control characters other than tab/newline.
static int text_ok(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s);
  if (n > TASK_MAX_STRING) return 0;
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n') return 0;
      i++;
      continue;
    }
    int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (len == 0 || i + (size_t)len > n) return 0;
    for (int k = 1; k < len; k++)
      if ((p[i + k] & 0xC0) != 0x80) return 0;
    if (len == 3 && ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] >= 0xA0))) return 0;
    if (len == 4 && ((c == 0xF0 && p[i + 1] < 0x90) || (c == 0xF4 && p[i + 1] >= 0x90))) return 0;
    i += (size_t)len;
  }
  return 1;
}

static int check_text(const char *s, int required, const char *what, FimiError *err) {
  if (!s) return required ? fimi_fail(err, "%s: missing", what) : 0;
  if (required && !*s) return fimi_fail(err, "%s: empty", what);
  if (!text_ok(s)) return fimi_fail(err, "%s: not valid UTF-8 text of at most %d bytes", what, TASK_MAX_STRING);
  return 0;
}

static int is_date(const char *s) {
  int64_t days;
  return s && strlen(s) == 10 && bank_date_parse(s, &days) == 0;
}

static int validate_ref(const Task *t, const TaskValueRef *r, int need_step, const char *what, FimiError *err) {
  char w[96];
  snprintf(w, sizeof w, "%s.name", what);
  if (check_text(r->name, 1, w, err) != 0) return -1;
  if (r->step == -1 && !need_step) return r->path ? fimi_fail(err, "%s.path: given without a step", what) : 0;
  if (r->step < 0 || r->step >= t->num_gold)
    return fimi_fail(err, "%s.step: %d is not a gold step (0..%d)", what, r->step, t->num_gold - 1);
  snprintf(w, sizeof w, "%s.path", what);
  return check_text(r->path, 1, w, err);
}

static int validate_fields(const Task *t, FimiError *err) {
  char w[96];
  for (int i = 0; i < t->num_fields; i++) {
    snprintf(w, sizeof w, "fields[%d].name", i);
    if (check_text(t->fields[i].name, 1, w, err) != 0) return -1;
    snprintf(w, sizeof w, "fields[%d].value", i);
    if (check_text(t->fields[i].value, 1, w, err) != 0) return -1;
    for (int j = 0; j < i; j++)
      if (strcmp(t->fields[j].name, t->fields[i].name) == 0)
        return fimi_fail(err, "fields[%d].name: '%s' appears twice", i, t->fields[i].name);
    for (int k = 0; k < t->fields[i].num_keywords; k++) {
      snprintf(w, sizeof w, "fields[%d].keywords[%d]", i, k);
      if (check_text(t->fields[i].keywords[k], 1, w, err) != 0) return -1;
    }
  }
  return 0;
}

static int validate_gold(const Task *t, FimiError *err) {
  char w[96];
  for (int i = 0; i < t->num_gold; i++) {
    const TaskAction *a = &t->gold[i];
    snprintf(w, sizeof w, "gold[%d].name", i);
    if (check_text(a->name, 1, w, err) != 0) return -1;
    if (env_tool_index(a->name) < 0) return fimi_fail(err, "gold[%d].name: unknown tool '%s'", i, a->name);
    if (!cJSON_IsObject(a->arguments)) return fimi_fail(err, "gold[%d].arguments: not an object", i);
    for (int k = 0; k < a->num_relevant; k++) {
      if (!a->relevant[k] || !cJSON_GetObjectItemCaseSensitive(a->arguments, a->relevant[k]))
        return fimi_fail(err, "gold[%d].relevant[%d]: '%s' is not one of the arguments", i, k,
                         a->relevant[k] ? a->relevant[k] : "");
    }
  }
  return 0;
}

static int validate_assertions(const Task *t, FimiError *err) {
  static const int min_args[TASK_RULE_COUNT] = {1, 1, 1, 1, 2, 1};
  static const int max_args[TASK_RULE_COUNT] = {TASK_MAX_ITEMS, TASK_MAX_ITEMS, 1, 1, 2, 1};
  char w[96];
  for (int i = 0; i < t->num_assertions; i++) {
    const TaskAssertion *a = &t->assertions[i];
    snprintf(w, sizeof w, "assertions[%d].text", i);
    if (check_text(a->text, 1, w, err) != 0) return -1;
    if ((int)a->rule < 0 || a->rule >= TASK_RULE_COUNT) return fimi_fail(err, "assertions[%d].rule: unknown", i);
    if (a->num_args < min_args[a->rule] || a->num_args > max_args[a->rule])
      return fimi_fail(err, "assertions[%d].args: rule %s takes %d..%d arguments, got %d", i, rule_names[a->rule],
                       min_args[a->rule], max_args[a->rule], a->num_args);
    for (int k = 0; k < a->num_args; k++) {
      snprintf(w, sizeof w, "assertions[%d].args[%d]", i, k);
      if (check_text(a->args[k], 1, w, err) != 0) return -1;
      int tool_rule = a->rule == TASK_RULE_CALLED || a->rule == TASK_RULE_NOT_CALLED || a->rule == TASK_RULE_CALLED_BEFORE;
      if (tool_rule && env_tool_index(a->args[k]) < 0)
        return fimi_fail(err, "%s: unknown tool '%s'", w, a->args[k]);
      if (a->rule == TASK_RULE_END_IS) {
        int e = task_end_from_name(a->args[k]);
        if (e != TASK_END_STOP && e != TASK_END_TRANSFER && e != TASK_END_OUT_OF_SCOPE)
          return fimi_fail(err, "%s: '%s' is not stop, transfer or out_of_scope", w, a->args[k]);
      }
    }
  }
  return 0;
}

// A variant names its family: "<prefix>/<family>" with a non-empty prefix.
static int check_variant(const Task *t, FimiError *err) {
  if (check_text(t->variant, 1, "variant", err) != 0) return -1;
  const char *slash = strchr(t->variant, '/');
  if (!slash || slash == t->variant || strcmp(slash + 1, t->family) != 0)
    return fimi_fail(err, "variant: '%.64s' is not '<prefix>/%.64s'", t->variant, t->family);
  return 0;
}

int task_validate(const Task *t, FimiError *err) {
  if (check_text(t->id, 1, "id", err) || check_text(t->family, 1, "family", err) ||
      check_text(t->persona, 1, "persona", err) || check_text(t->reason, 1, "reason", err))
    return -1;
  if ((int)t->kind < 0 || t->kind >= TASK_KIND_COUNT) return fimi_fail(err, "kind: out of range");
  if ((int)t->use_case < 0 || t->use_case >= TASK_USE_COUNT) return fimi_fail(err, "use_case: out of range");
  if ((int)t->style < 0 || t->style >= TASK_STYLE_COUNT) return fimi_fail(err, "style: out of range");
  if (t->expected_end != TASK_END_STOP && t->expected_end != TASK_END_TRANSFER &&
      t->expected_end != TASK_END_OUT_OF_SCOPE)
    return fimi_fail(err, "expected_end: must be stop, transfer or out_of_scope");
  if (t->checks <= 0 || t->checks > TASK_CHECK_ALL) return fimi_fail(err, "checks: must declare at least one check");
  if (t->max_turns < 1 || t->max_turns > TASK_MAX_TURNS)
    return fimi_fail(err, "max_turns: %d is outside 1..%d", t->max_turns, TASK_MAX_TURNS);
  if (t->confirm_mode != BANK_CONFIRM_ARGUMENT && t->confirm_mode != BANK_CONFIRM_CONVERSATION)
    return fimi_fail(err, "initial.confirm_mode: out of range");
  if (t->today && !is_date(t->today)) return fimi_fail(err, "initial.today: '%s' is not a YYYY-MM-DD date", t->today);
  if (t->authenticated && (check_text(t->authenticated, 1, "initial.authenticated", err) != 0 ||
                           strlen(t->authenticated) >= BANK_ID_MAX))
    return fimi_fail(err, "initial.authenticated: not a customer id");
  if (t->variant && check_variant(t, err) != 0) return -1;
  char w[96];
  for (int i = 0; i < t->num_fixture; i++) {
    snprintf(w, sizeof w, "initial.fixture[%d]", i);
    if (check_text(t->fixture[i], 1, w, err) != 0) return -1;
  }
  if (validate_fields(t, err) || validate_gold(t, err) || validate_assertions(t, err)) return -1;
  if ((t->checks & TASK_CHECK_SEQ) && t->num_gold == 0) return fimi_fail(err, "checks: seq declared without gold actions");
  if ((t->checks & TASK_CHECK_COMM) && t->num_communicate == 0)
    return fimi_fail(err, "checks: comm declared without values to communicate");
  if ((t->checks & TASK_CHECK_JUDGE) && t->num_assertions == 0)
    return fimi_fail(err, "checks: judge declared without assertions");
  for (int i = 0; i < t->num_communicate; i++) {
    snprintf(w, sizeof w, "communicate[%d]", i);
    if (validate_ref(t, &t->communicate[i], 1, w, err) != 0) return -1;
  }
  for (int i = 0; i < t->num_confirms; i++) {
    snprintf(w, sizeof w, "confirms[%d]", i);
    if (validate_ref(t, &t->confirms[i], 0, w, err) != 0) return -1;
  }
  return 0;
}

// ---- JSON reading --------------------------------------------------------

// Rejects keys not in `allowed` (NULL-terminated) and keys given twice.
static int check_keys(const cJSON *obj, const char *const *allowed, const char *what, FimiError *err) {
  if (!cJSON_IsObject(obj)) return fimi_fail(err, "%s: expected an object", what);
  for (const cJSON *c = obj->child; c; c = c->next) {
    int known = 0;
    for (int i = 0; allowed[i]; i++) known |= strcmp(allowed[i], c->string) == 0;
    if (!known) return fimi_fail(err, "%s: unknown field '%.64s'", what, c->string);
    for (const cJSON *d = obj->child; d != c; d = d->next)
      if (strcmp(d->string, c->string) == 0) return fimi_fail(err, "%s: field '%.64s' given twice", what, c->string);
  }
  return 0;
}

// A string field into a malloc'd slot; NULL/absent allowed when !required.
static int read_string(const cJSON *obj, const char *key, int required, char **slot, const char *what, FimiError *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v || cJSON_IsNull(v)) return required ? fimi_fail(err, "%s%s: missing", what, key) : 0;
  if (!cJSON_IsString(v)) return fimi_fail(err, "%s%s: expected a string", what, key);
  char w[128];
  snprintf(w, sizeof w, "%s%s", what, key);
  if (check_text(v->valuestring, required, w, err) != 0) return -1;
  return task_set(slot, err, "%s", v->valuestring);
}

static int read_enum(const cJSON *obj, const char *key, int (*lookup)(const char *), int *out, FimiError *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsString(v)) return fimi_fail(err, "%s: missing or not a string", key);
  int value = lookup(v->valuestring);
  if (value < 0) return fimi_fail(err, "%s: unknown value '%.64s'", key, v->valuestring);
  *out = value;
  return 0;
}

// An integer in [lo, hi] (a JSON number without a fraction).
static int read_int(const cJSON *obj, const char *key, int required, double lo, double hi, double *out,
                    const char *what, FimiError *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) return required ? fimi_fail(err, "%s%s: missing", what, key) : 0;
  if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble || v->valuedouble < lo ||
      v->valuedouble > hi)
    return fimi_fail(err, "%s%s: expected an integer in %.0f..%.0f", what, key, lo, hi);
  *out = v->valuedouble;
  return 0;
}

static const cJSON *read_array(const cJSON *obj, const char *key, int required, const char *what, FimiError *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) {
    if (required) fimi_fail(err, "%s%s: missing", what, key);
    return NULL;
  }
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > TASK_MAX_ITEMS) {
    fimi_fail(err, "%s%s: expected an array of at most %d items", what, key, TASK_MAX_ITEMS);
    return NULL;
  }
  return v;
}

static int read_string_array(const cJSON *obj, const char *key, char ***list, int *count, const char *what,
                             FimiError *err) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!arr) return 0;
  if (!(arr = read_array(obj, key, 1, what, err))) return -1;
  int i = 0;
  for (const cJSON *s = arr->child; s; s = s->next, i++) {
    if (!cJSON_IsString(s) || !text_ok(s->valuestring) || !*s->valuestring)
      return fimi_fail(err, "%s%s[%d]: expected a non-empty string", what, key, i);
    if (push_string(list, count, s->valuestring, err) != 0) return -1;
  }
  return 0;
}

static int read_fields(const cJSON *json, Task *t, FimiError *err) {
  static const char *const keys[] = {"name", "value", "keywords", NULL};
  const cJSON *arr = read_array(json, "fields", 1, "", err);
  if (!arr) return -1;
  int i = 0;
  char w[64];
  for (const cJSON *f = arr->child; f; f = f->next, i++) {
    snprintf(w, sizeof w, "fields[%d].", i);
    if (check_keys(f, keys, w, err) != 0) return -1;
    TaskField *field = grow((void **)&t->fields, &t->num_fields, sizeof *field, err);
    if (!field || read_string(f, "name", 1, &field->name, w, err) || read_string(f, "value", 1, &field->value, w, err) ||
        read_string_array(f, "keywords", &field->keywords, &field->num_keywords, w, err))
      return -1;
  }
  return 0;
}

static int read_initial(const cJSON *json, Task *t, FimiError *err) {
  static const char *const keys[] = {"image_seed", "today", "fixture", "authenticated", "confirm_mode", NULL};
  const cJSON *init = cJSON_GetObjectItemCaseSensitive(json, "initial");
  if (!init) return fimi_fail(err, "initial: missing");
  if (check_keys(init, keys, "initial", err) != 0) return -1;
  double seed = 0;
  if (read_int(init, "image_seed", 1, 0, 9007199254740991.0, &seed, "initial.", err) != 0) return -1;
  t->image_seed = (uint64_t)seed;
  if (read_string(init, "today", 0, &t->today, "initial.", err) ||
      read_string(init, "authenticated", 0, &t->authenticated, "initial.", err) ||
      read_string_array(init, "fixture", &t->fixture, &t->num_fixture, "initial.", err))
    return -1;
  const cJSON *mode = cJSON_GetObjectItemCaseSensitive(init, "confirm_mode");
  if (mode) {
    if (cJSON_IsString(mode) && strcmp(mode->valuestring, "argument") == 0) t->confirm_mode = BANK_CONFIRM_ARGUMENT;
    else if (cJSON_IsString(mode) && strcmp(mode->valuestring, "conversation") == 0)
      t->confirm_mode = BANK_CONFIRM_CONVERSATION;
    else return fimi_fail(err, "initial.confirm_mode: expected \"argument\" or \"conversation\"");
  }
  return 0;
}

static int read_gold(const cJSON *json, Task *t, FimiError *err) {
  static const char *const keys[] = {"name", "arguments", "relevant", "confirm", NULL};
  const cJSON *arr = read_array(json, "gold", 1, "", err);
  if (!arr) return -1;
  int i = 0;
  char w[64];
  for (const cJSON *g = arr->child; g; g = g->next, i++) {
    snprintf(w, sizeof w, "gold[%d].", i);
    if (check_keys(g, keys, w, err) != 0) return -1;
    TaskAction *a = grow((void **)&t->gold, &t->num_gold, sizeof *a, err);
    if (!a || read_string(g, "name", 1, &a->name, w, err) ||
        read_string_array(g, "relevant", &a->relevant, &a->num_relevant, w, err))
      return -1;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(g, "arguments");
    if (!cJSON_IsObject(args)) return fimi_fail(err, "%sarguments: missing or not an object", w);
    if (!(a->arguments = cJSON_Duplicate(args, 1))) return fimi_fail(err, "out of memory");
    const cJSON *confirm = cJSON_GetObjectItemCaseSensitive(g, "confirm");
    if (confirm && !cJSON_IsBool(confirm)) return fimi_fail(err, "%sconfirm: expected true or false", w);
    a->confirm = cJSON_IsTrue(confirm);
  }
  return 0;
}

static int read_refs(const cJSON *json, const char *key, const char *label, int step_required, TaskValueRef **list,
                     int *count, FimiError *err) {
  const char *const keys[] = {label, "step", "path", NULL};
  const cJSON *arr = read_array(json, key, 0, "", err);
  if (!arr) return cJSON_GetObjectItemCaseSensitive(json, key) ? -1 : 0;
  int i = 0;
  char w[64];
  for (const cJSON *r = arr->child; r; r = r->next, i++) {
    snprintf(w, sizeof w, "%s[%d].", key, i);
    if (check_keys(r, keys, w, err) != 0) return -1;
    TaskValueRef *ref = grow((void **)list, count, sizeof *ref, err);
    double step = -1;
    if (!ref || read_string(r, label, 1, &ref->name, w, err) ||
        read_int(r, "step", step_required, -1, TASK_MAX_ITEMS, &step, w, err) ||
        read_string(r, "path", 0, &ref->path, w, err))
      return -1;
    ref->step = (int)step;
  }
  return 0;
}

static int read_assertions(const cJSON *json, Task *t, FimiError *err) {
  static const char *const keys[] = {"text", "rule", "args", NULL};
  const cJSON *arr = read_array(json, "assertions", 0, "", err);
  if (!arr) return cJSON_GetObjectItemCaseSensitive(json, "assertions") ? -1 : 0;
  int i = 0;
  char w[64];
  for (const cJSON *a = arr->child; a; a = a->next, i++) {
    snprintf(w, sizeof w, "assertions[%d].", i);
    if (check_keys(a, keys, w, err) != 0) return -1;
    TaskAssertion *as = grow((void **)&t->assertions, &t->num_assertions, sizeof *as, err);
    if (!as || read_string(a, "text", 1, &as->text, w, err)) return -1;
    const cJSON *rule = cJSON_GetObjectItemCaseSensitive(a, "rule");
    int r = cJSON_IsString(rule) ? task_rule_from_name(rule->valuestring) : -1;
    if (r < 0) return fimi_fail(err, "%srule: missing or unknown", w);
    as->rule = (TaskRule)r;
    if (!cJSON_GetObjectItemCaseSensitive(a, "args")) return fimi_fail(err, "%sargs: missing", w);
    if (read_string_array(a, "args", &as->args, &as->num_args, w, err) != 0) return -1;
  }
  return 0;
}

static int read_checks(const cJSON *json, Task *t, FimiError *err) {
  const cJSON *arr = read_array(json, "checks", 1, "", err);
  if (!arr) return -1;
  t->checks = 0;
  int i = 0;
  for (const cJSON *c = arr->child; c; c = c->next, i++) {
    int k = cJSON_IsString(c) ? index_of(check_names, 4, c->valuestring) : -1;
    if (k < 0) return fimi_fail(err, "checks[%d]: expected one of seq, db, comm, judge", i);
    if (t->checks & (1 << k)) return fimi_fail(err, "checks[%d]: '%s' given twice", i, check_names[k]);
    t->checks |= 1 << k;
  }
  return 0;
}

int task_from_json(const cJSON *json, Task *out, FimiError *err) {
  static const char *const keys[] = {"id",          "family",     "kind",        "use_case",  "persona",
                                     "style",       "reason",     "fields",      "initial",   "gold",
                                     "checks",      "communicate", "confirms",   "assertions", "max_turns",
                                     "expected_end", "variant",    NULL};
  task_init(out);
  int kind = 0, use_case = 0, style = 0, end = 0;
  double turns = 0;
  if (check_keys(json, keys, "task", err) || read_string(json, "id", 1, &out->id, "", err) ||
      read_string(json, "family", 1, &out->family, "", err) || read_enum(json, "kind", task_kind_from_name, &kind, err) ||
      read_enum(json, "use_case", task_use_case_from_name, &use_case, err) ||
      read_string(json, "persona", 1, &out->persona, "", err) ||
      read_enum(json, "style", task_style_from_name, &style, err) ||
      read_string(json, "reason", 1, &out->reason, "", err) || read_fields(json, out, err) ||
      read_initial(json, out, err) || read_gold(json, out, err) || read_checks(json, out, err) ||
      read_refs(json, "communicate", "name", 1, &out->communicate, &out->num_communicate, err) ||
      read_refs(json, "confirms", "what", 0, &out->confirms, &out->num_confirms, err) ||
      read_assertions(json, out, err) || read_int(json, "max_turns", 1, 1, TASK_MAX_TURNS, &turns, "", err) ||
      read_enum(json, "expected_end", task_end_from_name, &end, err) ||
      read_string(json, "variant", 0, &out->variant, "", err))
    goto fail;
  out->kind = (TaskKind)kind;
  out->use_case = (TaskUseCase)use_case;
  out->style = (TaskStyle)style;
  out->expected_end = (TaskEnd)end;
  out->max_turns = (int)turns;
  if (task_validate(out, err) != 0) goto fail;
  return 0;
fail:
  task_free(out);
  return -1;
}

// ---- JSON writing --------------------------------------------------------

static cJSON *string_array(char **list, int n) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; arr && i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(list[i]));
  return arr;
}

static cJSON *refs_json(const TaskValueRef *refs, int n, const char *label) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; arr && i < n; i++) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, label, refs[i].name);
    if (refs[i].step >= 0) {
      cJSON_AddNumberToObject(r, "step", refs[i].step);
      if (refs[i].path) cJSON_AddStringToObject(r, "path", refs[i].path);
    }
    cJSON_AddItemToArray(arr, r);
  }
  return arr;
}

static void add_string_or_null(cJSON *obj, const char *key, const char *value) {
  if (value) cJSON_AddStringToObject(obj, key, value);
  else cJSON_AddNullToObject(obj, key);
}

cJSON *task_to_json(const Task *t, FimiError *err) {
  cJSON *j = cJSON_CreateObject();
  if (!j) {
    fimi_fail(err, "out of memory");
    return NULL;
  }
  add_string_or_null(j, "id", t->id);
  add_string_or_null(j, "family", t->family);
  cJSON_AddStringToObject(j, "kind", task_kind_name(t->kind));
  cJSON_AddStringToObject(j, "use_case", task_use_case_name(t->use_case));
  add_string_or_null(j, "persona", t->persona);
  cJSON_AddStringToObject(j, "style", task_style_name(t->style));
  add_string_or_null(j, "reason", t->reason);
  cJSON *fields = cJSON_AddArrayToObject(j, "fields");
  for (int i = 0; i < t->num_fields; i++) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "name", t->fields[i].name);
    cJSON_AddStringToObject(f, "value", t->fields[i].value);
    if (t->fields[i].num_keywords > 0)
      cJSON_AddItemToObject(f, "keywords", string_array(t->fields[i].keywords, t->fields[i].num_keywords));
    cJSON_AddItemToArray(fields, f);
  }
  cJSON *init = cJSON_AddObjectToObject(j, "initial");
  cJSON_AddNumberToObject(init, "image_seed", (double)t->image_seed);
  add_string_or_null(init, "today", t->today);
  cJSON_AddItemToObject(init, "fixture", string_array(t->fixture, t->num_fixture));
  add_string_or_null(init, "authenticated", t->authenticated);
  cJSON_AddStringToObject(init, "confirm_mode", t->confirm_mode == BANK_CONFIRM_ARGUMENT ? "argument" : "conversation");
  cJSON *gold = cJSON_AddArrayToObject(j, "gold");
  for (int i = 0; i < t->num_gold; i++) {
    cJSON *g = cJSON_CreateObject();
    cJSON_AddStringToObject(g, "name", t->gold[i].name);
    cJSON_AddItemToObject(g, "arguments", cJSON_Duplicate(t->gold[i].arguments, 1));
    cJSON_AddItemToObject(g, "relevant", string_array(t->gold[i].relevant, t->gold[i].num_relevant));
    cJSON_AddBoolToObject(g, "confirm", t->gold[i].confirm);
    cJSON_AddItemToArray(gold, g);
  }
  cJSON *checks = cJSON_AddArrayToObject(j, "checks");
  for (int k = 0; k < 4; k++)
    if (t->checks & (1 << k)) cJSON_AddItemToArray(checks, cJSON_CreateString(check_names[k]));
  cJSON_AddItemToObject(j, "communicate", refs_json(t->communicate, t->num_communicate, "name"));
  cJSON_AddItemToObject(j, "confirms", refs_json(t->confirms, t->num_confirms, "what"));
  cJSON *asserts = cJSON_AddArrayToObject(j, "assertions");
  for (int i = 0; i < t->num_assertions; i++) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "text", t->assertions[i].text);
    cJSON_AddStringToObject(a, "rule", task_rule_name(t->assertions[i].rule));
    cJSON_AddItemToObject(a, "args", string_array(t->assertions[i].args, t->assertions[i].num_args));
    cJSON_AddItemToArray(asserts, a);
  }
  cJSON_AddNumberToObject(j, "max_turns", t->max_turns);
  cJSON_AddStringToObject(j, "expected_end", task_end_name(t->expected_end));
  if (t->variant) cJSON_AddStringToObject(j, "variant", t->variant);  // optional: absent in older files
  return j;
}

char *task_to_json_line(const Task *t, FimiError *err) {
  cJSON *j = task_to_json(t, err);
  if (!j) return NULL;
  char *text = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  if (!text) fimi_fail(err, "out of memory printing task %s", t->id ? t->id : "?");
  return text;
}

int task_copy(const Task *src, Task *dst, FimiError *err) {
  cJSON *j = task_to_json(src, err);
  if (!j) return -1;
  int rc = task_from_json(j, dst, err);
  cJSON_Delete(j);
  return rc;
}

// ---- JSONL files ---------------------------------------------------------

int task_list_parse(const char *text, size_t len, const char *name, TaskList *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  size_t pos = 0;
  int line = 0, cap = 0;
  while (pos < len) {
    line++;
    const char *start = text + pos;
    const char *nl = memchr(start, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - start) : len - pos;
    pos += n + (nl ? 1 : 0);
    size_t k = 0;
    while (k < n && (start[k] == ' ' || start[k] == '\t' || start[k] == '\r')) k++;
    if (k == n) continue;
    if (n > TASK_MAX_LINE) {
      fimi_fail(err, "%s:%d: line longer than %d bytes", name, line, TASK_MAX_LINE);
      goto fail;
    }
    if (memchr(start, 0, n)) {
      fimi_fail(err, "%s:%d: NUL byte", name, line);
      goto fail;
    }
    cJSON *json = cJSON_ParseWithLength(start, n);
    if (!json) {
      fimi_fail(err, "%s:%d: not valid JSON", name, line);
      goto fail;
    }
    if (out->count == cap) {
      cap = cap ? cap * 2 : 64;
      Task *bigger = realloc(out->tasks, sizeof *bigger * (size_t)cap);
      if (!bigger) {
        cJSON_Delete(json);
        fimi_fail(err, "out of memory");
        goto fail_wrap;
      }
      out->tasks = bigger;
    }
    Task *slot = &out->tasks[out->count];  // counted only once parsed and unique
    int rc = task_from_json(json, slot, err);
    cJSON_Delete(json);
    if (rc != 0) goto fail_wrap;
    for (int i = 0; i < out->count; i++)
      if (strcmp(out->tasks[i].id, slot->id) == 0) {
        fimi_fail(err, "id: '%s' also on an earlier line", slot->id);
        task_free(slot);
        goto fail_wrap;
      }
    out->count++;
    continue;
  fail_wrap:
    fimi_fail_wrap(err, "%s:%d", name, line);
    goto fail;
  }
  return 0;
fail:
  task_list_free(out);
  return -1;
}

int task_list_load(const char *path, TaskList *out, FimiError *err) {
  size_t size = 0;
  char *text = file_read_all(path, (size_t)1 << 30, &size, err);
  if (!text) {
    memset(out, 0, sizeof *out);
    return -1;
  }
  int rc = task_list_parse(text, size, path, out, err);
  free(text);
  return rc;
}

void task_list_free(TaskList *list) {
  for (int i = 0; i < list->count; i++) task_free(&list->tasks[i]);
  free(list->tasks);
  memset(list, 0, sizeof *list);
}

const Task *task_list_find(const TaskList *list, const char *id) {
  for (int i = 0; i < list->count; i++)
    if (strcmp(list->tasks[i].id, id) == 0) return &list->tasks[i];
  return NULL;
}

// ---- JSON paths ----------------------------------------------------------

const cJSON *task_json_path(const cJSON *root, const char *path) {
  const cJSON *node = root;
  const char *p = path;
  while (node && p && *p) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    char key[128];
    if (n == 0 || n >= sizeof key) return NULL;
    memcpy(key, p, n);
    key[n] = 0;
    if (cJSON_IsArray(node)) {
      char *end = NULL;
      long idx = strtol(key, &end, 10);
      if (*end || idx < 0 || idx > 100000) return NULL;
      node = cJSON_GetArrayItem(node, (int)idx);
    } else if (cJSON_IsObject(node)) {
      node = cJSON_GetObjectItemCaseSensitive(node, key);
    } else {
      return NULL;
    }
    p = dot ? dot + 1 : NULL;
  }
  return node;
}

char *task_json_scalar_text(const cJSON *v) {
  if (cJSON_IsString(v)) return dup_string(v->valuestring, NULL);
  if (cJSON_IsNumber(v) || cJSON_IsBool(v)) return cJSON_PrintUnformatted(v);
  return NULL;
}
