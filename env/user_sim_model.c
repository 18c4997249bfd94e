// env/user_sim_model.c: the model-played customer and its drift checks
// (see user_sim_model.h).
#define _GNU_SOURCE  // strcasestr
#include "env/user_sim_model.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/rng.h"
#include "core/text.h"

#define NO_REPLY "Sorry, could you say that again?"
#define REPLY_MAX_TOKENS 120

static const struct {
  const char *marker;
  TaskEnd end;
} MARKERS[] = {{"###STOP###", TASK_END_STOP},
               {"###TRANSFER###", TASK_END_TRANSFER},
               {"###OUT_OF_SCOPE###", TASK_END_OUT_OF_SCOPE}};

// The customer's instructions, from the task alone.
static int instructions(const Task *t, const char *const *confirm_values, TextBuf *out, FimiError *err) {
  int rc = text_printf(out, err,
                       "You are a customer of Navadhan Bank, talking to its customer-service agent by chat. Stay in "
                       "character: %s. Why you are contacting the bank: %s\n\nWhat you know, to give only when the "
                       "agent asks for it, one item per reply, exactly as written here:\n",
                       t->persona ? t->persona : "a retail customer", t->reason ? t->reason : "");
  for (int i = 0; rc == 0 && i < t->num_fields; i++)
    rc = text_printf(out, err, "- %s: %s\n", t->fields[i].name, t->fields[i].value);
  if (rc == 0 && t->num_confirms == 0)
    rc = text_append_str(out, "\nIf the agent asks you to confirm an action, decline.\n", err);
  for (int k = 0; rc == 0 && k < t->num_confirms; k++)
    rc = text_printf(out, err, "\nIf the agent asks you to confirm %s%s%s%s, agree.\n", t->confirms[k].name,
                     confirm_values[k] && *confirm_values[k] ? " (" : "", confirm_values[k] ? confirm_values[k] : "",
                     confirm_values[k] && *confirm_values[k] ? ")" : "");
  if (rc == 0)
    rc = text_printf(out, err,
                     "Begin every reply to a confirmation question with Yes or No. Never invent a detail you were "
                     "not given; if asked for something you do not know, say so. Reply in one or two short "
                     "sentences, in %s style. When your request has been fully handled, thank the agent and end "
                     "your message with ###STOP###. If the agent hands you to a human colleague, end with "
                     "###TRANSFER###. If the agent says the bank cannot help with this request, end with "
                     "###OUT_OF_SCOPE###.",
                     task_style_name(t->style));
  return rc;
}

int user_sim_model_open(UserSimModel *s, OpenAIClient *client, const Task *task, uint64_t seed, double temperature,
                        const char *opening, const char *const *confirm_values, FimiError *err) {
  memset(s, 0, sizeof *s);
  s->client = client;
  s->task = task;
  s->seed = seed;
  s->temperature = temperature;
  TextBuf system = {0};
  if (instructions(task, confirm_values, &system, err) != 0) return -1;
  s->body = cJSON_CreateObject();
  s->messages = cJSON_AddArrayToObject(s->body, "messages");
  openai_add_message(s->messages, "system", system.data);
  openai_add_message(s->messages, "assistant", opening);  // the customer speaks first
  text_free(&system);
  cJSON_AddNumberToObject(s->body, "temperature", temperature);
  cJSON_AddNumberToObject(s->body, "max_tokens", REPLY_MAX_TOKENS);
  return 0;
}

void user_sim_model_free(UserSimModel *s) {
  cJSON_Delete(s->body);
  s->body = NULL;
}

int user_sim_model_drift_total(const UserSimModel *s) {
  return s->drift.unasked + s->drift.wrong_value + s->drift.confirmation + s->drift.no_reply;
}

// ---- reading a reply ---------------------------------------------------------------------------

