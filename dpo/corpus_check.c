// dpo/corpus_check.c: dpo_check_dialog (dpo/corpus_check.h): one walk over
// a dialog's messages, keeping the facts said so far and the calls made,
// then the whole-dialog checks (calls complete, rules, values, end).
#include "dpo/corpus_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpo/facts.h"
#include "env/bank/tools.h"
#include "env/episode.h"
#include "env/reward.h"
#include "env/user_sim.h"

static const char *const reason_names[DPO_REJECT_COUNT] = {
    "none",          "malformed",      "call_mismatch", "tool_error",    "argument_not_in_data", "value_not_in_data",
    "arithmetic",    "no_disclosure",  "rule",          "value_missing", "wrong_end",            "episode_failed"};

const char *dpo_reject_reason_name(DpoRejectReason r) {
  return r >= 0 && r < DPO_REJECT_COUNT ? reason_names[r] : "?";
}

// What the walk keeps.
typedef struct Walk {
  const Task *task;
  DpoFacts known;    // values of the system turn, the customer, tool results
  int calls;         // successful calls so far (= gold steps matched)
  int confirmed;     // confirmed steps done
  cJSON *results;    // parsed results, one per call (for env_resolve_value)
  const char *last_message;  // the agent's last message
  const char *last_reply;    // the customer's reply to it
  // Values a consent question quotes before the action that produces them
  // (a charge, a penalty): the next call's result must hold them.
  DpoFacts pending;
  int pending_message;
  char *said;        // every agent message, joined (for the rubric and values)
  size_t said_len;
  DpoCheckResult *out;
} Walk;

static int reject(Walk *w, DpoRejectReason r, int message, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int reject(Walk *w, DpoRejectReason r, int message, const char *fmt, ...) {
  w->out->reason = r;
  w->out->message = message;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->out->detail, sizeof w->out->detail, fmt, ap);
  va_end(ap);
  return 1;
}

static const char *content_of(const cJSON *m) {
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
  return cJSON_IsString(c) ? c->valuestring : NULL;
}

static int append_said(Walk *w, const char *text, FimiError *err) {
  size_t n = strlen(text);
  char *bigger = realloc(w->said, w->said_len + n + 2);
  if (!bigger) return fimi_fail(err, "corpus check: out of memory");
  w->said = bigger;
  memcpy(w->said + w->said_len, text, n);
  w->said_len += n;
  w->said[w->said_len++] = '\n';
  w->said[w->said_len] = 0;
  return 0;
}

// The first fact of text absent from the known facts (NULL: none); `buf`
// holds it.
static const char *unknown_fact(const Walk *w, const char *text, char *buf, FimiError *err, int *rc) {
  DpoFacts f = {0};
  *rc = dpo_facts_add_text(&f, text, strlen(text), err);
  const char *found = NULL;
  for (int i = 0; *rc == 0 && i < f.count && !found; i++)
    if (!dpo_facts_has(&w->known, f.items[i])) found = strcpy(buf, f.items[i]);
  dpo_facts_free(&f);
  return found;
}

// The tool call of an assistant message (name, arguments), or 0 when none.
static int message_call(const cJSON *m, const char **name, const cJSON **args) {
  const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
  if (!cJSON_IsArray(calls) || cJSON_GetArraySize(calls) == 0) return 0;
  const cJSON *c = calls->child;
  const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
  if (fn) c = fn;
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
  *name = cJSON_IsString(n) ? n->valuestring : NULL;
  *args = cJSON_GetObjectItemCaseSensitive(c, "arguments");
  return 1;
}

