// data/tokenizer_decode.c: ids -> text. Defines tokenizer_decode, the
// decoder chain (Replace, ByteFallback, Fuse, Strip, ByteLevel, Metaspace,
// or " "-joining when the file has no decoder, as `tokenizers` does) and the
// streaming decoder TokenStream.
//
// Streaming contract: the concatenation of every piece plus the finish
// flush equals tokenizer_decode of all ids. The stream keeps a window of ids
// since the last safe cut. A cut is safe when no text at the end can change
// once more ids arrive: no pending <0xNN> byte run (ByteFallback groups
// consecutive byte tokens) and no incomplete UTF-8 sequence (ByteLevel). For
// chains whose decoders are per token up to one joining step (all real
// tokenizers), decode(a ++ b) == decode(a) ++ decode_rest(b) at such cuts, so
// each push costs O(window). Other chains emit everything at finish.
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer_internal.h"

// A list of strings (the "tokens" a decoder stage sees).
typedef struct StrList {
  TokBuf text;
  size_t *off, *len;
  size_t count, cap;
} StrList;

static int list_push(StrList *l, const char *s, size_t n, FimiError *err) {
  if (l->count == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 32;
    size_t *off = realloc(l->off, cap * sizeof(size_t));
    if (!off) return fimi_fail(err, "tokenizer: out of memory");
    l->off = off;
    size_t *len = realloc(l->len, cap * sizeof(size_t));
    if (!len) return fimi_fail(err, "tokenizer: out of memory");
    l->len = len;
    l->cap = cap;
  }
  l->off[l->count] = l->text.len;
  l->len[l->count] = n;
  l->count++;
  return tokbuf_append(&l->text, s, n, err);
}

// Appends to the last string of the list (which must be the newest).
static int list_extend_last(StrList *l, const char *s, size_t n, FimiError *err) {
  l->len[l->count - 1] += n;
  return tokbuf_append(&l->text, s, n, err);
}

static void list_clear(StrList *l) {
  l->count = 0;
  l->text.len = 0;
}

static void list_free(StrList *l) {
  free(l->text.data);
  free(l->off);
  free(l->len);
}

#define LIST_STR(l, i) ((l)->text.data + (l)->off[i])

static const char REPLACEMENT_CHAR[] = "\xEF\xBF\xBD";

// String::from_utf8_lossy: each maximal invalid subpart becomes one U+FFFD.
static int append_lossy(TokBuf *out, const unsigned char *s, size_t n, FimiError *err) {
  size_t i = 0;
  while (i < n) {
    uint32_t cp;
    size_t len = utf8_char_len(s + i, n - i, &cp);
    if (len) {
      if (tokbuf_append(out, (const char *)s + i, len, err)) return -1;
      i += len;
      continue;
    }
    unsigned c = s[i];
    size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
    size_t k = 1;
    while (k < need && i + k < n) {
      unsigned b = s[i + k];
      unsigned lo = 0x80, hi = 0xBF;
      if (k == 1) {
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
        else if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
      }
      if (b < lo || b > hi) break;
      k++;
    }
    if (tokbuf_append(out, REPLACEMENT_CHAR, 3, err)) return -1;
    i += k;
  }
  return 0;
}

// True when s ends with the start of a multi-byte sequence still missing bytes.
static int ends_incomplete(const unsigned char *s, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    unsigned c = s[n - back];
    if ((c & 0xC0) == 0x80) continue;
    size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
    return need > back;
  }
  return 0;
}

// "<0xNN>" as ByteFallback reads it (Rust u8::from_str_radix, which also takes a leading '+').
static int byte_token(const char *s, size_t n, unsigned char *byte) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return 0;
  unsigned v = 0;
  int digits = 0;
  for (int i = 3; i < 5; i++) {
    char c = s[i];
    if (i == 3 && c == '+') continue;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return 0;
    v = v * 16 + (unsigned)d;
    digits++;
  }
  if (!digits) return 0;
  *byte = (unsigned char)v;
  return 1;
}

