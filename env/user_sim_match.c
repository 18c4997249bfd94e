// env/user_sim_match.c: the simulated customer's reading of an agent message
// (env/user_sim_match.h). Defines the normalising lexer (UTF-8 bytes ->
// sentences of hashed words), the phrase index built once from
// env/user_sim_phrases.c, the echo memory and user_sim_analyse.
//
// Per sentence: every word position gets its longest matching phrase (the
// tables' and the task's field names and keywords; equal-length matches are
// merged); a phrase inside a longer one that means something in this task is
// dropped ("mobile no" is not a negation, "atm pin" is not the pincode).
// Then each field mention is decided inside its clause by the nearest cue
// before it (English order: "please don't share your mobile") or, when there
// is none, the first cue after it (Hindi order: "mobile number mat
// batayein"); see user_sim_match.h for the rules.
#include "env/user_sim_match.h"

#include <pthread.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"

#define MAX_TOKENS 160      // words per sentence; a longer run is cut into pieces
#define MAX_PHRASE USER_SIM_PHRASE_WORDS  // words per phrase
#define TOKEN_BYTES 48      // normalised bytes kept per word (longer words match nothing)
#define MAX_PHRASES 2048
#define INDEX_SLOTS 2048    // power of two
#define MAX_PREFIXES 32
#define MAX_TASK_PHRASES USER_SIM_MAX_WORDS
#define MAX_CONCEPTS USER_SIM_MAX_CONCEPTS

// ---- hashing ----------------------------------------------------------------

static uint64_t fnv1a(const unsigned char *s, int n) { return hash_fnv1a(HASH_FNV1A_BASIS, s, (size_t)n); }

// ---- lexer ------------------------------------------------------------------

typedef struct Token {
  uint64_t hash;
  uint8_t clause_start;  // first word of a clause (after , ( ) or a dash)
  uint8_t data;          // ':' or '=' right after it (a key-value pair)
  uint8_t prefix_kind;   // 1 + kind of a matching '*' prefix cue, or 0
} Token;

typedef struct Sentence {
  Token tok[MAX_TOKENS];
  int n;
  int question;  // ended with a question mark
} Sentence;

typedef struct Lexer {
  const unsigned char *s;
  size_t n, pos;
  int depth;  // inside {...} or [...]: echoed data, skipped
  // the word being built
  unsigned char word[TOKEN_BYTES];
  int len, overflow, ascii, pending_clause;
} Lexer;

typedef struct Prefix {
  unsigned char text[TOKEN_BYTES];
  int len;
  UserSimKind kind;
} Prefix;

static Prefix prefixes[MAX_PREFIXES];
static int num_prefixes;

// Decodes one code point at s[0..n); returns its length (invalid: 1, cp -1).
static int decode(const unsigned char *s, size_t n, int32_t *cp) {
  unsigned c = s[0];
  int k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (k == 0 || (size_t)k > n) {
    *cp = -1;
    return 1;
  }
  int32_t v = k == 1 ? (int32_t)c : (int32_t)(c & (0x7Fu >> k));
  for (int j = 1; j < k; j++) {
    if ((s[j] & 0xC0) != 0x80) {
      *cp = -1;
      return 1;
    }
    v = (v << 6) | (s[j] & 0x3F);
  }
  static const int32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  *cp = v < min_cp[k] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ? -1 : v;
  return k;
}

static void word_put(Lexer *lx, const unsigned char *bytes, int n) {
  if (lx->len + n > TOKEN_BYTES) {
    lx->overflow = 1;
    return;
  }
  memcpy(lx->word + lx->len, bytes, (size_t)n);
  lx->len += n;
}

