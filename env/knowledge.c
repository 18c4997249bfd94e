// env/knowledge.c: loading, validation and BM25 retrieval for the bank's
// knowledge base (see knowledge.h and docs/knowledge-base.md).
//
// Loading parses each JSON document with cJSON, validates every field (the
// documents may come from a bank's own directory, so they are untrusted), and
// builds an inverted index: for every term, the passages containing it and
// the passage's precomputed BM25 weight for that term. BM25's per-(term,
// passage) weight does not depend on the query, so a search is only a sum of
// posting weights per query term plus a top-k pass: a few microseconds.
//
// Tokenization (the same for passages and queries):
// - ASCII letters and digits form words, lowercased. Inside a number, ','
//   between digits is dropped ("10,00,000" -> "1000000", so Indian and
//   Western digit grouping agree) and '.' between digits is kept with
//   trailing zeros removed ("3.50" -> "3.5", "7.00" -> "7").
// - Any other UTF-8 letters (Devanagari, accented Latin, ...) form words as
//   raw byte strings; Unicode punctuation, currency signs (the rupee sign),
//   the danda and invalid UTF-8 bytes separate words.
// - A small English stop-word list and a few Hinglish function words are
//   dropped, then plurals are lightly stemmed ("deposits" -> "deposit",
//   "policies" -> "policy", "branches" -> "branch"; "ss"/"us"/"is" endings
//   and words of 3 letters or fewer are kept).
// - A passage's indexed text is its title + section + text, so a passage
//   matches on the document it comes from as well as its own words.
// Scoring: BM25 with k1 = 1.2, b = 0.75 and idf = ln(1 + (N - n + 0.5)/(n + 0.5));
// each distinct query term counts once. Ties are broken by passage index.
#define _POSIX_C_SOURCE 200809L
#include "env/knowledge.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/utf8.h"
#include "core/fileio.h"
#include "core/json.h"

#define KB_K1 1.2
#define KB_B 0.75
#define KB_MAX_FILE_BYTES (8u << 20)
#define KB_MAX_FILES 10000
#define KB_MAX_PASSAGES_PER_DOC 10000
#define KB_MAX_TOTAL_PASSAGES 1000000
#define KB_MAX_QUERY_TERMS 256
#define KB_MAX_ID_BYTES 64
#define KB_MAX_HEADING_BYTES 300
#define KB_MAX_TEXT_BYTES 8000
#define KB_STACK_SCORES 1024

struct KnowledgeBase {
  int num_docs;
  cJSON **roots;          // [num_docs] parsed documents; passages point into them
  int num_passages;
  KbPassage *passages;    // [num_passages]
  // vocabulary: term i is pool[term_offset[i] .. + term_length[i]]
  int num_terms;
  char *pool;
  int *term_offset, *term_length;
  int table_size;         // power of two; table[h] = term id or -1
  int *table;
  // postings in CSR form: term t's postings are [post_start[t], post_start[t+1])
  int *post_start;        // [num_terms + 1]
  int *post_passage;      // [num_postings] passage index, increasing within a term
  double *post_weight;    // [num_postings] BM25 weight of the term in that passage
};

// ---------------------------------------------------------------- tokenizer

static const char *const STOP_WORDS[] = {  // sorted (bsearch); "no"/"not" are kept on purpose
    "a",     "about", "am",    "an",    "and",   "any",   "are",  "as",    "at",    "aur",  "be",
    "been",  "bhi",   "but",   "by",    "can",   "could", "did",  "do",    "does",  "for",  "from",
    "had",   "hai",   "hain",  "has",   "have",  "he",    "her",  "him",   "his",   "ho",   "how",
    "i",     "if",    "in",    "into",  "is",    "it",    "its",  "ka",    "ke",    "ki",   "ko",
    "kya",   "me",    "mera",  "mere",  "meri",  "mujhe", "my",   "of",    "on",    "or",   "our",
    "se",    "she",   "should", "so",   "than",  "that",  "the",  "their", "them",  "then", "there",
    "these", "they",  "this",  "those", "to",    "toh",   "was",  "we",    "were",  "what", "when",
    "where", "which", "who",   "whom",  "why",   "will",  "with", "would", "you",   "your",
};

