// data/tokenizer.c: the public Tokenizer API that is not encoding or
// decoding proper (ids arrays, vocabulary queries, free) plus the helpers the
// tokenizer_*.c files share: UTF-8, the string hash map, byte buffers and
// pattern matching (literal or PCRE2) with `tokenizers`' find_matches rules.
#define _GNU_SOURCE  // memmem
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer_internal.h"

// ---------------------------------------------------------------- TokenIds

int token_ids_push(TokenIds *ids, int32_t id, FimiError *err) {
  return token_ids_append(ids, &id, 1, err);
}

int token_ids_append(TokenIds *ids, const int32_t *src, size_t n, FimiError *err) {
  if (n == 0) return 0;
  if (n > SIZE_MAX / sizeof(int32_t) - ids->len) return fimi_fail(err, "token ids: too many ids");
  if (ids->len + n > ids->cap) {
    size_t cap = ids->cap ? ids->cap : 16;
    while (cap < ids->len + n) cap = cap > SIZE_MAX / 8 ? ids->len + n : cap * 2;
    int32_t *data = realloc(ids->data, cap * sizeof(int32_t));
    if (!data) return fimi_fail(err, "token ids: out of memory growing to %zu ids", cap);
    ids->data = data;
    ids->cap = cap;
  }
  memcpy(ids->data + ids->len, src, n * sizeof(int32_t));
  ids->len += n;
  return 0;
}

void token_ids_free(TokenIds *ids) {
  free(ids->data);
  ids->data = NULL;
  ids->len = ids->cap = 0;
}

// ---------------------------------------------------------------- UTF-8

// Unicode White_Space: what Rust's char::is_whitespace and regex `\s` mean.
int is_unicode_white_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return 0;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// ---------------------------------------------------------------- buffers

int tokbuf_reserve(TokBuf *b, size_t extra, FimiError *err) {
  if (extra > SIZE_MAX / 2 - b->len) return fimi_fail(err, "tokenizer: buffer size overflow");
  if (b->len + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  char *data = realloc(b->data, cap);
  if (!data) return fimi_fail(err, "tokenizer: out of memory (%zu bytes)", cap);
  b->data = data;
  b->cap = cap;
  return 0;
}

int tokbuf_append(TokBuf *b, const char *s, size_t n, FimiError *err) {
  if (tokbuf_reserve(b, n, err)) return -1;
  if (n) memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
  return 0;
}

// ---------------------------------------------------------------- hashing

uint64_t tok_hash_bytes(const char *s, size_t n) {
  // 8 bytes at a time, multiply-xorshift mixing: words are short, speed matters.
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    s += 8;
    n -= 8;
  }
  uint64_t w = 0;
  memcpy(&w, s, n);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 32;
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 29);
}

int strmap_init(StrMap *m, uint32_t expected, FimiError *err) {
  memset(m, 0, sizeof(*m));
  uint64_t slots = 16;
  while (slots < (uint64_t)expected * 2 + 2) slots *= 2;
  if (slots > (1ull << 31)) return fimi_fail(err, "tokenizer: vocabulary too large (%u entries)", expected);
  m->mask = (uint32_t)(slots - 1);
  m->cap = expected ? expected : 1;
  m->slots = calloc(slots, sizeof(uint32_t));
  m->keys = calloc(m->cap, sizeof(char *));
  m->lens = calloc(m->cap, sizeof(uint32_t));
  m->vals = calloc(m->cap, sizeof(int32_t));
  if (!m->slots || !m->keys || !m->lens || !m->vals) {
    strmap_free(m);
    return fimi_fail(err, "tokenizer: out of memory for a %u-entry map", expected);
  }
  return 0;
}

int64_t strmap_put(StrMap *m, const char *key, uint32_t len, int32_t val, FimiError *err) {
  uint32_t i = (uint32_t)tok_hash_bytes(key, len) & m->mask;
  while (m->slots[i]) {
    uint32_t e = m->slots[i] - 1;
    if (m->lens[e] == len && memcmp(m->keys[e], key, len) == 0) return e;
    i = (i + 1) & m->mask;
  }
  if (m->count == m->cap) {
    fimi_fail(err, "tokenizer: map over its declared capacity %u", m->cap);
    return -2;
  }
  uint32_t e = m->count++;
  m->keys[e] = key;
  m->lens[e] = len;
  m->vals[e] = val;
  m->slots[i] = e + 1;
  return -1;
}

int32_t strmap_get(const StrMap *m, const char *key, size_t len) {
  if (!m->slots) return -1;
  uint32_t i = (uint32_t)tok_hash_bytes(key, len) & m->mask;
  while (m->slots[i]) {
    uint32_t e = m->slots[i] - 1;
    if (m->lens[e] == len && memcmp(m->keys[e], key, len) == 0) return m->vals[e];
    i = (i + 1) & m->mask;
  }
  return -1;
}

void strmap_free(StrMap *m) {
  free(m->slots);
  free(m->keys);
  free(m->lens);
  free(m->vals);
  memset(m, 0, sizeof(*m));
}

// ---------------------------------------------------------------- patterns

pcre2_code *tok_regex_compile(const char *source, size_t len, const char *what, FimiError *err) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)source, len, PCRE2_UTF | PCRE2_UCP, &code, &offset, NULL);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof(msg));
    fimi_fail(err, "%s: regex does not compile at offset %zu: %s", what, (size_t)offset, (char *)msg);
    return NULL;
  }
  // JIT is an optimization: when unavailable the interpreter gives the same matches.
  (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  return re;
}

void tok_pattern_free(TokPattern *p) {
  free(p->literal);
  free(p->source);
  if (p->code) pcre2_code_free(p->code);
  memset(p, 0, sizeof(*p));
}

