// data/tokenizer_load.c: tokenizer.json -> Tokenizer. Defines
// tokenizer_load_file and tokenizer_load_json: parses the BPE model (vocab,
// merges in both layouts), added tokens (ids assigned like `tokenizers`
// AddedVocabulary::add_tokens), normalizer, pre-tokenizer, post-processor and
// decoder. The file is untrusted: every field is type-checked, every string
// must be valid UTF-8, and anything unsupported fails naming the field.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"
#include "data/tokenizer_internal.h"

#define TOKENIZER_MAX_FILE_BYTES ((size_t)1 << 30)
#define TOKENIZER_MAX_ID 0x7FFFFFFE

// Unicode White_Space as a PCRE2 class body: what Oniguruma's and Rust's `\s` mean.
#define WS_CLASS "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
// Rust regex `\w` (Unicode): Alphabetic, marks, decimal numbers, connector punctuation, joiners.
#define WORD_CLASS "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"

static const char *BYTE_LEVEL_REGEX =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS_CLASS "\\p{L}\\p{N}]+|[" WS_CLASS "]+(?![^" WS_CLASS
    "])|[" WS_CLASS "]+";
static const char *WHITESPACE_REGEX = "[" WORD_CLASS "]+|[^" WORD_CLASS WS_CLASS "]+";
static const char *WHITESPACE_SPLIT_REGEX = "[" WS_CLASS "]+";

// ---------------------------------------------------------------- JSON helpers

// A string field that must be valid UTF-8; *out points into the cJSON tree.
static int get_utf8(const cJSON *obj, const char *key, int required, const char **out, const char *what,
                    FimiError *err) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item || cJSON_IsNull(item)) {
    if (required) return fimi_fail(err, "%s.%s: missing", what, key);
    return 0;
  }
  if (!cJSON_IsString(item)) return fimi_fail(err, "%s.%s: expected a string", what, key);
  size_t n = strlen(item->valuestring);
  size_t bad = utf8_first_invalid(item->valuestring, n);
  if (bad != n) return fimi_fail(err, "%s.%s: invalid UTF-8 at byte %zu", what, key, bad);
  *out = item->valuestring;
  return 0;
}

static int get_flag(const cJSON *obj, const char *key, int *out, const char *what, FimiError *err) {
  return json_get_bool(obj, key, 0, out, what, err);
}

static int get_count(const cJSON *obj, const char *key, int *out, const char *what, FimiError *err) {
  int64_t v = *out;
  if (json_get_int64(obj, key, 0, &v, what, err)) return -1;
  if (v < 0 || v > 1000000) return fimi_fail(err, "%s.%s: %lld out of range", what, key, (long long)v);
  *out = (int)v;
  return 0;
}

static const char *type_of(const cJSON *obj) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
  return cJSON_IsString(t) ? t->valuestring : NULL;
}

static char *dup_bytes(const char *s, size_t n, FimiError *err) {
  char *d = malloc(n + 1);
  if (!d) {
    fimi_fail(err, "tokenizer: out of memory");
    return NULL;
  }
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

// One UTF-8 char field (Metaspace replacement, Strip content).
static int get_char(const cJSON *obj, const char *key, uint32_t *cp, char *utf8, size_t *utf8_len, const char *what,
                    FimiError *err) {
  const char *s = NULL;
  if (get_utf8(obj, key, 1, &s, what, err)) return -1;
  size_t n = strlen(s);
  uint32_t c = 0;
  size_t len = utf8_char_len((const unsigned char *)s, n, &c);
  if (len == 0 || len != n) return fimi_fail(err, "%s.%s: expected exactly one character, got \"%s\"", what, key, s);
  *cp = c;
  if (utf8) memcpy(utf8, s, len);
  if (utf8_len) *utf8_len = len;
  return 0;
}

// {"String": "..."} or {"Regex": "..."}; literal strings match as text.
static int parse_pattern(const cJSON *obj, TokPattern *p, const char *what, FimiError *err) {
  const cJSON *pat = cJSON_GetObjectItemCaseSensitive(obj, "pattern");
  char where[96];
  snprintf(where, sizeof(where), "%s.pattern", what);
  if (!cJSON_IsObject(pat)) return fimi_fail(err, "%s: expected {\"String\": ...} or {\"Regex\": ...}", where);
  const char *s = NULL;
  if (cJSON_GetObjectItemCaseSensitive(pat, "String")) {
    if (get_utf8(pat, "String", 1, &s, where, err)) return -1;
    size_t n = strlen(s);
    if (n == 0) return fimi_fail(err, "%s.String: empty pattern is not supported", where);
    if (!(p->literal = dup_bytes(s, n, err)) || !(p->source = dup_bytes(s, n, err))) return -1;
    p->literal_len = n;
    return 0;
  }
  if (cJSON_GetObjectItemCaseSensitive(pat, "Regex")) {
    if (get_utf8(pat, "Regex", 1, &s, where, err)) return -1;
    size_t n = strlen(s);
    if (n == 0) return fimi_fail(err, "%s.Regex: empty pattern is not supported", where);
    if (!(p->source = dup_bytes(s, n, err))) return -1;
    p->code = tok_regex_compile(s, n, where, err);
    return p->code ? 0 : -1;
  }
  return fimi_fail(err, "%s: expected a \"String\" or \"Regex\" key", where);
}

static int fixed_regex(TokPattern *p, const char *source, const char *what, FimiError *err) {
  if (!(p->source = dup_bytes(source, strlen(source), err))) return -1;
  p->code = tok_regex_compile(source, strlen(source), what, err);
  return p->code ? 0 : -1;
}

// ---------------------------------------------------------------- model

static int parse_vocab(Tokenizer *tok, const cJSON *vocab, FimiError *err) {
  if (!cJSON_IsObject(vocab)) return fimi_fail(err, "model.vocab: expected an object of token -> id");
  int64_t count = cJSON_GetArraySize(vocab);
  int64_t max_id = -1;
  for (const cJSON *e = vocab->child; e; e = e->next) {
    if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
        e->valuedouble > TOKENIZER_MAX_ID)
      return fimi_fail(err, "model.vocab[\"%.64s\"]: id must be an integer in [0, %d]", e->string ? e->string : "",
                       TOKENIZER_MAX_ID);
    if ((int64_t)e->valuedouble > max_id) max_id = (int64_t)e->valuedouble;
  }
  if (count > 0 && max_id + 1 > count * 4 + 1024)
    return fimi_fail(err, "model.vocab: largest id %lld is far beyond the %lld entries", (long long)max_id,
                     (long long)count);
  tok->vocab_cap = (int32_t)(max_id + 1);
  tok->model_vocab_count = (int32_t)count;
  tok->vocab_tokens = calloc((size_t)tok->vocab_cap + 1, sizeof(char *));
  tok->vocab_lens = calloc((size_t)tok->vocab_cap + 1, sizeof(uint32_t));
  if (!tok->vocab_tokens || !tok->vocab_lens) return fimi_fail(err, "model.vocab: out of memory");
  if (strmap_init(&tok->vocab, (uint32_t)count, err)) return -1;
  for (const cJSON *e = vocab->child; e; e = e->next) {
    const char *key = e->string ? e->string : "";
    size_t n = strlen(key);
    size_t bad = utf8_first_invalid(key, n);
    if (bad != n) return fimi_fail(err, "model.vocab: token \"%.64s\" has invalid UTF-8 at byte %zu", key, bad);
    int32_t id = (int32_t)e->valuedouble;
    if (tok->vocab_tokens[id])
      return fimi_fail(err, "model.vocab: id %d is given to both \"%.64s\" and \"%.64s\"", id, tok->vocab_tokens[id], key);
    if (!(tok->vocab_tokens[id] = dup_bytes(key, n, err))) return -1;
    tok->vocab_lens[id] = (uint32_t)n;
    int64_t r = strmap_put(&tok->vocab, tok->vocab_tokens[id], (uint32_t)n, id, err);
    if (r == -2) return -1;
    if (r >= 0) return fimi_fail(err, "model.vocab: token \"%.64s\" appears twice", key);
  }
  return 0;
}

