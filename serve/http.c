// serve/http.c: the libmicrohttpd daemon of `fimi serve` (see http.h).
// libmicrohttpd parses HTTP; this file collects the body up to the limit,
// hands the request to serve_api_handle and sends its answer back: a JSON
// body, or a stream read event by event from serve_stream_next.
#include "serve/http.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/log.h"
#include "core/text.h"
#include "net/http_body.h"
#include "net/http_daemon.h"

struct ServeHttpServer {
  ServeApi *api;
  struct MHD_Daemon *daemon;
  int port;
};

// A stream being sent: events not yet taken by libmicrohttpd.
typedef struct StreamOut {
  ServeStream *stream;
  TextBuf pending;
  size_t offset;
  int finished;  // [DONE] is in pending
} StreamOut;

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  StreamOut *o = cls;
  while (o->offset == o->pending.len) {
    if (o->finished) return MHD_CONTENT_READER_END_OF_STREAM;
    o->pending.len = o->offset = 0;
    int rc = serve_stream_next(o->stream, &o->pending);
    if (rc < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
    o->finished = rc == 1;
  }
  size_t n = o->pending.len - o->offset < max ? o->pending.len - o->offset : max;
  memcpy(buf, o->pending.data + o->offset, n);
  o->offset += n;
  return (ssize_t)n;
}

// Called when the stream's connection ends, whole or not: a client that
// went away cancels the generation.
static void free_stream(void *cls) {
  StreamOut *o = cls;
  serve_stream_free(o->stream);
  text_free(&o->pending);
  free(o);
}

static struct MHD_Response *stream_response(ServeHttpResponse *r) {
  StreamOut *o = calloc(1, sizeof *o);
  if (!o) return NULL;
  o->stream = r->stream;
  struct MHD_Response *response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, o, free_stream);
  if (!response) {
    free(o);
    return NULL;
  }
  r->stream = NULL;  // the response owns it now
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  return response;
}

static struct MHD_Response *body_response(ServeHttpResponse *r) {
  size_t n = r->body ? strlen(r->body) : 0;
  struct MHD_Response *response =
      r->body ? MHD_create_response_from_buffer(n, r->body, MHD_RESPMEM_MUST_FREE)
              : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!response) return NULL;
  r->body = NULL;
  if (n > 0) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  return response;
}

static enum MHD_Result send_response(struct MHD_Connection *c, ServeHttpResponse *r) {
  int status = r->status, authenticate = r->authenticate;
  const char *allow = r->allow;
  struct MHD_Response *response = r->stream ? stream_response(r) : body_response(r);
  serve_http_response_free(r);  // what the response took is no longer r's
  if (!response) return MHD_NO;  // out of memory: libmicrohttpd closes the connection
  if (allow) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
  if (authenticate) MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"fimi\"");
  // Answers hold customer conversations: no cache may keep them.
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  enum MHD_Result queued = MHD_queue_response(c, (unsigned int)status, response);
  MHD_destroy_response(response);
  return queued;
}

// 1 when the peer has closed the connection: a read that would return 0
// bytes (data it sent, a pipelined request, is left where it is).
static int peer_closed(void *ctx) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(ctx, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!info) return 0;
  char byte;
  return recv(info->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **state) {
  (void)version;
  ServeHttpServer *server = cls;
  size_t limit = server->api->c.max_body_bytes;
  if (!*state) {
    HttpBody *body = calloc(1, sizeof *body);
    if (!body) return MHD_NO;
    *state = body;
    return MHD_YES;
  }
  HttpBody *body = *state;
  if (*upload_data_size > 0) {
    if (http_body_append(body, upload_data, *upload_data_size, limit) != 0) {
      log_warn("fimi serve: a body far past the limit (or out of memory); connection closed");
      return MHD_NO;
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  ServeHttpRequest q = {.method = method, .path = url,
                        .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                        .body = body->data, .body_length = body->length, .body_too_large = body->too_large,
                        .client_gone = peer_closed, .client_ctx = c};
  ServeHttpResponse r;
  serve_api_handle(server->api, &q, &r);
  return send_response(c, &r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
  (void)cls, (void)c, (void)why;
  HttpBody *body = *state;
  if (body) http_body_free(body);
  free(body);
  *state = NULL;
}

int serve_http_start(ServeApi *api, const HttpListen *listen, int allow_non_loopback, int max_connections,
                     int idle_timeout_s, ServeHttpServer **out, FimiError *err) {
  *out = NULL;
  if (!listen->loopback && allow_non_loopback && !(api->c.api_key && *api->c.api_key))
    return fimi_fail(err, "--listen %s:%d: serving beyond this machine needs an API key (--api-key-file or "
                          "FIMI_SERVE_API_KEY)", listen->host, listen->port);
  ServeHttpServer *s = fimi_calloc(1, sizeof *s, err);
  if (!s) return -1;
  s->api = api;
  s->daemon = http_daemon_start(listen, "--listen", "docs/serving.md", allow_non_loopback, max_connections,
                                idle_timeout_s, on_request, on_completed, s, &s->port, err);
  if (!s->daemon) {
    free(s);
    return -1;
  }
  *out = s;
  return 0;
}

int serve_http_port(const ServeHttpServer *server) { return server->port; }

// Stops accepting, gives the answers in flight up to DRAIN_S to go out
// (after serve_engine_stop every one of them is ending), then closes.
#define DRAIN_S 5

void serve_http_stop(ServeHttpServer *s) {
  if (!s) return;
  http_daemon_stop(s->daemon, DRAIN_S);
  free(s);
}
