// core/text.h: a growing NUL-terminated text buffer, the one the chat
// renderer, the tool-call renderer, the oracle agent and the db check build
// their strings in. Defines TextBuf, text_append, text_append_str,
// text_printf and text_free.
#ifndef FIMI_CORE_TEXT_H
#define FIMI_CORE_TEXT_H

#include <stddef.h>

#include "core/error.h"

// {0} is an empty buffer; data is NULL until the first append, then always
// NUL-terminated. The caller owns data (text_free, or take it and free()).
typedef struct TextBuf {
  char *data;
  size_t len, cap;
} TextBuf;

// Each returns 0, or -1 with err set (err may be NULL) and the text unchanged.
int text_append(TextBuf *t, const char *s, size_t n, FimiError *err);
int text_append_str(TextBuf *t, const char *s, FimiError *err);
int text_printf(TextBuf *t, FimiError *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void text_free(TextBuf *t);

#endif
