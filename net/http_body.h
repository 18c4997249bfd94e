// net/http_body.h: a request body as a fimi HTTP server receives it, kept up
// to a limit (the MCP transport, `fimi serve`). Defines HttpBody,
// http_body_append, http_body_free and HTTP_BODY_DISCARD_FACTOR.
#ifndef FIMI_NET_HTTP_BODY_H
#define FIMI_NET_HTTP_BODY_H

#include <stddef.h>

// A body over the limit is read and dropped up to this many times the
// limit, so that a client sending it whole (most do, without Expect:
// 100-continue) reads the 413 rather than a reset connection; past that
// the connection is closed.
#define HTTP_BODY_DISCARD_FACTOR 4

typedef struct HttpBody {
  char *data;       // NUL-terminated once anything was kept
  size_t length, capacity;
  size_t dropped;   // bytes read past the limit (the body is refused)
  int too_large;
} HttpBody;

// Appends a piece of the body, or counts it once the body is over limit.
// -1: the connection is to be closed (far past the limit, or out of memory).
int http_body_append(HttpBody *b, const char *data, size_t n, size_t limit);
void http_body_free(HttpBody *b);

#endif
