// env/reward.c: the four-check reward (DESIGN.md section 6): sequence
// (set-based matching and LCS), database equality, communicated values and
// the deterministic judge, combined over the task's declared checks.
// Defines what env/reward.h declares.
#include "env/reward.h"

#include "core/json.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ASCII case folding: tolower() in the C locale fimi runs in, without its
// per-call locale lookup (the simulator and the judge scan every message for
// every cue).
static inline unsigned char fold(unsigned char c) { return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c; }

int reward_contains(const char *hay, const char *needle) {
  if (!hay || !needle) return 0;
  const unsigned char *h = (const unsigned char *)hay, *w = (const unsigned char *)needle;
  if (!w[0]) return 1;
  unsigned char first = fold(w[0]);
  for (const unsigned char *p = h; *p; p++) {
    if (fold(*p) != first) continue;
    size_t k = 1;
    while (w[k] && p[k] && fold(p[k]) == fold(w[k])) k++;
    if (!w[k]) return 1;
  }
  return 0;
}

// A string that is entirely a finite number (the agent wrote "5000" where
// the gold has 5000): compared as a number.
static int string_number(const char *s, double *out) {
  if (!s || !*s) return 0;
  char *end = NULL;
  double v = strtod(s, &end);
  if (*end || !isfinite(v)) return 0;
  *out = v;
  return 1;
}

static int numbers_equal(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fmax(fabs(a), fabs(b))); }

static int values_equal(const cJSON *gold, const cJSON *agent) {
  if (!gold || !agent) return 0;
  double g = 0, a = 0;
  if (cJSON_IsNumber(gold) || cJSON_IsNumber(agent)) {
    int gn = cJSON_IsNumber(gold) ? (g = gold->valuedouble, 1) : string_number(cJSON_GetStringValue(gold), &g);
    int an = cJSON_IsNumber(agent) ? (a = agent->valuedouble, 1) : string_number(cJSON_GetStringValue(agent), &a);
    return gn && an && numbers_equal(g, a);
  }
  if (cJSON_IsString(gold)) return cJSON_IsString(agent) && strcmp(gold->valuestring, agent->valuestring) == 0;
  if (cJSON_IsBool(gold)) return cJSON_IsBool(agent) && cJSON_IsTrue(gold) == cJSON_IsTrue(agent);
  if (cJSON_IsNull(gold)) return cJSON_IsNull(agent);
  if (cJSON_IsArray(gold)) {
    if (!cJSON_IsArray(agent) || cJSON_GetArraySize(gold) != cJSON_GetArraySize(agent)) return 0;
    for (const cJSON *x = gold->child, *y = agent->child; x && y; x = x->next, y = y->next)
      if (!values_equal(x, y)) return 0;
    return 1;
  }
  if (cJSON_IsObject(gold)) {
    if (!cJSON_IsObject(agent) || cJSON_GetArraySize(gold) != cJSON_GetArraySize(agent)) return 0;
    for (const cJSON *x = gold->child; x; x = x->next)
      if (!values_equal(x, cJSON_GetObjectItemCaseSensitive(agent, x->string))) return 0;
    return 1;
  }
  return 0;
}

static int call_matches_parsed(const TaskAction *gold, const char *name, const cJSON *args) {
  if (!name || strcmp(gold->name, name) != 0) return 0;
  for (int k = 0; k < gold->num_relevant; k++) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(gold->arguments, gold->relevant[k]);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(args, gold->relevant[k]);
    if (!values_equal(g, a)) return 0;
  }
  return 1;
}

int reward_call_matches(const TaskAction *gold, const char *name, const char *arguments_json) {
  cJSON *args = cJSON_Parse(arguments_json ? arguments_json : "{}");
  int m = call_matches_parsed(gold, name, args);
  cJSON_Delete(args);
  return m;
}

// Kuhn's augmenting path for the maximum matching of gold steps to calls.
static int augment(int g, int num_calls, const unsigned char *match, int num_gold, int *call_owner,
                   unsigned char *visited) {
  for (int c = 0; c < num_calls; c++) {
    if (!match[c * num_gold + g] || visited[c]) continue;
    visited[c] = 1;
    if (call_owner[c] < 0 || augment(call_owner[c], num_calls, match, num_gold, call_owner, visited)) {
      call_owner[c] = g;
      return 1;
    }
  }
  return 0;
}

