// env/user_sim_model.h: the simulated customer played by a served model
// (docs/environment.md, "A model-played customer"; env.simulator = model),
// behind the same reply the rule-based simulator gives (env/user_sim.h), so
// the episode, the reward and every harness stay as they are. Defines
// UserSimModelDrift, UserSimModel and user_sim_model_open/_reply/_free.
//
// The model is prompted as tau2-bench's user simulator is: the task's
// persona and reason for calling, the fields it knows in their revelation
// order (to give only when asked, one per reply, verbatim), what it may
// agree to when asked to confirm (replies to a confirmation start with Yes
// or No), and explicit markers to end the call: ###STOP### (handled),
// ###TRANSFER### (handed to a human), ###OUT_OF_SCOPE### (the bank cannot
// help). The opening line stays the rule-based simulator's, so every
// simulator meets the same first turn.
//
// Pinning is checked, not trusted: every reply is read against the task and
// the agent's message it answers (env/user_sim.h's user_sim_asks_for), and
// counted as drift when it reveals a field the agent did not ask for, gives
// an asked field a value of the field's shape that is not the task's, or
// agrees to a confirmation the task does not allow. A reply the model
// could not give (no content) becomes "Sorry, could you say that again?"
// and counts as drift too.
#ifndef FIMI_ENV_USER_SIM_MODEL_H
#define FIMI_ENV_USER_SIM_MODEL_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "env/tasks/task.h"
#include "env/user_sim.h"
#include "net/openai_client.h"

typedef struct UserSimModelDrift {
  int unasked;       // a field revealed before the agent asked for it
  int wrong_value;   // an asked field given a value that is not the task's
  int confirmation;  // an agreement the task does not allow
  int no_reply;      // an answer without text
} UserSimModelDrift;

typedef struct UserSimModel {
  OpenAIClient *client;   // borrowed
  const Task *task;       // borrowed
  uint64_t seed;
  int turn;
  double temperature;
  cJSON *body;            // the request: the customer's messages (owned)
  cJSON *messages;        // in body: system, then the customer's lines (assistant) and the agent's (user)
  unsigned char revealed[TASK_MAX_ITEMS];
  int confirmations;
  UserSimModelDrift drift;
  char reply[1024];       // the last reply (what UserSimReply.text points to)
} UserSimModel;

// confirm_values[k]: the resolved value confirms[k] quotes ("" when none).
// opening: the customer's first line (the rule-based simulator's).
int user_sim_model_open(UserSimModel *s, OpenAIClient *client, const Task *task, uint64_t seed, double temperature,
                        const char *opening, const char *const *confirm_values, FimiError *err);
// The reply to one agent message; fails only when the server cannot be
// reached or refuses (err says why).
int user_sim_model_reply(UserSimModel *s, const char *agent_message, UserSimReply *out, FimiError *err);
void user_sim_model_free(UserSimModel *s);
// Drift of the episode so far, all kinds.
int user_sim_model_drift_total(const UserSimModel *s);

#endif
