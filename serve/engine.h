// serve/engine.h: the generation engine behind `fimi serve` (docs/serving.md).
// Defines ServeJob (one request: a prompt, n choices, sampling, limits, and
// the text generated so far), ServeEngine and serve_engine_start/_submit/
// _stop, serve_job_create/_cancel/_release/_wait.
//
// One engine thread owns the policy (rl/rollout.h's RolloutPolicy: the
// model and its KV cache of `slots` sequences, on the CPU or a GPU) and runs
// continuous batching: every step decodes one token for each active
// sequence together; a sequence that finishes frees its slot for the next
// waiting job at once. A job's n choices share one prefill of its prompt
// (the other slots copy it). A slot keeps the ids it holds after its job
// ends, and a new prompt starts from the slot (free or copied from a busy
// one) with the longest common prefix: an agent's next turn re-sends the
// whole conversation, and only the new part is prefilled.
//
// HTTP threads create jobs, submit them and read what the engine writes
// under the job's lock (serve_job_wait). A job is freed when both sides have
// released it. Failures of one job (a prompt the policy refuses) finish that
// job with an error; the others go on.
#ifndef FIMI_SERVE_ENGINE_H
#define FIMI_SERVE_ENGINE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/text.h"
#include "data/tokenizer.h"
#include "model/decode.h"
#include "rl/rollout.h"

#define SERVE_MAX_CHOICES 16  // `n`
#define SERVE_MAX_STOP 4      // stop strings, as the OpenAI API allows
#define SERVE_MAX_STOP_IDS 16 // ids that end a model turn

typedef enum {
  SERVE_FINISH_NONE = 0,  // still generating
  SERVE_FINISH_STOP,      // the model ended its turn, or a stop string
  SERVE_FINISH_LENGTH,    // max_tokens, or the context is full
  SERVE_FINISH_CANCELLED, // the client went away
  SERVE_FINISH_ERROR      // the engine failed the job (ServeJob.error)
} ServeFinish;

typedef struct ServeChoice {
  TextBuf text;      // decoded so far, the forced prefix first; the stop string cut off
  size_t visible;    // bytes of text no stop string can still cut (safe to stream)
  int tokens;        // sampled tokens (the one that ended the turn included)
  ServeFinish finish;
} ServeChoice;

typedef struct ServeJob {
  // Set by serve_job_create; read-only afterwards.
  int32_t *prompt;   // (prompt_len) the rendered prompt, the forced prefix at its end
  int prompt_len;
  int forced_len;    // the last forced_len prompt ids start the model's turn (tool_choice)
  int n;             // choices
  SamplerConfig sampler;
  uint64_t seed;     // choice i samples from rng_mix(seed, i)
  int max_tokens;    // per choice
  char *stop[SERVE_MAX_STOP];
  int num_stop;
  // Written by the engine under lock; changed is signalled on every change.
  pthread_mutex_t lock;
  pthread_cond_t changed;
  ServeChoice choices[SERVE_MAX_CHOICES];
  int finished;      // choices finished
  int cached_tokens; // prompt tokens found in the cache (not prefilled)
  char error[FIMI_ERROR_MESSAGE_MAX];
  int cancelled;     // set by serve_job_cancel
  int refs;
} ServeJob;

// A job of n choices (1..SERVE_MAX_CHOICES) over a copy of prompt, whose
// last forced_len ids (< prompt_len) begin the model's turn: their text
// starts every choice's text. The caller holds the one reference.
ServeJob *serve_job_create(const int32_t *prompt, int prompt_len, int forced_len, int n, SamplerConfig sampler,
                           uint64_t seed, int max_tokens, const char *const *stop, int num_stop, FimiError *err);
// The client went away: the engine drops the job at its next step.
void serve_job_cancel(ServeJob *job);
void serve_job_release(ServeJob *job);
// Waits (job->lock held by the caller) until something changed or the job
// finished; returns at once when all choices have finished.
void serve_job_wait(ServeJob *job);
// serve_job_wait for at most seconds: 1 when the time ran out.
int serve_job_wait_for(ServeJob *job, double seconds);
// 1 when every choice has finished (read under job->lock).
int serve_job_done(const ServeJob *job);

typedef struct ServeEngine ServeEngine;

typedef struct ServeEngineConfig {
  int max_queue;              // jobs waiting for slots at most (submit fails beyond)
  int32_t stop_ids[SERVE_MAX_STOP_IDS];  // sampled ids that end a turn (<end_of_turn>, <eos>, ...)
  int num_stop_ids;
} ServeEngineConfig;

// Starts the engine thread on policy and tok (both the caller's, outliving
// the engine).
int serve_engine_start(RolloutPolicy *policy, const Tokenizer *tok, const ServeEngineConfig *c, ServeEngine **out,
                       FimiError *err);
// serve_engine_submit's refusals (err says more).
#define SERVE_SUBMIT_FULL (-2)      // max_queue jobs are waiting
#define SERVE_SUBMIT_TOO_LONG (-3)  // the prompt leaves no room to generate
#define SERVE_SUBMIT_STOPPING (-4)  // the engine is stopping
#define SERVE_SUBMIT_TOO_MANY (-5)  // n is more than the engine's sequences

// Queues the job (the engine takes its own reference): 0, or one of the
// refusals above.
int serve_engine_submit(ServeEngine *e, ServeJob *job, FimiError *err);
// Tokens one sequence holds at most.
int serve_engine_capacity(const ServeEngine *e);
// Finishes every job in flight with an error and joins the thread; later
// submits are refused (SERVE_SUBMIT_STOPPING). The engine stays valid until
// serve_engine_free, so HTTP threads still running may call it.
void serve_engine_stop(ServeEngine *e);
void serve_engine_free(ServeEngine *e);

#endif
