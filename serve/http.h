// serve/http.h: `fimi serve`'s HTTP server on libmicrohttpd
// (docs/serving.md). Defines ServeHttpServer, serve_http_start/_port/_stop.
// One thread per connection (libmicrohttpd's thread-per-connection mode):
// a request waiting for its generation, or a stream waiting for tokens,
// holds up only its own connection. Every answer goes through
// serve_api_handle (serve/api.h); streams are sent chunked as
// text/event-stream, and a client that goes away cancels its generation.
#ifndef FIMI_SERVE_HTTP_H
#define FIMI_SERVE_HTTP_H

#include "core/error.h"
#include "net/http_listen.h"
#include "serve/api.h"

typedef struct ServeHttpServer ServeHttpServer;

// Starts serving api (the caller's, outliving the server) on listen, at
// most max_connections at once, closing a connection idle for
// idle_timeout_s. A non-loopback address is refused unless
// allow_non_loopback, and then only with an API key.
int serve_http_start(ServeApi *api, const HttpListen *listen, int allow_non_loopback, int max_connections,
                     int idle_timeout_s, ServeHttpServer **out, FimiError *err);
// The port bound (the chosen one when the address asked for 0).
int serve_http_port(const ServeHttpServer *server);
// Stops accepting and waits for the connections to end.
void serve_http_stop(ServeHttpServer *server);

#endif
