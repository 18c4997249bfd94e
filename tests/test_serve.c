// tests/test_serve.c: `fimi serve` without a model's randomness. A scripted
// policy plays a chosen token script after every prefill (the logits put
// all mass on the script's next token, so greedy and sampled choices agree),
// and counts the tokens it was asked to prefill. Checked:
// - request parsing: every malformed or unsupported body is a 400 naming
//   the parameter; the defaults; tool messages become fimi's tool turns;
// - the engine: the whole script, max_tokens (length), a stop string cut
//   and never streamed in part, n choices, more jobs than slots, a prefix
//   found in the cache (only the new tokens prefilled), a queue that is
//   full (429) and a prompt too long (400);
// - answers: a scripted tool call comes back as tool_calls with its
//   arguments as a JSON string; tool_choice none leaves it as text;
// - streams: the content deltas joined equal the whole answer's content, a
//   tool call streams as one tool_calls delta, usage comes when asked, the
//   stream ends with [DONE];
// - HTTP (libmicrohttpd, libcurl from net/http.h): the API key (401), an
//   unknown path (404), a wrong method (405), a body over the limit (413),
//   a completion and a stream over the wire.
#define _GNU_SOURCE  // strndup
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "data/chat.h"
#include "net/http.h"
#include "rl_fixture.h"
#include "serve/api.h"
#include "serve/engine.h"
#include "serve/http.h"
#include "serve/openai_request.h"
#include "test_util.h"

static const char *const FAMILIES[] = {"balance_enquiry", NULL};
static RlFixture fx;

// ---- the scripted policy ----------------------------------------------------------------------

enum { SLOTS = 3, CAPACITY = 512, MAX_SCRIPT = 128 };

typedef struct Scripted {
  int V;
  int length[SLOTS], start[SLOTS];  // cached tokens; where the script began
  int ids[SLOTS][CAPACITY];         // the cached tokens
  int script[MAX_SCRIPT], script_len;
  long prefilled;                   // tokens prefilled in all
  pthread_mutex_t gate_lock;
  pthread_cond_t gate_open;
  int gate_closed;                  // decode waits while set
} Scripted;

static Scripted sp;

static void one_hot(int slot, float *logits) {
  int k = sp.length[slot] - sp.start[slot];
  int id = k < sp.script_len ? sp.script[k] : sp.script[sp.script_len - 1];
  for (int v = 0; v < sp.V; v++) logits[v] = v == id ? 10.0f : -10.0f;
}

// A sequence that ends with the script's first tokens (a forced
// tool_choice start) has the script go on after them.
static int script_overlap(const int *seq, int n) {
  for (int k = n < sp.script_len ? n : sp.script_len; k > 0; k--)
    if (memcmp(seq + n - k, sp.script, sizeof(int) * (size_t)k) == 0) return k;
  return 0;
}

static int sp_prefill(void *ctx, int slot, const int *tokens, int n, float *logits, FimiError *err) {
  (void)ctx;
  if (sp.length[slot] + n > CAPACITY) return fimi_fail(err, "scripted: full");
  memcpy(sp.ids[slot] + sp.length[slot], tokens, sizeof(int) * (size_t)n);
  sp.length[slot] += n;
  sp.start[slot] = sp.length[slot] - script_overlap(sp.ids[slot], sp.length[slot]);
  sp.prefilled += n;
  one_hot(slot, logits);
  return 0;
}

static int sp_decode(void *ctx, const int *tokens, const int *active, float *logits, FimiError *err) {
  (void)ctx, (void)err;
  pthread_mutex_lock(&sp.gate_lock);
  while (sp.gate_closed) pthread_cond_wait(&sp.gate_open, &sp.gate_lock);
  pthread_mutex_unlock(&sp.gate_lock);
  for (int b = 0; b < SLOTS; b++)
    if (active[b]) sp.ids[b][sp.length[b]++] = tokens[b], one_hot(b, logits + (size_t)b * sp.V);
  return 0;
}

