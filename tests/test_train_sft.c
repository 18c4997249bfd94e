// tests/test_train_sft.c: the SFT objective. Batch building (shift, right
// padding, mask of the predicted token), the masked mean cross-entropy, and
// that a padded micro-batch gives the same loss and gradients as running
// each row alone, unpadded, with the loss normalized by hand (an independent
// path through gemma_forward + gemma_backward).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/gemma.h"
#include "tests/test_util.h"
#include "train/sft.h"

// An in-memory SFT dataset: rows of the given lengths, random ids < vocab,
// random masks (position 0 never masked in, as the chat format does).
typedef struct MemDataset {
  Dataset ds;
  int64_t offsets[16];
  int32_t tokens[512];
  uint8_t mask[512];
} MemDataset;

static void mem_dataset(MemDataset *m, const int *lens, int rows, int vocab, uint64_t seed) {
  memset(m, 0, sizeof *m);
  Rng rng;
  rng_seed(&rng, seed);
  m->offsets[0] = 0;
  for (int r = 0; r < rows; r++) {
    for (int i = 0; i < lens[r]; i++) {
      int64_t k = m->offsets[r] + i;
      m->tokens[k] = (int32_t)(rng_next_u64(&rng) % (uint64_t)vocab);
      m->mask[k] = i > 0 && (rng_next_u64(&rng) % 3 != 0);
    }
    m->offsets[r + 1] = m->offsets[r] + lens[r];
  }
  m->ds.kind = DATASET_SFT;
  m->ds.rows = rows;
  m->ds.vocab_size = vocab;
  m->ds.num_fields = 1;
  strcpy(m->ds.fields[0].name, "seq");
  m->ds.fields[0].offsets = m->offsets;
  m->ds.fields[0].tokens = m->tokens;
  m->ds.fields[0].loss_mask = m->mask;
}

static void test_batch_layout(void) {
  MemDataset m;
  int lens[3] = {6, 3, 9};
  mem_dataset(&m, lens, 3, 100, 7);
  SftBatch b = {0};
  FimiError err = {0};
  int64_t rows[3] = {2, 0, 1};
  CHECK(sft_batch_build(&b, &m.ds, rows, 3, 99, 64, &err) == 0, "build: %s", err.message);
  CHECK(b.B == 3 && b.T == 8, "B %d T %d (longest 9 -> T 8)", b.B, b.T);
  int64_t loss_tokens = 0, real = 0;
  for (int r = 0; r < 3; r++) {
    int64_t off = m.offsets[rows[r]], len = lens[rows[r]];
    for (int t = 0; t < b.T; t++) {
      int i = r * b.T + t;
      int in_row = t < len, scored = t + 1 < len;
      CHECK(b.tokens[i] == (in_row ? m.tokens[off + t] : 99), "row %d pos %d input", r, t);
      CHECK(b.targets[i] == (scored ? m.tokens[off + t + 1] : -1), "row %d pos %d target", r, t);
      float want = scored && m.mask[off + t + 1] ? 1.0f : 0.0f;
      CHECK(b.mask[i] == want, "row %d pos %d mask", r, t);
      loss_tokens += want != 0;
      real += in_row;
    }
  }
  CHECK(b.loss_tokens == loss_tokens && b.tokens_real == real, "counts %lld/%lld", (long long)b.loss_tokens,
        (long long)b.tokens_real);
  // A row longer than the model's positions + 1 is an error, not a crash.
  CHECK(sft_batch_build(&b, &m.ds, rows, 3, 0, 7, &err) != 0 && strstr(err.message, "row 2"), "too long: %s",
        err.message);
  int64_t bad = 5;
  CHECK(sft_batch_build(&b, &m.ds, &bad, 1, 0, 64, &err) != 0, "row out of range must fail");
  sft_batch_free(&b);
}

static void test_loss_formula(void) {
  float lp[5] = {-1.0f, -2.0f, -0.5f, -4.0f, -3.0f};
  float mask[5] = {1, 0, 1, 1, 0};
  CHECK_CLOSE(sft_loss(lp, mask, 5), (1.0 + 0.5 + 4.0) / 3.0, 1e-12, "masked mean");
  float none[5] = {0};
  CHECK(sft_loss(lp, none, 5) == 0.0, "no loss tokens -> 0");
}

