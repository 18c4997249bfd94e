// dpo/corpus.c: reference dialogs from env's oracle, validated and annotated
// with their atomic actions, and the coverage of a corpus (dpo/corpus.h).
#include "dpo/corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpo/facts.h"
#include "env/bank/tools.h"
#include "env/reward.h"
#include "env/transcript.h"
#include "env/user_sim.h"

static int oom(FimiError *err) { return fimi_fail(err, "corpus: out of memory"); }

int dpo_corpus_dialog(EnvWorld *world, const Task *task, uint64_t seed, EnvCatalogMode mode, cJSON **row,
                      DpoCheckResult *verdict, FimiError *err) {
  *row = NULL;
  cJSON *messages = NULL;
  EnvTranscriptStats st;
  FimiError episode_err = {0};
  if (env_transcript_oracle(world, task, seed, mode, &messages, &st, &episode_err) != 0) {
    memset(verdict, 0, sizeof *verdict);
    verdict->reason = DPO_REJECT_EPISODE_FAILED;
    verdict->message = -1;
    snprintf(verdict->detail, sizeof verdict->detail, "%.300s", episode_err.message);
    return 0;
  }
  int rc = dpo_corpus_row(task, messages, st.reward.end, seed, mode, row, verdict, err);
  cJSON_Delete(messages);
  return rc;
}

// ---- atomic actions ----------------------------------------------------------

static cJSON *string_array(const char *const *items, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(items[i]));
  return a;
}

static cJSON *call_action(const Task *task, int gold, const cJSON *fn) {
  cJSON *a = cJSON_CreateObject();
  cJSON_AddStringToObject(a, "type", "tool_call");
  cJSON_AddItemToObject(a, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(fn, "name"), 1));
  cJSON_AddItemToObject(a, "arguments", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(fn, "arguments"), 1));
  const TaskAction *g = gold < task->num_gold ? &task->gold[gold] : NULL;
  cJSON_AddItemToObject(a, "relevant", g ? string_array((const char *const *)g->relevant, g->num_relevant)
                                         : cJSON_CreateArray());
  cJSON_AddNumberToObject(a, "gold", gold);
  return a;
}

static cJSON *message_action(const Task *task, const char *text, FimiError *err) {
  DpoFacts facts = {0};
  if (dpo_facts_add_text(&facts, text, strlen(text), err) != 0) return NULL;
  cJSON *a = cJSON_CreateObject();
  cJSON_AddStringToObject(a, "type", "message");
  cJSON_AddStringToObject(a, "text", text);
  cJSON *f = cJSON_AddArrayToObject(a, "facts");
  for (int i = 0; f && i < facts.count; i++) cJSON_AddItemToArray(f, cJSON_CreateString(facts.items[i]));
  dpo_facts_free(&facts);
  cJSON *asks = cJSON_AddArrayToObject(a, "asks");
  for (int i = 0; asks && i < task->num_fields; i++)
    if (user_sim_asks_for(task, i, text)) cJSON_AddItemToArray(asks, cJSON_CreateString(task->fields[i].name));
  cJSON_AddBoolToObject(a, "confirm", user_sim_asks_confirmation(text));
  cJSON *any = cJSON_AddArrayToObject(a, "mention_any");
  cJSON *none = cJSON_AddArrayToObject(a, "mention_none");
  for (int i = 0; any && none && i < task->num_assertions; i++) {
    const TaskAssertion *as = &task->assertions[i];
    int said = 0;
    for (int j = 0; j < as->num_args; j++) said |= reward_contains(text, as->args[j]);
    if (as->rule == TASK_RULE_MENTIONS_ANY && said)
      cJSON_AddItemToArray(any, string_array((const char *const *)as->args, as->num_args));
    for (int j = 0; as->rule == TASK_RULE_MENTIONS_NONE && j < as->num_args; j++)
      cJSON_AddItemToArray(none, cJSON_CreateString(as->args[j]));
  }
  cJSON_AddBoolToObject(a, "refusal", task->expected_end == TASK_END_OUT_OF_SCOPE && cJSON_GetArraySize(any) > 0);
  return a;
}

cJSON *dpo_corpus_actions(const Task *task, const cJSON *messages, FimiError *err) {
  cJSON *out = cJSON_CreateArray();
  int index = 0, gold = 0, bad = out == NULL;
  for (const cJSON *m = messages->child; !bad && m; m = m->next, index++) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role) || (strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "model")))
      continue;
    cJSON *turn = cJSON_CreateObject(), *acts = NULL;
    if (!turn || !cJSON_AddNumberToObject(turn, "message", index) || !(acts = cJSON_AddArrayToObject(turn, "actions"))) {
      cJSON_Delete(turn);
      bad = 1;
      break;
    }
    cJSON_AddItemToArray(out, turn);
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    const char *text = cJSON_IsString(content) ? content->valuestring : "";
    cJSON *a = NULL;
    if (cJSON_IsArray(calls) && calls->child) {
      const cJSON *fn = cJSON_GetObjectItemCaseSensitive(calls->child, "function");
      if (*text) {
        if (!(a = message_action(task, text, err))) bad = 1;
        else cJSON_AddItemToArray(acts, a);
      }
      a = bad ? NULL : call_action(task, gold++, fn ? fn : calls->child);
    } else {
      a = message_action(task, text, err);
    }
    if (!a) bad = 1;
    else cJSON_AddItemToArray(acts, a);
  }
  if (bad) {
    cJSON_Delete(out);
    if (!err->message[0]) oom(err);
    return NULL;
  }
  return out;
}