static int sp_copy(void *ctx, int dst, int src, FimiError *err) {
  (void)ctx, (void)err;
  sp.length[dst] = sp.length[src];
  sp.start[dst] = sp.start[src];
  memcpy(sp.ids[dst], sp.ids[src], sizeof(int) * (size_t)sp.length[src]);
  return 0;
}

static void sp_reset(void *ctx, int slot) { (void)ctx, sp.length[slot] = 0; }
static void sp_truncate(void *ctx, int slot, int n) { (void)ctx, sp.length[slot] = n < sp.length[slot] ? n : sp.length[slot]; }

static void set_gate(int closed) {
  pthread_mutex_lock(&sp.gate_lock);
  sp.gate_closed = closed;
  pthread_cond_broadcast(&sp.gate_open);
  pthread_mutex_unlock(&sp.gate_lock);
}

// The script: text encoded as a model turn would be, then <end_of_turn>.
static void set_script(const char *text) {
  ChatBuilder b;
  FimiError err = {0};
  chat_init(&b, fx.tok, &err);
  chat_begin(&b, &err);
  size_t before = b.ids.len + 1 + b.header[CHAT_MODEL].len;  // <start_of_turn>model\n
  CHECK(chat_append_turn(&b, CHAT_MODEL, text, strlen(text), &err) == 0, "script: %s", err.message);
  sp.script_len = 0;
  for (size_t i = before; i < b.ids.len - b.newline.len && sp.script_len < MAX_SCRIPT; i++)
    sp.script[sp.script_len++] = b.ids.data[i];  // the content and <end_of_turn>
  chat_free(&b);
}

// ---- helpers ----------------------------------------------------------------------------------

static ServeEngine *engine;
static ServeApi api;

static void post(const char *body, ServeHttpResponse *r) {
  ServeHttpRequest q = {.method = "POST", .path = "/v1/chat/completions", .body = body, .body_length = strlen(body)};
  serve_api_handle(&api, &q, r);
}

static cJSON *post_json(const char *body, int *status) {
  ServeHttpResponse r;
  post(body, &r);
  *status = r.status;
  cJSON *json = r.body ? cJSON_Parse(r.body) : NULL;
  serve_http_response_free(&r);
  return json;
}

static const char *message_content(const cJSON *answer, int choice) {
  const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(answer, "choices"), choice);
  const cJSON *content = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content");
  return cJSON_IsString(content) ? content->valuestring : NULL;
}

static const char *finish_of(const cJSON *answer, int choice) {
  const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(answer, "choices"), choice);
  const cJSON *f = cJSON_GetObjectItem(c, "finish_reason");
  return cJSON_IsString(f) ? f->valuestring : "";
}

static int usage_of(const cJSON *answer, const char *key) {
  const cJSON *u = cJSON_GetObjectItem(answer, "usage");
  const cJSON *v = cJSON_GetObjectItem(u, key);
  if (!v) v = cJSON_GetObjectItem(cJSON_GetObjectItem(u, "prompt_tokens_details"), key);
  return cJSON_IsNumber(v) ? v->valueint : -1;
}

#define USER "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]"

// ---- request parsing ---------------------------------------------------------------------------

