// net/http_daemon.c: starting and stopping a server's libmicrohttpd daemon
// (see http_daemon.h).
#include "net/http_daemon.h"

#include <unistd.h>

struct MHD_Daemon *http_daemon_start(const HttpListen *listen, const char *flag, const char *docs,
                                     int allow_non_loopback, int max_connections, int idle_timeout_s,
                                     MHD_AccessHandlerCallback handler, MHD_RequestCompletedCallback completed,
                                     void *cls, int *port, FimiError *err) {
  if (!listen->loopback && !allow_non_loopback) {
    fimi_fail(err, "%s %s:%d is not a loopback address; serving beyond this machine needs --allow-non-loopback "
                   "(and TLS in front, %s)", flag, listen->host, listen->port, docs);
    return NULL;
  }
  // MHD_USE_ITC: quiescing (http_daemon_stop) is safe with it.
  unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC |
                       MHD_USE_ERROR_LOG | (listen->addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  struct MHD_Daemon *d =
      MHD_start_daemon(flags, (uint16_t)listen->port, NULL, NULL, handler, cls, MHD_OPTION_SOCK_ADDR,
                       (const struct sockaddr *)&listen->addr, MHD_OPTION_CONNECTION_LIMIT,
                       (unsigned int)max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)idle_timeout_s,
                       MHD_OPTION_NOTIFY_COMPLETED, completed, cls, MHD_OPTION_END);
  if (!d) {
    fimi_fail(err, "%s %s:%d: could not listen (address in use, or not this machine's)", flag, listen->host,
              listen->port);
    return NULL;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  *port = info ? info->port : listen->port;
  return d;
}

void http_daemon_stop(struct MHD_Daemon *daemon, double drain_s) {
  if (!daemon) return;
  MHD_quiesce_daemon(daemon);
  for (int i = 0; i < (int)(drain_s * 100); i++) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    if (!info || info->num_connections == 0) break;
    usleep(10000);
  }
  MHD_stop_daemon(daemon);
}
