// mcp/mcp_http.h: MCP's Streamable HTTP transport on libmicrohttpd
// (docs/mcp.md). Defines McpHttpServer: a daemon on one address that hands
// every request to an McpHttpHandler (mcp_http_handler.h), plus a thread
// that frees idle sessions. The address comes from http_listen_parse
// (net/http_listen.h). One thread per HTTP connection (libmicrohttpd's
// thread-per-connection mode): a call waiting for the bank's write lock
// holds up only its own connection. Answers are application/json; no SSE
// streams are offered (GET is 405).
#ifndef FIMI_MCP_HTTP_H
#define FIMI_MCP_HTTP_H

#include "core/error.h"
#include "mcp/mcp_http_handler.h"
#include "net/http_listen.h"

typedef struct McpHttpServer McpHttpServer;

// Starts serving `handler` (the caller's, outliving the server) on
// `listen`, at most max_connections at once, closing a connection idle for
// connection_timeout_s. A non-loopback address is refused unless
// allow_non_loopback.
int mcp_http_start(McpHttpHandler *handler, const HttpListen *listen, int allow_non_loopback, int max_connections,
                   int connection_timeout_s, McpHttpServer **out, FimiError *err);
// The port bound (the chosen one when the address asked for 0).
int mcp_http_port(const McpHttpServer *server);
// Stops accepting, lets the requests in flight finish, stops the sweeper.
void mcp_http_stop(McpHttpServer *server);

#endif
