// data/bpe_train.c: the BPE tokenizer trainer (see bpe_train.h and
// docs/tokenizer-training.md). Defines bpe_train_default_options,
// bpe_train_texts, bpe_train_files(_stats).
//
// Pipeline: validate UTF-8 -> cut out special-token text -> pre-tokenize the
// way the written tokenizer.json does (space -> U+2581 "▁", split before every
// ▁, every numeric character its own piece) -> count distinct pieces ->
// choose the alphabet by character coverage -> greedy BPE with incremental
// pair counts and a lazy max-heap -> tokenizer.json via cJSON.
#define _POSIX_C_SOURCE 200809L
#include "data/bpe_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/utf8.h"

#define BPE_MAX_FILE_BYTES ((size_t)1 << 30)
#define BPE_MAX_VOCAB (1 << 26)

static const char *const SPECIAL_TOKENS[BPE_NUM_SPECIAL] = {
    "<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<tool_call>", "</tool_call>"};
static const char SPACE_MARK[] = "\xE2\x96\x81";  // U+2581, what a space is normalized to

void bpe_train_default_options(BpeTrainOptions *opt) {
  opt->vocab_size = 4096;
  opt->min_frequency = 2;
  opt->max_token_bytes = 16;
  opt->character_coverage = 0.9995;
  opt->digit_runs = 0;
}

// ----------------------------------------------------------------------------
// UTF-8

static int utf8_validate(const char *text, size_t len, const char *name, FimiError *err) {
  size_t bad = utf8_first_invalid(text, len);
  if (bad < len)
    return fimi_fail(err, "%s: invalid UTF-8 at byte offset %zu (byte 0x%02X)", name, bad, (unsigned char)text[bad]);
  return 0;
}

// Length of the (already validated) character starting with byte c.
static int utf8_lead_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

// ----------------------------------------------------------------------------
// Hash tables. U64Map: uint64 keys (pairs, code points) -> int32 values.
// Interner: distinct byte strings -> dense ids 0, 1, 2, ... in first-seen order.

static uint64_t hash_bytes(const char *s, size_t n) { return hash_mix64(hash_fnv1a(HASH_FNV1A_BASIS, s, n)); }

#define U64_EMPTY UINT64_MAX

typedef struct U64Map {
  uint64_t *keys;
  int32_t *values;
  size_t cap, count;  // cap is a power of two, at most half full
} U64Map;

static int u64map_grow(U64Map *m, FimiError *err) {
  size_t cap = m->cap ? m->cap * 2 : 1024;
  uint64_t *keys = fimi_malloc(cap * sizeof *keys, err);
  int32_t *values = fimi_malloc(cap * sizeof *values, err);
  if (!keys || !values) {
    free(keys);
    free(values);
    return -1;
  }
  for (size_t i = 0; i < cap; i++) keys[i] = U64_EMPTY;
  for (size_t i = 0; i < m->cap; i++) {
    if (m->keys[i] == U64_EMPTY) continue;
    size_t j = hash_mix64(m->keys[i]) & (cap - 1);
    while (keys[j] != U64_EMPTY) j = (j + 1) & (cap - 1);
    keys[j] = m->keys[i];
    values[j] = m->values[i];
  }
  free(m->keys);
  free(m->values);
  m->keys = keys;
  m->values = values;
  m->cap = cap;
  return 0;
}

// Returns a pointer to the value slot of key, inserting it with `fresh` when
// absent (*inserted tells which). NULL only when out of memory.
static int32_t *u64map_upsert(U64Map *m, uint64_t key, int32_t fresh, int *inserted, FimiError *err) {
  if ((m->count + 1) * 2 > m->cap && u64map_grow(m, err) != 0) return NULL;
  size_t j = hash_mix64(key) & (m->cap - 1);
  while (m->keys[j] != U64_EMPTY) {
    if (m->keys[j] == key) {
      *inserted = 0;
      return &m->values[j];
    }
    j = (j + 1) & (m->cap - 1);
  }
  m->keys[j] = key;
  m->values[j] = fresh;
  m->count++;
  *inserted = 1;
  return &m->values[j];
}

static int32_t u64map_get(const U64Map *m, uint64_t key) {
  if (!m->cap) return -1;
  size_t j = hash_mix64(key) & (m->cap - 1);
  while (m->keys[j] != U64_EMPTY) {
    if (m->keys[j] == key) return m->values[j];
    j = (j + 1) & (m->cap - 1);
  }
  return -1;
}

static void u64map_free(U64Map *m) {
  free(m->keys);
  free(m->values);
  memset(m, 0, sizeof *m);
}

typedef struct Interner {
  int32_t *slots;  // id or -1
  size_t cap;      // power of two, at most half full
  uint64_t *hashes;
  size_t *offsets;
  uint32_t *lengths;
  int32_t count, id_cap;
  char *pool;
  size_t pool_len, pool_cap;
} Interner;

static const char *interner_str(const Interner *in, int32_t id) { return in->pool + in->offsets[id]; }

