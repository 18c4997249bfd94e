// net/openai_client.c: requests, retries, the response cache and reading
// an answer (see openai_client.h).
#define _GNU_SOURCE  // strndup
#include "net/openai_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/log.h"
#include "net/http.h"

#define MAX_BACKOFF_S 30.0
#define MAX_ANSWER ((size_t)16 << 20)

struct OpenAIClient {
  OpenAIClientConfig c;
  char url[2048];
  char *endpoint, *model, *api_key, *cache_dir;  // owned copies
  pthread_mutex_t lock;
  pthread_cond_t room;
  int in_flight;
};

static char *copy(const char *s) { return s ? strdup(s) : NULL; }

int openai_client_create(const OpenAIClientConfig *config, OpenAIClient **out, FimiError *err) {
  *out = NULL;
  if (!config->endpoint || http_url_check(config->endpoint, "--endpoint", err) != 0) return -1;
  if (!config->model || !*config->model) return fimi_fail(err, "--served-model: a model name is required");
  if (config->cache_mode != OPENAI_CACHE_OFF && !config->cache_dir)
    return fimi_fail(err, "a cache mode needs --endpoint-cache DIR");
  OpenAIClient *c = fimi_calloc(1, sizeof *c, err);
  if (!c) return -1;
  c->c = *config;
  c->endpoint = copy(config->endpoint);
  c->model = copy(config->model);
  c->api_key = copy(config->api_key);
  c->cache_dir = copy(config->cache_dir);
  c->c.endpoint = c->endpoint, c->c.model = c->model, c->c.api_key = c->api_key, c->c.cache_dir = c->cache_dir;
  if (c->c.timeout_s <= 0) c->c.timeout_s = 300;
  if (c->c.max_retries < 0) c->c.max_retries = 4;
  if (c->c.backoff_s <= 0) c->c.backoff_s = 0.5;
  if (c->c.max_concurrent <= 0) c->c.max_concurrent = 8;
  size_t n = strlen(c->endpoint);
  while (n > 0 && c->endpoint[n - 1] == '/') n--;
  snprintf(c->url, sizeof c->url, "%.*s/chat/completions", (int)n, c->endpoint);
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->room, NULL);
  if (c->cache_dir && c->c.cache_mode == OPENAI_CACHE_RECORD && mkdir(c->cache_dir, 0755) != 0 && errno != EEXIST) {
    openai_client_free(c);
    return fimi_fail(err, "--endpoint-cache %s: cannot create the folder", config->cache_dir);
  }
  *out = c;
  return 0;
}

void openai_client_free(OpenAIClient *c) {
  if (!c) return;
  free(c->endpoint);
  free(c->model);
  free(c->api_key);
  free(c->cache_dir);
  pthread_cond_destroy(&c->room);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void openai_chat_free(OpenAIChat *r) {
  free(r->content);
  free(r->call_arguments);
  memset(r, 0, sizeof *r);
}

void openai_add_message(cJSON *messages, const char *role, const char *content) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", role);
  cJSON_AddStringToObject(m, "content", content);
  cJSON_AddItemToArray(messages, m);
}

// ---- reading an answer ---------------------------------------------------------------------------

static void set_malformed(OpenAIChat *r, const char *why) {
  r->malformed = 1;
  snprintf(r->malformed_why, sizeof r->malformed_why, "%s", why);
}

static void read_call(const cJSON *calls, OpenAIChat *r) {
  r->calls = cJSON_GetArraySize(calls);
  const cJSON *call = calls->child, *id = cJSON_GetObjectItemCaseSensitive(call, "id");
  const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
  if (!cJSON_IsString(name) || !*name->valuestring || strlen(name->valuestring) >= sizeof r->call_name)
    return set_malformed(r, "a tool call without a usable function name");
  r->has_call = 1;
  snprintf(r->call_name, sizeof r->call_name, "%s", name->valuestring);
  if (cJSON_IsString(id)) snprintf(r->call_id, sizeof r->call_id, "%s", id->valuestring);
  // Servers send the arguments as JSON text; some send the object itself.
  r->call_arguments = cJSON_IsString(args) ? strdup(args->valuestring) : cJSON_IsObject(args) ? cJSON_PrintUnformatted(args)
                                                                                               : strdup("");
  cJSON *parsed = r->call_arguments ? cJSON_Parse(r->call_arguments) : NULL;
  if (!cJSON_IsObject(parsed)) set_malformed(r, "tool call arguments that are not a JSON object");
  cJSON_Delete(parsed);
  if (r->calls > 1) set_malformed(r, "more than one tool call in a turn (the first is used)");
}

