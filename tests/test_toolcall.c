// tests/test_toolcall.c: the tool-call parser and renderers (data/toolcall.*).
// Valid calls (unicode, nesting, escapes, tags inside strings, the depth
// limit), messages, one case or more for every error code with its offset,
// megabytes of garbage, NULs, invalid UTF-8, the exact rendered text, and a
// timing check that parsing adversarial inputs stays linear in their size.
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "data/toolcall.h"
#include "tests/test_util.h"

static ToolCallKind parse_str(const char *text, ToolCallParse *p) { return toolcall_parse(text, strlen(text), p); }

// Arguments given as JSON text, compared structurally.
static int same_args(const cJSON *args, const char *expected_json) {
  FimiError err = {0};
  cJSON *want = json_parse_text(expected_json, strlen(expected_json), "expected", &err);
  int same = want && cJSON_Compare(args, want, 1);
  cJSON_Delete(want);
  return same;
}

static void expect_call(const char *label, const char *text, size_t len, const char *name, const char *args_json,
                        const char *preface) {
  ToolCallParse p;
  ToolCallKind kind = toolcall_parse(text, len, &p);
  CHECK(kind == TOOLCALL_TOOL_CALL, "%s: expected a tool call, got kind %d: %s", label, kind, p.message);
  if (kind == TOOLCALL_TOOL_CALL) {
    CHECK(strcmp(p.name, name) == 0, "%s: name %s, expected %s", label, p.name, name);
    CHECK(same_args(p.arguments, args_json), "%s: arguments differ from %s", label, args_json);
    CHECK(p.text_len == strlen(preface) && memcmp(p.text, preface, p.text_len) == 0, "%s: preface \"%.*s\"", label,
          (int)p.text_len, p.text);
    CHECK(p.error == TOOLCALL_OK, "%s: error code set on success", label);
  }
  toolcall_parse_free(&p);
}

static void expect_message(const char *label, const char *text, const char *message) {
  ToolCallParse p;
  ToolCallKind kind = parse_str(text, &p);
  CHECK(kind == TOOLCALL_MESSAGE, "%s: expected a message, got kind %d: %s", label, kind, p.message);
  CHECK(p.text_len == strlen(message) && memcmp(p.text, message, p.text_len) == 0, "%s: message \"%.*s\"", label,
        (int)p.text_len, p.text);
  CHECK(p.arguments == NULL, "%s: arguments on a message", label);
  toolcall_parse_free(&p);
}

// offset: expected error_offset, or -1 to skip that check.
static void expect_error_len(const char *label, const char *text, size_t len, ToolCallError code, long offset,
                             const char *detail) {
  ToolCallParse p;
  ToolCallKind kind = toolcall_parse(text, len, &p);
  CHECK(kind == TOOLCALL_ERROR, "%s: expected error %s, got kind %d", label, toolcall_error_name(code), kind);
  if (kind != TOOLCALL_ERROR) {
    toolcall_parse_free(&p);
    return;
  }
  CHECK(p.error == code, "%s: code %s, expected %s (%s)", label, toolcall_error_name(p.error),
        toolcall_error_name(code), p.message);
  CHECK(p.arguments == NULL, "%s: arguments set on error", label);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "invalid tool call (%s): ", toolcall_error_name(code));
  CHECK(strncmp(p.message, prefix, strlen(prefix)) == 0, "%s: message \"%s\"", label, p.message);
  CHECK(strlen(p.message) < TOOLCALL_MESSAGE_MAX, "%s: message too long", label);
  if (offset >= 0) CHECK(p.error_offset == (size_t)offset, "%s: offset %zu, expected %ld", label, p.error_offset, offset);
  if (detail) CHECK(strstr(p.message, detail) != NULL, "%s: message lacks \"%s\": %s", label, detail, p.message);
  toolcall_parse_free(&p);
}

static void expect_error(const char *label, const char *text, ToolCallError code, long offset, const char *detail) {
  expect_error_len(label, text, strlen(text), code, offset, detail);
}

// ----------------------------------------------------------------------------