// Consent before a confirmed or charged step: the agent's last message asked
// for it (quoting the confirmed value) and the customer agreed.
static int check_disclosure(Walk *w, int index, const TaskAction *g, const char *name, FimiError *err) {
  int tool = env_tool_index(name);
  if (!g->confirm && !(tool >= 0 && env_tool_charged(tool) && w->task->num_confirms > w->confirmed)) return 0;
  if (!w->last_message || !user_sim_asks_confirmation(w->last_message) || !w->last_reply ||
      !user_sim_is_agreement(w->last_reply))
    return reject(w, DPO_REJECT_NO_DISCLOSURE, index, "%s without a disclosure and the customer's consent before it",
                  name);
  int k = w->confirmed < w->task->num_confirms ? w->confirmed : w->task->num_confirms - 1;
  w->confirmed++;
  if (k < 0 || w->task->confirms[k].step < 0) return 0;
  FimiError e = {0};
  char *value = env_resolve_value(w->results, &w->task->confirms[k], &e);
  if (!value) return 0;  // refers to a later step's output: nothing to quote yet
  int quoted = reward_contains(w->last_message, value);
  int rc = quoted ? 0 : reject(w, DPO_REJECT_NO_DISCLOSURE, index, "%s: the disclosure does not quote %s (%s)", name,
                               w->task->confirms[k].name, value);
  free(value);
  (void)err;
  return rc;
}

// The reward-relevant arguments (those the gold action pins) must come from
// the data; free-text ones (a hand-off's reason) are the agent's words.
static int check_argument_sources(Walk *w, int index, const TaskAction *g, const cJSON *args, FimiError *err) {
  for (int i = 0; i < g->num_relevant; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, g->relevant[i]);
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;
    char fact[DPO_FACT_MAX];
    int frc = 0;
    const char *bad = text ? unknown_fact(w, text, fact, err, &frc) : NULL;
    free(text);
    if (frc) return -1;
    if (bad)
      return reject(w, DPO_REJECT_ARGUMENT_NOT_IN_DATA, index, "%s: argument %s = %s is in no earlier turn", g->name,
                    g->relevant[i], fact);
  }
  return 0;
}

// Values quoted in a consent question ahead of the action must be in that
// action's result.
static int check_pending(Walk *w, const char *result_text, FimiError *err) {
  if (w->pending.count == 0) return 0;
  DpoFacts got = {0};
  if (dpo_facts_add_text(&got, result_text, strlen(result_text), err) != 0) return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < w->pending.count; i++)
    if (!dpo_facts_has(&got, w->pending.items[i]))
      rc = reject(w, DPO_REJECT_VALUE_NOT_IN_DATA, w->pending_message,
                  "the consent question quotes %s, which neither an earlier turn nor the action's result holds",
                  w->pending.items[i]);
  dpo_facts_free(&got);
  dpo_facts_free(&w->pending);
  return rc;
}

static int check_call(Walk *w, int index, const cJSON *m, const cJSON *tool_turn, FimiError *err) {
  const char *name = NULL;
  const cJSON *args = NULL;
  message_call(m, &name, &args);
  if (!name || (args && !cJSON_IsObject(args) && !cJSON_IsString(args)))
    return reject(w, DPO_REJECT_MALFORMED, index, "a tool call without a name or an arguments object");
  cJSON *parsed = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
  const cJSON *a = parsed ? parsed : args;
  char *text = a ? cJSON_PrintUnformatted(a) : NULL;
  int rc = 0;
  if (w->calls >= w->task->num_gold)
    rc = reject(w, DPO_REJECT_CALL_MISMATCH, index, "call %d (%s) beyond the %d gold actions", w->calls + 1, name,
                w->task->num_gold);
  else if (!reward_call_matches(&w->task->gold[w->calls], name, text ? text : "{}"))
    rc = reject(w, DPO_REJECT_CALL_MISMATCH, index, "call %d is %s %s, gold is %s", w->calls + 1, name,
                text ? text : "{}", w->task->gold[w->calls].name);
  if (!rc) rc = check_argument_sources(w, index, &w->task->gold[w->calls], a, err);
  if (!rc) rc = check_disclosure(w, index, &w->task->gold[w->calls], name, err);
  free(text);
  // The tool turn: a result, whose arithmetic must agree.
  const char *content = content_of(tool_turn);
  cJSON *turn = content ? cJSON_Parse(content) : NULL;
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(turn, "result");
  char detail[256];
  if (!rc && !result)
    rc = reject(w, DPO_REJECT_TOOL_ERROR, index + 1, "%s: the tool turn holds no result: %.200s", name,
                content ? content : "(none)");
  int checked = 0;
  if (!rc && result && !dpo_check_arithmetic(name, a, result, &checked, detail, sizeof detail))
    rc = reject(w, DPO_REJECT_ARITHMETIC, index + 1, "%s", detail);
  w->out->arithmetic_checked += checked;
  if (!rc) rc = check_pending(w, content, err);
  if (!rc) {
    cJSON_AddItemToArray(w->results, cJSON_Duplicate(result, 1));
    w->calls++;
    if (dpo_facts_add_text(&w->known, content, strlen(content), err) != 0) rc = -1;
  }
  cJSON_Delete(turn);
  cJSON_Delete(parsed);
  return rc;
}