static int merges_insert(MergeMap *m, int32_t a, int32_t b, int32_t rank, int32_t merged) {
  uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
  uint64_t i = tok_hash_bytes((const char *)&key, 8) & m->mask;
  while (m->keys[i] != UINT64_MAX && m->keys[i] != key) i = (i + 1) & m->mask;
  if (m->keys[i] == UINT64_MAX) m->count++;
  // A pair listed twice keeps the later rank, like collecting into a HashMap.
  m->keys[i] = key;
  m->rank[i] = rank;
  m->merged[i] = merged;
  return 0;
}

static int parse_one_merge(Tokenizer *tok, const cJSON *e, int32_t rank, char *buf, size_t buf_cap, FimiError *err) {
  const char *a, *b;
  size_t alen, blen;
  if (cJSON_IsString(e)) {
    const char *s = e->valuestring;
    const char *space = strchr(s, ' ');
    if (!space || strchr(space + 1, ' '))
      return fimi_fail(err, "model.merges[%d]: \"%.64s\" is not two tokens separated by one space", rank, s);
    a = s;
    alen = (size_t)(space - s);
    b = space + 1;
    blen = strlen(b);
  } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
             cJSON_IsString(e->child->next)) {
    a = e->child->valuestring;
    alen = strlen(a);
    b = e->child->next->valuestring;
    blen = strlen(b);
  } else {
    return fimi_fail(err, "model.merges[%d]: expected \"a b\" or [\"a\", \"b\"]", rank);
  }
  int32_t ida = strmap_get(&tok->vocab, a, alen), idb = strmap_get(&tok->vocab, b, blen);
  if (ida < 0) return fimi_fail(err, "model.merges[%d]: token \"%.*s\" is not in the vocabulary", rank, (int)(alen > 64 ? 64 : alen), a);
  if (idb < 0) return fimi_fail(err, "model.merges[%d]: token \"%.*s\" is not in the vocabulary", rank, (int)(blen > 64 ? 64 : blen), b);
  if (alen + blen > buf_cap)  // longer than any vocabulary token, so not in it
    return fimi_fail(err, "model.merges[%d]: merged token \"%.*s%.*s\" is not in the vocabulary", rank,
                     (int)(alen > 32 ? 32 : alen), a, (int)(blen > 32 ? 32 : blen), b);
  memcpy(buf, a, alen);
  memcpy(buf + alen, b, blen);
  int32_t merged = strmap_get(&tok->vocab, buf, alen + blen);
  if (merged < 0)
    return fimi_fail(err, "model.merges[%d]: merged token \"%.*s\" is not in the vocabulary", rank,
                     (int)(alen + blen > 64 ? 64 : alen + blen), buf);
  return merges_insert(&tok->merges, ida, idb, rank, merged);
}

