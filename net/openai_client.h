// net/openai_client.h: fimi's one client for served models on the OpenAI
// chat-completions API (docs/serving.md, "Served models as agents"): `fimi
// serve`, vLLM, llama.cpp, transformers serve, or a hosted API. Defines
// OpenAIClientConfig, OpenAIClient, OpenAIChat (one answer, read
// defensively), openai_client_create/_free, openai_chat and
// openai_parse_chat_response.
//
// What it does for every caller: a bound on requests in flight
// (max_concurrent: callers beyond it wait), timeouts, retries with
// exponential backoff on 429, 5xx and transport failures, errors that name
// the endpoint and the status, and a response cache on disk keyed by the
// request (SHA-256 of the model name and the request body): record mode
// answers from the cache when it can and stores every new answer; replay
// mode answers only from the cache (a miss is an error), so a run that used
// a served model can be replayed exactly, offline.
//
// The answer is untrusted: a body that is not a chat completion, a message
// with neither content nor a call, a tool call whose arguments are not a
// JSON object all come back as an OpenAIChat with `malformed` set (never a
// failure, never a crash; tests/fuzz/fuzz_openai_response.c).
#ifndef FIMI_NET_OPENAI_CLIENT_H
#define FIMI_NET_OPENAI_CLIENT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/error.h"

typedef enum { OPENAI_CACHE_OFF = 0, OPENAI_CACHE_RECORD, OPENAI_CACHE_REPLAY } OpenAICacheMode;

typedef struct OpenAIClientConfig {
  const char *endpoint;     // base URL ending in /v1 (".../chat/completions" is appended)
  const char *model;        // the served model's name
  const char *api_key;      // NULL or "": no Authorization header
  double timeout_s;         // one request (<= 0: 300)
  int max_retries;          // after the first try (< 0: 4)
  double backoff_s;         // the first wait; doubled each retry, at most 30 s (<= 0: 0.5)
  int max_concurrent;       // requests in flight at once (<= 0: 8)
  const char *cache_dir;    // NULL: no cache
  OpenAICacheMode cache_mode;
} OpenAIClientConfig;

typedef struct OpenAIClient OpenAIClient;

// Checks the endpoint URL and creates the cache folder (record mode).
int openai_client_create(const OpenAIClientConfig *c, OpenAIClient **out, FimiError *err);
void openai_client_free(OpenAIClient *c);

// One answer.
typedef struct OpenAIChat {
  int status;              // HTTP status of the answer (200 when used)
  char *content;           // the message's text, or NULL
  int has_call;            // a tool call (the first, when several)
  char call_id[128];
  char call_name[128];
  char *call_arguments;    // the arguments' JSON text (an object when !malformed)
  int calls;               // tool calls in the message
  int malformed;           // the body or the message was unusable (see above)
  char malformed_why[160];
  char finish_reason[32];
  int prompt_tokens, completion_tokens;  // the server's usage (0 when it gave none)
  int cached_tokens;       // usage.prompt_tokens_details.cached_tokens (0 when not given)
  char error_code[64];     // a refusal's error.code ("context_length_exceeded"), else ""
  int from_cache;
} OpenAIChat;

void openai_chat_free(OpenAIChat *r);

// openai_chat's refusal of one request: the server answered 4xx (not 429,
// 401, 403 or 404); err has its message, out->status and out->error_code
// are set.
#define OPENAI_REFUSED (-3)

// Sends body (a chat-completions request without "model", which is added)
// and reads the answer into *out: 0; OPENAI_REFUSED; -1 when no answer came
// after the retries, the server refused the client itself (401, 403, 404: a
// wrong key, model name or URL; never cached), a replay missed the cache,
// or the request could not be made (err names the endpoint and status).
int openai_chat(OpenAIClient *c, const cJSON *body, OpenAIChat *out, FimiError *err);

// Appends {"role": role, "content": content} to a request's messages array.
void openai_add_message(cJSON *messages, const char *role, const char *content);

// Reads a 200 answer's body (any bytes) into *out (zeroed first).
void openai_parse_chat_response(const char *body, size_t length, OpenAIChat *out);

#endif
