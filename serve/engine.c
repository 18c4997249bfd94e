// serve/engine.c: continuous batching for `fimi serve` (see engine.h). The
// engine thread alone touches the policy; HTTP threads only queue jobs and
// read their choices under the job's lock. Lock order: the engine's lock,
// then a job's.
#define _GNU_SOURCE  // memmem
#include "serve/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/rng.h"

// A busy slot's cache is copied for a new prompt only when it shares this
// many more tokens with it than the best free slot: a copy moves the whole
// sequence, a short prefill is as cheap.
#define COPY_MIN_GAIN 32

typedef struct EngineSlot {
  ServeJob *job;    // NULL: free (ids still describe what the cache holds)
  int choice;
  int32_t *ids;     // (capacity) the ids cached for this sequence
  int len;
  int next;         // sampled id to feed at the next step; -1 none
  Rng rng;
  TokenStream stream;
} EngineSlot;

struct ServeEngine {
  RolloutPolicy *policy;
  const Tokenizer *tok;
  ServeEngineConfig c;
  EngineSlot *slots;      // (policy->slots)
  float *logits;          // (slots, V) a decode step's
  float *prompt_logits;   // (V) after a prefill
  int *tokens, *active;   // (slots)
  pthread_t thread;
  int thread_started;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  ServeJob **queue;       // (max_queue) FIFO
  int queue_len;
  int stopping;
};

// ---- jobs -----------------------------------------------------------------------------------

ServeJob *serve_job_create(const int32_t *prompt, int prompt_len, int forced_len, int n, SamplerConfig sampler,
                           uint64_t seed, int max_tokens, const char *const *stop, int num_stop, FimiError *err) {
  if (prompt_len < 1 || forced_len < 0 || forced_len >= prompt_len || n < 1 || n > SERVE_MAX_CHOICES || max_tokens < 1 || num_stop < 0 || num_stop > SERVE_MAX_STOP) {
    fimi_fail(err, "serve: invalid job (prompt %d tokens, n %d, max_tokens %d, %d stop strings)", prompt_len, n,
              max_tokens, num_stop);
    return NULL;
  }
  ServeJob *job = fimi_calloc(1, sizeof *job, err);
  if (!job) return NULL;
  job->prompt = fimi_malloc(sizeof(int32_t) * (size_t)prompt_len, err);
  int ok = job->prompt != NULL;
  if (ok) memcpy(job->prompt, prompt, sizeof(int32_t) * (size_t)prompt_len);
  for (int i = 0; ok && i < num_stop; i++) ok = (job->stop[i] = strdup(stop[i])) != NULL;
  job->prompt_len = prompt_len;
  job->forced_len = forced_len;
  job->n = n;
  job->sampler = sampler;
  job->seed = seed;
  job->max_tokens = max_tokens;
  job->num_stop = num_stop;
  job->refs = 1;
  pthread_mutex_init(&job->lock, NULL);
  pthread_cond_init(&job->changed, NULL);
  if (!ok) {
    serve_job_release(job);
    fimi_fail(err, "out of memory");
    return NULL;
  }
  return job;
}

static void job_free(ServeJob *job) {
  free(job->prompt);
  for (int i = 0; i < SERVE_MAX_STOP; i++) free(job->stop[i]);
  for (int i = 0; i < SERVE_MAX_CHOICES; i++) text_free(&job->choices[i].text);
  pthread_cond_destroy(&job->changed);
  pthread_mutex_destroy(&job->lock);
  free(job);
}

void serve_job_release(ServeJob *job) {
  if (!job) return;
  pthread_mutex_lock(&job->lock);
  int last = --job->refs == 0;
  pthread_mutex_unlock(&job->lock);
  if (last) job_free(job);
}

void serve_job_cancel(ServeJob *job) {
  pthread_mutex_lock(&job->lock);
  job->cancelled = 1;
  pthread_mutex_unlock(&job->lock);
}

int serve_job_done(const ServeJob *job) { return job->finished == job->n; }

void serve_job_wait(ServeJob *job) {
  if (!serve_job_done(job)) pthread_cond_wait(&job->changed, &job->lock);
}

// Ends a job that never got slots (cancelled while queued, refused, or the
// engine stopping) and drops the engine's reference.
static void end_unstarted(ServeJob *job, ServeFinish why, const char *message) {
  pthread_mutex_lock(&job->lock);
  for (int i = 0; i < job->n; i++) job->choices[i].finish = why;
  job->finished = job->n;
  if (message) snprintf(job->error, sizeof job->error, "%s", message);
  pthread_cond_broadcast(&job->changed);
  pthread_mutex_unlock(&job->lock);
  serve_job_release(job);
}

