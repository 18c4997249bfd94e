// tests/fuzz/fuzz_serve_request.c: libFuzzer target for what `fimi serve`
// reads from a client and from its model (serve/openai_request.h,
// serve/openai_response.h). One input is a request body: parsed, and when it
// parses, rendered in fimi's chat format; the same bytes are then read as a
// model turn and answered as an assistant message. abort() (a libFuzzer
// crash) when:
// - a refused body's error is not a 400 with a message, or its error object
//   does not print as valid JSON;
// - a parsed request renders to no ids, or fails with anything but a 400;
// - a forced tool_choice start is longer than the prompt;
// - the assistant message of the bytes does not print as valid JSON, or has
//   tool_calls whose arguments are not a JSON object's text.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe_train.h"
#include "data/chat.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"

static Tokenizer *tok;

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_serve_request: invariant failed: %s\n  %.400s\n", what, detail ? detail : "");
  abort();
}

static void setup(void) {
  const char *texts[] = {"Please share your customer id. Your balance is 500 rupees. {\"name\": \"get_balance\"}"};
  size_t lens[] = {strlen(texts[0])};
  const char *names[] = {"agent"};
  BpeTrainOptions opt;
  bpe_train_default_options(&opt);
  opt.vocab_size = 300;
  char *json = NULL;
  FimiError err = {0};
  if (bpe_train_texts(texts, lens, names, 1, &opt, &json, NULL, &err) != 0 ||
      tokenizer_load_json(json, strlen(json), "fuzz tokenizer", &tok, &err) != 0)
    fail("setup", err.message);
  free(json);
}

static void check_error(const ServeError *e) {
  if (e->status != 400 || !e->message[0]) fail("a refusal is not a 400 with a message", e->message);
  char *body = serve_error_body(e);
  cJSON *parsed = body ? cJSON_Parse(body) : NULL;
  if (!cJSON_IsObject(cJSON_GetObjectItem(parsed, "error"))) fail("the error object does not print", body);
  cJSON_Delete(parsed);
  free(body);
}

static void check_render(const ServeRequest *q) {
  ChatBuilder b;
  FimiError err = {0};
  if (chat_init(&b, tok, &err) != 0) fail("chat_init", err.message);
  TokenIds prompt = {0};
  int forced = 0;
  ServeError e;
  if (serve_request_render(q, &b, &prompt, &forced, &e) == 0) {
    if (prompt.len == 0 || forced < 0 || (size_t)forced >= prompt.len) fail("a rendered prompt", "");
  } else {
    check_error(&e);
  }
  token_ids_free(&prompt);
  chat_free(&b);
}

static void check_answer(const uint8_t *data, size_t size) {
  ChatBuilder b;
  FimiError err = {0};
  if (chat_init(&b, tok, &err) != 0) fail("chat_init", err.message);
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  int is_call = 0;
  cJSON *msg = serve_assistant_message(&b, text, size, 1, "call_0", &is_call);
  char *printed = msg ? cJSON_PrintUnformatted(msg) : NULL;
  cJSON *back = printed ? cJSON_Parse(printed) : NULL;
  if (!back) fail("the assistant message does not print as JSON", text);
  if (is_call) {
    const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(back, "tool_calls"), 0), "function");
    const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
    cJSON *parsed = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
    if (!cJSON_IsObject(parsed)) fail("tool call arguments are not an object's JSON", printed);
    cJSON_Delete(parsed);
  }
  cJSON_Delete(back);
  cJSON_Delete(msg);
  free(printed);
  free(text);
  chat_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!tok) setup();
  if (size > (1 << 16)) return 0;
  ServeRequest q;
  ServeError e;
  if (serve_request_parse((const char *)data, size, &q, &e) == 0) {
    check_render(&q);
    serve_request_free(&q);
  } else {
    check_error(&e);
  }
  check_answer(data, size);
  return 0;
}
