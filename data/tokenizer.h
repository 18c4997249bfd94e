// data/tokenizer.h: Hugging Face tokenizer.json (BPE) loading, encoding and
// decoding. Defines Tokenizer, TokenIds, TokenizerSpecials,
// tokenizer_load_file/_json, tokenizer_encode, tokenizer_decode and the
// streaming decoder TokenStream used while generating.
//
// Supported: SentencePiece-style BPE with byte fallback (Gemma 2/3) and
// byte-level BPE (GPT-2 style). Anything else in the file (another model
// type, normalizer, pre-tokenizer, post-processor or decoder) is rejected by
// the loader with an error naming the field, never silently ignored.
// Files are untrusted input: a malformed tokenizer.json fails with a message,
// it never crashes. A loaded Tokenizer is immutable: encode/decode on the
// same Tokenizer from several threads at once is safe.
#ifndef FIMI_DATA_TOKENIZER_H
#define FIMI_DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct Tokenizer Tokenizer;

// A growable array of token ids; zero-initialize, free with token_ids_free.
typedef struct TokenIds {
  int32_t *data;
  size_t len, cap;
} TokenIds;

int token_ids_push(TokenIds *ids, int32_t id, FimiError *err);
int token_ids_append(TokenIds *ids, const int32_t *src, size_t n, FimiError *err);
void token_ids_free(TokenIds *ids);

// Ids of the tokens the chat format and generation need; -1 when the
// vocabulary lacks one. Found by content (<bos>, <eos>, <pad>, <unk>,
// <start_of_turn>, <end_of_turn>, <tool_call>, </tool_call>). The turn
// delimiters of a vocabulary without <start_of_turn>/<end_of_turn> are
// Gemma 4's <|turn>/<turn|> when it has them (its -it models stop on <turn|>),
// so generation stops and turn splitting work for either family.
typedef struct TokenizerSpecials {
  int32_t bos, eos, pad, unk;
  int32_t start_of_turn, end_of_turn;
  int32_t tool_call_open, tool_call_close;
} TokenizerSpecials;

// `source_name` names the input in error messages (usually the path).
int tokenizer_load_file(const char *path, Tokenizer **out, FimiError *err);
int tokenizer_load_json(const char *text, size_t len, const char *source_name, Tokenizer **out,
                        FimiError *err);
void tokenizer_free(Tokenizer *tok);

// Largest id + 1 over the model vocabulary and the added tokens.
int32_t tokenizer_vocab_size(const Tokenizer *tok);
// -1 when `token` (exact vocabulary string) is not in the vocabulary.
int32_t tokenizer_token_to_id(const Tokenizer *tok, const char *token);
// The vocabulary string of `id`, or NULL when out of range.
const char *tokenizer_id_to_token(const Tokenizer *tok, int32_t id);
int tokenizer_is_special(const Tokenizer *tok, int32_t id);
const TokenizerSpecials *tokenizer_specials(const Tokenizer *tok);

// Encodes UTF-8 text (len bytes; may contain NUL) and APPENDS the ids to
// *out. With TOKENIZER_ADD_SPECIAL the file's post-processor runs (e.g. a
// leading <bos>), like `tokenizers`' add_special_tokens=True. Invalid UTF-8
// is an error naming the byte offset. With TOKENIZER_NO_SPECIAL_MATCH the
// text of special tokens is encoded as ordinary text (like `tokenizers`'
// split_special_tokens=True): untrusted user or tool text that contains
// "<end_of_turn>" must never become a control token. Beyond `tokenizers`,
// BPE then also never produces a special id (no merge into one, no single
// char that is one): `tokenizers` would emit the control token when a
// vocabulary's merges spell it out, which defeats the purpose.
enum { TOKENIZER_ADD_SPECIAL = 1, TOKENIZER_NO_SPECIAL_MATCH = 2 };
int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, int flags, TokenIds *out,
                     FimiError *err);

// Decodes ids to a malloc'd NUL-terminated UTF-8 string, like `tokenizers`'
// decode(ids, skip_special_tokens=skip_special). Out-of-range ids are an error.
int tokenizer_decode(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                     char **text, size_t *text_len, FimiError *err);

// Streaming decode during generation: push ids one at a time, receive the
// text that is complete so far (never half a UTF-8 character); the
// concatenation of all pieces plus the finish flush equals tokenizer_decode
// of all ids. Text is held back while it could still change: a run of
// <0xNN> byte tokens is emitted when the next non-byte token arrives (or at
// finish), and an incomplete UTF-8 sequence waits for its last byte. Each
// push costs O(ids since the last emitted piece). See docs/tokenizer.md.
typedef struct TokenStream {
  const Tokenizer *tok;
  int skip_special;
  TokenIds ids;       // ids pushed since the last safe cut (the decode window)
  size_t emitted;     // bytes of the decoded text already returned
  int first_done;     // a non-skipped token was already emitted (first-token decoder rules are spent)
} TokenStream;

void token_stream_init(TokenStream *stream, const Tokenizer *tok, int skip_special);
// *piece (malloc'd, NUL-terminated, may be empty) is the newly completed text.
int token_stream_push(TokenStream *stream, int32_t id, char **piece, FimiError *err);
// The rest (an incomplete UTF-8 tail decodes as U+FFFD like tokenizer_decode).
int token_stream_finish(TokenStream *stream, char **piece, FimiError *err);
void token_stream_free(TokenStream *stream);

#endif