int serve_job_wait_for(ServeJob *job, double seconds) {
  if (serve_job_done(job)) return 0;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);  // the condition's clock (default attributes)
  long ns = until.tv_nsec + (long)((seconds - (double)(long)seconds) * 1e9);
  until.tv_sec += (time_t)seconds + ns / 1000000000L;
  until.tv_nsec = ns % 1000000000L;
  return pthread_cond_timedwait(&job->changed, &job->lock, &until) == ETIMEDOUT;
}

static int job_cancelled(ServeJob *job) {
  pthread_mutex_lock(&job->lock);
  int cancelled = job->cancelled;
  pthread_mutex_unlock(&job->lock);
  return cancelled;
}

// ---- text, stop strings and finishing a choice ------------------------------------------------

// Bytes at the end of text that begin some stop string (and so may still
// become one): they are held back from streaming.
static size_t stop_prefix_held(const ServeJob *job, const TextBuf *t) {
  size_t held = 0;
  for (int i = 0; i < job->num_stop; i++) {
    size_t n = strlen(job->stop[i]);
    for (size_t k = n - 1; k > held; k--)
      if (k <= t->len && memcmp(t->data + t->len - k, job->stop[i], k) == 0) {
        held = k;
        break;
      }
  }
  return held;
}

// Appends a decoded piece to the choice (under the job's lock) and cuts the
// text at the first stop string it now holds. 1: a stop string was found.
static int append_piece(ServeJob *job, ServeChoice *ch, const char *piece, FimiError *err) {
  size_t old = ch->text.len, n = strlen(piece);
  if (n == 0) return 0;
  if (text_append(&ch->text, piece, n, err) != 0) return -1;
  size_t cut = ch->text.len;
  for (int i = 0; i < job->num_stop; i++) {
    size_t m = strlen(job->stop[i]), from = old >= m ? old - m + 1 : 0;
    const char *hit = memmem(ch->text.data + from, ch->text.len - from, job->stop[i], m);
    if (hit && (size_t)(hit - ch->text.data) < cut) cut = (size_t)(hit - ch->text.data);
  }
  int stopped = cut < ch->text.len;
  ch->text.len = cut;
  ch->text.data[cut] = '\0';
  ch->visible = stopped ? cut : cut - stop_prefix_held(job, &ch->text);
  return stopped;
}

// Adds a piece to slot s's choice; frees the piece. 1: a stop string cut it.
static int add_text(EngineSlot *s, char *piece, FimiError *err) {
  ServeJob *job = s->job;
  pthread_mutex_lock(&job->lock);
  int rc = append_piece(job, &job->choices[s->choice], piece, err);
  pthread_cond_broadcast(&job->changed);
  pthread_mutex_unlock(&job->lock);
  free(piece);
  return rc;
}

// Ends slot s's choice. flush: the decoder's held-back bytes are added first
// (unless a stop string has already ended the text).
static void finish_choice(EngineSlot *s, ServeFinish why, int flush, const char *error) {
  ServeJob *job = s->job;
  char *piece = NULL;
  FimiError err = {0};
  if (flush && token_stream_finish(&s->stream, &piece, &err) == 0 && add_text(s, piece, &err) == 1)
    why = SERVE_FINISH_STOP;
  token_stream_free(&s->stream);
  pthread_mutex_lock(&job->lock);
  ServeChoice *ch = &job->choices[s->choice];
  ch->finish = why;
  ch->visible = ch->text.len;
  if (error && !job->error[0]) snprintf(job->error, sizeof job->error, "%s", error);
  int all = ++job->finished == job->n;
  pthread_cond_broadcast(&job->changed);
  pthread_mutex_unlock(&job->lock);
  s->job = NULL;
  s->next = -1;
  if (all) serve_job_release(job);  // the engine's reference
}

static int is_stop_id(const ServeEngine *e, int id) {
  for (int i = 0; i < e->c.num_stop_ids; i++)
    if (e->c.stop_ids[i] == id) return 1;
  return 0;
}

