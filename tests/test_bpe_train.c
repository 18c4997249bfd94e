// tests/test_bpe_train.c: the BPE trainer (data/bpe_train.h). Checks a
// hand-worked example merge by merge, determinism (byte-identical JSON, in
// memory and through files), the fixed special/byte ids, that merges stay
// inside pre-tokenized pieces, max_token_bytes, character coverage, special
// token text being cut out, digit runs (--digits runs), and clear errors for
// bad input. The exact match
// with the Python `tokenizers` library is tests/interop/test_bpe_train_interop.py.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "data/bpe_train.h"
#include "data/tokenizer.h"
#include "tests/test_util.h"

static const char MARK[] = "\xE2\x96\x81";  // "▁"

static char *train_text(const char *text, size_t len, const BpeTrainOptions *opt, BpeTrainStats *stats,
                        FimiError *err) {
  const char *name = "corpus";
  char *json = NULL;
  if (bpe_train_texts(&text, &len, &name, 1, opt, &json, stats, err) != 0) return NULL;
  return json;
}

static BpeTrainOptions options(int32_t vocab_size) {
  BpeTrainOptions opt;
  bpe_train_default_options(&opt);
  opt.vocab_size = vocab_size;
  return opt;
}

// A varied synthetic corpus from a fixed LCG: English-like and Hinglish
// syllables, Devanagari, emoji, rupee amounts, account ids, JSON, runs of
// spaces, tabs and newlines, and special-token text.
static char *synthetic_corpus(size_t target, size_t *len) {
  static const char *syllables[] = {"ka", "ra", "ma", "na", "ta", "pa", "sh", "ee", "oo", "ban", "k", "acc",
                                    "ount", "ing", "tion", "dep", "osit", "loan", "\xE0\xA4\x95", "\xE0\xA4\xAE",
                                    "\xE0\xA4\xB0\xE0\xA4\xBE", "\xF0\x9F\x99\x8F", "\xC3\xA9", "  ", "\t", "{\"a\": "};
  const int num = (int)(sizeof syllables / sizeof syllables[0]);
  char *text = malloc(target + 256);
  size_t used = 0;
  uint64_t state = 12345;
  while (used < target) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t r = (uint32_t)(state >> 33);
    if (r % 97 == 0) used += (size_t)sprintf(text + used, "\xE2\x82\xB9%u,%02u,000.50", r % 100, r % 37);
    else if (r % 89 == 0) used += (size_t)sprintf(text + used, "ACC%07u", r % 10000000);
    else if (r % 83 == 0) used += (size_t)sprintf(text + used, "<end_of_turn>\n<start_of_turn>user\n");
    else if (r % 13 == 0) text[used++] = '\n';
    else if (r % 3 == 0) text[used++] = ' ';
    else {
      const char *s = syllables[r % (uint32_t)num];
      memcpy(text + used, s, strlen(s));
      used += strlen(s);
    }
  }
  text[used] = '\0';
  *len = used;
  return text;
}

static cJSON *model_field(cJSON *root, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), key);
}

static int vocab_id(cJSON *root, const char *token) {
  cJSON *v = cJSON_GetObjectItemCaseSensitive(model_field(root, "vocab"), token);
  return cJSON_IsNumber(v) ? v->valueint : -1;
}

