// data/toolcall.c: the tool-call parser and the tool-call/result renderers
// (see toolcall.h; the rules are written out in docs/chat-format.md).
//
// Order of the checks: size, NUL bytes, UTF-8 (whole input, so every later
// step sees valid text); then the structure of the turn (tags, text after
// the call, a second call); then the JSON (depth and \u0000 by a lexical
// scan, parsing by cJSON, duplicate keys, the two allowed keys). Every step
// is one pass over the input, so the parse is linear in its length.
#include "data/toolcall.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/text.h"
#include "core/utf8.h"

static const char OPEN_TAG[] = "<tool_call>";
static const char CLOSE_TAG[] = "</tool_call>";
#define OPEN_LEN (sizeof OPEN_TAG - 1)
#define CLOSE_LEN (sizeof CLOSE_TAG - 1)
#define QUOTE_MAX 40  // bytes of the model's text quoted back in a message

static const char *ERROR_NAMES[TOOLCALL_ERR_COUNT] = {
    [TOOLCALL_OK] = "ok",
    [TOOLCALL_ERR_TOO_LONG] = "too_long",
    [TOOLCALL_ERR_NUL_BYTE] = "nul_byte",
    [TOOLCALL_ERR_INVALID_UTF8] = "invalid_utf8",
    [TOOLCALL_ERR_EMPTY] = "empty",
    [TOOLCALL_ERR_STRAY_CLOSE] = "stray_close",
    [TOOLCALL_ERR_UNTERMINATED] = "unterminated",
    [TOOLCALL_ERR_INVALID_JSON] = "invalid_json",
    [TOOLCALL_ERR_TOO_DEEP] = "too_deep",
    [TOOLCALL_ERR_NOT_AN_OBJECT] = "not_an_object",
    [TOOLCALL_ERR_DUPLICATE_KEY] = "duplicate_key",
    [TOOLCALL_ERR_UNKNOWN_KEY] = "unknown_key",
    [TOOLCALL_ERR_MISSING_NAME] = "missing_name",
    [TOOLCALL_ERR_BAD_NAME] = "bad_name",
    [TOOLCALL_ERR_MISSING_ARGUMENTS] = "missing_arguments",
    [TOOLCALL_ERR_ARGUMENTS_NOT_OBJECT] = "arguments_not_object",
    [TOOLCALL_ERR_TEXT_AFTER_CALL] = "text_after_call",
    [TOOLCALL_ERR_MULTIPLE_CALLS] = "multiple_calls",
    [TOOLCALL_ERR_INVALID_SYNTAX] = "invalid_syntax",
};

const char *toolcall_error_name(ToolCallError error) {
  if ((int)error < 0 || error >= TOOLCALL_ERR_COUNT) return "unknown";
  return ERROR_NAMES[error];
}

// ----------------------------------------------------------------------------
// bytes

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Offset of the first occurrence of needle in text[from, len), or len. The
// needles are short tags whose first byte does not recur in them, so this is
// linear in len.
static size_t find(const char *text, size_t len, size_t from, const char *needle, size_t needle_len) {
  for (size_t i = from; i + needle_len <= len; i++) {
    const char *p = memchr(text + i, needle[0], len - needle_len + 1 - i);
    if (!p) return len;
    i = (size_t)(p - text);
    if (memcmp(p, needle, needle_len) == 0) return i;
  }
  return len;
}

static int ends_with(const char *text, size_t len, const char *suffix) {
  size_t n = strlen(suffix);
  return len >= n && memcmp(text + len - n, suffix, n) == 0;
}

// Length of the valid UTF-8 character at s, or 0 (the code point is unused).
static size_t utf8_sequence(const unsigned char *s, size_t avail) {
  uint32_t cp;
  return utf8_char_len(s, avail, &cp);
}

// Drops a trailing incomplete UTF-8 sequence left by truncating a string.
static void utf8_trim_incomplete(char *s) {
  size_t len = strlen(s);
  size_t start = len;
  while (start > 0 && len - start < 4 && ((unsigned char)s[start - 1] & 0xC0) == 0x80) start--;
  if (start == 0) return;
  size_t lead = start - 1;
  if ((unsigned char)s[lead] < 0x80) return;
  if (utf8_sequence((const unsigned char *)s + lead, len - lead) != len - lead) s[lead] = '\0';
}

// Writes at most QUOTE_MAX bytes of text (valid UTF-8) into dst as one line:
// control characters become spaces, a cut is marked with "...".
static void quote(char *dst, size_t dst_size, const char *text, size_t len) {
  size_t n = 0, i = 0;
  const unsigned char *s = (const unsigned char *)text;
  while (i < len && n + 4 < dst_size) {
    size_t k = utf8_sequence(s + i, len - i);
    if (k == 0) k = 1;
    if (i + k > QUOTE_MAX) break;
    for (size_t j = 0; j < k; j++) dst[n++] = (k == 1 && (s[i] < 0x20 || s[i] == 0x7F)) ? ' ' : (char)s[i + j];
    i += k;
  }
  if (i < len && n + 4 <= dst_size) {
    memcpy(dst + n, "...", 3);
    n += 3;
  }
  dst[n] = '\0';
}

// ----------------------------------------------------------------------------
// results

