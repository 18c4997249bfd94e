// dpo/candidate_model.c: prefix rendering, KV-cache reuse within a dialog
// and sampling for the model candidate (dpo/candidate_model.h).
#include "dpo/candidate_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int dpo_model_candidate_init(DpoModelCandidate *m, GemmaModel *model, const Tokenizer *tok, int max_new,
                             SamplerConfig sampler, FimiError *err) {
  memset(m, 0, sizeof *m);
  if (max_new < 1) return fimi_fail(err, "candidate: max_new must be at least 1");
  if (tokenizer_vocab_size(tok) > model->config.vocab_size)
    return fimi_fail(err, "candidate: the tokenizer has %d tokens, the model's vocabulary %d",
                     (int)tokenizer_vocab_size(tok), model->config.vocab_size);
  m->model = model;
  m->tok = tok;
  m->max_new = max_new;
  m->sampler = sampler;
  if (chat_init(&m->chat, tok, err) != 0) return -1;
  if (!(m->logits = fimi_malloc(sizeof(float) * (size_t)model->config.vocab_size, err))) {
    chat_free(&m->chat);
    return -1;
  }
  return 0;
}

void dpo_model_candidate_free(DpoModelCandidate *m) {
  if (m->have_cache) gemma_kv_cache_free(&m->cache);
  chat_free(&m->chat);
  free(m->cached);
  free(m->logits);
  memset(m, 0, sizeof *m);
}

static int begin_dialog(void *ctx, FimiError *err) {
  (void)err;
  DpoModelCandidate *m = ctx;
  m->cached_len = 0;
  if (m->have_cache) m->cache.lengths[0] = 0;
  return 0;
}

// A cache that holds `need` tokens (recreated, and emptied, when too small).
static int ensure_capacity(DpoModelCandidate *m, int need, FimiError *err) {
  if (m->have_cache && m->cache.capacity >= need) return 0;
  if (m->have_cache) gemma_kv_cache_free(&m->cache);
  m->have_cache = 0;
  m->cached_len = 0;
  int cap = 1024;
  while (cap < need) cap *= 2;
  if (cap > m->model->config.max_position_embeddings) cap = need;
  if (gemma_kv_cache_create(&m->cache, &m->model->config, 1, cap, err) != 0) return -1;
  m->have_cache = 1;
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
  int n = 0, V = m->model->config.vocab_size;
  while (n < m->max_new) {
    int tok = sample_token(m->logits, V, &m->sampler, &rng);
    out[n++] = tok;
    if (tok == eot || (eos >= 0 && tok == eos) || n == m->max_new) break;
    if (gemma_decode_step(m->model, &m->cache, &tok, NULL, m->logits, err) != 0) return -1;
  }
  return n;
}

// Brings the cache to ids[0..n) (a cache for `need` positions), prefilling
// only what differs from the cached ids; m->logits then holds the logits
// after ids[n-1].
static int prefill_prompt(DpoModelCandidate *m, const int32_t *ids, int n, int need, FimiError *err) {
  if (ensure_capacity(m, need, err) != 0) return -1;
  // Keep the common prefix of the cached ids (at least one token is
  // prefilled, for the next-token logits).
  size_t common = 0;
  while (common < m->cached_len && common + 1 < (size_t)n && m->cached[common] == ids[common]) common++;
  m->cache.lengths[0] = (int)common;
  m->prompt_tokens += n;
  m->prefilled_tokens += n - (long)common;
  if (gemma_prefill(m->model, &m->cache, 0, (const int *)ids + common, n - (int)common, m->logits, err) != 0) return -1;
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
  if (n + m->max_new > m->model->config.max_position_embeddings) return 1;  // skipped: beyond the context
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
  if (last + 1 > m->model->config.max_position_embeddings) return 1;
  // The prompt's ids are the rendered turn's first n (chat.h builds turn by
  // turn), so the prompt prefill and the teacher forcing share one cache.
  if (prefill_prompt(m, ids, n, last + 1, err) != 0) return -1;
  int V = m->model->config.vocab_size;
  for (int j = n; j <= last; j++) {
    if (mask[j]) {
      *logp += log_prob(m->logits, V, ids[j]);
      (*tokens)++;
    }
    if (j < last && gemma_decode_step(m->model, &m->cache, (const int *)ids + j, NULL, m->logits, err) != 0) return -1;
  }
  m->scored_tokens += *tokens;
  return remember_prompt(m, ids, (size_t)last, err);  // the cache holds ids[0..last)
}

DpoCandidate dpo_model_candidate(DpoModelCandidate *m) { return (DpoCandidate){begin_dialog, generate, score, m}; }