static int parse_merges(Tokenizer *tok, const cJSON *merges, FimiError *err) {
  if (!cJSON_IsArray(merges)) return fimi_fail(err, "model.merges: expected an array");
  int64_t n = cJSON_GetArraySize(merges);
  if (n > TOKENIZER_MAX_ID) return fimi_fail(err, "model.merges: too many merges (%lld)", (long long)n);
  // The two layouts cannot be mixed (serde's untagged enum accepts one or the other).
  int strings = merges->child && cJSON_IsString(merges->child);
  uint64_t slots = 16;
  while (slots < (uint64_t)n * 2 + 2) slots *= 2;
  MergeMap *m = &tok->merges;
  m->mask = slots - 1;
  m->keys = malloc(slots * sizeof(uint64_t));
  m->rank = malloc(slots * sizeof(int32_t));
  m->merged = malloc(slots * sizeof(int32_t));
  if (!m->keys || !m->rank || !m->merged) return fimi_fail(err, "model.merges: out of memory");
  memset(m->keys, 0xFF, slots * sizeof(uint64_t));
  size_t buf_cap = 0;
  for (int32_t i = 0; i < tok->vocab_cap; i++)
    if (tok->vocab_lens[i] > buf_cap) buf_cap = tok->vocab_lens[i];
  char *buf = malloc(buf_cap + 1);
  if (!buf) return fimi_fail(err, "model.merges: out of memory");
  int32_t rank = 0;
  for (const cJSON *e = merges->child; e; e = e->next, rank++) {
    if (cJSON_IsString(e) != strings) {
      free(buf);
      return fimi_fail(err, "model.merges[%d]: mixes \"a b\" strings and [a, b] pairs", rank);
    }
    if (parse_one_merge(tok, e, rank, buf, buf_cap, err)) {
      free(buf);
      return -1;
    }
  }
  free(buf);
  return 0;
}

static int parse_model(Tokenizer *tok, const cJSON *model, FimiError *err) {
  if (!cJSON_IsObject(model)) return fimi_fail(err, "model: missing or not an object");
  const char *type = type_of(model);
  if (type && strcmp(type, "BPE") != 0)
    return fimi_fail(err, "model.type \"%s\" is not supported (only BPE)", type);
  if (!type && !cJSON_GetObjectItemCaseSensitive(model, "merges"))
    return fimi_fail(err, "model.type: missing, and the model has no merges (only BPE is supported)");
  const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
  if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0.0))
    return fimi_fail(err, "model.dropout: BPE dropout is not supported (must be null or 0)");
  const char *prefix = NULL, *suffix = NULL, *unk = NULL;
  if (get_utf8(model, "continuing_subword_prefix", 0, &prefix, "model", err) ||
      get_utf8(model, "end_of_word_suffix", 0, &suffix, "model", err) || get_utf8(model, "unk_token", 0, &unk, "model", err))
    return -1;
  if (prefix && prefix[0]) return fimi_fail(err, "model.continuing_subword_prefix \"%s\" is not supported", prefix);
  if (suffix && suffix[0]) return fimi_fail(err, "model.end_of_word_suffix \"%s\" is not supported", suffix);
  if (unk && !(tok->unk_token = dup_bytes(unk, strlen(unk), err))) return -1;
  if (get_flag(model, "fuse_unk", &tok->fuse_unk, "model", err) ||
      get_flag(model, "byte_fallback", &tok->byte_fallback, "model", err) ||
      get_flag(model, "ignore_merges", &tok->ignore_merges, "model", err))
    return -1;
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
  const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  if (!vocab || !merges) return fimi_fail(err, "model: missing vocab/merges");
  if (parse_vocab(tok, vocab, err) || parse_merges(tok, merges, err)) return -1;
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof(name), "<0x%02X>", b);
    tok->byte_ids[b] = strmap_get(&tok->vocab, name, 6);
  }
  for (int c = 0; c < 128; c++) {
    char s = (char)c;
    tok->ascii_ids[c] = strmap_get(&tok->vocab, &s, 1);
  }
  return 0;
}

// ---------------------------------------------------------------- normalizers

static int push_normalizer(Tokenizer *tok, const cJSON *n, int depth, FimiError *err) {
  if (!cJSON_IsObject(n)) return fimi_fail(err, "normalizer: expected an object");
  const char *type = type_of(n);
  if (!type) return fimi_fail(err, "normalizer.type: missing");
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
    if (!cJSON_IsArray(list)) return fimi_fail(err, "normalizer.normalizers: expected an array");
    if (depth > 8) return fimi_fail(err, "normalizer: Sequence nested too deeply");
    for (const cJSON *e = list->child; e; e = e->next)
      if (push_normalizer(tok, e, depth + 1, err)) return -1;
    return 0;
  }
  int kind = strcmp(type, "Replace") == 0 ? NORM_REPLACE : strcmp(type, "Prepend") == 0 ? NORM_PREPEND : 0;
  if (!kind) return fimi_fail(err, "normalizer.type \"%s\" is not supported (Replace, Prepend, Sequence)", type);
  TokNormalizer *grown = realloc(tok->normalizers, (size_t)(tok->num_normalizers + 1) * sizeof(TokNormalizer));
  if (!grown) return fimi_fail(err, "normalizer: out of memory");
  tok->normalizers = grown;
  TokNormalizer *out = &tok->normalizers[tok->num_normalizers++];
  memset(out, 0, sizeof(*out));
  out->kind = kind;
  const char *content = NULL;
  if (kind == NORM_REPLACE) {
    if (parse_pattern(n, &out->pattern, "normalizer(Replace)", err)) return -1;
    if (get_utf8(n, "content", 1, &content, "normalizer(Replace)", err)) return -1;
  } else if (get_utf8(n, "prepend", 1, &content, "normalizer(Prepend)", err)) {
    return -1;
  }
  out->content_len = strlen(content);
  out->content = dup_bytes(content, out->content_len, err);
  return out->content ? 0 : -1;
}

