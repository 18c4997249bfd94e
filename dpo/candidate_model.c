// dpo/candidate_model.c: prefix rendering, KV-cache reuse within a dialog
// and sampling for the model candidate (dpo/candidate_model.h).
#include "dpo/candidate_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- the CPU decoder ----------------------------------------------------------

typedef struct CpuDecoder {
  GemmaModel *model;  // borrowed
  GemmaKVCache cache;
  int have_cache;
} CpuDecoder;

int dpo_decoder_capacity(int need, int max_positions) {
  int cap = 1024;
  while (cap < need) cap *= 2;
  return cap > max_positions ? need : cap;
}

static int cpu_reserve(void *ctx, int need, FimiError *err) {
  CpuDecoder *c = ctx;
  if (c->have_cache && c->cache.capacity >= need) return 0;
  if (c->have_cache) gemma_kv_cache_free(&c->cache);
  c->have_cache = 0;
  int cap = dpo_decoder_capacity(need, c->model->config.max_position_embeddings);
  if (gemma_kv_cache_create(&c->cache, &c->model->config, 1, cap, err) != 0) return -1;
  c->have_cache = 1;
  return 1;
}

static void cpu_truncate(void *ctx, int length) {
  CpuDecoder *c = ctx;
  if (c->have_cache) c->cache.lengths[0] = length;
}

static int cpu_prefill(void *ctx, const int *ids, int n, float *logits, FimiError *err) {
  CpuDecoder *c = ctx;
  return gemma_prefill(c->model, &c->cache, 0, ids, n, logits, err);
}

static int cpu_step(void *ctx, int token, float *logits, FimiError *err) {
  CpuDecoder *c = ctx;
  return gemma_decode_step(c->model, &c->cache, &token, NULL, logits, err);
}

static void cpu_destroy(void *ctx) {
  CpuDecoder *c = ctx;
  if (c && c->have_cache) gemma_kv_cache_free(&c->cache);
  free(c);
}

int dpo_decoder_cpu(DpoDecoder *d, GemmaModel *model, FimiError *err) {
  CpuDecoder *c = fimi_calloc(1, sizeof *c, err);
  if (!c) return -1;
  c->model = model;
  *d = (DpoDecoder){model->config.vocab_size, model->config.max_position_embeddings, cpu_reserve, cpu_truncate,
                    cpu_prefill, cpu_step, cpu_destroy, c};
  return 0;
}

// ---- the candidate ------------------------------------------------------------

int dpo_model_candidate_init(DpoModelCandidate *m, DpoDecoder decoder, const Tokenizer *tok, int max_new,
                             SamplerConfig sampler, FimiError *err) {
  memset(m, 0, sizeof *m);
  m->decoder = decoder;
  int rc = 0;
  if (max_new < 1) rc = fimi_fail(err, "candidate: max_new must be at least 1");
  else if (tokenizer_vocab_size(tok) > decoder.vocab_size)
    rc = fimi_fail(err, "candidate: the tokenizer has %d tokens, the model's vocabulary %d",
                   (int)tokenizer_vocab_size(tok), decoder.vocab_size);
  else if (chat_init(&m->chat, tok, err) != 0) rc = -1;
  else if (chat_tool_syntax(&m->chat) != TOOLCALL_SYNTAX_JSON) {
    // The corpus's reference dialogs carry fimi's JSON instructions and
    // catalog in their system message, and the pairs keep calls in that
    // form: a Gemma 4 candidate would be prompted in the wrong syntax.
    fimi_fail(err, "dpo pairs: the tokenizer has Gemma 4's turn tokens; pairs are built from reference dialogs "
                   "whose system turn teaches fimi's JSON calls, so a Gemma 4 candidate is refused (rollouts and "
                   "evaluation run Gemma 4 in its native syntax; docs/chat-format.md section 10)");
    chat_free(&m->chat);
    rc = -1;
  }
  else if (!(m->logits = fimi_malloc(sizeof(float) * (size_t)decoder.vocab_size, err))) {
    chat_free(&m->chat);
    rc = -1;
  }
  if (rc != 0) {
    if (decoder.destroy) decoder.destroy(decoder.ctx);
    memset(m, 0, sizeof *m);
    return -1;
  }
  m->tok = tok;
  m->max_new = max_new;
  m->sampler = sampler;
  return 0;
}

void dpo_model_candidate_free(DpoModelCandidate *m) {
  if (m->decoder.destroy) m->decoder.destroy(m->decoder.ctx);
  if (m->logits) chat_free(&m->chat);
  free(m->cached);
  free(m->logits);
  memset(m, 0, sizeof *m);
}

static int begin_dialog(void *ctx, FimiError *err) {
  (void)err;
  DpoModelCandidate *m = ctx;
  m->cached_len = 0;
  m->decoder.truncate(m->decoder.ctx, 0);
  return 0;
}

static int remember_prompt(DpoModelCandidate *m, const int32_t *ids, size_t n, FimiError *err) {
  if (n > m->cached_cap) {
    int32_t *bigger = realloc(m->cached, n * sizeof *bigger);
    if (!bigger) return fimi_fail(err, "candidate: out of memory");
    m->cached = bigger;
    m->cached_cap = n;
  }
  memcpy(m->cached, ids, n * sizeof *ids);
  m->cached_len = n;
  return 0;
}

