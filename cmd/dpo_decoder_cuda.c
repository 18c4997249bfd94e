// cmd/dpo_decoder_cuda.c: the GPU decoder of dpo pairs (dpo_decoder_cuda.h):
// each DpoDecoder callback is one model/gemma_cuda.h call on sequence 0 of
// the decoder's cache.
#include "cmd/dpo_decoder_cuda.h"

#ifdef FIMI_HAVE_CUDA

#include <stdlib.h>
#include <string.h>

typedef struct CudaDecoder {
  CudaContext *ctx;
  GemmaCudaModel model;
  int have_model;
  GemmaCudaKVCache cache;
  int have_cache;
  int chunk;
} CudaDecoder;

static int cuda_reserve(void *ctx, int need, FimiError *err) {
  CudaDecoder *c = ctx;
  if (c->have_cache && c->cache.capacity >= need) return 0;
  if (c->have_cache) gemma_cuda_kv_cache_free(&c->cache);
  c->have_cache = 0;
  int cap = dpo_decoder_capacity(need, c->model.config.max_position_embeddings);
  if (gemma_cuda_kv_cache_create_rows(&c->cache, &c->model, 1, cap, c->chunk, err) != 0) return -1;
  c->have_cache = 1;
  return 1;
}

// Lengths alone define what is cached (host side): nothing to do on the device.
static void cuda_truncate(void *ctx, int length) {
  CudaDecoder *c = ctx;
  if (c->have_cache) c->cache.lengths[0] = length;
}

static int cuda_prefill(void *ctx, const int *ids, int n, float *logits, FimiError *err) {
  CudaDecoder *c = ctx;
  return gemma_cuda_prefill(&c->model, &c->cache, 0, ids, n, logits, err);
}

static int cuda_step(void *ctx, int token, float *logits, FimiError *err) {
  CudaDecoder *c = ctx;
  return gemma_cuda_decode_step(&c->model, &c->cache, &token, NULL, logits, err);
}

static void cuda_destroy(void *ctx) {
  CudaDecoder *c = ctx;
  if (!c) return;
  if (c->have_cache) gemma_cuda_kv_cache_free(&c->cache);
  if (c->have_model) gemma_cuda_free(&c->model);
  if (c->ctx) cuda_context_destroy(c->ctx);
  free(c);
}

int dpo_decoder_cuda(DpoDecoder *d, const GemmaModel *model, int chunk, FimiError *err) {
  memset(d, 0, sizeof *d);
  CudaDecoder *c = fimi_calloc(1, sizeof *c, err);
  if (!c) return -1;
  c->chunk = chunk > 0 ? chunk : 64;
  int rc = cuda_context_create(&c->ctx, 0, err);
  if (rc == 0) rc = gemma_cuda_create(&c->model, &model->config, c->ctx, err);
  if (rc == 0) c->have_model = 1;
  if (rc == 0) rc = gemma_cuda_upload_weights(&c->model, model, err);
  if (rc != 0) {
    cuda_destroy(c);
    return fimi_fail_wrap(err, "GPU decoder for dpo pairs");
  }
  *d = (DpoDecoder){model->config.vocab_size, model->config.max_position_embeddings, cuda_reserve, cuda_truncate,
                    cuda_prefill, cuda_step, cuda_destroy, c};
  return 0;
}

#endif  // FIMI_HAVE_CUDA
