// dpo/candidate_model.h: a saved model as the DpoCandidate of dpo/pairs.h,
// on the CPU backend. Defines DpoModelCandidate, its init/free and
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

typedef struct DpoModelCandidate {
  GemmaModel *model;     // borrowed
  const Tokenizer *tok;  // borrowed
  ChatBuilder chat;
  GemmaKVCache cache;
  int have_cache;
  int32_t *cached;  // ids in the cache's sequence 0 that are a prompt's (not sampled)
  size_t cached_len, cached_cap;
  int max_new;
  SamplerConfig sampler;
  float *logits;  // (V)
  long prompt_tokens, prefilled_tokens, sampled_tokens, scored_tokens;  // counters for the report
} DpoModelCandidate;

int dpo_model_candidate_init(DpoModelCandidate *m, GemmaModel *model, const Tokenizer *tok, int max_new,
                             SamplerConfig sampler, FimiError *err);
void dpo_model_candidate_free(DpoModelCandidate *m);
DpoCandidate dpo_model_candidate(DpoModelCandidate *m);

#endif