static ToolCallKind fail(ToolCallParse *out, ToolCallError code, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static ToolCallKind fail(ToolCallParse *out, ToolCallError code, size_t offset, const char *fmt, ...) {
  cJSON_Delete(out->arguments);
  out->arguments = NULL;
  out->kind = TOOLCALL_ERROR;
  out->error = code;
  out->error_offset = offset;
  int used = snprintf(out->message, sizeof out->message, "invalid tool call (%s): ", toolcall_error_name(code));
  if (used > 0 && (size_t)used < sizeof out->message) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(out->message + used, sizeof out->message - (size_t)used, fmt, args);
    va_end(args);
  }
  utf8_trim_incomplete(out->message);
  return TOOLCALL_ERROR;
}

void toolcall_parse_free(ToolCallParse *parse) {
  if (!parse) return;
  cJSON_Delete(parse->arguments);
  parse->arguments = NULL;
}

int toolcall_name_is_valid(const char *name, size_t len) {
  if (!name || len == 0 || len > TOOLCALL_MAX_NAME_BYTES) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    int other = (c >= '0' && c <= '9') || c == '.' || c == '-';
    if (!letter && !(other && i > 0)) return 0;
  }
  return 1;
}

// ----------------------------------------------------------------------------
// the JSON between the tags

// What a lexical pass over the call text finds: where the closing tag is
// (outside JSON strings, so "</tool_call>" inside an argument string does not
// end the call), the bracket depth, and whether a \u0000 escape occurs.
typedef struct {
  size_t close;        // offset of </tool_call>, or len if none outside strings
  int max_depth;
  size_t deep_offset;  // where max_depth was first exceeded
  size_t nul_offset;   // offset of the first \u0000 escape, or len
  int ends_in_string;  // the text before `close` ends inside a string
} CallScan;

static CallScan scan_call(const char *text, size_t len, size_t from) {
  CallScan scan = {len, 0, len, len, 0};
  int in_string = 0, escape = 0, depth = 0;
  for (size_t i = from; i < len; i++) {
    char c = text[i];
    if (in_string) {
      if (escape) {
        escape = 0;
        if (c == 'u' && scan.nul_offset == len && i + 4 < len && memcmp(text + i + 1, "0000", 4) == 0)
          scan.nul_offset = i - 1;
      } else if (c == '\\') {
        escape = 1;
      } else if (c == '"') {
        in_string = 0;
      }
      continue;
    }
    if (c == '"') {
      in_string = 1;
    } else if (c == '{' || c == '[') {
      if (++depth > scan.max_depth) {
        scan.max_depth = depth;
        if (depth == TOOLCALL_MAX_DEPTH + 1) scan.deep_offset = i;
      }
    } else if (c == '}' || c == ']') {
      depth--;
    } else if (c == '<' && len - i >= CLOSE_LEN && memcmp(text + i, CLOSE_TAG, CLOSE_LEN) == 0) {
      scan.close = i;
      return scan;
    }
  }
  scan.ends_in_string = in_string;
  return scan;
}