static void test_parse_errors(void) {
  static const struct {
    const char *body, *param;
  } bad[] = {
      {"", ""},
      {"[1]", ""},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "model"},
      {"{\"model\":\"m\",\"messages\":[]}", "messages"},
      {USER ",\"temperature\":3}", "temperature"},
      {USER ",\"temperature\":\"hot\"}", "temperature"},
      {USER ",\"top_p\":1.5}", "top_p"},
      {USER ",\"max_tokens\":0}", "max_tokens"},
      {USER ",\"max_tokens\":1.5}", "max_tokens"},
      {USER ",\"n\":17}", "n"},
      {USER ",\"n\":4}", "n"},  // more than the engine's 3 sequences
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\\u0000 there\"}]}", ""},
      {USER ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop"},
      {USER ",\"stop\":\"\"}", "stop"},
      {USER ",\"stream\":\"yes\"}", "stream"},
      {USER ",\"stream_options\":{\"include_usage\":true}}", "stream_options"},
      {USER ",\"logprobs\":true}", "logprobs"},
      {USER ",\"presence_penalty\":0.5}", "presence_penalty"},
      {USER ",\"logit_bias\":{\"5\":1}}", "logit_bias"},
      {USER ",\"response_format\":{\"type\":\"json_object\"}}", "response_format"},
      {USER ",\"tool_choice\":\"required\"}", "tool_choice"},
      {USER ",\"tool_choice\":\"sometimes\"}", "tool_choice"},
      {USER ",\"tools\":{}}", "tools"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"tool_call_id\":\"nope\",\"content\":\"1\"}]}",
       "messages[0].tool_call_id"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
       "messages[0].content"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ServeHttpResponse r;
    post(bad[i].body, &r);
    cJSON *json = r.body ? cJSON_Parse(r.body) : NULL;
    const cJSON *param = cJSON_GetObjectItem(cJSON_GetObjectItem(json, "error"), "param");
    const char *got = cJSON_IsString(param) ? param->valuestring : "";
    CHECK(r.status == 400 && strcmp(got, bad[i].param) == 0, "body %zu (%s): status %d, param \"%s\"", i,
          bad[i].body, r.status, got);
    cJSON_Delete(json);
    serve_http_response_free(&r);
  }
  ServeRequest q;
  ServeError e;
  const char *ok = USER ",\"top_p\":0,\"seed\":-3,\"stop\":\"x\",\"frequency_penalty\":0,\"user\":\"u\"}";
  CHECK(serve_request_parse(ok, strlen(ok), &q, &e) == 0, "a valid request: %s", e.message);
  CHECK(q.sampler.temperature == 0 && q.n == 1 && q.num_stop == 1 && q.has_seed && q.max_tokens == 0,
        "top_p 0 is greedy; defaults");
  serve_request_free(&q);
}

