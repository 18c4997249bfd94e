// core/error.c: FimiError helpers (see error.h).
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fimi_fail(FimiError *err, const char *fmt, ...) {
  if (!err) return -1;
  va_list args;
  va_start(args, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, args);
  va_end(args);
  err->failed = 1;
  return -1;
}

int fimi_fail_wrap(FimiError *err, const char *fmt, ...) {
  if (!err) return -1;
  char prefix[FIMI_ERROR_MESSAGE_MAX];
  va_list args;
  va_start(args, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, args);
  va_end(args);
  char inner[FIMI_ERROR_MESSAGE_MAX];
  memcpy(inner, err->message, sizeof inner);
  inner[sizeof inner - 1] = '\0';
  // Keep the prefix whole and truncate the inner message if both do not fit.
  size_t used = strlen(prefix);
  memcpy(err->message, prefix, used + 1);
  if (err->failed && used + 2 < sizeof err->message) {
    memcpy(err->message + used, ": ", 3);
    used += 2;
    size_t room = sizeof err->message - used - 1, n = strlen(inner);
    if (n > room) n = room;
    memcpy(err->message + used, inner, n);
    err->message[used + n] = '\0';
  }
  err->failed = 1;
  return -1;
}

void fimi_error_clear(FimiError *err) {
  if (!err) return;
  err->failed = 0;
  err->message[0] = '\0';
}

void *fimi_malloc(size_t bytes, FimiError *err) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) fimi_fail(err, "out of memory allocating %zu bytes", bytes);
  return p;
}

void *fimi_calloc(size_t count, size_t size, FimiError *err) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) fimi_fail(err, "out of memory allocating %zu x %zu bytes", count, size);
  return p;
}