static int compare_keys(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Walks the parsed call for what cJSON accepts but a call must not hold.
// Sets *dup to the first key that occurs twice in one object (each object's
// keys are sorted, n log n, never compared pairwise) or *bad_number when a
// number overflowed to infinity (1e999 would print back as null). Returns -1
// when out of memory. Recursion depth is bounded by TOOLCALL_MAX_DEPTH
// (checked before parsing).
static int check_tree(const cJSON *item, const char **dup, int *bad_number) {
  if (cJSON_IsNumber(item) && !isfinite(item->valuedouble)) *bad_number = 1;
  if (cJSON_IsObject(item)) {
    size_t n = 0;
    for (const cJSON *c = item->child; c; c = c->next) n++;
    if (n > 1) {
      const char **keys = malloc(n * sizeof *keys);
      if (!keys) return -1;
      size_t k = 0;
      for (const cJSON *c = item->child; c; c = c->next) keys[k++] = c->string ? c->string : "";
      qsort(keys, n, sizeof *keys, compare_keys);
      for (size_t i = 1; i < n && !*dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) *dup = keys[i];
      free(keys);
    }
  }
  if (cJSON_IsObject(item) || cJSON_IsArray(item)) {
    for (const cJSON *c = item->child; c && !*dup && !*bad_number; c = c->next)
      if (check_tree(c, dup, bad_number) != 0) return -1;
  }
  return 0;
}

static const char *json_type_name(const cJSON *item) {
  if (cJSON_IsString(item)) return "a string";
  if (cJSON_IsNumber(item)) return "a number";
  if (cJSON_IsBool(item)) return "a boolean";
  if (cJSON_IsArray(item)) return "an array";
  if (cJSON_IsObject(item)) return "an object";
  return "null";
}

// Validates the parsed call object and moves its arguments into out.
static ToolCallKind take_call(ToolCallParse *out, cJSON *root, size_t offset) {
  char q[64];
  if (!cJSON_IsObject(root))
    return fail(out, TOOLCALL_ERR_NOT_AN_OBJECT, offset,
                "the call must be a JSON object {\"name\": ..., \"arguments\": {...}}, not %s", json_type_name(root));
  const char *dup = NULL;
  int bad_number = 0;
  if (check_tree(root, &dup, &bad_number) != 0)
    return fail(out, TOOLCALL_ERR_INVALID_JSON, offset, "out of memory checking the call");
  if (bad_number) return fail(out, TOOLCALL_ERR_INVALID_JSON, offset, "a number is too large for a double");
  if (dup) {
    quote(q, sizeof q, dup, strlen(dup));
    return fail(out, TOOLCALL_ERR_DUPLICATE_KEY, offset, "key \"%s\" appears twice in one object", q);
  }
  for (const cJSON *c = root->child; c; c = c->next) {
    if (strcmp(c->string, "name") == 0 || strcmp(c->string, "arguments") == 0) continue;
    quote(q, sizeof q, c->string, strlen(c->string));
    return fail(out, TOOLCALL_ERR_UNKNOWN_KEY, offset,
                "unexpected key \"%s\"; a call has only \"name\" and \"arguments\"", q);
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
  if (!name || cJSON_IsNull(name)) return fail(out, TOOLCALL_ERR_MISSING_NAME, offset, "the call has no \"name\"");
  if (!cJSON_IsString(name))
    return fail(out, TOOLCALL_ERR_BAD_NAME, offset, "\"name\" must be a string, not %s", json_type_name(name));
  size_t name_len = strlen(name->valuestring);
  if (!toolcall_name_is_valid(name->valuestring, name_len)) {
    quote(q, sizeof q, name->valuestring, name_len);
    return fail(out, TOOLCALL_ERR_BAD_NAME, offset,
                "\"%s\" is not a tool name (1-%d characters of A-Z a-z 0-9 _ . -)", q, TOOLCALL_MAX_NAME_BYTES);
  }
  memcpy(out->name, name->valuestring, name_len + 1);
  cJSON *args = cJSON_GetObjectItemCaseSensitive(root, "arguments");
  if (!args || cJSON_IsNull(args))
    return fail(out, TOOLCALL_ERR_MISSING_ARGUMENTS, offset, "the call to %s has no \"arguments\" (use {} for none)",
                out->name);
  if (!cJSON_IsObject(args))
    return fail(out, TOOLCALL_ERR_ARGUMENTS_NOT_OBJECT, offset,
                "\"arguments\" of %s must be a JSON object, not %s", out->name, json_type_name(args));
  out->arguments = cJSON_DetachItemViaPointer(root, args);
  out->kind = TOOLCALL_TOOL_CALL;
  return TOOLCALL_TOOL_CALL;
}

// text[open] is "<tool_call>"; end is the end of the trimmed turn.
static ToolCallKind parse_call(ToolCallParse *out, const char *text, size_t end, size_t open) {
  char q[64];
  size_t body = open + OPEN_LEN;
  CallScan scan = scan_call(text, end, body);
  if (scan.close == end) {
    size_t plain = find(text, end, body, CLOSE_TAG, CLOSE_LEN);
    if (plain == end)
      return fail(out, TOOLCALL_ERR_UNTERMINATED, open, "<tool_call> at byte %zu has no closing </tool_call>", open);
    // The only closing tags sit inside a string that never ends.
    quote(q, sizeof q, text + body, plain - body);
    return fail(out, TOOLCALL_ERR_INVALID_JSON, body, "unterminated string in the call: %s", q);
  }
  size_t after = scan.close + CLOSE_LEN;
  size_t second = find(text, end, after, OPEN_TAG, OPEN_LEN);
  if (second < end)
    return fail(out, TOOLCALL_ERR_MULTIPLE_CALLS, second, "only one <tool_call> per turn; a second starts at byte %zu",
                second);
  for (size_t i = after; i < end; i++) {
    if (is_space((unsigned char)text[i])) continue;
    quote(q, sizeof q, text + i, end - i);
    return fail(out, TOOLCALL_ERR_TEXT_AFTER_CALL, i, "nothing may follow </tool_call>, found: %s", q);
  }
  if (scan.max_depth > TOOLCALL_MAX_DEPTH)
    return fail(out, TOOLCALL_ERR_TOO_DEEP, scan.deep_offset, "JSON nested deeper than %d levels at byte %zu",
                TOOLCALL_MAX_DEPTH, scan.deep_offset);
  if (scan.nul_offset < scan.close)
    return fail(out, TOOLCALL_ERR_NUL_BYTE, scan.nul_offset, "\\u0000 in a string at byte %zu", scan.nul_offset);
  size_t start = body;
  while (start < scan.close && is_space((unsigned char)text[start])) start++;
  if (start == scan.close) return fail(out, TOOLCALL_ERR_INVALID_JSON, body, "nothing between the tags");
  FimiError err = {0};
  cJSON *root = json_parse_text(text + start, scan.close - start, "the JSON after <tool_call>", &err);
  if (!root) {
    quote(q, sizeof q, text + start, scan.close - start);
    return fail(out, TOOLCALL_ERR_INVALID_JSON, start, "%s (%s)", err.message, q);
  }
  ToolCallKind kind = take_call(out, root, start);
  cJSON_Delete(root);
  return kind;
}

// ----------------------------------------------------------------------------
// entry point

// The syntax of a turn: its call tags, the end-of-turn marker a decode may
// keep, and the parser of what a call tag opens.
typedef struct TurnSyntax {
  const char *open, *close, *end_of_turn;
  size_t open_len, close_len;
  ToolCallKind (*parse_call)(ToolCallParse *out, const char *text, size_t end, size_t open);
} TurnSyntax;

// What both formats share: limits, NUL and UTF-8 checks, trimming, and the
// split into a message or a call.
static ToolCallKind parse_turn(const TurnSyntax *syntax, const char *text, size_t len, ToolCallParse *out) {
  memset(out, 0, sizeof *out);
  out->text = text;
  if (len > TOOLCALL_MAX_TEXT_BYTES)
    return fail(out, TOOLCALL_ERR_TOO_LONG, TOOLCALL_MAX_TEXT_BYTES, "the turn has %zu bytes; the limit is %d", len,
                TOOLCALL_MAX_TEXT_BYTES);
  if (!text) len = 0, text = "";
  out->text = text;
  const char *nul = memchr(text, 0, len);
  if (nul) return fail(out, TOOLCALL_ERR_NUL_BYTE, (size_t)(nul - text), "NUL byte at byte %zu", (size_t)(nul - text));
  size_t bad = utf8_first_invalid(text, len);
  if (bad < len) return fail(out, TOOLCALL_ERR_INVALID_UTF8, bad, "invalid UTF-8 at byte %zu", bad);

  // Trim whitespace and the end-of-turn markers a decode may have kept.
  size_t begin = 0, end = len;
  for (;;) {
    while (end > begin && is_space((unsigned char)text[end - 1])) end--;
    if (ends_with(text + begin, end - begin, syntax->end_of_turn)) end -= strlen(syntax->end_of_turn);
    else if (ends_with(text + begin, end - begin, "<eos>")) end -= strlen("<eos>");
    else break;
  }
  while (begin < end && is_space((unsigned char)text[begin])) begin++;

  size_t open = find(text, end, begin, syntax->open, syntax->open_len);
  size_t close = find(text, open, begin, syntax->close, syntax->close_len);
  if (close < open)
    return fail(out, TOOLCALL_ERR_STRAY_CLOSE, close, "%s at byte %zu without a %s before it", syntax->close, close,
                syntax->open);
  size_t text_end = open;
  while (text_end > begin && is_space((unsigned char)text[text_end - 1])) text_end--;
  out->text = text + begin;
  out->text_len = text_end - begin;
  if (open == end) {
    if (begin == end) return fail(out, TOOLCALL_ERR_EMPTY, 0, "the turn is empty");
    out->kind = TOOLCALL_MESSAGE;
    return TOOLCALL_MESSAGE;
  }
  return syntax->parse_call(out, text, end, open);
}

static const TurnSyntax JSON_SYNTAX = {OPEN_TAG, CLOSE_TAG, "<end_of_turn>", OPEN_LEN, CLOSE_LEN, parse_call};

ToolCallKind toolcall_parse(const char *text, size_t len, ToolCallParse *out) {
  return parse_turn(&JSON_SYNTAX, text, len, out);
}

// ----------------------------------------------------------------------------
// rendering

// Prints obj compactly into a malloc'd string wrapped in prefix/suffix.
static char *print_wrapped(const cJSON *obj, const char *prefix, const char *suffix, FimiError *err) {
  char *json = cJSON_PrintUnformatted(obj);
  if (!json) {
    fimi_fail(err, "out of memory printing JSON");
    return NULL;
  }
  size_t a = strlen(prefix), b = strlen(json), c = strlen(suffix);
  char *s = fimi_malloc(a + b + c + 1, err);
  if (s) {
    memcpy(s, prefix, a);
    memcpy(s + a, json, b);
    memcpy(s + a + b, suffix, c + 1);
  }
  cJSON_free(json);
  return s;
}

// {"name": name-or-null, key: value}; value is referenced, not copied.
static char *render_named(const char *name, const char *key, const cJSON *value, const char *prefix,
                          const char *suffix, FimiError *err) {
  cJSON *obj = cJSON_CreateObject();
  int ok = obj != NULL;
  if (ok) ok = (name ? cJSON_AddStringToObject(obj, "name", name) : cJSON_AddNullToObject(obj, "name")) != NULL;
  if (ok) ok = cJSON_AddItemReferenceToObject(obj, key, (cJSON *)value);
  char *s = ok ? print_wrapped(obj, prefix, suffix, err) : NULL;
  if (!ok) fimi_fail(err, "out of memory building JSON");
  cJSON_Delete(obj);
  return s;
}

// A call both syntaxes can render: a valid name and an object of arguments.
static int check_call_parts(const char *name, const cJSON *arguments, FimiError *err) {
  if (!name || !toolcall_name_is_valid(name, strlen(name)))
    return fimi_fail(err, "tool call: \"%.80s\" is not a valid tool name", name ? name : "(null)");
  if (!cJSON_IsObject(arguments)) return fimi_fail(err, "tool call %s: arguments must be a JSON object", name);
  return 0;
}

char *toolcall_render_call(const char *name, const cJSON *arguments, FimiError *err) {
  if (check_call_parts(name, arguments, err) != 0) return NULL;
  return render_named(name, "arguments", arguments, OPEN_TAG, CLOSE_TAG, err);
}

char *toolcall_render_result(const char *name, const cJSON *result, FimiError *err) {
  if (!result) {
    fimi_fail(err, "tool result of %.80s: result is NULL", name ? name : "(null)");
    return NULL;
  }
  return render_named(name, "result", result, "", "", err);
}

char *toolcall_render_error(const char *name, const char *message, FimiError *err) {
  cJSON *text = cJSON_CreateString(message ? message : "");
  if (!text) {
    fimi_fail(err, "out of memory building JSON");
    return NULL;
  }
  char *s = render_named(name, "error", text, "", "", err);
  cJSON_Delete(text);
  return s;
}

// ----------------------------------------------------------------------------
// Gemma 4's native syntax: call:NAME{key:VALUE,...}

static const char G4_OPEN[] = "<|tool_call>";
static const char G4_CLOSE[] = "<tool_call|>";
static const char G4_QUOTE[] = "<|\"|>";
#define G4_OPEN_LEN (sizeof G4_OPEN - 1)
#define G4_CLOSE_LEN (sizeof G4_CLOSE - 1)
#define G4_QUOTE_LEN (sizeof G4_QUOTE - 1)

static int is_key_char(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

// A recursive-descent reader over text[pos, end); on a syntax error it sets
// code/offset/what and returns NULL. Recursion is bounded by depth.
typedef struct {
  const char *text;
  size_t pos, end;
  ToolCallError code;
  size_t offset;
  const char *what;
} G4Reader;

static cJSON *g4_error(G4Reader *r, ToolCallError code, const char *what) {
  if (r->code == TOOLCALL_OK) {
    r->code = code;
    r->offset = r->pos;
    r->what = what;
  }
  return NULL;
}

static int g4_at(const G4Reader *r, const char *s, size_t n) {
  return r->end - r->pos >= n && memcmp(r->text + r->pos, s, n) == 0;
}

static cJSON *g4_value(G4Reader *r, int depth);

static cJSON *g4_string(G4Reader *r) {
  size_t body = r->pos + G4_QUOTE_LEN;
  size_t close = find(r->text, r->end, body, G4_QUOTE, G4_QUOTE_LEN);
  if (close == r->end) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "a string <|\"|> without its closing <|\"|>");
  char *s = malloc(close - body + 1);
  if (!s) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "out of memory");
  memcpy(s, r->text + body, close - body);
  s[close - body] = '\0';
  cJSON *item = cJSON_CreateString(s);
  free(s);
  if (!item) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "out of memory");
  r->pos = close + G4_QUOTE_LEN;
  return item;
}