static int lcs_length(const unsigned char *match, int n, int m, int *row_prev, int *row_cur) {
  for (int j = 0; j <= m; j++) row_prev[j] = 0;
  for (int i = 1; i <= n; i++) {
    row_cur[0] = 0;
    for (int j = 1; j <= m; j++) {
      int best = row_prev[j] > row_cur[j - 1] ? row_prev[j] : row_cur[j - 1];
      if (match[(i - 1) * m + (j - 1)] && row_prev[j - 1] + 1 > best) best = row_prev[j - 1] + 1;
      row_cur[j] = best;
    }
    int *tmp = row_prev;
    row_prev = row_cur;
    row_cur = tmp;
  }
  return row_prev[m];
}

// Fills matched (maximum matching) and lcs over the successful calls.
static int sequence_scores(const RewardInput *in, int *matched, int *lcs, FimiError *err) {
  const Task *t = in->task;
  int n = 0, m = t->num_gold;
  *matched = *lcs = 0;
  if (m == 0) return 0;
  int *ok_index = malloc(sizeof(int) * (size_t)(in->num_calls + 1));
  unsigned char *match = calloc((size_t)(in->num_calls + 1) * (size_t)m, 1);
  int *owner = malloc(sizeof(int) * (size_t)(in->num_calls + 1));
  unsigned char *visited = malloc((size_t)in->num_calls + 1);
  int *rows = malloc(sizeof(int) * 2 * (size_t)(m + 1));
  if (!ok_index || !match || !owner || !visited || !rows) {
    free(ok_index), free(match), free(owner), free(visited), free(rows);
    return fimi_fail(err, "reward: out of memory");
  }
  for (int c = 0; c < in->num_calls; c++) {
    if (!in->calls[c].ok) continue;
    cJSON *args = cJSON_Parse(in->calls[c].arguments ? in->calls[c].arguments : "{}");
    for (int g = 0; g < m; g++) match[n * m + g] = (unsigned char)call_matches_parsed(&t->gold[g], in->calls[c].name, args);
    cJSON_Delete(args);
    ok_index[n++] = c;
  }
  for (int c = 0; c < n; c++) owner[c] = -1;
  for (int g = 0; g < m; g++) {
    memset(visited, 0, (size_t)n + 1);
    *matched += augment(g, n, match, m, owner, visited);
  }
  *lcs = lcs_length(match, n, m, rows, rows + m + 1);
  free(ok_index), free(match), free(owner), free(visited), free(rows);
  return 0;
}

static int any_message_contains(const RewardInput *in, const char *word) {
  for (int i = 0; i < in->num_messages; i++)
    if (reward_contains(in->messages[i], word)) return 1;
  return 0;
}

static int first_ok_call(const RewardInput *in, const char *name) {
  for (int i = 0; i < in->num_calls; i++)
    if (in->calls[i].ok && in->calls[i].name && strcmp(in->calls[i].name, name) == 0) return i;
  return -1;
}

int reward_rule_met(const TaskAssertion *a, const RewardInput *in) {
  switch (a->rule) {
    case TASK_RULE_MENTIONS_ANY:
      for (int k = 0; k < a->num_args; k++)
        if (any_message_contains(in, a->args[k])) return 1;
      return 0;
    case TASK_RULE_MENTIONS_NONE:
      for (int k = 0; k < a->num_args; k++)
        if (any_message_contains(in, a->args[k])) return 0;
      return 1;
    case TASK_RULE_CALLED: return first_ok_call(in, a->args[0]) >= 0;
    case TASK_RULE_NOT_CALLED: return first_ok_call(in, a->args[0]) < 0;
    case TASK_RULE_CALLED_BEFORE: {
      int first_a = first_ok_call(in, a->args[0]), first_b = first_ok_call(in, a->args[1]);
      return first_a >= 0 && (first_b < 0 || first_a < first_b);
    }
    case TASK_RULE_END_IS: return task_end_from_name(a->args[0]) == (int)in->end;
    default: return 0;
  }
}

