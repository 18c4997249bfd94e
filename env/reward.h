// env/reward.h: the four-check reward of an episode (DESIGN.md section 6,
// FiMI paper section 5.2; formulas and a worked example in
// docs/environment.md). Defines RewardBreakdown, the weights, the pieces the
// episode calls (sequence matching with LCS, the deterministic judge) and the
// breakdown's JSON.
#ifndef FIMI_ENV_REWARD_H
#define FIMI_ENV_REWARD_H

#include <cjson/cJSON.h>

#include "core/error.h"
#include "env/bank/db.h"
#include "env/tasks/task.h"

#define REWARD_W_SEQ 0.40
#define REWARD_W_DB 0.25
#define REWARD_W_COMM 0.15
#define REWARD_W_JUDGE 0.20

typedef struct RewardBreakdown {
  int checks;         // TASK_CHECK_* declared by the task
  double seq;         // gold actions matched (set-based, multiset) / |gold|
  double seq_frac;    // |LCS(agent calls, gold)| / |gold|
  double seq_strict;  // seq * [seq_frac == 1]
  double db;          // 1 when the final state equals the gold-replayed state
  double comm;        // share of required values said verbatim after a tool result held them
  double judge;       // share of assertions met (0 when db declared and failed)
  double total;       // sum_{c in checks} w_c r_c / sum w_c
  double strict_total;  // the same with seq_strict for seq
  int matched, lcs, num_gold;      // counts behind seq and seq_frac
  int values_said, num_values;     // counts behind comm
  int assertions_met, num_assertions;
  int db_failed_judge_zeroed;      // 1 when the judge was zeroed by a failed db check
  TaskEnd end;                     // how the episode ended
  int turns;                       // agent turns used
  int judge_model;                 // 1 when a served model judged the assertions (eval.judge = model)
  double judge_rules;              // then: the rules' judge value, kept beside the model's
  int simulator_model;             // 1 when a served model played the customer (env/user_sim_model.h)
  int simulator_drift;             // its replies that broke the task's pinning (0 for the rule-based one)
} RewardBreakdown;

// What the reward reads from an episode (filled by env_score).
typedef struct RewardInput {
  const Task *task;
  const BankCall *calls;  // the agent's tool calls in order (bank call log)
  int num_calls;
  const char *const *messages;  // the agent's messages (not tool calls)
  int num_messages;
  const char *const *values;  // resolved required values (task->communicate)
  int num_values;
  // Per value: the index of the first message that may earn it, the first
  // one after a successful agent tool call whose result holds the value
  // (INT_MAX while no result has; NULL: none has). A value recited from
  // memory earns nothing (FiMI paper section 3.3.1).
  const int *value_known_from;
  int db_equal;  // final digest == gold digest
  TaskEnd end;
  int turns;
} RewardInput;

// 1 when an agent call (name + JSON arguments text) matches gold action g:
// same name and every relevant argument equal (numbers as numbers, strings
// exactly, arrays/objects structurally).
int reward_call_matches(const TaskAction *gold, const char *name, const char *arguments_json);
// Computes the breakdown. Only successful agent calls count for seq.
int reward_compute(const RewardInput *in, RewardBreakdown *out, FimiError *err);
// 1 when required value i was said verbatim in a message after a successful
// agent tool call whose result holds it (the comm check's rule; the
// simulator's goal uses it too).
int reward_value_said(const RewardInput *in, int i);
// 1 when a scalar of a tool's result (a string containing `value`, or a
// number or bool printing as `value`) holds the value.
int reward_result_holds(const cJSON *result, const char *value);
// Checks one assertion's rubric rule against the trajectory (1 met, 0 not).
int reward_rule_met(const TaskAssertion *a, const RewardInput *in);
// Case-insensitive substring search.
int reward_contains(const char *haystack, const char *needle);
// total and strict_total from the checks' values and the weights above (a
// judge re-scored by a model judge changes judge, then these). -1 when the
// breakdown declares no checks.
int reward_totals(RewardBreakdown *r);

cJSON *reward_to_json(const RewardBreakdown *r);
// The inverse of reward_to_json (a result file read back): every field
// reward_to_json writes is required; errors name `what`.field.
int reward_from_json(const cJSON *json, RewardBreakdown *out, const char *what, FimiError *err);

#endif
