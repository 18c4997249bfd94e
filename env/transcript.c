// env/transcript.c: oracle conversations as `messages` arrays
// (env/transcript.h, docs/environment.md "Oracle transcripts").
#include "env/transcript.h"

#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "data/toolcall.h"
#include "env/agents.h"

static cJSON *message(const char *role, const char *content) {
  cJSON *m = cJSON_CreateObject();
  if (!m || !cJSON_AddStringToObject(m, "role", role) || !cJSON_AddStringToObject(m, "content", content)) {
    cJSON_Delete(m);
    return NULL;
  }
  return m;
}

// 1 when turn[0..len) is exactly what chat_render_messages renders for the
// tool_calls form of the parse: [preface "\n"] toolcall_render_call(...).
static int is_canonical_call(const char *turn, size_t len, const ToolCallParse *p, FimiError *err) {
  char *call = toolcall_render_call(p->name, p->arguments, err);
  if (!call) return -1;
  size_t n = strlen(call), pre = p->text_len;
  int same = pre > 0 ? len == pre + 1 + n && memcmp(turn, p->text, pre) == 0 && turn[pre] == '\n' &&
                           memcmp(turn + pre + 1, call, n) == 0
                     : len == n && memcmp(turn, call, n) == 0;
  free(call);
  return same;
}

cJSON *env_transcript_assistant_message(const char *turn, size_t len, int *is_call, FimiError *err) {
  if (is_call) *is_call = 0;
  if (memchr(turn, 0, len)) {
    fimi_fail(err, "transcript: an agent turn holds a NUL byte");
    return NULL;
  }
  size_t bad = utf8_first_invalid(turn, len);
  if (bad != len) {
    fimi_fail(err, "transcript: an agent turn is not valid UTF-8 (byte %zu)", bad);
    return NULL;
  }
  ToolCallParse parse;
  int kind = toolcall_parse(turn, len, &parse);
  int canonical = 0;
  if (kind == TOOLCALL_TOOL_CALL && (canonical = is_canonical_call(turn, len, &parse, err)) < 0) {
    toolcall_parse_free(&parse);
    return NULL;
  }
  cJSON *m = NULL;
  if (canonical) {
    char *preface = fimi_malloc(parse.text_len + 1, err);
    if (!preface) {
      toolcall_parse_free(&parse);
      return NULL;
    }
    memcpy(preface, parse.text, parse.text_len);
    preface[parse.text_len] = 0;
    m = message("assistant", preface);
    free(preface);
    cJSON *calls = m ? cJSON_AddArrayToObject(m, "tool_calls") : NULL;
    cJSON *call = cJSON_CreateObject();
    cJSON *fn = call && cJSON_AddStringToObject(call, "type", "function") ? cJSON_AddObjectToObject(call, "function")
                                                                          : NULL;
    if (calls && fn && cJSON_AddStringToObject(fn, "name", parse.name)) {
      cJSON_AddItemToObject(fn, "arguments", parse.arguments);
      parse.arguments = NULL;
      cJSON_AddItemToArray(calls, call);
    } else {
      cJSON_Delete(call);
      cJSON_Delete(m);
      m = NULL;
    }
  } else {
    char *copy = fimi_malloc(len + 1, err);
    if (copy) {
      memcpy(copy, turn, len);
      copy[len] = 0;
      m = message("assistant", copy);
      free(copy);
    } else {
      toolcall_parse_free(&parse);
      return NULL;
    }
  }
  toolcall_parse_free(&parse);
  if (!m) {
    fimi_fail(err, "transcript: out of memory");
    return NULL;
  }
  if (is_call) *is_call = canonical ? 1 : kind == TOOLCALL_TOOL_CALL ? 2 : 0;
  return m;
}

int env_transcript_oracle(EnvWorld *world, const Task *task, uint64_t seed, EnvCatalogMode mode, cJSON **messages,
                          EnvTranscriptStats *stats, FimiError *err) {
  *messages = NULL;
  EnvTranscriptStats st;
  memset(&st, 0, sizeof st);
  char *system = env_agent_system_text(task, mode, err);
  if (!system) return -1;
  st.system_chars = strlen(system);
  EnvAgent *agent = NULL;
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  cJSON *out = cJSON_CreateArray();
  int rc = out ? 0 : fimi_fail(err, "transcript: out of memory");
  if (rc == 0) rc = agent_create(AGENT_ORACLE, seed, &agent, err);
  if (rc == 0) rc = env_open(world, task, seed, &ep, &first, err);
  cJSON *m = NULL;
  if (rc == 0 && (!(m = message("system", system)) || !cJSON_AddItemToArray(out, m) ||
                  !(m = message("user", first)) || !cJSON_AddItemToArray(out, m)))
    rc = fimi_fail(err, "transcript: out of memory");
  EnvObservation obs = {0};
  while (rc == 0 && !obs.done) {
    char *turn = NULL;
    int is_call = 0;
    rc = agent_next(agent, ep, &turn, err);
    if (rc == 0 && !(m = env_transcript_assistant_message(turn, strlen(turn), &is_call, err))) rc = -1;
    if (rc == 0) {
      cJSON_AddItemToArray(out, m);
      st.agent_turns++;
      st.tool_calls += is_call == 1;
      st.verbatim_calls += is_call == 2;
      rc = env_step(ep, turn, strlen(turn), &obs, err);
    }
    free(turn);
    if (rc == 0 && (!(m = message(obs.kind == ENV_OBS_TOOL ? "tool" : "user", obs.text)) ||
                    !cJSON_AddItemToArray(out, m)))
      rc = fimi_fail(err, "transcript: out of memory");
  }
  if (rc == 0) rc = env_score(ep, &st.reward, err);
  if (rc == 0 && st.reward.total != 1.0)
    rc = fimi_fail(err, "transcript: the oracle scored %.4f (end %s after %d turns), not 1.0", st.reward.total,
                   task_end_name(obs.end), st.agent_turns);
  env_close(ep);
  agent_free(agent);
  free(system);
  if (rc != 0) {
    cJSON_Delete(out);
    return -1;
  }
  st.messages = cJSON_GetArraySize(out);
  if (stats) *stats = st;
  *messages = out;
  return 0;
}