void openai_parse_chat_response(const char *body, size_t length, OpenAIChat *r) {
  memset(r, 0, sizeof *r);
  r->status = 200;
  cJSON *root = length > 0 && !memchr(body, 0, length) ? cJSON_ParseWithLength(body, length) : NULL;
  const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(choice, "message");
  const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");
  const cJSON *ct = cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens");
  const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
  if (cJSON_IsNumber(pt) && pt->valuedouble >= 0 && pt->valuedouble < 1e9) r->prompt_tokens = pt->valueint;
  if (cJSON_IsNumber(ct) && ct->valuedouble >= 0 && ct->valuedouble < 1e9) r->completion_tokens = ct->valueint;
  const cJSON *cached = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens_details"),
                                                         "cached_tokens");
  if (cJSON_IsNumber(cached) && cached->valuedouble >= 0 && cached->valuedouble <= r->prompt_tokens)
    r->cached_tokens = cached->valueint;
  if (cJSON_IsString(finish)) snprintf(r->finish_reason, sizeof r->finish_reason, "%s", finish->valuestring);
  if (!cJSON_IsObject(msg)) {
    set_malformed(r, root ? "an answer without choices[0].message" : "an answer that is not JSON");
  } else {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    if (cJSON_IsString(content)) r->content = strdup(content->valuestring);
    if (cJSON_IsArray(calls) && calls->child) read_call(calls, r);
    if (!r->content && !r->has_call && !r->malformed) set_malformed(r, "a message with neither content nor a tool call");
  }
  cJSON_Delete(root);
}

// ---- the cache -------------------------------------------------------------------------------------

// DIR/<first 2 hex>/<64 hex>.json of SHA-256(model "\n" body).
static int cache_path(const OpenAIClient *c, const char *body, char *path, size_t size, char *dir, size_t dir_size) {
  if (strlen(c->cache_dir) + 80 > dir_size || dir_size > size) return -1;
  unsigned char digest[32];
  unsigned int n = 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
           EVP_DigestUpdate(ctx, c->model, strlen(c->model)) == 1 && EVP_DigestUpdate(ctx, "\n", 1) == 1 &&
           EVP_DigestUpdate(ctx, body, strlen(body)) == 1 && EVP_DigestFinal_ex(ctx, digest, &n) == 1 && n == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok) return -1;
  char hex[65];
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  snprintf(dir, dir_size, "%s/%.2s", c->cache_dir, hex);
  return snprintf(path, size, "%s/%s.json", dir, hex) < (int)size ? 0 : -1;
}

// A cached answer: {"model", "request", "status", "body"}. 1 found, 0 not.
static int cache_read(const char *path, int *status, char **answer) {
  FimiError err = {0};
  cJSON *entry = json_parse_file(path, MAX_ANSWER * 2, &err);
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(entry, "status");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(entry, "body");
  int found = cJSON_IsNumber(s) && cJSON_IsString(b);
  if (found) {
    *status = s->valueint;
    *answer = strdup(b->valuestring);
    found = *answer != NULL;
  }
  cJSON_Delete(entry);
  return found;
}

static void cache_write(const OpenAIClient *c, const char *dir, const char *path, const char *body, int status,
                        const char *answer) {
  cJSON *entry = cJSON_CreateObject();
  cJSON_AddStringToObject(entry, "model", c->model);
  cJSON_AddItemToObject(entry, "request", cJSON_Parse(body));
  cJSON_AddNumberToObject(entry, "status", status);
  cJSON_AddStringToObject(entry, "body", answer);
  // A temporary file of this thread's own, then a rename: two writers of
  // one key (threads or processes) never interleave their bytes.
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.%ld.%lu.tmp", path, (long)getpid(), (unsigned long)pthread_self());
  char *text = cJSON_Print(entry);
  FILE *f = text && (mkdir(dir, 0755) == 0 || errno == EEXIST) ? fopen(tmp, "w") : NULL;
  int ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    log_warn("--endpoint-cache: could not store an answer in %s", path);
    remove(tmp);
  }
  free(text);
  cJSON_Delete(entry);
}

// ---- requests ----------------------------------------------------------------------------------------

static void wait_for_room(OpenAIClient *c) {
  pthread_mutex_lock(&c->lock);
  while (c->in_flight >= c->c.max_concurrent) pthread_cond_wait(&c->room, &c->lock);
  c->in_flight++;
  pthread_mutex_unlock(&c->lock);
}