static void test_valid_calls(void) {
  const char *basic = "<tool_call>{\"name\":\"get_balance\",\"arguments\":{\"account_id\":\"SB-1001\"}}</tool_call>";
  expect_call("basic", basic, strlen(basic), "get_balance", "{\"account_id\":\"SB-1001\"}", "");
  const char *spaced =
      "  \n<tool_call>\n  { \"name\" : \"get_balance\" ,\n \"arguments\" : { } }\n</tool_call>\n<end_of_turn>\n";
  expect_call("whitespace and end_of_turn", spaced, strlen(spaced), "get_balance", "{}", "");
  const char *preface = "Let me check that for you.\n\n<tool_call>{\"arguments\":{\"n\":1},\"name\":\"a.b-c_2\"}</tool_call><eos>";
  expect_call("preface, key order, eos", preface, strlen(preface), "a.b-c_2", "{\"n\":1}", "Let me check that for you.");
  const char *unicode = "<tool_call>{\"name\":\"send_sms\",\"arguments\":{\"text\":\"₹500 जमा \\ud83d\\ude00\","
                        "\"नाम\":\"Ré\\u00e9\"}}</tool_call>";
  expect_call("unicode", unicode, strlen(unicode), "send_sms",
              "{\"text\":\"₹500 जमा \xf0\x9f\x98\x80\",\"नाम\":\"Réé\"}", "");
  const char *nested = "<tool_call>{\"name\":\"transfer\",\"arguments\":{\"legs\":[{\"to\":\"A\",\"amt\":2500.5},"
                       "{\"to\":\"B\",\"amt\":-1e3,\"meta\":{\"ok\":true,\"x\":null,\"l\":[[],{}]}}]}}</tool_call>";
  expect_call("nested", nested, strlen(nested), "transfer",
              "{\"legs\":[{\"to\":\"A\",\"amt\":2500.5},{\"to\":\"B\",\"amt\":-1000,\"meta\":{\"ok\":true,\"x\":null,"
              "\"l\":[[],{}]}}]}",
              "");
  // Tags inside JSON strings are data, not structure.
  const char *tags = "<tool_call>{\"name\":\"note\",\"arguments\":{\"q\":\"</tool_call> and <tool_call>\",\"e\":\"\\\"\\\\\"}}"
                     "</tool_call>";
  expect_call("tags in strings", tags, strlen(tags), "note", "{\"q\":\"</tool_call> and <tool_call>\",\"e\":\"\\\"\\\\\"}",
              "");
  const char *escaped_key = "<tool_call>{\"na\\u006de\":\"x\",\"arguments\":{}}</tool_call>";
  expect_call("escaped key", escaped_key, strlen(escaped_key), "x", "{}", "");
  // Depth: the call object is level 1, arguments level 2; 32 levels pass, 33 fail.
  char deep[512], too_deep[512];
  int n = snprintf(deep, sizeof deep, "<tool_call>{\"name\":\"d\",\"arguments\":{\"a\":");
  memcpy(too_deep, deep, (size_t)n);
  int m = n;
  for (int i = 0; i < TOOLCALL_MAX_DEPTH - 2; i++) deep[n++] = '[';
  for (int i = 0; i < TOOLCALL_MAX_DEPTH - 2; i++) deep[n++] = ']';
  snprintf(deep + n, sizeof deep - (size_t)n, "}}</tool_call>");
  for (int i = 0; i < TOOLCALL_MAX_DEPTH - 1; i++) too_deep[m++] = '[';
  for (int i = 0; i < TOOLCALL_MAX_DEPTH - 1; i++) too_deep[m++] = ']';
  snprintf(too_deep + m, sizeof too_deep - (size_t)m, "}}</tool_call>");
  ToolCallParse p;
  CHECK(parse_str(deep, &p) == TOOLCALL_TOOL_CALL, "depth %d rejected: %s", TOOLCALL_MAX_DEPTH, p.message);
  toolcall_parse_free(&p);
  long deep_at = (long)(strchr(too_deep, '[') - too_deep) + TOOLCALL_MAX_DEPTH - 2;
  expect_error("depth 33", too_deep, TOOLCALL_ERR_TOO_DEEP, deep_at, "32");
  // The caller may take the arguments.
  CHECK(parse_str(basic, &p) == TOOLCALL_TOOL_CALL, "basic again");
  cJSON *taken = p.arguments;
  p.arguments = NULL;
  toolcall_parse_free(&p);
  CHECK(cJSON_IsObject(taken), "taken arguments");
  cJSON_Delete(taken);
}

static void test_messages(void) {
  expect_message("plain", "Your balance is ₹12,400.", "Your balance is ₹12,400.");
  expect_message("trimmed with end_of_turn", "\n  Hello!  <end_of_turn>\n", "Hello!");
  expect_message("eos and end_of_turn", "Done.<end_of_turn><eos>\n", "Done.");
  expect_message("end_of_turn in the middle is text", "a<end_of_turn>b", "a<end_of_turn>b");
  expect_message("JSON without tags is a message", "{\"name\":\"x\",\"arguments\":{}}",
                 "{\"name\":\"x\",\"arguments\":{}}");
  expect_message("near-miss tags are text", "<tool_call <toolcall> </tool_call", "<tool_call <toolcall> </tool_call");
}

