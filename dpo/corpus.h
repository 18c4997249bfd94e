// dpo/corpus.h: the conversation corpus of the preference route (FiMI paper
// 3.4.1 and 4.1; docs/dpo-pairs.md). Defines dpo_corpus_dialog (one
// persona-conditioned dialog: the episode loop with the task's pinned
// customer and env's oracle as the reference agent, through
// env_transcript_oracle), dpo_corpus_row (validation by dpo/corpus_check.h,
// then the row with each assistant turn's atomic actions), DpoDialog (a row
// read back) and DpoCoverage (what a corpus exercises).
//
// A row (one JSONL line):
//   {"task_id","family","kind","use_case","style","seed","catalog","end",
//    "messages":[...]  the shape `fimi env transcripts` writes,
//    "actions":[{"message": i, "actions":[...]}, ...]  one per assistant turn,
//    "task":{...}  the task (task_to_json), so the row replays alone}
// A call action: {"type":"tool_call","name","arguments","relevant":[...],"gold":k}.
// A message action: {"type":"message","text","facts":[...],"asks":[fields],
//   "confirm":bool,"mention_any":[[words],...],"mention_none":[...],"refusal":bool}.
#ifndef FIMI_DPO_CORPUS_H
#define FIMI_DPO_CORPUS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "dpo/corpus_check.h"
#include "env/agent_prompt.h"
#include "env/episode.h"
#include "env/tasks/task.h"

// Plays and validates one dialog. *row: the row, or NULL when the dialog was
// rejected (the reason in *verdict; an oracle episode that fails or scores
// below 1.0 is the rejection "episode_failed"). -1 only on internal errors.
int dpo_corpus_dialog(EnvWorld *world, const Task *task, uint64_t seed, EnvCatalogMode mode, cJSON **row,
                      DpoCheckResult *verdict, FimiError *err);
// Validates `messages` (ended with `end`) and builds the row (NULL when
// rejected). Does not take messages.
int dpo_corpus_row(const Task *task, const cJSON *messages, TaskEnd end, uint64_t seed, EnvCatalogMode mode,
                   cJSON **row, DpoCheckResult *verdict, FimiError *err);
// The atomic actions of every assistant turn of a validated dialog.
cJSON *dpo_corpus_actions(const Task *task, const cJSON *messages, FimiError *err);

// A row read back (pointers into the row, which must outlive it).
typedef struct DpoDialog {
  Task task;  // owned: dpo_dialog_free
  const char *family;
  const cJSON *messages;
  const cJSON *actions;  // array of {"message", "actions"}
} DpoDialog;
// Errors name `what` ("conv.jsonl:12") and the field.
int dpo_dialog_parse(const cJSON *row, const char *what, DpoDialog *out, FimiError *err);
void dpo_dialog_free(DpoDialog *d);

typedef struct DpoCoverage {
  int dialogs, rejected;
  int rejected_by[DPO_REJECT_COUNT];
  int by_use_case[TASK_USE_COUNT];
  int by_kind[TASK_KIND_COUNT];
  int by_end[TASK_END_COUNT];
  int rules[TASK_RULE_COUNT];
  int agent_turns, calls, messages, confirmations, tool_errors;
  long arithmetic_checked;  // tool-result values the checker recomputed
  cJSON *families;  // {"family": dialogs}
  cJSON *tools;     // {"tool": calls}
} DpoCoverage;

int dpo_coverage_init(DpoCoverage *c, FimiError *err);
void dpo_coverage_free(DpoCoverage *c);
int dpo_coverage_add(DpoCoverage *c, const Task *task, const cJSON *row, const DpoCheckResult *verdict,
                     FimiError *err);
void dpo_coverage_reject(DpoCoverage *c, DpoRejectReason reason);
// {"dialogs","rejected","rejected_by":{},"use_case":{},"kind":{},"family":{},
//  "end":{},"rules":{},"tools":{},"tools_not_exercised":[...],...}
cJSON *dpo_coverage_json(const DpoCoverage *c);

#endif
