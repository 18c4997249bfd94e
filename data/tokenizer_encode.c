// data/tokenizer_encode.c: text -> ids. Defines tokenizer_encode and
// tok_normalize. The pipeline is `tokenizers`' encode for one sequence:
//   1. added tokens with normalized=false are matched in the raw text;
//   2. each remaining piece is normalized, then added tokens with
//      normalized=true are matched in it;
//   3. remaining pieces are pre-tokenized into words;
//   4. each word goes through BPE (byte fallback, unk fusing, merge ranks);
//   5. with TOKENIZER_ADD_SPECIAL the template adds its special ids.
// All scratch memory belongs to one call, so a Tokenizer is shared read-only
// between threads. BPE uses a binary heap over merge ranks: O(n log n) per
// word, so a whole paragraph without spaces (Gemma) stays fast.
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer_internal.h"

typedef struct Piece {
  size_t off, len;  // into EncodeCtx.work
  int at_start;     // begins at byte 0 of the original text (Metaspace "first")
} Piece;

typedef struct Segment {
  size_t start, end;
  int32_t token;  // added-token index, -1 for text
} Segment;

typedef struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t len;  // bytes covered; 0 = merged away
} Symbol;

typedef struct HeapItem {
  int32_t rank, pos, merged;
} HeapItem;

typedef struct WordCache {
  uint64_t *hash;      // 0 = empty slot
  uint32_t *key_off, *key_len, *ids_off, *ids_len;
  uint32_t mask, count;
  TokBuf keys;
  TokenIds ids;
} WordCache;

typedef struct EncodeCtx {
  const Tokenizer *tok;
  int flags;
  int guard_special;  // TOKENIZER_NO_SPECIAL_MATCH: BPE may not produce special ids either
  TokenIds *out;
  pcre2_match_data *md;
  TokBuf norm, work;
  Piece *pieces, *next;
  size_t num_pieces, num_next, pieces_cap, next_cap;
  TokSpans spans;
  Segment *segs;
  size_t segs_cap;
  Symbol *syms;
  size_t syms_cap;
  HeapItem *heap;
  size_t heap_cap;
  WordCache cache;
} EncodeCtx;

// ---------------------------------------------------------------- normalizers

static int replace_all(const TokPattern *p, const char *content, size_t content_len, const char *s, size_t n,
                       pcre2_match_data *md, TokSpans *spans, TokBuf *out, FimiError *err) {
  out->len = 0;
  if (tokbuf_reserve(out, n, err) || tok_find_matches(p, s, n, md, spans, err)) return -1;
  for (size_t i = 0; i < spans->len; i++) {
    const TokSpan *sp = &spans->data[i];
    int rc = sp->is_match ? tokbuf_append(out, content, content_len, err)
                          : tokbuf_append(out, s + sp->start, sp->end - sp->start, err);
    if (rc) return -1;
  }
  return 0;
}

int tok_normalize(const Tokenizer *tok, const char *s, size_t n, pcre2_match_data *md, TokBuf *out,
                  FimiError *err) {
  TokBuf tmp = {0};
  TokSpans spans = {0};
  int rc = 0;
  out->len = 0;
  rc = tokbuf_append(out, s, n, err);
  for (int i = 0; i < tok->num_normalizers && !rc; i++) {
    const TokNormalizer *nz = &tok->normalizers[i];
    if (nz->kind == NORM_PREPEND) {
      if (out->len == 0) continue;
      tmp.len = 0;
      rc = tokbuf_append(&tmp, nz->content, nz->content_len, err) || tokbuf_append(&tmp, out->data, out->len, err);
    } else {
      rc = replace_all(&nz->pattern, nz->content, nz->content_len, out->data, out->len, md, &spans, &tmp, err);
    }
    if (!rc) {
      TokBuf swap = *out;
      *out = tmp;
      tmp = swap;
    }
  }
  free(tmp.data);
  free(spans.data);
  return rc;
}

// ---------------------------------------------------------------- added tokens

