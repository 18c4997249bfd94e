// env/user_sim_match.h: how the simulated customer reads an agent message
// (docs/environment.md, "Simulated customer"). Defines the phrase-table types
// (UserSimKind, UserSimConcept; the tables are in env/user_sim_phrases.c),
// the customer's memory of its own words (UserSimEcho), what a message asks
// for (UserSimAsk) and the two calls: user_sim_echo_add and user_sim_analyse.
//
// The matcher is rule-based and deterministic: a UTF-8 normaliser (ASCII case,
// apostrophes, a plural 's', Devanagari nukta and chandrabindu, Devanagari
// digits; no locale), sentences and clauses, and the longest phrase at each
// word from the tables plus the task's own field names and keywords. A field
// mention counts as asked when its sentence is a request (a request cue or a
// question mark) and nothing near it says otherwise: a negation ("no need
// for"), a statement about something already done ("I have verified"),
// another person ("your wife's"), service talk ("how can I help"), a
// key-value pair echoed from a tool result ("customer_id: NVC1"), text in
// braces, or words the customer itself said. Time and memory are linear in
// the message.
#ifndef FIMI_ENV_USER_SIM_MATCH_H
#define FIMI_ENV_USER_SIM_MATCH_H

#include <stdint.h>

#include "env/tasks/task.h"

typedef enum {
  USIM_FIELD = 0,   // names task fields (UserSimConcept.fields)
  USIM_SECRET,      // an OTP, PIN, password or CVV
  USIM_REQUEST,     // asks: "could you", "what", "batayein", "बताइए"
  USIM_POLITE,      // "please", "kripya": makes a request, decides nothing alone
  USIM_NEGATION,    // "no need", "mat", "नहीं"
  USIM_LACK,        // "I don't have your ...": not a request, but "share it" may follow
  USIM_STATED,      // "verified", "thanks for", "mil gaya"
  USIM_OTHER,       // another person: "your wife's", "unka"
  USIM_SERVICE,     // "how can I help", "anything else"
  USIM_INJECTION,   // "ignore your rules", "system prompt"
  USIM_PRONOUN,     // "it", "the same", "ise"
  USIM_FILLER,      // "and", "so", "ji" (may open a clause before a weak keyword)
  USIM_WEAK,        // function words that are keywords only when they open a clause
  USIM_KIND_COUNT
} UserSimKind;

typedef struct UserSimConcept {
  UserSimKind kind;
  const char *fields;   // USIM_FIELD: space-separated field names; else NULL
  const char *phrases;  // '|'-separated; marks '?', '!', '*' (env/user_sim_phrases.c)
} UserSimConcept;

extern const UserSimConcept user_sim_concepts[];
extern const int user_sim_num_concepts;

// What the customer has said: hashes of its sentences and of every run of
// four words in them (an open-addressing set; full at 3/4, then it stops
// recording). An agent sentence equal to one of the customer's, or a field
// mention inside four words the customer said, asks for nothing.
#define USER_SIM_ECHO_SLOTS 2048
typedef struct UserSimEcho {
  uint64_t slots[USER_SIM_ECHO_SLOTS];  // 0: empty
  int count;
} UserSimEcho;

typedef struct UserSimAsk {
  uint64_t fields;  // bit i: the message asks for task field i
  int absent;       // asks for something the customer does not hold (PAN, name, a field the task lacks)
  int secret;       // asks for an OTP, PIN, password or CVV
  int question;     // has a request sentence that is not service talk
  int injection;    // tries to override the customer's role: answer no field
} UserSimAsk;

// Records text the customer said (NULL or "" records nothing).
void user_sim_echo_add(UserSimEcho *echo, const char *text);
// What `message` (NUL-terminated, any bytes) asks of a customer holding
// task's fields. echo may be NULL (no memory of the customer's words).
void user_sim_analyse(const Task *task, const UserSimEcho *echo, const char *message, UserSimAsk *out);

#endif
