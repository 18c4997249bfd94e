// tests/fuzz/fuzz_user_sim.c: libFuzzer target for the simulated customer's
// matcher and replies (env/user_sim_match.c, env/user_sim.c). The input is an
// episode: byte 0 picks the style, the rest is up to 8 agent messages
// separated by 0x01 (any bytes: invalid UTF-8, Devanagari, braces, NUL ends a
// message). For every reply:
// - no crash, bounded time (linear in the input);
// - a revealed field is one the message asks for (user_sim_asks_for), and the
//   reply says that field's value and no other field's value; no reveal
//   says no value at all;
// - reading the same message twice gives the same answer;
// - saying the customer's reply back to it reveals nothing.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/user_sim.h"

static void check(int cond, const char *what) {
  if (!cond) {
    fprintf(stderr, "invariant failed: %s\n", what);
    abort();
  }
}

// Field names the families use, with family-like keywords; values that no
// template or other value contains.
static const char *const names[] = {"customer_id", "date_of_birth", "registered_mobile", "account_number",
                                    "amount", "tenure", "payee_name", "to_date", "from_date", "pincode",
                                    "new_mobile", "fd_tenure", "rd_tenure", "email"};
#define NUM_NAMES ((int)(sizeof names / sizeof names[0]))

static Task task;
static int task_ready;

static void build_task(void) {
  FimiError err = {0};
  task_init(&task);
  task_set(&task.id, &err, "fuzz");
  task_set(&task.family, &err, "fuzz");
  task_set(&task.persona, &err, "p");
  task_set(&task.reason, &err, "I want to open an FD. How much will I get?");
  char value[32];
  for (int i = 0; i < NUM_NAMES; i++) {
    snprintf(value, sizeof value, "Q%02dZQ", i);
    task_add_field(&task, names[i], value, &err);
  }
  task_add_field_keyword(&task, "to_date", "to", &err);
  task_add_field_keyword(&task, "from_date", "from", &err);
  task_add_field_keyword(&task, "payee_name", "name", &err);
  task_add_field_keyword(&task, "new_mobile", "mobile", &err);
  task_add_confirm(&task, "the charge", -1, NULL, &err);
  task_ready = 1;
}

static void check_reply(const UserSim *sim, const UserSimReply *r, const char *message) {
  check(r->text == sim->reply, "reply text is the simulator's buffer");
  check(r->revealed_field >= -1 && r->revealed_field < task.num_fields, "revealed field in range");
  for (int i = 0; i < task.num_fields; i++) {
    int says = strstr(r->text, task.fields[i].value) != NULL;
    check(says == (i == r->revealed_field), "a reply says exactly the revealed field's value");
  }
  if (r->revealed_field >= 0) check(user_sim_asks_for(&task, r->revealed_field, message), "revealed only when asked");
  UserSimAsk a, b;
  user_sim_analyse(&task, &sim->echo, message, &a);
  user_sim_analyse(&task, &sim->echo, message, &b);
  check(memcmp(&a, &b, sizeof a) == 0, "same message, same reading");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!task_ready) build_task();
  if (size == 0) return 0;
  task.style = (TaskStyle)(data[0] % TASK_STYLE_COUNT);
  static UserSim sim;
  const char *opening;
  user_sim_open(&sim, &task, data[0], &opening);
  char *buf = malloc(size);
  check(buf != NULL, "malloc");
  size_t pos = 1;
  for (int turn = 0; turn < 8 && pos <= size; turn++) {
    size_t end = pos;
    while (end < size && data[end] != 0x01) end++;
    memcpy(buf, data + pos, end - pos);
    buf[end - pos] = 0;
    UserSimReply r;
    user_sim_reply(&sim, buf, 0, NULL, &r);
    check_reply(&sim, &r, buf);
    if (r.end != TASK_END_NONE) break;
    // The customer's own words said back ask for nothing.
    char echo[sizeof sim.reply];
    memcpy(echo, r.text, sizeof echo);
    UserSimAsk ask;
    user_sim_analyse(&task, &sim.echo, echo, &ask);
    check(ask.fields == 0, "an echo of the customer's reply asks for nothing");
    pos = end + 1;
  }
  free(buf);
  return 0;
}