static int compare_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int is_stop_word(const char *word, size_t length) {
  if (length >= 8) return 0;
  char key[8];
  memcpy(key, word, length);
  key[length] = '\0';
  const char *k = key;
  return bsearch(&k, STOP_WORDS, sizeof STOP_WORDS / sizeof STOP_WORDS[0], sizeof STOP_WORDS[0], compare_cstr) != NULL;
}

static int ends_with(const char *w, size_t n, const char *suffix) {
  size_t m = strlen(suffix);
  return n >= m && memcmp(w + n - m, suffix, m) == 0;
}

// Light plural stemming on a lowercased ASCII word; returns the new length
// (the word may be rewritten in place: "ies" -> "y").
static size_t stem_plural(char *w, size_t n) {
  if (n <= 3 || w[n - 1] != 's' || w[0] < 'a') return n;  // short words and numbers stay
  if (ends_with(w, n, "ss") || ends_with(w, n, "us") || ends_with(w, n, "is")) return n;
  if (n > 4 && ends_with(w, n, "ies")) {
    w[n - 3] = 'y';
    return n - 2;
  }
  if (ends_with(w, n, "sses") || ends_with(w, n, "xes") || ends_with(w, n, "ches") || ends_with(w, n, "shes"))
    return n - 2;
  return n - 1;
}

// "3.50" -> "3.5", "7.00" -> "7": the same amount written two ways matches.
static size_t trim_decimal(const char *w, size_t n) {
  const char *dot = memchr(w, '.', n);
  if (!dot) return n;
  while (n > 0 && w[n - 1] == '0') n--;
  if (n > 0 && w[n - 1] == '.') n--;
  return n;
}

static int is_alnum_ascii(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_digit_ascii(unsigned char c) { return c >= '0' && c <= '9'; }

// Decodes one UTF-8 code point (core/utf8.h); the byte length, or 0 if invalid.
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) { return (int)utf8_char_len(s, n, cp); }

// Non-ASCII code points that separate words rather than belong to them.
static int is_separator_cp(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 ||  // Latin-1 controls, NBSP, symbols
         (cp >= 0x2000 && cp <= 0x206F) ||                         // general punctuation (dashes, quotes)
         (cp >= 0x20A0 && cp <= 0x20CF) ||                         // currency signs (rupee U+20B9)
         cp == 0x0964 || cp == 0x0965 ||                           // Devanagari danda
         (cp >= 0x2190 && cp <= 0x23FF) || (cp >= 0x3000 && cp <= 0x303F) || cp == 0xFEFF;
}