static int interner_rehash(Interner *in, FimiError *err) {
  size_t cap = in->cap ? in->cap * 2 : 1024;
  int32_t *slots = fimi_malloc(cap * sizeof *slots, err);
  if (!slots) return -1;
  for (size_t i = 0; i < cap; i++) slots[i] = -1;
  for (int32_t id = 0; id < in->count; id++) {
    size_t j = in->hashes[id] & (cap - 1);
    while (slots[j] >= 0) j = (j + 1) & (cap - 1);
    slots[j] = id;
  }
  free(in->slots);
  in->slots = slots;
  in->cap = cap;
  return 0;
}

static int32_t interner_find_hashed(const Interner *in, const char *s, size_t n, uint64_t h) {
  if (!in->cap) return -1;
  size_t j = h & (in->cap - 1);
  for (int32_t id; (id = in->slots[j]) >= 0; j = (j + 1) & (in->cap - 1))
    if (in->hashes[id] == h && in->lengths[id] == n && memcmp(interner_str(in, id), s, n) == 0) return id;
  return -1;
}

static int32_t interner_find(const Interner *in, const char *s, size_t n) {
  return interner_find_hashed(in, s, n, hash_bytes(s, n));
}

static int reserve_bytes(char **buf, size_t *cap, size_t need, FimiError *err) {
  if (need <= *cap) return 0;
  size_t cap2 = *cap ? *cap : 4096;
  while (cap2 < need) {
    if (cap2 > SIZE_MAX / 2) return fimi_fail(err, "out of memory (%zu bytes)", need);
    cap2 *= 2;
  }
  char *p = realloc(*buf, cap2);
  if (!p) return fimi_fail(err, "out of memory (%zu bytes)", cap2);
  *buf = p;
  *cap = cap2;
  return 0;
}

static int reserve_items(void **buf, int32_t *cap, int32_t need, size_t item, FimiError *err) {
  if (need <= *cap) return 0;
  if (need > INT32_MAX / 2) return fimi_fail(err, "too many items (%d)", (int)need);
  int32_t cap2 = *cap ? *cap : 4;  // small: every pair has a word list
  while (cap2 < need) cap2 *= 2;
  void *p = realloc(*buf, (size_t)cap2 * item);
  if (!p) return fimi_fail(err, "out of memory (%d items)", (int)cap2);
  *buf = p;
  *cap = cap2;
  return 0;
}

// Id of s (n bytes), adding it when new (*is_new says which); -1 on error.
// The pool keeps a NUL after every string so they can be used as C strings.
static int32_t interner_add(Interner *in, const char *s, size_t n, int *is_new, FimiError *err) {
  uint64_t h = hash_bytes(s, n);
  int32_t id = interner_find_hashed(in, s, n, h);
  *is_new = id < 0;
  if (id >= 0) return id;
  if (n > UINT32_MAX || in->count == INT32_MAX) return fimi_fail(err, "string table full");
  if ((size_t)(in->count + 1) * 2 > in->cap && interner_rehash(in, err) != 0) return -1;
  int32_t cap = in->id_cap;
  if (reserve_items((void **)&in->hashes, &cap, in->count + 1, sizeof *in->hashes, err) != 0) return -1;
  cap = in->id_cap;
  if (reserve_items((void **)&in->offsets, &cap, in->count + 1, sizeof *in->offsets, err) != 0) return -1;
  cap = in->id_cap;
  if (reserve_items((void **)&in->lengths, &cap, in->count + 1, sizeof *in->lengths, err) != 0) return -1;
  in->id_cap = cap;
  if (in->pool_len > SIZE_MAX - n - 1 || reserve_bytes(&in->pool, &in->pool_cap, in->pool_len + n + 1, err) != 0)
    return -1;
  memcpy(in->pool + in->pool_len, s, n);
  in->pool[in->pool_len + n] = '\0';
  id = in->count++;
  in->hashes[id] = h;
  in->offsets[id] = in->pool_len;
  in->lengths[id] = (uint32_t)n;
  in->pool_len += n + 1;
  size_t j = h & (in->cap - 1);
  while (in->slots[j] >= 0) j = (j + 1) & (in->cap - 1);
  in->slots[j] = id;
  return id;
}

static void interner_free(Interner *in) {
  free(in->slots);
  free(in->hashes);
  free(in->offsets);
  free(in->lengths);
  free(in->pool);
  memset(in, 0, sizeof *in);
}

// ----------------------------------------------------------------------------
// Trainer state

typedef struct Pair {
  int32_t left, right;  // token ids
  int64_t count;    // occurrences weighted by word count
  int32_t *words;   // words that contain (or once contained) the pair
  int32_t num_words, cap_words;
  int32_t touched;  // last merge that raised the count (dedupes re-pushes)
} Pair;

typedef struct HeapEntry {
  int64_t count;
  int32_t left, right;
} HeapEntry;

typedef struct Trainer {
  BpeTrainOptions opt;
  BpeTrainStats stats;
  // counting
  Interner words;         // distinct pieces (normalized bytes)
  int64_t *word_counts;   // [words.count]
  int32_t word_count_cap;
  char *piece;            // the piece being built
  size_t piece_len, piece_cap;
  U64Map numeric_cache;   // code point -> 0/1 (non-ASCII only)
  pcre2_code *numeric_re;
  pcre2_match_data *numeric_md;
  // training
  Interner tokens;        // every vocabulary string; id == final vocab id
  int32_t *symbols;       // the words as token ids; -1 = not in vocab (byte fallback)
  size_t *word_offsets;   // [words.count] into symbols
  uint32_t *word_lengths; // [words.count] current symbol count
  U64Map pair_index;      // (left << 32 | right) -> index into pairs
  Pair *pairs;
  int32_t num_pairs, cap_pairs;
  HeapEntry *heap;
  int32_t heap_len, heap_cap;
  int32_t *touched;       // pairs whose count rose during the current merge
  int32_t num_touched, cap_touched;
  int32_t *merges;        // [2 * num_merges] left, right ids
  int32_t num_merges, cap_merges;
} Trainer;