// Rust regex `\w` on the char ending at `end` (backwards) or starting at `start`.
static int is_word_char_at(const EncodeCtx *c, const char *s, size_t n, size_t at) {
  unsigned char b = (unsigned char)s[at];
  if (b < 0x80) return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '_';
  int rc = pcre2_match(c->tok->word_char_re, (PCRE2_SPTR)s, n, at, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, c->md, NULL);
  return rc >= 0;
}

static size_t char_start_before(const char *s, size_t at) {
  size_t i = at - 1;
  while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
  return i;
}

static int white_space_at(const char *s, size_t n, size_t at, size_t *len) {
  uint32_t cp = 0;
  *len = utf8_char_len((const unsigned char *)s + at, n - at, &cp);
  return *len && is_unicode_white_space(cp);
}

// Longest added token starting at s[at], or -1.
static int32_t trie_longest(const AddedTrie *t, const char *s, size_t n, size_t at, size_t *end) {
  int32_t node = t->root_child[(unsigned char)s[at]], best = -1;
  size_t i = at;
  while (node >= 0) {
    i++;
    if (t->nodes[node].token >= 0) {
      best = t->nodes[node].token;
      *end = i;
    }
    if (i >= n) break;
    unsigned char b = (unsigned char)s[i];
    int32_t child = t->nodes[node].first_child;
    while (child >= 0 && t->nodes[child].byte != b) child = t->nodes[child].next_sibling;
    node = child;
  }
  return best;
}

static int push_segment(EncodeCtx *c, size_t *count, size_t start, size_t end, int32_t token, FimiError *err) {
  if (*count == c->segs_cap) {
    size_t cap = c->segs_cap ? c->segs_cap * 2 : 16;
    Segment *s = realloc(c->segs, cap * sizeof(Segment));
    if (!s) return fimi_fail(err, "tokenizer: out of memory");
    c->segs = s;
    c->segs_cap = cap;
  }
  c->segs[(*count)++] = (Segment){start, end, token};
  return 0;
}

// AddedVocabulary::find_matches: leftmost-longest matches, each subject to
// single_word, then widened by lstrip/rstrip over Unicode white space.
// Segments go to c->segs; their number to *count.
static int split_added(EncodeCtx *c, const AddedTrie *trie, const char *s, size_t n, size_t *count, FimiError *err) {
  *count = 0;
  if (trie->empty || n == 0) return n ? push_segment(c, count, 0, n, -1, err) : 0;
  const Tokenizer *tok = c->tok;
  int skip_special = (c->flags & TOKENIZER_NO_SPECIAL_MATCH) != 0;
  size_t start_offset = 0, at = 0;
  while (at < n) {
    if (trie->root_child[(unsigned char)s[at]] < 0) { at++; continue; }
    size_t stop = 0;
    int32_t t = trie_longest(trie, s, n, at, &stop);
    if (t < 0) { at++; continue; }
    size_t start = at;
    at = stop;  // the iterator resumes after the match even when it is skipped
    const AddedToken *a = &tok->added[t];
    if (skip_special && a->special) continue;
    if (a->single_word) {
      int start_space = start == 0 || !is_word_char_at(c, s, n, char_start_before(s, start));
      int stop_space = stop == n || !is_word_char_at(c, s, n, stop);
      if (!start_space || !stop_space) continue;
    }
    if (a->lstrip) {
      size_t ns = start, len;
      while (ns > 0) {
        size_t prev = char_start_before(s, ns);
        if (!white_space_at(s, n, prev, &len)) break;
        ns = prev;
      }
      start = ns > start_offset ? ns : start_offset;
    }
    if (a->rstrip) {
      size_t len;
      while (stop < n && white_space_at(s, n, stop, &len)) stop += len;
      at = stop > at ? stop : at;
    }
    if (start_offset < start && push_segment(c, count, start_offset, start, -1, err)) return -1;
    if (push_segment(c, count, start, stop, t, err)) return -1;
    start_offset = stop;
    if (at < stop) at = stop;
  }
  if (start_offset != n && push_segment(c, count, start_offset, n, -1, err)) return -1;
  return 0;
}