// The choice in slot s sampled `id`: end the turn, or add its text and
// feed it at the next step.
// The id that ends the turn counts as generated (the model sampled it, as
// a rollout counts it), but adds no text.
static void take_token(ServeEngine *e, EngineSlot *s, int id) {
  ServeJob *job = s->job;
  pthread_mutex_lock(&job->lock);
  int tokens = ++job->choices[s->choice].tokens;
  pthread_mutex_unlock(&job->lock);
  if (is_stop_id(e, id)) {
    finish_choice(s, SERVE_FINISH_STOP, 1, NULL);
    return;
  }
  char *piece = NULL;
  FimiError err = {0};
  int cut = token_stream_push(&s->stream, id, &piece, &err) == 0 ? add_text(s, piece, &err) : -1;
  if (cut < 0)
    finish_choice(s, SERVE_FINISH_ERROR, 0, err.message);
  else if (cut)
    finish_choice(s, SERVE_FINISH_STOP, 0, NULL);
  else if (tokens >= job->max_tokens || s->len + 1 > e->policy->capacity)
    finish_choice(s, SERVE_FINISH_LENGTH, 1, NULL);
  else
    s->next = id;
}

// ---- admitting a job: prefix reuse, one prefill, copies for the other choices ----------------

static int common_prefix(const EngineSlot *s, const ServeJob *job) {
  int n = s->len < job->prompt_len ? s->len : job->prompt_len, k = 0;
  while (k < n && s->ids[k] == job->prompt[k]) k++;
  return k;
}

static int copy_slot(ServeEngine *e, int dst, int src, FimiError *err) {
  if (e->policy->copy(e->policy->ctx, dst, src, err) != 0) {
    e->policy->reset(e->policy->ctx, dst);  // a partial copy holds no prefix anyone may reuse
    e->slots[dst].len = 0;
    return -1;
  }
  memcpy(e->slots[dst].ids, e->slots[src].ids, sizeof(int32_t) * (size_t)e->slots[src].len);
  e->slots[dst].len = e->slots[src].len;
  return 0;
}

// The free slot for a job's prompt, primed with the longest cached prefix
// found; *cached gets its length.
static int prime_slot(ServeEngine *e, const ServeJob *job, int *cached, FimiError *err) {
  int best_free = -1, best_free_k = -1, best_any = -1, best_any_k = -1;
  for (int i = 0; i < e->policy->slots; i++) {
    int k = common_prefix(&e->slots[i], job);
    if (!e->slots[i].job && k > best_free_k) best_free = i, best_free_k = k;
    if (k > best_any_k) best_any = i, best_any_k = k;
  }
  *cached = best_free_k;
  if (best_any != best_free && best_any_k > best_free_k + COPY_MIN_GAIN) {
    if (copy_slot(e, best_free, best_any, err) != 0) return -1;
    *cached = best_any_k;
  }
  return best_free;
}

static void fail_job_slots(ServeEngine *e, ServeJob *job, const char *message) {
  for (int i = 0; i < e->policy->slots; i++)
    if (e->slots[i].job == job) finish_choice(&e->slots[i], SERVE_FINISH_ERROR, 0, message);
}

static int free_slot(const ServeEngine *e) {
  for (int i = 0; i < e->policy->slots; i++)
    if (!e->slots[i].job) return i;
  return -1;
}

// Slot gets a job's choice; the forced prefix goes through its decoder
// first, so the sampled text continues it exactly as a whole turn decodes.
static void assign(ServeEngine *e, int slot, ServeJob *job, int choice) {
  EngineSlot *s = &e->slots[slot];
  s->job = job;
  s->choice = choice;
  s->next = -1;
  rng_seed(&s->rng, rng_mix(job->seed, (uint64_t)choice));
  token_stream_init(&s->stream, e->tok, 0);
  ServeChoice *ch = &job->choices[choice];
  for (int i = job->prompt_len - job->forced_len; i < job->prompt_len; i++) {
    char *piece = NULL;
    FimiError err = {0};
    if (token_stream_push(&s->stream, job->prompt[i], &piece, &err) == 0) {
      pthread_mutex_lock(&job->lock);
      text_append_str(&ch->text, piece, &err);
      pthread_mutex_unlock(&job->lock);
    }
    free(piece);
  }
}