static void give_room(OpenAIClient *c) {
  pthread_mutex_lock(&c->lock);
  c->in_flight--;
  pthread_cond_signal(&c->room);
  pthread_mutex_unlock(&c->lock);
}

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

// One POST with the retries: 0 with *status and *answer (malloc'd), or -1.
static int post_with_retries(OpenAIClient *c, const char *body, int *status, char **answer, FimiError *err) {
  HttpRequest q = {.method = "POST", .url = c->url, .bearer_token = c->api_key, .content_type = "application/json",
                   .body = body, .body_size = strlen(body), .timeout_s = c->c.timeout_s, .max_response = MAX_ANSWER};
  double wait = c->c.backoff_s;
  for (int attempt = 0;; attempt++) {
    HttpResponse r;
    FimiError e = {0};
    wait_for_room(c);
    int rc = http_request(&q, &r, &e);
    give_room(c);
    if (rc == 0 && r.status != 429 && r.status < 500) {
      *status = (int)r.status;
      *answer = r.body;  // taken
      return 0;
    }
    if (rc == -1) return fimi_fail(err, "%s", e.message);
    if (attempt == c->c.max_retries) {
      if (rc == 0) fimi_fail(err, "POST %s: HTTP %ld after %d tries: %.300s", c->url, r.status, attempt + 1, r.body);
      else fimi_fail(err, "%s (after %d tries)", e.message, attempt + 1);
      if (rc == 0) http_response_free(&r);
      return -1;
    }
    if (rc == 0) http_response_free(&r);
    sleep_s(wait);
    wait = wait * 2 < MAX_BACKOFF_S ? wait * 2 : MAX_BACKOFF_S;
  }
}

// 401, 403, 404: the server refuses who asks or what is named (a wrong key,
// model name or URL), not the request: no episode can go on.
static int refuses_the_client(int status) { return status == 401 || status == 403 || status == 404; }

// The answer to body, from the cache or the server.
static int answer_of(OpenAIClient *c, const char *body, int *status, char **answer, int *from_cache, FimiError *err) {
  char path[4096], dir[4096];
  int cached = c->cache_dir && c->c.cache_mode != OPENAI_CACHE_OFF;
  if (cached && cache_path(c, body, path, sizeof path, dir, sizeof dir) != 0)
    return fimi_fail(err, "--endpoint-cache: cannot hash a request");
  if (cached && cache_read(path, status, answer)) return *from_cache = 1, 0;
  if (c->c.cache_mode == OPENAI_CACHE_REPLAY)
    return fimi_fail(err, "--endpoint-cache %s: no recorded answer for a request (%s); replay needs the run recorded "
                          "with the same settings", c->cache_dir, path);
  if (post_with_retries(c, body, status, answer, err) != 0) return -1;
  // Answers and refusals of the request are what the server decided: kept.
  // Refusals of the client (key, model name, path) are not, so a fixed
  // setting is asked again.
  if (cached && !refuses_the_client(*status)) cache_write(c, dir, path, body, *status, *answer);
  return 0;
}

static void read_refusal(const char *answer, int status, OpenAIChat *out, const char *url, FimiError *err) {
  cJSON *root = cJSON_Parse(answer);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
  const cJSON *message = cJSON_GetObjectItemCaseSensitive(e, "message");
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
  if (cJSON_IsString(code)) snprintf(out->error_code, sizeof out->error_code, "%s", code->valuestring);
  fimi_fail(err, "POST %s: HTTP %d: %.400s", url, status, cJSON_IsString(message) ? message->valuestring : answer);
  cJSON_Delete(root);
}

int openai_chat(OpenAIClient *c, const cJSON *body, OpenAIChat *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  cJSON *request = cJSON_Duplicate(body, 1);
  if (!request) return fimi_fail(err, "out of memory");
  cJSON_DeleteItemFromObjectCaseSensitive(request, "model");
  cJSON_AddStringToObject(request, "model", c->model);
  char *text = cJSON_PrintUnformatted(request);
  cJSON_Delete(request);
  if (!text) return fimi_fail(err, "out of memory");
  int status = 0, from_cache = 0;
  char *answer = NULL;
  int rc = answer_of(c, text, &status, &answer, &from_cache, err);
  free(text);
  if (rc != 0) return -1;
  if (status == 200) {
    openai_parse_chat_response(answer, strlen(answer), out);
  } else {
    out->status = status;
    read_refusal(answer, status, out, c->url, err);
    rc = refuses_the_client(status) ? -1 : OPENAI_REFUSED;
  }
  out->from_cache = from_cache;
  free(answer);
  return rc;
}
