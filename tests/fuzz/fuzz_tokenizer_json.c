// tests/fuzz/fuzz_tokenizer_json.c: libFuzzer target for the tokenizer.json
// loader (data/tokenizer_load.c). Any input must either fail with a message
// or load; a loaded tokenizer must encode a few strings (with and without
// special-token matching and the post-processor), decode what it encoded,
// decode random ids and stream-decode them to the same text as a whole
// decode. Crashes, leaks, UB and a stream/whole mismatch are bugs.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"

static const char *SAMPLES[] = {
    "Hello world", "  two  spaces\t\ttabs\n\nnewlines ", "₹2,00,000.50 SB-0001234", "नमस्ते दुनिया 😀👍🏽",
    "<bos><start_of_turn>user\nhi<end_of_turn>", "<tool_call>{\"a\": 1}</tool_call>", "", "a",
    "'s 're 123 4567 x\u00a0y", "\xef\xbf\xbd<0x41><unk>",
};

static void check_stream(const Tokenizer *tok, const int32_t *ids, size_t n, int skip) {
  FimiError err = {0};
  char *whole = NULL;
  size_t whole_len = 0;
  if (tokenizer_decode(tok, ids, n, skip, &whole, &whole_len, &err) != 0) abort();  // ids are in range
  TokenStream st;
  token_stream_init(&st, tok, skip);
  size_t at = 0, before = 0;
  for (size_t i = 0; i <= n; i++) {
    char *piece = NULL;
    int rc = i < n ? token_stream_push(&st, ids[i], &piece, &err) : token_stream_finish(&st, &piece, &err);
    if (rc != 0) abort();
    size_t plen = st.emitted - before;
    before = st.emitted;
    if (at + plen > whole_len || memcmp(whole + at, piece, plen) != 0) {
      fprintf(stderr, "stream piece differs from whole decode at byte %zu\n", at);
      abort();
    }
    at += plen;
    free(piece);
  }
  if (at != whole_len) abort();
  token_stream_free(&st);
  free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Tokenizer *tok = NULL;
  FimiError err = {0};
  if (tokenizer_load_json((const char *)data, size, "fuzz.json", &tok, &err) != 0) {
    if (!err.failed || !err.message[0]) abort();
    return 0;
  }
  int32_t vocab = tokenizer_vocab_size(tok);
  for (size_t s = 0; s < sizeof(SAMPLES) / sizeof(SAMPLES[0]); s++) {
    for (int flags = 0; flags < 4; flags++) {
      TokenIds ids = {0};
      FimiError e = {0};
      if (tokenizer_encode(tok, SAMPLES[s], strlen(SAMPLES[s]), flags, &ids, &e) == 0) {
        for (size_t i = 0; i < ids.len; i++)
          if (ids.data[i] < 0 || ids.data[i] >= vocab) abort();
        check_stream(tok, ids.data, ids.len, flags & 1);
      } else if (!e.failed) {
        abort();
      }
      token_ids_free(&ids);
    }
  }
  if (vocab > 0) {
    int32_t ids[24];
    uint32_t x = (uint32_t)size * 2654435761u + 1;
    for (int i = 0; i < 24; i++) {
      x = x * 1103515245u + 12345u;
      ids[i] = (int32_t)((x >> 8) % (uint32_t)vocab);
    }
    check_stream(tok, ids, 24, 0);
    check_stream(tok, ids, 24, 1);
  }
  (void)tokenizer_token_to_id(tok, "<bos>");
  (void)tokenizer_id_to_token(tok, vocab - 1);
  tokenizer_free(tok);
  return 0;
}