// A JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, finite.
static cJSON *g4_number(G4Reader *r) {
  const char *t = r->text;
  size_t i = r->pos, e = r->end;
  if (i < e && t[i] == '-') i++;
  if (i >= e || t[i] < '0' || t[i] > '9') return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "expected a value");
  if (t[i] == '0') i++;
  else
    while (i < e && t[i] >= '0' && t[i] <= '9') i++;
  if (i < e && t[i] == '.') {
    size_t d = ++i;
    while (i < e && t[i] >= '0' && t[i] <= '9') i++;
    if (i == d) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "a number needs digits after '.'");
  }
  if (i < e && (t[i] == 'e' || t[i] == 'E')) {
    i++;
    if (i < e && (t[i] == '+' || t[i] == '-')) i++;
    size_t d = i;
    while (i < e && t[i] >= '0' && t[i] <= '9') i++;
    if (i == d) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "a number needs digits in its exponent");
  }
  size_t n = i - r->pos;
  if (n > 400) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "a number longer than 400 characters");
  char buf[401];
  memcpy(buf, t + r->pos, n);
  buf[n] = '\0';
  double v = strtod(buf, NULL);
  if (!isfinite(v)) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "a number is too large for a double");
  cJSON *item = cJSON_CreateNumber(v);
  if (!item) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "out of memory");
  r->pos = i;
  return item;
}

