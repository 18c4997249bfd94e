// dpo/divergence.h: one candidate turn against the reference turn it
// replaces (FiMI paper 4.2, "Failure criteria"; docs/dpo-pairs.md). Defines
// DpoTag (the four divergence tags), DpoAction (an atomic action: a tool
// call, or a message and the facts it states), dpo_turn_actions (a turn's
// text as ordered actions), the judge interface DpoJudge (a struct of
// callbacks: the deterministic judge here, a model judge can plug in) and
// dpo_divergence_find (the first differing action and its tag).
//
// Structural divergences fail outright: a malformed call, the wrong tool, the
// right tool called again when the reference moved on, the right tool with
// wrong reward-relevant arguments (reward_call_matches: numbers as numbers)
// -> wrong_tool_or_args; a message where the reference called ->
// replied_instead_of_calling; a call where it replied ->
// called_instead_of_replying. A message where the reference replied goes to
// the judge -> bad_reply when it fails. A preface before a call is an
// action too: it passes unless it states a value absent from the data.
#ifndef FIMI_DPO_DIVERGENCE_H
#define FIMI_DPO_DIVERGENCE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "dpo/facts.h"
#include "env/tasks/task.h"

typedef enum {
  DPO_TAG_NONE = 0,
  DPO_TAG_WRONG_TOOL_OR_ARGS,
  DPO_TAG_REPLIED_INSTEAD_OF_CALLING,
  DPO_TAG_CALLED_INSTEAD_OF_REPLYING,
  DPO_TAG_BAD_REPLY,
  DPO_TAG_COUNT
} DpoTag;

// "none", "wrong_tool_or_args", "replied_instead_of_calling",
// "called_instead_of_replying", "bad_reply"
const char *dpo_tag_name(DpoTag tag);

typedef enum { DPO_ACTION_MESSAGE = 0, DPO_ACTION_CALL, DPO_ACTION_BAD_CALL } DpoActionKind;

// One atomic action of a turn. Strings point into the turn's text or the
// parse (valid while the DpoTurnActions lives).
typedef struct DpoAction {
  DpoActionKind kind;
  const char *text;  // MESSAGE: the words (not NUL-terminated); BAD_CALL: the parser's message
  size_t len;
  const char *name;  // CALL: the tool; BAD_CALL: the name when it was read ("")
  const cJSON *arguments;  // CALL
} DpoAction;

typedef struct DpoTurnActions {
  DpoAction actions[2];  // [preface message,] call  or  message  or  bad call
  int count;
  char name[72];
  cJSON *arguments;  // owned
  char message[256];
} DpoTurnActions;

// Decomposes any bytes of a model turn (data/toolcall.h parses it).
void dpo_turn_actions(const char *text, size_t len, DpoTurnActions *out);
void dpo_turn_actions_free(DpoTurnActions *t);

// What a judge grades: the candidate's message against the reference's
// message action (the annotated object the corpus stores: text, facts, asks,
// confirm, mention_any, mention_none, refusal) in the task, with the facts
// the conversation holds so far.
typedef struct DpoReplyCase {
  const Task *task;
  const cJSON *reference;  // the reference message action
  const DpoFacts *known;   // facts of the prefix (system, customer, tool results)
  const char *candidate;   // the candidate's message (NUL-terminated)
} DpoReplyCase;

typedef struct DpoJudge {
  // 1: the reply passes; 0: it fails with a short reason in why; -1 error.
  int (*grade_reply)(void *ctx, const DpoReplyCase *c, char *why, size_t why_size, FimiError *err);
  void *ctx;
} DpoJudge;

// The deterministic judge: the reference's facts all present (required
// values), every value the candidate states present in the data, the fields
// the reference asks for asked for, a confirmation question where the
// reference asked one, the refusal or rubric words where the reference
// said them, none of the task's forbidden words.
const DpoJudge *dpo_judge_deterministic(void);

typedef struct DpoDivergence {
  DpoTag tag;      // NONE: the turn passes
  int action;      // index of the first differing action of the candidate's turn
  char detail[320];
} DpoDivergence;

// The reference turn's actions (the corpus's array for this turn: one
// {"type":"tool_call","name","arguments","relevant"} or {"type":"message",...}),
// the reference calls earlier in the dialog (array of {"name","arguments"}),
// the facts so far, the candidate's bytes.
int dpo_divergence_find(const Task *task, const cJSON *reference_actions, const cJSON *earlier_calls,
                        const DpoFacts *known, const char *candidate, size_t len, const DpoJudge *judge,
                        DpoDivergence *out, FimiError *err);

#endif