void kb_tokenize(const char *text, size_t length, void (*fn)(const char *token, size_t length, void *ctx), void *ctx) {
  const unsigned char *s = (const unsigned char *)text;
  char word[KB_MAX_TOKEN_BYTES + 4];
  size_t i = 0;
  while (i < length) {
    uint32_t cp = 0;
    if (is_alnum_ascii(s[i])) {
      // ASCII word or number; digit separators join only between two digits.
      size_t n = 0;
      int has_dot = 0;
      while (i < length) {
        unsigned char c = s[i];
        if (is_alnum_ascii(c)) {
          if (n < KB_MAX_TOKEN_BYTES) word[n++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
          i++;
        } else if ((c == ',' || c == '.') && n > 0 && is_digit_ascii((unsigned char)word[n - 1]) && i + 1 < length &&
                   is_digit_ascii(s[i + 1]) && !(c == '.' && has_dot)) {
          if (c == '.' && n < KB_MAX_TOKEN_BYTES) { word[n++] = '.'; has_dot = 1; }
          i++;
        } else {
          break;
        }
      }
      if (has_dot) n = trim_decimal(word, n);
      if (n == 0 || is_stop_word(word, n)) continue;
      n = stem_plural(word, n);
      fn(word, n, ctx);
    } else if (s[i] >= 0x80 && utf8_decode(s + i, length - i, &cp) > 0 && !is_separator_cp(cp)) {
      // Non-ASCII word: kept as the UTF-8 bytes, cut at a code point boundary.
      size_t n = 0;
      int len;
      while (i < length && s[i] >= 0x80 && (len = utf8_decode(s + i, length - i, &cp)) > 0 && !is_separator_cp(cp)) {
        if (n + (size_t)len <= KB_MAX_TOKEN_BYTES) {
          memcpy(word + n, s + i, (size_t)len);
          n += (size_t)len;
        }
        i += (size_t)len;
      }
      fn(word, n, ctx);
    } else {
      int len = s[i] >= 0x80 ? utf8_decode(s + i, length - i, &cp) : 1;
      i += len > 0 ? (size_t)len : 1;  // separator, or one invalid byte skipped
    }
  }
}

// --------------------------------------------------------------- vocabulary

static uint64_t hash_bytes(const char *s, size_t n) { return hash_fnv1a(HASH_FNV1A_SHORT_BASIS, s, n); }

static int lookup_term(const KnowledgeBase *kb, const char *s, size_t n) {
  if (kb->table_size == 0) return -1;
  size_t mask = (size_t)kb->table_size - 1;
  for (size_t h = hash_bytes(s, n) & mask;; h = (h + 1) & mask) {
    int t = kb->table[h];
    if (t < 0) return -1;
    if ((size_t)kb->term_length[t] == n && memcmp(kb->pool + kb->term_offset[t], s, n) == 0) return t;
  }
}

// Build-time state: the vocabulary being grown and the current passage's terms.
typedef struct Builder {
  KnowledgeBase *kb;
  int term_capacity;
  size_t pool_length, pool_capacity;
  int *terms;  // term ids of the passage being tokenized
  int num_terms, terms_capacity;
  int failed;  // out of memory inside the tokenizer callback
} Builder;

static int grow_table(KnowledgeBase *kb) {
  int size = kb->table_size ? kb->table_size * 2 : 1024;
  int *table = malloc((size_t)size * sizeof *table);
  if (!table) return -1;
  for (int i = 0; i < size; i++) table[i] = -1;
  for (int t = 0; t < kb->num_terms; t++) {
    size_t h = hash_bytes(kb->pool + kb->term_offset[t], (size_t)kb->term_length[t]) & (size_t)(size - 1);
    while (table[h] >= 0) h = (h + 1) & (size_t)(size - 1);
    table[h] = t;
  }
  free(kb->table);
  kb->table = table;
  kb->table_size = size;
  return 0;
}

static int intern_term(Builder *b, const char *s, size_t n) {
  KnowledgeBase *kb = b->kb;
  int t = lookup_term(kb, s, n);
  if (t >= 0) return t;
  if (kb->num_terms == b->term_capacity) {
    int cap = b->term_capacity ? b->term_capacity * 2 : 1024;
    int *off = realloc(kb->term_offset, (size_t)cap * sizeof *off);
    if (!off) return -1;
    kb->term_offset = off;
    int *len = realloc(kb->term_length, (size_t)cap * sizeof *len);
    if (!len) return -1;
    kb->term_length = len;
    b->term_capacity = cap;
  }
  if (b->pool_length + n > b->pool_capacity) {
    size_t cap = b->pool_capacity ? b->pool_capacity * 2 : 16384;
    while (cap < b->pool_length + n) cap *= 2;
    char *pool = realloc(kb->pool, cap);
    if (!pool) return -1;
    kb->pool = pool;
    b->pool_capacity = cap;
  }
  memcpy(kb->pool + b->pool_length, s, n);
  t = kb->num_terms++;
  kb->term_offset[t] = (int)b->pool_length;
  kb->term_length[t] = (int)n;
  b->pool_length += n;
  // Keep the table at most half full so probes stay short.
  if (2 * kb->num_terms > kb->table_size) {
    if (grow_table(kb) != 0) return -1;
  } else {
    size_t mask = (size_t)kb->table_size - 1, h = hash_bytes(s, n) & mask;
    while (kb->table[h] >= 0) h = (h + 1) & mask;
    kb->table[h] = t;
  }
  return t;
}

static void collect_passage_term(const char *token, size_t length, void *ctx) {
  Builder *b = ctx;
  if (b->failed) return;
  int t = intern_term(b, token, length);
  if (t < 0) { b->failed = 1; return; }
  if (b->num_terms == b->terms_capacity) {
    int cap = b->terms_capacity ? b->terms_capacity * 2 : 512;
    int *terms = realloc(b->terms, (size_t)cap * sizeof *terms);
    if (!terms) { b->failed = 1; return; }
    b->terms = terms;
    b->terms_capacity = cap;
  }
  b->terms[b->num_terms++] = t;
}

static int compare_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

// ------------------------------------------------------------------- index

typedef struct RawPosting { int term, passage, tf; } RawPosting;

static void tokenize_passage(const KbPassage *p, Builder *b) {
  const char *fields[3] = {p->title, p->section, p->text};
  b->num_terms = 0;
  for (int f = 0; f < 3; f++) kb_tokenize(fields[f], strlen(fields[f]), collect_passage_term, b);
}

static int build_index(KnowledgeBase *kb, FimiError *err) {
  Builder b = {.kb = kb};
  RawPosting *raw = NULL;
  size_t num_raw = 0, raw_capacity = 0;
  int *lengths = fimi_calloc((size_t)kb->num_passages, sizeof *lengths, err);
  if (!lengths) return -1;
  double total_length = 0;
  for (int p = 0; p < kb->num_passages && !b.failed; p++) {
    tokenize_passage(&kb->passages[p], &b);
    lengths[p] = b.num_terms;
    total_length += b.num_terms;
    qsort(b.terms, (size_t)b.num_terms, sizeof *b.terms, compare_int);
    for (int i = 0; i < b.num_terms && !b.failed;) {
      int j = i;
      while (j < b.num_terms && b.terms[j] == b.terms[i]) j++;
      if (num_raw == raw_capacity) {
        size_t cap = raw_capacity ? raw_capacity * 2 : 4096;
        RawPosting *grown = realloc(raw, cap * sizeof *grown);
        if (!grown) { b.failed = 1; break; }
        raw = grown;
        raw_capacity = cap;
      }
      raw[num_raw++] = (RawPosting){b.terms[i], p, j - i};
      i = j;
    }
  }
  free(b.terms);
  if (b.failed || num_raw > INT32_MAX) {
    free(raw);
    free(lengths);
    return fimi_fail(err, "knowledge base: out of memory building the index");
  }
  // Counting sort by term; raw is in passage order, so each term's postings
  // stay in increasing passage order.
  int T = kb->num_terms;
  kb->post_start = fimi_calloc((size_t)T + 1, sizeof *kb->post_start, err);
  kb->post_passage = fimi_malloc((num_raw ? num_raw : 1) * sizeof *kb->post_passage, err);
  kb->post_weight = fimi_malloc((num_raw ? num_raw : 1) * sizeof *kb->post_weight, err);
  int *fill = fimi_calloc((size_t)T + 1, sizeof *fill, err);
  if (!kb->post_start || !kb->post_passage || !kb->post_weight || !fill) {
    free(raw);
    free(lengths);
    free(fill);
    return -1;
  }
  for (size_t r = 0; r < num_raw; r++) kb->post_start[raw[r].term + 1]++;
  for (int t = 0; t < T; t++) kb->post_start[t + 1] += kb->post_start[t];
  double N = kb->num_passages, avg_length = total_length > 0 ? total_length / N : 1.0;
  for (size_t r = 0; r < num_raw; r++) {
    int t = raw[r].term, slot = kb->post_start[t] + fill[t]++;
    double n = kb->post_start[t + 1] - kb->post_start[t];  // passages containing t
    double idf = log(1.0 + (N - n + 0.5) / (n + 0.5));
    double tf = raw[r].tf, norm = KB_K1 * (1.0 - KB_B + KB_B * lengths[raw[r].passage] / avg_length);
    kb->post_passage[slot] = raw[r].passage;
    kb->post_weight[slot] = idf * tf * (KB_K1 + 1.0) / (tf + norm);
  }
  free(raw);
  free(lengths);
  free(fill);
  return 0;
}

// -------------------------------------------------------------- validation

// Checks that a string is valid UTF-8 without control characters; on failure
// returns -1 and the byte offset of the problem in *bad.
static int check_text_bytes(const char *s, size_t n, size_t *bad, const char **why) {
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int len = utf8_decode((const unsigned char *)s + i, n - i, &cp);
    if (len == 0) { *bad = i; *why = "invalid UTF-8"; return -1; }
    if (cp < 0x20 || cp == 0x7F) { *bad = i; *why = "a control character"; return -1; }
    i += (size_t)len;
  }
  return 0;
}

