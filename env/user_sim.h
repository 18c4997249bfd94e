// env/user_sim.h: the simulated customer of an episode (docs/environment.md,
// "Simulated customer"). Defines UserSim and its two calls: the opening line
// and the reply to one agent message. Deterministic and rule-based, pinned to
// the task: it reveals a field only when the agent's message asks for it
// (env/user_sim_match.h reads the message: English, Hinglish and Hindi
// phrasings, negations, statements, other people, echoes), one per reply,
// earliest in the task's order first; it confirms only what task->confirms
// allows (quoting the value when one is required); it never says a value the
// task does not hold; it ends with the task's expected end once the episode
// layer says the goal is met, or TRANSFER when the agent hands off.
#ifndef FIMI_ENV_USER_SIM_H
#define FIMI_ENV_USER_SIM_H

#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "env/tasks/task.h"
#include "env/user_sim_match.h"

typedef struct UserSim {
  const Task *task;
  Rng rng;  // picks among phrasings only
  unsigned char revealed[TASK_MAX_ITEMS];
  int num_revealed;
  int confirmations;  // confirmations given so far
  int declines;
  int nudges;
  UserSimEcho echo;    // what the customer has said (an agent echoing it asks nothing)
  char reply[1024];  // the last reply (what the functions return)
  UserSimWords words;  // the task's field names and keywords, prepared at open (last: not zeroed)
} UserSim;

typedef struct UserSimReply {
  const char *text;   // points into sim->reply
  int revealed_field; // index of the field revealed, or -1
  int confirmed;      // 1 when this reply confirmed (env sets the bank hook)
  int declined;       // 1 when it refused a confirmation
  TaskEnd end;        // NONE, or the end this reply announces
} UserSimReply;

// confirm_values[k]: the resolved value confirms[k] must quote ("" or NULL:
// none). Held by reference for the episode.
void user_sim_open(UserSim *sim, const Task *task, uint64_t seed, const char **opening);
// goal_met: the episode layer's verdict (required values said, gold writes
// done, rubric rules met).
void user_sim_reply(UserSim *sim, const char *agent_message, int goal_met, const char *const *confirm_values,
                    UserSimReply *out);

// 1 when the message asks for field `index` of the task (user_sim_analyse
// without the customer's memory; several fields may be asked at once).
int user_sim_asks_for(const Task *task, int index, const char *message);
// 1 when the message asks the customer to confirm something.
int user_sim_asks_confirmation(const char *message);
// 1 when the message hands the customer to a human.
int user_sim_is_handoff(const char *message);
// 1 when a customer reply is the simulator's agreement to a confirmation
// question (one of its "yes" phrasings): how a reader of a finished
// trajectory tells consent from refusal.
int user_sim_is_agreement(const char *reply);

#endif