#define G4_FAIL(what)                                 \
  do {                                                \
    g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, (what)); \
    goto fail;                                        \
  } while (0)

// {key:VALUE,...} (object) or [VALUE,...] (array); r->pos is at the bracket.
static cJSON *g4_container(G4Reader *r, int depth, int object) {
  if (depth > TOOLCALL_MAX_DEPTH) return g4_error(r, TOOLCALL_ERR_TOO_DEEP, "nested too deep");
  char close = object ? '}' : ']';
  cJSON *item = object ? cJSON_CreateObject() : cJSON_CreateArray();
  if (!item) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "out of memory");
  r->pos++;
  if (r->pos < r->end && r->text[r->pos] == close) {
    r->pos++;
    return item;
  }
  for (;;) {
    size_t key = r->pos, key_end = key;
    if (object) {
      while (key_end < r->end && is_key_char((unsigned char)r->text[key_end])) key_end++;
      if (key_end == key) G4_FAIL("expected a key ([A-Za-z0-9_.-]+)");
      if (key_end - key > TOOLCALL_MAX_NAME_BYTES) G4_FAIL("a key longer than 64 characters");
      r->pos = key_end;
      if (r->pos >= r->end || r->text[r->pos] != ':') G4_FAIL("expected ':' after a key");
      r->pos++;
    }
    cJSON *value = g4_value(r, depth + 1);
    if (!value) goto fail;
    if (object) {
      char name[TOOLCALL_MAX_NAME_BYTES + 1];
      memcpy(name, r->text + key, key_end - key);
      name[key_end - key] = '\0';
      if (!cJSON_AddItemToObject(item, name, value)) {
        cJSON_Delete(value);
        G4_FAIL("out of memory");
      }
    } else if (!cJSON_AddItemToArray(item, value)) {
      cJSON_Delete(value);
      G4_FAIL("out of memory");
    }
    if (r->pos < r->end && r->text[r->pos] == ',') {
      r->pos++;
      continue;
    }
    if (r->pos < r->end && r->text[r->pos] == close) {
      r->pos++;
      return item;
    }
    G4_FAIL(object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
fail:
  cJSON_Delete(item);
  return NULL;
}

static cJSON *g4_value(G4Reader *r, int depth) {
  if (r->pos >= r->end) return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "the call ends where a value should be");
  char c = r->text[r->pos];
  if (g4_at(r, G4_QUOTE, G4_QUOTE_LEN)) return g4_string(r);
  if (c == '{' || c == '[') return g4_container(r, depth, c == '{');
  static const char *const WORDS[] = {"true", "false", "null"};
  for (int w = 0; w < 3; w++) {
    size_t n = strlen(WORDS[w]);
    if (!g4_at(r, WORDS[w], n)) continue;
    r->pos += n;
    cJSON *item = w == 0 ? cJSON_CreateTrue() : w == 1 ? cJSON_CreateFalse() : cJSON_CreateNull();
    return item ? item : g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "out of memory");
  }
  if (c == '"') return g4_error(r, TOOLCALL_ERR_INVALID_SYNTAX, "strings are quoted with <|\"|>, not '\"'");
  return g4_number(r);
}

