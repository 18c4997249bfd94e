// eval/episode_record.c: an episode played in this process, recorded from
// the environment's own turns (see episode_record.h).
#include "eval/episode_record.h"

#include <stdio.h>
#include <string.h>

#include "rl/rollout.h"

static const char *turn_role(EnvTurnKind kind) {
  switch (kind) {
    case ENV_TURN_CUSTOMER: return "user";
    case ENV_TURN_TOOL: return "tool";
    default: return "model";
  }
}

// The end names of rl/rollout.h for how the simulator or budget ended it.
const char *eval_agent_end_name(TaskEnd end) {
  switch (end) {
    case TASK_END_STOP: return rollout_end_name(ROLLOUT_END_STOP);
    case TASK_END_TRANSFER: return rollout_end_name(ROLLOUT_END_TRANSFER);
    case TASK_END_OUT_OF_SCOPE: return rollout_end_name(ROLLOUT_END_OUT_OF_SCOPE);
    default: return rollout_end_name(ROLLOUT_END_TURN_BUDGET);
  }
}

static int is_error_turn(const char *text) {
  cJSON *obj = cJSON_Parse(text);
  int bad = obj && cJSON_GetObjectItemCaseSensitive(obj, "error") != NULL;
  cJSON_Delete(obj);
  return bad;
}

// Counts and trajectory of a finished episode from its recorded turns.
int eval_record_env_turns(EvalEpisode *e, EnvEpisode *ep, FimiError *err) {
  e->trajectory = cJSON_CreateArray();
  if (!e->trajectory) return fimi_fail(err, "out of memory");
  for (int i = 0; i < env_episode_num_turns(ep); i++) {
    const EnvTurn *t = env_episode_turn(ep, i);
    cJSON *turn = cJSON_CreateObject();
    cJSON_AddStringToObject(turn, "role", turn_role(t->kind));
    cJSON_AddStringToObject(turn, "text", t->text);
    cJSON_AddBoolToObject(turn, "sampled", t->kind == ENV_TURN_AGENT_MESSAGE || t->kind == ENV_TURN_AGENT_CALL);
    cJSON_AddItemToArray(e->trajectory, turn);
    e->tool_calls += t->kind == ENV_TURN_AGENT_CALL;
    e->tool_errors += t->kind == ENV_TURN_TOOL && is_error_turn(t->text);
  }
  return 0;
}

// An episode the environment could not play: recorded with zero reward and
// the reason as its last trajectory entry, like a failed rollout.
int eval_record_failure(EvalEpisode *e, FimiError *err) {
  memset(&e->reward, 0, sizeof e->reward);
  e->failed = 1;
  snprintf(e->end, sizeof e->end, "%s", rollout_end_name(ROLLOUT_END_FAILED));
  if (!e->trajectory) e->trajectory = cJSON_CreateArray();
  cJSON *note = cJSON_CreateObject();
  if (!e->trajectory || !note) return fimi_fail(err, "out of memory");
  cJSON_AddStringToObject(note, "role", "error");
  cJSON_AddStringToObject(note, "text", err->message);
  cJSON_AddItemToArray(e->trajectory, note);
  err->failed = 0;
  err->message[0] = '\0';
  return 0;
}