// Prefills the job's prompt once, copies it to a slot per choice, samples
// each choice's first token. The caller made sure n slots are free.
static void start_job(ServeEngine *e, ServeJob *job) {
  FimiError err = {0};
  int cached = 0, first = prime_slot(e, job, &cached, &err);
  if (first < 0) {
    end_unstarted(job, SERVE_FINISH_ERROR, err.message);
    return;
  }
  EngineSlot *s = &e->slots[first];
  int keep = cached < job->prompt_len ? cached : job->prompt_len - 1;  // one token at least gives the logits
  e->policy->truncate(e->policy->ctx, first, keep);
  s->len = keep;
  assign(e, first, job, 0);
  pthread_mutex_lock(&job->lock);
  job->cached_tokens = keep;
  pthread_mutex_unlock(&job->lock);
  int rc = e->policy->prefill(e->policy->ctx, first, job->prompt + keep, job->prompt_len - keep, e->prompt_logits, &err);
  if (rc == 0) {
    memcpy(s->ids + keep, job->prompt + keep, sizeof(int32_t) * (size_t)(job->prompt_len - keep));
    s->len = job->prompt_len;
  } else {
    e->policy->reset(e->policy->ctx, first);
    s->len = 0;
  }
  for (int i = 1; i < job->n; i++) {
    int slot = free_slot(e);
    assign(e, slot, job, i);
    if (rc == 0) rc = copy_slot(e, slot, first, &err);
  }
  if (rc != 0) {
    fail_job_slots(e, job, err.message);
    return;
  }
  for (int i = 0; i < e->policy->slots; i++) {
    EngineSlot *c = &e->slots[i];
    if (c->job == job && c->next < 0) take_token(e, c, sample_token(e->prompt_logits, e->policy->vocab, &job->sampler, &c->rng));
  }
}

// ---- the engine thread ------------------------------------------------------------------------

static int free_slots(const ServeEngine *e) {
  int n = 0;
  for (int i = 0; i < e->policy->slots; i++) n += !e->slots[i].job;
  return n;
}

static int any_busy(const ServeEngine *e) { return free_slots(e) < e->policy->slots; }

// Takes (under the engine's lock) the waiting jobs that fit the free slots,
// in order; cancelled ones are dropped.
static int take_admitted(ServeEngine *e, ServeJob **out) {
  int n = 0, room = free_slots(e);
  while (e->queue_len > 0 && (job_cancelled(e->queue[0]) || e->queue[0]->n <= room)) {
    ServeJob *job = e->queue[0];
    memmove(e->queue, e->queue + 1, sizeof *e->queue * (size_t)--e->queue_len);
    if (job_cancelled(job)) {
      end_unstarted(job, SERVE_FINISH_CANCELLED, NULL);
      continue;
    }
    room -= job->n;
    out[n++] = job;
  }
  return n;
}

static void drop_cancelled(ServeEngine *e) {
  for (int i = 0; i < e->policy->slots; i++)
    if (e->slots[i].job && job_cancelled(e->slots[i].job)) finish_choice(&e->slots[i], SERVE_FINISH_CANCELLED, 0, NULL);
}

// One token for every slot with one to feed.
static void decode_step(ServeEngine *e) {
  int any = 0, B = e->policy->slots, V = e->policy->vocab;
  for (int i = 0; i < B; i++) {
    e->active[i] = e->slots[i].job && e->slots[i].next >= 0;
    e->tokens[i] = e->active[i] ? e->slots[i].next : 0;
    any |= e->active[i];
  }
  if (!any) return;
  FimiError err = {0};
  if (e->policy->decode(e->policy->ctx, e->tokens, e->active, e->logits, &err) != 0) {
    log_warn("fimi serve: a decode step failed: %s", err.message);
    for (int i = 0; i < B; i++)
      if (e->active[i]) {
        e->policy->reset(e->policy->ctx, i);
        e->slots[i].len = 0;
        finish_choice(&e->slots[i], SERVE_FINISH_ERROR, 0, err.message);
      }
    return;
  }
  for (int i = 0; i < B; i++) {
    if (!e->active[i]) continue;
    EngineSlot *s = &e->slots[i];
    s->ids[s->len++] = s->next;
    s->next = -1;
    take_token(e, s, sample_token(e->logits + (size_t)i * V, V, &s->job->sampler, &s->rng));
  }
}

static void fail_everything(ServeEngine *e, const char *message) {
  for (int i = 0; i < e->policy->slots; i++)
    if (e->slots[i].job) finish_choice(&e->slots[i], SERVE_FINISH_ERROR, 0, message);
  for (int q = 0; q < e->queue_len; q++) end_unstarted(e->queue[q], SERVE_FINISH_ERROR, message);
  e->queue_len = 0;
}

static void *engine_main(void *arg) {
  ServeEngine *e = arg;
  ServeJob **admitted = malloc(sizeof *admitted * (size_t)(e->c.max_queue + 1));
  for (;;) {
    pthread_mutex_lock(&e->lock);
    while (!e->stopping && e->queue_len == 0 && !any_busy(e)) pthread_cond_wait(&e->wake, &e->lock);
    if (e->stopping || !admitted) {
      e->stopping = 1;  // later submits are refused
      fail_everything(e, admitted ? "the server is stopping" : "the engine is out of memory");
      pthread_mutex_unlock(&e->lock);
      break;
    }
    int n = take_admitted(e, admitted);
    pthread_mutex_unlock(&e->lock);
    for (int i = 0; i < n; i++) start_job(e, admitted[i]);
    drop_cancelled(e);
    decode_step(e);
  }
  free(admitted);
  return NULL;
}

