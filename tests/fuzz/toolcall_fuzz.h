// tests/fuzz/toolcall_fuzz.h: the invariants both tool-call fuzz targets
// check (fuzz_toolcall.c: fimi's JSON syntax; fuzz_toolcall_gemma4.c:
// Gemma 4's native syntax), for one syntax given as its parser, renderer and
// tags. Defines FuzzCallSyntax and toolcall_fuzz_turn (and the check helpers).
#ifndef FIMI_TESTS_FUZZ_TOOLCALL_FUZZ_H
#define FIMI_TESTS_FUZZ_TOOLCALL_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/toolcall.h"

static void check(int cond, const char *what) {
  if (!cond) {
    fprintf(stderr, "invariant failed: %s\n", what);
    abort();
  }
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Independent UTF-8 check (decode, then reject overlongs and surrogates).
static int utf8_valid(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    unsigned c = u[i];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (k == 0 || i + k > n) return 0;
    unsigned cp = k == 1 ? c : c & (0x7F >> k);
    for (size_t j = 1; j < k; j++) {
      if ((u[i + j] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (u[i + j] & 0x3F);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += k;
  }
  return 1;
}

static int contains(const char *s, size_t n, const char *needle) {
  size_t m = strlen(needle);
  for (size_t i = 0; i + m <= n; i++)
    if (memcmp(s + i, needle, m) == 0) return 1;
  return 0;
}

typedef struct FuzzCallSyntax {
  ToolCallKind (*parse)(const char *text, size_t len, ToolCallParse *out);
  char *(*render_call)(const char *name, const cJSON *arguments, FimiError *err);
  void (*check_error_renders)(const ToolCallParse *p);  // the error as this syntax sends it back
  const char *open_tag, *close_tag;
} FuzzCallSyntax;

static void check_error(const FuzzCallSyntax *syntax, const ToolCallParse *p, size_t size) {
  check(p->error > TOOLCALL_OK && p->error < TOOLCALL_ERR_COUNT, "error code in range");
  check(p->arguments == NULL, "no arguments on error");
  size_t n = strnlen(p->message, sizeof p->message);
  check(n > 0 && n < sizeof p->message, "message non-empty and terminated");
  check(strncmp(p->message, "invalid tool call (", 19) == 0, "message prefix");
  check(utf8_valid(p->message, n), "message is valid UTF-8");
  check(p->error_offset <= size || p->error == TOOLCALL_ERR_TOO_LONG, "offset inside input");
  syntax->check_error_renders(p);
}

static void check_message(const FuzzCallSyntax *syntax, const ToolCallParse *p, const char *data, size_t size) {
  check(p->text >= data && p->text + p->text_len <= data + size, "message inside input");
  check(p->text_len > 0, "message non-empty");
  check(!is_space(p->text[0]) && !is_space(p->text[p->text_len - 1]), "message trimmed");
  check(!contains(p->text, p->text_len, syntax->open_tag), "message has no opening tag");
  check(!contains(p->text, p->text_len, syntax->close_tag), "message has no closing tag");
}

// Re-rendering the call after the same preface and parsing it again gives
// the same name, arguments and preface.
static void check_call(const FuzzCallSyntax *syntax, const ToolCallParse *p, const char *data, size_t size) {
  check(p->text >= data && p->text + p->text_len <= data + size, "preface inside input");
  check(toolcall_name_is_valid(p->name, strlen(p->name)), "valid name");
  check(cJSON_IsObject(p->arguments), "arguments object");
  FimiError err = {0};
  char *call = syntax->render_call(p->name, p->arguments, &err);
  if (!call) fprintf(stderr, "render: %s\n", err.message);
  check(call != NULL, "a parsed call renders");
  size_t call_len = strlen(call), n = p->text_len + 1 + call_len;
  char *turn = malloc(n + 1);
  check(turn != NULL, "malloc");
  memcpy(turn, p->text, p->text_len);
  turn[p->text_len] = '\n';
  memcpy(turn + p->text_len + 1, call, call_len + 1);
  ToolCallParse again;
  ToolCallKind kind = syntax->parse(turn, n, &again);
  if (kind != TOOLCALL_TOOL_CALL) fprintf(stderr, "re-parse: %s\n%s\n", again.message, turn);
  check(kind == TOOLCALL_TOOL_CALL, "re-rendered call parses");
  check(strcmp(again.name, p->name) == 0, "same name");
  check(cJSON_Compare(again.arguments, p->arguments, 1), "same arguments");
  check(again.text_len == p->text_len && memcmp(again.text, p->text, p->text_len) == 0, "same preface");
  toolcall_parse_free(&again);
  free(turn);
  free(call);
}

// One fuzz input: any bytes give a consistent MESSAGE, TOOL_CALL or ERROR.
static int toolcall_fuzz_turn(const FuzzCallSyntax *syntax, const uint8_t *data, size_t size) {
  ToolCallParse p;
  const char *text = (const char *)data;
  ToolCallKind kind = syntax->parse(text, size, &p);
  check(kind == p.kind, "returned kind");
  if (kind == TOOLCALL_ERROR) check_error(syntax, &p, size);
  else if (kind == TOOLCALL_MESSAGE) check_message(syntax, &p, text, size);
  else if (kind == TOOLCALL_TOOL_CALL) check_call(syntax, &p, text, size);
  else check(0, "kind in range");
  if (kind != TOOLCALL_ERROR) check(p.error == TOOLCALL_OK, "no error code");
  toolcall_parse_free(&p);
  return 0;
}

#endif
