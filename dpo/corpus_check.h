// dpo/corpus_check.h: the validation a reference dialog passes before it
// enters the conversation corpus (FiMI paper 4.1.3; docs/dpo-pairs.md,
// "Validation"). Defines DpoRejectReason, DpoCheckResult, dpo_check_dialog
// (every check on one dialog, first failure wins) and dpo_check_arithmetic
// (one tool result recomputed).
//
// The checks read only the task and the dialog's messages (the shape
// `fimi env transcripts` writes), so a planted or hand-edited dialog is
// checked exactly like one the episode loop produced:
//   - shape: system, user, then assistant turns each followed by a tool turn
//     (after a call) or the customer's reply;
//   - every tool call matches its intended gold action (reward_call_matches,
//     in order, none missing or extra) and its tool turn is a result;
//   - every value the agent puts in a call or says to the customer comes
//     from the customer's words, an earlier tool result or the system turn
//     (dpo/facts.h);
//   - a confirmed or charged action comes after a message that asks for
//     consent (quoting the value the task's confirms name) and the
//     customer's agreement;
//   - the task's rubric rules hold, every value it must communicate was
//     said, and the dialog ended as the task expects;
//   - arithmetic in tool results (EMI, FD/RD interest and maturity,
//     premature-closure payouts, TDS totals, charges and GST) agrees with a
//     second implementation written here from the formulas, not the bank's.
#ifndef FIMI_DPO_CORPUS_CHECK_H
#define FIMI_DPO_CORPUS_CHECK_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "env/tasks/task.h"

typedef enum {
  DPO_REJECT_NONE = 0,
  DPO_REJECT_MALFORMED,             // messages not in the dialog shape
  DPO_REJECT_CALL_MISMATCH,         // a call that is not its gold action, or gold calls missing
  DPO_REJECT_TOOL_ERROR,            // a tool turn holds an error
  DPO_REJECT_ARGUMENT_NOT_IN_DATA,  // a call argument no earlier turn holds
  DPO_REJECT_VALUE_NOT_IN_DATA,     // a message states a value no earlier turn holds
  DPO_REJECT_ARITHMETIC,            // a tool result disagrees with the recomputation
  DPO_REJECT_NO_DISCLOSURE,         // a charged/confirmed action without disclosure and consent
  DPO_REJECT_RULE,                  // a rubric rule of the task not followed
  DPO_REJECT_VALUE_MISSING,         // a value the task must communicate never said
  DPO_REJECT_WRONG_END,             // the dialog did not end as the task expects
  DPO_REJECT_EPISODE_FAILED,        // the episode loop itself failed (oracle below 1.0)
  DPO_REJECT_COUNT
} DpoRejectReason;

// "malformed", "call_mismatch", ...
const char *dpo_reject_reason_name(DpoRejectReason reason);

typedef struct DpoCheckResult {
  DpoRejectReason reason;  // NONE: the dialog passes
  int message;             // index of the offending message (-1: the dialog as a whole)
  int arithmetic_checked;  // values recomputed by the second implementation
  char detail[320];
} DpoCheckResult;

// Checks one dialog of `task` that ended with `end`. Returns 0 with the
// verdict in *out (a rejection is not an error), -1 on out of memory.
int dpo_check_dialog(const Task *task, const cJSON *messages, TaskEnd end, DpoCheckResult *out, FimiError *err);

// Recomputes the arithmetic of one tool result (the "result" object) of
// `tool` called with `arguments`: 1 when it agrees (or holds nothing to
// recompute), 0 with `detail` naming the field, expected and found value.
// *checked (may be NULL) gets the number of values recomputed.
int dpo_check_arithmetic(const char *tool, const cJSON *arguments, const cJSON *result, int *checked, char *detail,
                         size_t detail_size);

#endif
