// env/user_sim_match.h: how the simulated customer reads an agent message
// (docs/environment.md, "Simulated customer"). Defines the phrase-table types
// (UserSimKind, UserSimConcept; the tables are in env/user_sim_phrases.c),
// a task's own words (UserSimWords), the customer's memory of its own words (UserSimEcho), what a message asks
// for (UserSimAsk) and the calls: user_sim_words, user_sim_echo_add,
// user_sim_analyse (and user_sim_analyse_words with prepared words).
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
#define USER_SIM_ECHO_SLOTS 512  // about 380 sentences and word runs: dozens of replies
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

// A task's own words (field names and keywords as phrases) and which of its
// fields each field concept names: built once per episode (user_sim_words).
#define USER_SIM_MAX_WORDS 160
#define USER_SIM_PHRASE_WORDS 6
#define USER_SIM_MAX_CONCEPTS 96
typedef struct UserSimWord {
  uint64_t tok[USER_SIM_PHRASE_WORDS];  // hashes of the normalised words
  uint8_t len, weak;                    // weak: a function word ("to", "from")
  int field;
} UserSimWord;
typedef struct UserSimWords {
  UserSimWord p[USER_SIM_MAX_WORDS];
  int n;
  uint64_t concept_mask[USER_SIM_MAX_CONCEPTS];  // task fields each field concept names
  uint64_t third_party;                          // payee fields: "their", "his" do not cancel them
  uint64_t qualifier[64];                        // first word of a field's name ("fd" of fd_amount), or 0
} UserSimWords;

void user_sim_words(const Task *task, UserSimWords *out);
// user_sim_analyse with the task's words already built.
void user_sim_analyse_words(const UserSimWords *words, const UserSimEcho *echo, const char *message,
                            UserSimAsk *out);

// Records text the customer said (NULL or "" records nothing).
void user_sim_echo_add(UserSimEcho *echo, const char *text);
// What `message` (NUL-terminated, any bytes) asks of a customer holding
// task's fields. echo may be NULL (no memory of the customer's words).
void user_sim_analyse(const Task *task, const UserSimEcho *echo, const char *message, UserSimAsk *out);

// For tests: how many phrases and '*' prefixes the index holds; 1 when
// everything in the tables fitted.
int user_sim_index_stats(int *phrases_out, int *prefixes_out);

#endif
