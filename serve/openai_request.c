// serve/openai_request.c: reading a chat-completions request and rendering
// its conversation in fimi's chat format (see openai_request.h).
#include "serve/openai_request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

int serve_error(ServeError *e, int status, const char *type, const char *code, const char *param, const char *fmt,
                ...) {
  e->status = status;
  e->type = type;
  e->code = code;
  snprintf(e->param, sizeof e->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return -1;
}

static int bad(ServeError *e, const char *param, const char *message) {
  return serve_error(e, 400, "invalid_request_error", NULL, param, "%s: %s", param, message);
}

static const cJSON *field(const cJSON *root, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

// A number in [lo, hi] (open at lo when lo_open) into *out; absent: unchanged.
static int number_in(const cJSON *root, const char *key, double lo, int lo_open, double hi, double *out,
                     ServeError *e) {
  const cJSON *v = field(root, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return bad(e, key, "must be a number");
  double x = v->valuedouble;
  if (x > hi || x < lo || (lo_open && x == lo)) {
    char what[96];
    snprintf(what, sizeof what, "must be in %s%g, %g]", lo_open ? "(" : "[", lo, hi);
    return bad(e, key, what);
  }
  *out = x;
  return 0;
}

// An integer in [lo, hi] into *out; absent: unchanged.
static int integer_in(const cJSON *root, const char *key, double lo, double hi, int64_t *out, ServeError *e) {
  const cJSON *v = field(root, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
    char what[96];
    snprintf(what, sizeof what, "must be an integer from %.0f to %.0f", lo, hi);
    return bad(e, key, what);
  }
  *out = (int64_t)v->valuedouble;
  return 0;
}

static int boolean(const cJSON *root, const char *key, int *out, ServeError *e) {
  const cJSON *v = field(root, key);
  if (!v) return 0;
  if (!cJSON_IsBool(v)) return bad(e, key, "must be true or false");
  *out = cJSON_IsTrue(v);
  return 0;
}

static int parse_stop(const cJSON *root, ServeRequest *r, ServeError *e) {
  const cJSON *v = field(root, "stop");
  if (!v) return 0;
  if (cJSON_IsString(v)) {
    if (!*v->valuestring) return bad(e, "stop", "must not be empty");
    r->stop[r->num_stop++] = v->valuestring;
    return 0;
  }
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > SERVE_MAX_STOP)
    return bad(e, "stop", "must be a string or an array of at most 4 strings");
  for (const cJSON *s = v->child; s; s = s->next) {
    if (!cJSON_IsString(s) || !*s->valuestring) return bad(e, "stop", "every stop sequence must be a non-empty string");
    r->stop[r->num_stop++] = s->valuestring;
  }
  return 0;
}

// The parameters that would change the output and are not supported.
static int refuse_unsupported(const cJSON *root, ServeError *e) {
  static const char *const penalties[] = {"frequency_penalty", "presence_penalty"};
  for (int i = 0; i < 2; i++) {
    double p = 0;
    if (number_in(root, penalties[i], -2, 0, 2, &p, e) != 0) return -1;
    if (p != 0) return bad(e, penalties[i], "is not supported (only 0)");
  }
  int logprobs = 0;
  if (boolean(root, "logprobs", &logprobs, e) != 0) return -1;
  if (logprobs || field(root, "top_logprobs")) return bad(e, "logprobs", "is not supported");
  const cJSON *bias = field(root, "logit_bias");
  if (bias && (!cJSON_IsObject(bias) || bias->child)) return bad(e, "logit_bias", "is not supported");
  const cJSON *format = field(root, "response_format"), *type = cJSON_GetObjectItemCaseSensitive(format, "type");
  if (format && !(cJSON_IsString(type) && strcmp(type->valuestring, "text") == 0))
    return bad(e, "response_format", "only {\"type\": \"text\"} is supported");
  return 0;
}

static int tool_listed(const cJSON *tools, const char *name) {
  for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(fn) ? fn : t, "name");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return 1;
  }
  return 0;
}