// Removes the first end marker from text; returns its end (NONE: none).
static TaskEnd take_marker(char *text) {
  for (size_t i = 0; i < sizeof MARKERS / sizeof MARKERS[0]; i++) {
    char *at = strstr(text, MARKERS[i].marker);
    if (!at) continue;
    size_t n = strlen(MARKERS[i].marker);
    memmove(at, at + n, strlen(at + n) + 1);
    size_t len = strlen(text);
    while (len > 0 && isspace((unsigned char)text[len - 1])) text[--len] = '\0';
    return MARKERS[i].end;
  }
  return TASK_END_NONE;
}

// The character class of each byte: digit, letter, other.
static char shape_of(char c) { return isdigit((unsigned char)c) ? '9' : isalpha((unsigned char)c) ? 'a' : c; }

// 1 when text holds a word of value's shape (same length, digits and
// letters in the same places; values of 4+ characters with a digit) that is
// not value: an asked field answered with another value.
static int other_value_of_shape(const char *text, const char *value) {
  size_t n = strlen(value);
  if (n < 4 || !strpbrk(value, "0123456789")) return 0;
  for (const char *p = text; *p; p++) {
    if (p != text && !isspace((unsigned char)p[-1]) && p[-1] != ',' && p[-1] != ':') continue;  // word starts only
    size_t k = 0;
    while (k < n && p[k] && shape_of(p[k]) == shape_of(value[k])) k++;
    int whole = k == n && (!p[n] || isspace((unsigned char)p[n]) || strchr(".,;!?)", p[n]));
    if (whole && strncasecmp(p, value, n) != 0) return 1;
  }
  return 0;
}

static int starts_with_word(const char *text, const char *word) {
  while (isspace((unsigned char)*text)) text++;
  size_t n = strlen(word);
  return strncasecmp(text, word, n) == 0 && !isalpha((unsigned char)text[n]);
}

// What the reply reveals and agrees to, against the task: fills out and
// counts drift.
static void read_reply(UserSimModel *s, const char *agent_message, UserSimReply *out) {
  const Task *t = s->task;
  out->revealed_field = -1;
  for (int i = 0; i < t->num_fields && i < TASK_MAX_ITEMS; i++) {
    int asked = user_sim_asks_for(t, i, agent_message);
    if (!s->revealed[i] && strcasestr(s->reply, t->fields[i].value)) {
      s->revealed[i] = 1;
      if (out->revealed_field < 0) out->revealed_field = i;
      s->drift.unasked += !asked;
    } else if (asked && !s->revealed[i] && other_value_of_shape(s->reply, t->fields[i].value)) {
      s->drift.wrong_value++;
    }
  }
  if (user_sim_asks_confirmation(agent_message)) {
    out->confirmed = starts_with_word(s->reply, "yes");
    out->declined = starts_with_word(s->reply, "no");
    if (out->confirmed && s->confirmations++ >= t->num_confirms) s->drift.confirmation++;
  }
}

int user_sim_model_reply(UserSimModel *s, const char *agent_message, UserSimReply *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  openai_add_message(s->messages, "user", agent_message);
  cJSON_DeleteItemFromObjectCaseSensitive(s->body, "seed");
  cJSON_AddNumberToObject(s->body, "seed", (double)(rng_mix(s->seed, (uint64_t)s->turn++) >> 12));
  OpenAIChat a;
  if (openai_chat(s->client, s->body, &a, err) != 0) return fimi_fail_wrap(err, "the model-played customer");
  int usable = a.content && *a.content;
  snprintf(s->reply, sizeof s->reply, "%s", usable ? a.content : NO_REPLY);
  openai_chat_free(&a);
  s->drift.no_reply += !usable;
  out->end = take_marker(s->reply);
  if (!s->reply[0]) snprintf(s->reply, sizeof s->reply, "%s", "Thank you.");  // a marker alone
  openai_add_message(s->messages, "assistant", s->reply);
  read_reply(s, agent_message, out);
  out->text = s->reply;
  return 0;
}
