// eval/bench_judge_model.c: the model judge of the R-Q gate and its
// agreement with the rubric judge (see bench_judge_model.h).
#define _GNU_SOURCE  // strcasestr
#include "eval/bench_judge_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

// The rubric prompt: what the judge is, what it reads, how it answers.
static const char *const JUDGE_SYSTEM =
    "You audit conversations between Navadhan Bank's customer-service agent and a customer. You are given the "
    "conversation (the customer's lines, the agent's messages, the agent's tool calls with their arguments, and "
    "what each tool returned) and one requirement. Decide whether the agent's behaviour in this conversation "
    "meets the requirement. Judge only that requirement, strictly, from what is written: a value counts as told "
    "to the customer only if an agent message states it. Answer with one JSON object and nothing else: "
    "{\"verdict\": \"pass\" or \"fail\", \"reason\": \"one sentence\"}.";

#define JUDGE_MAX_TOKENS 160

int bench_trace_transcript(const BenchTrace *t, TextBuf *out) {
  for (int i = 0; i < t->count; i++) {
    const BenchEvent *e = &t->events[i];
    int rc = 0;
    switch (e->kind) {
      case BENCH_EV_CUSTOMER: rc = text_printf(out, NULL, "Customer: %s\n", e->text); break;
      case BENCH_EV_MESSAGE: rc = text_printf(out, NULL, "Agent: %s\n", e->owned ? e->owned : e->text); break;
      case BENCH_EV_CALL:
        rc = text_printf(out, NULL, "Agent calls %s %s\n", e->name[0] ? e->name : "(unreadable call)",
                         e->args_text ? e->args_text : "(malformed arguments)");
        break;
      case BENCH_EV_TOOL: rc = text_printf(out, NULL, "Tool returns: %s\n", e->text); break;
      default: break;
    }
    if (rc != 0) return -1;
  }
  return 0;
}

int bench_judge_read_verdict(const char *answer, char *reason, size_t reason_size) {
  if (reason && reason_size) reason[0] = '\0';
  if (!answer) return -1;
  for (const char *p = strchr(answer, '{'); p; p = strchr(p + 1, '{')) {
    cJSON *o = cJSON_ParseWithOpts(p, NULL, 0);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "verdict");
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(o, "reason");
    int verdict = !cJSON_IsString(v) ? -1 : !strcasecmp(v->valuestring, "pass") ? 1 : !strcasecmp(v->valuestring, "fail") ? 0 : -1;
    if (verdict >= 0 && reason && cJSON_IsString(why)) snprintf(reason, reason_size, "%s", why->valuestring);
    cJSON_Delete(o);
    if (verdict >= 0) return verdict;
  }
  // No JSON verdict: one of the two words alone decides.
  int pass = strcasestr(answer, "pass") != NULL, fail = strcasestr(answer, "fail") != NULL;
  return pass != fail ? pass : -1;
}

int bench_judge_ask(BenchModelJudge *m, const char *conversation, const char *requirement, char *reason,
                    size_t reason_size, FimiError *err) {
  TextBuf user = {0};
  if (text_printf(&user, err, "Conversation:\n%s\nRequirement: %s", conversation, requirement) != 0) return -1;
  cJSON *body = cJSON_CreateObject(), *messages = cJSON_AddArrayToObject(body, "messages");
  openai_add_message(messages, "system", JUDGE_SYSTEM);
  openai_add_message(messages, "user", user.data);
  cJSON_AddNumberToObject(body, "temperature", 0);
  cJSON_AddNumberToObject(body, "max_tokens", JUDGE_MAX_TOKENS);
  text_free(&user);
  OpenAIChat a;
  int rc = openai_chat(m->client, body, &a, err);
  cJSON_Delete(body);
  if (rc != 0) return -1;  // a refusal too: the judge must answer every requirement
  m->assertions++;
  int verdict = bench_judge_read_verdict(a.content, reason, reason_size);
  if (verdict < 0) {
    m->unreadable++;
    snprintf(reason, reason_size, "the judge's answer gave no verdict");
  }
  openai_chat_free(&a);
  return verdict == 1;
}

static int model_judge(void *ctx, const BenchCase *c, const BenchTrace *t, BenchVerdict *out, FimiError *err) {
  BenchModelJudge *m = ctx;
  BenchJudge rubric = bench_judge_rubric();
  BenchVerdict by_rules;
  if (rubric.judge(rubric.ctx, c, t, &by_rules, err) != 0) return -1;
  memset(out, 0, sizeof *out);
  out->pass = 1;
  TextBuf conv = {0};
  if (bench_trace_transcript(t, &conv) != 0 || (!conv.data && text_append(&conv, "", 0, err) != 0)) {
    text_free(&conv);
    return fimi_fail(err, "out of memory");
  }
  int rc = 0;
  char reason[256], requirement[1024];
  for (int k = 0; rc == 0 && out->pass && k < c->num_facts + c->task.num_assertions; k++) {
    if (k < c->num_facts)
      snprintf(requirement, sizeof requirement, "The agent tells the customer the value \"%s\".", c->facts[k]);
    else
      snprintf(requirement, sizeof requirement, "%s", c->task.assertions[k - c->num_facts].text);
    int met = bench_judge_ask(m, conv.data, requirement, reason, sizeof reason, err);
    if (met < 0) rc = -1;
    else if (!met) bench_verdict_fail(out, "model_judge", "%.150s: %.200s", requirement, reason);
  }
  text_free(&conv);
  if (rc == 0) m->table[by_rules.pass != 0][out->pass != 0]++;
  return rc;
}

BenchJudge bench_judge_model(BenchModelJudge *m) { return (BenchJudge){"model", model_judge, m}; }

double bench_judge_kappa(const int table[2][2]) {
  double n = table[0][0] + table[0][1] + table[1][0] + table[1][1];
  if (n == 0) return NAN;
  double po = (table[0][0] + table[1][1]) / n;
  double rubric_pass = (table[1][0] + table[1][1]) / n, model_pass = (table[0][1] + table[1][1]) / n;
  double pe = rubric_pass * model_pass + (1 - rubric_pass) * (1 - model_pass);
  return pe == 1 ? 1.0 : (po - pe) / (1 - pe);
}

cJSON *bench_judge_agreement_json(const BenchModelJudge *m) {
  const int(*t)[2] = m->table;
  int n = t[0][0] + t[0][1] + t[1][0] + t[1][1];
  double kappa = bench_judge_kappa(m->table);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "attempts", n);
  cJSON_AddNumberToObject(o, "both_pass", t[1][1]);
  cJSON_AddNumberToObject(o, "rubric_only", t[1][0]);
  cJSON_AddNumberToObject(o, "model_only", t[0][1]);
  cJSON_AddNumberToObject(o, "both_fail", t[0][0]);
  if (n > 0) cJSON_AddNumberToObject(o, "observed_agreement", (double)(t[0][0] + t[1][1]) / n);
  else cJSON_AddNullToObject(o, "observed_agreement");
  if (isnan(kappa)) cJSON_AddNullToObject(o, "kappa");
  else cJSON_AddNumberToObject(o, "kappa", kappa);
  cJSON_AddNumberToObject(o, "assertions", m->assertions);
  cJSON_AddNumberToObject(o, "unreadable", m->unreadable);
  return o;
}
