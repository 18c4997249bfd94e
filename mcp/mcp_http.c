// mcp/mcp_http.c: the libmicrohttpd daemon of the Streamable HTTP transport
// (see mcp_http.h). libmicrohttpd parses HTTP; this file only copies the
// headers that matter into an McpHttpRequest, collects the body up to the
// limit and sends the handler's McpHttpResponse back.
#define _GNU_SOURCE  // pthread_condattr_setclock, strcasestr
#include "mcp/mcp_http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "core/log.h"
#include "net/http_body.h"
#include "net/http_daemon.h"

// How often idle sessions are looked for (they are also refused on use
// once past their time, so this only bounds how long their memory stays).
#define SWEEP_PERIOD_S 1

struct McpHttpServer {
  McpHttpHandler *handler;
  struct MHD_Daemon *daemon;
  int port;
  pthread_t sweeper;
  int sweeper_started;
  pthread_mutex_t stop_lock;
  pthread_cond_t stop_cond;  // CLOCK_MONOTONIC
  int stopping;
};

static const char *header(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static void fill_request(struct MHD_Connection *c, const char *url, const char *method, McpHttpRequest *q) {
  memset(q, 0, sizeof *q);
  q->method = method;
  q->path = url;
  q->host = header(c, MHD_HTTP_HEADER_HOST);
  q->origin = header(c, MHD_HTTP_HEADER_ORIGIN);
  q->authorization = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
  q->session_id = header(c, "Mcp-Session-Id");
  q->protocol_version = header(c, "MCP-Protocol-Version");
  q->content_type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
  q->accept = header(c, MHD_HTTP_HEADER_ACCEPT);
  // libmicrohttpd has already refused a malformed Content-Length.
  const char *length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
  q->content_length = length ? strtoll(length, NULL, 10) : -1;
}

static enum MHD_Result send_response(struct MHD_Connection *c, McpHttpResponse *r) {
  size_t n = r->body ? strlen(r->body) : 0;
  struct MHD_Response *response =
      r->body ? MHD_create_response_from_buffer(n, r->body, MHD_RESPMEM_MUST_FREE)
              : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!response) {
    mcp_http_response_free(r);
    return MHD_NO;  // out of memory: libmicrohttpd closes the connection
  }
  r->body = NULL;  // the response owns it now
  if (n > 0) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  if (r->session_id[0]) MHD_add_response_header(response, "Mcp-Session-Id", r->session_id);
  if (r->allow) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, r->allow);
  if (r->authenticate) MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"fimi\"");
  // Answers hold customer data: no cache may keep them.
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  enum MHD_Result queued = MHD_queue_response(c, (unsigned int)r->status, response);
  MHD_destroy_response(response);
  return queued;
}

// A refusal sent before the body is read, when the client waits for 100
// Continue or the body is too large to drain; else the body is drained
// first (see HTTP_BODY_DISCARD_FACTOR).
static int refuse_now(struct MHD_Connection *c, const McpHttpRequest *q, const McpHttpResponse *r, size_t limit) {
  if (r->status != 413) return 1;
  const char *expect = header(c, MHD_HTTP_HEADER_EXPECT);
  if (expect && strcasestr(expect, "100-continue")) return 1;
  return q->content_length > (long long)(HTTP_BODY_DISCARD_FACTOR * limit);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **state) {
  McpHttpServer *server = cls;
  size_t limit = server->handler->policy.max_message_bytes;
  McpHttpRequest q;
  McpHttpResponse r;
  fill_request(c, url, method, &q);
  if (!*state) {
    // Headers only: most refusals go out before any body is read.
    int refused = mcp_http_check_headers(server->handler, &q, &r) != 0;
    if (refused && refuse_now(c, &q, &r, limit)) return send_response(c, &r);
    mcp_http_response_free(&r);
    HttpBody *u = calloc(1, sizeof(HttpBody));
    if (!u) return MHD_NO;
    u->too_large = refused;  // over the limit: drained, then refused
    *state = u;
    return MHD_YES;
  }
  HttpBody *u = *state;
  if (*upload_data_size > 0) {
    if (http_body_append(u, upload_data, *upload_data_size, limit) != 0) {
      log_warn("mcp http: a body far past the limit (or out of memory); connection closed");
      return MHD_NO;
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  q.body = u->data;
  q.body_length = u->length;
  q.body_too_large = u->too_large;
  mcp_http_handle(server->handler, &q, &r);
  return send_response(c, &r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
  HttpBody *u = *state;
  if (u) http_body_free(u);
  free(u);
  *state = NULL;
}

static void *sweep(void *arg) {
  McpHttpServer *s = arg;
  pthread_mutex_lock(&s->stop_lock);
  while (!s->stopping) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += SWEEP_PERIOD_S;
    pthread_cond_timedwait(&s->stop_cond, &s->stop_lock, &deadline);
    if (s->stopping) break;
    pthread_mutex_unlock(&s->stop_lock);
    mcp_sessions_expire(s->handler->sessions, mcp_sessions_now());
    pthread_mutex_lock(&s->stop_lock);
  }
  pthread_mutex_unlock(&s->stop_lock);
  return NULL;
}

static int start_sweeper(McpHttpServer *s, FimiError *err) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&s->stop_cond, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&s->stop_lock, NULL);
  if (pthread_create(&s->sweeper, NULL, sweep, s) != 0) return fimi_fail(err, "mcp http: no session sweeper thread");
  s->sweeper_started = 1;
  return 0;
}

int mcp_http_start(McpHttpHandler *handler, const HttpListen *listen, int allow_non_loopback, int max_connections,
                   int connection_timeout_s, McpHttpServer **out, FimiError *err) {
  *out = NULL;
  McpHttpServer *s = fimi_calloc(1, sizeof *s, err);
  if (!s) return -1;
  s->handler = handler;
  if (start_sweeper(s, err) != 0) {
    mcp_http_stop(s);
    return -1;
  }
  s->daemon = http_daemon_start(listen, "--http", "docs/mcp.md", allow_non_loopback, max_connections,
                                connection_timeout_s, on_request, on_completed, s, &s->port, err);
  if (!s->daemon) {
    mcp_http_stop(s);
    return -1;
  }
  *out = s;
  return 0;
}

int mcp_http_port(const McpHttpServer *server) { return server->port; }

void mcp_http_stop(McpHttpServer *s) {
  if (!s) return;
  http_daemon_stop(s->daemon, 0);
  if (s->sweeper_started) {
    pthread_mutex_lock(&s->stop_lock);
    s->stopping = 1;
    pthread_cond_signal(&s->stop_cond);
    pthread_mutex_unlock(&s->stop_lock);
    pthread_join(s->sweeper, NULL);
  }
  pthread_cond_destroy(&s->stop_cond);
  pthread_mutex_destroy(&s->stop_lock);
  free(s);
}