static int flush_bytes(StrList *out, TokBuf *bytes, FimiError *err) {
  if (bytes->len == 0) return 0;
  int rc;
  if (utf8_first_invalid(bytes->data, bytes->len) == bytes->len) {
    rc = list_push(out, bytes->data, bytes->len, err);
  } else {
    rc = 0;
    for (size_t i = 0; i < bytes->len && !rc; i++) rc = list_push(out, REPLACEMENT_CHAR, 3, err);
  }
  bytes->len = 0;
  return rc;
}

static int dec_byte_fallback(const StrList *in, StrList *out, int *open_tail, FimiError *err) {
  TokBuf bytes = {0};
  int rc = 0;
  for (size_t i = 0; i < in->count && !rc; i++) {
    unsigned char b;
    if (byte_token(LIST_STR(in, i), in->len[i], &b)) {
      char c = (char)b;
      rc = tokbuf_append(&bytes, &c, 1, err);
    } else {
      rc = flush_bytes(out, &bytes, err) || list_push(out, LIST_STR(in, i), in->len[i], err);
    }
  }
  if (bytes.len) *open_tail = 1;
  if (!rc) rc = flush_bytes(out, &bytes, err);
  free(bytes.data);
  return rc;
}

static int dec_strip(const TokDecoder *d, const StrList *in, StrList *out, FimiError *err) {
  char enc[4];
  size_t clen = utf8_encode(d->strip_char, enc);
  for (size_t i = 0; i < in->count; i++) {
    const char *s = LIST_STR(in, i);
    size_t a = 0, b = in->len[i];
    for (int k = 0; k < d->strip_start && b - a >= clen && memcmp(s + a, enc, clen) == 0; k++) a += clen;
    for (int k = 0; k < d->strip_stop && b - a >= clen && memcmp(s + b - clen, enc, clen) == 0; k++) b -= clen;
    if (list_push(out, s + a, b - a, err)) return -1;
  }
  return 0;
}

static int dec_metaspace(const TokDecoder *d, const StrList *in, StrList *out, int first_done, FimiError *err) {
  char enc[4];
  size_t clen = utf8_encode(d->meta_char, enc);
  for (size_t i = 0; i < in->count; i++) {
    const char *s = LIST_STR(in, i);
    size_t n = in->len[i];
    int drop = i == 0 && !first_done && d->meta_prepend != PREPEND_NEVER;
    if (list_push(out, "", 0, err)) return -1;
    size_t start = 0;
    for (size_t k = 0; k + clen <= n;) {
      if (memcmp(s + k, enc, clen) == 0) {
        if (list_extend_last(out, s + start, k - start, err)) return -1;
        if (!drop && list_extend_last(out, " ", 1, err)) return -1;
        k += clen;
        start = k;
      } else {
        k++;
      }
    }
    if (list_extend_last(out, s + start, n - start, err)) return -1;
  }
  return 0;
}

static int dec_byte_level(const Tokenizer *tok, const StrList *in, StrList *out, int *open_tail, FimiError *err) {
  // char -> byte: the inverse of GPT-2's map (all mapped chars are < U+0200).
  int16_t inverse[512];
  for (int i = 0; i < 512; i++) inverse[i] = -1;
  for (int b = 0; b < 256; b++) {
    uint32_t cp = 0;
    utf8_char_len((const unsigned char *)tok->byte_level_chars[b], tok->byte_level_len[b], &cp);
    inverse[cp] = (int16_t)b;
  }
  TokBuf bytes = {0};
  int rc = 0;
  for (size_t i = 0; i < in->count && !rc; i++) {
    const unsigned char *s = (const unsigned char *)LIST_STR(in, i);
    size_t n = in->len[i], start = bytes.len;
    int mapped = 1;
    for (size_t k = 0; k < n && mapped && !rc;) {
      uint32_t cp = 0;
      size_t len = utf8_char_len(s + k, n - k, &cp);
      if (!len || cp >= 512 || inverse[cp] < 0) { mapped = 0; break; }
      char b = (char)inverse[cp];
      rc = tokbuf_append(&bytes, &b, 1, err);
      k += len;
    }
    if (!mapped && !rc) {  // a char outside the map: the token's own bytes, like `tokenizers`
      bytes.len = start;
      rc = tokbuf_append(&bytes, (const char *)s, n, err);
    }
  }
  if (!rc) {
    if (ends_incomplete((const unsigned char *)bytes.data, bytes.len)) *open_tail = 1;
    TokBuf text = {0};
    rc = append_lossy(&text, (const unsigned char *)bytes.data, bytes.len, err) ||
         list_push(out, text.data ? text.data : "", text.len, err);
    free(text.data);
  }
  free(bytes.data);
  return rc;
}