// ---------------------------------------------------------------- pre-tokenizers

static int parse_behavior(const cJSON *p, int *behavior, FimiError *err) {
  const char *b = NULL;
  if (get_utf8(p, "behavior", 1, &b, "pre_tokenizer(Split)", err)) return -1;
  static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
  for (int i = 0; i < 5; i++)
    if (strcmp(b, names[i]) == 0) { *behavior = i; return 0; }
  return fimi_fail(err, "pre_tokenizer(Split).behavior \"%s\" is unknown", b);
}

static int parse_prepend_scheme(const cJSON *p, int *scheme, const char *what, FimiError *err) {
  const char *s = NULL;
  *scheme = PREPEND_ALWAYS;
  if (get_utf8(p, "prepend_scheme", 0, &s, what, err)) return -1;
  if (s) {
    if (strcmp(s, "always") == 0) *scheme = PREPEND_ALWAYS;
    else if (strcmp(s, "first") == 0) *scheme = PREPEND_FIRST;
    else if (strcmp(s, "never") == 0) *scheme = PREPEND_NEVER;
    else return fimi_fail(err, "%s.prepend_scheme \"%s\" is unknown (always, first, never)", what, s);
  }
  // Legacy files: add_prefix_space false must agree with the scheme (`tokenizers` checks the same).
  const cJSON *aps = cJSON_GetObjectItemCaseSensitive(p, "add_prefix_space");
  if (cJSON_IsBool(aps) && cJSON_IsFalse(aps)) {
    if (*scheme != PREPEND_NEVER) return fimi_fail(err, "%s: add_prefix_space does not match declared prepend_scheme", what);
  }
  return 0;
}

static int parse_pretok_one(TokPreTokenizer *out, const cJSON *p, const char *type, FimiError *err) {
  if (strcmp(type, "Split") == 0) {
    out->kind = PRE_SPLIT;
    return parse_pattern(p, &out->pattern, "pre_tokenizer(Split)", err) || parse_behavior(p, &out->behavior, err) ||
                   get_flag(p, "invert", &out->invert, "pre_tokenizer(Split)", err)
               ? -1
               : 0;
  }
  if (strcmp(type, "ByteLevel") == 0) {
    out->kind = PRE_BYTELEVEL;
    out->add_prefix_space = 1;
    out->use_regex = 1;
    if (get_flag(p, "add_prefix_space", &out->add_prefix_space, "pre_tokenizer(ByteLevel)", err) ||
        get_flag(p, "use_regex", &out->use_regex, "pre_tokenizer(ByteLevel)", err))
      return -1;
    return fixed_regex(&out->pattern, BYTE_LEVEL_REGEX, "ByteLevel regex", err);
  }
  if (strcmp(type, "Metaspace") == 0) {
    out->kind = PRE_METASPACE;
    uint32_t cp;
    out->split = 1;
    if (get_char(p, "replacement", &cp, out->replacement, &out->replacement_len, "pre_tokenizer(Metaspace)", err) ||
        parse_prepend_scheme(p, &out->prepend_scheme, "pre_tokenizer(Metaspace)", err) ||
        get_flag(p, "split", &out->split, "pre_tokenizer(Metaspace)", err))
      return -1;
    return 0;
  }
  if (strcmp(type, "Digits") == 0) {
    out->kind = PRE_DIGITS;
    int individual = 0;
    if (get_flag(p, "individual_digits", &individual, "pre_tokenizer(Digits)", err)) return -1;
    out->behavior = SPLIT_ISOLATED;
    return fixed_regex(&out->pattern, individual ? "\\p{N}" : "\\p{N}+", "Digits regex", err);
  }
  if (strcmp(type, "WhitespaceSplit") == 0) {
    out->kind = PRE_WHITESPACE_SPLIT;
    out->behavior = SPLIT_REMOVED;
    return fixed_regex(&out->pattern, WHITESPACE_SPLIT_REGEX, "WhitespaceSplit regex", err);
  }
  if (strcmp(type, "Whitespace") == 0) {
    out->kind = PRE_WHITESPACE;
    out->behavior = SPLIT_REMOVED;
    out->invert = 1;
    return fixed_regex(&out->pattern, WHITESPACE_REGEX, "Whitespace regex", err);
  }
  return fimi_fail(err,
                   "pre_tokenizer.type \"%s\" is not supported (Split, ByteLevel, Metaspace, Digits, Whitespace, "
                   "WhitespaceSplit, Sequence)",
                   type);
}

static int push_pretok(Tokenizer *tok, const cJSON *p, int depth, FimiError *err) {
  if (!cJSON_IsObject(p)) return fimi_fail(err, "pre_tokenizer: expected an object");
  const char *type = type_of(p);
  if (!type) return fimi_fail(err, "pre_tokenizer.type: missing");
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
    if (!cJSON_IsArray(list)) return fimi_fail(err, "pre_tokenizer.pretokenizers: expected an array");
    if (depth > 8) return fimi_fail(err, "pre_tokenizer: Sequence nested too deeply");
    for (const cJSON *e = list->child; e; e = e->next)
      if (push_pretok(tok, e, depth + 1, err)) return -1;
    return 0;
  }
  TokPreTokenizer *grown = realloc(tok->pretoks, (size_t)(tok->num_pretoks + 1) * sizeof(TokPreTokenizer));
  if (!grown) return fimi_fail(err, "pre_tokenizer: out of memory");
  tok->pretoks = grown;
  TokPreTokenizer *out = &tok->pretoks[tok->num_pretoks++];
  memset(out, 0, sizeof(*out));
  return parse_pretok_one(out, p, type, err);
}

