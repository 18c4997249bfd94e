// core/text.c: the growing text buffer: see text.h.
#include "core/text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Room for n more bytes and the NUL.
static int text_reserve(TextBuf *t, size_t n, FimiError *err) {
  if (n > SIZE_MAX / 2 - t->len) return fimi_fail(err, "text too long");
  if (t->len + n + 1 <= t->cap) return 0;
  size_t cap = t->cap ? t->cap : 256;
  while (cap < t->len + n + 1) cap *= 2;
  char *data = realloc(t->data, cap);
  if (!data) return fimi_fail(err, "out of memory (%zu bytes of text)", cap);
  t->data = data;
  t->cap = cap;
  return 0;
}

int text_append(TextBuf *t, const char *s, size_t n, FimiError *err) {
  if (text_reserve(t, n, err) != 0) return -1;
  if (n) memcpy(t->data + t->len, s, n);
  t->len += n;
  t->data[t->len] = '\0';
  return 0;
}

int text_append_str(TextBuf *t, const char *s, FimiError *err) { return text_append(t, s, strlen(s), err); }

int text_printf(TextBuf *t, FimiError *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return fimi_fail(err, "text: bad format \"%s\"", fmt);
  if (text_reserve(t, (size_t)n, err) != 0) return -1;
  va_start(ap, fmt);
  vsnprintf(t->data + t->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
  return 0;
}

void text_free(TextBuf *t) {
  free(t->data);
  t->data = NULL;
  t->len = t->cap = 0;
}
