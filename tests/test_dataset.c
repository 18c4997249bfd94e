// tests/test_dataset.c: HDF5 datasets (data/dataset*.c). Tokenizes JSONL
// rows of every kind with a tokenizer trained here on
// tests/interop/tokenizer_corpus.txt and compares the stored ids and masks
// with an independent rendering through data/chat.h and tokenizer_encode;
// checks truncate/drop counts, malformed-row errors (line numbers, field
// names, --skip-bad counts, nothing left behind), the reference log-prob
// writer, the reader's rejection of damaged files (each damage made with the
// HDF5 API), and the loader: per-epoch shuffles, disjoint covering shards,
// cursor resume == uninterrupted iteration.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "core/fileio.h"
#include "core/json.h"
#include "data/bpe_train.h"
#include "data/chat.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "tests/test_util.h"

static char dir[256];
static char tok_path[512];
static Tokenizer *tok;

static const char *path_in(const char *name) {
  static char buf[4][600];
  static int next = 0;
  char *p = buf[next++ % 4];
  snprintf(p, 600, "%s/%s", dir, name);
  return p;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  fputs(text, f);
  fclose(f);
}

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

// ---- independent references -----------------------------------------------

typedef struct Ref {
  TokenIds ids;
  uint8_t mask[8192];
} Ref;

// ids and mask of a whole conversation (messages JSON text) via data/chat.h.
static void render(const char *messages_json, const char *tools_json, Ref *out) {
  FimiError err = {0};
  cJSON *m = cJSON_Parse(messages_json);
  cJSON *t = tools_json ? cJSON_Parse(tools_json) : NULL;
  ChatBuilder b;
  chat_init(&b, tok, &err);
  int rc = chat_render_messages(&b, m, t, "ref", &err);
  CHECK(rc == 0, "reference render: %s", err.message);
  out->ids.len = 0;
  token_ids_append(&out->ids, b.ids.data, b.ids.len, &err);
  memcpy(out->mask, b.mask, b.ids.len);
  chat_free(&b);
  cJSON_Delete(m);
  cJSON_Delete(t);
}

// ids of messages followed by the generation prompt <start_of_turn>model\n.
static void render_prompt(const char *messages_json, TokenIds *out) {
  FimiError err = {0};
  cJSON *m = cJSON_Parse(messages_json);
  ChatBuilder b;
  chat_init(&b, tok, &err);
  CHECK(chat_render_messages(&b, m, NULL, "ref", &err) == 0 && chat_append_generation_prompt(&b, &err) == 0,
        "reference prompt: %s", err.message);
  out->len = 0;
  token_ids_append(out, b.ids.data, b.ids.len, &err);
  chat_free(&b);
  cJSON_Delete(m);
}

static void encode(const char *text, TokenIds *out) {
  FimiError err = {0};
  CHECK(tokenizer_encode(tok, text, strlen(text), 0, out, &err) == 0, "encode: %s", err.message);
}

static int same_ids(const int32_t *a, const int32_t *b, int64_t n) { return n == 0 || !memcmp(a, b, (size_t)n * 4); }

static int64_t ones(const uint8_t *m, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; i++) c += m[i];
  return c;
}

static int tokenize(const char *jsonl, const char *out_name, DatasetKind kind, int64_t max_length,
                    DatasetOverlong overlong, int skip_bad, DatasetTokenizeStats *stats, FimiError *err) {
  write_text(path_in("in.jsonl"), jsonl);
  DatasetTokenizeOptions opt;
  dataset_default_options(&opt);
  opt.kind = kind;
  opt.max_length = max_length;
  opt.overlong = overlong;
  opt.skip_bad = skip_bad;
  fimi_error_clear(err);
  return dataset_tokenize_jsonl(path_in("in.jsonl"), tok_path, path_in(out_name), &opt, stats, err);
}

// ---- SFT ----------------------------------------------------------------------