// Fetches a required non-empty string field; `where` names the file and the
// enclosing object ("env/kb/x.json: passages[3]").
static int get_text(const cJSON *obj, const char *key, size_t max_bytes, const char *where, const char **out,
                    FimiError *err) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item || cJSON_IsNull(item)) return fimi_fail(err, "%s: missing required field \"%s\"", where, key);
  if (!cJSON_IsString(item) || !item->valuestring) return fimi_fail(err, "%s: field \"%s\" must be a string", where, key);
  size_t n = strlen(item->valuestring), bad = 0;
  const char *why = NULL;
  if (n == 0) return fimi_fail(err, "%s: field \"%s\" must not be empty", where, key);
  if (n > max_bytes) return fimi_fail(err, "%s: field \"%s\" is too long (%zu bytes, at most %zu)", where, key, n, max_bytes);
  if (check_text_bytes(item->valuestring, n, &bad, &why) != 0)
    return fimi_fail(err, "%s: field \"%s\" has %s at byte %zu", where, key, why, bad);
  *out = item->valuestring;
  return 0;
}

static int check_keys(const cJSON *obj, const char *const *allowed, int num_allowed, const char *where, FimiError *err) {
  for (const cJSON *c = obj->child; c; c = c->next) {
    int ok = 0;
    for (int i = 0; i < num_allowed && !ok; i++) ok = c->string && strcmp(c->string, allowed[i]) == 0;
    if (!ok) return fimi_fail(err, "%s: unknown field \"%s\"", where, c->string ? c->string : "?");
  }
  return 0;
}