// text[open] is "<|tool_call>"; end is the end of the trimmed turn.
static ToolCallKind parse_call_gemma4(ToolCallParse *out, const char *text, size_t end, size_t open) {
  char q[64];
  size_t body = open + G4_OPEN_LEN;
  if (find(text, end, body, G4_CLOSE, G4_CLOSE_LEN) == end)
    return fail(out, TOOLCALL_ERR_UNTERMINATED, open, "<|tool_call> at byte %zu has no closing <tool_call|>", open);
  if (end - body < 5 || memcmp(text + body, "call:", 5) != 0) {
    quote(q, sizeof q, text + body, end - body);
    return fail(out, TOOLCALL_ERR_INVALID_SYNTAX, body, "a call starts with call:NAME{, found: %s", q);
  }
  size_t name = body + 5, name_end = name;
  while (name_end < end && text[name_end] != '{' && name_end - name <= TOOLCALL_MAX_NAME_BYTES) name_end++;
  if (!toolcall_name_is_valid(text + name, name_end - name) || name_end == end || text[name_end] != '{') {
    quote(q, sizeof q, text + name, name_end - name);
    return fail(out, TOOLCALL_ERR_BAD_NAME, name,
                "\"%s\" is not a tool name followed by '{' (1-%d characters of A-Z a-z 0-9 _ . -)", q,
                TOOLCALL_MAX_NAME_BYTES);
  }
  memcpy(out->name, text + name, name_end - name);
  out->name[name_end - name] = '\0';
  G4Reader r = {text, name_end, end, TOOLCALL_OK, 0, NULL};
  cJSON *args = g4_container(&r, 2, 1);
  if (!args) {
    quote(q, sizeof q, text + r.offset, end - r.offset);
    return fail(out, r.code, r.offset, "%s at byte %zu: %s", r.what, r.offset, q);
  }
  if (!g4_at(&r, G4_CLOSE, G4_CLOSE_LEN)) {
    cJSON_Delete(args);
    quote(q, sizeof q, text + r.pos, end - r.pos);
    return fail(out, TOOLCALL_ERR_INVALID_SYNTAX, r.pos, "expected <tool_call|> after the arguments, found: %s", q);
  }
  size_t after = r.pos + G4_CLOSE_LEN;
  const char *dup = NULL;
  int bad_number = 0;
  if (check_tree(args, &dup, &bad_number) != 0 || dup) {
    if (dup) quote(q, sizeof q, dup, strlen(dup));
    else snprintf(q, sizeof q, "?");
    cJSON_Delete(args);
    return fail(out, TOOLCALL_ERR_DUPLICATE_KEY, name_end, "key \"%s\" appears twice in one object", q);
  }
  out->arguments = args;  // fail() frees it from here on
  size_t second = find(text, end, after, G4_OPEN, G4_OPEN_LEN);
  if (second < end)
    return fail(out, TOOLCALL_ERR_MULTIPLE_CALLS, second,
                "only one <|tool_call> per turn; a second starts at byte %zu", second);
  for (size_t i = after; i < end; i++) {
    if (is_space((unsigned char)text[i])) continue;
    quote(q, sizeof q, text + i, end - i);
    return fail(out, TOOLCALL_ERR_TEXT_AFTER_CALL, i, "nothing may follow <tool_call|>, found: %s", q);
  }
  out->kind = TOOLCALL_TOOL_CALL;
  return TOOLCALL_TOOL_CALL;
}

static const TurnSyntax GEMMA4_SYNTAX = {G4_OPEN, G4_CLOSE, "<turn|>", G4_OPEN_LEN, G4_CLOSE_LEN, parse_call_gemma4};

ToolCallKind toolcall_parse_gemma4(const char *text, size_t len, ToolCallParse *out) {
  return parse_turn(&GEMMA4_SYNTAX, text, len, out);
}