// "abab abab abab cd cd" worked by hand (docs/tokenizer-training.md rules):
// pieces abab x1, ▁abab x2, ▁cd x2; alphabet a b ▁ c d (by count, then bytes).
// (a,b)=6 -> ab; (ab,ab)=3 -> abab; then three pairs at 2, ordered by their
// strings bytewise: (c,d) < (▁,abab) < (▁,cd) since "c" < "▁" and "abab" < "cd".
static void test_hand_example(void) {
  const char *text = "abab abab abab cd cd";
  BpeTrainOptions opt = options(1000);
  BpeTrainStats stats;
  FimiError err = {0};
  char *json = train_text(text, strlen(text), &opt, &stats, &err);
  CHECK(json != NULL, "train failed: %s", err.message);
  if (!json) return;
  cJSON *root = cJSON_Parse(json);
  const char *expect[5][2] = {{"a", "b"}, {"ab", "ab"}, {"c", "d"}, {MARK, "abab"}, {MARK, "cd"}};
  cJSON *merges = model_field(root, "merges");
  CHECK(cJSON_GetArraySize(merges) == 5, "expected 5 merges, got %d", cJSON_GetArraySize(merges));
  for (int k = 0; k < 5 && k < cJSON_GetArraySize(merges); k++) {
    cJSON *m = cJSON_GetArrayItem(merges, k);
    const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(m, 0)), *b = cJSON_GetStringValue(cJSON_GetArrayItem(m, 1));
    CHECK(a && b && !strcmp(a, expect[k][0]) && !strcmp(b, expect[k][1]), "merge %d: got [%s, %s], expected [%s, %s]",
          k, a ? a : "?", b ? b : "?", expect[k][0], expect[k][1]);
  }
  const char *alphabet[5] = {"a", "b", MARK, "c", "d"};
  for (int k = 0; k < 5; k++)
    CHECK(vocab_id(root, alphabet[k]) == BPE_NUM_RESERVED + k, "alphabet %s at %d", alphabet[k], vocab_id(root, alphabet[k]));
  CHECK(vocab_id(root, "abab") == BPE_NUM_RESERVED + 6, "abab id %d", vocab_id(root, "abab"));
  CHECK(stats.vocab_size == BPE_NUM_RESERVED + 10 && stats.num_merges == 5 && stats.alphabet_size == 5,
        "stats vocab %d merges %d alphabet %d", stats.vocab_size, stats.num_merges, stats.alphabet_size);
  CHECK(stats.num_pieces == 5 && stats.num_words == 3, "pieces %lld words %lld", (long long)stats.num_pieces,
        (long long)stats.num_words);
  cJSON_Delete(root);
  free(json);

  // A smaller vocab stops after the first two merges.
  opt.vocab_size = BPE_NUM_RESERVED + 7;
  json = train_text(text, strlen(text), &opt, &stats, &err);
  CHECK(json && stats.num_merges == 2 && stats.vocab_size == opt.vocab_size, "cut-off: merges %d vocab %d",
        stats.num_merges, stats.vocab_size);
  free(json);
}

// Specials at 0..7, "<0xNN>" at 8..263, in both added_tokens and model.vocab.
static void check_fixed_ids(cJSON *root) {
  static const char *specials[8] = {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
                                    "<tool_call>", "</tool_call>"};
  cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  CHECK(cJSON_GetArraySize(added) == 8, "added_tokens has %d entries", cJSON_GetArraySize(added));
  for (int k = 0; k < 8; k++) {
    cJSON *tok = cJSON_GetArrayItem(added, k);
    cJSON *id = cJSON_GetObjectItemCaseSensitive(tok, "id");
    const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tok, "content"));
    CHECK(cJSON_IsNumber(id) && id->valueint == k && content && !strcmp(content, specials[k]), "added token %d", k);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tok, "special")), "added token %d not special", k);
    CHECK(vocab_id(root, specials[k]) == k, "vocab %s -> %d", specials[k], vocab_id(root, specials[k]));
  }
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    CHECK(vocab_id(root, name) == BPE_FIRST_BYTE_ID + b, "%s -> %d", name, vocab_id(root, name));
  }
}

// Every vocabulary entry past the alphabet came from merges within one
// pre-tokenized piece: "▁" only at its start, no digit, "\n" only at its end,
// never special-token text; and every merge joins two earlier tokens.
static void check_merges_inside_pieces(cJSON *root, int alphabet_size, int max_bytes) {
  cJSON *vocab = model_field(root, "vocab");
  int n = cJSON_GetArraySize(vocab), bad = 0;
  cJSON *entry;
  cJSON_ArrayForEach(entry, vocab) {
    const char *s = entry->string;
    if (entry->valueint < BPE_NUM_RESERVED + alphabet_size) continue;
    size_t len = strlen(s);
    const char *mark = strstr(s + 1, MARK), *nl = strchr(s, '\n');
    int digit = 0;
    for (size_t i = 0; i < len; i++) digit |= s[i] >= '0' && s[i] <= '9';
    if (mark || digit || (nl && nl != s + len - 1) || strstr(s, "<end_of_turn>") || strstr(s, "start_of") ||
        (int)len > max_bytes) {
      if (bad++ < 5) fprintf(stderr, "token crosses a piece boundary or is too long: \"%s\"\n", s);
    }
  }
  CHECK(bad == 0, "%d tokens cross piece boundaries", bad);
  cJSON *merges = model_field(root, "merges"), *m;
  int k = 0, bad_merges = 0;
  cJSON_ArrayForEach(m, merges) {
    const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(m, 0)), *b = cJSON_GetStringValue(cJSON_GetArrayItem(m, 1));
    char joined[600];
    snprintf(joined, sizeof joined, "%s%s", a ? a : "", b ? b : "");
    int ia = a ? vocab_id(root, a) : -1, ib = b ? vocab_id(root, b) : -1, ic = vocab_id(root, joined);
    // Parts are alphabet or earlier results; the result is a merged token.
    if (ia < BPE_NUM_RESERVED || ib < BPE_NUM_RESERVED || ic < BPE_NUM_RESERVED + alphabet_size || ia >= ic ||
        ib >= ic) {
      if (bad_merges++ < 5) fprintf(stderr, "merge %d [%s, %s] ids %d %d -> %d\n", k, a, b, ia, ib, ic);
    }
    k++;
  }
  CHECK(bad_merges == 0, "%d malformed merges", bad_merges);
  CHECK(n >= BPE_NUM_RESERVED + alphabet_size, "vocab has %d entries", n);
}

