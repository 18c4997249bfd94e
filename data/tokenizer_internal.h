// data/tokenizer_internal.h: the private layout of a loaded Tokenizer, shared
// by tokenizer.c (public API, vocabulary), tokenizer_load.c (tokenizer.json
// parsing), tokenizer_encode.c (added tokens, normalizers, pre-tokenizers,
// BPE) and tokenizer_decode.c (decoders, streaming). Not part of the API.
//
// Semantics follow Hugging Face `tokenizers` 0.23 (Rust crate): component
// names, field names and edge cases mirror its JSON format.
#ifndef FIMI_DATA_TOKENIZER_INTERNAL_H
#define FIMI_DATA_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/utf8.h"
#include "data/tokenizer.h"

// ---- string -> id hash map (open addressing, keys point into owned storage)
typedef struct StrMap {
  uint32_t *slots;      // index+1 into keys/lens/vals, 0 = empty
  const char **keys;
  uint32_t *lens;
  int32_t *vals;
  uint32_t count, cap;  // cap: number of entries allocated; slot count = mask+1
  uint32_t mask;
} StrMap;

uint64_t tok_hash_bytes(const char *s, size_t n);
int strmap_init(StrMap *m, uint32_t expected, FimiError *err);
// Returns the existing value's index (>= 0) when the key is present, else
// inserts and returns -1; -2 on allocation failure.
int64_t strmap_put(StrMap *m, const char *key, uint32_t len, int32_t val, FimiError *err);
int32_t strmap_get(const StrMap *m, const char *key, size_t len);  // -1 if absent
void strmap_free(StrMap *m);

// ---- merges: (left id, right id) -> (rank, merged id)
typedef struct MergeMap {
  uint64_t *keys;   // (uint64)left << 32 | right, UINT64_MAX = empty
  int32_t *rank, *merged;
  uint64_t mask;
  uint64_t count;
} MergeMap;

// ---- regex / literal patterns (Split, Replace)
typedef struct TokPattern {
  char *literal;        // non-NULL: match this string literally
  size_t literal_len;
  pcre2_code *code;     // non-NULL: PCRE2 regex (UTF + UCP, JIT when available)
  char *source;         // the pattern text as written, for messages
} TokPattern;

// ---- normalizers
enum { NORM_REPLACE = 1, NORM_PREPEND };
typedef struct TokNormalizer {
  int kind;
  TokPattern pattern;   // Replace
  char *content;        // Replace content / Prepend text
  size_t content_len;
} TokNormalizer;

// ---- pre-tokenizers
enum { SPLIT_REMOVED = 0, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
enum { PRE_SPLIT = 1, PRE_BYTELEVEL, PRE_METASPACE, PRE_DIGITS, PRE_WHITESPACE_SPLIT, PRE_WHITESPACE };
enum { PREPEND_ALWAYS = 0, PREPEND_FIRST, PREPEND_NEVER };
typedef struct TokPreTokenizer {
  int kind;
  TokPattern pattern;      // Split (and the fixed regexes of ByteLevel / Digits / Whitespace*)
  int behavior, invert;    // Split
  int add_prefix_space, use_regex;  // ByteLevel
  char replacement[8];     // Metaspace replacement char (UTF-8)
  size_t replacement_len;
  int prepend_scheme, split;  // Metaspace
} TokPreTokenizer;

// ---- decoders
enum { DEC_REPLACE = 1, DEC_BYTE_FALLBACK, DEC_FUSE, DEC_STRIP, DEC_BYTELEVEL, DEC_METASPACE };
typedef struct TokDecoder {
  int kind;
  TokPattern pattern;   // Replace
  char *content;        // Replace
  size_t content_len;
  uint32_t strip_char;  // Strip content (code point)
  int strip_start, strip_stop;
  uint32_t meta_char;   // Metaspace replacement (code point)
  int meta_prepend;     // Metaspace prepend_scheme
} TokDecoder;

// ---- added tokens and their matching trie
typedef struct AddedToken {
  char *content;          // as written in the file
  size_t content_len;
  char *match;            // what is matched: content, or its normalized form when normalized
  size_t match_len;
  int32_t id;
  int single_word, lstrip, rstrip, normalized, special;
} AddedToken;

typedef struct TrieNode {
  int32_t first_child, next_sibling;
  int32_t token;          // index into added tokens, -1 if no token ends here
  uint8_t byte;
} TrieNode;

typedef struct AddedTrie {
  TrieNode *nodes;
  int32_t count, cap;
  int32_t root_child[256];  // first level as a table (the common fast path)
  int empty;
} AddedTrie;

// ---- post-processor (TemplateProcessing, single template)
typedef struct TokTemplate {
  int enabled;            // 0: no template (null, ByteLevel only)
  int32_t *prefix;        // ids before $A
  size_t prefix_len;
  int32_t *suffix;        // ids after $A
  size_t suffix_len;
} TokTemplate;

struct Tokenizer {
  // model vocabulary: token strings by id (NULL for holes) and the reverse map
  char **vocab_tokens;
  uint32_t *vocab_lens;
  int32_t vocab_cap;        // number of id slots (max model id + 1)
  int32_t model_vocab_count;
  StrMap vocab;
  MergeMap merges;
  int32_t byte_ids[256];    // <0xNN> ids (byte fallback), -1 when absent
  int32_t ascii_ids[128];   // single ASCII-char token ids, -1 when absent
  char *unk_token;          // NULL when the model has none
  int fuse_unk, byte_fallback, ignore_merges;
  // "▁" when no merge result contains a non-"▁" char followed by "▁" and "▁"
  // is in the vocabulary: then no merge can cross the boundary before such a
  // "▁", and BPE may run on the pieces separately (and cache them) with the
  // same result. Gemma has no pre-tokenizer, so a line is one BPE word.
  int seg_split;