int reward_result_holds(const cJSON *result, const char *value) {
  if (!result || !value || !*value) return 0;
  if (cJSON_IsString(result)) return strstr(result->valuestring, value) != NULL;
  double v = 0;  // numbers as numbers, as the sequence check compares them (no printing per scalar)
  if (cJSON_IsNumber(result)) return string_number(value, &v) && numbers_equal(v, result->valuedouble);
  if (cJSON_IsBool(result)) return !strcmp(value, cJSON_IsTrue(result) ? "true" : "false");
  for (const cJSON *c = result->child; c; c = c->next)
    if (reward_result_holds(c, value)) return 1;
  return 0;
}

int reward_value_said(const RewardInput *in, int i) {
  const char *value = in->values[i];
  if (!value || !in->value_known_from) return 0;
  for (int m = in->value_known_from[i]; m >= 0 && m < in->num_messages; m++)
    if (in->messages[m] && strstr(in->messages[m], value)) return 1;
  return 0;
}

int reward_compute(const RewardInput *in, RewardBreakdown *out, FimiError *err) {
  const Task *t = in->task;
  memset(out, 0, sizeof *out);
  out->checks = t->checks;
  out->end = in->end;
  out->turns = in->turns;
  out->num_gold = t->num_gold;
  if (sequence_scores(in, &out->matched, &out->lcs, err) != 0) return -1;
  out->seq = t->num_gold ? (double)out->matched / t->num_gold : 1.0;
  out->seq_frac = t->num_gold ? (double)out->lcs / t->num_gold : 1.0;
  out->seq_strict = out->lcs == t->num_gold ? out->seq : 0.0;
  out->db = in->db_equal ? 1.0 : 0.0;
  out->num_values = in->num_values;
  for (int i = 0; i < in->num_values; i++) out->values_said += reward_value_said(in, i);
  out->comm = in->num_values ? (double)out->values_said / in->num_values : 1.0;
  out->num_assertions = t->num_assertions;
  for (int i = 0; i < t->num_assertions; i++) out->assertions_met += reward_rule_met(&t->assertions[i], in);
  out->judge = t->num_assertions ? (double)out->assertions_met / t->num_assertions : 1.0;
  if ((t->checks & TASK_CHECK_DB) && !in->db_equal) {
    out->judge = 0.0;  // a failed write can never be rescued by the judge
    out->db_failed_judge_zeroed = 1;
  }
  if (reward_totals(out) != 0) return fimi_fail(err, "reward: task %s declares no checks", t->id ? t->id : "?");
  return 0;
}

int reward_totals(RewardBreakdown *out) {
  const double w[4] = {REWARD_W_SEQ, REWARD_W_DB, REWARD_W_COMM, REWARD_W_JUDGE};
  const double r[4] = {out->seq, out->db, out->comm, out->judge};
  double num = 0, num_strict = 0, den = 0;
  for (int k = 0; k < 4; k++) {
    if (!(out->checks & (1 << k))) continue;
    num += w[k] * r[k];
    num_strict += w[k] * (k == 0 ? out->seq_strict : r[k]);
    den += w[k];
  }
  if (den <= 0) return -1;
  out->total = num / den;
  out->strict_total = num_strict / den;
  return 0;
}

cJSON *reward_to_json(const RewardBreakdown *r) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  cJSON *checks = cJSON_AddArrayToObject(j, "checks");
  const char *names[4] = {"seq", "db", "comm", "judge"};
  for (int k = 0; k < 4; k++)
    if (r->checks & (1 << k)) cJSON_AddItemToArray(checks, cJSON_CreateString(names[k]));
  cJSON_AddNumberToObject(j, "total", r->total);
  cJSON_AddNumberToObject(j, "strict_total", r->strict_total);
  cJSON_AddNumberToObject(j, "seq", r->seq);
  cJSON_AddNumberToObject(j, "seq_frac", r->seq_frac);
  cJSON_AddNumberToObject(j, "seq_strict", r->seq_strict);
  cJSON_AddNumberToObject(j, "db", r->db);
  cJSON_AddNumberToObject(j, "comm", r->comm);
  cJSON_AddNumberToObject(j, "judge", r->judge);
  cJSON_AddNumberToObject(j, "matched", r->matched);
  cJSON_AddNumberToObject(j, "lcs", r->lcs);
  cJSON_AddNumberToObject(j, "num_gold", r->num_gold);
  cJSON_AddNumberToObject(j, "values_said", r->values_said);
  cJSON_AddNumberToObject(j, "num_values", r->num_values);
  cJSON_AddNumberToObject(j, "assertions_met", r->assertions_met);
  cJSON_AddNumberToObject(j, "num_assertions", r->num_assertions);
  cJSON_AddBoolToObject(j, "judge_zeroed_by_db", r->db_failed_judge_zeroed);
  cJSON_AddStringToObject(j, "end", task_end_name(r->end));
  cJSON_AddNumberToObject(j, "turns", r->turns);
  if (r->judge_model) {  // only then, as below
    cJSON_AddStringToObject(j, "judge_by", "model");
    cJSON_AddNumberToObject(j, "judge_rules", r->judge_rules);
  }
  if (r->simulator_model) {  // only then: files of rule-based runs keep their bytes
    cJSON_AddStringToObject(j, "simulator", "model");
    cJSON_AddNumberToObject(j, "simulator_drift", r->simulator_drift);
  }
  return j;
}

