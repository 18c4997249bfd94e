// net/http.c: one HTTP request over libcurl (see http.h).
#include "net/http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

// curl_global_init is not thread-safe and must run once before any handle.
static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct Sink {
  char *data;
  size_t size, cap, max;
  int overflow;
} Sink;

static size_t sink_write(char *ptr, size_t size, size_t nmemb, void *user) {
  Sink *s = user;
  size_t n = size * nmemb;
  if (s->size + n > s->max) {
    s->overflow = 1;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  if (s->size + n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->size + n + 1) cap *= 2;
    char *grown = realloc(s->data, cap);
    if (!grown) return 0;
    s->data = grown;
    s->cap = cap;
  }
  memcpy(s->data + s->size, ptr, n);
  s->size += n;
  s->data[s->size] = 0;
  return n;
}

static int progress_cancel(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  const volatile int *cancel = user;
  return cancel && *cancel ? 1 : 0;
}

int http_escape(const char *text, char *out, size_t out_size) {
  if (pthread_once(&global_once, global_init) != 0 || global_rc != CURLE_OK) return -1;
  char *e = curl_easy_escape(NULL, text, 0);
  int ok = e && strlen(e) < out_size;
  if (ok) strcpy(out, e);
  curl_free(e);
  return ok ? 0 : -1;
}

int http_url_check(const char *url, const char *what, FimiError *err) {
  if (pthread_once(&global_once, global_init) != 0 || global_rc != CURLE_OK)
    return fimi_fail(err, "libcurl could not be initialized");
  CURLU *u = curl_url();
  if (!u) return fimi_fail(err, "out of memory");
  char *scheme = NULL, *host = NULL;
  CURLUcode rc = curl_url_set(u, CURLUPART_URL, url, 0);
  if (rc == CURLUE_OK) rc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
  if (rc == CURLUE_OK) rc = curl_url_get(u, CURLUPART_HOST, &host, 0);
  int ok = rc == CURLUE_OK && scheme && (!strcmp(scheme, "http") || !strcmp(scheme, "https")) && host && host[0];
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  if (!ok) return fimi_fail(err, "%s: \"%s\" is not an http:// or https:// URL with a host", what, url);
  return 0;
}

// The options of one transfer; 0, or -1 when one cannot be set (libcurl
// built without a protocol, out of memory).
static int set_options(CURL *h, const HttpRequest *req, struct curl_slist *headers, Sink *sink, FILE *upload) {
  double timeout = req->timeout_s > 0 ? req->timeout_s : 30.0;
  double connect = req->connect_timeout_s > 0 ? req->connect_timeout_s : (timeout < 10 ? timeout : 10);
  CURLcode rc = curl_easy_setopt(h, CURLOPT_URL, req->url);
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout * 1000));
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(connect * 1000));
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_WRITEDATA, sink);
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_USERAGENT, "fimi");
  if (!rc && req->cancel) rc = curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cancel);
  if (!rc && req->cancel) rc = curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)req->cancel);
  if (!rc && req->cancel) rc = curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  if (!rc && upload) {
    rc = curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    if (!rc) rc = curl_easy_setopt(h, CURLOPT_READDATA, upload);
    if (!rc) rc = curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_size);
  } else if (!rc && req->body) {
    rc = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_size);
    if (!rc) rc = curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
  }
  // After the body options: CURLOPT_POSTFIELDS alone would make it a POST.
  if (!rc) rc = curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
  return rc == CURLE_OK ? 0 : -1;
}

static struct curl_slist *make_headers(const HttpRequest *req) {
  struct curl_slist *list = curl_slist_append(NULL, "Expect:");  // no 100-continue round trip
  char line[4096];
  if (list && req->content_type) {
    snprintf(line, sizeof line, "Content-Type: %s", req->content_type);
    list = curl_slist_append(list, line);
  }
  if (list && req->bearer_token && req->bearer_token[0]) {
    if (snprintf(line, sizeof line, "Authorization: Bearer %s", req->bearer_token) >= (int)sizeof line) {
      curl_slist_free_all(list);
      return NULL;
    }
    list = curl_slist_append(list, line);
  }
  return list;
}

// The size of the file to upload, opened in *f.
static int open_upload(HttpRequest *req, FILE **f, FimiError *err) {
  *f = NULL;
  if (!req->upload_path) return 0;
  if (!(*f = fopen(req->upload_path, "rb")))
    return fimi_fail(err, "%s %s: cannot read %s: %s", req->method, req->url, req->upload_path, strerror(errno));
  long size = fseek(*f, 0, SEEK_END) == 0 ? ftell(*f) : -1;
  if (size < 0 || fseek(*f, 0, SEEK_SET) != 0) {
    fclose(*f);
    *f = NULL;
    return fimi_fail(err, "%s %s: cannot size %s", req->method, req->url, req->upload_path);
  }
  req->body_size = (size_t)size;
  return 0;
}

static int transfer_failed(const HttpRequest *req, CURLcode rc, const Sink *sink, const char *detail, FimiError *err) {
  if (sink->overflow)
    return fimi_fail(err, "%s %s: response larger than %zu bytes", req->method, req->url, sink->max);
  int transient = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_OPERATION_TIMEDOUT ||
                  rc == CURLE_ABORTED_BY_CALLBACK || rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR ||
                  rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE || rc == CURLE_SSL_CONNECT_ERROR ||
                  rc == CURLE_COULDNT_RESOLVE_PROXY;
  fimi_fail(err, "%s %s: %s", req->method, req->url, detail[0] ? detail : curl_easy_strerror(rc));
  return transient ? HTTP_TRANSIENT : -1;
}

int http_request(const HttpRequest *in, HttpResponse *resp, FimiError *err) {
  memset(resp, 0, sizeof *resp);
  HttpRequest req = *in;
  if (http_url_check(req.url, "URL", err) != 0) return -1;
  FILE *upload = NULL;
  if (open_upload(&req, &upload, err) != 0) return -1;
  Sink sink = {.max = req.max_response ? req.max_response : HTTP_DEFAULT_MAX_RESPONSE};
  char detail[CURL_ERROR_SIZE] = "";
  CURL *h = curl_easy_init();
  struct curl_slist *headers = h ? make_headers(&req) : NULL;
  int rc = -1;
  if (!h || !headers || set_options(h, &req, headers, &sink, upload) != 0 ||
      curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail) != CURLE_OK) {
    fimi_fail(err, "%s %s: cannot set up the request (out of memory?)", req.method, req.url);
  } else {
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) rc = transfer_failed(&req, cc, &sink, detail, err);
    else if (!sink.data && !(sink.data = calloc(1, 1))) fimi_fail(err, "out of memory");
    else rc = 0;
    if (rc == 0) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
  }
  curl_slist_free_all(headers);
  if (h) curl_easy_cleanup(h);
  if (upload) fclose(upload);
  if (rc != 0) {
    free(sink.data);
    return rc;
  }
  resp->body = sink.data;
  resp->size = sink.size;
  return 0;
}

void http_response_free(HttpResponse *resp) {
  free(resp->body);
  memset(resp, 0, sizeof *resp);
}
