// eval/bench_trace.h: one attempt's trajectory as the bench's gates read it
// (docs/evaluation-bench.md). Defines BenchEvent (a customer line, an agent
// message, an agent tool call with its parsed arguments and whether the tool
// succeeded, a tool turn, a system turn) and BenchTrace, built from the
// [{role, text}] trajectory eval/harness.h records for models and scripted
// agents alike, so one judge reads both.
//
// The agent's turns are untrusted model output: each goes through the
// chat format's tool-call parser (data/toolcall.h); any bytes give a message,
// a call or a malformed call, never a failure.
#ifndef FIMI_EVAL_BENCH_TRACE_H
#define FIMI_EVAL_BENCH_TRACE_H

#include <cjson/cJSON.h>

#include "core/error.h"
#include "data/toolcall.h"
#include "env/tasks/task.h"

typedef enum {
  BENCH_EV_SYSTEM = 0,  // the system prompt (rollouts only)
  BENCH_EV_CUSTOMER,    // a customer line (the simulator)
  BENCH_EV_MESSAGE,     // an agent message, or the text before a tool call
  BENCH_EV_CALL,        // an agent tool call (parsed, or malformed)
  BENCH_EV_TOOL,        // a tool turn: {"name", "result"} or {"name", "error"}
} BenchEventKind;

typedef struct BenchEvent {
  BenchEventKind kind;
  const char *text;   // borrowed from the trajectory (the message: trimmed copy in owned)
  char *owned;        // MESSAGE: the message text (trimmed); else NULL
  // CALL: the tool name ("" when unreadable), the arguments (owned; NULL
  // when the call was malformed), their compact JSON text (owned), and ok:
  // the following tool turn carried a result, not an error.
  char name[TOOLCALL_MAX_NAME_BYTES + 1];
  cJSON *args;
  char *args_text;
  int ok;
} BenchEvent;

typedef struct BenchTrace {
  BenchEvent *events;
  int count;
  TaskEnd end;  // how the episode ended (BUDGET for the engine's own limits)
} BenchTrace;

// Builds the trace of a trajectory ([{role, text, sampled}], roles system,
// user, model, tool; a sampled turn is the agent's whatever its role; other
// roles and entries without text are skipped). end_name:
// the harness's end ("stop", "transfer", "out_of_scope", "turn_budget", ...).
// Fails only when memory runs out. The trajectory must outlive the trace.
int bench_trace_build(const cJSON *trajectory, const char *end_name, BenchTrace *out, FimiError *err);
void bench_trace_free(BenchTrace *t);

// The value of a call's boolean argument `key` (0 when absent or not true).
int bench_call_flag(const BenchEvent *call, const char *key);

#endif
