// env/agents.c: the scripted agents of env/agents.h (oracle, do-nothing,
// random-tool) and the loop that plays one episode with them.
#include "env/agents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/text.h"
#include "data/toolcall.h"
#include "env/bank/tools.h"

struct EnvAgent {
  EnvAgentKind kind;
  Rng rng;
  // oracle progress
  int next_field;
  int next_gold;
  int asked_confirm;  // consent asked for next_gold
  int confirms_used;
  int summary_sent;
  int verified;  // random agent: verify sent
};

static const char *const kind_names[AGENT_COUNT] = {"oracle", "do_nothing", "random"};
const char *agent_kind_name(EnvAgentKind k) { return k >= 0 && k < AGENT_COUNT ? kind_names[k] : "?"; }
int agent_kind_from_name(const char *name) {
  for (int i = 0; name && i < AGENT_COUNT; i++)
    if (strcmp(kind_names[i], name) == 0) return i;
  return -1;
}

int agent_create(EnvAgentKind kind, uint64_t seed, EnvAgent **out, FimiError *err) {
  if (kind < 0 || kind >= AGENT_COUNT) return fimi_fail(err, "agent: unknown kind %d", (int)kind);
  EnvAgent *a = fimi_calloc(1, sizeof *a, err);
  if (!a) return -1;
  a->kind = kind;
  rng_seed(&a->rng, seed ^ 0xa9e17a9e17ULL);
  *out = a;
  return 0;
}

void agent_free(EnvAgent *a) { free(a); }

static char *dup_text(const char *s, FimiError *err) {
  size_t n = strlen(s);
  char *copy = fimi_malloc(n + 1, err);
  if (copy) memcpy(copy, s, n + 1);
  return copy;
}

static char *oracle_summary(EnvEpisode *ep, FimiError *err) {
  const Task *t = env_episode_task(ep);
  TextBuf out = {0};
  int bad = text_append_str(&out, "Summary:", NULL);
  for (int i = 0; i < t->num_communicate; i++) {
    bad |= text_append_str(&out, " ", NULL);
    bad |= text_append_str(&out, t->communicate[i].name, NULL);
    bad |= text_append_str(&out, " ", NULL);
    bad |= text_append_str(&out, env_episode_value(ep, i), NULL);
    bad |= text_append_str(&out, ";", NULL);
  }
  for (int i = 0; i < t->num_assertions; i++)
    if (t->assertions[i].rule == TASK_RULE_MENTIONS_ANY) {
      bad |= text_append_str(&out, " ", NULL);
      bad |= text_append_str(&out, t->assertions[i].args[0], NULL);
      bad |= text_append_str(&out, ".", NULL);
    }
  bad |= text_append_str(&out, " Thank you for calling Navadhan Bank.", NULL);
  if (bad) {
    free(out.data);
    fimi_fail(err, "agent: out of memory");
    return NULL;
  }
  return out.data;
}

static char *oracle_confirm(EnvAgent *a, EnvEpisode *ep, FimiError *err) {
  const Task *t = env_episode_task(ep);
  int k = a->confirms_used < t->num_confirms ? a->confirms_used : t->num_confirms - 1;
  const char *what = k >= 0 ? t->confirms[k].name : "this step";
  const char *value = k >= 0 ? env_episode_confirm_value(ep, k) : "";
  char buf[1024];
  snprintf(buf, sizeof buf, "Before I continue: %s%s%s. Do you confirm that I should go ahead?", what,
           value && *value ? ": " : "", value ? value : "");
  a->confirms_used++;
  return dup_text(buf, err);
}

static int oracle_next(EnvAgent *a, EnvEpisode *ep, char **turn, FimiError *err) {
  const Task *t = env_episode_task(ep);
  if (a->next_field < t->num_fields) {
    char label[256], buf[512];
    snprintf(label, sizeof label, "%s", t->fields[a->next_field].name);
    for (char *p = label; *p; p++)
      if (*p == '_') *p = ' ';
    snprintf(buf, sizeof buf, "Could you please share your %s?", label);
    a->next_field++;
    return (*turn = dup_text(buf, err)) ? 0 : -1;
  }
  // A trailing hand-off comes after the summary, which it would cut short.
  int last = t->num_gold;
  int handoff_last = t->num_gold > 0 && strcmp(t->gold[t->num_gold - 1].name, "transfer_to_human_agent") == 0;
  if (handoff_last) last--;
  if (a->next_gold < last || (a->summary_sent && a->next_gold < t->num_gold)) {
    const TaskAction *g = &t->gold[a->next_gold];
    if (g->confirm && !a->asked_confirm) {
      a->asked_confirm = 1;
      return (*turn = oracle_confirm(a, ep, err)) ? 0 : -1;
    }
    a->asked_confirm = 0;
    a->next_gold++;
    return (*turn = toolcall_render_call_syntax(env_tool_syntax(ep), g->name, g->arguments, err)) ? 0 : -1;
  }
  a->summary_sent = 1;
  return (*turn = oracle_summary(ep, err)) ? 0 : -1;
}