static void word_put_cp(Lexer *lx, int32_t cp) {
  unsigned char b[3];
  if (cp < 0x80) {
    b[0] = (unsigned char)cp;
    word_put(lx, b, 1);
    return;
  }
  lx->ascii = 0;
  if (cp < 0x800) {
    b[0] = (unsigned char)(0xC0 | (cp >> 6));
    b[1] = (unsigned char)(0x80 | (cp & 0x3F));
    word_put(lx, b, 2);
    return;
  }
  b[0] = (unsigned char)(0xE0 | (cp >> 12));
  b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  b[2] = (unsigned char)(0x80 | (cp & 0x3F));
  word_put(lx, b, 3);
}

// Ends the current word and appends it to the sentence.
static void word_end(Lexer *lx, Sentence *out) {
  if (lx->len == 0 && !lx->overflow) return;
  int n = lx->len;
  // plural 's': "digits" = "digit", "months" = "month" (not "address", "bus", "this")
  if (lx->ascii && !lx->overflow && n >= 4 && lx->word[n - 1] == 's' && lx->word[n - 2] != 's' &&
      lx->word[n - 2] != 'u' && lx->word[n - 2] != 'i')
    n--;
  if (lx->depth == 0 && out->n < MAX_TOKENS) {
    Token *t = &out->tok[out->n++];
    memset(t, 0, sizeof *t);
    t->hash = lx->overflow ? rng_mix(fnv1a(lx->word, n), 0x0f0f) : fnv1a(lx->word, n);
    t->clause_start = (uint8_t)(out->n == 1 || lx->pending_clause);
    lx->pending_clause = 0;
    for (int p = 0; p < num_prefixes && !lx->overflow; p++)
      if (n >= prefixes[p].len && memcmp(lx->word, prefixes[p].text, (size_t)prefixes[p].len) == 0) {
        t->prefix_kind = (uint8_t)(1 + prefixes[p].kind);
        break;
      }
  }
  lx->len = 0;
  lx->overflow = 0;
  lx->ascii = 1;
}

static int is_digit_byte(unsigned char c) { return c >= '0' && c <= '9'; }

// Devanagari spellings that read the same: nukta forms to their base letter,
// chandrabindu to anusvara, Devanagari digits to ASCII. Returns the code point
// to keep, or 0 to drop it.
static int32_t fold_devanagari(int32_t cp) {
  if (cp == 0x093C) return 0;                                 // nukta
  if (cp == 0x0901) return 0x0902;                            // chandrabindu -> anusvara
  if (cp >= 0x0966 && cp <= 0x096F) return '0' + (cp - 0x0966);
  static const int32_t nukta_base[8] = {0x0915, 0x0916, 0x0917, 0x091C, 0x0921, 0x0922, 0x092B, 0x092F};
  if (cp >= 0x0958 && cp <= 0x095F) return nukta_base[cp - 0x0958];
  if (cp == 0x0929) return 0x0928;
  if (cp == 0x0931) return 0x0930;
  if (cp == 0x0934) return 0x0933;
  return cp;
}

