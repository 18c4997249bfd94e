// mcp/mcp_http_handler.h: what the Streamable HTTP transport answers to one
// HTTP request (docs/mcp.md), apart from the sockets: McpHttpRequest (the
// method, path, the headers that matter and the body) in, McpHttpResponse
// (status, JSON body, headers) out. mcp_http.c feeds it from libmicrohttpd;
// tests call it directly.
//
// In order: Host and Origin (DNS rebinding: 421 / 403), the Bearer token
// (401), the endpoint path (404), the method (GET and others 405, DELETE
// ends a session), then for POST the media types (415, 406), the size (413),
// the message (400 when it is not one readable JSON-RPC message), the
// session: initialize without Mcp-Session-Id opens one (503 when
// max_sessions are open), anything else needs the id of a listed session
// (400 without, 404 unknown or expired) and, when it sends one, the
// session's MCP-Protocol-Version (400). A request gets its JSON-RPC response
// with 200 (errors of a readable request included); notifications and
// responses 202.
#ifndef FIMI_MCP_HTTP_HANDLER_H
#define FIMI_MCP_HTTP_HANDLER_H

#include <stddef.h>

#include "mcp/mcp_http_sessions.h"

typedef struct McpHttpPolicy {
  const char *token;                  // the Bearer token every request carries
  const char *endpoint;               // the one path, e.g. "/mcp"
  const char *const *allowed_origins; // exact Origin values beyond loopback ones; NULL-terminated or NULL
  const char *const *allowed_hosts;   // Host names beyond loopback ones; NULL-terminated or NULL
  size_t max_message_bytes;           // largest body
} McpHttpPolicy;

typedef struct McpHttpHandler {
  McpHttpPolicy policy;       // strings are the caller's and outlive the handler
  McpSessionTable *sessions;  // the caller's
} McpHttpHandler;

// Header values are NULL when the request has none.
typedef struct McpHttpRequest {
  const char *method, *path;
  const char *host, *origin, *authorization;
  const char *session_id, *protocol_version;
  const char *content_type, *accept;
  long long content_length;  // the Content-Length header, -1 when absent
  const char *body;
  size_t body_length;
  int body_too_large;        // the transport stopped reading at the limit
} McpHttpRequest;

typedef struct McpHttpResponse {
  int status;
  char *body;                                   // malloc'd JSON, or NULL for none
  char session_id[MCP_SESSION_ID_CHARS + 1];    // "" or the id a new session got
  const char *allow;                            // the Allow header of a 405
  int authenticate;                             // 401: send WWW-Authenticate
} McpHttpResponse;

// The checks that need no body (everything before the message is read), so
// a refused request's body is never read. 0: go on; -1: *response is the
// refusal.
int mcp_http_check_headers(const McpHttpHandler *handler, const McpHttpRequest *request, McpHttpResponse *response);

// The whole answer (the header checks included). Never fails: out of memory
// is a 500 without a body.
void mcp_http_handle(McpHttpHandler *handler, const McpHttpRequest *request, McpHttpResponse *response);

void mcp_http_response_free(McpHttpResponse *response);

#endif