// A random value for one schema property.
static cJSON *random_value(EnvAgent *a, const Task *t, const cJSON *prop) {
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(prop, "type");
  const char *ty = cJSON_IsString(type) ? type->valuestring : "string";
  const char *field = t->num_fields ? t->fields[rng_next_u64(&a->rng) % (uint64_t)t->num_fields].value : "X1";
  if (strcmp(ty, "integer") == 0) return cJSON_CreateNumber((double)(1 + rng_next_u64(&a->rng) % 36));
  if (strcmp(ty, "number") == 0) return cJSON_CreateNumber((double)(100 * (1 + rng_next_u64(&a->rng) % 1000)));
  if (strcmp(ty, "boolean") == 0) return cJSON_CreateBool(rng_next_u64(&a->rng) % 2);
  if (strcmp(ty, "array") == 0) {
    cJSON *arr = cJSON_CreateArray();
    cJSON_AddItemToArray(arr, cJSON_CreateString(field));
    return arr;
  }
  const cJSON *choices = cJSON_GetObjectItemCaseSensitive(prop, "enum");
  if (cJSON_IsArray(choices) && cJSON_GetArraySize(choices) > 0) {
    const cJSON *c = cJSON_GetArrayItem(choices, (int)(rng_next_u64(&a->rng) % (uint64_t)cJSON_GetArraySize(choices)));
    return cJSON_Duplicate(c, 1);
  }
  return cJSON_CreateString(field);
}

static int random_next(EnvAgent *a, EnvEpisode *ep, char **turn, FimiError *err) {
  const Task *t = env_episode_task(ep);
  if (!a->verified && t->num_gold > 0 && strcmp(t->gold[0].name, "verify_customer") == 0) {
    a->verified = 1;  // knows how to log in; everything after is random
    return (*turn = toolcall_render_call_syntax(env_tool_syntax(ep), t->gold[0].name, t->gold[0].arguments, err)) ? 0 : -1;
  }
  if (rng_next_u64(&a->rng) % 7 == 0) return (*turn = dup_text("Okay, noted.", err)) ? 0 : -1;
  int index = (int)(rng_next_u64(&a->rng) % (uint64_t)env_tool_count());
  cJSON *schema = env_tool_schema(index);
  cJSON *args = cJSON_CreateObject();
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(schema, "parameters"),
                                                        "properties");
  for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
    if (rng_next_u64(&a->rng) % 4 != 0) cJSON_AddItemToObject(args, p->string, random_value(a, t, p));
  *turn = toolcall_render_call_syntax(env_tool_syntax(ep), env_tool_name(index), args, err);
  cJSON_Delete(args);
  cJSON_Delete(schema);
  return *turn ? 0 : -1;
}

int agent_next(EnvAgent *a, EnvEpisode *ep, char **turn, FimiError *err) {
  *turn = NULL;
  switch (a->kind) {
    case AGENT_ORACLE: return oracle_next(a, ep, turn, err);
    case AGENT_DO_NOTHING: return (*turn = dup_text("Hello! How may I help you today?", err)) ? 0 : -1;
    case AGENT_RANDOM: return random_next(a, ep, turn, err);
    default: return fimi_fail(err, "agent: unknown kind");
  }
}

int agent_play(EnvAgent *agent, EnvEpisode *ep, EnvObservation *last, FimiError *err) {
  memset(last, 0, sizeof *last);
  while (!last->done) {
    char *turn = NULL;
    int rc = agent_next(agent, ep, &turn, err);
    if (rc == 0) rc = env_step(ep, turn, strlen(turn), last, err);
    free(turn);
    if (rc != 0) return -1;
  }
  return 0;
}

int agent_run_episode(EnvWorld *world, const Task *task, uint64_t seed, EnvAgentKind kind, RewardBreakdown *out,
                      FimiError *err) {
  EnvAgent *agent = NULL;
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  if (agent_create(kind, seed, &agent, err) != 0) return -1;
  if (env_open(world, task, seed, &ep, &first, err) != 0) {
    agent_free(agent);
    return -1;
  }
  EnvObservation obs;
  int rc = agent_play(agent, ep, &obs, err);
  if (rc == 0) rc = env_score(ep, out, err);
  env_close(ep);
  agent_free(agent);
  return rc;
}
