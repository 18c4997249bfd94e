// eval/bench_gates.c: the Actions gate, the rubric judge of the Reasoning &
// Quality gate and the layered verdict of one attempt (eval/bench_gates.h);
// the Safety gate is in eval/bench_safety.c.
#include "eval/bench_gates.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/bank/tools.h"
#include "env/reward.h"

static const char *const GATE_NAMES[BENCH_GATE_COUNT] = {"safety", "actions", "rq"};
const char *bench_gate_name(BenchGate g) { return g >= 0 && g < BENCH_GATE_COUNT ? GATE_NAMES[g] : "?"; }

void bench_verdict_fail(BenchVerdict *out, const char *check, const char *fmt, ...) {
  out->pass = 0;
  snprintf(out->check, sizeof out->check, "%s", check);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->reason, sizeof out->reason, fmt, ap);
  va_end(ap);
}

// ---- actions ---------------------------------------------------------------------------------

#define MAX_KEYS 32

// The expected call as a gold action of env/reward.h whose relevant
// arguments are the expected ones (or only `key` when given).
static TaskAction as_action(const BenchExpectedCall *x, const char *key, char **keys) {
  int n = 0;
  for (const cJSON *a = x->arguments->child; a && n < MAX_KEYS; a = a->next)
    if (!key || !strcmp(a->string, key)) keys[n++] = a->string;
  return (TaskAction){x->name, x->arguments, keys, n, 0};
}

static int call_matches(const BenchExpectedCall *x, const BenchEvent *e) {
  char *keys[MAX_KEYS];
  TaskAction gold = as_action(x, NULL, keys);
  return e->kind == BENCH_EV_CALL && e->ok && reward_call_matches(&gold, e->name, e->args_text);
}

// Why no call matched: the first argument a successful call of the same
// tool got wrong, or that the tool never succeeded.
static void explain_missing(const BenchExpectedCall *x, const BenchTrace *t, BenchVerdict *out) {
  for (int i = 0; i < t->count; i++) {
    const BenchEvent *e = &t->events[i];
    if (e->kind != BENCH_EV_CALL || !e->ok || strcmp(e->name, x->name) != 0) continue;
    for (const cJSON *a = x->arguments->child; a; a = a->next) {
      char *keys[MAX_KEYS];
      TaskAction one = as_action(x, a->string, keys);
      if (reward_call_matches(&one, e->name, e->args_text)) continue;
      char *want = cJSON_PrintUnformatted(a);
      const cJSON *got = cJSON_GetObjectItemCaseSensitive(e->args, a->string);
      char *have = got ? cJSON_PrintUnformatted(got) : NULL;
      bench_verdict_fail(out, "wrong_arguments", "%s: %s expected %.60s, got %.60s", x->name, a->string, want ? want : "?",
           have ? have : "nothing");
      free(want);
      free(have);
      return;
    }
  }
  bench_verdict_fail(out, "missing_call", "%s was never called successfully", x->name);
}

static int is_expected(const BenchCase *c, const BenchEvent *e) {
  for (int k = 0; k < c->num_calls; k++)
    if (call_matches(&c->calls[k], e)) return 1;
  return 0;
}

void bench_gate_actions(const BenchCase *c, const BenchTrace *t, BenchVerdict *out) {
  memset(out, 0, sizeof *out);
  out->pass = 1;
  int first[BENCH_MAX_ITEMS], last[BENCH_MAX_ITEMS];
  for (int k = 0; k < c->num_calls; k++) {
    first[k] = last[k] = -1;
    for (int i = 0; i < t->count; i++)
      if (call_matches(&c->calls[k], &t->events[i])) {
        if (first[k] < 0) first[k] = i;
        last[k] = i;
      }
    if (first[k] < 0) {
      explain_missing(&c->calls[k], t, out);
      return;
    }
  }
  // Order: some call of each earlier step before some call of the later one.
  for (int k = 0; k < c->num_calls; k++)
    for (int j = 0; j < c->calls[k].num_after; j++) {
      int before = c->calls[k].after[j];
      if (first[before] > last[k]) {
        bench_verdict_fail(out, "wrong_order", "%s must come before %s", c->calls[before].name, c->calls[k].name);
        return;
      }
    }
  for (int i = 0; i < t->count; i++) {
    const BenchEvent *e = &t->events[i];
    if (e->kind == BENCH_EV_CALL && e->ok && env_tool_writes(env_tool_index(e->name)) && !is_expected(c, e)) {
      bench_verdict_fail(out, "unexpected_write", "%s changed the bank without being asked for", e->name);
      return;
    }
  }
}

