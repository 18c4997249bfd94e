// dpo/divergence.c: turn decomposition, the deterministic judge and the
// first-divergence search (dpo/divergence.h).
#include "dpo/divergence.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/toolcall.h"
#include "env/reward.h"
#include "env/user_sim.h"

static const char *const tag_names[DPO_TAG_COUNT] = {"none", "wrong_tool_or_args", "replied_instead_of_calling",
                                                     "called_instead_of_replying", "bad_reply"};
const char *dpo_tag_name(DpoTag t) { return t >= 0 && t < DPO_TAG_COUNT ? tag_names[t] : "?"; }

void dpo_turn_actions(const char *text, size_t len, DpoTurnActions *out) {
  memset(out, 0, sizeof *out);
  ToolCallParse p;
  ToolCallKind kind = toolcall_parse(text, len, &p);
  if (kind == TOOLCALL_TOOL_CALL) {
    if (p.text_len > 0) out->actions[out->count++] = (DpoAction){DPO_ACTION_MESSAGE, p.text, p.text_len, "", NULL};
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->arguments = p.arguments;
    p.arguments = NULL;
    out->actions[out->count++] = (DpoAction){DPO_ACTION_CALL, NULL, 0, out->name, out->arguments};
  } else if (kind == TOOLCALL_MESSAGE) {
    out->actions[out->count++] = (DpoAction){DPO_ACTION_MESSAGE, p.text, p.text_len, "", NULL};
  } else if (p.error == TOOLCALL_ERR_TOO_LONG || p.error == TOOLCALL_ERR_NUL_BYTE ||
             p.error == TOOLCALL_ERR_INVALID_UTF8 || p.error == TOOLCALL_ERR_EMPTY) {
    // Not a call attempt: an unreadable or empty message (the reason kept).
    snprintf(out->message, sizeof out->message, "%s", p.message);
    out->actions[out->count++] = (DpoAction){DPO_ACTION_MESSAGE, out->message, 0, "", NULL};
  } else {
    snprintf(out->name, sizeof out->name, "%s", p.name);
    snprintf(out->message, sizeof out->message, "%s", p.message);
    out->actions[out->count++] = (DpoAction){DPO_ACTION_BAD_CALL, out->message, strlen(out->message), out->name, NULL};
  }
  toolcall_parse_free(&p);
}

void dpo_turn_actions_free(DpoTurnActions *t) {
  cJSON_Delete(t->arguments);
  t->arguments = NULL;
}

// ---- the deterministic judge ------------------------------------------------

