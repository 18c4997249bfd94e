// env/tasks/corpus.h: the task corpus and the sets drawn from it (the FiMI
// paper, section 5.1; docs/corpus.md). Defines CorpusConfig (sizes, seeds,
// the use-case shares the corpus is generated to), the gates a task passes
// before it enters a split (CorpusGate and its names and thresholds), the
// built corpus in memory (Corpus, CorpusTask with its split and family
// statistics), corpus_build (generate every registered family on the big
// bank, gate, split), corpus_write (one JSONL file per split plus
// manifest.json) and the manifest reader (untrusted input: every field is
// validated and named in errors).
//
// Determinism: the same config gives the same tasks, splits and bytes; the
// manifest records no wall-clock time.
#ifndef FIMI_ENV_TASKS_CORPUS_H
#define FIMI_ENV_TASKS_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "env/bank/db.h"
#include "env/tasks/task.h"

#define CORPUS_FORMAT "fimi-task-corpus-1"
#define CORPUS_CUSTOMERS 2000  // the corpus bank: image seed bank_image_seed(1, 2000) (docs/corpus.md)
#define CORPUS_MAX_FAMILIES 256
#define CORPUS_MAX_TASKS 200000
#define CORPUS_NAME_MAX 64

// The splits. CORPUS: in the corpus only (not drawn, or not eligible).
typedef enum {
  CORPUS_SPLIT_CORPUS = 0,
  CORPUS_SPLIT_HELDOUT,
  CORPUS_SPLIT_VALIDATION,
  CORPUS_SPLIT_TRAIN,
  CORPUS_SPLIT_COUNT
} CorpusSplit;
const char *corpus_split_name(CorpusSplit split);      // "corpus", "heldout", "validation", "train"
const char *corpus_split_file(CorpusSplit split);      // "corpus.jsonl", ...

// Every gate of docs/corpus.md, in report order. The first two and the last
// are the paper's own gates; the thirteen between them are the corpus gates.
// Task gates reject a task from the corpus (the generator then draws
// another); selection gates reject a candidate from a split; checks test a
// whole split and fail the build when violated.
typedef enum {
  CORPUS_GATE_REPLAY = 0,       // task: the gold chain replays end to end (generation included)
  CORPUS_GATE_RELEVANT,         // selection (training sample): every gold action carries reward-relevant arguments
  CORPUS_GATE_DISTINCT,         // task: no other corpus task has the same content
  CORPUS_GATE_ROUNDTRIP,        // task: the JSON line reads back through the strict reader unchanged
  CORPUS_GATE_ORACLE,           // task: the oracle scores 1.0 (strict 1.0) with the expected end
  CORPUS_GATE_NOT_TRIVIAL,      // task: the do-nothing agent scores below 1.0
  CORPUS_GATE_DEPTH,            // task: gold chain at most 8 actions (6 in the shallow slice)
  CORPUS_GATE_ORDER_SPREAD,     // task: seq tasks call two different tools (order can be wrong); check: no chain length over 50% of the sample
  CORPUS_GATE_OPENING,          // selection: an opening line at most 3 times per split
  CORPUS_GATE_LEAKAGE,          // selection: no train/validation task shares a held-out task's instance
  CORPUS_GATE_CUSTOMER_SPREAD,  // selection: a customer in at most max(8, 3x the split's mean) tasks per split
  CORPUS_GATE_FAMILY_BALANCE,   // selection: a family holds at most 3% of the training sample
  CORPUS_GATE_FAMILY_COVERAGE,  // check: every eligible family is in the sample; every held-out family has tasks
  CORPUS_GATE_USE_CASE_SHARES,  // check: corpus use-case shares within 1.5 points of the target
  CORPUS_GATE_DISJOINT,         // check: no task id in two splits
  CORPUS_GATE_STRATIFIED,       // check: sample kind mix within 2 points of the held-out mix
  CORPUS_GATE_COUNT
} CorpusGate;
const char *corpus_gate_name(CorpusGate gate);
const char *corpus_gate_rule(CorpusGate gate);  // one line with the threshold

#define CORPUS_MAX_CHAIN 8
#define CORPUS_SHALLOW_CHAIN 6
#define CORPUS_OPENING_MAX_REPEATS 3
#define CORPUS_CUSTOMER_MAX_TASKS 8  // floor of the customer spread cap
#define CORPUS_FAMILY_MAX_SHARE 0.03
#define CORPUS_ORDER_MAX_SHARE 0.50
#define CORPUS_USE_CASE_TOLERANCE 0.015
#define CORPUS_KIND_TOLERANCE 0.02
// A family counts as exhausted after this many draws in a row that gave no
// new task (a duplicate or a rejection).
#define CORPUS_EXHAUSTED_STREAK 48