// Padded batch vs rows one by one: loss and every gradient.
static void test_padding_invariance(void) {
  FimiError err = {0};
  GemmaConfig cfg;
  CHECK(gemma_config_preset(&cfg, "tiny", &err) == 0, "preset: %s", err.message);
  GemmaModel model;
  CHECK(gemma_model_create(&model, &cfg, &err) == 0 && gemma_model_alloc_grads(&model, &err) == 0, "%s", err.message);
  gemma_model_init_random(&model, 11);
  MemDataset m;
  int lens[3] = {12, 5, 17};
  mem_dataset(&m, lens, 3, cfg.vocab_size, 3);
  int64_t rows[3] = {0, 1, 2};

  SftObjective sft;
  TrainObjective obj;
  sft_objective_init(&sft, &cfg, &obj);
  gemma_model_zero_grads(&model);
  TrainBatchResult res;
  CHECK(obj.train_batch(obj.ctx, &model, &m.ds, rows, 3, 0.5, &res, &err) == 0, "train_batch: %s", err.message);
  size_t G = model.globals_numel, Lnum = model.layer_numel * cfg.num_hidden_layers;
  double *batched = malloc((G + Lnum) * sizeof *batched), *single = calloc(G + Lnum, sizeof *single);
  for (size_t i = 0; i < G; i++) batched[i] = model.globals_grad[i];
  for (int l = 0; l < cfg.num_hidden_layers; l++)
    for (size_t i = 0; i < model.layer_numel; i++) batched[G + l * model.layer_numel + i] = model.layers_grad[l][i];

  // Reference: each row alone, dlogprobs = -0.5 * mask / (loss tokens of all rows).
  int64_t total = 0;
  for (int r = 0; r < 3; r++)
    for (int i = 1; i < lens[r]; i++) total += m.mask[m.offsets[r] + i];
  double loss_sum = 0;
  gemma_model_zero_grads(&model);
  for (int r = 0; r < 3; r++) {
    int T = lens[r] - 1;
    int tokens[32], targets[32];
    float dlp[32], lp[32];
    for (int t = 0; t < T; t++) {
      tokens[t] = m.tokens[m.offsets[r] + t];
      targets[t] = m.tokens[m.offsets[r] + t + 1];
      dlp[t] = m.mask[m.offsets[r] + t + 1] ? (float)(-0.5 / (double)total) : 0.0f;
    }
    CHECK(gemma_forward(&model, tokens, targets, 1, T, lp, &err) == 0, "forward: %s", err.message);
    CHECK(gemma_backward(&model, dlp, &err) == 0, "backward: %s", err.message);
    for (int t = 0; t < T; t++)
      if (m.mask[m.offsets[r] + t + 1]) loss_sum -= lp[t];
  }
  for (size_t i = 0; i < G; i++) single[i] = model.globals_grad[i];
  for (int l = 0; l < cfg.num_hidden_layers; l++)
    for (size_t i = 0; i < model.layer_numel; i++) single[G + l * model.layer_numel + i] = model.layers_grad[l][i];
  CHECK(res.loss_tokens == total, "loss tokens %lld vs %lld", (long long)res.loss_tokens, (long long)total);
  CHECK_CLOSE(res.loss, loss_sum / (double)total, 1e-5, "batched loss vs per-row loss");
  double rel = max_rel_error(batched, single, (long)(G + Lnum));
  CHECK(rel < 1e-4, "gradients padded vs per row: max rel error %g", rel);
  double norm = 0;
  for (size_t i = 0; i < G + Lnum; i++) norm += single[i] * single[i];
  CHECK(norm > 1e-12, "reference gradient is not zero (%g)", norm);

  // Eval on the same rows: token-weighted sum and count.
  double sum = 0, count = 0;
  CHECK(obj.eval_batch(obj.ctx, &model, &m.ds, rows, 3, &sum, &count, &err) == 0, "eval: %s", err.message);
  CHECK(count == (double)total, "eval count %g", count);
  CHECK_CLOSE(sum / count, loss_sum / (double)total, 1e-5, "eval mean loss");
  free(batched);
  free(single);
  sft_objective_free(&sft);
  gemma_model_free(&model);
}

int main(void) {
  test_batch_layout();
  test_loss_formula();
  test_padding_invariance();
  TEST_MAIN_END();
}
