// env/tasks/task.h: one task of the bank environment (docs/tasks.md). Defines the
// Task struct and its parts (fields the simulated customer reveals, gold
// actions, values to communicate, natural-language assertions with their
// deterministic rubric rules, what the customer confirms), the enums (kind,
// use case, language style, expected end, declared checks), the builders the
// task families use, and the JSONL reader/writer with a strict validator.
//
// A Task owns all of its strings (malloc'd) and cJSON values: free it with
// task_free. Task files are untrusted input: task_from_json validates every
// field and names the field (and the caller adds file:line).
#ifndef FIMI_ENV_TASK_H
#define FIMI_ENV_TASK_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"

typedef enum { TASK_KIND_HAPPY = 0, TASK_KIND_SEQ, TASK_KIND_EDGE, TASK_KIND_TOOLS, TASK_KIND_COUNT } TaskKind;

typedef enum {
  TASK_USE_ACCOUNTS_KYC = 0,   // "accounts_kyc": identity, KYC, accounts, transfers
  TASK_USE_DEPOSITS_LOANS,     // "deposits_loans": FD/RD, loans, gold loans
  TASK_USE_INSURANCE,          // "insurance": policies and claims
  TASK_USE_GOV_SCHEMES,        // "gov_schemes": PMJDY/PMSBY/APY/..., TDS forms
  TASK_USE_CROSS_CUTTING,      // "cross_cutting": cards, mandates, cheques, service requests
  TASK_USE_COUNT
} TaskUseCase;

typedef enum { TASK_STYLE_ENGLISH = 0, TASK_STYLE_HINGLISH, TASK_STYLE_FRAGMENTARY, TASK_STYLE_COUNT } TaskStyle;

// How an episode ends. NONE: still running; BUDGET: the turn budget ran out.
// A task's expected_end is one of STOP, TRANSFER, OUT_OF_SCOPE.
typedef enum {
  TASK_END_NONE = 0,
  TASK_END_STOP,
  TASK_END_TRANSFER,
  TASK_END_OUT_OF_SCOPE,
  TASK_END_BUDGET,
  TASK_END_COUNT
} TaskEnd;

// Declared checks (bit mask): the reward averages only these (DESIGN.md 6).
#define TASK_CHECK_SEQ 1
#define TASK_CHECK_DB 2
#define TASK_CHECK_COMM 4
#define TASK_CHECK_JUDGE 8
#define TASK_CHECK_ALL 15

// Deterministic rubric rules of the default judge (docs/tasks.md):
//   MENTIONS_ANY  args: words; some agent message contains one (case-insensitive)
//   MENTIONS_NONE args: words; no agent message contains any of them
//   CALLED        args: [tool]; the tool was called and succeeded
//   NOT_CALLED    args: [tool]; the tool never succeeded
//   CALLED_BEFORE args: [a, b]; a succeeded, and before b's first success (if any)
//   END_IS        args: ["stop"|"transfer"|"out_of_scope"]; the episode ended so
typedef enum {
  TASK_RULE_MENTIONS_ANY = 0,
  TASK_RULE_MENTIONS_NONE,
  TASK_RULE_CALLED,
  TASK_RULE_NOT_CALLED,
  TASK_RULE_CALLED_BEFORE,
  TASK_RULE_END_IS,
  TASK_RULE_COUNT
} TaskRule;

// Limits of the format (checked by the validator).
#define TASK_MAX_STRING 4096      // bytes of any one string
#define TASK_MAX_ITEMS 64         // fields, gold actions, values, assertions, ...
#define TASK_MAX_TURNS 1000       // turn budget upper bound
#define TASK_MAX_LINE (1 << 20)   // bytes of one JSONL line

// A piece of information the customer holds. The simulator reveals fields in
// array order, one per reply, and only when the agent's message asks for it
// (the field's name, its built-in synonyms and `keywords` are matched).
typedef struct TaskField {
  char *name;       // e.g. "customer_id", "date_of_birth", "amount"
  char *value;      // what the customer says, verbatim
  char **keywords;  // extra words that ask for it (may be empty)
  int num_keywords;
} TaskField;

// One gold tool call. `relevant` names the arguments that the sequence check
// compares (the name always counts). `confirm`: the customer must agree
// before it (the oracle asks; the gold replay sets the confirmation hook).
typedef struct TaskAction {
  char *name;
  cJSON *arguments;  // a JSON object (owned)
  char **relevant;
  int num_relevant;
  int confirm;
} TaskAction;

// A value taken from a gold tool's output: the result of gold step `step`
// (0-based) at `path` (dot-separated keys and array indices,
// e.g. "accounts.0.balance"). Used for values the agent must communicate and
// for the value a confirmation must quote. step -1: no value.
typedef struct TaskValueRef {
  char *name;  // a label ("balance", "penalty") or what is confirmed
  int step;
  char *path;
} TaskValueRef;

typedef struct TaskAssertion {
  char *text;  // the natural-language assertion (for a model judge)
  TaskRule rule;
  char **args;
  int num_args;
} TaskAssertion;