// Samples the turn into out (at most max_new ids); returns the count.
static int sample_turn(DpoModelCandidate *m, uint64_t seed, int32_t *out, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  int32_t eot = m->chat.specials.end_of_turn, eos = m->chat.specials.eos;
  int n = 0, V = m->decoder.vocab_size;
  while (n < m->max_new) {
    int tok = sample_token(m->logits, V, &m->sampler, &rng);
    out[n++] = tok;
    if (tok == eot || (eos >= 0 && tok == eos) || n == m->max_new) break;
    if (m->decoder.step(m->decoder.ctx, tok, m->logits, err) != 0) return -1;
  }
  return n;
}

// Brings the cache to ids[0..n) (a cache for `need` positions), prefilling
// only what differs from the cached ids; m->logits then holds the logits
// after ids[n-1].
static int prefill_prompt(DpoModelCandidate *m, const int32_t *ids, int n, int need, FimiError *err) {
  int fresh = m->decoder.reserve(m->decoder.ctx, need, err);
  if (fresh < 0) return -1;
  if (fresh) m->cached_len = 0;
  // Keep the common prefix of the cached ids (at least one token is
  // prefilled, for the next-token logits).
  size_t common = 0;
  while (common < m->cached_len && common + 1 < (size_t)n && m->cached[common] == ids[common]) common++;
  m->decoder.truncate(m->decoder.ctx, (int)common);
  m->prompt_tokens += n;
  m->prefilled_tokens += n - (long)common;
  if (m->decoder.prefill(m->decoder.ctx, (const int *)ids + common, n - (int)common, m->logits, err) != 0) return -1;
  return remember_prompt(m, ids, (size_t)n, err);
}

static int generate(void *ctx, const cJSON *prefix, uint64_t seed, char **text, size_t *len, FimiError *err) {
  DpoModelCandidate *m = ctx;
  *text = NULL;
  *len = 0;
  chat_reset(&m->chat);
  if (chat_render_messages(&m->chat, prefix, NULL, "candidate prefix", err) != 0 ||
      chat_append_generation_prompt(&m->chat, err) != 0)
    return -1;
  const int32_t *ids = m->chat.ids.data;
  int n = (int)m->chat.ids.len;
  if (n + m->max_new > m->decoder.max_positions) return 1;  // skipped: beyond the context
  if (prefill_prompt(m, ids, n, n + m->max_new, err) != 0) return -1;
  int32_t *out = fimi_malloc(sizeof *out * (size_t)m->max_new, err);
  if (!out) return -1;
  int k = sample_turn(m, seed, out, err);
  int rc = k < 0 ? -1 : 0;
  if (rc == 0) {
    m->sampled_tokens += k;
    int32_t last = k > 0 ? out[k - 1] : -1;
    int stopped = last == m->chat.specials.end_of_turn || (m->chat.specials.eos >= 0 && last == m->chat.specials.eos);
    rc = tokenizer_decode(m->tok, out, (size_t)(stopped ? k - 1 : k), 0, text, len, err);
  }
  free(out);
  return rc;
}

// log softmax(logits)[id] in double.
static double log_prob(const float *logits, int V, int id) {
  float max = logits[0];
  for (int v = 1; v < V; v++) max = logits[v] > max ? logits[v] : max;
  double sum = 0;
  for (int v = 0; v < V; v++) sum += exp((double)logits[v] - max);
  return (double)logits[id] - max - log(sum);
}

// The message's tokens after the prompt, teacher-forced through the cache:
// the same ids and mask `fimi data tokenize --kind dpo` gives the response.
static int score(void *ctx, const cJSON *prefix, const cJSON *message, double *logp, long *tokens, FimiError *err) {
  DpoModelCandidate *m = ctx;
  *logp = 0;
  *tokens = 0;
  chat_reset(&m->chat);
  if (chat_render_messages(&m->chat, prefix, NULL, "scored prefix", err) != 0 ||
      chat_append_generation_prompt(&m->chat, err) != 0)
    return -1;
  int n = (int)m->chat.ids.len;
  cJSON *conv = cJSON_Duplicate(prefix, 1), *msg = cJSON_Duplicate(message, 1);
  if (!conv || !msg) {
    cJSON_Delete(conv), cJSON_Delete(msg);
    return fimi_fail(err, "candidate: out of memory");
  }
  cJSON_AddItemToArray(conv, msg);
  chat_reset(&m->chat);
  int rc = chat_render_messages(&m->chat, conv, NULL, "scored turn", err);
  cJSON_Delete(conv);
  if (rc != 0) return -1;
  const int32_t *ids = m->chat.ids.data;
  const uint8_t *mask = m->chat.mask;
  int last = (int)m->chat.ids.len - 1;
  while (last >= n && !mask[last]) last--;
  if (last < n) return fimi_fail(err, "candidate: the scored message has no response tokens");
  if (last + 1 > m->decoder.max_positions) return 1;
  // The prompt's ids are the rendered turn's first n (chat.h builds turn by
  // turn), so the prompt prefill and the teacher forcing share one cache.
  if (prefill_prompt(m, ids, n, last + 1, err) != 0) return -1;
  int V = m->decoder.vocab_size;
  for (int j = n; j <= last; j++) {
    if (mask[j]) {
      *logp += log_prob(m->logits, V, ids[j]);
      (*tokens)++;
    }
    if (j < last && m->decoder.step(m->decoder.ctx, ids[j], m->logits, err) != 0) return -1;
  }
  m->scored_tokens += *tokens;
  return remember_prompt(m, ids, (size_t)last, err);  // the cache holds ids[0..last)
}

DpoCandidate dpo_model_candidate(DpoModelCandidate *m) { return (DpoCandidate){begin_dialog, generate, score, m}; }
