// serve/api.c: routing, checks, and the chat-completions answer, whole or
// streamed (see api.h).
#define _GNU_SOURCE  // memmem
#include "serve/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/rng.h"
#include "net/http_token.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"

#define COMPLETIONS_PATH "/v1/chat/completions"
#define MODELS_PATH "/v1/models"

int serve_api_init(ServeApi *api, const ServeApiConfig *c, ServeEngine *engine, const Tokenizer *tok,
                   FimiError *err) {
  memset(api, 0, sizeof *api);
  api->c = *c;
  api->engine = engine;
  api->tok = tok;
  api->created = (long)time(NULL);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  api->id_seed = rng_mix((uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec, (uint64_t)getpid());
  pthread_mutex_init(&api->id_lock, NULL);
  return chat_init(&api->format, tok, err);
}

void serve_api_free(ServeApi *api) {
  chat_free(&api->format);
  pthread_mutex_destroy(&api->id_lock);
}

// A fresh 64-bit value for ids and default seeds.
static uint64_t fresh(ServeApi *api) {
  pthread_mutex_lock(&api->id_lock);
  uint64_t n = ++api->counter;
  pthread_mutex_unlock(&api->id_lock);
  return rng_mix(api->id_seed, n);
}

void serve_http_response_free(ServeHttpResponse *r) {
  free(r->body);
  serve_stream_free(r->stream);
  memset(r, 0, sizeof *r);
}

static void answer_error(ServeHttpResponse *r, const ServeError *e) {
  r->status = e->status;
  r->body = serve_error_body(e);
  if (!r->body) r->status = 500;
}

static const char *finish_reason(ServeFinish f, int is_call) {
  return is_call ? "tool_calls" : f == SERVE_FINISH_LENGTH ? "length" : "stop";
}

// ---- streams -----------------------------------------------------------------------------------

struct ServeStream {
  ServeApi *api;
  ServeJob *job;
  char id[40];
  char model[SERVE_MAX_MODEL_NAME];
  int n, include_usage, parse_calls, prompt_len;
  double keepalive_s;
  int started;                          // the role chunks are out
  size_t sent[SERVE_MAX_CHOICES];       // bytes of each choice's text sent as content
  int in_call[SERVE_MAX_CHOICES];       // the text reached the tool-call tag: content stops there
  int closed[SERVE_MAX_CHOICES];        // the finish chunk is out
};

void serve_stream_free(ServeStream *s) {
  if (!s) return;
  serve_job_cancel(s->job);  // no effect once the job has finished
  serve_job_release(s->job);
  free(s);
}

static const char *call_tag(const ServeApi *api) {
  return api->format.format == CHAT_FORMAT_GEMMA4 ? "<|tool_call>" : "<tool_call>";
}

// Bytes of choice i that can go out as content now: up to what no stop
// string can cut and, when tool calls are parsed, before the call tag (or
// a part of it at the end).
static size_t sendable(ServeStream *s, const ServeChoice *ch, int i) {
  if (s->in_call[i]) return s->sent[i];
  size_t limit = ch->visible;
  if (!s->parse_calls) return limit;
  const char *tag = call_tag(s->api);
  size_t m = strlen(tag), from = s->sent[i];  // no tag starts before what was sent: each byte is read once
  const char *hit = limit > from ? memmem(ch->text.data + from, limit - from, tag, m) : NULL;
  if (hit) {
    s->in_call[i] = 1;
    return (size_t)(hit - ch->text.data);
  }
  for (size_t k = m - 1; k > 0; k--)
    if (k <= limit && memcmp(ch->text.data + limit - k, tag, k) == 0) return limit - k;
  return limit;
}

static int append_event(TextBuf *out, char *event) {
  int rc = event ? text_append_str(out, event, NULL) : -1;
  free(event);
  return rc;
}

static cJSON *content_delta(const char *text, size_t len) {
  cJSON *delta = cJSON_CreateObject();
  char *piece = strndup(text, len);
  cJSON_AddStringToObject(delta, "content", piece ? piece : "");
  free(piece);
  return delta;
}

// The end of choice i: the rest of its content or its tool call, then the
// chunk with its finish_reason. A failed choice gets no chunk (the stream
// ends with the error event).
static int close_choice(ServeStream *s, int i, TextBuf *out) {
  const ServeChoice *ch = &s->job->choices[i];
  s->closed[i] = 1;
  if (ch->finish == SERVE_FINISH_ERROR || ch->finish == SERVE_FINISH_CANCELLED) return 0;
  char call_id[32];
  snprintf(call_id, sizeof call_id, "call_%016llx", (unsigned long long)fresh(s->api));
  int is_call = 0;
  cJSON *msg = serve_assistant_message(&s->api->format, ch->text.data ? ch->text.data : "", ch->text.len,
                                       s->parse_calls, call_id, &is_call);
  if (!msg) return -1;
  int rc = 0;
  if (is_call) {
    cJSON *calls = cJSON_DetachItemFromObject(msg, "tool_calls"), *delta = cJSON_CreateObject();
    cJSON_AddNumberToObject(calls->child, "index", 0);
    cJSON_AddItemToObject(delta, "tool_calls", calls);
    rc = append_event(out, serve_chunk(s->id, s->api->created, s->model, i, delta, NULL, NULL));
  } else if (ch->text.len > s->sent[i]) {
    cJSON *delta = content_delta(ch->text.data + s->sent[i], ch->text.len - s->sent[i]);
    rc = append_event(out, serve_chunk(s->id, s->api->created, s->model, i, delta, NULL, NULL));
  }
  cJSON_Delete(msg);
  if (rc == 0)
    rc = append_event(out, serve_chunk(s->id, s->api->created, s->model, i, cJSON_CreateObject(),
                                       finish_reason(ch->finish, is_call), NULL));
  return rc;
}

// The stream's last events: an error event when a choice failed, the usage
// chunk when asked for, [DONE].
static int end_stream(ServeStream *s, TextBuf *out) {
  const ServeJob *job = s->job;
  int rc = 0, completion = 0;
  for (int i = 0; i < s->n; i++) completion += job->choices[i].tokens;
  if (job->error[0]) {
    ServeError e;
    serve_error(&e, 500, "server_error", NULL, NULL, "generation failed: %s", job->error);
    char *body = serve_error_body(&e);
    rc = body ? text_printf(out, NULL, "data: %s\n\n", body) : -1;
    free(body);
  }
  if (rc == 0 && s->include_usage)
    rc = append_event(out, serve_chunk(s->id, s->api->created, s->model, 0, NULL, NULL,
                                       serve_usage(s->prompt_len, completion, job->cached_tokens)));
  return rc == 0 ? text_append_str(out, "data: [DONE]\n\n", NULL) : -1;
}

// One pass over the choices under the job's lock: what is new goes out.
// Returns the number of events added, or -1.
static int stream_pass(ServeStream *s, TextBuf *out) {
  int added = 0;
  if (!s->started) {
    for (int i = 0; i < s->n; i++) {
      cJSON *delta = cJSON_CreateObject();
      cJSON_AddStringToObject(delta, "role", "assistant");
      cJSON_AddStringToObject(delta, "content", "");
      if (append_event(out, serve_chunk(s->id, s->api->created, s->model, i, delta, NULL, NULL)) != 0) return -1;
    }
    s->started = 1;
    added++;
  }
  for (int i = 0; i < s->n; i++) {
    if (s->closed[i]) continue;
    const ServeChoice *ch = &s->job->choices[i];
    size_t limit = sendable(s, ch, i);
    if (limit > s->sent[i]) {
      cJSON *delta = content_delta(ch->text.data + s->sent[i], limit - s->sent[i]);
      if (append_event(out, serve_chunk(s->id, s->api->created, s->model, i, delta, NULL, NULL)) != 0) return -1;
      s->sent[i] = limit;
      added++;
    }
    if (ch->finish != SERVE_FINISH_NONE) {
      if (close_choice(s, i, out) != 0) return -1;
      added++;
    }
  }
  return added;
}

int serve_stream_next(ServeStream *s, TextBuf *out) {
  ServeJob *job = s->job;
  pthread_mutex_lock(&job->lock);
  int rc = 0;
  for (;;) {
    int added = stream_pass(s, out);
    if (added < 0) {
      rc = -1;
      break;
    }
    if (serve_job_done(job)) {
      rc = end_stream(s, out) == 0 ? 1 : -1;
      break;
    }
    if (added > 0) break;
    if (serve_job_wait_for(job, s->keepalive_s)) {  // nothing new for a while: a comment keeps the line busy
      rc = text_append_str(out, ": keep-alive\n\n", NULL) == 0 ? 0 : -1;
      break;
    }
  }
  pthread_mutex_unlock(&job->lock);
  return rc;
}

// ---- chat completions --------------------------------------------------------------------------

// Waits for the job to finish; a client that goes away meanwhile cancels it.
static void wait_for_job(ServeJob *job, const ServeHttpRequest *q) {
  pthread_mutex_lock(&job->lock);
  while (!serve_job_done(job)) {
    if (serve_job_wait_for(job, 1.0) && q->client_gone && !job->cancelled && q->client_gone(q->client_ctx))
      job->cancelled = 1;  // (under the job's lock, as serve_job_cancel sets it)
  }
  pthread_mutex_unlock(&job->lock);
}

// The whole answer of a finished job.
static void answer_completion(ServeApi *api, const ServeRequest *req, ServeJob *job, const char *id, int parse_calls,
                              const ServeHttpRequest *q, ServeHttpResponse *r) {
  wait_for_job(job, q);
  ServeError e;
  if (job->error[0]) {
    serve_error(&e, 500, "server_error", NULL, NULL, "generation failed: %s", job->error);
    answer_error(r, &e);
    return;
  }
  cJSON *choices = cJSON_CreateArray();
  int completion = 0;
  for (int i = 0; i < job->n; i++) {
    const ServeChoice *ch = &job->choices[i];
    char call_id[32];
    snprintf(call_id, sizeof call_id, "call_%016llx", (unsigned long long)fresh(api));
    int is_call = 0;
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(choice, "index", i);
    cJSON_AddItemToObject(choice, "message", serve_assistant_message(&api->format, ch->text.data ? ch->text.data : "",
                                                                      ch->text.len, parse_calls, call_id, &is_call));
    cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddStringToObject(choice, "finish_reason", finish_reason(ch->finish, is_call));
    cJSON_AddItemToArray(choices, choice);
    completion += ch->tokens;
  }
  r->status = 200;
  r->body = serve_completion_body(id, api->created, req->model, choices,
                                  serve_usage(job->prompt_len, completion, job->cached_tokens));
  if (!r->body) r->status = 500;
}

static int submit_error(int rc, const FimiError *err, ServeError *e) {
  if (rc == SERVE_SUBMIT_FULL) return serve_error(e, 429, "rate_limit_error", "server_busy", NULL, "%s", err->message);
  if (rc == SERVE_SUBMIT_TOO_LONG)
    return serve_error(e, 400, "invalid_request_error", "context_length_exceeded", "messages", "%s", err->message);
  if (rc == SERVE_SUBMIT_TOO_MANY) return serve_error(e, 400, "invalid_request_error", NULL, "n", "%s", err->message);
  if (rc == SERVE_SUBMIT_STOPPING) return serve_error(e, 503, "server_error", NULL, NULL, "%s", err->message);
  return serve_error(e, 500, "server_error", NULL, NULL, "%s", err->message);
}

// The job of a parsed request: rendered, limited to the context, queued.
static ServeJob *queue_job(ServeApi *api, const ServeRequest *req, ServeError *e) {
  ChatBuilder b;
  TokenIds prompt = {0};
  FimiError err = {0};
  int forced = 0;
  if (chat_init(&b, api->tok, &err) != 0) {
    serve_error(e, 500, "server_error", NULL, NULL, "%s", err.message);
    return NULL;
  }
  int rc = serve_request_render(req, &b, &prompt, &forced, e);
  chat_free(&b);
  ServeJob *job = NULL;
  if (rc == 0) {
    int room = serve_engine_capacity(api->engine) - (int)prompt.len;
    int max_tokens = req->max_tokens > 0 && req->max_tokens < room ? req->max_tokens : room;
    job = serve_job_create(prompt.data, (int)prompt.len, forced, req->n, req->sampler,
                           req->has_seed ? req->seed : fresh(api), max_tokens < 1 ? 1 : max_tokens,
                           req->stop, req->num_stop, &err);
    if (!job) serve_error(e, 500, "server_error", NULL, NULL, "%s", err.message);
  }
  token_ids_free(&prompt);
  if (job && (rc = serve_engine_submit(api->engine, job, &err)) != 0) {
    submit_error(rc, &err, e);
    serve_job_release(job);
    job = NULL;
  }
  return job;
}

static void chat_completions(ServeApi *api, const ServeHttpRequest *q, ServeHttpResponse *r) {
  ServeRequest req;
  ServeError e;
  if (serve_request_parse(q->body ? q->body : "", q->body_length, &req, &e) != 0) return answer_error(r, &e);
  if (strcmp(req.model, api->c.model_name) != 0) {
    serve_error(&e, 404, "invalid_request_error", "model_not_found", "model",
                "the model \"%.200s\" does not exist here; this server serves \"%.200s\"", req.model,
                api->c.model_name);
    serve_request_free(&req);
    return answer_error(r, &e);
  }
  ServeJob *job = queue_job(api, &req, &e);
  if (!job) {
    serve_request_free(&req);
    return answer_error(r, &e);
  }
  char id[40];
  snprintf(id, sizeof id, "chatcmpl-%016llx", (unsigned long long)fresh(api));
  int parse_calls = req.tools && req.tool_choice != SERVE_TOOL_CHOICE_NONE;
  if (!req.stream) {
    answer_completion(api, &req, job, id, parse_calls, q, r);
    serve_job_release(job);
    serve_request_free(&req);
    return;
  }
  ServeStream *s = calloc(1, sizeof *s);
  if (!s) {
    serve_job_cancel(job);
    serve_job_release(job);
    r->status = 500;
  } else {
    *s = (ServeStream){.api = api, .job = job, .n = req.n, .include_usage = req.include_usage,
                       .parse_calls = parse_calls, .prompt_len = job->prompt_len,
                       .keepalive_s = api->c.keepalive_s > 0 ? api->c.keepalive_s : 15};
    snprintf(s->id, sizeof s->id, "%s", id);
    snprintf(s->model, sizeof s->model, "%s", req.model);
    r->status = 200;
    r->stream = s;
  }
  serve_request_free(&req);
}

void serve_api_handle(ServeApi *api, const ServeHttpRequest *q, ServeHttpResponse *r) {
  memset(r, 0, sizeof *r);
  ServeError e;
  const char *key = api->c.api_key;
  if (key && *key && !http_bearer_matches(q->authorization, key)) {
    log_warn("fimi serve: refused a request without the right API key");
    serve_error(&e, 401, "authentication_error", "invalid_api_key", NULL,
                "send the server's API key as Authorization: Bearer <key>");
    r->authenticate = 1;
    return answer_error(r, &e);
  }
  int models = strcmp(q->path, MODELS_PATH) == 0, completions = strcmp(q->path, COMPLETIONS_PATH) == 0;
  if (!models && !completions) {
    serve_error(&e, 404, "invalid_request_error", "unknown_url", NULL, "no such endpoint: %.200s %.200s", q->method,
                q->path);
    return answer_error(r, &e);
  }
  const char *want = models ? "GET" : "POST";
  if (strcmp(q->method, want) != 0) {
    serve_error(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%s takes %s", q->path, want);
    r->allow = want;
    return answer_error(r, &e);
  }
  if (models) {
    r->status = 200;
    r->body = serve_models_body(api->c.model_name, api->created);
    if (!r->body) r->status = 500;
    return;
  }
  if (q->body_too_large) {
    serve_error(&e, 413, "invalid_request_error", "request_too_large", NULL, "the body is over %zu bytes",
                api->c.max_body_bytes);
    return answer_error(r, &e);
  }
  chat_completions(api, q, r);
}
