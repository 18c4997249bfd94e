// eval/bench_score.h: the judged bench's scores (docs/evaluation-bench.md,
// FiMI paper section 4.4.3). Defines BenchAttempt (one played episode of a
// case with its gate verdicts), BenchRun (every attempt of a run of the
// harness, judged), BenchMetrics (Pass^n, Pass@n, Mean and Avg@n over a set
// of cases, with the attempts each gate failed), and the run's JSON (every
// attempt's trajectory and verdicts) and Markdown summary.
//
// With case c attempted n_c times and passing p_c of them, over cases C:
//   Pass^n = |{c : p_c = n_c}| / |C|     (all attempts pass: reliability)
//   Pass@n = |{c : p_c > 0}| / |C|       (some attempt passes: achievability)
//   Mean   = sum_c p_c / sum_c n_c       (attempts weighted equally)
//   Avg@n  = sum_c (p_c / n_c) / |C|     (cases weighted equally)
#ifndef FIMI_EVAL_BENCH_SCORE_H
#define FIMI_EVAL_BENCH_SCORE_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "eval/bench_case.h"
#include "eval/bench_gates.h"
#include "eval/results.h"

typedef struct BenchAttempt {
  int case_index;               // into the set
  const EvalEpisode *episode;   // borrowed from the results
  int episode_failed;           // the environment failed it: counts as a failed attempt, no gate
  BenchAttemptVerdict verdict;
} BenchAttempt;

typedef struct BenchRun {
  const BenchSet *set;          // borrowed
  const EvalResults *results;   // borrowed
  const char *judge;            // the judge's name
  const cJSON *judge_agreement; // NULL, or a model judge's agreement with the rubric judge (borrowed)
  char cases_file[1024], results_file[1024];
  BenchAttempt *attempts;       // in the results' episode order
  int count;
} BenchRun;

// Judges every episode of `results` against the case with its task id.
// Every case needs at least one episode and every episode a case.
int bench_score(const BenchSet *set, const EvalResults *results, const BenchJudge *judge, BenchRun *out,
                FimiError *err);
void bench_run_free(BenchRun *r);

typedef struct BenchMetrics {
  int cases, attempts, passes;
  double pass_hat_n, pass_at_n, mean, avg_at_n;
  int failed[BENCH_GATE_COUNT];  // attempts whose first failing gate was this one
  int episode_failures;          // attempts the environment failed
} BenchMetrics;

// Which cases a slice holds (NULL: all).
typedef int (*BenchCaseFilter)(const BenchCase *c, const void *arg);
int bench_metrics(const BenchRun *r, BenchCaseFilter keep, const void *arg, BenchMetrics *out, FimiError *err);

// {"format": "fimi-eval-bench", "version": 1, run settings, "summary":
// {overall, categories, axes, checks}, "cases": [{..., "attempts": [{gates,
// trajectory, ...}]}]}.
cJSON *bench_run_json(const BenchRun *r, FimiError *err);
int bench_run_write(const BenchRun *r, const char *path, FimiError *err);
// The summary as Markdown: overall, per category, per axis, failed checks.
int bench_run_markdown(const BenchRun *r, FILE *out, FimiError *err);

#endif