// fimi's own loader reads the output and decode(encode(x)) == x on the
// training text; the merges are used (far fewer tokens than bytes).
static void check_roundtrip(const char *json, const char *text, size_t len) {
  Tokenizer *tok = NULL;
  FimiError err = {0};
  CHECK(tokenizer_load_json(json, strlen(json), "trained", &tok, &err) == 0, "load: %s", err.message);
  if (!tok) return;
  CHECK(tokenizer_vocab_size(tok) == 1500, "loaded vocab %d", tokenizer_vocab_size(tok));
  CHECK(tokenizer_token_to_id(tok, "<end_of_turn>") == 5 && tokenizer_token_to_id(tok, "<0x41>") == 8 + 0x41,
        "fixed ids after load");
  TokenIds ids = {0};
  char *decoded = NULL;
  size_t decoded_len = 0;
  CHECK(tokenizer_encode(tok, text, len, 0, &ids, &err) == 0, "encode: %s", err.message);
  CHECK(ids.len > 0 && ids.len * 2 < len, "%zu tokens for %zu bytes", ids.len, len);
  CHECK(tokenizer_decode(tok, ids.data, ids.len, 0, &decoded, &decoded_len, &err) == 0, "decode: %s", err.message);
  CHECK(decoded && decoded_len == len && !memcmp(decoded, text, len), "decode(encode(x)) != x");
  free(decoded);
  token_ids_free(&ids);
  tokenizer_free(tok);
}

static void test_synthetic_corpus(void) {
  size_t len;
  char *text = synthetic_corpus(200000, &len);
  BpeTrainOptions opt = options(1500);
  opt.max_token_bytes = 12;
  BpeTrainStats stats;
  FimiError err = {0};
  char *json = train_text(text, len, &opt, &stats, &err);
  CHECK(json != NULL, "train failed: %s", err.message);
  if (!json) {
    free(text);
    return;
  }
  cJSON *root = cJSON_Parse(json);
  CHECK(root != NULL, "output is not JSON");
  CHECK(stats.vocab_size == 1500, "vocab size %d, expected 1500", stats.vocab_size);
  CHECK(cJSON_GetArraySize(model_field(root, "vocab")) == 1500, "model.vocab has %d entries",
        cJSON_GetArraySize(model_field(root, "vocab")));
  CHECK(cJSON_GetArraySize(model_field(root, "merges")) == stats.num_merges, "merges %d vs stats %d",
        cJSON_GetArraySize(model_field(root, "merges")), stats.num_merges);
  CHECK(stats.input_bytes == (int64_t)len, "input bytes %lld", (long long)stats.input_bytes);
  check_fixed_ids(root);
  check_merges_inside_pieces(root, stats.alphabet_size, opt.max_token_bytes);
  const char *model_type = cJSON_GetStringValue(model_field(root, "type"));
  CHECK(model_type && !strcmp(model_type, "BPE"), "model.type");
  CHECK(cJSON_IsTrue(model_field(root, "byte_fallback")), "byte_fallback");

  check_roundtrip(json, text, len);

  // Determinism: again in memory, and through a file.
  BpeTrainStats stats2;
  char *again = train_text(text, len, &opt, &stats2, &err);
  CHECK(again && !strcmp(again, json), "second run differs");
  const char *path = "test_bpe_train_corpus.txt", *out = "test_bpe_train_tokenizer.json";
  CHECK(file_write_atomic(path, text, len, &err) == 0, "write corpus: %s", err.message);
  CHECK(bpe_train_files(&path, 1, &opt, out, &err) == 0, "train from file: %s", err.message);
  size_t out_len = 0;
  char *written = file_read_all(out, (size_t)1 << 28, &out_len, &err);
  CHECK(written && out_len == strlen(json) && !memcmp(written, json, out_len), "file output differs");
  // Two files are one corpus: halves at a newline train the same tokenizer.
  char *cut = memchr(text + len / 2, '\n', len - len / 2);
  if (cut) {
    size_t first = (size_t)(cut - text) + 1;
    const char *paths[2] = {"test_bpe_train_a.txt", "test_bpe_train_b.txt"};
    CHECK(file_write_atomic(paths[0], text, first, &err) == 0 &&
              file_write_atomic(paths[1], text + first, len - first, &err) == 0,
          "write halves");
    CHECK(bpe_train_files(paths, 2, &opt, out, &err) == 0, "train from two files: %s", err.message);
    free(written);
    written = file_read_all(out, (size_t)1 << 28, &out_len, &err);
    CHECK(written && out_len == strlen(json) && !memcmp(written, json, out_len), "two-file output differs");
    remove(paths[0]);
    remove(paths[1]);
  }
  remove(path);
  remove(out);
  free(written);
  free(again);
  cJSON_Delete(root);
  free(json);
  free(text);
}

