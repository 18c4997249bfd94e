// core/progress.h: a live console progress line for long work
// (step/total, rate, ETA, plus caller-supplied fields such as loss).
// Defines Progress, progress_start, progress_update, progress_finish.
// Rates use a monotonic clock; this is display only, never fed back into
// computation, so determinism is unaffected.
#ifndef FIMI_CORE_PROGRESS_H
#define FIMI_CORE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct Progress {
  const char *label;
  int64_t total;
  double start_seconds;
  double last_print_seconds;
  FILE *stream;
  int is_tty;
} Progress;

double monotonic_seconds(void);
void progress_start(Progress *p, const char *label, int64_t total, FILE *stream);
// `units_per_step` (e.g. tokens) turns into a rate; extra is appended as is.
void progress_update(Progress *p, int64_t done, double units_done, const char *unit_name, const char *extra);
void progress_finish(Progress *p);
// Formats seconds as "1h02m03s" / "2m03s" / "3.4s" into out.
void format_duration(double seconds, char *out, int out_size);

#endif