int dpo_corpus_row(const Task *task, const cJSON *messages, TaskEnd end, uint64_t seed, EnvCatalogMode mode,
                   cJSON **row, DpoCheckResult *verdict, FimiError *err) {
  *row = NULL;
  if (dpo_check_dialog(task, messages, end, verdict, err) != 0) return -1;
  if (verdict->reason != DPO_REJECT_NONE) return 0;
  cJSON *actions = dpo_corpus_actions(task, messages, err);
  cJSON *task_json = actions ? task_to_json(task, err) : NULL;
  cJSON *r = task_json ? cJSON_CreateObject() : NULL;
  if (!r) {
    cJSON_Delete(actions);
    cJSON_Delete(task_json);
    return err->message[0] ? -1 : oom(err);
  }
  cJSON_AddStringToObject(r, "task_id", task->id);
  cJSON_AddStringToObject(r, "family", task->family);
  cJSON_AddStringToObject(r, "kind", task_kind_name(task->kind));
  cJSON_AddStringToObject(r, "use_case", task_use_case_name(task->use_case));
  cJSON_AddStringToObject(r, "style", task_style_name(task->style));
  cJSON_AddNumberToObject(r, "seed", (double)seed);
  cJSON_AddStringToObject(r, "catalog", env_catalog_mode_name(mode));
  cJSON_AddStringToObject(r, "end", task_end_name(end));
  cJSON_AddItemToObject(r, "messages", cJSON_Duplicate(messages, 1));
  cJSON_AddItemToObject(r, "actions", actions);
  cJSON_AddItemToObject(r, "task", task_json);
  *row = r;
  return 0;
}

// ---- rows read back --------------------------------------------------------------

int dpo_dialog_parse(const cJSON *row, const char *what, DpoDialog *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  const cJSON *task = cJSON_GetObjectItemCaseSensitive(row, "task");
  const cJSON *family = cJSON_GetObjectItemCaseSensitive(row, "family");
  out->messages = cJSON_GetObjectItemCaseSensitive(row, "messages");
  out->actions = cJSON_GetObjectItemCaseSensitive(row, "actions");
  if (!cJSON_IsObject(task)) return fimi_fail(err, "%s: \"task\" missing (a row of `fimi dpo corpus build`)", what);
  if (!cJSON_IsArray(out->messages) || cJSON_GetArraySize(out->messages) < 2)
    return fimi_fail(err, "%s: \"messages\" must be an array of at least two messages", what);
  if (!cJSON_IsArray(out->actions)) return fimi_fail(err, "%s: \"actions\" must be an array", what);
  int n = cJSON_GetArraySize(out->messages);
  for (const cJSON *t = out->actions->child; t; t = t->next) {
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(t, "message");
    const cJSON *acts = cJSON_GetObjectItemCaseSensitive(t, "actions");
    if (!cJSON_IsNumber(idx) || idx->valuedouble < 2 || idx->valuedouble >= n || !cJSON_IsArray(acts) || !acts->child)
      return fimi_fail(err, "%s: \"actions\": each turn needs \"message\" (an assistant message index) and \"actions\"",
                       what);
    const cJSON *m = cJSON_GetArrayItem(out->messages, idx->valueint);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role) || (strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "model")))
      return fimi_fail(err, "%s: \"actions\": message %d is not an assistant message", what, idx->valueint);
    const cJSON *last = acts->child;
    while (last->next) last = last->next;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(last, "type");
    if (!cJSON_IsString(type) || (strcmp(type->valuestring, "tool_call") && strcmp(type->valuestring, "message")))
      return fimi_fail(err, "%s: \"actions\": message %d: an action's type must be tool_call or message", what,
                       idx->valueint);
    if (!strcmp(type->valuestring, "tool_call") && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(last, "name")))
      return fimi_fail(err, "%s: \"actions\": message %d: a tool_call without a name", what, idx->valueint);
  }
  if (task_from_json(task, &out->task, err) != 0) return fimi_fail_wrap(err, "%s: \"task\"", what);
  out->family = cJSON_IsString(family) ? family->valuestring : out->task.family;
  return 0;
}

void dpo_dialog_free(DpoDialog *d) {
  task_free(&d->task);
  memset(d, 0, sizeof *d);
}

// ---- coverage ----------------------------------------------------------------------