static int parse_tool_choice(const cJSON *root, ServeRequest *r, ServeError *e) {
  const cJSON *v = field(root, "tool_choice");
  r->tool_choice = SERVE_TOOL_CHOICE_AUTO;
  if (!v) return 0;
  if (cJSON_IsString(v)) {
    const char *s = v->valuestring;
    if (strcmp(s, "auto") == 0) return 0;
    if (strcmp(s, "none") == 0) return r->tool_choice = SERVE_TOOL_CHOICE_NONE, 0;
    if (strcmp(s, "required") == 0) {
      if (!r->tools) return bad(e, "tool_choice", "\"required\" needs tools");
      return r->tool_choice = SERVE_TOOL_CHOICE_REQUIRED, 0;
    }
    return bad(e, "tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", ...}");
  }
  const cJSON *fn = cJSON_GetObjectItemCaseSensitive(v, "function");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
  if (!cJSON_IsObject(v) || !cJSON_IsString(name) || strlen(name->valuestring) > TOOLCALL_MAX_NAME_BYTES)
    return bad(e, "tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": "
                                 "{\"name\": ...}}");
  if (!tool_listed(r->tools, name->valuestring))
    return bad(e, "tool_choice", "names a function that is not in tools");
  snprintf(r->tool_name, sizeof r->tool_name, "%s", name->valuestring);
  r->tool_choice = SERVE_TOOL_CHOICE_NAMED;
  return 0;
}

static int parse_sampling(const cJSON *root, ServeRequest *r, ServeError *e) {
  double temperature = 1, top_p = 1;
  int64_t max_tokens = 0, n = 1, seed = 0;
  if (number_in(root, "temperature", 0, 0, 2, &temperature, e) != 0 || number_in(root, "top_p", 0, 0, 1, &top_p, e) ||
      integer_in(root, "max_tokens", 1, 1e9, &max_tokens, e) ||
      integer_in(root, "max_completion_tokens", 1, 1e9, &max_tokens, e) ||
      integer_in(root, "n", 1, SERVE_MAX_CHOICES, &n, e) ||
      integer_in(root, "seed", -9.2e18, 9.2e18, &seed, e))
    return -1;
  // top_p 0 keeps only the most likely token: greedy.
  r->sampler = (SamplerConfig){top_p == 0 ? 0.0f : (float)temperature, top_p == 0 ? 1.0f : (float)top_p};
  r->max_tokens = (int)max_tokens;
  r->n = (int)n;
  r->has_seed = field(root, "seed") != NULL;
  r->seed = (uint64_t)seed;
  return 0;
}

static int parse_stream(const cJSON *root, ServeRequest *r, ServeError *e) {
  if (boolean(root, "stream", &r->stream, e) != 0) return -1;
  const cJSON *options = field(root, "stream_options");
  if (!options) return 0;
  if (!r->stream) return bad(e, "stream_options", "is only allowed with stream: true");
  if (!cJSON_IsObject(options)) return bad(e, "stream_options", "must be an object");
  return boolean(options, "include_usage", &r->include_usage, e);
}

// 1 when the JSON text holds the escape \u0000 (not an escaped backslash
// followed by "u0000"): cJSON's strings end at a NUL, so the text after it
// would be lost without a word.
static int has_nul_escape(const char *body, size_t length) {
  for (size_t i = 0; i + 6 <= length; i++) {
    if (body[i] != '\\' || memcmp(body + i + 1, "u0000", 5) != 0) continue;
    size_t slashes = 0;
    while (slashes < i && body[i - 1 - slashes] == '\\') slashes++;
    if (slashes % 2 == 0) return 1;
  }
  return 0;
}

int serve_request_parse(const char *body, size_t length, ServeRequest *r, ServeError *e) {
  memset(r, 0, sizeof *r);
  if (has_nul_escape(body, length))
    return serve_error(e, 400, "invalid_request_error", NULL, "", "the body holds a NUL character (\\u0000), "
                                                                  "which no field may contain");
  r->root = length > 0 && !memchr(body, 0, length) ? cJSON_ParseWithLength(body, length) : NULL;
  if (!cJSON_IsObject(r->root)) {
    serve_request_free(r);
    return serve_error(e, 400, "invalid_request_error", NULL, "", "the body is not a JSON object");
  }
  const cJSON *root = r->root, *model = field(root, "model"), *tools = field(root, "tools");
  int rc = 0;
  if (!cJSON_IsString(model) || strlen(model->valuestring) >= sizeof r->model)
    rc = bad(e, "model", "a model name (string) is required");
  else
    snprintf(r->model, sizeof r->model, "%s", model->valuestring);
  r->messages = field(root, "messages");
  if (rc == 0 && (!cJSON_IsArray(r->messages) || !r->messages->child))
    rc = bad(e, "messages", "must be a non-empty array");
  if (rc == 0 && tools && !cJSON_IsArray(tools)) rc = bad(e, "tools", "must be an array");
  r->tools = tools && tools->child ? tools : NULL;
  if (rc == 0) rc = parse_tool_choice(root, r, e);
  if (rc == 0) rc = parse_sampling(root, r, e);
  if (rc == 0) rc = parse_stop(root, r, e);
  if (rc == 0) rc = parse_stream(root, r, e);
  if (rc == 0) rc = refuse_unsupported(root, e);
  if (rc != 0) serve_request_free(r);
  return rc;
}

