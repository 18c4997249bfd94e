// core/progress.c: console progress line (see progress.h).
#include "core/progress.h"

#include <time.h>
#include <unistd.h>

double monotonic_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void format_duration(double seconds, char *out, int out_size) {
  if (seconds < 0 || seconds != seconds) seconds = 0;
  long s = (long)seconds;
  if (s >= 3600)
    snprintf(out, out_size, "%ldh%02ldm%02lds", s / 3600, (s / 60) % 60, s % 60);
  else if (s >= 60)
    snprintf(out, out_size, "%ldm%02lds", s / 60, s % 60);
  else
    snprintf(out, out_size, "%.1fs", seconds);
}

void progress_start(Progress *p, const char *label, int64_t total, FILE *stream) {
  p->label = label;
  p->total = total;
  p->stream = stream;
  p->start_seconds = monotonic_seconds();
  p->last_print_seconds = 0;
  p->is_tty = isatty(fileno(stream));
}

void progress_update(Progress *p, int64_t done, double units_done, const char *unit_name, const char *extra) {
  double now = monotonic_seconds();
  // On a terminal redraw at most 10 times a second; in logs print each call.
  if (p->is_tty && done < p->total && now - p->last_print_seconds < 0.1) return;
  p->last_print_seconds = now;
  double elapsed = now - p->start_seconds;
  double rate = elapsed > 0 ? units_done / elapsed : 0;
  double eta = (done > 0 && p->total > done) ? elapsed * (double)(p->total - done) / (double)done : 0;
  char eta_text[32];
  format_duration(eta, eta_text, sizeof eta_text);
  fprintf(p->stream, "%s%s %lld/%lld | %.1f %s/s | ETA %s%s%s%s", p->is_tty ? "\r" : "", p->label, (long long)done,
          (long long)p->total, rate, unit_name ? unit_name : "it", eta_text, extra ? " | " : "", extra ? extra : "",
          p->is_tty ? "\033[K" : "\n");
  fflush(p->stream);
}

void progress_finish(Progress *p) {
  if (p->is_tty) fputc('\n', p->stream);
  fflush(p->stream);
}