static int dec_replace(const TokDecoder *d, const StrList *in, StrList *out, FimiError *err) {
  TokSpans spans = {0};
  pcre2_match_data *md = pcre2_match_data_create(32, NULL);
  int rc = md ? 0 : fimi_fail(err, "tokenizer: out of memory");
  for (size_t i = 0; i < in->count && !rc; i++) {
    const char *s = LIST_STR(in, i);
    rc = tok_find_matches(&d->pattern, s, in->len[i], md, &spans, err) || list_push(out, "", 0, err);
    for (size_t k = 0; k < spans.len && !rc; k++) {
      const TokSpan *sp = &spans.data[k];
      rc = sp->is_match ? list_extend_last(out, d->content, d->content_len, err)
                        : list_extend_last(out, s + sp->start, sp->end - sp->start, err);
    }
  }
  if (md) pcre2_match_data_free(md);
  free(spans.data);
  return rc;
}

static int dec_fuse(const StrList *in, StrList *out, FimiError *err) {
  if (list_push(out, "", 0, err)) return -1;
  for (size_t i = 0; i < in->count; i++)
    if (list_extend_last(out, LIST_STR(in, i), in->len[i], err)) return -1;
  return 0;
}

static int run_decoder(const Tokenizer *tok, const TokDecoder *d, const StrList *in, StrList *out, int first_done,
                       int *open_tail, FimiError *err) {
  switch (d->kind) {
    case DEC_REPLACE: return dec_replace(d, in, out, err);
    case DEC_BYTE_FALLBACK: return dec_byte_fallback(in, out, open_tail, err);
    case DEC_FUSE: return dec_fuse(in, out, err);
    case DEC_STRIP: return dec_strip(d, in, out, err);
    case DEC_BYTELEVEL: return dec_byte_level(tok, in, out, open_tail, err);
    case DEC_METASPACE: return dec_metaspace(d, in, out, first_done, err);
  }
  return fimi_fail(err, "tokenizer: unknown decoder kind %d", d->kind);
}

// The token string `tokenizers` feeds its decoder for an id (added tokens
// first, in their normalized form), or NULL for ids without a token.
static const char *id_string(const Tokenizer *tok, int32_t id, size_t *len) {
  int32_t a = tok->added_by_id[id];
  if (a >= 0) {
    *len = tok->added[a].match_len;
    return tok->added[a].match;
  }
  if (id < tok->vocab_cap && tok->vocab_tokens[id]) {
    *len = tok->vocab_lens[id];
    return tok->vocab_tokens[id];
  }
  return NULL;
}