void serve_request_free(ServeRequest *r) {
  cJSON_Delete(r->root);
  memset(r, 0, sizeof *r);
}

// ---- the conversation in fimi's chat format ----------------------------------------------------

// A message's content as one string: a string, or the text parts of an
// array joined. NULL content (an assistant message with a tool call) stays NULL.
static int content_text(const cJSON *msg, int index, TextBuf *out, int *has, ServeError *e) {
  const cJSON *content = field(msg, "content");
  char param[64];
  snprintf(param, sizeof param, "messages[%d].content", index);
  *has = content != NULL;
  if (!content) return 0;
  if (cJSON_IsString(content)) return text_append_str(out, content->valuestring, NULL) ? bad(e, param, "out of memory") : 0;
  if (!cJSON_IsArray(content)) return bad(e, param, "must be a string or an array of text parts");
  for (const cJSON *part = content->child; part; part = part->next) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(text))
      return bad(e, param, "only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
    if (text_append_str(out, text->valuestring, NULL) != 0) return bad(e, param, "out of memory");
  }
  if (!out->data && text_append(out, "", 0, NULL) != 0) return bad(e, param, "out of memory");
  return 0;
}

// The name of the call a tool message answers, by its tool_call_id among
// the earlier assistant messages' calls.
static const char *answered_call(const cJSON *messages, const cJSON *msg, int index, ServeError *e) {
  const cJSON *id = field(msg, "tool_call_id");
  char param[64];
  snprintf(param, sizeof param, "messages[%d].tool_call_id", index);
  if (!cJSON_IsString(id)) return bad(e, param, "a tool message needs the id of the call it answers"), NULL;
  const char *found = NULL;  // the nearest: clients may reuse ids turn after turn
  for (const cJSON *m = messages->child; m && m != msg; m = m->next) {
    const cJSON *calls = field(m, "tool_calls");
    for (const cJSON *c = cJSON_IsArray(calls) ? calls->child : NULL; c; c = c->next) {
      const cJSON *cid = cJSON_GetObjectItemCaseSensitive(c, "id");
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "function"), "name");
      if (cJSON_IsString(cid) && strcmp(cid->valuestring, id->valuestring) == 0 && cJSON_IsString(name))
        found = name->valuestring;
    }
  }
  if (!found) bad(e, param, "answers no tool call of an earlier assistant message");
  return found;
}

// The text of the tool turn fimi's models were trained on (Gemma 3 format):
// {"name":...,"error":...} when the output is {"error": "..."}, else
// {"name":...,"result":...} with the output as JSON (or as a string).
static char *tool_turn_text(const ChatBuilder *b, const char *name, const char *output, FimiError *err) {
  cJSON *value = cJSON_ParseWithLengthOpts(output, strlen(output) + 1, NULL, 1);
  const cJSON *error = cJSON_GetObjectItemCaseSensitive(value, "error");
  char *text = NULL;
  if (cJSON_IsObject(value) && cJSON_IsString(error) && cJSON_GetArraySize(value) == 1)
    text = chat_render_error(b, name, error->valuestring, err);
  else if (value)
    text = chat_render_result(b, name, value, err);
  else {
    cJSON *s = cJSON_CreateString(output);
    text = s ? chat_render_result(b, name, s, err) : NULL;
    cJSON_Delete(s);
  }
  cJSON_Delete(value);
  return text;
}

// One message in the form chat_render_messages reads.
static cJSON *convert_message(const ChatBuilder *b, const cJSON *messages, const cJSON *msg, int index,
                              ServeError *e) {
  const cJSON *role = field(msg, "role");
  char param[64];
  snprintf(param, sizeof param, "messages[%d]", index);
  if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) return bad(e, param, "needs a string \"role\""), NULL;
  const char *r = strcmp(role->valuestring, "developer") == 0 ? "system" : role->valuestring;
  TextBuf text = {0};
  int has = 0;
  if (content_text(msg, index, &text, &has, e) != 0) return text_free(&text), NULL;
  cJSON *out = cJSON_CreateObject();
  cJSON_AddStringToObject(out, "role", r);
  FimiError err = {0};
  if (strcmp(r, "tool") == 0) {
    const char *name = answered_call(messages, msg, index, e);
    char *turn = !name ? NULL : b->format == CHAT_FORMAT_GEMMA4 ? strdup(has ? text.data : "")
                                                                 : tool_turn_text(b, name, has ? text.data : "", &err);
    if (name && !turn) bad(e, param, err.message[0] ? err.message : "out of memory");
    if (turn) cJSON_AddStringToObject(out, "name", name), cJSON_AddStringToObject(out, "content", turn);
    free(turn);
    if (!turn) cJSON_Delete(out), out = NULL;
  } else {
    const cJSON *calls = field(msg, "tool_calls");
    if (has) cJSON_AddStringToObject(out, "content", text.data);
    if (calls) cJSON_AddItemToObject(out, "tool_calls", cJSON_Duplicate(calls, 1));
  }
  text_free(&text);
  return out;
}