// ---------------------------------------------------------------- decoders

static int parse_decoder_one(TokDecoder *out, const cJSON *d, const char *type, FimiError *err) {
  if (strcmp(type, "Replace") == 0) {
    out->kind = DEC_REPLACE;
    const char *content = NULL;
    if (parse_pattern(d, &out->pattern, "decoder(Replace)", err) ||
        get_utf8(d, "content", 1, &content, "decoder(Replace)", err))
      return -1;
    out->content_len = strlen(content);
    out->content = dup_bytes(content, out->content_len, err);
    return out->content ? 0 : -1;
  }
  if (strcmp(type, "ByteFallback") == 0) { out->kind = DEC_BYTE_FALLBACK; return 0; }
  if (strcmp(type, "Fuse") == 0) { out->kind = DEC_FUSE; return 0; }
  if (strcmp(type, "ByteLevel") == 0) { out->kind = DEC_BYTELEVEL; return 0; }
  if (strcmp(type, "Strip") == 0) {
    out->kind = DEC_STRIP;
    return get_char(d, "content", &out->strip_char, NULL, NULL, "decoder(Strip)", err) ||
                   get_count(d, "start", &out->strip_start, "decoder(Strip)", err) ||
                   get_count(d, "stop", &out->strip_stop, "decoder(Strip)", err)
               ? -1
               : 0;
  }
  if (strcmp(type, "Metaspace") == 0) {
    out->kind = DEC_METASPACE;
    return get_char(d, "replacement", &out->meta_char, NULL, NULL, "decoder(Metaspace)", err) ||
                   parse_prepend_scheme(d, &out->meta_prepend, "decoder(Metaspace)", err)
               ? -1
               : 0;
  }
  return fimi_fail(err,
                   "decoder.type \"%s\" is not supported (Replace, ByteFallback, Fuse, Strip, ByteLevel, Metaspace, "
                   "Sequence)",
                   type);
}

static int push_decoder(Tokenizer *tok, const cJSON *d, int depth, FimiError *err) {
  if (!cJSON_IsObject(d)) return fimi_fail(err, "decoder: expected an object");
  const char *type = type_of(d);
  if (!type) return fimi_fail(err, "decoder.type: missing");
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(d, "decoders");
    if (!cJSON_IsArray(list)) return fimi_fail(err, "decoder.decoders: expected an array");
    if (depth > 8) return fimi_fail(err, "decoder: Sequence nested too deeply");
    for (const cJSON *e = list->child; e; e = e->next)
      if (push_decoder(tok, e, depth + 1, err)) return -1;
    return 0;
  }
  TokDecoder *grown = realloc(tok->decoders, (size_t)(tok->num_decoders + 1) * sizeof(TokDecoder));
  if (!grown) return fimi_fail(err, "decoder: out of memory");
  tok->decoders = grown;
  TokDecoder *out = &tok->decoders[tok->num_decoders++];
  memset(out, 0, sizeof(*out));
  return parse_decoder_one(out, d, type, err);
}

// Streaming may cut the id window only when every decoder acts per token
// before at most one joining step (Fuse / ByteLevel) and nothing but Fuse
// follows it: then decode(a ++ b) == decode(a) ++ decode_rest(b) at safe cuts.
static int chain_is_local(const Tokenizer *tok) {
  int joined = 0;
  for (int i = 0; i < tok->num_decoders; i++) {
    int k = tok->decoders[i].kind;
    if (k == DEC_FUSE || k == DEC_BYTELEVEL) {
      if (joined && k == DEC_BYTELEVEL) return 0;
      joined = 1;
    } else if (joined) {
      return 0;
    }
  }
  return 1;
}

// ---------------------------------------------------------------- post-processor

static int template_ids(const Tokenizer *tok, const cJSON *special_tokens, const char *name, TokenIds *out,
                        FimiError *err) {
  const cJSON *entry = cJSON_GetObjectItemCaseSensitive(special_tokens, name);
  if (!cJSON_IsObject(entry)) return fimi_fail(err, "post_processor.special_tokens: \"%.64s\" is not defined", name);
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(entry, "ids");
  if (!cJSON_IsArray(ids)) return fimi_fail(err, "post_processor.special_tokens[\"%.64s\"].ids: expected an array", name);
  for (const cJSON *e = ids->child; e; e = e->next) {
    if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
        e->valuedouble >= tok->id_cap)
      return fimi_fail(err, "post_processor.special_tokens[\"%.64s\"].ids: id out of range [0, %d)", name, tok->id_cap);
    if (token_ids_push(out, (int32_t)e->valuedouble, err)) return -1;
  }
  return 0;
}