// The tool turn a tool message becomes, and an assistant call before it.
static void test_render_tool_turns(void) {
  const char *body =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"balance?\"},"
      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
      "\"function\":{\"name\":\"get_balance\",\"arguments\":\"{\\\"account_id\\\":\\\"SB1\\\"}\"}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"{\\\"balance\\\":5}\"},"
      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c2\",\"type\":\"function\","
      "\"function\":{\"name\":\"get_balance\",\"arguments\":\"{}\"}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"{\\\"error\\\":\\\"no account\\\"}\"}]}";
  ServeRequest q;
  ServeError e;
  FimiError err = {0};
  CHECK(serve_request_parse(body, strlen(body), &q, &e) == 0, "tool history parses: %s", e.message);
  ChatBuilder b, want;
  TokenIds prompt = {0};
  int forced = -1;
  chat_init(&b, fx.tok, &err);
  chat_init(&want, fx.tok, &err);
  CHECK(serve_request_render(&q, &b, &prompt, &forced, &e) == 0 && forced == 0, "renders: %s", e.message);
  // The same conversation in fimi's own terms: chat_render_* turns.
  cJSON *args = cJSON_Parse("{\"account_id\":\"SB1\"}"), *result = cJSON_Parse("{\"balance\":5}");
  char *call1 = chat_render_call(&want, "get_balance", args, &err);
  cJSON *empty = cJSON_CreateObject();
  char *call2 = chat_render_call(&want, "get_balance", empty, &err);
  char *res = chat_render_result(&want, "get_balance", result, &err);
  char *fail = chat_render_error(&want, "get_balance", "no account", &err);
  chat_begin(&want, &err);
  chat_append_turn(&want, CHAT_USER, "balance?", 8, &err);
  chat_append_turn(&want, CHAT_MODEL, call1, strlen(call1), &err);
  chat_append_turn(&want, CHAT_TOOL, res, strlen(res), &err);
  chat_append_turn(&want, CHAT_MODEL, call2, strlen(call2), &err);
  chat_append_turn(&want, CHAT_TOOL, fail, strlen(fail), &err);
  chat_append_generation_prompt(&want, &err);
  CHECK(prompt.len == want.ids.len && memcmp(prompt.data, want.ids.data, prompt.len * sizeof(int32_t)) == 0,
        "tool messages render as fimi's tool turns (%zu vs %zu ids)", prompt.len, want.ids.len);
  free(call1), free(call2), free(res), free(fail);
  cJSON_Delete(args), cJSON_Delete(result), cJSON_Delete(empty);
  token_ids_free(&prompt);
  chat_free(&b);
  chat_free(&want);
  serve_request_free(&q);
}

// ---- the engine and the answers ----------------------------------------------------------------

static void test_completions(void) {
  int status = 0;
  set_script("Your balance is 500 rupees.");
  cJSON *a = post_json(USER ",\"temperature\":0}", &status);
  CHECK(status == 200 && message_content(a, 0) && strcmp(message_content(a, 0), "Your balance is 500 rupees.") == 0,
        "the script comes back whole: %s", message_content(a, 0));
  CHECK(strcmp(finish_of(a, 0), "stop") == 0, "finish stop");
  CHECK(usage_of(a, "completion_tokens") == sp.script_len, "completion tokens %d (script %d, <end_of_turn> included)",
        usage_of(a, "completion_tokens"), sp.script_len);
  int prompt_tokens = usage_of(a, "prompt_tokens");
  cJSON_Delete(a);
  // The same prompt again: only its last token is prefilled.
  long before = sp.prefilled;
  a = post_json(USER ",\"max_tokens\":3}", &status);
  CHECK(status == 200 && strcmp(finish_of(a, 0), "length") == 0 && usage_of(a, "completion_tokens") == 3,
        "max_tokens 3: finish %s, %d tokens", finish_of(a, 0), usage_of(a, "completion_tokens"));
  CHECK(sp.prefilled - before == 1 && usage_of(a, "cached_tokens") == prompt_tokens - 1,
        "the cached prefix is reused: %ld prefilled, %d cached of %d", sp.prefilled - before,
        usage_of(a, "cached_tokens"), prompt_tokens);
  cJSON_Delete(a);
  // A stop string: cut before it; n choices.
  a = post_json(USER ",\"stop\":[\"500\"],\"n\":3}", &status);
  for (int i = 0; i < 3; i++)
    CHECK(status == 200 && message_content(a, i) && strcmp(message_content(a, i), "Your balance is ") == 0 &&
              strcmp(finish_of(a, i), "stop") == 0,
          "choice %d cut at the stop string: \"%s\"", i, message_content(a, i));
  cJSON_Delete(a);
  // Too long a prompt.
  char *big = malloc(8000);
  snprintf(big, 8000, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"");
  for (int i = 0; i < 600; i++) strcat(big, "hello ");
  strcat(big, "\"}]}");
  a = post_json(big, &status);
  const cJSON *code = cJSON_GetObjectItem(cJSON_GetObjectItem(a, "error"), "code");
  CHECK(status == 400 && cJSON_IsString(code) && strcmp(code->valuestring, "context_length_exceeded") == 0,
        "a prompt over the context: %d", status);
  cJSON_Delete(a);
  free(big);
  a = post_json("{\"model\":\"other\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &status);
  CHECK(status == 404, "an unknown model: %d", status);
  cJSON_Delete(a);
}

#define TOOLS                                                                                                 \
  ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_balance\",\"description\":\"the balance\"," \
  "\"parameters\":{\"type\":\"object\",\"properties\":{\"account_id\":{\"type\":\"string\"}}}}}]"
#define CALL_TEXT "<tool_call>{\"name\":\"get_balance\",\"arguments\":{\"account_id\":\"SB1\"}}</tool_call>"

static void test_tool_calls(void) {
  int status = 0;
  set_script(CALL_TEXT);
  cJSON *a = post_json(USER TOOLS "}", &status);
  const cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "choices"), 0), "message");
  const cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItem(msg, "tool_calls"), 0);
  const cJSON *fn = cJSON_GetObjectItem(call, "function");
  const cJSON *name = cJSON_GetObjectItem(fn, "name"), *args = cJSON_GetObjectItem(fn, "arguments");
  const cJSON *id = cJSON_GetObjectItem(call, "id");
  CHECK(status == 200 && cJSON_IsString(name) && strcmp(name->valuestring, "get_balance") == 0 &&
            cJSON_IsString(args) && strcmp(args->valuestring, "{\"account_id\":\"SB1\"}") == 0 &&
            cJSON_IsString(id) && strncmp(id->valuestring, "call_", 5) == 0 &&
            cJSON_IsNull(cJSON_GetObjectItem(msg, "content")),
        "a tool call comes back as tool_calls");
  CHECK(strcmp(finish_of(a, 0), "tool_calls") == 0, "finish tool_calls: %s", finish_of(a, 0));
  cJSON_Delete(a);
  a = post_json(USER TOOLS ",\"tool_choice\":\"none\"}", &status);
  CHECK(status == 200 && message_content(a, 0) && strstr(message_content(a, 0), "get_balance") &&
            strcmp(finish_of(a, 0), "stop") == 0,
        "tool_choice none: the call stays text");
  cJSON_Delete(a);
  // A named tool_choice: the call's start up to the name is forced (tokens
  // of the whole call as a model turn encodes it), the script goes on from
  // there; the forced tokens are the script's own first ones.
  set_script(CALL_TEXT);
  a = post_json(USER TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_balance\"}}}",
                &status);
  msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "choices"), 0), "message");
  fn = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(msg, "tool_calls"), 0), "function");
  args = cJSON_GetObjectItem(fn, "arguments");
  CHECK(status == 200 && cJSON_IsString(args) && strcmp(args->valuestring, "{\"account_id\":\"SB1\"}") == 0,
        "a named tool_choice forces the call's start on the script's own tokens (status %d)", status);
  CHECK(usage_of(a, "completion_tokens") < sp.script_len, "the forced tokens are not generated (%d of %d)",
        usage_of(a, "completion_tokens"), sp.script_len);
  cJSON_Delete(a);
}

