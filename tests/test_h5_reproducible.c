// tests/test_h5_reproducible.c: every HDF5 file fimi writes is reproducible:
// the same content written twice, more than a second apart (HDF5 object
// timestamps have one-second resolution), gives the same bytes. Covers an
// SFT and a DPO dataset (data tokenize), a dataset with reference log-probs
// added (dataset_write_ref_logp, which rewrites an existing file), the
// replicated optimizer.h5 and a ZeRO-3 optimizer shard (train/checkpoint.c).
// The files are also read back, so reproducibility did not cost validity.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "core/fileio.h"
#include "data/bpe_train.h"
#include "data/dataset.h"
#include "optim/adamw.h"
#include "tests/test_util.h"
#include "train/checkpoint.h"

static char dir[256];
static char tok_path[512];

static const char *path_in(const char *name) {
  static char buf[8][600];
  static int next = 0;
  char *p = buf[next++ % 8];
  snprintf(p, 600, "%s/%s", dir, name);
  return p;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static const char *SFT_ROWS =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Balance of 1234?\"},{\"role\":\"assistant\",\"content\":\"It is 500.\"}]}\n"
    "{\"prompt\":\"Open an FD\",\"completion\":\"For how long?\"}\n";
static const char *DPO_ROWS =
    "{\"prompt\":\"Block my card\",\"chosen\":\"Blocked.\",\"rejected\":\"No.\"}\n"
    "{\"prompt\":\"Rate?\",\"chosen\":\"7.1%\",\"rejected\":\"I do not know\"}\n";

static void tokenize(const char *input, DatasetKind kind, const char *out) {
  DatasetTokenizeOptions opt;
  dataset_default_options(&opt);
  opt.kind = kind;
  FimiError err = {0};
  CHECK(dataset_tokenize_jsonl(input, tok_path, out, &opt, NULL, &err) == 0, "tokenize %s: %s", out, err.message);
}

// An optimizer with two buffers and one step taken, so its moments are not zero.
static float params[2][40], grads[2][40];

static void make_optimizer(AdamW *opt) {
  FimiError err = {0};
  AdamWConfig cfg;
  adamw_config_default(&cfg);
  CHECK(adamw_init(opt, &cfg, &err) == 0, "adamw_init: %s", err.message);
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 40; i++) {
      params[b][i] = 0.01f * (float)(i - 20 * b);
      grads[b][i] = 0.001f * (float)((i * 7 + b) % 13) - 0.006f;
    }
  CHECK(adamw_add_buffer(opt, "embed", params[0], grads[0], 40, NULL, 0, &err) == 0, "add: %s", err.message);
  CHECK(adamw_add_buffer(opt, "layers.0", params[1], grads[1], 40, NULL, 0, &err) == 0, "add: %s", err.message);
  CHECK(adamw_step(opt, 1e-3, 1.0f, &err) == 0, "step: %s", err.message);
}

// Writes every kind of HDF5 file into dir/SUB.
static void write_all(const char *sub) {
  char out[600];
  snprintf(out, sizeof out, "%s/%s", dir, sub);
  CHECK(mkdir(out, 0755) == 0, "mkdir %s", out);
  char path[700];
  snprintf(path, sizeof path, "%s/sft.h5", out);
  tokenize(path_in("sft.jsonl"), DATASET_SFT, path);
  snprintf(path, sizeof path, "%s/dpo.h5", out);
  tokenize(path_in("dpo.jsonl"), DATASET_DPO, path);
  float ref[2] = {-3.5f, -7.25f};
  FimiError err = {0};
  CHECK(dataset_write_ref_logp(path, "ref_logp_chosen", ref, 2, &err) == 0, "ref_logp: %s", err.message);
  CHECK(dataset_write_ref_logp(path, "ref_logp_chosen", ref, 2, &err) == 0, "ref_logp again: %s", err.message);
  AdamW opt;
  make_optimizer(&opt);
  CHECK(checkpoint_write_optimizer_shard(out, &opt, 0, 1, &err) == 0, "optimizer.h5: %s", err.message);
  CHECK(checkpoint_write_optimizer_shard(out, &opt, 1, 2, &err) == 0, "optimizer shard: %s", err.message);
  adamw_free(&opt);
}

static void check_same_bytes(const char *name) {
  char a[700], b[700];
  snprintf(a, sizeof a, "%s/first/%s", dir, name);
  snprintf(b, sizeof b, "%s/second/%s", dir, name);
  FimiError err = {0};
  size_t na = 0, nb = 0;
  char *da = file_read_all(a, (size_t)1 << 30, &na, &err);
  char *db = file_read_all(b, (size_t)1 << 30, &nb, &err);
  CHECK(da && db, "read %s: %s", name, err.message);
  if (da && db) {
    size_t first = 0;
    while (first < na && first < nb && da[first] == db[first]) first++;
    CHECK(na == nb && first == na, "%s: written twice, the files differ (%zu and %zu bytes, first difference at %zu)",
          name, na, nb, first);
    if (na == nb && first == na) printf("%-36s %zu bytes, identical\n", name, na);
  }
  free(da);
  free(db);
}

int main(void) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/fimi_test_h5_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return 1;
  const char *src = getenv("FIMI_SOURCE_DIR");
  char corpus[512];
  snprintf(corpus, sizeof corpus, "%s/tests/interop/tokenizer_corpus.txt", src ? src : "../..");
  snprintf(tok_path, sizeof tok_path, "%s/tok.json", dir);
  BpeTrainOptions bpe;
  bpe_train_default_options(&bpe);
  bpe.vocab_size = 400;
  FimiError err = {0};
  const char *inputs[1] = {corpus};
  if (bpe_train_files(inputs, 1, &bpe, tok_path, &err)) {
    fprintf(stderr, "tokenizer: %s (set FIMI_SOURCE_DIR)\n", err.message);
    return 1;
  }
  write_text(path_in("sft.jsonl"), SFT_ROWS);
  write_text(path_in("dpo.jsonl"), DPO_ROWS);

  write_all("first");
  usleep(1100 * 1000);  // past the next second: a stored timestamp would differ
  write_all("second");
  const char *names[] = {"sft.h5", "dpo.h5", "optimizer.h5", "optimizer-rank00001-of-00002.h5"};
  for (int i = 0; i < 4; i++) check_same_bytes(names[i]);

  // Still valid files: the reader takes them, reference values included.
  Dataset ds;
  CHECK(dataset_open(path_in("second/dpo.h5"), 0, &ds, &err) == 0, "open dpo.h5: %s", err.message);
  if (err.message[0] == 0) {
    CHECK(ds.rows == 2 && ds.num_ref == 1, "dpo.h5: %lld rows, %d reference arrays", (long long)ds.rows, ds.num_ref);
    dataset_close(&ds);
  }
  CHECK(dataset_open(path_in("second/sft.h5"), 0, &ds, &err) == 0, "open sft.h5: %s", err.message);
  if (err.message[0] == 0) dataset_close(&ds);

  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  TEST_MAIN_END();
}
