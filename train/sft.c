// train/sft.c: the SFT objective (masked token cross-entropy): see sft.h.
#include "train/sft.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/batch.h"

static int grow(SftBatch *b, size_t n, FimiError *err) {
  return train_batch_reserve(&b->tokens, &b->targets, &b->mask, &b->dlogprobs, &b->logprobs, &b->capacity, n, "SFT",
                             err);
}

int sft_batch_build(SftBatch *b, const Dataset *ds, const int64_t *rows, int64_t count, int pad_id, int max_len,
                    FimiError *err) {
  int field = dataset_field_index(ds, "seq");
  if (field < 0) return fimi_fail(err, "SFT needs a dataset with a \"seq\" field (an SFT dataset)");
  if (count < 1 || count > INT32_MAX) return fimi_fail(err, "SFT batch: invalid row count %lld", (long long)count);
  int64_t longest = 2;
  for (int64_t i = 0; i < count; i++) {
    const int32_t *ids;
    const uint8_t *mask;
    int64_t len;
    if (dataset_row(ds, field, rows[i], &ids, &mask, &len, err) != 0) return -1;
    if (len - 1 > max_len)
      return fimi_fail(err, "SFT batch: row %lld has %lld tokens, more than the model's %d positions + 1",
                       (long long)rows[i], (long long)len, max_len);
    if (len > longest) longest = len;
  }
  int T = (int)(longest - 1);
  if ((size_t)count > SIZE_MAX / (size_t)T) return fimi_fail(err, "SFT batch: size overflow");
  size_t n = (size_t)count * (size_t)T;
  if (grow(b, n, err) != 0) return -1;
  b->B = (int)count;
  b->T = T;
  b->tokens_real = 0;
  b->loss_tokens = 0;
  for (int r = 0; r < b->B; r++) {
    const int32_t *ids;
    const uint8_t *mask;
    int64_t len;
    if (dataset_row(ds, field, rows[r], &ids, &mask, &len, err) != 0) return -1;
    for (int t = 0; t < T; t++) {
      size_t i = (size_t)r * T + t;
      int real = t + 1 < len;  // position t predicts ids[t + 1]
      b->tokens[i] = t < len ? ids[t] : pad_id;
      b->targets[i] = real ? ids[t + 1] : -1;
      b->mask[i] = real && mask[t + 1] ? 1.0f : 0.0f;
      b->tokens_real += t < len;
      b->loss_tokens += b->mask[i] != 0.0f;
    }
  }
  return 0;
}

void sft_batch_free(SftBatch *b) {
  free(b->tokens);
  free(b->targets);
  free(b->mask);
  free(b->dlogprobs);
  free(b->logprobs);
  memset(b, 0, sizeof *b);
}

double sft_loss(const float *logprobs, const float *mask, size_t n) {
  double sum = 0, count = 0;
  for (size_t i = 0; i < n; i++) {
    sum += (double)mask[i] * (double)logprobs[i];
    count += mask[i];
  }
  return count > 0 ? -sum / count : 0.0;
}

static int sft_train_batch(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                           double weight, TrainBatchResult *out, FimiError *err) {
  SftObjective *sft = ctx;
  SftBatch *b = &sft->batch;
  memset(out, 0, sizeof *out);
  if (sft_batch_build(b, ds, rows, count, sft->pad_id, sft->max_len, err) != 0) return -1;
  out->tokens = b->tokens_real;
  out->loss_tokens = b->loss_tokens;
  // A micro-batch with nothing to learn contributes no gradient (and loss 0).
  if (b->loss_tokens == 0) return 0;
  size_t n = (size_t)b->B * b->T;
  float scale = (float)(weight / (double)b->loss_tokens);
  for (size_t i = 0; i < n; i++) b->dlogprobs[i] = -b->mask[i] * scale;
  int rc = sft->ops ? sft->ops->forward_backward(sft->ops->ctx, b->tokens, b->targets, b->B, b->T, b->dlogprobs,
                                                 b->logprobs, err)
                    : gemma_forward_backward(model, b->tokens, b->targets, b->B, b->T, b->dlogprobs, b->logprobs, err);
  if (rc != 0) return -1;
  out->loss = sft_loss(b->logprobs, b->mask, n);
  return 0;
}

static int sft_eval_batch(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                          double *loss_sum, double *count_out, FimiError *err) {
  SftObjective *sft = ctx;
  SftBatch *b = &sft->batch;
  if (sft_batch_build(b, ds, rows, count, sft->pad_id, sft->max_len, err) != 0) return -1;
  if (b->loss_tokens == 0) return 0;
  int rc = sft->ops ? sft->ops->forward(sft->ops->ctx, b->tokens, b->targets, b->B, b->T, b->logprobs, err)
                    : gemma_forward(model, b->tokens, b->targets, b->B, b->T, b->logprobs, err);
  if (rc != 0) return -1;
  size_t n = (size_t)b->B * b->T;
  *loss_sum += sft_loss(b->logprobs, b->mask, n) * (double)b->loss_tokens;
  *count_out += (double)b->loss_tokens;
  return 0;
}

void sft_objective_init(SftObjective *sft, const GemmaConfig *config, TrainObjective *out) {
  memset(sft, 0, sizeof *sft);
  sft->pad_id = config->pad_token_id >= 0 && config->pad_token_id < config->vocab_size ? config->pad_token_id : 0;
  sft->max_len = config->max_position_embeddings;
  out->name = "sft";
  out->ctx = sft;
  out->train_batch = sft_train_batch;
  out->eval_batch = sft_eval_batch;
}

void sft_objective_free(SftObjective *sft) { sft_batch_free(&sft->batch); }

void sft_objective_set_model_ops(SftObjective *sft, const SftModelOps *ops) { sft->ops = ops; }
