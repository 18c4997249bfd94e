// eval/report_metrics.h: a training run's metrics.jsonl as columns, for
// `fimi report`. Defines MetricsTable (the steps and the requested fields,
// NAN where a line lacks a field or logs it as null), metrics_table_load,
// metrics_column, metrics_has, metrics_moving_mean and metrics_best_step
// (the step RUN_DIR/best links to).
#ifndef FIMI_EVAL_REPORT_METRICS_H
#define FIMI_EVAL_REPORT_METRICS_H

#include <stdint.h>

#include "core/error.h"

#define METRICS_MAX_FIELDS 32

typedef struct MetricsTable {
  int rows;                                  // one per line (step)
  int64_t *steps;                            // [rows], strictly increasing
  int fields;
  const char *names[METRICS_MAX_FIELDS];     // the requested field names (caller's strings)
  double *values[METRICS_MAX_FIELDS];        // [fields][rows]; NAN = absent or null
} MetricsTable;

// Reads path (one JSON object per line, blank lines skipped). Every line needs
// a numeric "step", larger than the line before's; each requested field must
// be a number, null or absent. A bad line fails naming path:LINE.
int metrics_table_load(MetricsTable *t, const char *path, const char *const *names, int count, FimiError *err);
void metrics_table_free(MetricsTable *t);

// The column of a requested field, or NULL when it was not requested.
const double *metrics_column(const MetricsTable *t, const char *name);
// 1 when some line has a finite value of the field.
int metrics_has(const MetricsTable *t, const char *name);

// out[i] = mean of the finite values among in[i-window+1 .. i] (a trailing
// window, shorter at the start); NAN when there are none.
void metrics_moving_mean(const double *in, int n, int window, double *out);

// The step of the checkpoint RUN_DIR/best links to (step_NNNNNN), or -1 when
// there is no such link.
int64_t metrics_best_step(const char *run_dir);

#endif