// The ids of full (encoded whole, as a model turn's text is) that decode to
// a prefix of target: a token that runs past target's end is left out, so
// the model goes on from a token boundary it was trained on ("{\"name\":
// \"X\"" forced; "\",\"arguments\":{" is the model's own, whatever
// tokens the vocabulary merges it into).
static int encode_prefix(const Tokenizer *tok, const char *full, const char *target, TokenIds *out, FimiError *err) {
  TokenIds ids = {0};
  int rc = tokenizer_encode(tok, full, strlen(full), TOKENIZER_NO_SPECIAL_MATCH, &ids, err);
  size_t n = strlen(target), keep = 0;
  for (size_t k = 1; rc == 0 && k <= ids.len; k++) {
    char *text = NULL;
    size_t len = 0;
    if ((rc = tokenizer_decode(tok, ids.data, k, 0, &text, &len, err)) != 0) break;
    int within = len <= n && memcmp(text, target, len) == 0;
    free(text);
    if (!within) break;
    keep = k;
  }
  if (rc == 0) rc = token_ids_append(out, ids.data, keep, err);
  token_ids_free(&ids);
  return rc;
}

// Appends to prompt the ids that start the model's turn for tool_choice
// required (the call tag) or a named function (the tag and the start of
// the call up to the function's name).
static int forced_start(const ServeRequest *r, const ChatBuilder *b, TokenIds *prompt, int *forced_len,
                        ServeError *e) {
  size_t before = prompt->len;
  FimiError err = {0};
  int gemma4 = b->format == CHAT_FORMAT_GEMMA4;
  int32_t open = gemma4 ? b->markup[CHAT_G4_CALL_OPEN] : b->specials.tool_call_open;
  TextBuf full = {0}, target = {0};
  const char *tag = open < 0 ? "<tool_call>" : "";  // a vocabulary without the tag token spells it
  int rc = text_printf(&full, &err, "%s", tag) || text_printf(&target, &err, "%s", tag);
  if (rc == 0 && r->tool_choice == SERVE_TOOL_CHOICE_NAMED)
    rc = gemma4 ? text_printf(&full, &err, "call:%s{}", r->tool_name) || text_printf(&target, &err, "call:%s", r->tool_name)
                : text_printf(&full, &err, "{\"name\":\"%s\",\"arguments\":{}}", r->tool_name) ||
                      text_printf(&target, &err, "{\"name\":\"%s\"", r->tool_name);
  if (rc == 0 && open >= 0) rc = token_ids_push(prompt, open, &err);
  if (rc == 0 && full.len > 0) rc = encode_prefix(b->tok, full.data, target.data, prompt, &err);
  text_free(&full);
  text_free(&target);
  if (rc != 0) return serve_error(e, 500, "server_error", NULL, "tool_choice", "%s", err.message);
  *forced_len = (int)(prompt->len - before);
  return 0;
}

int serve_request_render(const ServeRequest *r, ChatBuilder *b, TokenIds *prompt, int *forced_len, ServeError *e) {
  *forced_len = 0;
  cJSON *messages = cJSON_CreateArray();
  int index = 0, rc = messages ? 0 : serve_error(e, 500, "server_error", NULL, "", "out of memory");
  for (const cJSON *m = r->messages->child; rc == 0 && m; m = m->next, index++) {
    cJSON *converted = convert_message(b, r->messages, m, index, e);
    if (!converted) rc = -1;
    else cJSON_AddItemToArray(messages, converted);
  }
  FimiError err = {0};
  if (rc == 0 && chat_render_messages(b, messages, r->tools, "request", &err) != 0)
    rc = bad(e, "messages", err.message + (strncmp(err.message, "request: ", 9) == 0 ? 9 : 0));
  cJSON_Delete(messages);
  if (rc == 0 && chat_append_generation_prompt(b, &err) != 0) rc = bad(e, "messages", err.message);
  if (rc == 0 && token_ids_append(prompt, b->ids.data, b->ids.len, &err) != 0)
    rc = serve_error(e, 500, "server_error", NULL, "", "out of memory");
  if (rc == 0 && (r->tool_choice == SERVE_TOOL_CHOICE_REQUIRED || r->tool_choice == SERVE_TOOL_CHOICE_NAMED))
    rc = forced_start(r, b, prompt, forced_len, e);
  return rc;
}
