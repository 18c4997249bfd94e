// eval/report.h: `fimi report` (docs/report.md). Defines ReportOptions,
// report_run (the panels of a training run's metrics.jsonl: GRPO, DPO or SFT,
// told apart by the fields present) and report_results (bar charts of
// `fimi eval` result files). Both print the numbers of every panel to
// o->text, write gnuplot data files and scripts under OUT/gnuplot/, and draw
// OUT/*.png when o->gnuplot names a gnuplot.
#ifndef FIMI_EVAL_REPORT_H
#define FIMI_EVAL_REPORT_H

#include <stdio.h>

#include "core/error.h"

#define REPORT_DEFAULT_WINDOW 10

typedef struct ReportOptions {
  const char *out_dir;  // created if missing (its parent must exist)
  int window;           // steps in the moving-window mean, >= 1
  const char *gnuplot;  // path of gnuplot; NULL: numbers and scripts only, no PNG
  FILE *text;           // where the number tables go
} ReportOptions;

// RUN_DIR/metrics.jsonl (and the RUN_DIR/best link) into panels.
int report_run(const char *run_dir, const ReportOptions *o, FimiError *err);
// Result files of `fimi eval`: mean reward and strict reward, overall and by
// task kind, one bar group per file.
int report_results(const char *const *paths, int count, const ReportOptions *o, FimiError *err);

#endif