// ---------------------------------------------------------------- BPE

static int heap_push(EncodeCtx *c, size_t *len, HeapItem item, FimiError *err) {
  if (*len == c->heap_cap) {
    size_t cap = c->heap_cap ? c->heap_cap * 2 : 64;
    HeapItem *h = realloc(c->heap, cap * sizeof(HeapItem));
    if (!h) return fimi_fail(err, "tokenizer: out of memory");
    c->heap = h;
    c->heap_cap = cap;
  }
  HeapItem *h = c->heap;
  size_t i = (*len)++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (h[parent].rank < item.rank || (h[parent].rank == item.rank && h[parent].pos < item.pos)) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = item;
  return 0;
}

static HeapItem heap_pop(HeapItem *h, size_t *len) {
  HeapItem top = h[0], last = h[--(*len)];
  size_t i = 0, n = *len;
  for (;;) {
    size_t l = 2 * i + 1, best = i;
    HeapItem b = last;
    if (l < n && (h[l].rank < b.rank || (h[l].rank == b.rank && h[l].pos < b.pos))) { best = l; b = h[l]; }
    if (l + 1 < n && (h[l + 1].rank < b.rank || (h[l + 1].rank == b.rank && h[l + 1].pos < b.pos))) best = l + 1;
    if (best == i) break;
    h[i] = h[best];
    i = best;
  }
  if (n) h[i] = last;
  return top;
}

static int merge_lookup(const MergeMap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged) {
  if (!m->keys) return 0;
  uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
  uint64_t i = tok_hash_bytes((const char *)&key, 8) & m->mask;
  while (m->keys[i] != UINT64_MAX) {
    if (m->keys[i] == key) {
      *rank = m->rank[i];
      *merged = m->merged[i];
      return 1;
    }
    i = (i + 1) & m->mask;
  }
  return 0;
}

static int add_symbol(EncodeCtx *c, size_t *count, int32_t id, uint32_t len, FimiError *err) {
  if (*count == c->syms_cap) {
    size_t cap = c->syms_cap ? c->syms_cap * 2 : 64;
    Symbol *s = realloc(c->syms, cap * sizeof(Symbol));
    if (!s) return fimi_fail(err, "tokenizer: out of memory");
    c->syms = s;
    c->syms_cap = cap;
  }
  size_t i = (*count)++;
  c->syms[i] = (Symbol){id, (int32_t)i - 1, (int32_t)i + 1, len};
  return 0;
}

// BPE::merge_word: one symbol per char (or its <0xNN> bytes, or <unk>).
static int word_symbols(EncodeCtx *c, const char *w, size_t n, size_t *count, FimiError *err) {
  const Tokenizer *tok = c->tok;
  int32_t unk_id = -1;
  uint32_t unk_len = 0;
  int have_unk = 0;
  *count = 0;
  for (size_t i = 0; i < n;) {
    unsigned char b = (unsigned char)w[i];
    uint32_t cp = 0;
    size_t len = b < 0x80 ? 1 : utf8_char_len((const unsigned char *)w + i, n - i, &cp);
    if (!len) return fimi_fail(err, "tokenizer: invalid UTF-8 inside a word");
    int32_t id = b < 0x80 ? tok->ascii_ids[b] : strmap_get(&tok->vocab, w + i, len);
    if (id >= 0 && c->guard_special && tokenizer_is_special(tok, id)) id = -1;
    if (id >= 0) {
      if (have_unk && add_symbol(c, count, unk_id, unk_len, err)) return -1;
      have_unk = 0;
      if (add_symbol(c, count, id, (uint32_t)len, err)) return -1;
    } else {
      int all_bytes = tok->byte_fallback;
      for (size_t k = 0; k < len && all_bytes; k++) all_bytes = tok->byte_ids[(unsigned char)w[i + k]] >= 0;
      if (all_bytes) {
        // Note: a pending <unk> stays pending across byte tokens, as in `tokenizers`.
        for (size_t k = 0; k < len; k++)
          if (add_symbol(c, count, tok->byte_ids[(unsigned char)w[i + k]], 1, err)) return -1;
      } else if (tok->unk_token) {
        int32_t uid = strmap_get(&tok->vocab, tok->unk_token, strlen(tok->unk_token));
        if (uid < 0) return fimi_fail(err, "tokenizer: unk_token \"%.64s\" is not in the vocabulary", tok->unk_token);
        if (have_unk && tok->fuse_unk) {
          unk_len += (uint32_t)len;
        } else {
          if (have_unk && add_symbol(c, count, unk_id, unk_len, err)) return -1;
          unk_id = uid;
          unk_len = (uint32_t)len;
          have_unk = 1;
        }
      }
      // no unk token: the char is dropped, like `tokenizers`
    }
    i += len;
  }
  if (have_unk && add_symbol(c, count, unk_id, unk_len, err)) return -1;
  if (*count) c->syms[*count - 1].next = -1;
  return 0;
}

