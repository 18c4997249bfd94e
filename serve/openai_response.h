// serve/openai_response.h: the JSON `fimi serve` answers with, in the
// OpenAI API's shapes (docs/serving.md). Defines serve_error_body,
// serve_models_body, serve_assistant_message (a finished choice's text as a
// message, its tool call parsed into tool_calls), serve_usage and
// serve_chunk (one event of a stream).
#ifndef FIMI_SERVE_OPENAI_RESPONSE_H
#define FIMI_SERVE_OPENAI_RESPONSE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "data/chat.h"
#include "serve/openai_request.h"

// {"error": {"message", "type", "param", "code"}}. Malloc'd (NULL: out of memory).
char *serve_error_body(const ServeError *e);
// GET /v1/models: one model. Malloc'd.
char *serve_models_body(const char *model, long created);

// The assistant message of a choice's text. parse_calls: the text is read
// as a model turn (chat_parse_model_turn with b's format) and a tool call
// becomes tool_calls[0] with id call_id and its arguments as a JSON string,
// content the text before it (null when none); *is_call is set. Otherwise,
// or when the turn is a message or a call that does not parse, the whole
// text is the content. NULL: out of memory.
cJSON *serve_assistant_message(const ChatBuilder *b, const char *text, size_t len, int parse_calls,
                               const char *call_id, int *is_call);

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}}.
cJSON *serve_usage(int prompt_tokens, int completion_tokens, int cached_tokens);

// One chat.completion.chunk: choices [{index, delta, finish_reason}] (delta
// taken; NULL delta: no choices, for the usage chunk), usage taken when not NULL.
// Returns "data: {...}\n\n" malloc'd.
char *serve_chunk(const char *id, long created, const char *model, int index, cJSON *delta,
                  const char *finish_reason, cJSON *usage);

// A chat.completion object: choices and usage taken. Malloc'd JSON text.
char *serve_completion_body(const char *id, long created, const char *model, cJSON *choices, cJSON *usage);

#endif
