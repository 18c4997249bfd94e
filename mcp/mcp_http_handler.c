// mcp/mcp_http_handler.c: the Streamable HTTP transport's answer to one
// request (see mcp_http_handler.h). Refusals before a session is found carry
// a JSON-RPC error with id null (the transport allows one without an id);
// the message itself is the stdio session's (mcp_server_handle_message).
#include "mcp/mcp_http_handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "mcp/mcp_jsonrpc.h"
#include "net/http_token.h"

#define HOST_NAME_MAX_CHARS 256

static const char *const LOOPBACK_NAMES[] = {"localhost", "127.0.0.1", "[::1]", NULL};

void mcp_http_response_free(McpHttpResponse *response) {
  free(response->body);
  memset(response, 0, sizeof *response);
}

static void answer(McpHttpResponse *r, int status, const cJSON *id, int code, const char *message) {
  free(r->body);
  r->status = status;
  r->body = mcp_response_error(id, code, message);
}

static int one_of(const char *name, size_t length, const char *const *names) {
  for (int i = 0; names && names[i]; i++)
    if (strlen(names[i]) == length && strncasecmp(names[i], name, length) == 0) return 1;
  return 0;
}

// The host of "host[:port]" or "[v6]:port" into out; -1 when malformed
// (a port that is not digits, an unclosed bracket, too long).
static int split_host(const char *hostport, char *out, size_t size) {
  size_t n;
  if (hostport[0] == '[') {
    const char *close = strchr(hostport, ']');
    if (!close) return -1;
    n = (size_t)(close - hostport) + 1;
  } else {
    n = strcspn(hostport, ":");
  }
  const char *port = hostport + n;
  if (*port == ':' && (!port[1] || strspn(port + 1, "0123456789") != strlen(port + 1))) return -1;
  if (*port && *port != ':') return -1;
  if (n == 0 || n >= size) return -1;
  memcpy(out, hostport, n);
  out[n] = '\0';
  return 0;
}

static int host_allowed(const McpHttpPolicy *p, const char *host) {
  if (!host) return 1;  // HTTP/1.0 without Host: no browser sends that
  char name[HOST_NAME_MAX_CHARS];
  if (split_host(host, name, sizeof name) != 0) return 0;
  return one_of(name, strlen(name), LOOPBACK_NAMES) || one_of(name, strlen(name), p->allowed_hosts);
}

// An Origin is "scheme://host[:port]": allowed when listed, or http(s) on a
// loopback host. A DNS-rebinding page has its own host in Origin, and
// "null" (sandboxed or file pages) is refused.
static int origin_allowed(const McpHttpPolicy *p, const char *origin) {
  if (!origin) return 1;  // not a browser: nothing to rebind
  if (one_of(origin, strlen(origin), p->allowed_origins)) return 1;
  const char *rest = NULL;
  if (strncasecmp(origin, "http://", 7) == 0) rest = origin + 7;
  else if (strncasecmp(origin, "https://", 8) == 0) rest = origin + 8;
  char name[HOST_NAME_MAX_CHARS];
  if (!rest || split_host(rest, name, sizeof name) != 0) return 0;
  return one_of(name, strlen(name), LOOPBACK_NAMES);
}

// The media type of a header value (before any ";parameters") is `type`.
static int media_is(const char *value, size_t length, const char *type) {
  while (length > 0 && (*value == ' ' || *value == '\t')) value++, length--;
  size_t n = strcspn(value, ";");
  if (n > length) n = length;
  while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t')) n--;
  return strlen(type) == n && strncasecmp(value, type, n) == 0;
}

// Accept lists media ranges separated by commas; JSON is what this server
// answers (it opens no SSE streams).
static int accepts_json(const char *accept) {
  for (const char *item = accept; *item;) {
    size_t n = strcspn(item, ",");
    if (media_is(item, n, "application/json") || media_is(item, n, "application/*") || media_is(item, n, "*/*"))
      return 1;
    item += n;
    if (*item == ',') item++;
  }
  return 0;
}

static int check_post_headers(const McpHttpPolicy *p, const McpHttpRequest *q, McpHttpResponse *r) {
  if (!q->content_type || !media_is(q->content_type, strlen(q->content_type), "application/json")) {
    answer(r, 415, NULL, MCP_INVALID_REQUEST, "Unsupported Media Type: POST a JSON-RPC message as application/json");
    return -1;
  }
  if (q->accept && !accepts_json(q->accept)) {
    answer(r, 406, NULL, MCP_INVALID_REQUEST, "Not Acceptable: this server answers application/json");
    return -1;
  }
  if (q->content_length > (long long)p->max_message_bytes) {
    char message[96];
    snprintf(message, sizeof message, "Payload Too Large: the limit is %zu bytes", p->max_message_bytes);
    answer(r, 413, NULL, MCP_INVALID_REQUEST, message);
    return -1;
  }
  return 0;
}

int mcp_http_check_headers(const McpHttpHandler *handler, const McpHttpRequest *q, McpHttpResponse *r) {
  const McpHttpPolicy *p = &handler->policy;
  memset(r, 0, sizeof *r);
  if (!host_allowed(p, q->host)) {
    log_warn("mcp http: refused a request for another host (DNS rebinding?)");
    answer(r, 421, NULL, MCP_INVALID_REQUEST, "Misdirected Request: this server does not serve that Host");
    return -1;
  }
  if (!origin_allowed(p, q->origin)) {
    log_warn("mcp http: refused a request from a foreign Origin");
    answer(r, 403, NULL, MCP_INVALID_REQUEST, "Forbidden: Origin not allowed");
    return -1;
  }
  if (!http_bearer_matches(q->authorization, p->token)) {
    log_warn("mcp http: refused a request without the right Bearer token");
    answer(r, 401, NULL, MCP_INVALID_REQUEST, "Unauthorized: send Authorization: Bearer <token>");
    r->authenticate = 1;
    return -1;
  }
  if (strcmp(q->path, p->endpoint) != 0) {
    answer(r, 404, NULL, MCP_INVALID_REQUEST, "Not Found: the MCP endpoint is elsewhere");
    return -1;
  }
  if (strcmp(q->method, "DELETE") == 0) return 0;
  if (strcmp(q->method, "POST") != 0) {
    // GET would open a server-to-client SSE stream: this server sends
    // nothing unasked, so it offers none.
    answer(r, 405, NULL, MCP_INVALID_REQUEST, "Method Not Allowed: POST messages, DELETE ends a session");
    r->allow = "POST, DELETE";
    return -1;
  }
  return check_post_headers(p, q, r);
}