static int parse_template(Tokenizer *tok, const cJSON *p, FimiError *err) {
  const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
  const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
  if (!cJSON_IsArray(single)) return fimi_fail(err, "post_processor(TemplateProcessing).single: expected an array");
  if (tok->post.enabled) return fimi_fail(err, "post_processor: more than one TemplateProcessing");
  TokenIds before = {0}, after = {0};
  int seen_a = 0, rc = 0;
  for (const cJSON *e = single->child; e && !rc; e = e->next) {
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(e, "Sequence");
    const char *id = NULL;
    if (cJSON_IsObject(sp)) {
      rc = get_utf8(sp, "id", 1, &id, "post_processor.single.SpecialToken", err) ||
           template_ids(tok, specials, id, seen_a ? &after : &before, err);
    } else if (cJSON_IsObject(seq)) {
      rc = get_utf8(seq, "id", 1, &id, "post_processor.single.Sequence", err);
      if (!rc && (strcmp(id, "A") != 0 || seen_a))
        rc = fimi_fail(err, "post_processor.single: the single template must use sequence $A exactly once");
      seen_a = 1;
    } else {
      rc = fimi_fail(err, "post_processor.single: expected SpecialToken or Sequence pieces");
    }
  }
  if (!rc && !seen_a) rc = fimi_fail(err, "post_processor.single: no $A sequence");
  tok->post.enabled = 1;
  tok->post.prefix = before.data;
  tok->post.prefix_len = before.len;
  tok->post.suffix = after.data;
  tok->post.suffix_len = after.len;
  return rc ? -1 : 0;
}

static int parse_post(Tokenizer *tok, const cJSON *p, int depth, FimiError *err) {
  if (!cJSON_IsObject(p)) return fimi_fail(err, "post_processor: expected an object");
  const char *type = type_of(p);
  if (!type) return fimi_fail(err, "post_processor.type: missing");
  if (strcmp(type, "TemplateProcessing") == 0) return parse_template(tok, p, err);
  if (strcmp(type, "ByteLevel") == 0) return 0;  // only adjusts offsets
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "processors");
    if (!cJSON_IsArray(list)) return fimi_fail(err, "post_processor.processors: expected an array");
    if (depth > 8) return fimi_fail(err, "post_processor: Sequence nested too deeply");
    for (const cJSON *e = list->child; e; e = e->next)
      if (parse_post(tok, e, depth + 1, err)) return -1;
    return 0;
  }
  return fimi_fail(err, "post_processor.type \"%s\" is not supported (TemplateProcessing, ByteLevel, Sequence)", type);
}

// ---------------------------------------------------------------- added tokens

int added_trie_insert(AddedTrie *t, const char *s, size_t n, int32_t token, FimiError *err) {
  if (n == 0) return fimi_fail(err, "added_tokens: empty match text");
  if (!t->nodes) {
    for (int i = 0; i < 256; i++) t->root_child[i] = -1;
  }
  int32_t node = -1;  // -1 = root
  for (size_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)s[i];
    int32_t child = node < 0 ? t->root_child[c] : t->nodes[node].first_child;
    if (node >= 0)
      while (child >= 0 && t->nodes[child].byte != c) child = t->nodes[child].next_sibling;
    if (child < 0) {
      if (t->count == t->cap) {
        int32_t cap = t->cap ? t->cap * 2 : 64;
        TrieNode *nodes = realloc(t->nodes, (size_t)cap * sizeof(TrieNode));
        if (!nodes) return fimi_fail(err, "added_tokens: out of memory");
        t->nodes = nodes;
        t->cap = cap;
      }
      child = t->count++;
      t->nodes[child] = (TrieNode){-1, -1, -1, c};
      if (node < 0) {
        t->root_child[c] = child;
      } else {
        t->nodes[child].next_sibling = t->nodes[node].first_child;
        t->nodes[node].first_child = child;
      }
    }
    node = child;
  }
  if (t->nodes[node].token >= 0) return 1;  // duplicate pattern
  t->nodes[node].token = token;
  return 0;
}

void added_trie_free(AddedTrie *t) {
  free(t->nodes);
  t->nodes = NULL;
  t->count = t->cap = 0;
}

static int parse_added_token(const cJSON *e, int index, AddedToken *t, FimiError *err) {
  char what[64];
  snprintf(what, sizeof(what), "added_tokens[%d]", index);
  if (!cJSON_IsObject(e)) return fimi_fail(err, "%s: expected an object", what);
  const char *content = NULL;
  int64_t id = 0;
  t->normalized = 1;
  if (get_utf8(e, "content", 1, &content, what, err) || json_get_int64(e, "id", 1, &id, what, err) ||
      get_flag(e, "single_word", &t->single_word, what, err) || get_flag(e, "lstrip", &t->lstrip, what, err) ||
      get_flag(e, "rstrip", &t->rstrip, what, err) || get_flag(e, "normalized", &t->normalized, what, err) ||
      get_flag(e, "special", &t->special, what, err))
    return -1;
  if (id < 0 || id > TOKENIZER_MAX_ID) return fimi_fail(err, "%s.id: %lld out of range", what, (long long)id);
  t->content_len = strlen(content);
  t->id = (int32_t)id;  // the file's id; the real one is assigned like `tokenizers` does
  return (t->content = dup_bytes(content, t->content_len, err)) ? 0 : -1;
}