static int check_doc_id(const char *id, const char *where, FimiError *err) {
  for (const char *p = id; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
      return fimi_fail(err, "%s: field \"doc_id\" may hold only a-z, 0-9 and '-' (got '%c' at byte %zu)", where, *p,
                       (size_t)(p - id));
  return 0;
}

static int check_date(const char *d, const char *where, FimiError *err) {
  static const int DAYS[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int ok = strlen(d) == 10 && d[4] == '-' && d[7] == '-';
  for (int i = 0; ok && i < 10; i++) ok = (i == 4 || i == 7) || is_digit_ascii((unsigned char)d[i]);
  if (ok) {
    int year = atoi(d), month = atoi(d + 5), day = atoi(d + 8);
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    ok = month >= 1 && month <= 12 && day >= 1 && day <= DAYS[month - 1] && !(month == 2 && day == 29 && !leap);
  }
  if (!ok) return fimi_fail(err, "%s: field \"date\" must be a calendar date YYYY-MM-DD (got \"%s\")", where, d);
  return 0;
}

// Validates one parsed document and appends its passages to kb->passages
// (which the caller sized for `capacity` passages).
static int add_document(KnowledgeBase *kb, const cJSON *root, const char *name, FimiError *err) {
  static const char *const DOC_KEYS[] = {"doc_id", "title", "source", "date", "passages"};
  static const char *const PASSAGE_KEYS[] = {"section", "text"};
  if (!cJSON_IsObject(root)) return fimi_fail(err, "%s: the document must be a JSON object", name);
  if (check_keys(root, DOC_KEYS, 5, name, err) != 0) return -1;
  KbPassage doc = {0};
  if (get_text(root, "doc_id", KB_MAX_ID_BYTES, name, &doc.doc_id, err) != 0 ||
      check_doc_id(doc.doc_id, name, err) != 0 ||
      get_text(root, "title", KB_MAX_HEADING_BYTES, name, &doc.title, err) != 0 ||
      get_text(root, "source", KB_MAX_HEADING_BYTES, name, &doc.source, err) != 0 ||
      get_text(root, "date", 10, name, &doc.date, err) != 0 || check_date(doc.date, name, err) != 0)
    return -1;
  for (int p = 0; p < kb->num_passages; p++)
    if (strcmp(kb->passages[p].doc_id, doc.doc_id) == 0)
      return fimi_fail(err, "%s: doc_id \"%s\" is already used by another document", name, doc.doc_id);
  const cJSON *passages = cJSON_GetObjectItemCaseSensitive(root, "passages");
  if (!passages) return fimi_fail(err, "%s: missing required field \"passages\"", name);
  int count = cJSON_GetArraySize(passages);
  if (!cJSON_IsArray(passages) || count == 0)
    return fimi_fail(err, "%s: field \"passages\" must be a non-empty array", name);
  if (count > KB_MAX_PASSAGES_PER_DOC)
    return fimi_fail(err, "%s: field \"passages\" has %d entries (at most %d)", name, count, KB_MAX_PASSAGES_PER_DOC);
  int index = 0;
  for (const cJSON *item = passages->child; item; item = item->next, index++) {
    char where[1200];
    snprintf(where, sizeof where, "%s: passages[%d]", name, index);
    if (!cJSON_IsObject(item)) return fimi_fail(err, "%s: must be an object with \"section\" and \"text\"", where);
    KbPassage p = doc;
    if (check_keys(item, PASSAGE_KEYS, 2, where, err) != 0 ||
        get_text(item, "section", KB_MAX_HEADING_BYTES, where, &p.section, err) != 0 ||
        get_text(item, "text", KB_MAX_TEXT_BYTES, where, &p.text, err) != 0)
      return -1;
    kb->passages[kb->num_passages++] = p;
  }
  return 0;
}

// ------------------------------------------------------------------ loading

void kb_free(KnowledgeBase *kb) {
  if (!kb) return;
  for (int d = 0; d < kb->num_docs; d++) cJSON_Delete(kb->roots[d]);
  free(kb->roots);
  free(kb->passages);
  free(kb->pool);
  free(kb->term_offset);
  free(kb->term_length);
  free(kb->table);
  free(kb->post_start);
  free(kb->post_passage);
  free(kb->post_weight);
  free(kb);
}

// Parses every file; fills kb->roots and counts passages so the passage
// array can be allocated once.
static int parse_all(KnowledgeBase *kb, const KbSourceFile *files, int count, int *total, FimiError *err) {
  *total = 0;
  for (int f = 0; f < count; f++) {
    const char *name = files[f].name ? files[f].name : "(unnamed document)";
    if (!files[f].bytes && files[f].size > 0) return fimi_fail(err, "%s: no bytes", name);
    cJSON *root = json_parse_text((const char *)(files[f].bytes ? files[f].bytes : (const unsigned char *)""),
                                  files[f].size, name, err);
    if (!root) return -1;
    kb->roots[kb->num_docs++] = root;
    const cJSON *passages = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "passages") : NULL;
    int n = cJSON_IsArray(passages) ? cJSON_GetArraySize(passages) : 0;
    if (n > KB_MAX_PASSAGES_PER_DOC)
      return fimi_fail(err, "%s: field \"passages\" has %d entries (at most %d)", name, n, KB_MAX_PASSAGES_PER_DOC);
    *total += n;
    if (*total > KB_MAX_TOTAL_PASSAGES)
      return fimi_fail(err, "knowledge base: more than %d passages in all", KB_MAX_TOTAL_PASSAGES);
  }
  return 0;
}

int kb_load_files(const KbSourceFile *files, int count, KnowledgeBase **out, FimiError *err) {
  *out = NULL;
  if (count <= 0 || !files) return fimi_fail(err, "knowledge base: no documents");
  if (count > KB_MAX_FILES) return fimi_fail(err, "knowledge base: %d documents (at most %d)", count, KB_MAX_FILES);
  KnowledgeBase *kb = fimi_calloc(1, sizeof *kb, err);
  if (!kb) return -1;
  int total = 0;
  kb->roots = fimi_calloc((size_t)count, sizeof *kb->roots, err);
  if (!kb->roots || parse_all(kb, files, count, &total, err) != 0) goto fail;
  kb->passages = fimi_calloc(total > 0 ? (size_t)total : 1, sizeof *kb->passages, err);
  if (!kb->passages) goto fail;
  for (int f = 0; f < count; f++)
    if (add_document(kb, kb->roots[f], files[f].name ? files[f].name : "(unnamed document)", err) != 0) goto fail;
  if (build_index(kb, err) != 0) goto fail;
  *out = kb;
  return 0;
fail:
  kb_free(kb);
  return -1;
}

int kb_load_builtin(KnowledgeBase **out, FimiError *err) {
  if (kb_load_files(kb_embedded_files, kb_embedded_count, out, err) != 0)
    return fimi_fail_wrap(err, "built-in knowledge base (env/kb)");
  return 0;
}

static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;
static KnowledgeBase *builtin_kb;
static FimiError builtin_error;

static void load_builtin_once(void) { kb_load_builtin(&builtin_kb, &builtin_error); }

const KnowledgeBase *kb_builtin(FimiError *err) {
  pthread_once(&builtin_once, load_builtin_once);
  if (!builtin_kb && err) *err = builtin_error;
  return builtin_kb;
}

static int is_json_name(const char *name) {
  size_t n = strlen(name);
  return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".json") == 0;
}