static int check_message(Walk *w, int index, const char *text, FimiError *err) {
  DpoFacts said = {0};
  if (dpo_facts_add_text(&said, text, strlen(text), err) != 0) return -1;
  int consent = user_sim_asks_confirmation(text), rc = 0;
  for (int i = 0; rc == 0 && i < said.count; i++) {
    if (dpo_facts_has(&w->known, said.items[i])) continue;
    if (consent) {
      rc = dpo_facts_add_value(&w->pending, said.items[i], err);
      w->pending_message = index;
    } else {
      rc = reject(w, DPO_REJECT_VALUE_NOT_IN_DATA, index, "the agent says %s, which no earlier turn holds",
                  said.items[i]);
    }
  }
  dpo_facts_free(&said);
  if (rc) return rc;
  w->last_message = text;
  w->last_reply = NULL;
  return append_said(w, text, err);
}

// The rubric rules, read from the dialog itself (not from a bank call log).
static int rule_met(const Walk *w, const TaskAssertion *a, const cJSON *messages, TaskEnd end) {
  switch (a->rule) {
    case TASK_RULE_MENTIONS_ANY:
      for (int i = 0; i < a->num_args; i++)
        if (reward_contains(w->said ? w->said : "", a->args[i])) return 1;
      return 0;
    case TASK_RULE_MENTIONS_NONE:
      for (int i = 0; i < a->num_args; i++)
        if (reward_contains(w->said ? w->said : "", a->args[i])) return 0;
      return 1;
    case TASK_RULE_END_IS: return a->num_args > 0 && task_end_from_name(a->args[0]) == (int)end;
    default: break;
  }
  // Call rules: the order of successful calls in the dialog.
  int first_a = -1, first_b = -1, k = 0;
  for (const cJSON *m = messages->child; m; m = m->next) {
    const char *name = NULL;
    const cJSON *args = NULL;
    if (!message_call(m, &name, &args) || !name) continue;
    if (a->num_args > 0 && first_a < 0 && strcmp(name, a->args[0]) == 0) first_a = k;
    if (a->num_args > 1 && first_b < 0 && strcmp(name, a->args[1]) == 0) first_b = k;
    k++;
  }
  if (a->rule == TASK_RULE_CALLED) return first_a >= 0;
  if (a->rule == TASK_RULE_NOT_CALLED) return first_a < 0;
  if (a->rule == TASK_RULE_CALLED_BEFORE) return first_a >= 0 && (first_b < 0 || first_a < first_b);
  return 0;
}