// AddedVocabulary::add_tokens: an added token takes its content's existing id
// (model vocabulary or an earlier added token) or the next free id after
// the model vocabulary; a duplicate replaces the earlier entry's flags.
static int parse_added_tokens(Tokenizer *tok, const cJSON *list, FimiError *err) {
  if (!list || cJSON_IsNull(list)) return 0;
  if (!cJSON_IsArray(list)) return fimi_fail(err, "added_tokens: expected an array");
  int n = cJSON_GetArraySize(list);
  tok->added = calloc((size_t)n + 1, sizeof(AddedToken));
  if (!tok->added || strmap_init(&tok->added_map, (uint32_t)n + 1, err)) return fimi_fail(err, "added_tokens: out of memory");
  int64_t next_id = tok->model_vocab_count;
  int index = 0;
  for (const cJSON *e = list->child; e; e = e->next, index++) {
    AddedToken t = {0};
    if (parse_added_token(e, index, &t, err)) { free(t.content); return -1; }
    if (t.content_len == 0) { free(t.content); continue; }
    int32_t prev_id = strmap_get(&tok->added_map, t.content, t.content_len);
    if (prev_id >= 0) {
      AddedToken *p = NULL;
      for (int32_t k = tok->num_added - 1; k >= 0 && !p; k--)  // ids are unique among added tokens
        if (tok->added[k].id == prev_id) p = &tok->added[k];
      int special = p->special || t.special;  // `tokenizers` never removes from its special set
      *p = (AddedToken){p->content, p->content_len, NULL, 0, p->id, t.single_word, t.lstrip, t.rstrip, t.normalized, special};
      free(t.content);
      continue;
    }
    int32_t id = strmap_get(&tok->vocab, t.content, t.content_len);
    if (id < 0) {
      if (next_id > TOKENIZER_MAX_ID) { free(t.content); return fimi_fail(err, "added_tokens: too many ids"); }
      id = (int32_t)next_id++;
    }
    t.id = id;
    tok->added[tok->num_added++] = t;
    if (strmap_put(&tok->added_map, t.content, (uint32_t)t.content_len, id, err) == -2) return -1;
  }
  return 0;
}

// Matching texts (normalized tokens match their normalized form), tries, id tables.
static int index_added_tokens(Tokenizer *tok, FimiError *err) {
  int64_t cap = tok->vocab_cap;
  for (int32_t i = 0; i < tok->num_added; i++)
    if (tok->added[i].id + 1 > cap) cap = tok->added[i].id + 1;
  tok->id_cap = (int32_t)cap;
  tok->added_by_id = malloc(((size_t)cap + 1) * sizeof(int32_t));
  if (!tok->added_by_id) return fimi_fail(err, "added_tokens: out of memory");
  for (int64_t i = 0; i <= cap; i++) tok->added_by_id[i] = -1;
  for (int32_t i = 0; i < tok->num_added; i++) {
    AddedToken *t = &tok->added[i];
    tok->added_by_id[t->id] = i;
    t->match = t->content;
    t->match_len = t->content_len;
    if (t->normalized && tok->num_normalizers) {
      TokBuf buf = {0};
      pcre2_match_data *md = pcre2_match_data_create(32, NULL);
      int rc = md ? tok_normalize(tok, t->content, t->content_len, md, &buf, err) : fimi_fail(err, "out of memory");
      if (md) pcre2_match_data_free(md);
      if (rc) { free(buf.data); return -1; }
      if (buf.len != t->content_len || memcmp(buf.data, t->content, buf.len) != 0) {
        t->match = buf.data ? buf.data : dup_bytes("", 0, err);
        t->match_len = buf.len;
        if (!t->match) return -1;
      } else {
        free(buf.data);
      }
    }
    AddedTrie *trie = t->normalized ? &tok->trie_norm : &tok->trie_raw;
    int rc = added_trie_insert(trie, t->match, t->match_len, i, err);
    if (rc < 0) return fimi_fail_wrap(err, "added_tokens \"%.64s\"", t->content);
    if (rc > 0) return fimi_fail(err, "added_tokens: \"%.64s\" matches the same text as another added token", t->content);
  }
  tok->trie_raw.empty = tok->trie_raw.count == 0;
  tok->trie_norm.empty = tok->trie_norm.count == 0;
  return 0;
}

// ---------------------------------------------------------------- top level

#define SEG_CHAR "\xe2\x96\x81"  // U+2581, SentencePiece's space

static void find_segment_split(Tokenizer *tok) {
  tok->seg_split = 0;
  if (strmap_get(&tok->vocab, SEG_CHAR, 3) < 0) return;
  const MergeMap *m = &tok->merges;
  for (uint64_t i = 0; m->keys && i <= m->mask; i++) {
    if (m->keys[i] == UINT64_MAX) continue;
    int32_t id = m->merged[i];
    const char *s = id < tok->vocab_cap ? tok->vocab_tokens[id] : NULL;
    if (!s) continue;
    for (const char *hit = strstr(s + 1, SEG_CHAR); hit; hit = strstr(hit + 1, SEG_CHAR))
      if (!(hit - s >= 3 && memcmp(hit - 3, SEG_CHAR, 3) == 0)) return;  // "x▁" inside a token
  }
  tok->seg_split = 1;
}

static void find_specials(Tokenizer *tok) {
  TokenizerSpecials *s = &tok->specials;
  s->bos = tokenizer_token_to_id(tok, "<bos>");
  s->eos = tokenizer_token_to_id(tok, "<eos>");
  s->pad = tokenizer_token_to_id(tok, "<pad>");
  s->unk = tokenizer_token_to_id(tok, "<unk>");
  s->start_of_turn = tokenizer_token_to_id(tok, "<start_of_turn>");
  s->end_of_turn = tokenizer_token_to_id(tok, "<end_of_turn>");
  if (s->start_of_turn < 0 && s->end_of_turn < 0) {  // Gemma 4 (docs/chat-format.md section 10)
    s->start_of_turn = tokenizer_token_to_id(tok, "<|turn>");
    s->end_of_turn = tokenizer_token_to_id(tok, "<turn|>");
  }
  s->tool_call_open = tokenizer_token_to_id(tok, "<tool_call>");
  s->tool_call_close = tokenizer_token_to_id(tok, "</tool_call>");
}