static void test_errors(void) {
  // Every code has a case here; the loop at the end checks that.
  int covered[TOOLCALL_ERR_COUNT] = {0};
  struct {
    const char *label, *text;
    ToolCallError code;
    long offset;
    const char *detail;
  } cases[] = {
      {"empty", "", TOOLCALL_ERR_EMPTY, 0, "empty"},
      {"only whitespace", " \n\t<end_of_turn>\n", TOOLCALL_ERR_EMPTY, 0, NULL},
      {"stray close", "Sure.</tool_call>", TOOLCALL_ERR_STRAY_CLOSE, 5, "byte 5"},
      {"close before open", "</tool_call><tool_call>{}</tool_call>", TOOLCALL_ERR_STRAY_CLOSE, 0, NULL},
      {"unterminated", "ok <tool_call>{\"name\":\"a\",\"arguments\":{}}", TOOLCALL_ERR_UNTERMINATED, 3, "byte 3"},
      {"unterminated at end_of_turn", "<tool_call>{\"name\":\"a\"<end_of_turn>", TOOLCALL_ERR_UNTERMINATED, 0, NULL},
      {"invalid json", "<tool_call>{\"name\":\"a\",\"arguments\":{,}}</tool_call>", TOOLCALL_ERR_INVALID_JSON, 11,
       "{\"name\":\"a\""},
      {"trailing comma", "<tool_call>{\"name\":\"a\",\"arguments\":{},}</tool_call>", TOOLCALL_ERR_INVALID_JSON, 11, NULL},
      {"two values", "<tool_call>{\"name\":\"a\",\"arguments\":{}} {}</tool_call>", TOOLCALL_ERR_INVALID_JSON, 11, NULL},
      {"empty call", "<tool_call> \n </tool_call>", TOOLCALL_ERR_INVALID_JSON, 11, "nothing"},
      {"single quotes", "<tool_call>{'name':'a','arguments':{}}</tool_call>", TOOLCALL_ERR_INVALID_JSON, 11, NULL},
      {"unterminated string", "<tool_call>{\"name\":\"a</tool_call>", TOOLCALL_ERR_INVALID_JSON, 11, "string"},
      {"huge number", "<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":[1e999]}}</tool_call>", TOOLCALL_ERR_INVALID_JSON,
       11, "too large"},
      {"NaN", "<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":NaN}}</tool_call>", TOOLCALL_ERR_INVALID_JSON, 11, NULL},
      {"array", "<tool_call>[{\"name\":\"a\",\"arguments\":{}}]</tool_call>", TOOLCALL_ERR_NOT_AN_OBJECT, 11, "an array"},
      {"string", "<tool_call>\"get_balance\"</tool_call>", TOOLCALL_ERR_NOT_AN_OBJECT, 11, "a string"},
      {"duplicate name", "<tool_call>{\"name\":\"a\",\"name\":\"b\",\"arguments\":{}}</tool_call>",
       TOOLCALL_ERR_DUPLICATE_KEY, 11, "\"name\""},
      {"duplicate nested", "<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":[{\"amount\":1,\"k\":0,\"amount\":2}]}}</tool_call>",
       TOOLCALL_ERR_DUPLICATE_KEY, 11, "\"amount\""},
      {"duplicate via escape", "<tool_call>{\"name\":\"a\",\"arguments\":{\"ab\":1,\"a\\u0062\":2}}</tool_call>",
       TOOLCALL_ERR_DUPLICATE_KEY, 11, "\"ab\""},
      {"extra key", "<tool_call>{\"name\":\"a\",\"arguments\":{},\"id\":\"call_1\"}</tool_call>", TOOLCALL_ERR_UNKNOWN_KEY,
       11, "\"id\""},
      {"wrong case key", "<tool_call>{\"Name\":\"a\",\"arguments\":{}}</tool_call>", TOOLCALL_ERR_UNKNOWN_KEY, 11, NULL},
      {"missing name", "<tool_call>{\"arguments\":{}}</tool_call>", TOOLCALL_ERR_MISSING_NAME, 11, NULL},
      {"null name", "<tool_call>{\"name\":null,\"arguments\":{}}</tool_call>", TOOLCALL_ERR_MISSING_NAME, 11, NULL},
      {"name number", "<tool_call>{\"name\":7,\"arguments\":{}}</tool_call>", TOOLCALL_ERR_BAD_NAME, 11, "a number"},
      {"name with space", "<tool_call>{\"name\":\"get balance\",\"arguments\":{}}</tool_call>", TOOLCALL_ERR_BAD_NAME, 11,
       "get balance"},
      {"name empty", "<tool_call>{\"name\":\"\",\"arguments\":{}}</tool_call>", TOOLCALL_ERR_BAD_NAME, 11, NULL},
      {"name digit first", "<tool_call>{\"name\":\"1abc\",\"arguments\":{}}</tool_call>", TOOLCALL_ERR_BAD_NAME, 11, NULL},
      {"name too long",
       "<tool_call>{\"name\":\"a1234567890123456789012345678901234567890123456789012345678901234\",\"arguments\":{}}"
       "</tool_call>",
       TOOLCALL_ERR_BAD_NAME, 11, NULL},
      {"missing arguments", "<tool_call>{\"name\":\"get_balance\"}</tool_call>", TOOLCALL_ERR_MISSING_ARGUMENTS, 11,
       "get_balance"},
      {"arguments array", "<tool_call>{\"name\":\"a\",\"arguments\":[1]}</tool_call>",
       TOOLCALL_ERR_ARGUMENTS_NOT_OBJECT, 11, "an array"},
      {"arguments string", "<tool_call>{\"name\":\"a\",\"arguments\":\"{\\\"x\\\":1}\"}</tool_call>",
       TOOLCALL_ERR_ARGUMENTS_NOT_OBJECT, 11, "a string"},
      {"text after", "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\nDone!", TOOLCALL_ERR_TEXT_AFTER_CALL, 51,
       "Done!"},
      {"stray close after", "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call></tool_call>",
       TOOLCALL_ERR_TEXT_AFTER_CALL, 50, NULL},
      {"two calls",
       "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>",
       TOOLCALL_ERR_MULTIPLE_CALLS, 51, "byte 51"},
      {"NUL escape", "<tool_call>{\"name\":\"a\",\"arguments\":{\"s\":\"x\\u0000y\"}}</tool_call>", TOOLCALL_ERR_NUL_BYTE,
       42, "\\u0000"},
      {"invalid utf8", "ok \xff", TOOLCALL_ERR_INVALID_UTF8, 3, "byte 3"},
      {"too deep", "<tool_call>[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]</tool_call>",
       TOOLCALL_ERR_TOO_DEEP, 43, "deeper than 32"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    expect_error(cases[i].label, cases[i].text, cases[i].code, cases[i].offset, cases[i].detail);
    covered[cases[i].code] = 1;
  }
  // Name known before the error: kept for the tool-error turn.
  ToolCallParse p;
  parse_str("<tool_call>{\"name\":\"get_balance\",\"arguments\":7}</tool_call>", &p);
  CHECK(strcmp(p.name, "get_balance") == 0, "name kept on arguments error: \"%s\"", p.name);
  // NUL bytes anywhere.
  const char nul_text[] = "Hi\0<tool_call>{}</tool_call>";
  expect_error_len("NUL byte", nul_text, sizeof nul_text - 1, TOOLCALL_ERR_NUL_BYTE, 2, "byte 2");
  const char nul_in_call[] = "<tool_call>{\"name\":\"a\0\",\"arguments\":{}}</tool_call>";
  expect_error_len("NUL in call", nul_in_call, sizeof nul_in_call - 1, TOOLCALL_ERR_NUL_BYTE, 21, NULL);
  // Too long (size check comes first, so it never reads the bytes).
  size_t big = TOOLCALL_MAX_TEXT_BYTES + 1;
  char *text = malloc(big);
  memset(text, 'a', big);
  expect_error_len("too long", text, big, TOOLCALL_ERR_TOO_LONG, TOOLCALL_MAX_TEXT_BYTES, "262145");
  covered[TOOLCALL_ERR_TOO_LONG] = covered[TOOLCALL_ERR_NUL_BYTE] = 1;
  expect_message("at the limit is fine", "x", "x");
  text[TOOLCALL_MAX_TEXT_BYTES - 1] = 'b';
  ToolCallParse q;
  CHECK(toolcall_parse(text, TOOLCALL_MAX_TEXT_BYTES, &q) == TOOLCALL_MESSAGE && q.text_len == TOOLCALL_MAX_TEXT_BYTES,
        "a message of exactly the limit");
  free(text);
  covered[TOOLCALL_ERR_INVALID_SYNTAX] = 1;  // Gemma 4's syntax only: test_gemma4_errors
  for (int code = 1; code < TOOLCALL_ERR_COUNT; code++)
    CHECK(covered[code], "no test case for error %s", toolcall_error_name((ToolCallError)code));
  // Names are distinct and known.
  for (int a = 0; a < TOOLCALL_ERR_COUNT; a++) {
    CHECK(strcmp(toolcall_error_name((ToolCallError)a), "unknown") != 0, "code %d has no name", a);
    for (int b = 0; b < a; b++)
      CHECK(strcmp(toolcall_error_name((ToolCallError)a), toolcall_error_name((ToolCallError)b)) != 0, "same name %d %d",
            a, b);
  }
  CHECK(strcmp(toolcall_error_name(TOOLCALL_ERR_COUNT), "unknown") == 0, "out of range code");
}

static void test_invalid_utf8(void) {
  struct {
    const char *label, *bytes;
    long offset;
  } cases[] = {
      {"lone continuation", "ab\x80", 2},       {"overlong slash", "a\xc0\xaf", 1},
      {"overlong 3-byte", "\xe0\x80\xaf", 0},   {"surrogate", "xx\xed\xa0\x80", 2},
      {"above U+10FFFF", "\xf4\x90\x80\x80", 0}, {"F5 lead", "\xf5\x80\x80\x80", 0},
      {"truncated at end", "ok \xe2\x82", 3},    {"truncated 4-byte", "\xf0\x9f\x98 ", 0},
      {"inside a call", "<tool_call>{\"name\":\"a\",\"arguments\":{\"s\":\"\xfe\"}}</tool_call>", 41},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_error(cases[i].label, cases[i].bytes, TOOLCALL_ERR_INVALID_UTF8, cases[i].offset, NULL);
  expect_message("valid 4-byte and max code point", "\xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf", "\xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
}

// Deterministic garbage: xorshift bytes, optionally restricted to printable ASCII.
static void fill_garbage(char *buf, size_t n, uint64_t seed, int printable) {
  uint64_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[i] = printable ? (char)(' ' + (x % 95)) : (char)(x & 0xFF);
  }
}

static void test_garbage(void) {
  size_t mb = 1 << 20;
  char *buf = malloc(mb + 64);
  fill_garbage(buf, mb, 1, 0);
  expect_error_len("1 MB random bytes", buf, mb, TOOLCALL_ERR_TOO_LONG, -1, NULL);
  size_t n = 200 * 1024;
  fill_garbage(buf, n, 2, 0);
  buf[0] = 'x';  // random bytes contain NULs and invalid UTF-8; either error is right
  ToolCallParse p;
  ToolCallKind kind = toolcall_parse(buf, n, &p);
  CHECK(kind == TOOLCALL_ERROR && (p.error == TOOLCALL_ERR_NUL_BYTE || p.error == TOOLCALL_ERR_INVALID_UTF8),
        "200 KB random bytes: %s", p.message);
  // Printable garbage inside a call: the quote in the message is truncated.
  memcpy(buf, "<tool_call>", 11);
  fill_garbage(buf + 11, n, 3, 1);
  for (size_t i = 11; i < n + 11; i++)
    if (buf[i] == '<') buf[i] = '(';
  memcpy(buf + n + 11, "</tool_call>", 12);
  kind = toolcall_parse(buf, n + 23, &p);
  CHECK(kind == TOOLCALL_ERROR, "200 KB printable garbage in a call accepted");
  CHECK(strlen(p.message) < 200, "message quotes megabytes: %zu bytes", strlen(p.message));
  CHECK(strstr(p.message, "...") != NULL, "truncated quote not marked: %s", p.message);
  free(buf);
}

static void test_render(void) {
  FimiError err = {0};
  const char *args_json = "{\"account_id\":\"SB-1001\",\"amount\":2500.5,\"note\":\"₹ \\\"rent\\\" </tool_call>\",\"n\":[1,null]}";
  cJSON *args = json_parse_text(args_json, strlen(args_json), "args", &err);
  char *call = toolcall_render_call("transfer_funds", args, &err);
  const char *want_call = "<tool_call>{\"name\":\"transfer_funds\",\"arguments\":{\"account_id\":\"SB-1001\",\"amount\":2500.5,"
                          "\"note\":\"₹ \\\"rent\\\" </tool_call>\",\"n\":[1,null]}}</tool_call>";
  CHECK(call && strcmp(call, want_call) == 0, "render call:\n%s\n%s", call ? call : "(null)", want_call);
  if (call) expect_call("render then parse", call, strlen(call), "transfer_funds", args_json, "");
  free(call);
  char *result = toolcall_render_result("get_balance", args, &err);
  const char *want_result = "{\"name\":\"get_balance\",\"result\":{\"account_id\":\"SB-1001\",";
  CHECK(result && strncmp(result, want_result, strlen(want_result)) == 0, "render result: %s", result);
  free(result);
  char *error = toolcall_render_error(NULL, "invalid tool call (empty): the turn is \"empty\"", &err);
  CHECK(error && strcmp(error, "{\"name\":null,\"error\":\"invalid tool call (empty): the turn is \\\"empty\\\"\"}") == 0,
        "render error: %s", error);
  free(error);
  error = toolcall_render_error("get_balance", "no such account", &err);
  CHECK(error && strcmp(error, "{\"name\":\"get_balance\",\"error\":\"no such account\"}") == 0, "render error: %s", error);
  free(error);
  FimiError e1 = {0}, e2 = {0};
  CHECK(toolcall_render_call("bad name", args, &e1) == NULL && strstr(e1.message, "bad name"), "bad name rendered");
  cJSON *array = cJSON_CreateArray();
  CHECK(toolcall_render_call("x", array, &e2) == NULL && strstr(e2.message, "object"), "array arguments rendered");
  cJSON_Delete(array);
  cJSON_Delete(args);
}

// ----------------------------------------------------------------------------
// linear time: 16x the bytes must cost about 16x the time; quadratic would be
// 256x. The bound (96) leaves room for cache effects: 16 KB parses in cache,
// 256 KB (with its cJSON nodes and sorted keys) does not.

typedef void (*MakeInput)(char *buf, size_t n);

static void make_angles(char *buf, size_t n) { memset(buf, '<', n); }
static void make_open_prefixes(char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) buf[i] = "<tool_call"[i % 10];
}
static void make_close_prefixes(char *buf, size_t n) {
  memcpy(buf, "<tool_call>", 11);
  for (size_t i = 11; i < n; i++) buf[i] = "</tool_cal"[(i - 11) % 10];
}
static void make_brackets(char *buf, size_t n) {
  memcpy(buf, "<tool_call>", 11);
  memset(buf + 11, '[', n - 11);
}
static void make_backslashes(char *buf, size_t n) {
  memcpy(buf, "<tool_call>{\"name\":\"", 20);
  memset(buf + 20, '\\', n - 20);
}
// One object with n/10 distinct keys (the duplicate check sorts them).
static void make_many_keys(char *buf, size_t n) {
  size_t at = (size_t)sprintf(buf, "<tool_call>{\"name\":\"k\",\"arguments\":{");
  for (int k = 0; at + 40 < n; k++) at += (size_t)sprintf(buf + at, "\"k%07d\":%d,", (k * 7919) % 10000000, k);
  at += (size_t)sprintf(buf + at, "\"end\":0}}</tool_call>");
  memset(buf + at, ' ', n - at);
}

static double seconds_to_parse(MakeInput make, size_t n) {
  char *buf = malloc(n);
  make(buf, n);
  double best = 1e9;
  for (int rep = 0; rep < 7; rep++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ToolCallParse p;
    toolcall_parse(buf, n, &p);
    toolcall_parse_free(&p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (s < best) best = s;
  }
  free(buf);
  return best;
}

static void test_linear_time(void) {
  struct {
    const char *label;
    MakeInput make;
  } inputs[] = {{"'<' x n", make_angles},           {"'<tool_call' x n", make_open_prefixes},
                {"'</tool_cal' x n", make_close_prefixes}, {"'[' x n", make_brackets},
                {"backslashes", make_backslashes},   {"many keys", make_many_keys}};
  size_t small = 16 * 1024, large = TOOLCALL_MAX_TEXT_BYTES;
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    double ts = seconds_to_parse(inputs[i].make, small), tl = seconds_to_parse(inputs[i].make, large);
    double ratio = tl / (ts > 1e-6 ? ts : 1e-6);
    printf("  parse %-18s %6zu B: %8.3f ms   %6zu B: %8.3f ms   ratio %.1f\n", inputs[i].label, small, ts * 1e3, large,
           tl * 1e3, ratio);
    CHECK(tl < 0.25, "%s: %zu bytes took %.3f s", inputs[i].label, large, tl);
    CHECK(ratio < 96 || tl < 0.002, "%s: time grows faster than linear (ratio %.1f for 16x bytes)", inputs[i].label, ratio);
  }
}

// ----------------------------------------------------------------------------
// Gemma 4's native syntax

#define Q "<|\"|>"

static void expect_g4_call(const char *label, const char *text, const char *name, const char *args_json,
                           const char *preface) {
  ToolCallParse p;
  ToolCallKind kind = toolcall_parse_gemma4(text, strlen(text), &p);
  CHECK(kind == TOOLCALL_TOOL_CALL, "%s: expected a tool call, got kind %d: %s", label, kind, p.message);
  if (kind == TOOLCALL_TOOL_CALL) {
    CHECK(strcmp(p.name, name) == 0, "%s: name %s, expected %s", label, p.name, name);
    CHECK(same_args(p.arguments, args_json), "%s: arguments differ from %s", label, args_json);
    CHECK(p.text_len == strlen(preface) && memcmp(p.text, preface, p.text_len) == 0, "%s: preface \"%.*s\"", label,
          (int)p.text_len, p.text);
  }
  toolcall_parse_free(&p);
}

static void expect_g4_error(const char *label, const char *text, size_t len, ToolCallError code, long offset,
                            const char *detail) {
  ToolCallParse p;
  ToolCallKind kind = toolcall_parse_gemma4(text, len, &p);
  CHECK(kind == TOOLCALL_ERROR && p.error == code, "%s: expected error %s, got kind %d code %s (%s)", label,
        toolcall_error_name(code), kind, toolcall_error_name(p.error), p.message);
  CHECK(p.arguments == NULL, "%s: arguments set on error", label);
  if (offset >= 0) CHECK(p.error_offset == (size_t)offset, "%s: offset %zu, expected %ld", label, p.error_offset, offset);
  if (detail) CHECK(strstr(p.message, detail) != NULL, "%s: message lacks \"%s\": %s", label, detail, p.message);
  toolcall_parse_free(&p);
}

static void test_gemma4_calls(void) {
  expect_g4_call("string and number", "<|tool_call>call:get_weather{city:" Q "Paris" Q ",days:5}<tool_call|>",
                 "get_weather", "{\"city\":\"Paris\",\"days\":5}", "");
  expect_g4_call("no arguments", "<|tool_call>call:ping{}<tool_call|>", "ping", "{}", "");
  expect_g4_call("nested, arrays, literals, negative and exponent numbers",
                 "<|tool_call>call:a.b-c{o:{x:[1,-2.5,3e2,true,false,null],s:[" Q Q "," Q "{,:}" Q "]},n:0}"
                 "<tool_call|>",
                 "a.b-c", "{\"o\":{\"x\":[1,-2.5,300,true,false,null],\"s\":[\"\",\"{,:}\"]},\"n\":0}", "");
  expect_g4_call("preface, trailing end of turn", "Let me look.\n<|tool_call>call:f{k:" Q "v" Q "}<tool_call|>\n<turn|>",
                 "f", "{\"k\":\"v\"}", "Let me look.");
  expect_g4_call("tags and quotes of JSON inside a string",
                 "<|tool_call>call:f{k:" Q "<tool_call|> \"x\" <|tool_call>" Q "}<tool_call|>", "f",
                 "{\"k\":\"<tool_call|> \\\"x\\\" <|tool_call>\"}", "");
  expect_g4_call("unicode string", "<|tool_call>call:f{k:" Q "h\xc3\xa9 \xe2\x82\xac" Q "}<tool_call|>", "f",
                 "{\"k\":\"h\xc3\xa9 \xe2\x82\xac\"}", "");
  ToolCallParse p;
  CHECK(toolcall_parse_gemma4("Hello there<turn|>", 18, &p) == TOOLCALL_MESSAGE && p.text_len == 11, "a message");
  toolcall_parse_free(&p);
  CHECK(toolcall_parse_gemma4("<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>", 47, &p) == TOOLCALL_MESSAGE,
        "Gemma 3's tags are text in Gemma 4's syntax");
  toolcall_parse_free(&p);
}

static void test_gemma4_errors(void) {
  const char *o = "<|tool_call>";
  size_t ol = strlen(o);
  struct {
    const char *label, *text;
    ToolCallError code;
    long offset;
    const char *detail;
  } cases[] = {
      {"empty", " <turn|> ", TOOLCALL_ERR_EMPTY, 0, "empty"},
      {"stray close", "hi <tool_call|>", TOOLCALL_ERR_STRAY_CLOSE, 3, "without"},
      {"unterminated", "<|tool_call>call:f{}", TOOLCALL_ERR_UNTERMINATED, 0, "no closing"},
      {"no call: prefix", "<|tool_call>f{}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol, "call:NAME{"},
      {"bad name", "<|tool_call>call:9f{}<tool_call|>", TOOLCALL_ERR_BAD_NAME, (long)ol + 5, "not a tool name"},
      {"no brace", "<|tool_call>call:f<tool_call|>", TOOLCALL_ERR_BAD_NAME, (long)ol + 5, "followed by '{'"},
      {"JSON quotes", "<|tool_call>call:f{k:\"v\"}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 9, "<|\"|>"},
      {"unclosed string", "<|tool_call>call:f{k:" Q "v}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 9,
       "without its closing"},
      {"missing colon", "<|tool_call>call:f{k 1}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 8, "':'"},
      {"missing key", "<|tool_call>call:f{:1}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 7, "expected a key"},
      {"trailing comma", "<|tool_call>call:f{k:1,}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 11,
       "expected a key"},
      {"bad number", "<|tool_call>call:f{k:1.}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 9, "after '.'"},
      {"huge number", "<|tool_call>call:f{k:1e999}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 9, "too large"},
      {"whitespace", "<|tool_call>call:f{k: 1}<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 9, "value"},
      {"text after the arguments", "<|tool_call>call:f{k:1}x<tool_call|>", TOOLCALL_ERR_INVALID_SYNTAX, (long)ol + 11,
       "expected <tool_call|>"},
      {"duplicate key", "<|tool_call>call:f{k:1,j:{a:1,a:2}}<tool_call|>", TOOLCALL_ERR_DUPLICATE_KEY, -1, "\"a\""},
      {"text after the call", "<|tool_call>call:f{}<tool_call|> ok", TOOLCALL_ERR_TEXT_AFTER_CALL, -1, "ok"},
      {"two calls", "<|tool_call>call:f{}<tool_call|><|tool_call>call:g{}<tool_call|>", TOOLCALL_ERR_MULTIPLE_CALLS,
       -1, "only one"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_g4_error(cases[i].label, cases[i].text, strlen(cases[i].text), cases[i].code, cases[i].offset,
                    cases[i].detail);
  expect_g4_error("NUL byte", "<|tool_call>call:f{k:\0}<tool_call|>", 33, TOOLCALL_ERR_NUL_BYTE, 21, "NUL");
  expect_g4_error("invalid UTF-8", "a\xff", 2, TOOLCALL_ERR_INVALID_UTF8, 1, "UTF-8");
  // Depth: the arguments object is depth 2 (the call is 1), as in the JSON syntax,
  // so 30 brackets inside it are allowed and 31 are not.
  char deep[400];
  size_t n = (size_t)snprintf(deep, sizeof deep, "<|tool_call>call:f{k:");
  for (int d = 0; d < TOOLCALL_MAX_DEPTH - 2; d++) deep[n++] = '[';
  for (int d = 0; d < TOOLCALL_MAX_DEPTH - 2; d++) deep[n++] = ']';
  n += (size_t)snprintf(deep + n, sizeof deep - n, "}<tool_call|>");
  ToolCallParse p;
  CHECK(toolcall_parse_gemma4(deep, n, &p) == TOOLCALL_TOOL_CALL, "depth %d is allowed: %s", TOOLCALL_MAX_DEPTH,
        p.message);
  toolcall_parse_free(&p);
  n = (size_t)snprintf(deep, sizeof deep, "<|tool_call>call:f{k:");
  for (int d = 0; d < TOOLCALL_MAX_DEPTH - 1; d++) deep[n++] = '[';
  for (int d = 0; d < TOOLCALL_MAX_DEPTH - 1; d++) deep[n++] = ']';
  n += (size_t)snprintf(deep + n, sizeof deep - n, "}<tool_call|>");
  expect_g4_error("too deep", deep, n, TOOLCALL_ERR_TOO_DEEP, -1, "deep");
  // Every prefix of a valid call and random bytes: an answer, never a crash.
  const char *valid = "<|tool_call>call:get{a:" Q "x" Q ",b:[1,{c:null}]}<tool_call|>";
  for (size_t k = 0; k < strlen(valid); k++) {
    ToolCallKind kind = toolcall_parse_gemma4(valid, k, &p);
    CHECK(kind != TOOLCALL_TOOL_CALL || k >= strlen(valid) - 1, "prefix %zu parsed as a call", k);
    toolcall_parse_free(&p);
  }
  uint32_t seed = 12345;
  char junk[512];
  for (int round = 0; round < 2000; round++) {
    size_t len = (size_t)(round % 500) + 1;
    for (size_t k = 0; k < len; k++) {
      seed = seed * 1664525u + 1013904223u;
      junk[k] = "<|tool_call>{}[],:\"ab1-.e"[(seed >> 16) % 26];
    }
    toolcall_parse_gemma4(junk, len, &p);
    toolcall_parse_free(&p);
  }
}

static void test_gemma4_render(void) {
  FimiError err = {0};
  const char *args_json = "{\"city\":\"Paris\",\"days\":5,\"opts\":{\"units\":[\"C\",true,null,-1.5]}}";
  cJSON *args = json_parse_text(args_json, strlen(args_json), "args", &err);
  char *call = toolcall_render_call_gemma4("get_weather", args, &err);
  const char *want = "<|tool_call>call:get_weather{city:" Q "Paris" Q ",days:5,opts:{units:[" Q "C" Q
                     ",true,null,-1.5]}}<tool_call|>";
  CHECK(call && strcmp(call, want) == 0, "rendered call: %s", call ? call : err.message);
  ToolCallParse p;
  CHECK(call && toolcall_parse_gemma4(call, strlen(call), &p) == TOOLCALL_TOOL_CALL &&
            cJSON_Compare(p.arguments, args, 1) && strcmp(p.name, "get_weather") == 0,
        "render then parse gives the same call");
  if (call) toolcall_parse_free(&p);
  free(call);
  cJSON *result = cJSON_CreateObject();
  cJSON_AddNumberToObject(result, "temp", 15);
  char *res = toolcall_render_result_gemma4("get_weather", result, &err);
  CHECK(res && strcmp(res, "<|tool_response>response:get_weather{temp:15}<tool_response|>") == 0, "result: %s",
        res ? res : err.message);
  free(res);
  cJSON *scalar = cJSON_CreateString("sunny");
  res = toolcall_render_result_gemma4("w", scalar, &err);
  CHECK(res && strcmp(res, "<|tool_response>response:w{result:" Q "sunny" Q "}<tool_response|>") == 0,
        "scalar result: %s", res ? res : err.message);
  free(res);
  res = toolcall_render_error_gemma4(NULL, "bad " Q " input", &err);
  CHECK(res && strcmp(res, "<|tool_response>response:unknown{error:" Q "bad \" input" Q "}<tool_response|>") == 0,
        "error: %s", res ? res : err.message);
  free(res);
  char *decl = toolcall_render_declaration_gemma4("w", "Weather.", result, &err);
  CHECK(decl && strcmp(decl, "<|tool>declaration:w{description:" Q "Weather." Q ",parameters:{temp:15}}<tool|>") == 0,
        "declaration: %s", decl ? decl : err.message);
  free(decl);
  // What the syntax cannot hold is an error, not a wrong rendering.
  cJSON *bad = cJSON_CreateObject();
  cJSON_AddStringToObject(bad, "a key", "v");
  CHECK(!toolcall_render_call_gemma4("f", bad, &err) && strstr(err.message, "not bare"), "key with a space: %s",
        err.message);
  cJSON_Delete(bad);
  bad = cJSON_CreateObject();
  cJSON_AddStringToObject(bad, "k", "a" Q "b");
  CHECK(!toolcall_render_call_gemma4("f", bad, &err) && strstr(err.message, "cannot be quoted"), "quote in a string");
  cJSON_Delete(bad);
  CHECK(!toolcall_render_call_gemma4("9x", args, &err), "bad name");
  cJSON_Delete(scalar);
  cJSON_Delete(result);
  cJSON_Delete(args);
}

int main(void) {
  test_valid_calls();
  test_messages();
  test_errors();
  test_invalid_utf8();
  test_garbage();
  test_render();
  test_linear_time();
  test_gemma4_calls();
  test_gemma4_errors();
  test_gemma4_render();
  TEST_MAIN_END();
}