typedef struct CorpusConfig {
  uint64_t seed;        // task seeds of every family
  uint64_t image_seed;  // the bank every task runs on (population included)
  int total;            // corpus size (48,245 in the paper)
  int heldout;          // 1,000
  int validation;       // 100
  int train;            // 10,000
  double use_case_share[TASK_USE_COUNT];  // target shares of the corpus (the paper's)
  int progress;         // 1: a progress line on stderr while building
} CorpusConfig;
// The paper's sizes and shares on the corpus bank (seed 1).
void corpus_config_default(CorpusConfig *config);

typedef struct CorpusTask {
  Task task;
  int family;                      // registry index
  uint64_t content;                // hash of the JSON line without the id
  char customer[BANK_ID_MAX];      // "" when the task has no customer
  uint64_t gold_chain;             // hash of the gold actions (names and arguments): a scenario
  int relevant_ok;                 // passes the relevant_args gate (training sample only)
  CorpusSplit split;
} CorpusTask;

typedef struct CorpusFamily {
  char name[CORPUS_NAME_MAX];
  TaskUseCase use_case;
  TaskKind kind;
  int shallow;           // the family's slice is shallow (TaskFamily.slice): held-out may draw from it
  int in_sample;         // not graded or communication (task_family_in_training_sample)
  int tasks;             // in the corpus
  int draws;             // seeds tried
  int exhausted;         // stopped before its quota (no new tasks)
  int split_tasks[CORPUS_SPLIT_COUNT];
  int gate_rejected[CORPUS_GATE_COUNT];
} CorpusFamily;

typedef struct Corpus {
  CorpusConfig config;
  CorpusTask *tasks;
  int count;
  CorpusFamily families[CORPUS_MAX_FAMILIES];
  int num_families;
  int gate_rejected[CORPUS_GATE_COUNT];
  int gate_failed[CORPUS_GATE_COUNT];  // checks: 1 when violated
  char gate_detail[CORPUS_GATE_COUNT][160];  // the measured value behind a check
  int64_t image_bytes;
  int image_customers;
} Corpus;

// Generates the corpus from every registered family (task_family_count/at)
// on config->image_seed, gates every task, draws the held-out, validation
// and training splits. Fails when a check gate is violated (the corpus is
// still filled, for the report).
int corpus_build(const CorpusConfig *config, Corpus *out, FimiError *err);
void corpus_free(Corpus *corpus);

// The instance a task belongs to for disjointness: its family and customer
// ("family|customer"), or for tasks without one its family and gold chain
// ("family|gold:HASH": the same scenario worded otherwise is the same
// instance).
void corpus_instance_key(const CorpusTask *t, const char *family, char *out, size_t size);
// The customer a task is about: initial.authenticated, the customer_id
// field, or verify_customer's argument ("" when none).
void corpus_task_customer(const Task *t, char out[BANK_ID_MAX]);
// FNV-1a 64 of bytes (the manifest's file hashes; docs/corpus.md).
uint64_t corpus_fnv1a64(const void *data, size_t size);

// Writes DIR/corpus.jsonl (every task), heldout.jsonl, validation.jsonl,
// train.jsonl and manifest.json (counts, seeds, gates, families, every
// file's size, task count and FNV-1a 64). DIR is created when missing.
int corpus_write(const Corpus *corpus, const char *dir, FimiError *err);

// ---- manifest (untrusted: read back by `fimi env corpus report`) ----------
typedef struct CorpusManifestFile {
  char name[CORPUS_NAME_MAX];
  int64_t bytes;
  int tasks;
  uint64_t fnv1a64;
} CorpusManifestFile;

typedef struct CorpusManifestGate {
  char name[CORPUS_NAME_MAX];
  int rejected;
  int failed;
  char detail[160];
} CorpusManifestGate;

typedef struct CorpusManifest {
  uint64_t seed, image_seed;
  int customers;
  int64_t image_bytes;
  int total_target;
  CorpusManifestFile files[CORPUS_SPLIT_COUNT];
  CorpusManifestGate gates[CORPUS_GATE_COUNT];
  CorpusFamily families[CORPUS_MAX_FAMILIES];
  int num_families;
} CorpusManifest;

// Parses manifest.json text; errors name `what: field`.
int corpus_manifest_parse(const char *text, size_t len, const char *what, CorpusManifest *out, FimiError *err);
// Reads DIR/manifest.json and checks every split file's size and hash.
int corpus_manifest_load(const char *dir, CorpusManifest *out, FimiError *err);

#endif