static int check_whole(Walk *w, const cJSON *messages, TaskEnd end) {
  const Task *t = w->task;
  if (w->pending.count)
    return reject(w, DPO_REJECT_VALUE_NOT_IN_DATA, w->pending_message,
                  "the consent question quotes %s, which no turn of the dialog holds", w->pending.items[0]);
  if (w->calls != t->num_gold)
    return reject(w, DPO_REJECT_CALL_MISMATCH, -1, "%d of the %d gold actions called", w->calls, t->num_gold);
  for (int i = 0; i < t->num_communicate; i++) {
    FimiError e = {0};
    char *value = env_resolve_value(w->results, &t->communicate[i], &e);
    if (!value) return reject(w, DPO_REJECT_VALUE_MISSING, -1, "%s: %s", t->communicate[i].name, e.message);
    int said = w->said && strstr(w->said, value) != NULL;
    int rc = said ? 0 : reject(w, DPO_REJECT_VALUE_MISSING, -1, "%s (%s) is never said", t->communicate[i].name, value);
    free(value);
    if (rc) return rc;
  }
  for (int i = 0; i < t->num_assertions; i++)
    if (!rule_met(w, &t->assertions[i], messages, end))
      return reject(w, DPO_REJECT_RULE, -1, "assertion %d (%s) not followed: %s", i,
                    task_rule_name(t->assertions[i].rule), t->assertions[i].text);
  if (end != t->expected_end)
    return reject(w, DPO_REJECT_WRONG_END, -1, "ended %s, the task expects %s", task_end_name(end),
                  task_end_name(t->expected_end));
  return 0;
}

// Source material the agent may quote besides the turns: the rubric's words.
static int add_task_words(Walk *w, FimiError *err) {
  for (int i = 0; i < w->task->num_assertions; i++)
    for (int j = 0; j < w->task->assertions[i].num_args; j++)
      if (dpo_facts_add_text(&w->known, w->task->assertions[i].args[j], strlen(w->task->assertions[i].args[j]), err))
        return -1;
  if (w->task->authenticated && dpo_facts_add_value(&w->known, w->task->authenticated, err)) return -1;
  return 0;
}

static int walk_messages(Walk *w, const cJSON *messages, FimiError *err) {
  int n = cJSON_GetArraySize(messages), index = 0;
  if (!cJSON_IsArray(messages) || n < 2) return reject(w, DPO_REJECT_MALFORMED, -1, "fewer than two messages");
  for (const cJSON *m = messages->child; m; m = m->next, index++) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const char *r = cJSON_IsString(role) ? role->valuestring : "";
    const char *text = content_of(m);
    const char *want = index == 0 ? "system" : index == 1 ? "user" : NULL;
    if ((want && strcmp(r, want) != 0) || !text)
      return reject(w, DPO_REJECT_MALFORMED, index, "message %d: role \"%s\"%s", index, r, text ? "" : " without content");
    int rc = 0;
    if (!strcmp(r, "system") || !strcmp(r, "user")) {
      if (index > 1 && !strcmp(r, "user")) w->last_reply = text;
      rc = dpo_facts_add_text(&w->known, text, strlen(text), err);
    } else if (!strcmp(r, "assistant") || !strcmp(r, "model")) {
      const char *name;
      const cJSON *args;
      if (message_call(m, &name, &args)) {
        const cJSON *next = m->next;
        const cJSON *nrole = next ? cJSON_GetObjectItemCaseSensitive(next, "role") : NULL;
        if (!cJSON_IsString(nrole) || strcmp(nrole->valuestring, "tool") != 0)
          return reject(w, DPO_REJECT_MALFORMED, index, "a tool call not followed by a tool turn");
        rc = check_call(w, index, m, next, err);
        m = next;
        index++;
      } else {
        rc = check_message(w, index, text, err);
      }
    } else {
      return reject(w, DPO_REJECT_MALFORMED, index, "message %d: unexpected role \"%s\"", index, r);
    }
    if (rc) return rc;
  }
  return 0;
}

int dpo_check_dialog(const Task *task, const cJSON *messages, TaskEnd end, DpoCheckResult *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  out->message = -1;
  Walk w = {0};
  w.task = task;
  w.out = out;
  w.results = cJSON_CreateArray();
  int rc = w.results ? add_task_words(&w, err) : fimi_fail(err, "corpus check: out of memory");
  if (rc == 0) rc = walk_messages(&w, messages, err);
  if (rc == 0) rc = check_whole(&w, messages, end);
  cJSON_Delete(w.results);
  dpo_facts_free(&w.known);
  dpo_facts_free(&w.pending);
  free(w.said);
  return rc < 0 ? -1 : 0;
}