static void trainer_free(Trainer *t) {
  interner_free(&t->words);
  free(t->word_counts);
  free(t->piece);
  u64map_free(&t->numeric_cache);
  if (t->numeric_md) pcre2_match_data_free(t->numeric_md);
  if (t->numeric_re) pcre2_code_free(t->numeric_re);
  interner_free(&t->tokens);
  free(t->symbols);
  free(t->word_offsets);
  free(t->word_lengths);
  u64map_free(&t->pair_index);
  for (int32_t i = 0; i < t->num_pairs; i++) free(t->pairs[i].words);
  free(t->pairs);
  free(t->heap);
  free(t->touched);
  free(t->merges);
}

// ----------------------------------------------------------------------------
// Counting: special-token text is cut out, the rest is normalized and
// pre-tokenized exactly like the tokenizer.json we write (Replace " " -> "▁";
// Split "▁" MergedWithNext; Digits individual_digits), which is what
// `tokenizers` does before its BPE model sees a piece.

// Rust's char::is_numeric (general categories Nd, Nl, No), which the
// Digits pre-tokenizer uses; PCRE2's \p{N} is the same set.
static int is_numeric_char(Trainer *t, const unsigned char *s, int len, FimiError *err) {
  if (len == 1) return s[0] >= '0' && s[0] <= '9';
  uint32_t cp = 0;
  utf8_char_len(s, (size_t)len, &cp);  // validated text: always one whole character
  int32_t cached = u64map_get(&t->numeric_cache, cp);
  if (cached >= 0) return cached;
  int rc = pcre2_match(t->numeric_re, (PCRE2_SPTR)s, (PCRE2_SIZE)len, 0, PCRE2_NO_UTF_CHECK, t->numeric_md, NULL);
  int numeric = rc >= 0;
  int inserted;
  int32_t *slot = u64map_upsert(&t->numeric_cache, cp, numeric, &inserted, err);
  if (!slot) return -1;
  return numeric;
}

static int count_piece(Trainer *t, const char *s, size_t n, FimiError *err) {
  if (n == 0) return 0;
  int is_new;
  int32_t id = interner_add(&t->words, s, n, &is_new, err);
  if (id < 0) return -1;
  if (is_new) {
    if (reserve_items((void **)&t->word_counts, &t->word_count_cap, id + 1, sizeof *t->word_counts, err) != 0)
      return -1;
    t->word_counts[id] = 0;
  }
  t->word_counts[id]++;
  t->stats.num_pieces++;
  return 0;
}

static int flush_piece(Trainer *t, FimiError *err) {
  int rc = count_piece(t, t->piece, t->piece_len, err);
  t->piece_len = 0;
  return rc;
}

static int append_piece(Trainer *t, const char *s, size_t n, FimiError *err) {
  if (reserve_bytes(&t->piece, &t->piece_cap, t->piece_len + n, err) != 0) return -1;
  memcpy(t->piece + t->piece_len, s, n);
  t->piece_len += n;
  return 0;
}

// Length of the special token spelled at s, or 0.
static size_t special_at(const char *s, size_t n) {
  for (int k = 0; k < BPE_NUM_SPECIAL; k++) {
    size_t len = strlen(SPECIAL_TOKENS[k]);
    if (len <= n && memcmp(s, SPECIAL_TOKENS[k], len) == 0) return len;
  }
  return 0;
}

static int count_text(Trainer *t, const char *text, size_t len, FimiError *err) {
  const unsigned char *s = (const unsigned char *)text;
  t->piece_len = 0;
  int in_digits = 0;  // the piece being built is a run of digits (digit_runs)
  for (size_t i = 0; i < len;) {
    size_t special = s[i] == '<' ? special_at(text + i, len - i) : 0;
    if (special) {  // the text around a special token is pre-tokenized separately
      if (flush_piece(t, err) != 0) return -1;
      in_digits = 0;
      i += special;
      continue;
    }
    int n = utf8_lead_len(s[i]);
    if (s[i] == '\n') {  // each line (with its newline) is a text of its own, as in `tokenizers`' trainer
      // (a run of digits stays a piece of its own: Digits isolates it)
      if ((in_digits && flush_piece(t, err) != 0) || append_piece(t, "\n", 1, err) != 0 || flush_piece(t, err) != 0)
        return -1;
      in_digits = 0;
      i++;
      continue;
    }
    int is_mark = s[i] == ' ' || (n == 3 && memcmp(s + i, SPACE_MARK, 3) == 0);
    if (is_mark) {  // "▁" starts a new piece (MergedWithNext)
      if (flush_piece(t, err) != 0 || append_piece(t, SPACE_MARK, 3, err) != 0) return -1;
      in_digits = 0;
    } else {
      int numeric = is_numeric_char(t, s + i, n, err);
      if (numeric < 0) return -1;
      if (numeric && !t->opt.digit_runs) {  // every digit is a piece of its own
        if (flush_piece(t, err) != 0 || count_piece(t, text + i, (size_t)n, err) != 0) return -1;
      } else {  // a run of digits is a piece of its own (isolated from the text around it)
        if (numeric != in_digits && flush_piece(t, err) != 0) return -1;
        if (append_piece(t, text + i, (size_t)n, err) != 0) return -1;
      }
      in_digits = numeric;
    }
    i += (size_t)n;
  }
  return flush_piece(t, err);
}

