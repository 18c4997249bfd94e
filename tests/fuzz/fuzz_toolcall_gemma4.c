// tests/fuzz/fuzz_toolcall_gemma4.c: libFuzzer target for the parser of
// Gemma 4's native call syntax (toolcall_parse_gemma4 in data/toolcall.c).
// Any bytes must give a MESSAGE, a TOOL_CALL or a typed ERROR, never a
// crash, and the result must be consistent:
// - ERROR: a known code, a non-empty message of bounded length with the
//   usual prefix, an offset inside the input; the message renders as a
//   Gemma 4 tool error.
// - MESSAGE: a trimmed, non-empty slice of the input without a call tag.
// - TOOL_CALL: a valid name and an object; re-rendering the call after the
//   same preface and parsing it again gives the same name and arguments.
#define _POSIX_C_SOURCE 200809L  // strnlen
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

static int contains(const char *s, size_t n, const char *needle) {
  size_t m = strlen(needle);
  for (size_t i = 0; i + m <= n; i++)
    if (memcmp(s + i, needle, m) == 0) return 1;
  return 0;
}

static void check_error(const ToolCallParse *p, size_t size) {
  check(p->error > TOOLCALL_OK && p->error < TOOLCALL_ERR_COUNT, "error code in range");
  check(p->arguments == NULL, "no arguments on error");
  size_t n = strnlen(p->message, sizeof p->message);
  check(n > 0 && n < sizeof p->message, "message non-empty and terminated");
  check(strncmp(p->message, "invalid tool call (", 19) == 0, "message prefix");
  check(p->error_offset <= size || p->error == TOOLCALL_ERR_TOO_LONG, "offset inside input");
  FimiError err = {0};
  char *text = toolcall_render_error_gemma4(p->name[0] ? p->name : NULL, p->message, &err);
  check(text != NULL, "render error");
  free(text);
}

static void check_message(const ToolCallParse *p, const char *data, size_t size) {
  check(p->text >= data && p->text + p->text_len <= data + size, "message inside input");
  check(p->text_len > 0, "message non-empty");
  check(!is_space(p->text[0]) && !is_space(p->text[p->text_len - 1]), "message trimmed");
  check(!contains(p->text, p->text_len, "<|tool_call>"), "message has no opening tag");
  check(!contains(p->text, p->text_len, "<tool_call|>"), "message has no closing tag");
}

static void check_call(const ToolCallParse *p, const char *data, size_t size) {
  check(p->text >= data && p->text + p->text_len <= data + size, "preface inside input");
  check(toolcall_name_is_valid(p->name, strlen(p->name)), "valid name");
  check(cJSON_IsObject(p->arguments), "arguments object");
  FimiError err = {0};
  char *call = toolcall_render_call_gemma4(p->name, p->arguments, &err);
  if (!call) fprintf(stderr, "render: %s\n", err.message);
  check(call != NULL, "a parsed call renders");
  size_t call_len = strlen(call), n = p->text_len + 1 + call_len;
  char *turn = malloc(n + 1);
  check(turn != NULL, "malloc");
  memcpy(turn, p->text, p->text_len);
  turn[p->text_len] = '\n';
  memcpy(turn + p->text_len + 1, call, call_len + 1);
  ToolCallParse again;
  ToolCallKind kind = toolcall_parse_gemma4(turn, n, &again);
  if (kind != TOOLCALL_TOOL_CALL) fprintf(stderr, "re-parse: %s\n%s\n", again.message, turn);
  check(kind == TOOLCALL_TOOL_CALL, "re-rendered call parses");
  check(strcmp(again.name, p->name) == 0, "same name");
  check(cJSON_Compare(again.arguments, p->arguments, 1), "same arguments");
  check(again.text_len == p->text_len && memcmp(again.text, p->text, p->text_len) == 0, "same preface");
  toolcall_parse_free(&again);
  free(turn);
  free(call);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ToolCallParse p;
  const char *text = (const char *)data;
  ToolCallKind kind = toolcall_parse_gemma4(text, size, &p);
  check(kind == p.kind, "returned kind");
  if (kind == TOOLCALL_ERROR) check_error(&p, size);
  else if (kind == TOOLCALL_MESSAGE) check_message(&p, text, size);
  else if (kind == TOOLCALL_TOOL_CALL) check_call(&p, text, size);
  else check(0, "kind in range");
  if (kind != TOOLCALL_ERROR) check(p.error == TOOLCALL_OK, "no error code");
  toolcall_parse_free(&p);
  return 0;
}
