// core/log.c: leveled logging to stderr (see log.h).
#define _POSIX_C_SOURCE 200809L  // flockfile
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static LogLevel current_level = LOG_INFO;

void log_set_level(LogLevel level) { current_level = level; }
LogLevel log_get_level(void) { return current_level; }

void log_message(LogLevel level, const char *fmt, ...) {
  if (level < current_level) return;
  static const char *names[] = {"debug", "info", "warning", "error"};
  // One line at a time: the MLflow tracker logs from its own thread.
  flockfile(stderr);
  fprintf(stderr, "fimi %s: ", names[level]);
  va_list args;
  va_start(args, fmt);
  vfprintf(stderr, fmt, args);
  va_end(args);
  fputc('\n', stderr);
  funlockfile(stderr);
}