// Reads a whole stream; returns the joined content and fills the counts.
static char *read_stream(ServeStream *s, int *tool_deltas, int *finishes, int *usage, int *done) {
  TextBuf all = {0}, content = {0};
  int rc;
  while ((rc = serve_stream_next(s, &all)) == 0) {
  }
  CHECK(rc == 1, "the stream ends");
  *tool_deltas = *finishes = *usage = *done = 0;
  for (char *line = all.data; line && *line;) {
    char *end = strstr(line, "\n\n");
    CHECK(end && (strncmp(line, "data: ", 6) == 0 || line[0] == ':'), "an SSE event or comment");
    if (!end) break;
    *end = '\0';
    if (line[0] == ':') {  // a keep-alive comment
    } else if (strcmp(line + 6, "[DONE]") == 0) {
      (*done)++;
    } else {
      cJSON *chunk = cJSON_Parse(line + 6);
      const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItem(chunk, "choices"), 0);
      const cJSON *delta = cJSON_GetObjectItem(choice, "delta");
      const cJSON *c = cJSON_GetObjectItem(delta, "content");
      if (cJSON_IsString(c)) text_append_str(&content, c->valuestring, NULL);
      *tool_deltas += cJSON_GetObjectItem(delta, "tool_calls") != NULL;
      *finishes += cJSON_IsString(cJSON_GetObjectItem(choice, "finish_reason"));
      *usage += cJSON_GetObjectItem(chunk, "usage") != NULL;
      cJSON_Delete(chunk);
    }
    line = end + 2;
  }
  text_free(&all);
  if (!content.data) text_append(&content, "", 0, NULL);
  return content.data;
}