static void handle_delete(McpHttpHandler *h, const McpHttpRequest *q, McpHttpResponse *r) {
  if (!q->session_id) {
    answer(r, 400, NULL, MCP_INVALID_REQUEST, "Bad Request: DELETE needs the Mcp-Session-Id to end");
  } else if (mcp_session_end(h->sessions, q->session_id) != 0) {
    answer(r, 404, NULL, MCP_INVALID_REQUEST, "Not Found: no such session (ended or expired)");
  } else {
    r->status = 204;
  }
}

// initialize without a session id: a new session answers it, and is listed
// only when it accepted (a refused initialize leaves nothing behind).
static void open_session(McpHttpHandler *h, const McpMessage *msg, McpHttpResponse *r) {
  FimiError err = {0};
  McpSession *s = NULL;
  McpSessionOpen opened = mcp_session_open(h->sessions, mcp_sessions_now(), &s, &err);
  if (opened == MCP_SESSION_FULL) {
    answer(r, 503, msg->id, MCP_INTERNAL_ERROR,
           "Service Unavailable: the session limit is reached; end a session (DELETE) or retry later");
    return;
  }
  if (opened == MCP_SESSION_FAILED) {
    log_error("mcp http: opening a session: %s", err.message);  // details stay in the log
    answer(r, 500, msg->id, MCP_INTERNAL_ERROR, "Internal error: the bank could not be opened");
    return;
  }
  McpServer *server = mcp_session_server(s);
  char *text = mcp_server_handle_message(server, msg);
  if (!text || mcp_server_protocol_version(server)[0] == '\0') {
    mcp_session_discard(h->sessions, s);
    r->status = text ? 400 : 500;
    r->body = text;
    return;
  }
  if (mcp_session_publish(h->sessions, s, mcp_sessions_now(), &err) != 0) {
    log_error("mcp http: %s", err.message);
    free(text);
    answer(r, 500, msg->id, MCP_INTERNAL_ERROR, "Internal error: no session id could be made");
    return;
  }
  r->status = 200;
  r->body = text;
  snprintf(r->session_id, sizeof r->session_id, "%s", mcp_session_id(s));
}

static void in_session(McpHttpHandler *h, const McpHttpRequest *q, const McpMessage *msg, McpHttpResponse *r) {
  McpSession *s = mcp_session_acquire(h->sessions, q->session_id, mcp_sessions_now());
  if (!s) {
    answer(r, 404, msg->id, MCP_INVALID_REQUEST, "Not Found: no such session (ended or expired); initialize anew");
    return;
  }
  McpServer *server = mcp_session_server(s);
  const char *version = mcp_server_protocol_version(server);
  if (q->protocol_version && strcmp(q->protocol_version, version) != 0) {
    char shown[80], message[200];
    mcp_quote(q->protocol_version, shown, sizeof shown);
    snprintf(message, sizeof message, "Bad Request: MCP-Protocol-Version \"%s\" is not this session's (%s)", shown,
             version);
    answer(r, 400, msg->id, MCP_INVALID_REQUEST, message);
  } else {
    r->body = mcp_server_handle_message(server, msg);
    // Notifications and responses are accepted without a body.
    r->status = r->body ? 200 : msg->kind == MCP_MSG_REQUEST ? 500 : 202;
  }
  mcp_session_release(h->sessions, s, mcp_sessions_now());
}

static void handle_post(McpHttpHandler *h, const McpHttpRequest *q, McpHttpResponse *r) {
  McpMessage msg;
  int code = 0;
  char why[FIMI_ERROR_MESSAGE_MAX];
  cJSON *id = NULL;
  const char *body = q->body ? q->body : "";
  if (mcp_message_read(body, q->body_length, h->policy.max_message_bytes, &msg, &code, why, sizeof why, &id) != 0) {
    answer(r, 400, id, code, why);
    cJSON_Delete(id);
    return;
  }
  if (q->session_id) {
    in_session(h, q, &msg, r);
  } else if (msg.kind == MCP_MSG_REQUEST && strcmp(msg.method, "initialize") == 0) {
    open_session(h, &msg, r);
  } else {
    answer(r, 400, msg.id, MCP_INVALID_REQUEST,
           "Bad Request: Mcp-Session-Id header required (initialize opens a session)");
  }
  mcp_message_free(&msg);
}

void mcp_http_handle(McpHttpHandler *handler, const McpHttpRequest *q, McpHttpResponse *r) {
  if (mcp_http_check_headers(handler, q, r) != 0) return;
  if (strcmp(q->method, "DELETE") == 0) {
    handle_delete(handler, q, r);
  } else if (q->body_too_large || q->body_length > handler->policy.max_message_bytes) {
    char message[96];
    snprintf(message, sizeof message, "Payload Too Large: the limit is %zu bytes", handler->policy.max_message_bytes);
    answer(r, 413, NULL, MCP_INVALID_REQUEST, message);
  } else {
    handle_post(handler, q, r);
  }
}