// The rarest characters beyond the coverage are left to byte fallback.
static void test_character_coverage(void) {
  char text[20100];
  size_t len = 0;
  for (int i = 0; i < 2000; i++) len += (size_t)sprintf(text + len, "%s", i % 2 ? "abcd " : "bcda ");
  memcpy(text + len, "\xC3\xA9", 2);  // one "é" in ~10,000 characters
  len += 2;
  BpeTrainOptions opt = options(400);
  FimiError err = {0};
  char *json = train_text(text, len, &opt, NULL, &err);
  cJSON *root = cJSON_Parse(json ? json : "");
  CHECK(root && vocab_id(root, "\xC3\xA9") == -1 && vocab_id(root, "a") > 0, "rare char kept at 0.9995 coverage");
  cJSON_Delete(root);
  free(json);
  opt.character_coverage = 1.0;
  json = train_text(text, len, &opt, NULL, &err);
  root = cJSON_Parse(json ? json : "");
  CHECK(root && vocab_id(root, "\xC3\xA9") >= BPE_NUM_RESERVED, "rare char missing at coverage 1");
  cJSON_Delete(root);
  free(json);
}

// Special-token text is cut out before counting; U+0000 gets no token.
static void test_specials_and_nul(void) {
  char text[8192];
  size_t len = 0;
  for (int i = 0; i < 100; i++) {
    len += (size_t)sprintf(text + len, "<tool_call>xy</tool_call>");
    text[len++] = '\0';
    text[len++] = '\0';
  }
  BpeTrainOptions opt = options(1000);
  opt.character_coverage = 1.0;
  BpeTrainStats stats;
  FimiError err = {0};
  char *json = train_text(text, len, &opt, &stats, &err);
  CHECK(json != NULL, "train failed: %s", err.message);
  cJSON *root = cJSON_Parse(json ? json : "");
  CHECK(root && vocab_id(root, "xy") >= 0 && vocab_id(root, "t") == -1 && vocab_id(root, "<") == -1,
        "special-token text was trained on");
  CHECK(stats.alphabet_size == 2, "alphabet %d (expected x, y; not NUL)", stats.alphabet_size);
  cJSON_Delete(root);
  free(json);
}

static void expect_error(const char *text, size_t len, const BpeTrainOptions *opt, const char *needle) {
  FimiError err = {0};
  char *json = train_text(text, len, opt, NULL, &err);
  CHECK(json == NULL && strstr(err.message, needle), "expected an error containing \"%s\", got \"%s\"", needle,
        json ? "(success)" : err.message);
  free(json);
}

