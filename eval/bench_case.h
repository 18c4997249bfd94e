// eval/bench_case.h: one case of the judged bench (docs/evaluation-bench.md,
// FiMI paper section 4.4.1) and the case file. Defines BenchCategory (the
// six categories), BenchExpectedCall, BenchDisclosure, BenchCase, BenchSet
// and the strict JSONL reader/writer.
//
// A case is a task of the bank (its persona, intent, seeded customer state
// and simulated customer, embedded as the task object of env/tasks/task.h) plus
// what the judge expects: the tool calls with their arguments and ordering
// constraints, the facts the reply must state, the disclosures required
// before a charged action, and what safety forbids (tools, another
// customer's ids, text that must never be said). Case files are untrusted
// input: every field is validated and errors name file:line:field.
#ifndef FIMI_EVAL_BENCH_CASE_H
#define FIMI_EVAL_BENCH_CASE_H

#include <cjson/cJSON.h>

#include "core/error.h"
#include "env/tasks/task.h"

typedef enum {
  BENCH_CAT_ACCOUNTS = 0,  // "accounts": accounts and transactions
  BENCH_CAT_CARDS,         // "cards"
  BENCH_CAT_DEPOSITS_LOANS,  // "deposits_loans": deposits and loans
  BENCH_CAT_SERVICE,       // "service_catalog": customer service and catalog
  BENCH_CAT_CALCULATORS,   // "calculators"
  BENCH_CAT_CAPABILITY,    // "capability": safety and adversarial cases
  BENCH_CAT_COUNT
} BenchCategory;

const char *bench_category_name(BenchCategory c);
const char *bench_category_title(BenchCategory c);  // "accounts and transactions", ...
int bench_category_from_name(const char *name);     // -1 when unknown

#define BENCH_MAX_ITEMS 64     // expected calls, facts, disclosures, forbidden entries
#define BENCH_MAX_AXIS 48      // bytes of an axis name, [a-z0-9_]+

// One call the agent must make: the tool, the arguments that must be equal
// (numbers compared as numbers, env/reward.h's reward_call_matches), and the
// expected calls (indices) that must happen before it.
typedef struct BenchExpectedCall {
  char *name;
  cJSON *arguments;  // a JSON object (owned); only these keys are compared
  int *after;
  int num_after;
} BenchExpectedCall;

// Before any call of `tool` that acts (a charged tool with
// customer_confirmed true, or any call of a non-charged tool named here),
// the agent must have said one of `mention_any` (none: any disclosure) and
// asked for confirmation, and the customer must have agreed.
typedef struct BenchDisclosure {
  char *tool;
  char **mention_any;
  int num_mention;
} BenchDisclosure;

typedef struct BenchCase {
  char *id;      // unique in the file; also the embedded task's id
  BenchCategory category;
  char *axis;    // the behaviour the case targets ("multi_step", "prompt_injection", ...)
  char *intent;  // what the customer wants, in a line
  Task task;     // persona, opening line, fields, initial state, gold chain, rubric
  BenchExpectedCall *calls;
  int num_calls;
  char **facts;  // verbatim values the agent's messages must contain
  int num_facts;
  BenchDisclosure *disclosures;
  int num_disclosures;
  char **forbidden_tools;  // never to be called (out-of-scope help, injected actions)
  int num_forbidden_tools;
  char **forbidden_ids;    // another customer's ids: never in a call's arguments
  int num_forbidden_ids;
  char **forbidden_text;   // another customer's data: never in an agent message
  int num_forbidden_text;
} BenchCase;

typedef struct BenchSet {
  BenchCase *cases;
  int count;
} BenchSet;

void bench_case_free(BenchCase *c);
// Parses one case object (unknown fields are errors) and checks it: ids and
// names well-formed, `after` indices earlier than the call, tools known.
// Errors name the field ("calls[2].after[0]: ...").
int bench_case_from_json(const cJSON *json, BenchCase *out, FimiError *err);
cJSON *bench_case_to_json(const BenchCase *c, FimiError *err);

// Blank lines are skipped; ids must be unique. Errors: "path:line: field: ...".
int bench_set_parse(const char *text, size_t len, const char *name, BenchSet *out, FimiError *err);
int bench_set_load(const char *path, BenchSet *out, FimiError *err);
// One JSON line per case, written through a temp file and rename.
int bench_set_write(const BenchSet *set, const char *path, FimiError *err);
void bench_set_free(BenchSet *set);
const BenchCase *bench_set_find(const BenchSet *set, const char *id);

// The tasks the harness plays: one per case, a copy of its task (whose id
// is the case id).
int bench_set_tasks(const BenchSet *set, TaskList *out, FimiError *err);

#endif
