// net/http_listen.c: parsing a server's listen address (see http_listen.h).
#include "net/http_listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_port(const char *text, const char *flag, int *port, FimiError *err) {
  char *end = NULL;
  long value = strtol(text, &end, 10);
  if (!*text || *end || value < 0 || value > 65535 || text[0] == '-' || text[0] == '+')
    return fimi_fail(err, "%s: port \"%s\" is not a number from 0 to 65535", flag, text);
  *port = (int)value;
  return 0;
}

static int parse_ipv6(const char *text, const char *flag, HttpListen *out, FimiError *err) {
  const char *close = strchr(text, ']');
  if (!close || close[1] != ':') return fimi_fail(err, "%s: write an IPv6 address as [ADDRESS]:PORT", flag);
  char literal[INET6_ADDRSTRLEN];
  size_t n = (size_t)(close - text - 1);
  if (n >= sizeof literal) return fimi_fail(err, "%s: IPv6 address too long", flag);
  memcpy(literal, text + 1, n);
  literal[n] = '\0';
  struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->addr;
  a->sin6_family = AF_INET6;
  if (inet_pton(AF_INET6, literal, &a->sin6_addr) != 1)
    return fimi_fail(err, "%s: \"%s\" is not an IPv6 address", flag, literal);
  if (parse_port(close + 2, flag, &out->port, err) != 0) return -1;
  a->sin6_port = htons((uint16_t)out->port);
  out->addr_length = sizeof *a;
  out->loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
  snprintf(out->host, sizeof out->host, "[%s]", literal);
  return 0;
}

static int parse_ipv4(const char *text, const char *flag, HttpListen *out, FimiError *err) {
  const char *colon = strrchr(text, ':');
  if (!colon) return fimi_fail(err, "%s: expected ADDRESS:PORT, e.g. 127.0.0.1:8765", flag);
  char literal[INET_ADDRSTRLEN + 16];
  size_t n = (size_t)(colon - text);
  if (n >= sizeof literal) return fimi_fail(err, "%s: address too long", flag);
  memcpy(literal, text, n);
  literal[n] = '\0';
  // Names are not looked up; localhost is the one everybody means.
  if (strcmp(literal, "localhost") == 0) snprintf(literal, sizeof literal, "127.0.0.1");
  struct sockaddr_in *a = (struct sockaddr_in *)&out->addr;
  a->sin_family = AF_INET;
  if (inet_pton(AF_INET, literal, &a->sin_addr) != 1)
    return fimi_fail(err, "%s: \"%s\" is not an IPv4 address (names other than localhost are not looked up)",
                     flag, literal);
  if (parse_port(colon + 1, flag, &out->port, err) != 0) return -1;
  a->sin_port = htons((uint16_t)out->port);
  out->addr_length = sizeof *a;
  out->loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  snprintf(out->host, sizeof out->host, "%s", literal);
  return 0;
}

int http_listen_parse(const char *text, const char *flag, HttpListen *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  if (!text || !*text) return fimi_fail(err, "%s: expected ADDRESS:PORT", flag);
  return text[0] == '[' ? parse_ipv6(text, flag, out, err) : parse_ipv4(text, flag, out, err);
}