static void test_bad_input(void) {
  BpeTrainOptions opt = options(1000);
  expect_error("ok \xC3(", 5, &opt, "corpus: invalid UTF-8 at byte offset 3");
  expect_error("abc\xC0\x80", 5, &opt, "byte offset 3");        // overlong NUL
  expect_error("a\xED\xA0\x80", 4, &opt, "byte offset 1");       // UTF-16 surrogate
  expect_error("ab\xF4\x90\x80\x80", 6, &opt, "byte offset 2");  // above U+10FFFF
  expect_error("abc\xE2\x96", 5, &opt, "byte offset 3");         // truncated at the end
  BpeTrainOptions small = options(BPE_NUM_RESERVED - 1);
  expect_error("abc", 3, &small, "vocab_size 263");
  BpeTrainOptions freq = options(1000);
  freq.min_frequency = 1;
  expect_error("abc", 3, &freq, "min_frequency");
  BpeTrainOptions cov = options(1000);
  cov.character_coverage = 0;
  expect_error("abc", 3, &cov, "character_coverage");

  FimiError err = {0};
  const char *missing = "/nonexistent/bpe_corpus.txt";
  CHECK(bpe_train_files(&missing, 1, &opt, "test_bpe_train_never.json", &err) != 0 &&
            strstr(err.message, missing),
        "missing file: \"%s\"", err.message);
  // A bad file is named in the error.
  const char *bad = "test_bpe_train_bad.txt";
  CHECK(file_write_atomic(bad, "hello\n\xFF", 7, &err) == 0, "write");
  fimi_error_clear(&err);
  CHECK(bpe_train_files(&bad, 1, &opt, "test_bpe_train_never.json", &err) != 0 &&
            strstr(err.message, "test_bpe_train_bad.txt: invalid UTF-8 at byte offset 6"),
        "bad file: \"%s\"", err.message);
  remove(bad);
  FILE *f = fopen("test_bpe_train_never.json", "rb");
  CHECK(f == NULL, "output written despite an error");
  if (f) fclose(f);
}

// Merged tokens never exceed max_token_bytes, even when longer pairs are
// the most frequent.
static void test_max_token_bytes(void) {
  char text[16000];
  size_t len = 0;
  for (int i = 0; i < 1000; i++) len += (size_t)sprintf(text + len, " abcdefgh");
  BpeTrainOptions opt = options(1000);
  opt.max_token_bytes = 4;
  BpeTrainStats stats;
  FimiError err = {0};
  char *json = train_text(text, len, &opt, &stats, &err);
  cJSON *root = cJSON_Parse(json ? json : "");
  CHECK(root != NULL, "train failed: %s", err.message);
  if (root) check_merges_inside_pieces(root, stats.alphabet_size, 4);
  CHECK(root && vocab_id(root, "abcd") >= 0 && vocab_id(root, "abcde") == -1, "4-byte cap not applied");
  cJSON_Delete(root);
  free(json);
}

// --digits runs: "▁NVC11400\n" is the pieces ▁NVC, 11400 and \n, so with
// enough repeats 11400 becomes one token and no token joins a digit to a
// letter, a space mark or a newline; the file says individual_digits false.
static void test_digit_runs(void) {
  char text[16000];
  size_t len = 0;
  for (int i = 0; i < 200; i++) len += (size_t)sprintf(text + len, "id NVC11400\n");
  BpeTrainOptions opt = options(400);
  opt.digit_runs = 1;
  BpeTrainStats stats;
  FimiError err = {0};
  char *json = train_text(text, len, &opt, &stats, &err);
  cJSON *root = cJSON_Parse(json ? json : "");
  CHECK(root != NULL, "train failed: %s", err.message);
  char nvc[32];
  snprintf(nvc, sizeof nvc, "%sNVC", MARK);
  CHECK(root && vocab_id(root, "11400") >= 0 && vocab_id(root, nvc) >= 0, "11400 and ▁NVC not learned");
  int mixed = 0;
  cJSON *vocab = root ? model_field(root, "vocab") : NULL;
  for (cJSON *v = vocab ? vocab->child : NULL; v; v = v->next) {
    const char *t = v->string;
    int digits = 0, others = 0;
    for (const char *c = t; *c; c++) {
      if (*c >= '0' && *c <= '9') digits++;
      else others++;
    }
    if (digits && others && t[0] != '<') mixed++;
  }
  CHECK(root && mixed == 0, "%d tokens join digits to other characters", mixed);
  cJSON *pre = root ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                          cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), "pretokenizers"), 1) : NULL;
  CHECK(pre && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(pre, "individual_digits")), "individual_digits not false");
  cJSON_Delete(root);
  free(json);
  // The default keeps every digit a token of its own.
  opt.digit_runs = 0;
  json = train_text(text, len, &opt, &stats, &err);
  root = cJSON_Parse(json ? json : "");
  CHECK(root && vocab_id(root, "11400") == -1 && vocab_id(root, "11") == -1, "digits merged by default");
  cJSON_Delete(root);
  free(json);
}

int main(void) {
  test_hand_example();
  test_digit_runs();
  test_synthetic_corpus();
  test_character_coverage();
  test_specials_and_nul();
  test_bad_input();
  test_max_token_bytes();
  TEST_MAIN_END();
}
