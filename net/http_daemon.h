// net/http_daemon.h: the libmicrohttpd daemon fimi's HTTP servers run (the
// MCP transport, `fimi serve`): one thread per connection, the listen
// address of http_listen.h, a connection limit and an idle timeout.
// Defines http_daemon_start and http_daemon_stop.
#ifndef FIMI_NET_HTTP_DAEMON_H
#define FIMI_NET_HTTP_DAEMON_H

#include <microhttpd.h>

#include "core/error.h"
#include "net/http_listen.h"

// Starts serving handler (cls its first argument; completed, may be NULL,
// is told when each request ends) on listen. A non-loopback address is
// refused unless allow_non_loopback; flag ("--http") and docs
// ("docs/mcp.md") name the option and the page in errors. *port gets the
// port bound (the chosen one for port 0). NULL with err set on failure.
struct MHD_Daemon *http_daemon_start(const HttpListen *listen, const char *flag, const char *docs,
                                     int allow_non_loopback, int max_connections, int idle_timeout_s,
                                     MHD_AccessHandlerCallback handler, MHD_RequestCompletedCallback completed,
                                     void *cls, int *port, FimiError *err);

// Stops accepting, gives the connections still open up to drain_s seconds
// to finish, then stops the daemon (which waits for their threads).
void http_daemon_stop(struct MHD_Daemon *daemon, double drain_s);

#endif