static int push_pair(EncodeCtx *c, size_t *heap_len, int32_t pos, FimiError *err) {
  const Symbol *s = c->syms;
  int32_t next = s[pos].next;
  if (next < 0) return 0;
  int32_t rank, merged;
  if (!merge_lookup(&c->tok->merges, s[pos].id, s[next].id, &rank, &merged)) return 0;
  if (c->guard_special && tokenizer_is_special(c->tok, merged)) return 0;
  return heap_push(c, heap_len, (HeapItem){rank, pos, merged}, err);
}

// Word::merge_all: always the lowest-rank pair (leftmost on ties); stale
// heap entries are skipped when the pair at pos no longer gives `merged`.
static int merge_symbols(EncodeCtx *c, size_t count, FimiError *err) {
  size_t heap_len = 0;
  for (size_t i = 0; i + 1 < count; i++)
    if (push_pair(c, &heap_len, (int32_t)i, err)) return -1;
  Symbol *s = c->syms;
  while (heap_len) {
    HeapItem top = heap_pop(c->heap, &heap_len);
    Symbol *cur = &s[top.pos];
    if (cur->len == 0 || cur->next < 0) continue;
    int32_t right = cur->next, rank, merged;
    if (!merge_lookup(&c->tok->merges, cur->id, s[right].id, &rank, &merged) || merged != top.merged) continue;
    cur->id = top.merged;
    cur->len += s[right].len;
    cur->next = s[right].next;
    s[right].len = 0;
    if (cur->next >= 0) s[cur->next].prev = top.pos;
    if (cur->prev >= 0 && push_pair(c, &heap_len, cur->prev, err)) return -1;
    if (push_pair(c, &heap_len, top.pos, err)) return -1;
    s = c->syms;
  }
  return 0;
}

static int bpe_word_uncached(EncodeCtx *c, const char *w, size_t n, FimiError *err) {
  size_t count = 0;
  if (word_symbols(c, w, n, &count, err) || merge_symbols(c, count, err)) return -1;
  for (size_t i = 0; i < count; i++)
    if (c->syms[i].len && token_ids_push(c->out, c->syms[i].id, err)) return -1;
  return 0;
}

// Per-call cache of word -> ids (repeated words are the common case).
#define WORD_CACHE_MAX_LEN 64
#define WORD_CACHE_MAX_ENTRIES (1u << 16)

static int cache_init(WordCache *wc) {
  wc->mask = 1023;
  wc->hash = calloc(wc->mask + 1, sizeof(uint64_t));
  wc->key_off = malloc((wc->mask + 1) * sizeof(uint32_t) * 4);
  if (!wc->hash || !wc->key_off) return -1;
  wc->key_len = wc->key_off + (wc->mask + 1);
  wc->ids_off = wc->key_len + (wc->mask + 1);
  wc->ids_len = wc->ids_off + (wc->mask + 1);
  return 0;
}