// ----------------------------------------------------------------------------
// Alphabet: the characters covering opt.character_coverage of all character
// occurrences, most frequent first; ties by bytes, so the order is fixed.

typedef struct CharCount {
  const char *bytes;
  int len;
  int64_t count;
} CharCount;

static int compare_chars(const void *pa, const void *pb) {
  const CharCount *a = pa, *b = pb;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  int min = a->len < b->len ? a->len : b->len;
  int c = memcmp(a->bytes, b->bytes, (size_t)min);
  return c ? c : a->len - b->len;
}

static int add_reserved_tokens(Trainer *t, FimiError *err) {
  int is_new;
  for (int k = 0; k < BPE_NUM_SPECIAL; k++)
    if (interner_add(&t->tokens, SPECIAL_TOKENS[k], strlen(SPECIAL_TOKENS[k]), &is_new, err) != k) return -1;
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    if (interner_add(&t->tokens, name, 6, &is_new, err) != BPE_FIRST_BYTE_ID + b) return -1;
  }
  return 0;
}

static int choose_alphabet(Trainer *t, FimiError *err) {
  Interner chars = {0};
  int64_t *counts = NULL;
  int32_t counts_cap = 0;
  CharCount *sorted = NULL;
  int rc = -1;
  int64_t total = 0;
  for (int32_t w = 0; w < t->words.count; w++) {
    const char *s = interner_str(&t->words, w);
    for (uint32_t i = 0; i < t->words.lengths[w];) {
      int n = utf8_lead_len((unsigned char)s[i]);
      i += (uint32_t)n;
      if (n == 1 && s[i - 1] == '\0') continue;  // U+0000 cannot be a JSON-safe token; bytes only
      int is_new;
      int32_t id = interner_add(&chars, s + i - n, (size_t)n, &is_new, err);
      if (id < 0) goto done;
      if (is_new) {
        if (reserve_items((void **)&counts, &counts_cap, id + 1, sizeof *counts, err) != 0) goto done;
        counts[id] = 0;
      }
      counts[id] += t->word_counts[w];
      total += t->word_counts[w];
    }
  }
  t->stats.num_chars = chars.count;
  sorted = fimi_malloc(((size_t)chars.count + 1) * sizeof *sorted, err);
  if (!sorted) goto done;
  for (int32_t c = 0; c < chars.count; c++)
    sorted[c] = (CharCount){interner_str(&chars, c), (int)chars.lengths[c], counts[c]};
  qsort(sorted, (size_t)chars.count, sizeof *sorted, compare_chars);
  int64_t room = (int64_t)t->opt.vocab_size - BPE_NUM_RESERVED, covered = 0;
  double target = t->opt.character_coverage * (double)total;
  for (int32_t c = 0; c < chars.count && c < room; c++) {
    if (t->opt.character_coverage < 1.0 && (double)covered >= target) break;
    int is_new;
    if (interner_add(&t->tokens, sorted[c].bytes, (size_t)sorted[c].len, &is_new, err) < 0) goto done;
    covered += sorted[c].count;
    t->stats.alphabet_size++;
  }
  rc = 0;
done:
  free(sorted);
  free(counts);
  interner_free(&chars);
  return rc;
}

// ----------------------------------------------------------------------------
// Pair counts and the heap

static uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t)(uint32_t)left << 32 | (uint32_t)right; }

static int compare_token_strings(const Trainer *t, int32_t a, int32_t b) {
  if (a == b) return 0;
  uint32_t la = t->tokens.lengths[a], lb = t->tokens.lengths[b];
  int c = memcmp(interner_str(&t->tokens, a), interner_str(&t->tokens, b), la < lb ? la : lb);
  return c ? c : (la < lb ? -1 : la > lb ? 1 : 0);
}

// True when entry a should pop before b: higher count, then the pair whose
// (left, right) strings sort first bytewise.
static int heap_before(const Trainer *t, const HeapEntry *a, const HeapEntry *b) {
  if (a->count != b->count) return a->count > b->count;
  int c = compare_token_strings(t, a->left, b->left);
  if (c) return c < 0;
  return compare_token_strings(t, a->right, b->right) < 0;
}

static int heap_push(Trainer *t, int64_t count, int32_t left, int32_t right, FimiError *err) {
  if (reserve_items((void **)&t->heap, &t->heap_cap, t->heap_len + 1, sizeof *t->heap, err) != 0) return -1;
  int32_t i = t->heap_len++;
  HeapEntry e = {count, left, right};
  while (i > 0) {
    int32_t parent = (i - 1) / 2;
    if (!heap_before(t, &e, &t->heap[parent])) break;
    t->heap[i] = t->heap[parent];
    i = parent;
  }
  t->heap[i] = e;
  return 0;
}