static int spans_push(TokSpans *out, size_t start, size_t end, int is_match, FimiError *err) {
  if (out->len == out->cap) {
    size_t cap = out->cap ? out->cap * 2 : 16;
    TokSpan *data = realloc(out->data, cap * sizeof(TokSpan));
    if (!data) return fimi_fail(err, "tokenizer: out of memory for %zu spans", cap);
    out->data = data;
    out->cap = cap;
  }
  out->data[out->len++] = (TokSpan){start, end, is_match};
  return 0;
}

// One regex search from `from`; returns 1 with [*s, *e), 0 when none, -1 on error.
static int regex_search(const pcre2_code *re, const char *s, size_t n, size_t from, pcre2_match_data *md,
                        size_t *ms, size_t *me, FimiError *err) {
  int rc = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, md, NULL);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    return fimi_fail(err, "tokenizer: regex match failed at byte %zu: %s", from, (char *)msg);
  }
  PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
  *ms = ov[0];
  *me = ov[1];
  if (*me < *ms) *me = *ms;  // \K can report end before start; treat as empty
  return 1;
}

// Like the Oniguruma iterator `tokenizers` uses: search from the last end;
// an empty match right where the previous match ended is skipped by one char.
int tok_find_matches(const TokPattern *p, const char *s, size_t n, pcre2_match_data *md, TokSpans *out,
                     FimiError *err) {
  out->len = 0;
  if (n == 0) return spans_push(out, 0, 0, 0, err);
  size_t prev = 0;
  if (p->literal) {
    const char *at = s;
    while (p->literal_len && (size_t)(s + n - at) >= p->literal_len) {
      const char *hit = memmem(at, (size_t)(s + n - at), p->literal, p->literal_len);
      if (!hit) break;
      size_t start = (size_t)(hit - s), end = start + p->literal_len;
      if (prev != start && spans_push(out, prev, start, 0, err)) return -1;
      if (spans_push(out, start, end, 1, err)) return -1;
      prev = end;
      at = s + end;
    }
  } else {
    size_t last_end = 0;
    int have_last = 0;
    size_t last_match_end = 0;
    while (last_end <= n) {
      size_t ms, me;
      int found = regex_search(p->code, s, n, last_end, md, &ms, &me, err);
      if (found < 0) return -1;
      if (!found) break;
      if (me == ms && have_last && last_match_end == me) {
        uint32_t cp;
        size_t step = last_end < n ? utf8_char_len((const unsigned char *)s + last_end, n - last_end, &cp) : 1;
        last_end += step ? step : 1;
        continue;
      }
      last_end = me;
      have_last = 1;
      last_match_end = me;
      if (ms < prev) continue;  // cannot happen with forward searches; keeps spans ordered
      if (prev != ms && spans_push(out, prev, ms, 0, err)) return -1;
      if (spans_push(out, ms, me, 1, err)) return -1;
      prev = me;
      if (me == ms && me >= n) break;
    }
  }
  if (prev != n && spans_push(out, prev, n, 0, err)) return -1;
  return 0;
}

// ---------------------------------------------------------------- queries

int32_t tokenizer_vocab_size(const Tokenizer *tok) { return tok->id_cap; }

int32_t tokenizer_token_to_id(const Tokenizer *tok, const char *token) {
  if (!token) return -1;
  size_t n = strlen(token);
  int32_t id = strmap_get(&tok->added_map, token, n);
  return id >= 0 ? id : strmap_get(&tok->vocab, token, n);
}

const char *tokenizer_id_to_token(const Tokenizer *tok, int32_t id) {
  if (id < 0 || id >= tok->id_cap) return NULL;
  int32_t a = tok->added_by_id[id];
  if (a >= 0) return tok->added[a].content;
  return id < tok->vocab_cap ? tok->vocab_tokens[id] : NULL;
}

int tokenizer_is_special(const Tokenizer *tok, int32_t id) {
  if (id < 0 || id >= tok->id_cap) return 0;
  int32_t a = tok->added_by_id[id];
  return a >= 0 && tok->added[a].special;
}

const TokenizerSpecials *tokenizer_specials(const Tokenizer *tok) { return &tok->specials; }

void tokenizer_free(Tokenizer *tok) {
  if (!tok) return;
  for (int32_t i = 0; i < tok->vocab_cap; i++) free(tok->vocab_tokens ? tok->vocab_tokens[i] : NULL);
  free(tok->vocab_tokens);
  free(tok->vocab_lens);
  strmap_free(&tok->vocab);
  free(tok->merges.keys);
  free(tok->merges.rank);
  free(tok->merges.merged);
  free(tok->unk_token);
  for (int32_t i = 0; i < tok->num_added; i++) {
    if (tok->added[i].match != tok->added[i].content) free(tok->added[i].match);
    free(tok->added[i].content);
  }
  free(tok->added);
  free(tok->added_by_id);
  added_trie_free(&tok->trie_raw);
  added_trie_free(&tok->trie_norm);
  strmap_free(&tok->added_map);
  for (int i = 0; i < tok->num_normalizers; i++) {
    tok_pattern_free(&tok->normalizers[i].pattern);
    free(tok->normalizers[i].content);
  }
  free(tok->normalizers);
  for (int i = 0; i < tok->num_pretoks; i++) tok_pattern_free(&tok->pretoks[i].pattern);
  free(tok->pretoks);
  for (int i = 0; i < tok->num_decoders; i++) {
    tok_pattern_free(&tok->decoders[i].pattern);
    free(tok->decoders[i].content);
  }
  free(tok->decoders);
  free(tok->post.prefix);
  free(tok->post.suffix);
  if (tok->word_char_re) pcre2_code_free(tok->word_char_re);
  free(tok);
}
