// serve/openai_request.h: a chat-completions request of the OpenAI API as
// `fimi serve` reads it (docs/serving.md). Defines ServeError (an API error:
// HTTP status, type, param, message), ServeRequest, serve_request_parse,
// serve_request_render and serve_request_free.
//
// The body is untrusted: any bytes give a request or a ServeError naming
// the parameter, never a crash (tests/fuzz/fuzz_serve_request.c).
// Supported: model, messages (system or developer first, user, assistant
// with content and/or one tool call, tool with tool_call_id; content as a
// string or an array of text parts), tools, tool_choice (auto, none,
// required, a named function), temperature, top_p, max_tokens or
// max_completion_tokens, stop, seed, n, stream, stream_options.include_usage.
// Accepted when they change nothing: frequency_penalty and presence_penalty
// 0, logprobs false, response_format text, parallel_tool_calls, user,
// metadata, store. Anything that would change the output and is not
// supported (logit_bias, logprobs true, a JSON response_format, penalties)
// is a 400 naming it; other unknown keys are ignored, as most
// OpenAI-compatible servers do.
#ifndef FIMI_SERVE_OPENAI_REQUEST_H
#define FIMI_SERVE_OPENAI_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "data/chat.h"
#include "data/toolcall.h"
#include "model/decode.h"
#include "serve/engine.h"

typedef struct ServeError {
  int status;          // HTTP status
  const char *type;    // "invalid_request_error", "authentication_error", "server_error", ...
  const char *code;    // NULL or e.g. "model_not_found", "context_length_exceeded"
  char param[64];      // "" or the parameter at fault ("messages[2].tool_call_id")
  char message[768];
} ServeError;

// Sets *e and returns -1 (for `return serve_error(...)`).
int serve_error(ServeError *e, int status, const char *type, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

typedef enum {
  SERVE_TOOL_CHOICE_AUTO = 0,
  SERVE_TOOL_CHOICE_NONE,      // tool calls in the output come back as text
  SERVE_TOOL_CHOICE_REQUIRED,  // the turn starts with the tool-call tag
  SERVE_TOOL_CHOICE_NAMED      // the turn starts with the call of tool_name
} ServeToolChoice;

#define SERVE_MAX_MODEL_NAME 256

typedef struct ServeRequest {
  cJSON *root;                 // the parsed body (owned)
  const cJSON *messages;       // in root
  const cJSON *tools;          // in root; NULL when absent or empty
  ServeToolChoice tool_choice;
  char tool_name[TOOLCALL_MAX_NAME_BYTES + 1];
  char model[SERVE_MAX_MODEL_NAME];
  SamplerConfig sampler;       // temperature 1, top_p 1 unless given
  int max_tokens;              // 0: until the context is full
  const char *stop[SERVE_MAX_STOP];  // in root
  int num_stop;
  uint64_t seed;
  int has_seed;
  int n;
  int stream, include_usage;
} ServeRequest;

// 0, or -1 with *e a 400 (a 413 is the transport's).
int serve_request_parse(const char *body, size_t length, ServeRequest *out, ServeError *e);
void serve_request_free(ServeRequest *r);

// Renders the conversation into the empty builder b in fimi's chat format
// (data/chat.h): the messages (tool messages become the tool turns the model
// was trained on: {"name","result"} or {"name","error"} for a content that is
// {"error": "..."}), the tools in the system turn and the generation
// prompt; prompt (empty) gets the builder's ids, then the forced start of
// the model's turn for tool_choice required or a named function
// (*forced_len ids). -1 with *e a 400.
int serve_request_render(const ServeRequest *r, ChatBuilder *b, TokenIds *prompt, int *forced_len, ServeError *e);

#endif
