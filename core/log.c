// core/log.c: leveled logging to stderr (see log.h).
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static LogLevel current_level = LOG_INFO;

void log_set_level(LogLevel level) { current_level = level; }
LogLevel log_get_level(void) { return current_level; }

void log_message(LogLevel level, const char *fmt, ...) {
  if (level < current_level) return;
  static const char *names[] = {"debug", "info", "warning", "error"};
  fprintf(stderr, "fimi %s: ", names[level]);
  va_list args;
  va_start(args, fmt);
  vfprintf(stderr, fmt, args);
  va_end(args);
  fputc('\n', stderr);
}