static HeapEntry heap_pop(Trainer *t) {
  HeapEntry top = t->heap[0], last = t->heap[--t->heap_len];
  int32_t i = 0;
  for (;;) {
    int32_t child = 2 * i + 1;
    if (child >= t->heap_len) break;
    if (child + 1 < t->heap_len && heap_before(t, &t->heap[child + 1], &t->heap[child])) child++;
    if (!heap_before(t, &t->heap[child], &last)) break;
    t->heap[i] = t->heap[child];
    i = child;
  }
  if (t->heap_len > 0) t->heap[i] = last;
  return top;
}

// A pair may become a token only if the result fits max_token_bytes.
static int pair_mergeable(const Trainer *t, int32_t left, int32_t right, int64_t count) {
  return count >= t->opt.min_frequency &&
         (int64_t)t->tokens.lengths[left] + t->tokens.lengths[right] <= t->opt.max_token_bytes;
}

// Adds delta to the count of (left, right); a positive delta also records
// that word w contains it and marks the pair for a heap push.
static int pair_add(Trainer *t, int32_t left, int32_t right, int64_t delta, int32_t w, int32_t merge,
                    FimiError *err) {
  int inserted;
  int32_t *slot = u64map_upsert(&t->pair_index, pair_key(left, right), t->num_pairs, &inserted, err);
  if (!slot) return -1;
  if (inserted) {
    if (reserve_items((void **)&t->pairs, &t->cap_pairs, t->num_pairs + 1, sizeof *t->pairs, err) != 0) return -1;
    t->pairs[t->num_pairs++] = (Pair){left, right, 0, NULL, 0, 0, -1};
  }
  Pair *p = &t->pairs[*slot];
  p->count += delta;
  if (delta <= 0) return 0;
  if (p->num_words == 0 || p->words[p->num_words - 1] != w) {
    if (reserve_items((void **)&p->words, &p->cap_words, p->num_words + 1, sizeof *p->words, err) != 0) return -1;
    p->words[p->num_words++] = w;
  }
  if (p->touched != merge) {
    p->touched = merge;
    int32_t index = *slot;
    if (reserve_items((void **)&t->touched, &t->cap_touched, t->num_touched + 1, sizeof *t->touched, err) != 0)
      return -1;
    t->touched[t->num_touched++] = index;
  }
  return 0;
}

// Pushes every pair whose count rose during this merge (new pairs with the
// merged token; or older pairs when the merged string already existed).
static int push_touched(Trainer *t, FimiError *err) {
  for (int32_t k = 0; k < t->num_touched; k++) {
    const Pair *p = &t->pairs[t->touched[k]];
    if (pair_mergeable(t, p->left, p->right, p->count) && heap_push(t, p->count, p->left, p->right, err) != 0)
      return -1;
  }
  t->num_touched = 0;
  return 0;
}

// ----------------------------------------------------------------------------
// Words as symbols, initial pair counts

static int build_symbols(Trainer *t, FimiError *err) {
  int32_t nw = t->words.count;
  size_t total = 0;
  for (int32_t w = 0; w < nw; w++) total += t->words.lengths[w];  // >= number of characters
  t->symbols = fimi_malloc((total + 1) * sizeof *t->symbols, err);
  t->word_offsets = fimi_malloc(((size_t)nw + 1) * sizeof *t->word_offsets, err);
  t->word_lengths = fimi_malloc(((size_t)nw + 1) * sizeof *t->word_lengths, err);
  if (!t->symbols || !t->word_offsets || !t->word_lengths) return -1;
  size_t used = 0;
  for (int32_t w = 0; w < nw; w++) {
    const char *s = interner_str(&t->words, w);
    t->word_offsets[w] = used;
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->words.lengths[w];) {
      int len = utf8_lead_len((unsigned char)s[i]);
      t->symbols[used + n++] = interner_find(&t->tokens, s + i, (size_t)len);  // -1: byte fallback
      i += (uint32_t)len;
    }
    t->word_lengths[w] = n;
    used += n;
  }
  return 0;
}

static int count_initial_pairs(Trainer *t, FimiError *err) {
  for (int32_t w = 0; w < t->words.count; w++) {
    const int32_t *s = t->symbols + t->word_offsets[w];
    for (uint32_t i = 0; i + 1 < t->word_lengths[w]; i++)
      if (s[i] >= 0 && s[i + 1] >= 0 && pair_add(t, s[i], s[i + 1], t->word_counts[w], w, -2, err) != 0) return -1;
  }
  return 0;
}

// ----------------------------------------------------------------------------
// Merging