int kb_load_dir(const char *dir, KnowledgeBase **out, FimiError *err) {
  *out = NULL;
  DIR *d = opendir(dir);
  if (!d) return fimi_fail(err, "%s: cannot open the knowledge-base directory", dir);
  char **names = NULL;
  int count = 0, capacity = 0, rc = -1;
  KbSourceFile *files = NULL;
  struct dirent *entry;
  while ((entry = readdir(d)) != NULL) {
    if (!is_json_name(entry->d_name)) continue;
    if (count == KB_MAX_FILES) {
      fimi_fail(err, "%s: more than %d documents", dir, KB_MAX_FILES);
      goto done;
    }
    if (count == capacity) {
      capacity = capacity ? capacity * 2 : 32;
      char **grown = realloc(names, (size_t)capacity * sizeof *grown);
      if (!grown) { fimi_fail(err, "%s: out of memory", dir); goto done; }
      names = grown;
    }
    size_t length = strlen(dir) + strlen(entry->d_name) + 2;
    if (!(names[count] = fimi_malloc(length, err))) goto done;
    snprintf(names[count++], length, "%s/%s", dir, entry->d_name);
  }
  if (count == 0) { fimi_fail(err, "%s: no *.json documents", dir); goto done; }
  qsort(names, (size_t)count, sizeof *names, compare_cstr);  // readdir order is not stable
  if (!(files = fimi_calloc((size_t)count, sizeof *files, err))) goto done;
  for (int i = 0; i < count; i++) {
    size_t size = 0;
    files[i].name = names[i];
    files[i].bytes = (const unsigned char *)file_read_all(names[i], KB_MAX_FILE_BYTES, &size, err);
    files[i].size = size;
    if (!files[i].bytes) goto done;
  }
  rc = kb_load_files(files, count, out, err);
  // Error messages and passages never point into the file buffers (cJSON copies strings).
done:
  closedir(d);
  for (int i = 0; files && i < count; i++) free((void *)files[i].bytes);
  for (int i = 0; i < count; i++) free(names[i]);
  free(files);
  free(names);
  return rc;
}