static int fail_why(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_why(char *why, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
  return 0;
}

static int field_index(const Task *t, const char *name) {
  for (int i = 0; i < t->num_fields; i++)
    if (strcmp(t->fields[i].name, name) == 0) return i;
  return -1;
}

static int contains_one_of(const char *text, const cJSON *words) {
  for (const cJSON *w = words ? words->child : NULL; w; w = w->next)
    if (cJSON_IsString(w) && reward_contains(text, w->valuestring)) return 1;
  return 0;
}

static int json_has_string(const cJSON *array, const char *s) {
  for (const cJSON *v = array ? array->child : NULL; v; v = v->next)
    if (cJSON_IsString(v) && strcmp(v->valuestring, s) == 0) return 1;
  return 0;
}

static int deterministic_grade(void *ctx, const DpoReplyCase *c, char *why, size_t size, FimiError *err) {
  (void)ctx;
  const cJSON *ref = c->reference;
  const char *text = c->candidate;
  if (!*text) return fail_why(why, size, "empty reply");
  DpoFacts said = {0};
  if (dpo_facts_add_text(&said, text, strlen(text), err) != 0) return -1;
  int ok = 1;
  // No value absent from the data. The reference's own values count as
  // data: a consent question quotes the charge of the action it precedes,
  // which the validated dialog shows that action's result holds.
  const cJSON *facts = cJSON_GetObjectItemCaseSensitive(ref, "facts");
  for (int i = 0; ok && i < said.count; i++)
    if (!dpo_facts_has(c->known, said.items[i]) && !json_has_string(facts, said.items[i]))
      ok = fail_why(why, size, "states %s, which the data does not hold", said.items[i]);
  // Required values present.
  for (const cJSON *f = facts ? facts->child : NULL; ok && f; f = f->next)
    if (cJSON_IsString(f) && !dpo_facts_has(&said, f->valuestring))
      ok = fail_why(why, size, "does not state %s", f->valuestring);
  dpo_facts_free(&said);
  const cJSON *asks = cJSON_GetObjectItemCaseSensitive(ref, "asks");
  for (const cJSON *a = asks ? asks->child : NULL; ok && a; a = a->next) {
    int k = cJSON_IsString(a) ? field_index(c->task, a->valuestring) : -1;
    if (k >= 0 && !user_sim_asks_for(c->task, k, text)) ok = fail_why(why, size, "does not ask for %s", a->valuestring);
  }
  if (ok && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "confirm")) && !user_sim_asks_confirmation(text))
    ok = fail_why(why, size, "does not ask the customer to confirm");
  int refusal = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "refusal"));
  const cJSON *any = cJSON_GetObjectItemCaseSensitive(ref, "mention_any");
  for (const cJSON *g = any ? any->child : NULL; ok && g; g = g->next)
    if (!contains_one_of(text, g))
      ok = fail_why(why, size, refusal ? "does not refuse (none of the task's words, e.g. \"%s\")"
                                       : "lacks the task's words (e.g. \"%s\")",
                    g->child && cJSON_IsString(g->child) ? g->child->valuestring : "?");
  const cJSON *none = cJSON_GetObjectItemCaseSensitive(ref, "mention_none");
  for (const cJSON *w = none ? none->child : NULL; ok && w; w = w->next)
    if (cJSON_IsString(w) && reward_contains(text, w->valuestring))
      ok = fail_why(why, size, "says \"%s\", which the task forbids", w->valuestring);
  return ok;
}

static const DpoJudge deterministic_judge = {deterministic_grade, NULL};
const DpoJudge *dpo_judge_deterministic(void) { return &deterministic_judge; }

// ---- first divergence ---------------------------------------------------------

static int diverge(DpoDivergence *d, DpoTag tag, int action, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int diverge(DpoDivergence *d, DpoTag tag, int action, const char *fmt, ...) {
  d->tag = tag;
  d->action = action;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->detail, sizeof d->detail, fmt, ap);
  va_end(ap);
  return 0;
}

// 1 when the call equals (name, all arguments structurally) an earlier one.
static int is_repeat(const cJSON *earlier, const char *name, const cJSON *args) {
  for (const cJSON *c = earlier ? earlier->child : NULL; c; c = c->next) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, "arguments");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 && a && args && cJSON_Compare(a, args, 1)) return 1;
  }
  return 0;
}

// The reference call as a TaskAction for reward_call_matches.
static int call_matches(const cJSON *ref, const char *name, const cJSON *args) {
  const cJSON *rn = cJSON_GetObjectItemCaseSensitive(ref, "name");
  const cJSON *relevant = cJSON_GetObjectItemCaseSensitive(ref, "relevant");
  char *names[64];
  int n = 0;
  for (const cJSON *r = relevant ? relevant->child : NULL; r && n < 64; r = r->next)
    if (cJSON_IsString(r)) names[n++] = r->valuestring;
  TaskAction gold = {cJSON_IsString(rn) ? rn->valuestring : "", cJSON_GetObjectItemCaseSensitive(ref, "arguments"),
                     names, n, 0};
  char *text = cJSON_PrintUnformatted(args);
  int same = text && reward_call_matches(&gold, name, text);
  free(text);
  return same;
}

// Facts of a preface absent from the data (the first one into fact).
static int preface_unknown(const DpoAction *a, const DpoFacts *known, char *fact, FimiError *err) {
  DpoFacts f = {0};
  if (dpo_facts_add_text(&f, a->text, a->len, err) != 0) return -1;
  int found = 0;
  for (int i = 0; i < f.count && !found; i++)
    if (!dpo_facts_has(known, f.items[i])) found = 1, strcpy(fact, f.items[i]);
  dpo_facts_free(&f);
  return found;
}

