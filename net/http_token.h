// net/http_token.h: the Bearer token of fimi's HTTP servers (the MCP
// transport, docs/mcp.md; `fimi serve`, docs/serving.md). Defines
// http_token_load (from a file's first line, else an environment variable,
// checked to be a usable secret), http_secret_equal (constant time) and
// http_bearer_matches (an Authorization header against the token).
#ifndef FIMI_NET_HTTP_TOKEN_H
#define FIMI_NET_HTTP_TOKEN_H

#include <stddef.h>

#include "core/error.h"

// Shorter tokens are refused: a guessable one would be the only lock.
#define HTTP_TOKEN_MIN_CHARS 16
#define HTTP_TOKEN_MAX_CHARS 4096

// path (may be NULL) wins over env_value (getenv(env_name), may be NULL). The token is the file's
// first line without surrounding whitespace; it must be
// HTTP_TOKEN_MIN_CHARS..MAX of visible ASCII (it travels in a header). A
// file readable by group or others is refused. file_flag names the option
// in errors ("--token-file").
int http_token_load(const char *path, const char *file_flag, const char *env_name, const char *env_value, char *out,
                    size_t out_size, FimiError *err);

// Equal in time that depends only on the length of `expected` (the secret).
int http_secret_equal(const char *given, size_t given_length, const char *expected, size_t expected_length);

// 1 when `authorization` (the header's value, NULL when absent) is
// "Bearer <token>": the scheme case-insensitive (RFC 9110), the token
// compared in constant time.
int http_bearer_matches(const char *authorization, const char *token);

#endif