// Rewrites every occurrence of (a, b) in word w as c, left to right, and
// moves the pair counts: for an occurrence with neighbours L and R,
// (L,a) (a,b) (b,R) lose the word's count and (L,c) (c,R) gain it. L is read
// from the already rewritten part, so runs like "a b a b" come out right.
static int merge_word(Trainer *t, int32_t w, int32_t a, int32_t b, int32_t c, int32_t merge, FimiError *err) {
  int32_t *s = t->symbols + t->word_offsets[w];
  uint32_t n = t->word_lengths[w], j = 0;
  int64_t f = t->word_counts[w];
  for (uint32_t i = 0; i < n;) {
    if (i + 1 < n && s[i] == a && s[i + 1] == b) {
      int32_t left = j > 0 ? s[j - 1] : -1, right = i + 2 < n ? s[i + 2] : -1;
      if (left >= 0 && (pair_add(t, left, a, -f, w, merge, err) != 0 || pair_add(t, left, c, f, w, merge, err) != 0))
        return -1;
      if (pair_add(t, a, b, -f, w, merge, err) != 0) return -1;
      if (right >= 0 && (pair_add(t, b, right, -f, w, merge, err) != 0 || pair_add(t, c, right, f, w, merge, err) != 0))
        return -1;
      s[j++] = c;
      i += 2;
    } else {
      s[j++] = s[i++];
    }
  }
  t->word_lengths[w] = j;
  return 0;
}

// The token id of left+right, added to the vocabulary when new. Returns -2
// when the string is a special or byte token (never a merge result).
static int32_t merged_token(Trainer *t, int32_t left, int32_t right, FimiError *err) {
  size_t ll = t->tokens.lengths[left], lr = t->tokens.lengths[right];
  char buf[512];
  if (ll + lr > sizeof buf) return fimi_fail(err, "token longer than %zu bytes", sizeof buf);
  memcpy(buf, interner_str(&t->tokens, left), ll);
  memcpy(buf + ll, interner_str(&t->tokens, right), lr);
  int32_t existing = interner_find(&t->tokens, buf, ll + lr);
  if (existing >= 0 && existing < BPE_NUM_RESERVED) return -2;
  int is_new;
  return interner_add(&t->tokens, buf, ll + lr, &is_new, err);
}

static int record_merge(Trainer *t, int32_t left, int32_t right, FimiError *err) {
  int32_t cap = t->cap_merges;
  if (reserve_items((void **)&t->merges, &cap, 2 * (t->num_merges + 1), sizeof *t->merges, err) != 0) return -1;
  t->cap_merges = cap;
  t->merges[2 * t->num_merges] = left;
  t->merges[2 * t->num_merges + 1] = right;
  t->num_merges++;
  return 0;
}

// Pops heap entries until one is current (its count equals the pair's count
// now; stale ones are re-pushed with the current count). 0 = none left.
static int pop_best_pair(Trainer *t, int32_t *out_pair, FimiError *err) {
  while (t->heap_len > 0) {
    HeapEntry e = heap_pop(t);
    int32_t index = u64map_get(&t->pair_index, pair_key(e.left, e.right));
    int64_t now = t->pairs[index].count;
    if (now == e.count) {
      *out_pair = index;
      return 1;
    }
    if (now < e.count && pair_mergeable(t, e.left, e.right, now) && heap_push(t, now, e.left, e.right, err) != 0)
      return -1;
  }
  return 0;
}

static int learn_merges(Trainer *t, FimiError *err) {
  int32_t vocab = t->tokens.count;
  while (vocab < t->opt.vocab_size) {
    int32_t index;
    int found = pop_best_pair(t, &index, err);
    if (found < 0) return -1;
    if (found == 0) break;
    int32_t a = t->pairs[index].left, b = t->pairs[index].right;
    int32_t c = merged_token(t, a, b, err);
    if (c == -1) return -1;
    if (c == -2) {  // would shadow a special/byte token: never merge this pair
      t->pairs[index].count = 0;
      continue;
    }
    vocab = t->tokens.count;
    if (record_merge(t, a, b, err) != 0) return -1;
    // Detach the word list: merge_word adds words to other pairs' lists.
    Pair *p = &t->pairs[index];
    int32_t *words = p->words, num_words = p->num_words;
    p->words = NULL;
    p->num_words = p->cap_words = 0;
    int32_t merge = t->num_merges - 1;
    for (int32_t k = 0; k < num_words; k++) {
      if (merge_word(t, words[k], a, b, c, merge, err) != 0) {
        free(words);
        return -1;
      }
    }
    free(words);
    if (push_touched(t, err) != 0) return -1;
    if (t->num_merges % 500 == 0) log_debug("bpe: %d merges, vocab %d", t->num_merges, vocab);
  }
  return 0;
}

// ----------------------------------------------------------------------------
// tokenizer.json (keys in the order `tokenizers` 0.23 writes them)

static cJSON *json_string_pattern(void) {
  cJSON *pattern = cJSON_CreateObject();
  cJSON_AddStringToObject(pattern, "String", SPACE_MARK);
  return pattern;
}

static cJSON *json_added_tokens(void) {
  cJSON *list = cJSON_CreateArray();
  for (int k = 0; k < BPE_NUM_SPECIAL; k++) {
    cJSON *tok = cJSON_CreateObject();
    cJSON_AddNumberToObject(tok, "id", k);
    cJSON_AddStringToObject(tok, "content", SPECIAL_TOKENS[k]);
    cJSON_AddBoolToObject(tok, "single_word", 0);
    cJSON_AddBoolToObject(tok, "lstrip", 0);
    cJSON_AddBoolToObject(tok, "rstrip", 0);
    cJSON_AddBoolToObject(tok, "normalized", 0);
    cJSON_AddBoolToObject(tok, "special", 1);
    cJSON_AddItemToArray(list, tok);
  }
  return list;
}