static int against_call(const cJSON *ref, const cJSON *earlier, const DpoFacts *known, const DpoTurnActions *t,
                        DpoDivergence *d, FimiError *err) {
  const char *ref_name = cJSON_GetObjectItemCaseSensitive(ref, "name")->valuestring;
  const DpoAction *last = &t->actions[t->count - 1];
  int at = t->count - 1;
  if (last->kind == DPO_ACTION_MESSAGE)
    return diverge(d, DPO_TAG_REPLIED_INSTEAD_OF_CALLING, 0, "replied where the reference calls %s", ref_name);
  if (t->count == 2) {
    char fact[DPO_FACT_MAX];
    int r = preface_unknown(&t->actions[0], known, fact, err);
    if (r < 0) return -1;
    if (r) return diverge(d, DPO_TAG_BAD_REPLY, 0, "the preface states %s, which the data does not hold", fact);
  }
  if (last->kind == DPO_ACTION_BAD_CALL)
    return diverge(d, DPO_TAG_WRONG_TOOL_OR_ARGS, at, "malformed call where the reference calls %s: %s", ref_name,
                   last->text);
  if (call_matches(ref, last->name, last->arguments)) return 0;
  if (strcmp(last->name, ref_name) != 0)
    return diverge(d, DPO_TAG_WRONG_TOOL_OR_ARGS, at, "%s %s where the reference calls %s",
                   is_repeat(earlier, last->name, last->arguments) ? "repeated call of" : "called", last->name,
                   ref_name);
  if (is_repeat(earlier, last->name, last->arguments))
    return diverge(d, DPO_TAG_WRONG_TOOL_OR_ARGS, at, "repeated an earlier %s call where the reference calls it anew",
                   last->name);
  return diverge(d, DPO_TAG_WRONG_TOOL_OR_ARGS, at, "%s with arguments that differ from the reference's", last->name);
}

static int against_message(const Task *task, const cJSON *ref, const cJSON *earlier, const DpoFacts *known,
                           const DpoTurnActions *t, const DpoJudge *judge, DpoDivergence *d, FimiError *err) {
  const DpoAction *last = &t->actions[t->count - 1];
  if (last->kind != DPO_ACTION_MESSAGE)
    return diverge(d, DPO_TAG_CALLED_INSTEAD_OF_REPLYING, t->count - 1, "%s %s where the reference replies",
                   last->kind == DPO_ACTION_BAD_CALL                   ? "a malformed call"
                   : is_repeat(earlier, last->name, last->arguments) ? "repeated call of"
                                                                     : "called",
                   last->name);
  if (last->len == 0) return diverge(d, DPO_TAG_BAD_REPLY, 0, "%s", t->message[0] ? t->message : "empty reply");
  char *text = malloc(last->len + 1);
  if (!text) return fimi_fail(err, "divergence: out of memory");
  memcpy(text, last->text, last->len);
  text[last->len] = 0;
  DpoReplyCase c = {task, ref, known, text};
  char why[256] = "";
  int ok = judge->grade_reply(judge->ctx, &c, why, sizeof why, err);
  free(text);
  if (ok < 0) return -1;
  if (!ok) return diverge(d, DPO_TAG_BAD_REPLY, 0, "%s", why);
  return 0;
}

int dpo_divergence_find(const Task *task, const cJSON *reference_actions, const cJSON *earlier_calls,
                        const DpoFacts *known, const char *candidate, size_t len, const DpoJudge *judge,
                        DpoDivergence *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  if (!judge) judge = dpo_judge_deterministic();
  const cJSON *ref = cJSON_IsArray(reference_actions) ? reference_actions->child : NULL;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(ref, "type");
  if (!cJSON_IsString(type)) return fimi_fail(err, "divergence: the reference turn has no action");
  int is_call = strcmp(type->valuestring, "tool_call") == 0;
  if (is_call && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(ref, "name")))
    return fimi_fail(err, "divergence: the reference call has no name");
  DpoTurnActions t;
  dpo_turn_actions(candidate, len, &t);
  int rc = is_call ? against_call(ref, earlier_calls, known, &t, out, err)
                   : against_message(task, ref, earlier_calls, known, &t, judge, out, err);
  dpo_turn_actions_free(&t);
  return rc < 0 ? -1 : 0;
}
