// env/user_sim.c: the rule-based simulated customer (env/user_sim.h). The
// rules, in the order they are tried for each agent message:
//   1. a hand-off ("transfer you to", "human agent", ...) ends with TRANSFER;
//   2. a confirmation question gets yes (and `confirmed`) when a task confirm
//      allows it and its value (if any) is quoted in the question, else no;
//   3. a request for fields (env/user_sim_match.c reads the message) reveals
//      the earliest unrevealed asked field in the task's order, one per reply
//      (or repeats a revealed one); a message that tries to override the
//      customer's role gets no field at all;
//   4. if the episode layer says the goal is met, the customer ends with the
//      task's expected end (STOP or OUT_OF_SCOPE);
//   5. asking only for an OTP/PIN/password gets a refusal, only for what the
//      customer does not hold "I don't have that" (never an invented value),
//      another question "I'm not sure";
//   6. otherwise a nudge restating the request.
// Everything the customer says is remembered (UserSimEcho): an agent that
// says it back asks for nothing.
// Phrasings come from templates per language style; the seed picks among them.
#include "env/user_sim.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "env/reward.h"

static const char *const confirm_cues[] = {"do you confirm", "shall i proceed", "should i proceed", "can i proceed",
                                           "may i proceed", "do you agree", "go ahead?", "proceed?", "confirm karein",
                                           "confirm karte", NULL};
static const char *const handoff_cues[] = {"transfer you to", "transferring you", "connect you to", "connecting you",
                                           "human agent", "hand you over", NULL};

static int contains_any(const char *text, const char *const *cues) {
  for (int i = 0; cues[i]; i++)
    if (reward_contains(text, cues[i])) return 1;
  return 0;
}

int user_sim_asks_confirmation(const char *m) { return contains_any(m, confirm_cues); }
int user_sim_is_handoff(const char *m) { return contains_any(m, handoff_cues); }

static void label_of(const char *name, char *out, size_t size) {
  size_t i = 0;
  for (; name[i] && i + 1 < size; i++) out[i] = name[i] == '_' ? ' ' : name[i];
  out[i] = 0;
}

int user_sim_asks_for(const Task *task, int index, const char *m) {
  if (!task || index < 0 || index >= task->num_fields || index >= 64) return 0;
  UserSimAsk ask;
  user_sim_analyse(task, NULL, m, &ask);
  return (ask.fields >> index) & 1;
}

static int pick(UserSim *sim, int n) { return (int)(rng_next_u64(&sim->rng) % (uint64_t)n); }

static void say(UserSim *sim, const char *const variants[TASK_STYLE_COUNT][2], const char *arg1, const char *arg2) {
  const char *fmt = variants[sim->task->style][pick(sim, 2)];
  snprintf(sim->reply, sizeof sim->reply, fmt, arg1 ? arg1 : "", arg2 ? arg2 : "");
}

void user_sim_open(UserSim *sim, const Task *task, uint64_t seed, const char **opening) {
  static const char *const hello[TASK_STYLE_COUNT][2] = {
      {"Hello. %s", "Hi, good morning. %s"},
      {"Namaste ji. %s", "Hello ji, %s"},
      {"%s", "hi.. %s"},
  };
  memset(sim, 0, offsetof(UserSim, words));  // user_sim_words fills the rest
  sim->task = task;
  rng_seed(&sim->rng, seed ^ 0x5eedc0ffee123457ULL);
  user_sim_words(task, &sim->words);
  say(sim, hello, task->reason, NULL);
  user_sim_echo_add(&sim->echo, sim->reply);
  *opening = sim->reply;
}

static void reveal(UserSim *sim, int index, UserSimReply *out) {
  static const char *const tmpl[TASK_STYLE_COUNT][2] = {
      {"My %s is %s.", "Sure, the %s is %s."},
      {"Haan ji, mera %s %s hai.", "Ji, %s %s hai."},
      {"%s %s", "%s: %s"},
  };
  const TaskField *f = &sim->task->fields[index];
  char label[128];
  label_of(f->name, label, sizeof label);
  say(sim, tmpl, label, f->value);
  if (!sim->revealed[index]) {
    sim->revealed[index] = 1;
    sim->num_revealed++;
  }
  out->revealed_field = index;
}

static int confirm_allowed(UserSim *sim, const char *m, const char *const *values) {
  for (int k = 0; k < sim->task->num_confirms; k++) {
    const char *v = values ? values[k] : NULL;
    if (!v || !*v || strstr(m, v)) return 1;
  }
  return 0;
}

// The customer's agreement to a confirmation question, by style (file
// scope: user_sim_is_agreement reads the same phrasings).
static const char *const yes[TASK_STYLE_COUNT][2] = {
    {"Yes, I confirm. Please go ahead.", "Yes, that's fine, please proceed."},
    {"Haan ji, I confirm, aap proceed kijiye.", "Theek hai, confirm hai, kar dijiye."},
    {"yes confirm. go ahead", "ok yes proceed"},
};

int user_sim_is_agreement(const char *reply) {
  for (int s = 0; reply && s < TASK_STYLE_COUNT; s++)
    for (int k = 0; k < 2; k++)
      if (strcmp(reply, yes[s][k]) == 0) return 1;
  return 0;
}

