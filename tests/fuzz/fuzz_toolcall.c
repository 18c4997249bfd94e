// tests/fuzz/fuzz_toolcall.c: libFuzzer target for the tool-call parser
// (data/toolcall.c). Any bytes must give a MESSAGE, a TOOL_CALL or a typed
// ERROR, never a crash, and the result must be consistent:
// - ERROR: a known code, a non-empty valid-UTF-8 message of bounded length,
//   an offset inside the input; the message renders as a JSON tool error.
// - MESSAGE: a trimmed, non-empty slice of the input without any tag.
// - TOOL_CALL: a valid name and an object; re-rendering the call (after the
//   same preface) and parsing it again gives the same name and arguments.
#define _POSIX_C_SOURCE 200809L  // strnlen
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
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

static void check_error(const ToolCallParse *p, size_t size) {
  check(p->error > TOOLCALL_OK && p->error < TOOLCALL_ERR_COUNT, "error code in range");
  check(p->arguments == NULL, "no arguments on error");
  size_t n = strnlen(p->message, sizeof p->message);
  check(n > 0 && n < sizeof p->message, "message non-empty and terminated");
  check(strncmp(p->message, "invalid tool call (", 19) == 0, "message prefix");
  check(utf8_valid(p->message, n), "message is valid UTF-8");
  check(p->error_offset <= size || p->error == TOOLCALL_ERR_TOO_LONG, "offset inside input");
  FimiError err = {0};
  char *json = toolcall_render_error(p->name[0] ? p->name : NULL, p->message, &err);
  check(json != NULL, "render error");
  cJSON *back = json_parse_text(json, strlen(json), "error", &err);
  check(back != NULL, "rendered error parses");
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(back, "error");
  check(cJSON_IsString(msg) && strcmp(msg->valuestring, p->message) == 0, "error message round trip");
  cJSON_Delete(back);
  free(json);
}

static void check_message(const ToolCallParse *p, const char *data, size_t size) {
  check(p->text >= data && p->text + p->text_len <= data + size, "message inside input");
  check(p->text_len > 0, "message non-empty");
  check(!is_space(p->text[0]) && !is_space(p->text[p->text_len - 1]), "message trimmed");
  check(!contains(p->text, p->text_len, "<tool_call>"), "message has no opening tag");
  check(!contains(p->text, p->text_len, "</tool_call>"), "message has no closing tag");
}

static void check_call(const ToolCallParse *p, const char *data, size_t size) {
  check(p->text >= data && p->text + p->text_len <= data + size, "preface inside input");
  check(toolcall_name_is_valid(p->name, strlen(p->name)), "valid name");
  check(cJSON_IsObject(p->arguments), "arguments object");
  FimiError err = {0};
  char *call = toolcall_render_call(p->name, p->arguments, &err);
  check(call != NULL, "render call");
  size_t call_len = strlen(call), n = p->text_len + 1 + call_len;
  char *turn = malloc(n + 1);
  check(turn != NULL, "malloc");
  memcpy(turn, p->text, p->text_len);
  turn[p->text_len] = '\n';
  memcpy(turn + p->text_len + 1, call, call_len + 1);
  ToolCallParse again;
  ToolCallKind kind = toolcall_parse(turn, n, &again);
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
  ToolCallKind kind = toolcall_parse(text, size, &p);
  check(kind == p.kind, "returned kind");
  if (kind == TOOLCALL_ERROR) check_error(&p, size);
  else if (kind == TOOLCALL_MESSAGE) check_message(&p, text, size);
  else if (kind == TOOLCALL_TOOL_CALL) check_call(&p, text, size);
  else check(0, "kind in range");
  if (kind != TOOLCALL_ERROR) check(p.error == TOOLCALL_OK, "no error code");
  toolcall_parse_free(&p);
  return 0;
}
