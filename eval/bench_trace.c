// eval/bench_trace.c: trajectories into the bench's event list
// (eval/bench_trace.h): roles to kinds, model turns through the tool-call
// parser, each call paired with the tool turn that answered it.
#include "eval/bench_trace.h"

#include <stdlib.h>
#include <string.h>

void bench_trace_free(BenchTrace *t) {
  for (int i = 0; t && i < t->count; i++) {
    free(t->events[i].owned);
    cJSON_Delete(t->events[i].args);
    free(t->events[i].args_text);
  }
  if (t) {
    free(t->events);
    memset(t, 0, sizeof *t);
  }
}

static TaskEnd end_from_name(const char *name) {
  int end = name ? task_end_from_name(name) : -1;
  return end == TASK_END_STOP || end == TASK_END_TRANSFER || end == TASK_END_OUT_OF_SCOPE ? (TaskEnd)end
                                                                                           : TASK_END_BUDGET;
}

static BenchEvent *push(BenchTrace *t, int *cap, BenchEventKind kind, const char *text, FimiError *err) {
  if (t->count == *cap) {
    int bigger_cap = *cap ? *cap * 2 : 32;
    BenchEvent *bigger = realloc(t->events, sizeof *bigger * (size_t)bigger_cap);
    if (!bigger) {
      fimi_fail(err, "out of memory");
      return NULL;
    }
    t->events = bigger;
    *cap = bigger_cap;
  }
  BenchEvent *e = &t->events[t->count++];
  memset(e, 0, sizeof *e);
  e->kind = kind;
  e->text = text;
  return e;
}

static char *copy_n(const char *s, size_t n, FimiError *err) {
  char *copy = fimi_malloc(n + 1, err);
  if (copy) {
    memcpy(copy, s, n);
    copy[n] = '\0';
  }
  return copy;
}

// One model turn: a message, or (optional preamble message +) a call.
static int add_model_turn(BenchTrace *t, int *cap, const char *text, FimiError *err) {
  ToolCallParse parse;
  ToolCallKind kind = toolcall_parse(text, strlen(text), &parse);
  int rc = 0;
  if ((kind == TOOLCALL_MESSAGE || kind == TOOLCALL_TOOL_CALL) && (kind == TOOLCALL_MESSAGE || parse.text_len > 0)) {
    BenchEvent *m = push(t, cap, BENCH_EV_MESSAGE, text, err);
    rc = m && (m->owned = copy_n(parse.text, parse.text_len, err)) ? 0 : -1;
  }
  if (rc == 0 && kind != TOOLCALL_MESSAGE) {
    BenchEvent *c = push(t, cap, BENCH_EV_CALL, text, err);
    if (!c) rc = -1;
    if (c) memcpy(c->name, parse.name, sizeof c->name);
    if (c && kind == TOOLCALL_TOOL_CALL) {
      c->args = parse.arguments;
      parse.arguments = NULL;
      c->args_text = cJSON_PrintUnformatted(c->args);
      if (!c->args_text) rc = fimi_fail(err, "out of memory");
    }
  }
  toolcall_parse_free(&parse);
  return rc;
}

// A tool turn answers the latest call still unanswered.
static void answer_call(BenchTrace *t, const char *text) {
  int i = t->count - 1;
  while (i >= 0 && t->events[i].kind != BENCH_EV_CALL && t->events[i].kind != BENCH_EV_TOOL) i--;
  if (i < 0 || t->events[i].kind != BENCH_EV_CALL) return;
  cJSON *obj = cJSON_Parse(text);
  t->events[i].ok = t->events[i].args && cJSON_IsObject(obj) && cJSON_GetObjectItemCaseSensitive(obj, "result");
  cJSON_Delete(obj);
}

static int add_turn(BenchTrace *t, int *cap, const char *role, const char *text, FimiError *err) {
  if (!strcmp(role, "model")) return add_model_turn(t, cap, text, err);
  if (!strcmp(role, "tool")) {
    answer_call(t, text);
    return push(t, cap, BENCH_EV_TOOL, text, err) ? 0 : -1;
  }
  if (!strcmp(role, "user")) return push(t, cap, BENCH_EV_CUSTOMER, text, err) ? 0 : -1;
  if (!strcmp(role, "system")) return push(t, cap, BENCH_EV_SYSTEM, text, err) ? 0 : -1;
  return 0;  // "error" notes of failed episodes and unknown roles
}

int bench_trace_build(const cJSON *trajectory, const char *end_name, BenchTrace *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  out->end = end_from_name(end_name);
  int cap = 0;
  const cJSON *turn = NULL;
  cJSON_ArrayForEach(turn, trajectory) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(turn, "role");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(turn, "text");
    if (!cJSON_IsString(role) || !cJSON_IsString(text)) continue;
    // A turn the policy sampled is the agent's whatever its role line
    // decoded to (a model's bytes can garble it): it is judged, never skipped.
    const char *kind = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(turn, "sampled")) ? "model" : role->valuestring;
    if (add_turn(out, &cap, kind, text->valuestring, err) != 0) {
      bench_trace_free(out);
      return -1;
    }
  }
  return 0;
}

int bench_call_flag(const BenchEvent *call, const char *key) {
  return call->args && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(call->args, key));
}