static void cache_free(WordCache *wc) {
  free(wc->hash);
  free(wc->key_off);
  free(wc->keys.data);
  token_ids_free(&wc->ids);
}

static int bpe_cached(EncodeCtx *c, const char *w, size_t n, FimiError *err);

// BPE of one word; with seg_split the word is cut before each "▁" that
// follows another char (no merge can cross there, see tokenizer_internal.h).
static int bpe_word(EncodeCtx *c, const char *w, size_t n, FimiError *err) {
  if (n == 0) return 0;
  const Tokenizer *tok = c->tok;
  if (tok->ignore_merges) {
    int32_t id = strmap_get(&tok->vocab, w, n);
    if (id >= 0 && !(c->guard_special && tokenizer_is_special(tok, id))) return token_ids_push(c->out, id, err);
  }
  if (!tok->seg_split || n <= 3) return bpe_cached(c, w, n, err);
  size_t start = 0;
  for (size_t i = 3; i + 3 <= n; i++) {
    if ((unsigned char)w[i] != 0xE2 || memcmp(w + i, "\xe2\x96\x81", 3) != 0) continue;
    if (memcmp(w + i - 3, "\xe2\x96\x81", 3) == 0) continue;  // inside a run of "▁"
    if (bpe_cached(c, w + start, i - start, err)) return -1;
    start = i;
  }
  return bpe_cached(c, w + start, n - start, err);
}

static int bpe_cached(EncodeCtx *c, const char *w, size_t n, FimiError *err) {
  const Tokenizer *tok = c->tok;
  if (n == 1 && !c->guard_special && (unsigned char)w[0] < 0x80 && tok->ascii_ids[(unsigned char)w[0]] >= 0)
    return token_ids_push(c->out, tok->ascii_ids[(unsigned char)w[0]], err);
  WordCache *wc = &c->cache;
  if (n > WORD_CACHE_MAX_LEN || (!wc->hash && cache_init(wc))) return bpe_word_uncached(c, w, n, err);
  uint64_t h = tok_hash_bytes(w, n) | 1;
  uint32_t i = (uint32_t)h & wc->mask;
  while (wc->hash[i]) {
    if (wc->hash[i] == h && wc->key_len[i] == n && memcmp(wc->keys.data + wc->key_off[i], w, n) == 0)
      return wc->ids_len[i] ? token_ids_append(c->out, wc->ids.data + wc->ids_off[i], wc->ids_len[i], err) : 0;
    i = (i + 1) & wc->mask;
  }
  size_t before = c->out->len;
  if (bpe_word_uncached(c, w, n, err)) return -1;
  if (wc->count >= (wc->mask + 1) / 2) return 0;  // full: stop caching, keep correctness
  uint32_t key_off = (uint32_t)wc->keys.len, ids_off = (uint32_t)wc->ids.len;
  size_t produced = c->out->len - before;
  if (tokbuf_append(&wc->keys, w, n, err) ||
      (produced && token_ids_append(&wc->ids, c->out->data + before, produced, err)))
    return -1;
  wc->hash[i] = h;
  wc->key_off[i] = key_off;
  wc->key_len[i] = (uint32_t)n;
  wc->ids_off[i] = ids_off;
  wc->ids_len[i] = (uint32_t)(c->out->len - before);
  wc->count++;
  return 0;
}

// ---------------------------------------------------------------- pre-tokenizers

static int next_push(EncodeCtx *c, size_t off, size_t len, int at_start, FimiError *err) {
  if (len == 0) return 0;  // empty splits are dropped, like PreTokenizedString::split
  if (c->num_next == c->next_cap) {
    size_t cap = c->next_cap ? c->next_cap * 2 : 64;
    Piece *p = realloc(c->next, cap * sizeof(Piece));
    if (!p) return fimi_fail(err, "tokenizer: out of memory");
    c->next = p;
    c->next_cap = cap;
  }
  c->next[c->num_next++] = (Piece){off, len, at_start};
  return 0;
}