// ----------------------------------------------------------------------------
// Gemma 4 rendering

static int key_is_bare(const char *key) {
  size_t n = key ? strlen(key) : 0;
  if (n == 0 || n > TOOLCALL_MAX_NAME_BYTES) return 0;
  for (size_t i = 0; i < n; i++)
    if (!is_key_char((unsigned char)key[i])) return 0;
  return 1;
}

static int g4_render_value(TextBuf *t, const cJSON *v, int depth, FimiError *err);

static int g4_render_members(TextBuf *t, const cJSON *obj, int depth, FimiError *err) {
  if (text_append_str(t, "{", err) != 0) return -1;
  for (const cJSON *c = obj->child; c; c = c->next) {
    if (!key_is_bare(c->string))
      return fimi_fail(err, "Gemma 4 call syntax: key \"%.40s\" is not bare ([A-Za-z0-9_.-], 1-%d characters)",
                       c->string ? c->string : "", TOOLCALL_MAX_NAME_BYTES);
    if ((c != obj->child && text_append_str(t, ",", err) != 0) || text_append_str(t, c->string, err) != 0 ||
        text_append_str(t, ":", err) != 0 || g4_render_value(t, c, depth + 1, err) != 0)
      return -1;
  }
  return text_append_str(t, "}", err);
}

static int g4_render_value(TextBuf *t, const cJSON *v, int depth, FimiError *err) {
  if (depth > TOOLCALL_MAX_DEPTH) return fimi_fail(err, "Gemma 4 call syntax: nested deeper than %d", TOOLCALL_MAX_DEPTH);
  if (cJSON_IsString(v)) {
    if (strstr(v->valuestring, G4_QUOTE))
      return fimi_fail(err, "Gemma 4 call syntax: a string holds <|\"|>, which cannot be quoted");
    return text_append_str(t, G4_QUOTE, err) || text_append_str(t, v->valuestring, err) || text_append_str(t, G4_QUOTE, err) ? -1 : 0;
  }
  if (cJSON_IsObject(v)) return g4_render_members(t, v, depth, err);
  if (cJSON_IsArray(v)) {
    if (text_append_str(t, "[", err) != 0) return -1;
    for (const cJSON *c = v->child; c; c = c->next)
      if ((c != v->child && text_append_str(t, ",", err) != 0) || g4_render_value(t, c, depth + 1, err) != 0) return -1;
    return text_append_str(t, "]", err);
  }
  if (cJSON_IsTrue(v)) return text_append_str(t, "true", err);
  if (cJSON_IsFalse(v)) return text_append_str(t, "false", err);
  if (cJSON_IsNull(v)) return text_append_str(t, "null", err);
  if (cJSON_IsNumber(v)) {
    if (!isfinite(v->valuedouble)) return fimi_fail(err, "Gemma 4 call syntax: a number is not finite");
    cJSON *copy = cJSON_CreateNumber(v->valuedouble);
    char *s = copy ? cJSON_PrintUnformatted(copy) : NULL;
    cJSON_Delete(copy);
    if (!s) return fimi_fail(err, "out of memory printing a number");
    int rc = text_append_str(t, s, err);
    cJSON_free(s);
    return rc;
  }
  return fimi_fail(err, "Gemma 4 call syntax: a value of unknown type");
}

// prefix + word + ":" + name + members + suffix; malloc'd or NULL with err.
static char *g4_render(const char *prefix, const char *word, const char *name, const cJSON *obj, const char *suffix,
                       FimiError *err) {
  TextBuf t = {0};
  if (text_append_str(&t, prefix, err) != 0 || text_append_str(&t, word, err) != 0 || text_append_str(&t, ":", err) != 0 ||
      text_append_str(&t, name, err) != 0 || g4_render_members(&t, obj, 1, err) != 0 || text_append_str(&t, suffix, err) != 0) {
    free(t.data);
    return NULL;
  }
  return t.data;
}

char *toolcall_render_call_gemma4(const char *name, const cJSON *arguments, FimiError *err) {
  if (check_call_parts(name, arguments, err) != 0) return NULL;
  char *s = g4_render(G4_OPEN, "call", name, arguments, G4_CLOSE, err);
  if (!s) fimi_fail_wrap(err, "tool call %s", name);
  return s;
}

static char *g4_response(const char *name, const char *key, const cJSON *value, FimiError *err) {
  if (!name || !toolcall_name_is_valid(name, strlen(name))) name = "unknown";
  cJSON *wrap = NULL;
  if (!cJSON_IsObject(value) || key) {
    wrap = cJSON_CreateObject();
    if (!wrap || !cJSON_AddItemReferenceToObject(wrap, key ? key : "result", (cJSON *)value)) {
      cJSON_Delete(wrap);
      fimi_fail(err, "out of memory building a tool response");
      return NULL;
    }
    value = wrap;
  }
  char *s = g4_render("<|tool_response>", "response", name, value, "<tool_response|>", err);
  cJSON_Delete(wrap);
  if (!s) fimi_fail_wrap(err, "tool response of %s", name);
  return s;
}

char *toolcall_render_result_gemma4(const char *name, const cJSON *result, FimiError *err) {
  if (!result) {
    fimi_fail(err, "tool result of %.80s: result is NULL", name ? name : "(null)");
    return NULL;
  }
  return g4_response(name, NULL, result, err);
}