static cJSON *json_normalizer(void) {
  cJSON *n = cJSON_CreateObject();
  cJSON_AddStringToObject(n, "type", "Replace");
  cJSON *pattern = cJSON_CreateObject();
  cJSON_AddStringToObject(pattern, "String", " ");
  cJSON_AddItemToObject(n, "pattern", pattern);
  cJSON_AddStringToObject(n, "content", SPACE_MARK);
  return n;
}

static cJSON *json_pre_tokenizer(int digit_runs) {
  cJSON *seq = cJSON_CreateObject();
  cJSON_AddStringToObject(seq, "type", "Sequence");
  cJSON *list = cJSON_AddArrayToObject(seq, "pretokenizers");
  cJSON *split = cJSON_CreateObject();
  cJSON_AddStringToObject(split, "type", "Split");
  cJSON_AddItemToObject(split, "pattern", json_string_pattern());
  cJSON_AddStringToObject(split, "behavior", "MergedWithNext");
  cJSON_AddBoolToObject(split, "invert", 0);
  cJSON_AddItemToArray(list, split);
  cJSON *digits = cJSON_CreateObject();
  cJSON_AddStringToObject(digits, "type", "Digits");
  cJSON_AddBoolToObject(digits, "individual_digits", !digit_runs);
  cJSON_AddItemToArray(list, digits);
  return seq;
}

static cJSON *json_template_piece(const char *kind, const char *id, int type_id) {
  cJSON *piece = cJSON_CreateObject(), *inner = cJSON_CreateObject();
  cJSON_AddStringToObject(inner, "id", id);
  cJSON_AddNumberToObject(inner, "type_id", type_id);
  cJSON_AddItemToObject(piece, kind, inner);
  return piece;
}

// Gemma's template: "<bos> $A" for one sequence, "<bos> $A <bos>:1 $B:1" for two.
static cJSON *json_post_processor(void) {
  cJSON *pp = cJSON_CreateObject();
  cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
  cJSON *single = cJSON_AddArrayToObject(pp, "single");
  cJSON_AddItemToArray(single, json_template_piece("SpecialToken", "<bos>", 0));
  cJSON_AddItemToArray(single, json_template_piece("Sequence", "A", 0));
  cJSON *pair = cJSON_AddArrayToObject(pp, "pair");
  cJSON_AddItemToArray(pair, json_template_piece("SpecialToken", "<bos>", 0));
  cJSON_AddItemToArray(pair, json_template_piece("Sequence", "A", 0));
  cJSON_AddItemToArray(pair, json_template_piece("SpecialToken", "<bos>", 1));
  cJSON_AddItemToArray(pair, json_template_piece("Sequence", "B", 1));
  cJSON *specials = cJSON_AddObjectToObject(pp, "special_tokens");
  cJSON *bos = cJSON_AddObjectToObject(specials, "<bos>");
  cJSON_AddStringToObject(bos, "id", "<bos>");
  int bos_id = 2;
  const char *bos_token = "<bos>";
  cJSON_AddItemToObject(bos, "ids", cJSON_CreateIntArray(&bos_id, 1));
  cJSON_AddItemToObject(bos, "tokens", cJSON_CreateStringArray(&bos_token, 1));
  return pp;
}

static cJSON *json_decoder(void) {
  cJSON *seq = cJSON_CreateObject();
  cJSON_AddStringToObject(seq, "type", "Sequence");
  cJSON *list = cJSON_AddArrayToObject(seq, "decoders");
  cJSON *replace = cJSON_CreateObject();
  cJSON_AddStringToObject(replace, "type", "Replace");
  cJSON_AddItemToObject(replace, "pattern", json_string_pattern());
  cJSON_AddStringToObject(replace, "content", " ");
  cJSON_AddItemToArray(list, replace);
  const char *simple[2] = {"ByteFallback", "Fuse"};
  for (int k = 0; k < 2; k++) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "type", simple[k]);
    cJSON_AddItemToArray(list, d);
  }
  return seq;
}

static cJSON *json_model(const Trainer *t) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "type", "BPE");
  cJSON_AddNullToObject(m, "dropout");
  cJSON_AddStringToObject(m, "unk_token", "<unk>");
  cJSON_AddNullToObject(m, "continuing_subword_prefix");
  cJSON_AddNullToObject(m, "end_of_word_suffix");
  cJSON_AddBoolToObject(m, "fuse_unk", 1);
  cJSON_AddBoolToObject(m, "byte_fallback", 1);
  cJSON_AddBoolToObject(m, "ignore_merges", 0);
  cJSON *vocab = cJSON_AddObjectToObject(m, "vocab");
  for (int32_t id = 0; id < t->tokens.count; id++)
    cJSON_AddItemToObject(vocab, interner_str(&t->tokens, id), cJSON_CreateNumber(id));
  cJSON *merges = cJSON_AddArrayToObject(m, "merges");
  for (int32_t k = 0; k < t->num_merges; k++) {
    const char *pair[2] = {interner_str(&t->tokens, t->merges[2 * k]), interner_str(&t->tokens, t->merges[2 * k + 1])};
    cJSON_AddItemToArray(merges, cJSON_CreateStringArray(pair, 2));
  }
  return m;
}

