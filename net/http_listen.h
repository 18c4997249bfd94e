// net/http_listen.h: the address a fimi HTTP server listens on (`fimi mcp
// serve --http`, `fimi serve --listen`). Defines HttpListen and
// http_listen_parse. Only literals: no name lookups.
#ifndef FIMI_NET_HTTP_LISTEN_H
#define FIMI_NET_HTTP_LISTEN_H

#include <sys/socket.h>

#include "core/error.h"

typedef struct HttpListen {
  struct sockaddr_storage addr;
  socklen_t addr_length;
  int loopback;     // 127.0.0.0/8 or ::1
  char host[64];    // the address as a Host header names it ("10.0.0.5", "[fd00::1]")
  int port;
} HttpListen;

// "ADDRESS:PORT": an IPv4 literal, a bracketed IPv6 literal or localhost
// (127.0.0.1); PORT 0 picks a free one. flag names the option in errors
// ("--http").
int http_listen_parse(const char *text, const char *flag, HttpListen *out, FimiError *err);

#endif