static void answer_confirmation(UserSim *sim, const char *m, const char *const *values, UserSimReply *out) {
  static const char *const no[TASK_STYLE_COUNT][2] = {
      {"No, I do not agree to that.", "No, please don't do that."},
      {"Nahi ji, mujhe yeh nahi chahiye.", "Nahi, rehne dijiye."},
      {"no. dont", "no not ok"},
  };
  if (confirm_allowed(sim, m, values)) {
    say(sim, yes, NULL, NULL);
    sim->confirmations++;
    out->confirmed = 1;
  } else {
    say(sim, no, NULL, NULL);
    sim->declines++;
    out->declined = 1;
  }
}

// Rule 3: the earliest asked unrevealed field, else a repeat of an asked
// revealed one; returns 0 when the message asks for no field of the task.
static int answer_fields(UserSim *sim, const UserSimAsk *ask, UserSimReply *out) {
  int repeat = -1;
  for (int i = 0; i < sim->task->num_fields && i < 64; i++) {
    if (!((ask->fields >> i) & 1)) continue;
    if (!sim->revealed[i]) {
      reveal(sim, i, out);
      return 1;
    }
    if (repeat < 0) repeat = i;
  }
  if (repeat >= 0) {
    reveal(sim, repeat, out);
    return 1;
  }
  return 0;
}

void user_sim_reply(UserSim *sim, const char *m, int goal_met, const char *const *confirm_values, UserSimReply *out) {
  static const char *const bye[TASK_STYLE_COUNT][2] = {
      {"Thank you, that's all I needed.", "Great, thanks for your help."},
      {"Bahut dhanyavaad, bas itna hi chahiye tha.", "Theek hai ji, thank you."},
      {"ok thx", "ok done thanks"},
  };
  static const char *const oos[TASK_STYLE_COUNT][2] = {
      {"I understand, thank you anyway.", "Okay, I'll look elsewhere then. Thanks."},
      {"Achha theek hai, samajh gaya. Thank you.", "Koi baat nahi ji, thank you."},
      {"ok understood", "ok. bye"},
  };
  static const char *const waiting[TASK_STYLE_COUNT][2] = {
      {"Okay, I will wait for the agent.", "Sure, please connect me."},
      {"Theek hai, main wait karta hoon.", "Haan ji, connect kar dijiye."},
      {"ok waiting", "ok connect"},
  };
  static const char *const unknown[TASK_STYLE_COUNT][2] = {
      {"Sorry, I don't have that with me. %s", "I'm not sure about that. %s"},
      {"Sorry ji, woh mere paas nahi hai. %s", "Pata nahi ji. %s"},
      {"dont have that. %s", "no idea. %s"},
  };
  static const char *const absent[TASK_STYLE_COUNT][2] = {
      {"Sorry, I don't have that with me. %s", "I don't have that detail, sorry. %s"},
      {"Sorry ji, woh mere paas nahi hai. %s", "Woh detail mere paas nahi hai ji. %s"},
      {"dont have that. %s", "dont have. %s"},
  };
  static const char *const secret[TASK_STYLE_COUNT][2] = {
      {"Sorry, I won't share that with anyone. %s", "I can't share that, it's secret. %s"},
      {"Nahi ji, woh main kisi ko nahi bataunga. %s", "Woh secret hai ji, share nahi karunga. %s"},
      {"no. wont share that. %s", "cant share that. %s"},
  };
  static const char *const nudge[TASK_STYLE_COUNT][2] = {
      {"Is it done? %s", "Okay. Could you please help with my request? %s"},
      {"Ho gaya kya? %s", "Achha, toh mera kaam ho jayega? %s"},
      {"done?? %s", "so? %s"},
  };
  memset(out, 0, sizeof *out);
  out->revealed_field = -1;
  const char *text = m ? m : "";
  if (user_sim_is_handoff(text)) {
    say(sim, waiting, NULL, NULL);
    out->end = TASK_END_TRANSFER;
  } else if (user_sim_asks_confirmation(text)) {
    answer_confirmation(sim, text, confirm_values, out);
  } else {
    UserSimAsk ask;
    user_sim_analyse_words(&sim->words, &sim->echo, text, &ask);
    if (answer_fields(sim, &ask, out)) {
      // revealed
    } else if (goal_met) {
      TaskEnd end = sim->task->expected_end == TASK_END_OUT_OF_SCOPE ? TASK_END_OUT_OF_SCOPE : TASK_END_STOP;
      say(sim, end == TASK_END_STOP ? bye : oos, NULL, NULL);
      out->end = end;
    } else if (ask.secret) {
      say(sim, secret, sim->task->reason, NULL);
    } else if (ask.absent) {
      say(sim, absent, sim->task->reason, NULL);
    } else if (ask.question || ask.injection) {
      say(sim, unknown, sim->task->reason, NULL);
    } else {
      sim->nudges++;
      say(sim, nudge, sim->task->reason, NULL);
    }
  }
  user_sim_echo_add(&sim->echo, sim->reply);
  out->text = sim->reply;
}