static char *write_tokenizer_json(const Trainer *t, FimiError *err) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "version", "1.0");
  cJSON_AddNullToObject(root, "truncation");
  cJSON_AddNullToObject(root, "padding");
  cJSON_AddItemToObject(root, "added_tokens", json_added_tokens());
  cJSON_AddItemToObject(root, "normalizer", json_normalizer());
  cJSON_AddItemToObject(root, "pre_tokenizer", json_pre_tokenizer(t->opt.digit_runs));
  cJSON_AddItemToObject(root, "post_processor", json_post_processor());
  cJSON_AddItemToObject(root, "decoder", json_decoder());
  cJSON_AddItemToObject(root, "model", json_model(t));
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) fimi_fail(err, "out of memory writing tokenizer.json");
  return text;
}

// ----------------------------------------------------------------------------
// Entry points

static int check_options(const BpeTrainOptions *opt, FimiError *err) {
  if (opt->vocab_size < BPE_NUM_RESERVED || opt->vocab_size > BPE_MAX_VOCAB)
    return fimi_fail(err, "vocab_size %d: must be in [%d, %d] (%d special + 256 byte tokens come first)",
                     (int)opt->vocab_size, BPE_NUM_RESERVED, BPE_MAX_VOCAB, BPE_NUM_SPECIAL);
  if (opt->min_frequency < 2)
    return fimi_fail(err, "min_frequency %lld: must be >= 2", (long long)opt->min_frequency);
  if (opt->max_token_bytes < 2 || opt->max_token_bytes > 256)
    return fimi_fail(err, "max_token_bytes %d: must be in [2, 256]", (int)opt->max_token_bytes);
  if (!(opt->character_coverage > 0.0 && opt->character_coverage <= 1.0))
    return fimi_fail(err, "character_coverage %g: must be in (0, 1]", opt->character_coverage);
  return 0;
}

static int trainer_init(Trainer *t, const BpeTrainOptions *opt, FimiError *err) {
  memset(t, 0, sizeof *t);
  if (check_options(opt, err) != 0) return -1;
  t->opt = *opt;
  int code;
  PCRE2_SIZE offset;
  t->numeric_re = pcre2_compile((PCRE2_SPTR) "\\p{N}", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ANCHORED, &code,
                                &offset, NULL);
  if (!t->numeric_re) return fimi_fail(err, "cannot compile the numeric-character regex (PCRE2 error %d)", code);
  t->numeric_md = pcre2_match_data_create_from_pattern(t->numeric_re, NULL);
  if (!t->numeric_md) return fimi_fail(err, "out of memory");
  return 0;
}

static int trainer_add_text(Trainer *t, const char *text, size_t len, const char *name, FimiError *err) {
  if (utf8_validate(text, len, name, err) != 0) return -1;
  t->stats.input_bytes += (int64_t)len;
  if (count_text(t, text, len, err) != 0) return fimi_fail_wrap(err, "%s", name);
  return 0;
}

static int trainer_finish(Trainer *t, char **json_out, FimiError *err) {
  t->stats.num_words = t->words.count;
  if (add_reserved_tokens(t, err) != 0 || choose_alphabet(t, err) != 0) return -1;
  if (build_symbols(t, err) != 0 || count_initial_pairs(t, err) != 0 || push_touched(t, err) != 0) return -1;
  if (learn_merges(t, err) != 0) return -1;
  t->stats.num_merges = t->num_merges;
  t->stats.vocab_size = t->tokens.count;
  *json_out = write_tokenizer_json(t, err);
  return *json_out ? 0 : -1;
}

int bpe_train_texts(const char *const *texts, const size_t *lens, const char *const *names, int num_texts,
                    const BpeTrainOptions *opt, char **json_out, BpeTrainStats *stats, FimiError *err) {
  *json_out = NULL;
  Trainer t;
  int rc = trainer_init(&t, opt, err);
  for (int i = 0; rc == 0 && i < num_texts; i++) rc = trainer_add_text(&t, texts[i], lens[i], names[i], err);
  if (rc == 0) rc = trainer_finish(&t, json_out, err);
  if (stats) *stats = t.stats;
  trainer_free(&t);
  return rc;
}

int bpe_train_files_stats(const char *const *paths, int num_paths, const BpeTrainOptions *opt,
                          const char *out_path, BpeTrainStats *stats, FimiError *err) {
  if (num_paths < 1) return fimi_fail(err, "no input files");
  Trainer t;
  char *json = NULL;
  int rc = trainer_init(&t, opt, err);
  for (int i = 0; rc == 0 && i < num_paths; i++) {
    size_t len = 0;
    char *text = file_read_all(paths[i], BPE_MAX_FILE_BYTES, &len, err);
    if (!text) {
      rc = -1;
      break;
    }
    rc = trainer_add_text(&t, text, len, paths[i], err);
    free(text);
  }
  if (rc == 0) rc = trainer_finish(&t, &json, err);
  if (rc == 0) rc = file_write_atomic(out_path, json, strlen(json), err);
  if (stats) *stats = t.stats;
  free(json);
  trainer_free(&t);
  return rc;
}

int bpe_train_files(const char *const *paths, int num_paths, const BpeTrainOptions *opt, const char *out_path,
                    FimiError *err) {
  return bpe_train_files_stats(paths, num_paths, opt, out_path, NULL, err);
}
