// mcp/mcp_http_token.h: the Bearer token of the HTTP transport (docs/mcp.md).
// Defines mcp_http_token_load: from a file (its first line) or else from the
// environment variable FIMI_MCP_TOKEN, checked to be a usable secret.
#ifndef FIMI_MCP_HTTP_TOKEN_H
#define FIMI_MCP_HTTP_TOKEN_H

#include <stddef.h>

#include "core/error.h"

#define MCP_TOKEN_ENV "FIMI_MCP_TOKEN"
// Shorter tokens are refused: a guessable one would be the only lock.
#define MCP_TOKEN_MIN_CHARS 16
#define MCP_TOKEN_MAX_CHARS 4096

// path (may be NULL) wins over env_value (getenv(MCP_TOKEN_ENV), may be
// NULL). The token is the file's first line without surrounding
// whitespace; it must be MCP_TOKEN_MIN_CHARS..MAX of visible ASCII (it
// travels in a header). A file readable by group or others is refused.
int mcp_http_token_load(const char *path, const char *env_value, char *out, size_t out_size, FimiError *err);

#endif
