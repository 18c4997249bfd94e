// env/tasks/family.h: task families (generators of Tasks) and their registry.
// Defines TaskGenContext (what a generator may read: the seeded image through
// a read-only connection, and a way to replay a gold chain to read its
// outputs), TaskFamily, the registry (env/tasks/registry.c lists the families
// defined in env/tasks/<use case>.c) and the generator helpers.
//
// A generator is a pure function of (context, seed): same seed, same task.
// It picks a real customer/account from the image so that every gold action
// succeeds, and must produce a task the oracle agent solves with reward 1.0
// (tests/test_env_episode.c checks every registered family).
#ifndef FIMI_ENV_TASKS_FAMILY_H
#define FIMI_ENV_TASKS_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "core/rng.h"
#include "env/bank/db.h"
#include "env/tasks/task.h"

typedef struct TaskGenContext {
  uint64_t image_seed;       // the seed tasks record in initial state
  const BankImage *image;    // the seeded image (owned by the context)
  const KnowledgeBase *kb;   // the built-in knowledge base
  sqlite3 *db;               // read-only view of the image: SELECT freely, never write
  BankPool *pool;            // for task_gen_replay (not thread-safe: one context per thread)
} TaskGenContext;

// The generation round of a family (the FiMI paper, section 5.1). SHALLOW:
// the 50 first-round families, gold chains of at most 6 actions (the
// held-out set is drawn from them); DEEP: the 50 second-round families,
// chains of up to 8 actions (the deep slice is the whole corpus). Registry
// order is round order. Actions count every gold step, verify_customer too.
typedef enum { TASK_SLICE_SHALLOW = 0, TASK_SLICE_DEEP, TASK_SLICE_COUNT } TaskSlice;
#define TASK_SLICE_SHALLOW_MAX_GOLD 6
#define TASK_SLICE_DEEP_MAX_GOLD 8

// Family flags. Graded and communication families are in the corpus but not
// in the training sample (task_family_in_training_sample).
#define TASK_FAMILY_GRADED 1         // one request stepped from an easy version to harder ones
#define TASK_FAMILY_COMMUNICATION 2  // checks that a specific tool value reaches the customer in words
// Channel variants: a task comes from a call (the agent verifies the customer
// first, as the family wrote it) or, chosen by the seed, from the customer's
// logged-in mobile app (initial.authenticated, no verify_customer step; the
// variant's prefix gains "app_"). For families whose gold chain starts with
// verify_customer and whose values and assertions do not name that step.
#define TASK_FAMILY_CHANNELS 4
#define TASK_APP_PREFIX "app_"

typedef struct TaskFamily {
  const char *name;  // [a-z0-9_]+, unique across the registry
  TaskUseCase use_case;
  TaskKind kind;
  const char *summary;  // one line for `fimi env sample --list` and docs
  // Fills *out (already task_init'ed by the caller, with id/family/kind/
  // use_case preset; the generator may leave them). Returns 0 or -1.
  int (*generate)(const TaskGenContext *ctx, uint64_t seed, Task *out, FimiError *err);
  TaskSlice slice;  // which round: the shallow or the deep slice
  int flags;        // TASK_FAMILY_GRADED | TASK_FAMILY_COMMUNICATION | TASK_FAMILY_CHANNELS
  // The family's named variants: its product and channel prefixes,
  // comma-separated ("savings,current"); variant i is named "<prefix>/<name>"
  // (task_family_variant), and with TASK_FAMILY_CHANNELS each has an
  // "app_<prefix>/<name>" twin. A task names the one it instantiates in
  // Task.variant: task_generate records a one-product family's, a generator
  // with several products records the one it picked (fam_variant).
  const char *variants;
} TaskFamily;

// ---- registry (env/tasks/registry.c) ----------------------------------------
int task_family_count(void);
const TaskFamily *task_family_at(int index);
const TaskFamily *task_family_find(const char *name);  // NULL when unknown
// Named variants of a family: how many, and the name of variant `index`
// ("<prefix>/<family>"; -1 when out of range or too long for out).
int task_family_variant_count(const TaskFamily *family);
int task_family_variant(const TaskFamily *family, int index, char *out, size_t size);
// 1 unless the family is graded or a communication family.
int task_family_in_training_sample(const TaskFamily *family);

// Builds the image of image_seed and the read-only view. Free with
// task_gen_context_free.
int task_gen_context_init(TaskGenContext *ctx, uint64_t image_seed, FimiError *err);
void task_gen_context_free(TaskGenContext *ctx);

// Generates one task of a family: task_init, presets, generate, then sets
// id "<family>-<seed>" when the generator left it empty, checks the task
// (task_validate) and replays its gold chain (task_gen_replay) so a broken
// generator is caught here, not in an episode.
int task_generate(const TaskGenContext *ctx, const TaskFamily *family, uint64_t seed, Task *out, FimiError *err);

// ---- helpers for generators ------------------------------------------------
#define TASK_GEN_COL_MAX 128

// Runs a SELECT on the read-only view and picks one row uniformly with rng
// (reservoir sampling: deterministic for a given rng state). Copies the first
// ncols columns as text into cols (NULL -> ""). Fails when no row matches
// (the message names the SQL). `binds`: NULL-terminated text parameters.
int task_gen_pick(const TaskGenContext *ctx, Rng *rng, const char *sql, const char *const *binds, int ncols,
                  char cols[][TASK_GEN_COL_MAX], FimiError *err);
// Same, but the first row (deterministic order from ORDER BY).
int task_gen_first(const TaskGenContext *ctx, const char *sql, const char *const *binds, int ncols,
                   char cols[][TASK_GEN_COL_MAX], FimiError *err);

// Replays the task's gold chain so far on a fresh copy (fixture, today,
// authentication and confirmations applied) and returns a JSON array with
// one parsed result object per step (caller deletes). Fails, naming the
// step and the tool's error, when a gold step does not succeed. Generators
// use it to read ids/amounts that later steps or values need.
int task_gen_replay(const TaskGenContext *ctx, const Task *task, cJSON **results, FimiError *err);

// Seeded demo credentials of the customer (id, dob, mobile) as fields of
// the task in the usual order, plus the verify_customer gold step.
// Returns the step index or -1.
int task_gen_add_verify(const TaskGenContext *ctx, Task *task, const char *customer_id, FimiError *err);

// Uniform integer in [lo, hi].
int64_t task_gen_range(Rng *rng, int64_t lo, int64_t hi);

#endif