int tok_decode_range(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special, int first_done,
                     TokBuf *out, int *open_tail, int *any_token, FimiError *err) {
  StrList lists[2];
  memset(lists, 0, sizeof(lists));
  int rc = 0, cur = 0;
  *open_tail = 0;
  *any_token = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    if (ids[i] < 0 || ids[i] >= tok->id_cap) {
      rc = fimi_fail(err, "tokenizer_decode: id %d at position %zu is out of range [0, %d)", ids[i], i, tok->id_cap);
      break;
    }
    size_t len = 0;
    const char *s = id_string(tok, ids[i], &len);
    if (!s) continue;  // an id with no token is dropped, like `tokenizers`
    if (skip_special && tokenizer_is_special(tok, ids[i])) continue;
    rc = list_push(&lists[0], s, len, err);
  }
  *any_token = lists[0].count > 0;
  if (!rc && tok->has_decoder) {
    for (int d = 0; d < tok->num_decoders && !rc; d++) {
      list_clear(&lists[1 - cur]);
      rc = run_decoder(tok, &tok->decoders[d], &lists[cur], &lists[1 - cur], first_done, open_tail, err);
      cur = 1 - cur;
    }
  }
  out->len = 0;
  if (!rc) rc = tokbuf_append(out, "", 0, err);
  for (size_t i = 0; i < lists[cur].count && !rc; i++) {
    // Without a decoder `tokenizers` joins the tokens with spaces.
    if (!tok->has_decoder && (i > 0 || first_done) && tokbuf_append(out, " ", 1, err)) rc = -1;
    if (!rc) rc = tokbuf_append(out, LIST_STR(&lists[cur], i), lists[cur].len[i], err);
  }
  list_free(&lists[0]);
  list_free(&lists[1]);
  return rc;
}

int tokenizer_decode(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special, char **text,
                     size_t *text_len, FimiError *err) {
  *text = NULL;
  if (text_len) *text_len = 0;
  if (!tok || (!ids && n)) return fimi_fail(err, "tokenizer_decode: NULL argument");
  TokBuf out = {0};
  int open_tail, any;
  if (tok_decode_range(tok, ids, n, skip_special, 0, &out, &open_tail, &any, err)) {
    free(out.data);
    return -1;
  }
  *text = out.data;
  if (text_len) *text_len = out.len;
  return 0;
}

// ---------------------------------------------------------------- streaming

void token_stream_init(TokenStream *stream, const Tokenizer *tok, int skip_special) {
  memset(stream, 0, sizeof(*stream));
  stream->tok = tok;
  stream->skip_special = skip_special;
}

static int empty_piece(char **piece, FimiError *err) {
  *piece = calloc(1, 1);
  return *piece ? 0 : fimi_fail(err, "tokenizer: out of memory");
}

int token_stream_push(TokenStream *stream, int32_t id, char **piece, FimiError *err) {
  *piece = NULL;
  const Tokenizer *tok = stream->tok;
  if (id < 0 || id >= tok->id_cap) return fimi_fail(err, "token_stream_push: id %d is out of range [0, %d)", id, tok->id_cap);
  if (token_ids_push(&stream->ids, id, err)) return -1;
  if (!tok->stream_local) return empty_piece(piece, err);
  TokBuf out = {0};
  int open_tail = 0, any = 0;
  if (tok_decode_range(tok, stream->ids.data, stream->ids.len, stream->skip_special, stream->first_done, &out,
                       &open_tail, &any, err)) {
    free(out.data);
    return -1;
  }
  if (open_tail) {
    free(out.data);
    return empty_piece(piece, err);
  }
  stream->first_done |= any;
  stream->ids.len = 0;
  stream->emitted += out.len;
  *piece = out.data;
  return 0;
}

int token_stream_finish(TokenStream *stream, char **piece, FimiError *err) {
  *piece = NULL;
  TokBuf out = {0};
  int open_tail = 0, any = 0;
  if (tok_decode_range(stream->tok, stream->ids.data, stream->ids.len, stream->skip_special, stream->first_done, &out,
                       &open_tail, &any, err)) {
    free(out.data);
    return -1;
  }
  stream->first_done |= any;
  stream->ids.len = 0;
  stream->emitted += out.len;
  *piece = out.data;
  return 0;
}

void token_stream_free(TokenStream *stream) { token_ids_free(&stream->ids); }