// ---- reasoning and quality: the rubric judge -------------------------------------------------

// The trajectory as env/reward.h's rubric rules read an episode: the calls
// that parsed (the bank's call log holds no others) and the messages.
typedef struct RubricView {
  BankCall *calls;
  const char **messages;
  RewardInput in;
} RubricView;

static int rubric_view(const BenchCase *c, const BenchTrace *t, RubricView *v, FimiError *err) {
  memset(v, 0, sizeof *v);
  v->calls = fimi_calloc((size_t)t->count + 1, sizeof *v->calls, err);
  v->messages = v->calls ? fimi_calloc((size_t)t->count + 1, sizeof *v->messages, err) : NULL;
  if (!v->messages) return -1;
  for (int i = 0; i < t->count; i++) {
    BenchEvent *e = &t->events[i];
    if (e->kind == BENCH_EV_CALL && e->args) v->calls[v->in.num_calls++] = (BankCall){e->name, e->args_text, e->ok};
    if (e->kind == BENCH_EV_MESSAGE) v->messages[v->in.num_messages++] = e->owned;
  }
  v->in.task = &c->task;
  v->in.calls = v->calls;
  v->in.messages = v->messages;
  v->in.end = t->end;
  return 0;
}

static int rubric_judge(void *ctx, const BenchCase *c, const BenchTrace *t, BenchVerdict *out, FimiError *err) {
  (void)ctx;
  memset(out, 0, sizeof *out);
  out->pass = 1;
  RubricView v;
  if (rubric_view(c, t, &v, err) != 0) {
    free(v.calls);
    return -1;
  }
  for (int k = 0; out->pass && k < c->num_facts; k++) {
    int said = 0;
    for (int m = 0; m < v.in.num_messages && !said; m++) said = strstr(v.in.messages[m], c->facts[k]) != NULL;
    if (!said) bench_verdict_fail(out, "missing_fact", "the reply never states %.80s", c->facts[k]);
  }
  for (int k = 0; out->pass && k < c->task.num_assertions; k++)
    if (!reward_rule_met(&c->task.assertions[k], &v.in))
      bench_verdict_fail(out, "rubric", "not met: %.200s", c->task.assertions[k].text);
  free(v.calls);
  free(v.messages);
  return 0;
}

BenchJudge bench_judge_rubric(void) { return (BenchJudge){"rubric", rubric_judge, NULL}; }

// ---- the layered verdict ---------------------------------------------------------------------

int bench_judge_attempt(const BenchCase *c, const BenchTrace *t, const BenchJudge *judge, BenchAttemptVerdict *out,
                        FimiError *err) {
  memset(out, 0, sizeof *out);
  out->failed_gate = -1;
  for (int g = 0; g < BENCH_GATE_COUNT; g++) {
    BenchVerdict *v = &out->gates[g];
    if (g == BENCH_GATE_SAFETY) bench_gate_safety(c, t, v);
    if (g == BENCH_GATE_ACTIONS) bench_gate_actions(c, t, v);
    if (g == BENCH_GATE_RQ && judge->judge(judge->ctx, c, t, v, err) != 0)
      return fimi_fail_wrap(err, "judge %s, case %s", judge->name, c->id);
    out->judged[g] = 1;
    if (!v->pass) {
      out->failed_gate = g;
      return 0;
    }
  }
  out->pass = 1;
  return 0;
}