// The message often quotes the model's text, which may hold <|"|>: each one
// becomes '"' so that the error can always be rendered.
char *toolcall_render_error_gemma4(const char *name, const char *message, FimiError *err) {
  if (!message) message = "";
  char *clean = fimi_malloc(strlen(message) + 1, err);
  if (!clean) return NULL;
  strcpy(clean, message);
  // Replacing one quote can join its neighbours into a new one ("<|<|\"|>|>"):
  // repeat until none is left (each pass shortens the text).
  for (char *q; (q = strstr(clean, G4_QUOTE)) != NULL;) {
    *q = '"';
    memmove(q + 1, q + G4_QUOTE_LEN, strlen(q + G4_QUOTE_LEN) + 1);
  }
  cJSON *text = cJSON_CreateString(clean);
  free(clean);
  if (!text) {
    fimi_fail(err, "out of memory building JSON");
    return NULL;
  }
  char *s = g4_response(name, "error", text, err);
  cJSON_Delete(text);
  return s;
}

char *toolcall_render_declaration_gemma4(const char *name, const char *description, const cJSON *parameters,
                                         FimiError *err) {
  if (!name || !toolcall_name_is_valid(name, strlen(name))) {
    fimi_fail(err, "tool declaration: \"%.80s\" is not a valid tool name", name ? name : "(null)");
    return NULL;
  }
  cJSON *obj = cJSON_CreateObject();
  int ok = obj != NULL;
  if (ok && description) ok = cJSON_AddStringToObject(obj, "description", description) != NULL;
  if (ok && parameters) ok = cJSON_AddItemReferenceToObject(obj, "parameters", (cJSON *)parameters);
  if (!ok) {
    cJSON_Delete(obj);
    fimi_fail(err, "out of memory building a tool declaration");
    return NULL;
  }
  char *s = g4_render("<|tool>", "declaration", name, obj, "<tool|>", err);
  cJSON_Delete(obj);
  if (!s) fimi_fail_wrap(err, "tool declaration %s", name);
  return s;
}

// ----------------------------------------------------------------------------
// by syntax

const char *toolcall_syntax_name(ToolCallSyntax syntax) {
  switch (syntax) {
    case TOOLCALL_SYNTAX_JSON: return "json";
    case TOOLCALL_SYNTAX_GEMMA4: return "gemma4";
    default: return NULL;
  }
}

static int bad_syntax(ToolCallSyntax syntax, FimiError *err) {
  return fimi_fail(err, "tool-call syntax %d is neither json nor gemma4", (int)syntax);
}

ToolCallKind toolcall_parse_syntax(ToolCallSyntax syntax, const char *text, size_t len, ToolCallParse *out) {
  if (syntax == TOOLCALL_SYNTAX_JSON) return toolcall_parse(text, len, out);
  if (syntax == TOOLCALL_SYNTAX_GEMMA4) return toolcall_parse_gemma4(text, len, out);
  memset(out, 0, sizeof *out);
  out->kind = TOOLCALL_ERROR;
  out->error = TOOLCALL_ERR_INVALID_SYNTAX;
  snprintf(out->message, sizeof out->message, "invalid tool call (%s): unknown tool-call syntax %d",
           toolcall_error_name(TOOLCALL_ERR_INVALID_SYNTAX), (int)syntax);
  return TOOLCALL_ERROR;
}

char *toolcall_render_call_syntax(ToolCallSyntax syntax, const char *name, const cJSON *arguments, FimiError *err) {
  if (syntax == TOOLCALL_SYNTAX_JSON) return toolcall_render_call(name, arguments, err);
  if (syntax == TOOLCALL_SYNTAX_GEMMA4) return toolcall_render_call_gemma4(name, arguments, err);
  bad_syntax(syntax, err);
  return NULL;
}

char *toolcall_render_result_syntax(ToolCallSyntax syntax, const char *name, const cJSON *result, FimiError *err) {
  if (syntax == TOOLCALL_SYNTAX_JSON) return toolcall_render_result(name, result, err);
  if (syntax == TOOLCALL_SYNTAX_GEMMA4) return toolcall_render_result_gemma4(name, result, err);
  bad_syntax(syntax, err);
  return NULL;
}

char *toolcall_render_error_syntax(ToolCallSyntax syntax, const char *name, const char *message, FimiError *err) {
  if (syntax == TOOLCALL_SYNTAX_JSON) return toolcall_render_error(name, message, err);
  if (syntax == TOOLCALL_SYNTAX_GEMMA4) return toolcall_render_error_gemma4(name, message, err);
  bad_syntax(syntax, err);
  return NULL;
}

int toolcall_result_is_error(ToolCallSyntax syntax, const char *text) {
  if (!text) return 0;
  if (syntax == TOOLCALL_SYNTAX_GEMMA4) {
    static const char head[] = "<|tool_response>response:";
    if (strncmp(text, head, sizeof head - 1) != 0) return 0;
    const char *p = text + sizeof head - 1;
    while (*p && *p != '{') p++;
    return strncmp(p, "{error:", 7) == 0;
  }
  cJSON *obj = cJSON_Parse(text);
  int bad = cJSON_IsObject(obj) && cJSON_GetObjectItemCaseSensitive(obj, "error") != NULL;
  cJSON_Delete(obj);
  return bad;
}
