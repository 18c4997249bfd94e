// mcp/mcp_stdio.h: the stdio transport of MCP: one JSON-RPC message per
// line on stdin, one response per line on stdout (nothing else is written
// there; logs go to stderr). Defines mcp_serve_stdio.
#ifndef FIMI_MCP_STDIO_H
#define FIMI_MCP_STDIO_H

#include <stdio.h>

#include "core/error.h"
#include "mcp/mcp_server.h"

// Serves messages from `in` until end of input. A line longer than the
// server's message limit is skipped to its newline and answered with an
// error; the server keeps serving. Fails only when `out` cannot be written
// or memory runs out.
int mcp_serve_stdio(McpServer *server, FILE *in, FILE *out, FimiError *err);

#endif