// Reads the next sentence into out; returns 0 at the end of the input.
static int lex_sentence(Lexer *lx, Sentence *out) {
  out->n = 0;
  out->question = 0;
  lx->pending_clause = 0;
  while (lx->pos < lx->n) {
    int32_t cp;
    const unsigned char *p = lx->s + lx->pos;
    int k = decode(p, lx->n - lx->pos, &cp);
    lx->pos += (size_t)k;
    int next_digit = lx->pos < lx->n && is_digit_byte(lx->s[lx->pos]);
    int prev_digit = lx->len > 0 && is_digit_byte(lx->word[lx->len - 1]);
    if ((cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9')) {
      word_put_cp(lx, cp);
    } else if (cp >= 'A' && cp <= 'Z') {
      word_put_cp(lx, cp + 32);
    } else if (cp == '.' && lx->len == 1 && lx->pos < lx->n && lx->s[lx->pos] >= 'a' && lx->s[lx->pos] <= 'z') {
      word_end(lx, out);  // d.o.b, a.c: one-letter abbreviations, not sentence ends
    } else if (cp == '.' && lx->len == 1 && lx->pos < lx->n && lx->s[lx->pos] >= 'A' && lx->s[lx->pos] <= 'Z') {
      word_end(lx, out);
    } else if ((cp == '.' || cp == ',') && prev_digit && next_digit) {
      if (cp == '.') word_put_cp(lx, '.');  // 25,000.50 is one word
    } else if ((cp == '\'' || cp == 0x2019 || cp == 0x2018) && lx->len > 0) {
      // don't -> dont, wife's -> wifes (-> wife)
    } else if (cp == 0x200C || cp == 0x200D) {
      // zero-width (non-)joiner: inside a word
    } else if (cp >= 0x0900 && cp <= 0x097F && cp != 0x0964 && cp != 0x0965) {
      int32_t f = fold_devanagari(cp);
      if (f) word_put_cp(lx, f);
    } else {
      word_end(lx, out);
      if (cp == '{' || cp == '[') {
        lx->depth++;
      } else if (cp == '}' || cp == ']') {
        if (lx->depth > 0) lx->depth--;
      } else if (lx->depth > 0) {
        // separators inside data end nothing
      } else if (cp == '?' || cp == 0xFF1F) {
        out->question = 1;
        if (out->n > 0) return 1;
      } else if (cp == '.' || cp == '!' || cp == ';' || cp == '\n' || cp == 0x0964 || cp == 0x0965 ||
                 cp == 0xFF01 || cp == 0x2026) {
        if (out->n > 0) return 1;
      } else if (cp == ',' || cp == 0xFF0C || cp == '(' || cp == ')' || cp == 0x2013 || cp == 0x2014) {
        lx->pending_clause = 1;
      } else if ((cp == ':' || cp == '=') && out->n > 0) {
        out->tok[out->n - 1].data = 1;
      }
    }
    if (out->n == MAX_TOKENS) return 1;
  }
  word_end(lx, out);
  return out->n > 0;
}

static void lex_init(Lexer *lx, const char *text, size_t n) {
  memset(lx, 0, sizeof *lx);
  lx->s = (const unsigned char *)text;
  lx->n = n;
  lx->ascii = 1;
}

// ---- the phrase index (built once) -------------------------------------------

#define PH_ASK 1   // '?': a question by itself
#define PH_HARD 2  // '!': never answered, hides what is inside it

typedef struct Phrase {
  uint64_t tok[MAX_PHRASE];
  uint8_t len, flags;
  uint16_t concept;
  int32_t next;  // next phrase with the same first word, longest first
} Phrase;

static Phrase phrases[MAX_PHRASES];
static int num_phrases;
static int32_t heads[INDEX_SLOTS];
static uint64_t concept_fields[MAX_CONCEPTS][16];  // hashes of the field names a field concept names
static int concept_num_fields[MAX_CONCEPTS];
static uint64_t weak_words[32];
static int num_weak;
static pthread_once_t index_once = PTHREAD_ONCE_INIT;

// Lexes one phrase into token hashes; returns its length (0: not a phrase).
static int phrase_tokens(const char *text, size_t n, uint64_t tok[MAX_PHRASE]) {
  Lexer lx;
  Sentence s;
  lex_init(&lx, text, n);
  if (!lex_sentence(&lx, &s) || s.n > MAX_PHRASE) return 0;
  Sentence rest;
  if (lex_sentence(&lx, &rest)) return 0;  // a phrase is one sentence
  for (int i = 0; i < s.n; i++) tok[i] = s.tok[i].hash;
  return s.n;
}

static void index_add(const char *text, size_t n, int concept) {
  UserSimKind kind = user_sim_concepts[concept].kind;
  int flags = 0;
  for (; n > 0 && (*text == '?' || *text == '!' || *text == '*'); text++, n--) {
    if (*text == '?') flags |= PH_ASK;
    if (*text == '!') flags |= PH_HARD;
    if (*text == '*' && num_prefixes < MAX_PREFIXES && n - 1 <= TOKEN_BYTES) {
      memcpy(prefixes[num_prefixes].text, text + 1, n - 1);
      prefixes[num_prefixes].len = (int)(n - 1);
      prefixes[num_prefixes++].kind = kind;
      return;
    }
  }
  Phrase ph;
  memset(&ph, 0, sizeof ph);
  int len = phrase_tokens(text, n, ph.tok);
  if (len == 0) return;
  if (kind == USIM_WEAK) {
    if (len == 1 && num_weak < 32) weak_words[num_weak++] = ph.tok[0];
    return;
  }
  if (num_phrases >= MAX_PHRASES) return;  // test_env_user_sim checks the tables fit
  ph.len = (uint8_t)len;
  ph.flags = (uint8_t)flags;
  ph.concept = (uint16_t)concept;
  // Insert into the first word's chain, longest first.
  int32_t *link = &heads[ph.tok[0] & (INDEX_SLOTS - 1)];
  while (*link >= 0 && phrases[*link].len > ph.len) link = &phrases[*link].next;
  ph.next = *link;
  phrases[num_phrases] = ph;
  *link = num_phrases++;
}

static void index_build(void) {
  for (int i = 0; i < INDEX_SLOTS; i++) heads[i] = -1;
  for (int c = 0; c < user_sim_num_concepts && c < MAX_CONCEPTS; c++) {
    for (const char *f = user_sim_concepts[c].fields; f && *f;) {
      while (*f == ' ') f++;
      const char *e = f;
      while (*e && *e != ' ') e++;
      if (e > f && concept_num_fields[c] < 16)
        concept_fields[c][concept_num_fields[c]++] = fnv1a((const unsigned char *)f, (int)(e - f));
      f = e;
    }
    const char *p = user_sim_concepts[c].phrases;
    while (*p) {
      const char *bar = strchr(p, '|');
      size_t n = bar ? (size_t)(bar - p) : strlen(p);
      index_add(p, n, c);
      p += n + (bar ? 1 : 0);
    }
  }
}

int user_sim_index_stats(int *phrases_out, int *prefixes_out) {
  pthread_once(&index_once, index_build);
  *phrases_out = num_phrases;
  *prefixes_out = num_prefixes;
  int fits = num_phrases < MAX_PHRASES && num_prefixes < MAX_PREFIXES && user_sim_num_concepts <= MAX_CONCEPTS;
  for (int c = 0; c < user_sim_num_concepts && c < MAX_CONCEPTS; c++) fits &= concept_num_fields[c] < 16;
  return fits;
}

// ---- echo memory ------------------------------------------------------------

static uint64_t sentence_hash(const Sentence *s) {
  uint64_t h = 0x5e17e7ce;
  for (int i = 0; i < s->n; i++) h = rng_mix(h, s->tok[i].hash);
  return h | 1;
}

static uint64_t gram_hash(const Sentence *s, int k) {
  uint64_t h = 0x4a11;
  for (int i = k; i < k + 4; i++) h = rng_mix(h, s->tok[i].hash);
  return h | 1;
}

static void echo_insert(UserSimEcho *e, uint64_t h) {
  if (e->count >= USER_SIM_ECHO_SLOTS * 3 / 4) return;
  for (uint64_t i = h;; i++) {
    uint64_t *slot = &e->slots[i & (USER_SIM_ECHO_SLOTS - 1)];
    if (*slot == h) return;
    if (*slot == 0) {
      *slot = h;
      e->count++;
      return;
    }
  }
}

static int echo_has(const UserSimEcho *e, uint64_t h) {
  if (!e) return 0;
  for (uint64_t i = h;; i++) {
    uint64_t v = e->slots[i & (USER_SIM_ECHO_SLOTS - 1)];
    if (v == h) return 1;
    if (v == 0) return 0;
  }
}

void user_sim_echo_add(UserSimEcho *echo, const char *text) {
  if (!echo || !text) return;
  pthread_once(&index_once, index_build);
  Lexer lx;
  Sentence s;
  lex_init(&lx, text, strlen(text));
  while (lex_sentence(&lx, &s)) {
    echo_insert(echo, sentence_hash(&s));
    for (int k = 0; k + 4 <= s.n; k++) echo_insert(echo, gram_hash(&s, k));
  }
}

// A mention at [start, end) inside four words the customer said.
static int echo_covers(const UserSimEcho *e, const Sentence *s, int start, int end) {
  if (!e || s->n < 4) return 0;
  int lo = end - 4 < 0 ? 0 : end - 4, hi = start < s->n - 4 ? start : s->n - 4;
  if (end - start > 4) lo = start, hi = end - 4;
  for (int k = lo; k <= hi; k++)
    if (echo_has(e, gram_hash(s, k))) return 1;
  return 0;
}

// ---- the task's own phrases ----------------------------------------------------

static void task_phrase_add(UserSimWords *tp, const char *text, int field) {
  if (!text || tp->n >= MAX_TASK_PHRASES) return;
  UserSimWord *p = &tp->p[tp->n];
  int len = phrase_tokens(text, strlen(text), p->tok);
  if (len == 0) return;
  p->len = (uint8_t)len;
  p->field = field;
  p->weak = 0;
  for (int w = 0; len == 1 && w < num_weak; w++) p->weak |= weak_words[w] == p->tok[0];
  tp->n++;
}

void user_sim_words(const Task *task, UserSimWords *tp) {
  pthread_once(&index_once, index_build);
  tp->n = 0;
  tp->third_party = 0;
  int nf = task->num_fields < 64 ? task->num_fields : 64;
  uint64_t name_hash[64];
  for (int i = 0; i < nf; i++) {
    const TaskField *f = &task->fields[i];
    name_hash[i] = f->name ? fnv1a((const unsigned char *)f->name, (int)strlen(f->name)) : 0;
    tp->qualifier[i] = 0;
    if (!f->name) continue;
    task_phrase_add(tp, f->name, i);
    // A name of two or more words qualifies: "rd" picks rd_tenure over
    // fd_tenure for "how long" (function words like "to" do not).
    if (tp->n > 0 && tp->p[tp->n - 1].field == i && tp->p[tp->n - 1].len >= 2) {
      uint64_t q = tp->p[tp->n - 1].tok[0];
      int weak = 0;
      for (int w = 0; w < num_weak; w++) weak |= weak_words[w] == q;
      if (!weak) tp->qualifier[i] = q;
    }
    for (int k = 0; k < f->num_keywords; k++) task_phrase_add(tp, f->keywords[k], i);
    if (strcmp(f->name, "payee_name") == 0 || strcmp(f->name, "payee_account_number") == 0 ||
        strcmp(f->name, "ifsc") == 0)
      tp->third_party |= 1ULL << i;
  }
  for (int c = 0; c < user_sim_num_concepts && c < MAX_CONCEPTS; c++) {
    tp->concept_mask[c] = 0;
    if (user_sim_concepts[c].kind != USIM_FIELD) continue;
    for (int k = 0; k < concept_num_fields[c]; k++)
      for (int i = 0; i < nf; i++)
        if (name_hash[i] == concept_fields[c][k]) tp->concept_mask[c] |= 1ULL << i;
  }
}

// ---- spans --------------------------------------------------------------------

typedef struct Span {
  int start, end;
  uint32_t kinds;        // bit per cue kind (USIM_FIELD excluded)
  uint64_t fields;       // task fields named (strong)
  uint64_t weak_fields;  // task fields named by a weak keyword
  uint8_t ask, hard, absent, dropped;
} Span;

#define BIT(k) (1u << (k))
#define CUE_BITS \
  (BIT(USIM_REQUEST) | BIT(USIM_NEGATION) | BIT(USIM_LACK) | BIT(USIM_STATED) | BIT(USIM_SERVICE))

static int tokens_match(const Sentence *s, int i, const uint64_t *tok, int len) {
  if (i + len > s->n) return 0;
  for (int k = 0; k < len; k++)
    if (s->tok[i + k].hash != tok[k]) return 0;
  return 1;
}

// Merges a matched phrase of length len into the span at position i (a
// longer match replaces what is there; an equal one joins it).
static void span_merge(Span *sp, int *best, int len) {
  if (len > *best) {
    *best = len;
    uint32_t start = (uint32_t)sp->start;
    memset(sp, 0, sizeof *sp);
    sp->start = (int)start;
  }
  sp->end = sp->start + len;
}

static int span_at(const Sentence *s, int i, const UserSimWords *tp, Span *sp) {
  int best = 0;
  memset(sp, 0, sizeof *sp);
  sp->start = i;
  for (int32_t k = heads[s->tok[i].hash & (INDEX_SLOTS - 1)]; k >= 0; k = phrases[k].next) {
    const Phrase *ph = &phrases[k];
    if (ph->len < best) break;
    if (ph->tok[0] != s->tok[i].hash || !tokens_match(s, i, ph->tok, ph->len)) continue;
    span_merge(sp, &best, ph->len);
    UserSimKind kind = user_sim_concepts[ph->concept].kind;
    if (kind == USIM_FIELD) {
      uint64_t m = tp->concept_mask[ph->concept];
      sp->fields |= m;
      if (!m) sp->absent = 1;
      if (ph->flags & PH_HARD) sp->hard = 1;
      if (ph->flags & PH_ASK) sp->ask = 1;
    } else {
      sp->kinds |= BIT(kind);
    }
  }
  for (int k = 0; k < tp->n; k++) {
    const UserSimWord *p = &tp->p[k];
    if (p->len < best || !tokens_match(s, i, p->tok, p->len)) continue;
    span_merge(sp, &best, p->len);
    if (p->weak) sp->weak_fields |= 1ULL << p->field;
    else sp->fields |= 1ULL << p->field;
  }
  if (s->tok[i].prefix_kind && best <= 1) {
    span_merge(sp, &best, 1);
    sp->kinds |= BIT(s->tok[i].prefix_kind - 1);
  }
  if (sp->hard) sp->fields = sp->weak_fields = 0;  // "your name" is not the payee's name
  if (sp->fields || sp->weak_fields) sp->absent = 0;
  return best > 0;
}

static int span_is_field(const Span *sp) {
  return sp->fields || sp->weak_fields || sp->absent || (sp->kinds & BIT(USIM_SECRET));
}
// A span that means something here hides the shorter phrases inside it.
static int span_hides(const Span *sp) {
  return sp->fields || sp->weak_fields || sp->hard || (sp->kinds & ~BIT(USIM_FILLER));
}

// Drops spans inside an earlier, longer one that means something in this
// task. Inside a field phrase a request word still makes it a question
// ("how much"); other cues there are part of the name ("mobile no").
static void spans_nest(Span *sp, int n) {
  // spans are in word order, one per word: a container starts at most
  // MAX_PHRASE - 1 spans earlier
  for (int b = 0; b < n; b++)
    for (int a = b - MAX_PHRASE < 0 ? 0 : b - MAX_PHRASE; a < b && !sp[b].dropped; a++) {
      if (sp[a].dropped || sp[a].start > sp[b].start || sp[a].end < sp[b].end) continue;
      if (sp[a].end - sp[a].start <= sp[b].end - sp[b].start || !span_hides(&sp[a])) continue;
      int a_field = sp[a].fields || sp[a].weak_fields || sp[a].hard;
      if (a_field && (sp[b].kinds & BIT(USIM_REQUEST))) sp[a].ask = 1;
      sp[b].dropped = 1;
    }
}

// The cue that decides a mention: the strongest kind of a span.
static int cue_of(const Span *sp) {
  static const UserSimKind order[] = {USIM_NEGATION, USIM_STATED, USIM_LACK, USIM_SERVICE, USIM_REQUEST};
  for (int k = 0; k < 5; k++)
    if (sp->kinds & BIT(order[k])) return order[k];
  return -1;
}

static int span_is_cue(const Span *sp) { return !sp->dropped && (sp->kinds & CUE_BITS); }

typedef struct Reading {
  int n;
  Span sp[MAX_TOKENS];
  int clause[MAX_TOKENS];  // clause index of each word
} Reading;

// opens[t]: only fillers and request words come before word t in its clause
// (a weak keyword there asks: "And from which date?"). Linear in the words.
static void clause_openers(const Reading *r, int n_words, uint8_t *opens) {
  uint8_t mark[MAX_TOKENS];  // 0 outside every span, 1 filler/request only, 2 anything else
  memset(mark, 0, (size_t)n_words);
  for (int i = 0; i < r->n; i++) {
    const Span *sp = &r->sp[i];
    if (sp->dropped) continue;
    int lead = !span_is_field(sp) && (sp->kinds & (BIT(USIM_FILLER) | BIT(USIM_REQUEST) | BIT(USIM_POLITE))) &&
               !(sp->kinds & ~(BIT(USIM_FILLER) | BIT(USIM_REQUEST) | BIT(USIM_POLITE)));
    for (int t = sp->start; t < sp->end && t < n_words; t++)
      if (mark[t] < 2) mark[t] = lead && mark[t] != 2 ? 1 : 2;
  }
  for (int t = 0; t < n_words; t++)
    opens[t] = t == 0 || r->clause[t] != r->clause[t - 1] || (opens[t - 1] && mark[t - 1] == 1);
}

typedef enum { MENTION_NONE = 0, MENTION_ASKED, MENTION_ANTECEDENT } Mention;

// Decides the mention at span j (see the header for the rules).
static Mention decide(const Reading *r, const Sentence *s, int j, int request, uint64_t *fields,
                      const UserSimWords *tp, int other) {
  const Span *f = &r->sp[j];
  int c = r->clause[f->start];
  int before = -1, after = -1;
  for (int i = 0; i < r->n; i++) {
    const Span *q = &r->sp[i];
    if (!span_is_cue(q) || r->clause[q->start] != c) continue;
    if (q->end <= f->start) before = cue_of(q);
    else if (q->start >= f->end && after < 0) after = cue_of(q);
  }
  if (other) *fields &= tp->third_party;
  if (!*fields && !f->absent && !(f->kinds & BIT(USIM_SECRET))) return MENTION_NONE;
  // a key-value pair ("customer_id: NVC1") is data, not a question
  if (s->tok[f->end - 1].data && f->end < s->n && r->clause[f->end] == c) return MENTION_NONE;
  if (before == USIM_NEGATION) return MENTION_NONE;
  if (before == USIM_STATED || before == USIM_LACK || before == USIM_SERVICE) return MENTION_ANTECEDENT;
  if (before == USIM_REQUEST || f->ask || (f->kinds & BIT(USIM_REQUEST))) return MENTION_ASKED;
  if (after == USIM_NEGATION) return MENTION_NONE;
  if (after == USIM_STATED || after == USIM_LACK || after == USIM_SERVICE) return MENTION_ANTECEDENT;
  return request ? MENTION_ASKED : MENTION_ANTECEDENT;
}

// A pronoun next to a request word, in a clause without a field of its own.
static int pronoun_asks(const Reading *r, int j) {
  const Span *p = &r->sp[j];
  int c = r->clause[p->start];
  for (int i = 0; i < r->n; i++) {
    const Span *q = &r->sp[i];
    if (q->dropped || r->clause[q->start] != c) continue;
    if (span_is_field(q)) return 0;
  }
  for (int i = 0; i < r->n; i++) {
    const Span *q = &r->sp[i];
    if (q->dropped || !(q->kinds & BIT(USIM_REQUEST)) || r->clause[q->start] != c) continue;
    if (q->end == p->start || p->end == q->start) return 1;
  }
  return 0;
}

// Of several fields one mention names, those whose qualifier word is in the
// clause outside the mention ("how long for the RD" -> rd_tenure); all of
// them when none is.
static uint64_t qualified(const Sentence *s, const Reading *r, const Span *f, uint64_t fields,
                          const UserSimWords *tp) {
  uint64_t keep = 0;
  int c = r->clause[f->start];
  for (int i = 0; i < 64; i++) {
    if (!((fields >> i) & 1) || !tp->qualifier[i]) continue;
    for (int t = 0; t < s->n && !((keep >> i) & 1); t++)
      if (r->clause[t] == c && (t < f->start || t >= f->end) && s->tok[t].hash == tp->qualifier[i]) keep |= 1ULL << i;
  }
  return keep ? keep : fields;
}

// Reads one sentence; `last` carries the latest mention for pronouns.
static void read_sentence(const Sentence *s, const UserSimWords *tp, const UserSimEcho *echo, uint64_t *last,
                          UserSimAsk *out) {
  Reading r;
  r.n = 0;
  int clause = 0;
  for (int i = 0; i < s->n; i++) {
    clause += i > 0 && s->tok[i].clause_start;
    r.clause[i] = clause;
    if (span_at(s, i, tp, &r.sp[r.n])) r.n++;
  }
  spans_nest(r.sp, r.n);
  int request = s->question, service = 0;
  for (int i = 0; i < r.n; i++) {
    const Span *q = &r.sp[i];
    if (q->dropped) continue;
    request |= (q->kinds & (BIT(USIM_REQUEST) | BIT(USIM_POLITE))) != 0 || q->ask;
    service |= (q->kinds & BIT(USIM_SERVICE)) != 0;
    if (q->kinds & BIT(USIM_INJECTION)) out->injection = 1;
  }
  if (request && !service) out->question = 1;
  uint8_t opens[MAX_TOKENS];
  clause_openers(&r, s->n, opens);
  for (int j = 0; j < r.n; j++) {
    Span *f = &r.sp[j];
    if (f->dropped) continue;
    if ((f->kinds & BIT(USIM_PRONOUN)) && !span_is_field(f)) {
      if (*last && pronoun_asks(&r, j)) out->fields |= *last;
      continue;
    }
    if (!span_is_field(f) || echo_covers(echo, s, f->start, f->end)) continue;
    uint64_t fields = f->fields | (f->weak_fields && opens[f->start] ? f->weak_fields : 0);
    int other = 0;
    for (int i = 0; i < r.n; i++)
      other |= !r.sp[i].dropped && (r.sp[i].kinds & BIT(USIM_OTHER)) && r.clause[r.sp[i].start] == r.clause[f->start];
    if (fields & (fields - 1)) fields = qualified(s, &r, f, fields, tp);
    Mention m = decide(&r, s, j, request, &fields, tp, other);
    if (m == MENTION_NONE) continue;
    if (fields) *last = fields;
    if (m != MENTION_ASKED) continue;
    out->fields |= fields;
    if (!fields && (f->kinds & BIT(USIM_SECRET))) out->secret = 1;
    else if (!fields && f->absent) out->absent = 1;
  }
}

void user_sim_analyse(const Task *task, const UserSimEcho *echo, const char *message, UserSimAsk *out) {
  memset(out, 0, sizeof *out);
  if (!task || !message) return;
  UserSimWords words;
  user_sim_words(task, &words);
  user_sim_analyse_words(&words, echo, message, out);
}

void user_sim_analyse_words(const UserSimWords *tp, const UserSimEcho *echo, const char *message, UserSimAsk *out) {
  memset(out, 0, sizeof *out);
  if (!tp || !message) return;
  pthread_once(&index_once, index_build);
  Lexer lx;
  Sentence s;
  uint64_t last = 0;
  lex_init(&lx, message, strlen(message));
  while (lex_sentence(&lx, &s)) {
    if (echo_has(echo, sentence_hash(&s))) continue;  // the customer's own sentence said back
    read_sentence(&s, tp, echo, &last, out);
  }
  if (out->injection) out->fields = 0;
}
