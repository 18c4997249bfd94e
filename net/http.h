// net/http.h: one HTTP request over libcurl, for fimi's clients of outside
// services (MLflow, served models). Defines HttpRequest, HttpResponse,
// http_request, http_response_free, http_escape, http_url_check and HTTP_TRANSIENT.
//
// Only http:// and https:// URLs are followed (libcurl's other protocols are
// switched off). Every error message names the method and the URL. Requests
// run in whatever thread calls them: libcurl's global state is set up once
// (pthread_once), no signals are used for timeouts.
#ifndef FIMI_NET_HTTP_H
#define FIMI_NET_HTTP_H

#include <stddef.h>

#include "core/error.h"

// http_request's return value for a failure worth retrying later: no
// connection, a timeout, a cancelled transfer.
#define HTTP_TRANSIENT (-2)

#define HTTP_DEFAULT_MAX_RESPONSE ((size_t)4 << 20)

typedef struct HttpRequest {
  const char *method;        // "GET", "POST", "PUT", ...
  const char *url;           // http:// or https://
  const char *bearer_token;  // NULL or "": no Authorization header
  const char *content_type;  // of the body (NULL: none sent)
  const void *body;          // NULL: no body (or upload_path)
  size_t body_size;
  const char *upload_path;   // a file sent as the body instead of `body` (streamed)
  double timeout_s;          // the whole transfer (<= 0: 30 s)
  double connect_timeout_s;  // <= 0: min(timeout_s, 10 s)
  size_t max_response;       // bytes of response body kept at most (0: HTTP_DEFAULT_MAX_RESPONSE)
  // Optional: polled during the transfer; non-zero aborts it (HTTP_TRANSIENT).
  const volatile int *cancel;
} HttpRequest;

typedef struct HttpResponse {
  long status;  // HTTP status code
  char *body;   // NUL-terminated (malloc'd; "" when empty)
  size_t size;
} HttpResponse;

// Sends the request and stores the answer: 0 with any HTTP status (the
// caller judges it), HTTP_TRANSIENT when no answer came (connection
// refused, DNS, timeout, cancel), -1 for a request that cannot be made (bad
// URL, unreadable upload file, a response over max_response, out of memory).
// On a non-zero return *resp holds nothing to free.
int http_request(const HttpRequest *req, HttpResponse *resp, FimiError *err);

void http_response_free(HttpResponse *resp);

// URL-encodes text (RFC 3986: all but A-Z a-z 0-9 - . _ ~) into out; -1 when
// it does not fit.
int http_escape(const char *text, char *out, size_t out_size);

// 0 when url is an http:// or https:// URL with a host; else -1 with err
// naming `what` (e.g. "track.mlflow_uri").
int http_url_check(const char *url, const char *what, FimiError *err);

#endif