// SplitDelimiterBehavior over the spans of one piece (normalizer.rs split).
static int apply_behavior(EncodeCtx *c, const Piece *p, int behavior, int invert, FimiError *err) {
  TokSpans *sp = &c->spans;
  if (invert)
    for (size_t i = 0; i < sp->len; i++) sp->data[i].is_match = !sp->data[i].is_match;
  size_t kept = 0;  // reuse the span array in place for the merged ranges
  if (behavior == SPLIT_MERGED_NEXT) {
    int prev_match = 0;
    size_t w = sp->len;  // fill from the back
    for (size_t k = sp->len; k-- > 0;) {
      TokSpan s = sp->data[k];
      if (s.is_match && !prev_match && w < sp->len) sp->data[w].start = s.start;
      else sp->data[--w] = (TokSpan){s.start, s.end, 0};
      prev_match = s.is_match;
    }
    for (size_t k = w; k < sp->len; k++)
      if (next_push(c, p->off + sp->data[k].start, sp->data[k].end - sp->data[k].start,
                    p->at_start && sp->data[k].start == 0, err))
        return -1;
    return 0;
  }
  int prev_match = 0;
  for (size_t k = 0; k < sp->len; k++) {
    TokSpan s = sp->data[k];
    int extend = 0, drop = 0;
    if (behavior == SPLIT_REMOVED) drop = s.is_match;
    else if (behavior == SPLIT_CONTIGUOUS) extend = s.is_match == prev_match && kept > 0;
    else if (behavior == SPLIT_MERGED_PREV) extend = s.is_match && !prev_match && kept > 0;
    prev_match = s.is_match;
    if (drop) continue;
    if (extend) sp->data[kept - 1].end = s.end;
    else sp->data[kept++] = (TokSpan){s.start, s.end, 0};
  }
  for (size_t k = 0; k < kept; k++)
    if (next_push(c, p->off + sp->data[k].start, sp->data[k].end - sp->data[k].start,
                  p->at_start && sp->data[k].start == 0, err))
      return -1;
  return 0;
}

static int split_piece(EncodeCtx *c, const Piece *p, const TokPattern *pat, int behavior, int invert, FimiError *err) {
  if (tok_find_matches(pat, c->work.data + p->off, p->len, c->md, &c->spans, err)) return -1;
  return apply_behavior(c, p, behavior, invert, err);
}

static int metaspace_piece(EncodeCtx *c, const TokPreTokenizer *pt, const Piece *p, FimiError *err) {
  size_t rlen = pt->replacement_len, spaces = 0;
  for (size_t i = 0; i < p->len; i++) spaces += c->work.data[p->off + i] == ' ';
  if (tokbuf_reserve(&c->work, p->len + spaces * rlen + rlen, err)) return -1;
  const char *src = c->work.data + p->off;
  char *dst = c->work.data + c->work.len;
  size_t start = c->work.len, w = 0;
  int starts_with_rep = p->len > 0 && (src[0] == ' ' || (p->len >= rlen && memcmp(src, pt->replacement, rlen) == 0));
  int prepend = (pt->prepend_scheme == PREPEND_ALWAYS && !starts_with_rep) ||
                (pt->prepend_scheme == PREPEND_FIRST && !starts_with_rep && p->at_start);
  if (prepend) { memcpy(dst, pt->replacement, rlen); w += rlen; }
  for (size_t i = 0; i < p->len; i++) {
    if (src[i] == ' ') { memcpy(dst + w, pt->replacement, rlen); w += rlen; }
    else dst[w++] = src[i];
  }
  c->work.len += w;
  Piece np = {start, w, p->at_start};
  if (!pt->split) return next_push(c, np.off, np.len, np.at_start, err);
  TokPattern lit = {.literal = (char *)pt->replacement, .literal_len = rlen};
  return split_piece(c, &np, &lit, SPLIT_MERGED_NEXT, 0, err);
}

