// serve/api.h: what `fimi serve` answers to one HTTP request, apart from the
// sockets (docs/serving.md): ServeApi (the engine, the tokenizer, the
// served model's name, the API key, limits), ServeHttpRequest in,
// ServeHttpResponse out (a JSON body, or a ServeStream of server-sent
// events). serve/http.c feeds it from libmicrohttpd; tests call it directly.
//
// In order: the API key (401), the path (404), the method (405), the body
// size (413), the request (400: openai_request.h), the model name (404),
// the engine (429 when its queue is full, 400 when the prompt leaves no room
// in the context, 503 while stopping). A choice the engine fails is a 500
// (or an error event in a stream); the other requests go on.
#ifndef FIMI_SERVE_API_H
#define FIMI_SERVE_API_H

#include <pthread.h>
#include <stddef.h>

#include "data/chat.h"
#include "serve/engine.h"

typedef struct ServeApiConfig {
  const char *model_name;  // what /v1/models lists and requests must name
  const char *api_key;     // NULL or "": no key required
  size_t max_body_bytes;
  double keepalive_s;      // a stream with nothing new this long sends an SSE comment (<= 0: 15)
} ServeApiConfig;

typedef struct ServeApi {
  ServeApiConfig c;        // strings are the caller's and outlive the api
  ServeEngine *engine;     // the caller's
  const Tokenizer *tok;    // the caller's
  ChatBuilder format;      // read-only after init: the chat format for parsing turns
  long created;            // unix time the server started (the model's "created")
  uint64_t id_seed;        // ids and default seeds: rng_mix(id_seed, counter)
  uint64_t counter;        // guarded by id_lock
  pthread_mutex_t id_lock;
} ServeApi;

int serve_api_init(ServeApi *api, const ServeApiConfig *c, ServeEngine *engine, const Tokenizer *tok,
                   FimiError *err);
void serve_api_free(ServeApi *api);

typedef struct ServeHttpRequest {
  const char *method, *path;
  const char *authorization;  // NULL when absent
  const char *body;
  size_t body_length;
  int body_too_large;
  // May be NULL: 1 when the client has closed the connection (a request
  // waiting for its whole answer then cancels its generation).
  int (*client_gone)(void *ctx);
  void *client_ctx;
} ServeHttpRequest;

typedef struct ServeStream ServeStream;

typedef struct ServeHttpResponse {
  int status;
  char *body;            // malloc'd JSON, or NULL when stream is set
  ServeStream *stream;   // text/event-stream: read with serve_stream_next
  int authenticate;      // 401: send WWW-Authenticate
  const char *allow;     // 405: the Allow header
} ServeHttpResponse;

// Never fails: out of memory is a 500 without a body. May block until the
// request's generation ends (non-streaming requests).
void serve_api_handle(ServeApi *api, const ServeHttpRequest *q, ServeHttpResponse *r);
void serve_http_response_free(ServeHttpResponse *r);

// Appends the stream's next events to out, waiting for the engine when
// there is nothing new (after keepalive_s of nothing, an SSE comment line
// goes out, so that the connection is never idle while a long prefill or a
// tool call is generated): 1 when the stream is complete ("data: [DONE]" is
// in out), 0 when more will come, -1 out of memory.
int serve_stream_next(ServeStream *s, TextBuf *out);
// Cancels the generation if it is still running, frees the stream.
void serve_stream_free(ServeStream *s);

#endif