static void test_streams(void) {
  set_script("Your balance is 500 rupees.");
  ServeHttpResponse r;
  post(USER ",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"stop\":\"rupees\"}", &r);
  CHECK(r.status == 200 && r.stream, "a stream starts");
  int tools = 0, finishes = 0, usage = 0, done = 0;
  char *text = r.stream ? read_stream(r.stream, &tools, &finishes, &usage, &done) : NULL;
  CHECK(text && strcmp(text, "Your balance is 500 ") == 0, "streamed content = the whole answer's: \"%s\"", text);
  CHECK(finishes == 1 && usage == 1 && done == 1 && tools == 0, "one finish, usage, [DONE]");
  free(text);
  serve_http_response_free(&r);
  set_script("Checking. " CALL_TEXT);
  post(USER TOOLS ",\"stream\":true}", &r);
  text = r.stream ? read_stream(r.stream, &tools, &finishes, &usage, &done) : NULL;
  CHECK(text && strcmp(text, "Checking. ") == 0 && tools == 1 && finishes == 1 && usage == 0 && done == 1,
        "a streamed call: content before the tag (\"%s\"), one tool_calls delta (%d)", text, tools);
  free(text);
  serve_http_response_free(&r);
}

// A stream with nothing new for keepalive_s sends an SSE comment (a long
// prefill or a tool call being generated never looks idle).
static void test_keepalive(void) {
  set_script("Your balance is 500 rupees.");
  set_gate(1);  // decode waits: nothing after the first token
  ServeHttpResponse r;
  post(USER ",\"stream\":true}", &r);
  TextBuf out = {0};
  int rc = r.stream ? 0 : -1, calls = 0;
  // The role chunk and the first token's text, then nothing: a comment.
  while (rc == 0 && calls++ < 4 && !(out.data && strstr(out.data, ": keep-alive\n\n")))
    rc = serve_stream_next(r.stream, &out);
  CHECK(rc == 0 && out.data && strstr(out.data, ": keep-alive\n\n") && !strstr(out.data, "[DONE]"),
        "a keep-alive comment while waiting");
  set_gate(0);
  while (rc == 0) rc = serve_stream_next(r.stream, &out);
  CHECK(rc == 1 && strstr(out.data, "data: [DONE]"), "the stream then ends as usual");
  text_free(&out);
  serve_http_response_free(&r);
}

// More jobs than slots; then a full queue.
static void *post_thread(void *arg) {
  int status = 429;
  cJSON *a = NULL;
  while (status == 429) {  // a full queue: try again, as clients do
    cJSON_Delete(a);
    a = post_json(USER "}", &status);
  }
  *(int *)arg = status == 200 && message_content(a, 0) && strcmp(message_content(a, 0), "hi") == 0;
  cJSON_Delete(a);
  return NULL;
}

static void test_concurrency(void) {
  set_script("hi");
  enum { N = 10 };
  pthread_t t[N];
  int ok[N];
  for (int i = 0; i < N; i++) pthread_create(&t[i], NULL, post_thread, &ok[i]);
  int all = 1;
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL), all &= ok[i];
  CHECK(all, "%d requests over %d slots all answered", N, SLOTS);
  // Three slots held by a decode that waits; the queue (2) fills; the next is refused.
  set_gate(1);
  ServeHttpResponse held[5];
  for (int i = 0; i < 5; i++) post(USER ",\"stream\":true,\"n\":3}", &held[i]);
  int refused = 0;
  for (int i = 0; i < 5; i++) refused += held[i].status == 429;
  CHECK(refused >= 2, "a full queue answers 429 (%d of 5)", refused);
  set_gate(0);
  for (int i = 0; i < 5; i++) serve_http_response_free(&held[i]);  // cancels the streams
}

// ---- over HTTP -----------------------------------------------------------------------------------

static long http_call(int port, const char *method, const char *path, const char *key, const char *body,
                      char **answer) {
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  HttpRequest q = {.method = method, .url = url, .bearer_token = key, .content_type = body ? "application/json" : NULL,
                   .body = body, .body_size = body ? strlen(body) : 0, .timeout_s = 30};
  HttpResponse r;
  FimiError err = {0};
  if (http_request(&q, &r, &err) != 0) {
    fprintf(stderr, "http: %s\n", err.message);
    return -1;
  }
  long status = r.status;
  if (answer) *answer = strdup(r.body);
  http_response_free(&r);
  return status;
}

