// tests/fuzz/fuzz_openai_response.c: libFuzzer target for reading a served
// model's answer (net/openai_client.h, openai_parse_chat_response): any
// bytes as the body of a 200 answer. abort() (a libFuzzer crash) when:
// - the answer is neither usable nor marked malformed (no content, no call,
//   and malformed not set);
// - a call that is not malformed has arguments that are not a JSON
//   object's text, or an empty name;
// - token counts are negative, or the cached tokens exceed the prompt's.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "net/openai_client.h"

static void fail(const char *what) {
  fprintf(stderr, "fuzz_openai_response: invariant failed: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1 << 16)) return 0;
  OpenAIChat r;
  openai_parse_chat_response((const char *)data, size, &r);
  if (!r.malformed && !r.content && !r.has_call) fail("an unusable answer not marked malformed");
  if (r.has_call && !r.call_name[0]) fail("a call without a name");
  if (r.has_call && !r.malformed) {
    cJSON *args = r.call_arguments ? cJSON_Parse(r.call_arguments) : NULL;
    if (!cJSON_IsObject(args)) fail("a well-formed call whose arguments are not an object");
    cJSON_Delete(args);
  }
  if (r.prompt_tokens < 0 || r.completion_tokens < 0 || r.cached_tokens < 0 || r.cached_tokens > r.prompt_tokens)
    fail("token counts");
  openai_chat_free(&r);
  return 0;
}