int dpo_coverage_init(DpoCoverage *c, FimiError *err) {
  memset(c, 0, sizeof *c);
  c->families = cJSON_CreateObject();
  c->tools = cJSON_CreateObject();
  if (!c->families || !c->tools) {
    dpo_coverage_free(c);
    return oom(err);
  }
  return 0;
}

void dpo_coverage_free(DpoCoverage *c) {
  cJSON_Delete(c->families);
  cJSON_Delete(c->tools);
  c->families = c->tools = NULL;
}

static void count_key(cJSON *obj, const char *key) {
  cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (v) cJSON_SetNumberValue(v, v->valuedouble + 1);
  else cJSON_AddNumberToObject(obj, key, 1);
}

void dpo_coverage_reject(DpoCoverage *c, DpoRejectReason reason) {
  c->rejected++;
  if (reason >= 0 && reason < DPO_REJECT_COUNT) c->rejected_by[reason]++;
}

int dpo_coverage_add(DpoCoverage *c, const Task *task, const cJSON *row, const DpoCheckResult *verdict,
                     FimiError *err) {
  (void)err;
  c->dialogs++;
  c->arithmetic_checked += verdict->arithmetic_checked;
  c->by_use_case[task->use_case]++;
  c->by_kind[task->kind]++;
  const cJSON *end = cJSON_GetObjectItemCaseSensitive(row, "end");
  int e = cJSON_IsString(end) ? task_end_from_name(end->valuestring) : -1;
  if (e >= 0) c->by_end[e]++;
  for (int i = 0; i < task->num_assertions; i++) c->rules[task->assertions[i].rule]++;
  for (int i = 0; i < task->num_gold; i++) c->confirmations += task->gold[i].confirm;
  count_key(c->families, task->family);
  const cJSON *messages = cJSON_GetObjectItemCaseSensitive(row, "messages");
  for (const cJSON *m = messages ? messages->child : NULL; m; m = m->next) {
    const char *role = cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring;
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (!strcmp(role, "assistant")) {
      c->agent_turns++;
      if (cJSON_IsArray(calls) && calls->child) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(calls->child, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn ? fn : calls->child, "name");
        c->calls++;
        if (cJSON_IsString(name)) count_key(c->tools, name->valuestring);
      } else {
        c->messages++;
      }
    } else if (!strcmp(role, "tool")) {
      const char *text = cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring;
      c->tool_errors += strstr(text, "\"error\":") != NULL;
    }
  }
  return 0;
}

static cJSON *histogram(const int *counts, int n, const char *(*name)(int)) {
  cJSON *o = cJSON_CreateObject();
  for (int i = 0; o && i < n; i++)
    if (counts[i]) cJSON_AddNumberToObject(o, name(i), counts[i]);
  return o;
}

static const char *use_case_name(int i) { return task_use_case_name((TaskUseCase)i); }
static const char *kind_name(int i) { return task_kind_name((TaskKind)i); }
static const char *end_name(int i) { return task_end_name((TaskEnd)i); }
static const char *rule_name(int i) { return task_rule_name((TaskRule)i); }
static const char *reason_name(int i) { return dpo_reject_reason_name((DpoRejectReason)i); }

cJSON *dpo_coverage_json(const DpoCoverage *c) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "dialogs", c->dialogs);
  cJSON_AddNumberToObject(o, "rejected", c->rejected);
  cJSON_AddItemToObject(o, "rejected_by", histogram(c->rejected_by, DPO_REJECT_COUNT, reason_name));
  cJSON_AddItemToObject(o, "use_case", histogram(c->by_use_case, TASK_USE_COUNT, use_case_name));
  cJSON_AddItemToObject(o, "kind", histogram(c->by_kind, TASK_KIND_COUNT, kind_name));
  cJSON_AddItemToObject(o, "family", cJSON_Duplicate(c->families, 1));
  cJSON_AddItemToObject(o, "end", histogram(c->by_end, TASK_END_COUNT, end_name));
  cJSON_AddItemToObject(o, "rules", histogram(c->rules, TASK_RULE_COUNT, rule_name));
  cJSON_AddItemToObject(o, "tools", cJSON_Duplicate(c->tools, 1));
  cJSON *missing = cJSON_AddArrayToObject(o, "tools_not_exercised");
  for (int i = 0; missing && i < env_tool_count(); i++)
    if (!cJSON_GetObjectItemCaseSensitive(c->tools, env_tool_name(i)))
      cJSON_AddItemToArray(missing, cJSON_CreateString(env_tool_name(i)));
  cJSON_AddNumberToObject(o, "agent_turns", c->agent_turns);
  cJSON_AddNumberToObject(o, "tool_calls", c->calls);
  cJSON_AddNumberToObject(o, "messages", c->messages);
  cJSON_AddNumberToObject(o, "confirmed_actions", c->confirmations);
  cJSON_AddNumberToObject(o, "tool_error_turns", c->tool_errors);
  cJSON_AddNumberToObject(o, "arithmetic_checked", (double)c->arithmetic_checked);
  return o;
}