// Appends the GPT-2 byte -> char mapping of work[off..off+len) and pushes it.
static int byte_level_map(EncodeCtx *c, size_t off, size_t len, int at_start, FimiError *err) {
  if (tokbuf_reserve(&c->work, len * 2, err)) return -1;
  const unsigned char *src = (const unsigned char *)c->work.data + off;
  char *dst = c->work.data + c->work.len;
  size_t w = 0;
  for (size_t i = 0; i < len; i++) {
    memcpy(dst + w, c->tok->byte_level_chars[src[i]], 2);
    w += c->tok->byte_level_len[src[i]];
  }
  size_t start = c->work.len;
  c->work.len += w;
  return next_push(c, start, w, at_start, err);
}

static int byte_level_piece(EncodeCtx *c, const TokPreTokenizer *pt, const Piece *p, FimiError *err) {
  Piece q = *p;
  if (pt->add_prefix_space && (p->len == 0 || c->work.data[p->off] != ' ')) {
    if (tokbuf_reserve(&c->work, p->len + 1, err)) return -1;
    q.off = c->work.len;
    c->work.data[c->work.len] = ' ';
    memcpy(c->work.data + c->work.len + 1, c->work.data + p->off, p->len);
    c->work.len += p->len + 1;
    q.len = p->len + 1;
  }
  if (!pt->use_regex) return byte_level_map(c, q.off, q.len, q.at_start, err);
  if (tok_find_matches(&pt->pattern, c->work.data + q.off, q.len, c->md, &c->spans, err)) return -1;
  // Isolated keeps every span; copy them out because mapping appends to work.
  size_t n = c->spans.len;
  for (size_t k = 0; k < n; k++) {
    TokSpan s = c->spans.data[k];
    if (s.end > s.start && byte_level_map(c, q.off + s.start, s.end - s.start, q.at_start && s.start == 0, err))
      return -1;
  }
  return 0;
}

// The pieces a stage wrote (`next`) become the current list; the old
// current list's buffer is reused for the next stage's output.
static void swap_piece_lists(EncodeCtx *c) {
  Piece *pieces = c->pieces;
  size_t cap = c->pieces_cap;
  c->pieces = c->next;
  c->pieces_cap = c->next_cap;
  c->num_pieces = c->num_next;
  c->next = pieces;
  c->next_cap = cap;
}

static int pretokenize_stage(EncodeCtx *c, const TokPreTokenizer *pt, FimiError *err) {
  c->num_next = 0;
  for (size_t i = 0; i < c->num_pieces; i++) {
    Piece p = c->pieces[i];
    int rc;
    switch (pt->kind) {
      case PRE_METASPACE: rc = metaspace_piece(c, pt, &p, err); break;
      case PRE_BYTELEVEL: rc = byte_level_piece(c, pt, &p, err); break;
      default: rc = split_piece(c, &p, &pt->pattern, pt->behavior, pt->invert, err); break;
    }
    if (rc) return -1;
  }
  swap_piece_lists(c);
  return 0;
}

// Pre-tokenizes one normalized piece and runs BPE on each word.
static int encode_piece(EncodeCtx *c, const char *s, size_t n, int at_start, FimiError *err) {
  if (n == 0) return 0;
  const Tokenizer *tok = c->tok;
  if (tok->num_pretoks == 0) return bpe_word(c, s, n, err);
  c->work.len = 0;
  if (tokbuf_append(&c->work, s, n, err)) return -1;
  c->num_next = 0;
  if (next_push(c, 0, n, at_start, err)) return -1;
  swap_piece_lists(c);  // make `next` the current list
  for (int i = 0; i < tok->num_pretoks; i++)
    if (pretokenize_stage(c, &tok->pretoks[i], err)) return -1;
  for (size_t i = 0; i < c->num_pieces; i++)
    if (bpe_word(c, c->work.data + c->pieces[i].off, c->pieces[i].len, err)) return -1;
  return 0;
}