static const char *CONV_A =
    "[{\"role\":\"system\",\"content\":\"You are Navadhan Bank's agent.\"},"
    "{\"role\":\"user\",\"content\":\"Balance of 1234?\"},"
    "{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":[{\"type\":\"function\",\"function\":"
    "{\"name\":\"get_balance\",\"arguments\":{\"account\":\"1234\"}}}]},"
    "{\"role\":\"tool\",\"content\":\"{\\\"name\\\":\\\"get_balance\\\",\\\"result\\\":500}\"},"
    "{\"role\":\"assistant\",\"content\":\"It is \u20b9500.\"}]";
static const char *CONV_B = "[{\"role\":\"user\",\"content\":\"Hi <end_of_turn> there\"},{\"role\":\"model\",\"content\":\"Hello\"},"
                            "{\"role\":\"user\",\"content\":\"FD?\"},{\"role\":\"assistant\",\"content\":\"World\"}]";
static const char *TOOLS = "[{\"name\":\"get_balance\",\"description\":\"Balance\",\"parameters\":{\"type\":\"object\"}}]";

static void test_sft_messages(void) {
  char jsonl[8192];
  snprintf(jsonl, sizeof jsonl, "{\"messages\":%s}\n\n{\"messages\":%s,\"tools\":%s}\n", CONV_A, CONV_B, TOOLS);
  DatasetTokenizeStats s;
  FimiError err;
  CHECK(tokenize(jsonl, "sft.h5", DATASET_SFT, 0, DATASET_OVERLONG_TRUNCATE, 0, &s, &err) == 0, "%s", err.message);
  CHECK(s.lines == 3 && s.rows_in == 2 && s.rows == 2, "counts %lld %lld %lld", (long long)s.lines,
        (long long)s.rows_in, (long long)s.rows);
  Dataset ds;
  CHECK(dataset_open(path_in("sft.h5"), tokenizer_vocab_size(tok), &ds, &err) == 0, "%s", err.message);
  CHECK(ds.kind == DATASET_SFT && ds.rows == 2 && ds.num_fields == 1 && !strcmp(ds.fields[0].name, "seq"), "layout");
  CHECK(ds.vocab_size == tokenizer_vocab_size(tok), "vocab");
  const char *convs[2] = {CONV_A, CONV_B};
  const char *tools[2] = {NULL, TOOLS};
  Ref ref = {0};
  int64_t total = 0, loss = 0;
  for (int r = 0; r < 2; r++) {
    const int32_t *ids;
    const uint8_t *mask;
    int64_t len;
    CHECK(dataset_row(&ds, 0, r, &ids, &mask, &len, &err) == 0, "%s", err.message);
    render(convs[r], tools[r], &ref);
    CHECK(len == (int64_t)ref.ids.len && same_ids(ids, ref.ids.data, len), "row %d ids differ from chat render", r);
    CHECK(len == (int64_t)ref.ids.len && !memcmp(mask, ref.mask, (size_t)len), "row %d mask differs", r);
    total += len;
    loss += ones(mask, len);
  }
  CHECK(s.tokens == total && s.loss_tokens == loss, "stats tokens %lld/%lld", (long long)s.tokens, (long long)s.loss_tokens);
  // The masked tokens of CONV_B decode to exactly the two model replies and their <end_of_turn>s.
  const int32_t *ids;
  const uint8_t *mask;
  int64_t len;
  dataset_row(&ds, 0, 1, &ids, &mask, &len, &err);
  TokenIds masked = {0};
  for (int64_t i = 0; i < len; i++)
    if (mask[i]) token_ids_push(&masked, ids[i], &err);
  char *text = NULL;
  size_t text_len;
  tokenizer_decode(tok, masked.data, masked.len, 0, &text, &text_len, &err);
  CHECK(text && !strcmp(text, "Hello<end_of_turn>World<end_of_turn>"), "masked text \"%s\"", text ? text : "");
  free(text);
  token_ids_free(&masked);
  token_ids_free(&ref.ids);
  dataset_close(&ds);
}

// --loss all: the same ids; every position after <bos> a target, for message
// rows and prompt/completion rows alike; DPO refuses it.
static void test_sft_loss_all(void) {
  char jsonl[8192];
  snprintf(jsonl, sizeof jsonl, "{\"messages\":%s}\n{\"prompt\":\"FD rates?\",\"completion\":\"7%%.\"}\n", CONV_A);
  DatasetTokenizeOptions opt;
  dataset_default_options(&opt);
  opt.loss_all = 1;
  write_text(path_in("in.jsonl"), jsonl);
  DatasetTokenizeStats s;
  FimiError err = {0};
  CHECK(dataset_tokenize_jsonl(path_in("in.jsonl"), tok_path, path_in("all.h5"), &opt, &s, &err) == 0, "%s",
        err.message);
  CHECK(s.rows == 2 && s.loss_tokens == s.tokens - 2, "loss tokens %lld of %lld (all but the two <bos>)",
        (long long)s.loss_tokens, (long long)s.tokens);
  Dataset ds;
  CHECK(dataset_open(path_in("all.h5"), tokenizer_vocab_size(tok), &ds, &err) == 0, "%s", err.message);
  Ref ref = {0};
  render(CONV_A, NULL, &ref);
  const int32_t *ids;
  const uint8_t *mask;
  int64_t len;
  CHECK(dataset_row(&ds, 0, 0, &ids, &mask, &len, &err) == 0, "%s", err.message);
  CHECK(len == (int64_t)ref.ids.len && same_ids(ids, ref.ids.data, len), "ids differ from the model-only rendering");
  CHECK(len > 1 && mask[0] == 0 && ones(mask, len) == len - 1, "mask: <bos> 0, the rest 1");
  token_ids_free(&ref.ids);
  dataset_close(&ds);
  opt.kind = DATASET_DPO;
  CHECK(dataset_tokenize_jsonl(path_in("in.jsonl"), tok_path, path_in("dpo_all.h5"), &opt, &s, &err) != 0 &&
            strstr(err.message, "SFT rows only") && !file_exists(path_in("dpo_all.h5")),
        "DPO with a loss on every token accepted (%s)", err.message);
}

static void test_sft_prompt_completion(void) {
  const char *prompt = "[{\"role\":\"user\",\"content\":\"FD rates for 1 year?\"}]";
  const char *completion = "[{\"role\":\"assistant\",\"content\":\"7.1% p.a.\"}]";
  const char *whole = "[{\"role\":\"user\",\"content\":\"FD rates for 1 year?\"},{\"role\":\"assistant\",\"content\":\"7.1% p.a.\"}]";
  char jsonl[4096];
  snprintf(jsonl, sizeof jsonl,
           "{\"prompt\":\"Namaste\",\"completion\":\" ji, kaise madad karun?\"}\n{\"prompt\":%s,\"completion\":%s}\n",
           prompt, completion);
  FimiError err;
  DatasetTokenizeStats s;
  CHECK(tokenize(jsonl, "pc.h5", DATASET_SFT, 0, DATASET_OVERLONG_TRUNCATE, 0, &s, &err) == 0, "%s", err.message);
  Dataset ds;
  CHECK(dataset_open(path_in("pc.h5"), 0, &ds, &err) == 0, "%s", err.message);
  const TokenizerSpecials *sp = tokenizer_specials(tok);
  // Plain strings: <bos> prompt (mask 0), completion <eos> (mask 1).
  TokenIds p = {0}, c = {0};
  encode("Namaste", &p);
  encode(" ji, kaise madad karun?", &c);
  const int32_t *ids;
  const uint8_t *mask;
  int64_t len;
  dataset_row(&ds, 0, 0, &ids, &mask, &len, &err);
  int64_t np = 1 + (int64_t)p.len, nc = (int64_t)c.len + 1;
  CHECK(len == np + nc, "plain length %lld vs %lld", (long long)len, (long long)(np + nc));
  if (len == np + nc) {
    CHECK(ids[0] == sp->bos && same_ids(ids + 1, p.data, (int64_t)p.len), "plain prompt ids");
    CHECK(same_ids(ids + np, c.data, (int64_t)c.len) && ids[len - 1] == sp->eos, "plain completion ids + <eos>");
    CHECK(ones(mask, np) == 0 && ones(mask + np, nc) == nc, "plain mask: 0 on prompt, 1 on completion");
  }
  // Messages: ids == the whole conversation; mask 0 through the generation prompt, chat mask after.
  Ref ref = {0};
  TokenIds gp = {0};
  render(whole, NULL, &ref);
  render_prompt(prompt, &gp);
  dataset_row(&ds, 0, 1, &ids, &mask, &len, &err);
  CHECK(len == (int64_t)ref.ids.len && same_ids(ids, ref.ids.data, len), "conversational ids");
  CHECK(len > (int64_t)gp.len && same_ids(ids, gp.data, (int64_t)gp.len), "prompt part ends with the generation prompt");
  if (len == (int64_t)ref.ids.len && len > (int64_t)gp.len) {
    CHECK(ones(mask, (int64_t)gp.len) == 0, "no loss on the prompt");
    CHECK(!memcmp(mask + gp.len, ref.mask + gp.len, (size_t)(len - (int64_t)gp.len)), "completion mask");
    CHECK(ones(mask, len) > 0, "completion has loss tokens");
  }
  token_ids_free(&p);
  token_ids_free(&c);
  token_ids_free(&gp);
  token_ids_free(&ref.ids);
  dataset_close(&ds);
}

// ---- DPO ----------------------------------------------------------------------

static void check_pair(const Dataset *ds, int64_t row, const char *prompt_json, const char *chosen_whole,
                       const char *rejected_whole) {
  FimiError err;
  TokenIds gp = {0};
  render_prompt(prompt_json, &gp);
  const char *wholes[2] = {chosen_whole, rejected_whole};
  const int32_t *pids;
  const uint8_t *pmask;
  int64_t plen;
  dataset_row(ds, 0, row, &pids, &pmask, &plen, &err);
  CHECK(plen == (int64_t)gp.len && same_ids(pids, gp.data, plen), "row %lld: prompt == prompt + generation prompt",
        (long long)row);
  CHECK(ones(pmask, plen) == 0, "row %lld: prompt mask all 0", (long long)row);
  for (int k = 0; k < 2; k++) {
    Ref ref = {0};
    render(wholes[k], NULL, &ref);
    const int32_t *ids;
    const uint8_t *mask;
    int64_t len;
    dataset_row(ds, 1 + k, row, &ids, &mask, &len, &err);
    CHECK(plen + len == (int64_t)ref.ids.len, "row %lld field %d: prompt + response length", (long long)row, k);
    if (plen + len == (int64_t)ref.ids.len) {
      CHECK(same_ids(pids, ref.ids.data, plen) && same_ids(ids, ref.ids.data + plen, len),
            "row %lld field %d: prompt + response == the whole conversation", (long long)row, k);
      CHECK(!memcmp(mask, ref.mask + plen, (size_t)len) && ones(mask, len) > 0, "row %lld field %d: response mask",
            (long long)row, k);
    }
    token_ids_free(&ref.ids);
  }
  token_ids_free(&gp);
}

static void test_dpo(void) {
  const char *prompt = "[{\"role\":\"user\",\"content\":\"Block my card\"}]";
  const char *chosen = "[{\"role\":\"assistant\",\"content\":\"Blocked. Anything else?\"}]";
  const char *rejected = "[{\"role\":\"assistant\",\"content\":\"No.\"}]";
  const char *cw = "[{\"role\":\"user\",\"content\":\"Block my card\"},{\"role\":\"assistant\",\"content\":\"Blocked. Anything else?\"}]";
  const char *rw = "[{\"role\":\"user\",\"content\":\"Block my card\"},{\"role\":\"assistant\",\"content\":\"No.\"}]";
  char jsonl[8192];
  snprintf(jsonl, sizeof jsonl,
           "{\"prompt\":%s,\"chosen\":%s,\"rejected\":%s}\n"
           "{\"chosen\":%s,\"rejected\":%s}\n"
           "{\"prompt\":\"Q: 2+2?\",\"chosen\":\" 4\",\"rejected\":\" 5\"}\n",
           prompt, chosen, rejected, cw, rw);
  FimiError err;
  DatasetTokenizeStats s;
  CHECK(tokenize(jsonl, "dpo.h5", DATASET_DPO, 0, DATASET_OVERLONG_TRUNCATE, 0, &s, &err) == 0, "%s", err.message);
  Dataset ds;
  CHECK(dataset_open(path_in("dpo.h5"), 0, &ds, &err) == 0, "%s", err.message);
  CHECK(ds.kind == DATASET_DPO && ds.rows == 3 && ds.num_fields == 3, "dpo layout");
  CHECK(dataset_field_index(&ds, "chosen") == 1 && dataset_field_index(&ds, "rejected") == 2, "field names");
  check_pair(&ds, 0, prompt, cw, rw);
  check_pair(&ds, 1, prompt, cw, rw);  // implicit prompt: the common prefix
  // Plain strings: prompt <bos>..., responses end with <eos>, all response tokens have loss.
  const int32_t *ids;
  const uint8_t *mask;
  int64_t len;
  TokenIds four = {0};
  encode(" 4", &four);
  dataset_row(&ds, 1, 2, &ids, &mask, &len, &err);
  CHECK(len == (int64_t)four.len + 1 && same_ids(ids, four.data, (int64_t)four.len) &&
            ids[len - 1] == tokenizer_specials(tok)->eos && ones(mask, len) == len,
        "plain chosen");
  dataset_row(&ds, 0, 2, &ids, &mask, &len, &err);
  CHECK(len > 1 && ids[0] == tokenizer_specials(tok)->bos && ones(mask, len) == 0, "plain prompt");
  token_ids_free(&four);
  dataset_close(&ds);
}

// ---- overlong rows --------------------------------------------------------------

static void test_overlong(void) {
  char jsonl[8192];
  snprintf(jsonl, sizeof jsonl, "{\"messages\":%s}\n{\"prompt\":\"a\",\"completion\":\"b\"}\n{\"messages\":%s}\n", CONV_A,
           CONV_B);
  Ref a = {0}, b = {0};
  render(CONV_A, NULL, &a);
  render(CONV_B, NULL, &b);
  int64_t max = 20;
  CHECK((int64_t)a.ids.len > max && (int64_t)b.ids.len > max, "test rows are longer than %lld", (long long)max);
  FimiError err;
  DatasetTokenizeStats s;
  CHECK(tokenize(jsonl, "trunc.h5", DATASET_SFT, max, DATASET_OVERLONG_TRUNCATE, 0, &s, &err) == 0, "%s", err.message);
  CHECK(s.rows == 3 && s.truncated == 2 && s.dropped == 0 && s.max_row_tokens == max, "truncate counts %lld %lld %lld",
        (long long)s.rows, (long long)s.truncated, (long long)s.dropped);
  Dataset ds;
  CHECK(dataset_open(path_in("trunc.h5"), 0, &ds, &err) == 0, "%s", err.message);
  const int32_t *ids;
  const uint8_t *mask;
  int64_t len;
  dataset_row(&ds, 0, 0, &ids, &mask, &len, &err);
  CHECK(len == max && same_ids(ids, a.ids.data, max) && !memcmp(mask, a.mask, (size_t)max), "truncation keeps the start");
  CHECK(ds.truncated == 2 && ds.max_length == max && !strcmp(ds.overlong, "truncate"), "attributes record truncation");
  dataset_close(&ds);
  CHECK(tokenize(jsonl, "drop.h5", DATASET_SFT, max, DATASET_OVERLONG_DROP, 0, &s, &err) == 0, "%s", err.message);
  CHECK(s.rows == 1 && s.truncated == 0 && s.dropped == 2, "drop counts %lld %lld", (long long)s.rows, (long long)s.dropped);
  CHECK(dataset_open(path_in("drop.h5"), 0, &ds, &err) == 0 && ds.rows == 1 && ds.dropped == 2, "drop file");
  dataset_close(&ds);
  // DPO: the responses are cut to max - prompt; a prompt that alone fills max drops the pair.
  const char *dpo = "{\"prompt\":\"Q\",\"chosen\":\"a long long long chosen answer here\",\"rejected\":\"no\"}\n"
                    "{\"prompt\":\"a very long prompt that fills every token we allow\",\"chosen\":\"x\",\"rejected\":\"y\"}\n";
  TokenIds q = {0};
  encode("Q", &q);
  int64_t pmax = 6, plen = 1 + (int64_t)q.len;
  CHECK(tokenize(dpo, "dpo_trunc.h5", DATASET_DPO, pmax, DATASET_OVERLONG_TRUNCATE, 0, &s, &err) == 0, "%s", err.message);
  CHECK(s.rows == 1 && s.truncated == 1 && s.dropped == 1, "dpo truncate counts %lld %lld %lld", (long long)s.rows,
        (long long)s.truncated, (long long)s.dropped);
  CHECK(dataset_open(path_in("dpo_trunc.h5"), 0, &ds, &err) == 0, "%s", err.message);
  int64_t clen = 0, rlen = 0, pl = 0;
  dataset_row(&ds, 0, 0, NULL, NULL, &pl, &err);
  dataset_row(&ds, 1, 0, NULL, NULL, &clen, &err);
  dataset_row(&ds, 2, 0, NULL, NULL, &rlen, &err);
  TokenIds no = {0};
  encode("no", &no);
  CHECK(pl == plen && clen == pmax - plen && rlen == (int64_t)no.len + 1, "dpo lengths %lld %lld %lld", (long long)pl,
        (long long)clen, (long long)rlen);
  dataset_close(&ds);
  token_ids_free(&q);
  token_ids_free(&no);
  token_ids_free(&a.ids);
  token_ids_free(&b.ids);
}

// ---- malformed rows ---------------------------------------------------------------

static void expect_row_error(const char *jsonl, DatasetKind kind, const char *want1, const char *want2) {
  FimiError err;
  DatasetTokenizeStats s;
  int rc = tokenize(jsonl, "bad.h5", kind, 0, DATASET_OVERLONG_TRUNCATE, 0, &s, &err);
  CHECK(rc != 0, "malformed input accepted: %s", jsonl);
  CHECK(strstr(err.message, want1) && (!want2 || strstr(err.message, want2)), "error \"%s\" lacks \"%s\"/\"%s\"",
        err.message, want1, want2 ? want2 : "");
  CHECK(!file_exists(path_in("bad.h5")) && !file_exists(path_in("bad.h5.tmp")), "a failed run left a file");
}

static void test_malformed(void) {
  const char *good = "{\"prompt\":\"a\",\"completion\":\"b\"}\n";
  char buf[4096];
  snprintf(buf, sizeof buf, "%s%s{\"prompt\": \"a\", \"completion\": \n", good, good);
  expect_row_error(buf, DATASET_SFT, "in.jsonl line 3", NULL);
  snprintf(buf, sizeof buf, "%s\n{\"prompt\":\"a\"}\n", good);
  expect_row_error(buf, DATASET_SFT, "line 3", "completion");
  snprintf(buf, sizeof buf, "%s[1,2]\n", good);
  expect_row_error(buf, DATASET_SFT, "line 2", "object");
  expect_row_error("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"robot\",\"content\":\"y\"}]}\n",
                   DATASET_SFT, "line 1", "messages[1].role");
  expect_row_error("{\"prompt\":\"a\",\"completion\":[{\"role\":\"assistant\",\"content\":\"b\"}]}\n", DATASET_SFT,
                   "line 1", "both be strings");
  expect_row_error("{\"prompt\":\"a\",\"chosen\":\"b\"}\n", DATASET_DPO, "line 1", "rejected");
  expect_row_error("{\"prompt\":[{\"role\":\"user\",\"content\":\"a\"}],\"chosen\":[{\"role\":\"user\",\"content\":\"b\"}],"
                   "\"rejected\":[{\"role\":\"assistant\",\"content\":\"c\"}]}\n",
                   DATASET_DPO, "line 1", "\"chosen\"[0].role");
  expect_row_error("{\"chosen\":[{\"role\":\"assistant\",\"content\":\"b\"}],\"rejected\":[{\"role\":\"assistant\",\"content\":\"c\"}]}\n",
                   DATASET_DPO, "line 1", "share no leading messages");
  expect_row_error("{\"prompt\":\"a\xff\",\"completion\":\"b\"}\n", DATASET_SFT, "line 1", NULL);
  // --skip-bad: bad rows are counted, good ones kept, the first error kept.
  snprintf(buf, sizeof buf, "%snot json\n%s{\"prompt\":1,\"completion\":\"b\"}\n%s", good, good, good);
  FimiError err;
  DatasetTokenizeStats s;
  CHECK(tokenize(buf, "skip.h5", DATASET_SFT, 0, DATASET_OVERLONG_TRUNCATE, 1, &s, &err) == 0, "%s", err.message);
  CHECK(s.rows == 3 && s.skipped == 2 && s.rows_in == 5, "skip counts rows %lld skipped %lld", (long long)s.rows,
        (long long)s.skipped);
  CHECK(strstr(s.first_skip, "line 2") != NULL, "first skip names line 2: %s", s.first_skip);
  Dataset ds;
  CHECK(dataset_open(path_in("skip.h5"), 0, &ds, &err) == 0 && ds.rows == 3 && ds.skipped == 2, "skip file");
  dataset_close(&ds);
  CHECK(tokenize(good, "x.h5", DATASET_SFT, 0, DATASET_OVERLONG_TRUNCATE, 0, &s, &err) == 0, "good row");
  // A missing input leaves nothing behind either.
  DatasetTokenizeOptions opt;
  dataset_default_options(&opt);
  CHECK(dataset_tokenize_jsonl(path_in("nope.jsonl"), tok_path, path_in("nope.h5"), &opt, NULL, &err) != 0 &&
            strstr(err.message, "nope.jsonl") && !file_exists(path_in("nope.h5")),
        "missing input: %s", err.message);
}

// ---- reference log-probs ------------------------------------------------------------

static void test_ref_logp(void) {
  float v[3] = {-12.5f, -3.25f, -0.5f}, w[3] = {-1, -2, -3};
  FimiError err;
  const char *p = path_in("dpo.h5");
  CHECK(dataset_write_ref_logp(p, "ref_logp_chosen", v, 3, &err) == 0, "%s", err.message);
  CHECK(dataset_write_ref_logp(p, "ref_logp_rejected", w, 3, &err) == 0, "%s", err.message);
  CHECK(dataset_write_ref_logp(p, "ref_logp_chosen", w, 3, &err) == 0, "overwrite: %s", err.message);
  CHECK(dataset_write_ref_logp(p, "ref_logp_chosen", v, 2, &err) != 0 && strstr(err.message, "3 rows"), "row count: %s",
        err.message);
  CHECK(dataset_write_ref_logp(p, "chosen", v, 3, &err) != 0, "bad name accepted");
  float nan_v[3] = {0, 0, 0};
  nan_v[1] = nanf("");
  CHECK(dataset_write_ref_logp(p, "ref_logp_x", nan_v, 3, &err) != 0 && strstr(err.message, "[1]"), "NaN: %s",
        err.message);
  CHECK(!file_exists(path_in("dpo.h5.tmp")), "tmp file left behind");
  Dataset ds;
  CHECK(dataset_open(p, 0, &ds, &err) == 0, "%s", err.message);
  const float *c = dataset_ref(&ds, "ref_logp_chosen"), *r = dataset_ref(&ds, "ref_logp_rejected");
  CHECK(ds.num_ref == 2 && c && r, "two ref datasets");
  if (c && r) CHECK(!memcmp(c, w, sizeof w) && !memcmp(r, w, sizeof w), "ref values (overwritten chosen)");
  CHECK(dataset_ref(&ds, "ref_logp_x") == NULL, "failed write left no dataset");
  dataset_close(&ds);
}

// ---- damaged files --------------------------------------------------------------------

static void copy(const char *from, const char *to) {
  size_t n;
  FimiError err;
  char *data = file_read_all(from, 1 << 26, &n, &err);
  FILE *f = fopen(to, "wb");
  fwrite(data, 1, n, f);
  fclose(f);
  free(data);
}

// Replaces dataset `name` in a copy of `good` with a 1-D (or 2-D when cols > 0) array of `type`.
static void damage_replace(const char *good, const char *bad, const char *name, hid_t type, const void *data,
                           hsize_t n, hsize_t cols) {
  copy(good, bad);
  hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(f, name, H5P_DEFAULT);
  hsize_t dims[2] = {n, cols};
  hid_t space = H5Screate_simple(cols ? 2 : 1, dims, NULL);
  hid_t ds = H5Dcreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (n) H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(f);
}

static void expect_open_error(const char *bad, const char *want1, const char *want2) {
  Dataset ds;
  FimiError err = {0};
  int rc = dataset_open(bad, 0, &ds, &err);
  CHECK(rc != 0, "damaged file accepted (%s)", want1);
  if (rc == 0) dataset_close(&ds);
  CHECK(strstr(err.message, want1) && (!want2 || strstr(err.message, want2)), "error \"%s\" lacks \"%s\"/\"%s\"",
        err.message, want1, want2 ? want2 : "");
}

static void test_damaged(void) {
  const char *good = path_in("sft.h5"), *bad = path_in("damaged.h5");
  Dataset ds;
  FimiError err;
  CHECK(dataset_open(good, 0, &ds, &err) == 0, "%s", err.message);
  int64_t rows = ds.rows, n = ds.fields[0].offsets[rows];
  int64_t offsets[3];
  memcpy(offsets, ds.fields[0].offsets, sizeof offsets);
  int32_t *tokens = malloc((size_t)n * 4);
  memcpy(tokens, ds.fields[0].tokens, (size_t)n * 4);
  uint8_t *mask = malloc((size_t)n);
  memcpy(mask, ds.fields[0].loss_mask, (size_t)n);
  dataset_close(&ds);
  CHECK(rows == 2, "sft.h5 has 2 rows");
  CHECK(dataset_open(good, 17, &ds, &err) != 0 && strstr(err.message, "vocab_size"), "vocab mismatch: %s", err.message);

  int64_t bad_off[3] = {0, offsets[2], offsets[1]};  // decreasing
  damage_replace(good, bad, "seq/offsets", H5T_NATIVE_INT64, bad_off, 3, 0);
  expect_open_error(bad, "seq/offsets", "row 1");
  int64_t short_off[3] = {0, offsets[1], n - 1};  // does not cover the tokens
  damage_replace(good, bad, "seq/offsets", H5T_NATIVE_INT64, short_off, 3, 0);
  expect_open_error(bad, "seq/offsets[2]", NULL);
  damage_replace(good, bad, "seq/offsets", H5T_NATIVE_INT64, offsets, 2, 0);  // rows + 1 entries expected
  expect_open_error(bad, "seq/offsets", "rows + 1");
  int64_t big_off[3] = {0, offsets[1], n + 1000};
  damage_replace(good, bad, "seq/offsets", H5T_NATIVE_INT64, big_off, 3, 0);
  expect_open_error(bad, "seq/offsets[2]", NULL);
  int64_t neg_off[3] = {5, offsets[1], offsets[2]};
  damage_replace(good, bad, "seq/offsets", H5T_NATIVE_INT64, neg_off, 3, 0);
  expect_open_error(bad, "seq/offsets[0]", NULL);

  int64_t at = offsets[1] + 2;  // a token in row 1
  int32_t saved = tokens[at];
  tokens[at] = tokenizer_vocab_size(tok);
  damage_replace(good, bad, "seq/tokens", H5T_NATIVE_INT32, tokens, (hsize_t)n, 0);
  expect_open_error(bad, "seq/tokens", "row 1");
  tokens[at] = -3;
  damage_replace(good, bad, "seq/tokens", H5T_NATIVE_INT32, tokens, (hsize_t)n, 0);
  expect_open_error(bad, "outside the vocabulary", NULL);
  tokens[at] = saved;
  mask[3] = 2;
  damage_replace(good, bad, "seq/loss_mask", H5T_NATIVE_UINT8, mask, (hsize_t)n, 0);
  expect_open_error(bad, "seq/loss_mask[3]", "row 0");
  damage_replace(good, bad, "seq/loss_mask", H5T_NATIVE_UINT8, mask, (hsize_t)n - 1, 0);
  expect_open_error(bad, "seq/loss_mask", "entries");
  float ftok[4] = {1, 2, 3, 4};
  damage_replace(good, bad, "seq/tokens", H5T_NATIVE_FLOAT, ftok, 4, 0);
  expect_open_error(bad, "\"tokens\"", "element type");
  damage_replace(good, bad, "seq/tokens", H5T_NATIVE_INT32, tokens, (hsize_t)n / 2, 2);
  expect_open_error(bad, "\"tokens\"", "1-dimensional");
  damage_replace(good, bad, "seq", H5T_NATIVE_INT32, tokens, 1, 0);  // the group becomes a dataset
  expect_open_error(bad, "seq", NULL);
  float ref[1] = {0};
  damage_replace(good, bad, "ref_logp_chosen", H5T_NATIVE_FLOAT, ref, 1, 0);  // 1 value for 2 rows
  expect_open_error(bad, "ref_logp_chosen", "2 rows");

  copy(good, bad);  // attributes
  hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(f, "kind");
  H5Fclose(f);
  expect_open_error(bad, "\"kind\"", "missing");
  copy(good, bad);
  f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
  int64_t v = 99;
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  H5Fclose(f);
  expect_open_error(bad, "format_version", "99");

  size_t size;  // a truncated file and a non-HDF5 file
  char *bytes = file_read_all(good, 1 << 26, &size, &err);
  FILE *out = fopen(bad, "wb");
  fwrite(bytes, 1, size / 2, out);
  fclose(out);
  free(bytes);
  expect_open_error(bad, "damaged.h5", NULL);
  write_text(bad, "{\"not\": \"hdf5\"}\n");
  expect_open_error(bad, "not an HDF5 file", NULL);
  expect_open_error(path_in("missing.h5"), "missing.h5", "cannot open");
  free(tokens);
  free(mask);
}

// ---- loader -----------------------------------------------------------------------------

static void test_shuffle(void) {
  FimiError err;
  int64_t a[50], b[50], c[50];
  dataset_epoch_permutation(7, 0, 1, 50, a, &err);
  dataset_epoch_permutation(7, 0, 1, 50, b, &err);
  dataset_epoch_permutation(7, 1, 1, 50, c, &err);
  CHECK(!memcmp(a, b, sizeof a), "same (seed, epoch) -> same permutation");
  CHECK(memcmp(a, c, sizeof a) != 0, "epochs differ");
  dataset_epoch_permutation(8, 0, 1, 50, c, &err);
  CHECK(memcmp(a, c, sizeof a) != 0, "seeds differ");
  int seen[50] = {0}, fixed = 0;
  for (int i = 0; i < 50; i++) {
    if (a[i] >= 0 && a[i] < 50) seen[a[i]]++;
    fixed += a[i] == i;
  }
  int all = 1;
  for (int i = 0; i < 50; i++) all &= seen[i] == 1;
  CHECK(all, "a permutation");
  CHECK(fixed < 10, "shuffled (%d fixed points)", fixed);
  dataset_epoch_permutation(7, 3, 0, 50, c, &err);
  for (int i = 0; i < 50; i++) CHECK(c[i] == i, "no shuffle is the identity");
  // Uniformity: position of row 0 over many epochs spreads over all 5 slots.
  int hist[5] = {0};
  int64_t p[5];
  for (uint64_t e = 0; e < 5000; e++) {
    dataset_epoch_permutation(11, e, 1, 5, p, &err);
    for (int i = 0; i < 5; i++)
      if (p[i] == 0) hist[i]++;
  }
  for (int i = 0; i < 5; i++) CHECK(hist[i] > 850 && hist[i] < 1150, "row 0 at slot %d: %d of 5000", i, hist[i]);
}

static void test_shards(void) {
  FimiError err;
  const int64_t rows = 23;
  const int world = 4;
  for (uint64_t epoch = 0; epoch < 3; epoch++) {
    int count[23] = {0};
    int64_t perm[23];
    dataset_epoch_permutation(5, epoch, 1, rows, perm, &err);
    for (int r = 0; r < world; r++) {
      DatasetLoader l;
      CHECK(dataset_loader_init(&l, rows, 5, r, world, 1, &err) == 0, "%s", err.message);
      DatasetCursor cur = {epoch, 0};
      dataset_loader_seek(&l, cur, &err);
      int64_t got[64], n = 0, total = 0;
      uint64_t e;
      do {
        CHECK(dataset_loader_next(&l, 2, got + total, &n, &e, &err) == 0, "%s", err.message);
        CHECK(e == epoch, "batch of epoch %llu", (unsigned long long)e);
        total += n;
      } while (l.cursor.position < (uint64_t)l.per_rank);
      CHECK(total == rows / world, "rank %d got %lld rows", r, (long long)total);
      for (int64_t i = 0; i < total; i++) count[got[i]]++;
      dataset_loader_free(&l);
    }
    int dup = 0, covered = 0;
    for (int i = 0; i < rows; i++) {
      dup |= count[i] > 1;
      covered += count[i];
    }
    CHECK(!dup, "shards disjoint (epoch %llu)", (unsigned long long)epoch);
    CHECK(covered == (rows / world) * world, "shards cover %d rows", covered);
    for (int i = 0; i < (rows / world) * world; i++)  // exactly the first rows - rows % world of the permutation
      CHECK(count[perm[i]] == 1, "perm[%d] visited", i);
  }
  DatasetLoader l;
  CHECK(dataset_loader_init(&l, 3, 0, 0, 4, 1, &err) != 0, "fewer rows than ranks accepted");
  CHECK(dataset_loader_init(&l, 10, 0, 4, 4, 1, &err) != 0, "rank == world accepted");
}

static void test_cursor_resume(void) {
  FimiError err;
  const int64_t rows = 17, batch = 3;
  const int steps = 20;  // crosses several epochs (5 rows per rank per epoch, 2 batches each)
  int64_t straight[20][3], resumed[20][3], ns[20], nr[20];
  uint64_t es[20], er[20];
  DatasetLoader l;
  dataset_loader_init(&l, rows, 42, 1, 3, 1, &err);
  for (int s = 0; s < steps; s++) dataset_loader_next(&l, batch, straight[s], &ns[s], &es[s], &err);
  dataset_loader_free(&l);
  CHECK(es[steps - 1] >= 4, "iteration crossed epochs (%llu)", (unsigned long long)es[steps - 1]);
  CHECK(ns[0] == 3 && ns[1] == 2, "the last batch of an epoch is shorter (%lld %lld)", (long long)ns[0], (long long)ns[1]);
  dataset_loader_init(&l, rows, 42, 1, 3, 1, &err);
  int stop = 7;
  for (int s = 0; s < stop; s++) dataset_loader_next(&l, batch, resumed[s], &nr[s], &er[s], &err);
  uint64_t saved_epoch = l.cursor.epoch, saved_pos = l.cursor.position;  // as plain integers
  dataset_loader_free(&l);
  DatasetLoader l2;
  dataset_loader_init(&l2, rows, 42, 1, 3, 1, &err);
  DatasetCursor c = {saved_epoch, saved_pos};
  CHECK(dataset_loader_seek(&l2, c, &err) == 0, "%s", err.message);
  for (int s = stop; s < steps; s++) dataset_loader_next(&l2, batch, resumed[s], &nr[s], &er[s], &err);
  int same = 1;
  for (int s = 0; s < steps; s++) {
    same &= ns[s] == nr[s] && es[s] == er[s];
    for (int64_t i = 0; i < ns[s] && i < nr[s]; i++) same &= straight[s][i] == resumed[s][i];
  }
  CHECK(same, "resumed iteration == uninterrupted iteration");
  DatasetCursor far = {0, 99};
  CHECK(dataset_loader_seek(&l2, far, &err) != 0, "cursor beyond the epoch accepted");
  dataset_loader_free(&l2);
}

int main(void) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  snprintf(dir, sizeof dir, "/tmp/fimi_test_dataset_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  const char *src = getenv("FIMI_SOURCE_DIR");
  char corpus[512];
  snprintf(corpus, sizeof corpus, "%s/tests/interop/tokenizer_corpus.txt", src ? src : "../..");
  snprintf(tok_path, sizeof tok_path, "%s/tok.json", dir);
  BpeTrainOptions opt;
  bpe_train_default_options(&opt);
  opt.vocab_size = 600;
  FimiError err = {0};
  const char *inputs[1] = {corpus};
  if (bpe_train_files(inputs, 1, &opt, tok_path, &err) || tokenizer_load_file(tok_path, &tok, &err)) {
    fprintf(stderr, "tokenizer: %s (set FIMI_SOURCE_DIR)\n", err.message);
    return 1;
  }
  test_sft_messages();
  test_sft_loss_all();
  test_sft_prompt_completion();
  test_dpo();
  test_overlong();
  test_malformed();
  test_ref_logp();
  test_damaged();
  test_shuffle();
  test_shards();
  test_cursor_resume();
  tokenizer_free(tok);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  TEST_MAIN_END();
}