// The content deltas of an SSE answer joined (how the text is cut into
// events depends on timing).
static void joined_content(const char *sse, char *out, size_t size) {
  size_t n = 0;
  for (const char *p = sse; (p = strstr(p, "\"content\":\"")) != NULL;) {
    p += 11;
    while (*p && *p != '"' && n + 1 < size) out[n++] = *p++;
  }
  out[n] = '\0';
}

static void test_http(void) {
  ServeApi keyed;
  FimiError err = {0};
  ServeApiConfig c = {.model_name = "m", .api_key = "0123456789abcdef-key", .max_body_bytes = 2048};
  serve_api_init(&keyed, &c, engine, fx.tok, &err);
  HttpListen listen;
  http_listen_parse("127.0.0.1:0", "--listen", &listen, &err);
  ServeHttpServer *server = NULL;
  CHECK(serve_http_start(&keyed, &listen, 0, 16, 30, &server, &err) == 0, "server starts: %s", err.message);
  if (!server) return;
  int port = serve_http_port(server);
  const char *key = c.api_key;
  set_script("Hello over HTTP.");
  CHECK(http_call(port, "GET", "/v1/models", NULL, NULL, NULL) == 401, "no key: 401");
  CHECK(http_call(port, "GET", "/v1/models", "wrong-key-0123456789", NULL, NULL) == 401, "a wrong key: 401");
  CHECK(http_call(port, "GET", "/v1/models", key, NULL, NULL) == 200, "models: 200");
  CHECK(http_call(port, "GET", "/v2/nothing", key, NULL, NULL) == 404, "unknown path: 404");
  CHECK(http_call(port, "GET", "/v1/chat/completions", key, NULL, NULL) == 405, "GET completions: 405");
  char *big = calloc(4000, 1);
  memset(big, 'x', 3999);
  CHECK(http_call(port, "POST", "/v1/chat/completions", key, big, NULL) == 413, "a body over the limit: 413");
  free(big);
  char *answer = NULL;
  CHECK(http_call(port, "POST", "/v1/chat/completions", key, USER "}", &answer) == 200 && answer &&
            strstr(answer, "Hello over HTTP."),
        "a completion over HTTP: %s", answer ? answer : "");
  free(answer);
  answer = NULL;
  char text[256] = "";
  long status = http_call(port, "POST", "/v1/chat/completions", key, USER ",\"stream\":true}", &answer);
  if (answer) joined_content(answer, text, sizeof text);
  CHECK(status == 200 && answer && strstr(answer, "data: [DONE]") && strcmp(text, "Hello over HTTP.") == 0,
        "a stream over HTTP: \"%s\"", text);
  free(answer);
  serve_http_stop(server);
  serve_api_free(&keyed);
}

int main(void) {
  FimiError err = {0};
  if (rl_fixture_init(&fx, FAMILIES, 1, ENV_CATALOG_FAMILY, 400, 1, &err) != 0) {
    fprintf(stderr, "fixture: %s\n", err.message);
    return 1;
  }
  sp.V = tokenizer_vocab_size(fx.tok);
  pthread_mutex_init(&sp.gate_lock, NULL);
  pthread_cond_init(&sp.gate_open, NULL);
  RolloutPolicy policy = {sp_prefill, sp_decode, sp_copy, sp_reset, sp_truncate, NULL, sp.V, SLOTS, CAPACITY};
  ServeEngineConfig ec = {.max_queue = 2, .num_stop_ids = 1};
  ec.stop_ids[0] = tokenizer_specials(fx.tok)->end_of_turn;
  ServeApiConfig ac = {.model_name = "m", .max_body_bytes = 1 << 20, .keepalive_s = 0.2};
  CHECK(serve_engine_start(&policy, fx.tok, &ec, &engine, &err) == 0, "engine: %s", err.message);
  CHECK(serve_api_init(&api, &ac, engine, fx.tok, &err) == 0, "api: %s", err.message);
  test_parse_errors();
  test_render_tool_turns();
  test_completions();
  test_tool_calls();
  test_streams();
  test_keepalive();
  test_concurrency();
  test_http();
  serve_engine_free(engine);
  serve_api_free(&api);
  rl_fixture_free(&fx);
  TEST_MAIN_END();
}