// ------------------------------------------------------------------ queries

int kb_num_documents(const KnowledgeBase *kb) { return kb ? kb->num_docs : 0; }
int kb_num_passages(const KnowledgeBase *kb) { return kb ? kb->num_passages : 0; }

const KbPassage *kb_passage(const KnowledgeBase *kb, int index) {
  if (!kb || index < 0 || index >= kb->num_passages) return NULL;
  return &kb->passages[index];
}

typedef struct QueryTerms {
  const KnowledgeBase *kb;
  int terms[KB_MAX_QUERY_TERMS];
  int count;
} QueryTerms;

// Keeps each known query term once; unknown terms cannot score.
static void collect_query_term(const char *token, size_t length, void *ctx) {
  QueryTerms *q = ctx;
  if (q->count == KB_MAX_QUERY_TERMS) return;
  int t = lookup_term(q->kb, token, length);
  if (t < 0) return;
  for (int i = 0; i < q->count; i++)
    if (q->terms[i] == t) return;
  q->terms[q->count++] = t;
}

int kb_search(const KnowledgeBase *kb, const char *query, int k, int *indices, double *scores, FimiError *err) {
  if (!kb || !query) return fimi_fail(err, "kb_search: no knowledge base or no query");
  if (k < 0 || (k > 0 && !indices)) return fimi_fail(err, "kb_search: k must be >= 0 with an output array");
  size_t length = strnlen(query, KB_MAX_QUERY_BYTES + 1);
  if (length > KB_MAX_QUERY_BYTES)
    return fimi_fail(err, "kb_search: query longer than %d bytes", KB_MAX_QUERY_BYTES);
  if (k == 0 || kb->num_passages == 0) return 0;
  QueryTerms q = {.kb = kb};
  kb_tokenize(query, length, collect_query_term, &q);
  if (q.count == 0) return 0;
  // Accumulators live on the stack for ordinary sizes so concurrent searches
  // share nothing.
  double stack_acc[KB_STACK_SCORES], *acc = stack_acc;
  if (kb->num_passages > KB_STACK_SCORES) {
    acc = fimi_malloc((size_t)kb->num_passages * sizeof *acc, err);
    if (!acc) return -1;
  }
  memset(acc, 0, (size_t)kb->num_passages * sizeof *acc);
  for (int i = 0; i < q.count; i++) {
    int t = q.terms[i];
    for (int j = kb->post_start[t]; j < kb->post_start[t + 1]; j++) acc[kb->post_passage[j]] += kb->post_weight[j];
  }
  // Top-k by insertion: a new passage goes after every kept passage with a
  // score >= its own, so equal scores stay in index order.
  int found = 0;
  for (int p = 0; p < kb->num_passages; p++) {
    double s = acc[p];
    if (s <= 0.0 || (found == k && s <= acc[indices[found - 1]])) continue;
    int pos = found < k ? found++ : k - 1;
    while (pos > 0 && acc[indices[pos - 1]] < s) {
      indices[pos] = indices[pos - 1];
      pos--;
    }
    indices[pos] = p;
  }
  if (scores)
    for (int i = 0; i < found; i++) scores[i] = acc[indices[i]];
  if (acc != stack_acc) free(acc);
  return found;
}
