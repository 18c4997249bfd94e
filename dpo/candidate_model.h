// dpo/candidate_model.h: a saved model as the DpoCandidate of dpo/pairs.h.
// Defines DpoDecoder (one sequence's KV cache behind prefill and decode
// calls: dpo_decoder_cpu here over model/decode.h, the GPU one in
// cmd/dpo_decoder_cuda.h), DpoModelCandidate, its init/free and
// dpo_model_candidate (the callbacks). The prefix is rendered with
// data/chat.h's chat_render_messages plus the generation prompt, which gives
// the ids a rollout builds turn by turn for the same conversation
// (env/transcript.h), and the turn is sampled with model/decode.h's KV cache
// until <end_of_turn> (or <eos>, or max_new tokens), then decoded keeping the
// special tokens so <tool_call> tags survive (as rl/rollout does). The
// score callback teacher-forces a given turn through the same cache and sums
// its log-probs over the tokens the DPO loss counts.
//
// Within a dialog the cache keeps the longest common prefix of the previous
// turn's prompt (the reference prefix only grows) and prefills the rest;
// begin_dialog empties it, so a dialog's turns never depend on other
// dialogs and a resumed run samples the same tokens.
#ifndef FIMI_DPO_CANDIDATE_MODEL_H
#define FIMI_DPO_CANDIDATE_MODEL_H

#include <stdint.h>

#include "core/error.h"
#include "data/chat.h"
#include "data/tokenizer.h"
#include "dpo/pairs.h"
#include "model/decode.h"
#include "model/gemma.h"

// A model with the KV cache of one sequence. Logits are host arrays (V).
typedef struct DpoDecoder {
  int vocab_size, max_positions;
  // Room for `need` cached positions: 0 when the cache kept its contents, 1
  // when it was (re)created empty, -1 on errors.
  int (*reserve)(void *ctx, int need, FimiError *err);
  // Keeps the first `length` cached positions (length <= what is cached).
  void (*truncate)(void *ctx, int length);
  // Appends ids[0..n) (n >= 1); logits after the last one.
  int (*prefill)(void *ctx, const int *ids, int n, float *logits, FimiError *err);
  // Appends one token; logits after it.
  int (*step)(void *ctx, int token, float *logits, FimiError *err);
  void (*destroy)(void *ctx);
  void *ctx;
} DpoDecoder;

// The CPU decoder over model (borrowed) and model/decode.h's cache.
int dpo_decoder_cpu(DpoDecoder *d, GemmaModel *model, FimiError *err);

// The cache size for `need` positions: powers of two from 1024, capped at
// the model's positions (so a dialog's growing prompt recreates it rarely).
int dpo_decoder_capacity(int need, int max_positions);

typedef struct DpoModelCandidate {
  DpoDecoder decoder;    // owned (destroyed by dpo_model_candidate_free)
  const Tokenizer *tok;  // borrowed
  ChatBuilder chat;
  int32_t *cached;  // ids in the cache that are a prompt's or a scored turn's (not sampled)
  size_t cached_len, cached_cap;
  int max_new;
  SamplerConfig sampler;
  float *logits;  // (V)
  long prompt_tokens, prefilled_tokens, sampled_tokens, scored_tokens;  // counters for the report
} DpoModelCandidate;

// Takes the decoder (also when it fails: then it is destroyed).
int dpo_model_candidate_init(DpoModelCandidate *m, DpoDecoder decoder, const Tokenizer *tok, int max_new,
                             SamplerConfig sampler, FimiError *err);
void dpo_model_candidate_free(DpoModelCandidate *m);
DpoCandidate dpo_model_candidate(DpoModelCandidate *m);

#endif