static void build_byte_level_map(Tokenizer *tok) {
  // GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
  // rest to U+0100 + n in byte order.
  int n = 0;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    uint32_t cp = printable ? (uint32_t)b : 256u + (uint32_t)n++;
    tok->byte_level_len[b] = (uint8_t)utf8_encode(cp, tok->byte_level_chars[b]);
  }
}

static int check_top_level(const cJSON *root, FimiError *err) {
  const char *version = NULL;
  if (get_utf8(root, "version", 0, &version, "tokenizer", err)) return -1;
  if (version && strcmp(version, "1.0") != 0) return fimi_fail(err, "version: unknown tokenizer version \"%s\"", version);
  if (!json_is_missing(root, "truncation")) return fimi_fail(err, "truncation: not supported (must be null)");
  const cJSON *padding = cJSON_GetObjectItemCaseSensitive(root, "padding");
  if (padding && !cJSON_IsNull(padding)) {
    const cJSON *strategy = cJSON_IsObject(padding) ? cJSON_GetObjectItemCaseSensitive(padding, "strategy") : NULL;
    // BatchLongest pads nothing when one sequence is encoded; Fixed would.
    if (!(cJSON_IsString(strategy) && strcmp(strategy->valuestring, "BatchLongest") == 0))
      return fimi_fail(err, "padding: only null or strategy BatchLongest is supported");
  }
  return 0;
}

static int compare_keys(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// serde (which `tokenizers` uses) lets the last of two equal keys win while
// cJSON lookups find the first: rather than guess, duplicate keys are refused.
static int check_duplicate_keys(const cJSON *node, int depth, FimiError *err) {
  if (depth > 64) return fimi_fail(err, "JSON nested too deeply");
  int n = 0;
  for (const cJSON *c = node->child; c; c = c->next) {
    n++;
    if ((cJSON_IsObject(c) || cJSON_IsArray(c)) && check_duplicate_keys(c, depth + 1, err)) return -1;
  }
  if (!cJSON_IsObject(node) || n < 2) return 0;
  const char **keys = malloc((size_t)n * sizeof(char *));
  if (!keys) return fimi_fail(err, "out of memory");
  int k = 0;
  for (const cJSON *c = node->child; c; c = c->next) keys[k++] = c->string ? c->string : "";
  qsort(keys, (size_t)n, sizeof(char *), compare_keys);
  for (int i = 1; i < n; i++)
    if (strcmp(keys[i - 1], keys[i]) == 0) {
      int rc = fimi_fail(err, "duplicate key \"%.64s\" in a JSON object", keys[i]);
      free(keys);
      return rc;
    }
  free(keys);
  return 0;
}

static int load_from_tree(Tokenizer *tok, const cJSON *root, FimiError *err) {
  if (!cJSON_IsObject(root)) return fimi_fail(err, "expected a JSON object at the top level");
  if (check_duplicate_keys(root, 0, err)) return -1;
  if (check_top_level(root, err) || parse_model(tok, cJSON_GetObjectItemCaseSensitive(root, "model"), err)) return -1;
  const cJSON *normalizer = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
  if (normalizer && !cJSON_IsNull(normalizer) && push_normalizer(tok, normalizer, 0, err)) return -1;
  if (parse_added_tokens(tok, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), err)) return -1;
  if (!tok->added && (strmap_init(&tok->added_map, 1, err) || !(tok->added = calloc(1, sizeof(AddedToken)))))
    return fimi_fail(err, "out of memory");
  if (index_added_tokens(tok, err)) return -1;
  const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
  if (pre && !cJSON_IsNull(pre) && push_pretok(tok, pre, 0, err)) return -1;
  const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
  if (post && !cJSON_IsNull(post) && parse_post(tok, post, 0, err)) return -1;
  const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
  tok->has_decoder = dec && !cJSON_IsNull(dec);
  if (tok->has_decoder && push_decoder(tok, dec, 0, err)) return -1;
  tok->stream_local = chain_is_local(tok);
  if (!(tok->word_char_re = tok_regex_compile("[" WORD_CLASS "]", strlen("[" WORD_CLASS "]"), "word regex", err)))
    return -1;
  build_byte_level_map(tok);
  find_segment_split(tok);
  find_specials(tok);
  return 0;
}

int tokenizer_load_json(const char *text, size_t len, const char *source_name, Tokenizer **out, FimiError *err) {
  *out = NULL;
  const char *name = source_name ? source_name : "tokenizer.json";
  cJSON *root = json_parse_text(text, len, name, err);
  if (!root) return -1;
  Tokenizer *tok = calloc(1, sizeof(Tokenizer));
  if (!tok) {
    cJSON_Delete(root);
    return fimi_fail(err, "%s: out of memory", name);
  }
  int rc = load_from_tree(tok, root, err);
  cJSON_Delete(root);
  if (rc) {
    tokenizer_free(tok);
    return fimi_fail_wrap(err, "%s", name);
  }
  *out = tok;
  return 0;
}

int tokenizer_load_file(const char *path, Tokenizer **out, FimiError *err) {
  size_t size = 0;
  char *text = file_read_all(path, TOKENIZER_MAX_FILE_BYTES, &size, err);
  if (!text) return -1;
  int rc = tokenizer_load_json(text, size, path, out, err);
  free(text);
  return rc;
}