typedef struct Task {
  char *id;
  char *family;
  TaskKind kind;
  TaskUseCase use_case;
  char *persona;  // who is calling (free text)
  TaskStyle style;
  char *reason;   // reason for the call, in the task's style (opening line)

  TaskField *fields;
  int num_fields;

  // Initial state: the image's seed, the episode date, fixture SQL run on the
  // copy (trusted: written by families, never by a model), the customer
  // already authenticated (NULL: the agent must call verify_customer), and
  // how charged writes check consent (0 argument, 1 conversation).
  uint64_t image_seed;
  char *today;          // "YYYY-MM-DD" or NULL (the image's date)
  char **fixture;
  int num_fixture;
  char *authenticated;  // customer id or NULL
  int confirm_mode;     // BankConfirmMode

  TaskAction *gold;
  int num_gold;
  int checks;  // TASK_CHECK_* mask, non-zero

  TaskValueRef *communicate;  // values the agent must say verbatim
  int num_communicate;
  TaskValueRef *confirms;     // what the customer agrees to when asked
  int num_confirms;           // 0: the customer declines every confirmation
  TaskAssertion *assertions;
  int num_assertions;

  int max_turns;         // agent turns (tool calls and messages together)
  TaskEnd expected_end;  // STOP, TRANSFER or OUT_OF_SCOPE

  // The named variant the task instantiates, "<prefix>/<family>" (a product
  // or channel prefix of its family's TaskFamily.variants); every generated
  // task has one. NULL: not recorded (task files written before variants).
  // Written to JSON only when set, so older task files still read.
  char *variant;
} Task;

// ---- names of enum values (JSON spelling) ---------------------------------
const char *task_kind_name(TaskKind kind);            // "happy", "seq", "edge", "tools"
const char *task_use_case_name(TaskUseCase use_case); // "accounts_kyc", ...
const char *task_style_name(TaskStyle style);         // "english", "hinglish", "fragmentary"
const char *task_end_name(TaskEnd end);               // "none", "stop", "transfer", "out_of_scope", "budget"
const char *task_rule_name(TaskRule rule);            // "mentions_any", ...
// Reverse lookups: return the value or -1.
int task_kind_from_name(const char *name);
int task_use_case_from_name(const char *name);
int task_style_from_name(const char *name);
int task_end_from_name(const char *name);
int task_rule_from_name(const char *name);

// ---- lifetime and builders (used by task families) ------------------------
// task_init zeroes the task and sets defaults: image_seed 1, checks ALL,
// max_turns 30, expected_end STOP, confirm_mode conversation.
void task_init(Task *task);
void task_free(Task *task);
// Replaces *slot with a malloc'd copy of value (NULL allowed). printf-style.
int task_set(char **slot, FimiError *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int task_add_field(Task *task, const char *name, const char *value, FimiError *err);
int task_add_field_keyword(Task *task, const char *field, const char *keyword, FimiError *err);
int task_add_fixture(Task *task, const char *sql, FimiError *err);
// Removes gold step `index`; value references to later steps shift down.
// Fails, changing nothing, when a value to communicate or confirm comes from it.
int task_remove_gold(Task *task, int index, FimiError *err);
// arguments_json: a JSON object as text, e.g. "{\"account_id\":\"SB1\"}".
// relevant_csv: comma-separated argument names ("" or NULL: name only).
// Returns the new step's index (>= 0), or -1.
int task_add_gold(Task *task, const char *name, const char *arguments_json, const char *relevant_csv, int confirm,
                  FimiError *err);
// Same, taking ownership of `arguments` (deleted on failure too).
int task_add_gold_json(Task *task, const char *name, cJSON *arguments, const char *relevant_csv, int confirm,
                       FimiError *err);
int task_add_communicate(Task *task, const char *name, int step, const char *path, FimiError *err);
int task_add_confirm(Task *task, const char *what, int step, const char *path, FimiError *err);
// args: NULL-terminated list of strings.
int task_add_assertion(Task *task, const char *text, TaskRule rule, const char *const *args, FimiError *err);

// ---- validation and JSON ---------------------------------------------------
// Structural checks (docs/tasks.md "Validation"): required strings, known
// tools, relevant arguments present, steps in range, limits. The message
// names the field ("gold[2].relevant[0]: ...").
int task_validate(const Task *task, FimiError *err);
// Parses one task object (strict: unknown fields are errors) and validates.
int task_from_json(const cJSON *json, Task *out, FimiError *err);
// One task as a compact JSON line without the newline (malloc'd).
char *task_to_json_line(const Task *task, FimiError *err);
cJSON *task_to_json(const Task *task, FimiError *err);
// Deep copy.
int task_copy(const Task *src, Task *dst, FimiError *err);

// A list of tasks read from a JSONL file (blank lines skipped).
typedef struct TaskList {
  Task *tasks;
  int count;
} TaskList;
// Errors name "path:line: field: ...".
int task_list_load(const char *path, TaskList *out, FimiError *err);
int task_list_parse(const char *text, size_t len, const char *name, TaskList *out, FimiError *err);
void task_list_free(TaskList *list);
const Task *task_list_find(const TaskList *list, const char *id);

// Resolves a dotted path ("a.0.b") in a JSON value; NULL when absent.
const cJSON *task_json_path(const cJSON *root, const char *path);
// The verbatim text of a scalar JSON value as the tool printed it: strings
// without quotes, numbers as cJSON prints them, true/false. Malloc'd or NULL.
char *task_json_scalar_text(const cJSON *value);

#endif