// Normalizes a raw piece, matches normalized added tokens, encodes the rest.
static int encode_raw_piece(EncodeCtx *c, const char *s, size_t n, int at_start, FimiError *err) {
  const Tokenizer *tok = c->tok;
  const char *ns = s;
  size_t nn = n;
  if (tok->num_normalizers) {
    if (tok_normalize(tok, s, n, c->md, &c->norm, err)) return -1;
    ns = c->norm.data;
    nn = c->norm.len;
  }
  if (nn == 0) return 0;
  size_t count = 0;
  if (tok->trie_norm.empty) return encode_piece(c, ns, nn, at_start, err);
  // The normalized text must survive pre-tokenization: keep a private copy.
  TokBuf copy = {0};
  if (tokbuf_append(&copy, ns, nn, err)) return -1;
  Segment *local = NULL;
  int rc = split_added(c, &tok->trie_norm, copy.data, nn, &count, err);
  if (!rc && count) {
    local = malloc(count * sizeof(Segment));
    if (!local) rc = fimi_fail(err, "tokenizer: out of memory");
    else memcpy(local, c->segs, count * sizeof(Segment));
  }
  for (size_t i = 0; i < count && !rc; i++) {
    if (local[i].token >= 0) rc = token_ids_push(c->out, tok->added[local[i].token].id, err);
    else rc = encode_piece(c, copy.data + local[i].start, local[i].end - local[i].start, at_start && local[i].start == 0, err);
  }
  free(local);
  free(copy.data);
  return rc;
}

static void ctx_free(EncodeCtx *c) {
  if (c->md) pcre2_match_data_free(c->md);
  free(c->norm.data);
  free(c->work.data);
  free(c->pieces);
  free(c->next);
  free(c->spans.data);
  free(c->segs);
  free(c->syms);
  free(c->heap);
  cache_free(&c->cache);
}

static int encode_text(EncodeCtx *c, const char *text, size_t len, FimiError *err) {
  const Tokenizer *tok = c->tok;
  if (tok->trie_raw.empty) return encode_raw_piece(c, text, len, 1, err);
  size_t count = 0;
  if (split_added(c, &tok->trie_raw, text, len, &count, err)) return -1;
  Segment *segs = malloc((count ? count : 1) * sizeof(Segment));
  if (!segs) return fimi_fail(err, "tokenizer: out of memory");
  if (count) memcpy(segs, c->segs, count * sizeof(Segment));
  int rc = 0;
  for (size_t i = 0; i < count && !rc; i++) {
    if (segs[i].token >= 0) rc = token_ids_push(c->out, tok->added[segs[i].token].id, err);
    else rc = encode_raw_piece(c, text + segs[i].start, segs[i].end - segs[i].start, segs[i].start == 0, err);
  }
  free(segs);
  return rc;
}

int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, int flags, TokenIds *out,
                     FimiError *err) {
  if (!tok || !out || (!text && len)) return fimi_fail(err, "tokenizer_encode: NULL argument");
  size_t bad = utf8_first_invalid(text, len);
  if (bad != len) return fimi_fail(err, "tokenizer_encode: invalid UTF-8 at byte %zu", bad);
  size_t start_len = out->len;
  int add_special = (flags & TOKENIZER_ADD_SPECIAL) && tok->post.enabled;
  if (add_special && token_ids_append(out, tok->post.prefix, tok->post.prefix_len, err)) return -1;
  EncodeCtx c = {.tok = tok, .flags = flags, .out = out, .guard_special = (flags & TOKENIZER_NO_SPECIAL_MATCH) != 0};
  c.md = pcre2_match_data_create(32, NULL);
  int rc = c.md ? encode_text(&c, text, len, err) : fimi_fail(err, "tokenizer: out of memory");
  ctx_free(&c);
  if (!rc && add_special) rc = token_ids_append(out, tok->post.suffix, tok->post.suffix_len, err);
  if (rc) out->len = start_len;
  return rc;
}