int reward_from_json(const cJSON *json, RewardBreakdown *out, const char *what, FimiError *err) {
  memset(out, 0, sizeof *out);
  if (!cJSON_IsObject(json)) return fimi_fail(err, "%s: not an object", what);
  const cJSON *checks = cJSON_GetObjectItemCaseSensitive(json, "checks");
  if (!cJSON_IsArray(checks)) return fimi_fail(err, "%s.checks: missing or not an array", what);
  const char *names[4] = {"seq", "db", "comm", "judge"};
  const cJSON *c;
  cJSON_ArrayForEach(c, checks) {
    int k = 0;
    while (k < 4 && !(cJSON_IsString(c) && !strcmp(c->valuestring, names[k]))) k++;
    if (k == 4) return fimi_fail(err, "%s.checks: unknown check (seq, db, comm, judge)", what);
    out->checks |= 1 << k;
  }
  struct { const char *key; double *value; } doubles[] = {
      {"total", &out->total}, {"strict_total", &out->strict_total}, {"seq", &out->seq},
      {"seq_frac", &out->seq_frac}, {"seq_strict", &out->seq_strict}, {"db", &out->db},
      {"comm", &out->comm}, {"judge", &out->judge}};
  for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; i++)
    if (json_get_double(json, doubles[i].key, 1, doubles[i].value, what, err) != 0) return -1;
  struct { const char *key; int *value; } ints[] = {
      {"matched", &out->matched}, {"lcs", &out->lcs}, {"num_gold", &out->num_gold},
      {"values_said", &out->values_said}, {"num_values", &out->num_values},
      {"assertions_met", &out->assertions_met}, {"num_assertions", &out->num_assertions}, {"turns", &out->turns}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    if (json_get_int(json, ints[i].key, 1, ints[i].value, what, err) != 0) return -1;
  if (json_get_bool(json, "judge_zeroed_by_db", 1, &out->db_failed_judge_zeroed, what, err) != 0) return -1;
  char end[32];
  if (json_get_string(json, "end", 1, end, sizeof end, what, err) != 0) return -1;
  int e = task_end_from_name(end);
  if (e < 0) return fimi_fail(err, "%s.end: unknown end \"%s\"", what, end);
  out->end = (TaskEnd)e;
  const cJSON *by = cJSON_GetObjectItemCaseSensitive(json, "judge_by");
  if (by && !(cJSON_IsString(by) && !strcmp(by->valuestring, "model")))
    return fimi_fail(err, "%s.judge_by: only \"model\" is written (absent: the rules)", what);
  out->judge_model = by != NULL;
  if (by && json_get_double(json, "judge_rules", 1, &out->judge_rules, what, err) != 0) return -1;
  const cJSON *sim = cJSON_GetObjectItemCaseSensitive(json, "simulator");
  if (sim && !(cJSON_IsString(sim) && !strcmp(sim->valuestring, "model")))
    return fimi_fail(err, "%s.simulator: only \"model\" is written (absent: the rule-based simulator)", what);
  out->simulator_model = sim != NULL;
  if (sim && json_get_int(json, "simulator_drift", 1, &out->simulator_drift, what, err) != 0) return -1;
  return 0;
}