  AddedToken *added;
  int32_t num_added;
  int32_t *added_by_id;     // id -> index into added (size id_cap), -1 when not added
  int32_t id_cap;           // max over model and added ids + 1
  AddedTrie trie_raw, trie_norm;  // normalized=false tokens / normalized=true tokens
  StrMap added_map;         // content -> id

  TokNormalizer *normalizers;
  int num_normalizers;
  TokPreTokenizer *pretoks;
  int num_pretoks;
  TokDecoder *decoders;
  int num_decoders;
  int has_decoder;          // 0: tokens are joined with " " like `tokenizers`
  int stream_local;         // 1: streaming can cut the window at safe points
  TokTemplate post;

  pcre2_code *word_char_re; // Rust `\w` (added tokens single_word)
  TokenizerSpecials specials;
  char byte_level_chars[256][3];  // ByteLevel byte -> UTF-8 of its mapped char
  uint8_t byte_level_len[256];
};

// ---- shared helpers
int is_unicode_white_space(uint32_t cp);

// A growable byte buffer.
typedef struct TokBuf {
  char *data;
  size_t len, cap;
} TokBuf;
int tokbuf_reserve(TokBuf *b, size_t extra, FimiError *err);
int tokbuf_append(TokBuf *b, const char *s, size_t n, FimiError *err);

// Compiles `source` (len bytes) as a PCRE2 regex (UTF, UCP); `what` names it.
pcre2_code *tok_regex_compile(const char *source, size_t len, const char *what, FimiError *err);
void tok_pattern_free(TokPattern *p);

// A match list over s: (start, end, is_match) spans covering s, like
// `tokenizers`' Pattern::find_matches.
typedef struct TokSpan {
  size_t start, end;
  int is_match;
} TokSpan;
typedef struct TokSpans {
  TokSpan *data;
  size_t len, cap;
} TokSpans;
int tok_find_matches(const TokPattern *p, const char *s, size_t n, pcre2_match_data *md, TokSpans *out,
                     FimiError *err);

// Normalizes s through the tokenizer's normalizer chain into out (cleared first).
int tok_normalize(const Tokenizer *tok, const char *s, size_t n, pcre2_match_data *md, TokBuf *out,
                  FimiError *err);

// Trie building (tokenizer_load.c uses it; tokenizer_encode.c matches).
int added_trie_insert(AddedTrie *t, const char *s, size_t n, int32_t token, FimiError *err);
void added_trie_free(AddedTrie *t);

// Decoding of ids[0..n) where `first_done` says a non-skipped token came
// before (so first-token rules of Metaspace do not apply). *open_tail is
// set when text at the end may still change once more ids follow (pending
// byte-fallback bytes or an incomplete UTF-8 sequence).
int tok_decode_range(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special, int first_done,
                     TokBuf *out, int *open_tail, int *any_token, FimiError *err);

#endif