// ---- start, submit, stop ------------------------------------------------------------------------

int serve_engine_start(RolloutPolicy *policy, const Tokenizer *tok, const ServeEngineConfig *c, ServeEngine **out,
                       FimiError *err) {
  *out = NULL;
  if (c->max_queue < 1 || c->num_stop_ids < 0 || c->num_stop_ids > SERVE_MAX_STOP_IDS || !policy->truncate)
    return fimi_fail(err, "serve: invalid engine configuration");
  ServeEngine *e = fimi_calloc(1, sizeof *e, err);
  if (!e) return -1;
  e->policy = policy;
  e->tok = tok;
  e->c = *c;
  int B = policy->slots;
  e->slots = fimi_calloc((size_t)B, sizeof *e->slots, err);
  e->logits = e->slots ? fimi_malloc(sizeof(float) * (size_t)B * (size_t)policy->vocab, err) : NULL;
  e->prompt_logits = e->logits ? fimi_malloc(sizeof(float) * (size_t)policy->vocab, err) : NULL;
  e->tokens = e->prompt_logits ? fimi_calloc((size_t)B, sizeof(int), err) : NULL;
  e->active = e->tokens ? fimi_calloc((size_t)B, sizeof(int), err) : NULL;
  e->queue = e->active ? fimi_calloc((size_t)c->max_queue, sizeof *e->queue, err) : NULL;
  int ok = e->queue != NULL;
  for (int i = 0; ok && i < B; i++) {
    e->slots[i].next = -1;
    ok = (e->slots[i].ids = fimi_malloc(sizeof(int32_t) * (size_t)policy->capacity, err)) != NULL;
  }
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->wake, NULL);
  if (ok && pthread_create(&e->thread, NULL, engine_main, e) != 0) ok = fimi_fail(err, "serve: no engine thread") == 0;
  e->thread_started = ok;
  if (!ok) {
    serve_engine_free(e);
    return -1;
  }
  *out = e;
  return 0;
}

int serve_engine_capacity(const ServeEngine *e) { return e->policy->capacity; }

int serve_engine_submit(ServeEngine *e, ServeJob *job, FimiError *err) {
  if (job->prompt_len >= e->policy->capacity) {
    fimi_fail(err, "the prompt has %d tokens; this server's context is %d tokens, and at least one must be left "
                   "to generate", job->prompt_len, e->policy->capacity);
    return SERVE_SUBMIT_TOO_LONG;
  }
  if (job->n > e->policy->slots) {
    fimi_fail(err, "n = %d is more than this server's %d sequences (--slots)", job->n, e->policy->slots);
    return SERVE_SUBMIT_TOO_MANY;
  }
  pthread_mutex_lock(&e->lock);
  int rc = e->stopping ? SERVE_SUBMIT_STOPPING : e->queue_len == e->c.max_queue ? SERVE_SUBMIT_FULL : 0;
  if (rc == 0) {
    pthread_mutex_lock(&job->lock);
    job->refs++;
    pthread_mutex_unlock(&job->lock);
    e->queue[e->queue_len++] = job;
    pthread_cond_signal(&e->wake);
  }
  pthread_mutex_unlock(&e->lock);
  if (rc == SERVE_SUBMIT_FULL) fimi_fail(err, "%d requests are already waiting; retry later", e->c.max_queue);
  if (rc == SERVE_SUBMIT_STOPPING) fimi_fail(err, "the server is stopping");
  return rc;
}

void serve_engine_stop(ServeEngine *e) {
  if (!e || !e->thread_started) return;
  pthread_mutex_lock(&e->lock);
  e->stopping = 1;
  pthread_cond_signal(&e->wake);
  pthread_mutex_unlock(&e->lock);
  pthread_join(e->thread, NULL);
  e->thread_started = 0;
}

void serve_engine_free(ServeEngine *e) {
  if (!e) return;
  serve_engine_stop(e);
  for (int i = 0; e->slots && i < e->policy->slots; i++) free(e->slots[i].ids);
  free(e->slots);
  free(e->logits);
  free(e->prompt_logits);
  free(e->tokens);
  free(e->active);
  free(e->queue);
  pthread_cond_destroy(&e->wake);
  pthread_mutex_destroy(&e->lock);
  free(e);
}
