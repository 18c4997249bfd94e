// eval/summary.h: the tables of an evaluation, computed from its episodes
// (docs/evaluation.md lists every field). Defines EvalSlice (the means over
// a set of episodes), EvalTaskTally (a task's trials), eval_summary_json
// (overall, per kind, use case, family and depth, the learnable band,
// pass^k, dialog behaviour and compute per dialog), the Markdown summary,
// the paired comparison of two runs (sign test) and the capability ladder.
#ifndef FIMI_EVAL_SUMMARY_H
#define FIMI_EVAL_SUMMARY_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "eval/results.h"

// Tasks with at most this many gold actions form the shallow slice.
#define EVAL_SHALLOW_MAX_GOLD 6

// Means over a slice. A check's mean counts only the episodes whose task
// declares that check (seq_n .. judge_n of them).
typedef struct EvalSlice {
  int episodes;
  double reward, strict, seq_frac, success;  // success: share with reward >= the run's threshold
  double seq, db, comm, judge;
  int seq_n, db_n, comm_n, judge_n;
} EvalSlice;

// Filter: which episodes a slice holds (NULL: all).
typedef int (*EvalFilter)(const EvalEpisode *e, const void *arg);
void eval_slice_compute(const EvalResults *r, EvalFilter keep, const void *arg, EvalSlice *out);

// One task's trials: episodes, successes, reward mean (in first-seen order
// of the episodes). *tallies is malloc'd.
typedef struct EvalTaskTally {
  const char *task_id;  // borrowed from the episodes
  TaskKind kind;
  int first;            // index of its first episode
  int trials, successes;
  double reward_mean;
} EvalTaskTally;
int eval_task_tallies(const EvalResults *r, EvalTaskTally **tallies, int *count, FimiError *err);

cJSON *eval_summary_json(const EvalResults *r, FimiError *err);
// The summary as Markdown (results.md beside results.json).
int eval_summary_markdown(const EvalResults *r, FILE *out, FimiError *err);

// Per-task paired comparison of b against a (same task ids required; trial
// rewards averaged per task): Markdown table to out, overall and per kind,
// with the exact sign test's p-value; *json (may be NULL) gets the numbers.
int eval_compare(const EvalResults *a, const EvalResults *b, FILE *out, cJSON **json, FimiError *err);

// The capability ladder: one row per run, mean reward overall and per kind,
// the best of each column in bold.
int eval_ladder(const EvalResults *runs, int n, FILE *out, FimiError *err);

#endif
