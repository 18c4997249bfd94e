// cmd/rollout_cuda.c: the GPU rollout policy (see rollout_cuda.h): each
// RolloutPolicy callback is one model/gemma_cuda.h call on the policy's cache.
#include "cmd/rollout_cuda.h"

#ifdef FIMI_HAVE_CUDA

#include <stdlib.h>
#include <string.h>

typedef struct CudaPolicy {
  GemmaCudaModel *model;
  GemmaCudaKVCache cache;
} CudaPolicy;

static int cuda_prefill(void *ctx, int slot, const int *tokens, int n, float *logits, FimiError *err) {
  CudaPolicy *p = ctx;
  return gemma_cuda_prefill(p->model, &p->cache, slot, tokens, n, logits, err);
}

static int cuda_decode(void *ctx, const int *tokens, const int *active, float *logits, FimiError *err) {
  CudaPolicy *p = ctx;
  return gemma_cuda_decode_step(p->model, &p->cache, tokens, active, logits, err);
}

static int cuda_copy(void *ctx, int dst, int src, FimiError *err) {
  CudaPolicy *p = ctx;
  return gemma_cuda_kv_cache_copy_sequence(p->model, &p->cache, dst, src, err);
}

// Lengths alone define what is cached (host side): nothing to do on the device.
static void cuda_reset(void *ctx, int slot) { ((CudaPolicy *)ctx)->cache.lengths[slot] = 0; }

static void cuda_truncate(void *ctx, int slot, int length) {
  int *cached = &((CudaPolicy *)ctx)->cache.lengths[slot];
  if (length >= 0 && length < *cached) *cached = length;
}

int rollout_policy_cuda_create(RolloutPolicy *p, GemmaCudaModel *model, int slots, int capacity, int chunk,
                               FimiError *err) {
  memset(p, 0, sizeof *p);
  CudaPolicy *gpu = fimi_calloc(1, sizeof *gpu, err);
  if (!gpu) return -1;
  gpu->model = model;
  if (gemma_cuda_kv_cache_create_rows(&gpu->cache, model, slots, capacity, chunk, err) != 0) {
    free(gpu);
    return fimi_fail_wrap(err, "GPU rollout policy");
  }
  *p = (RolloutPolicy){cuda_prefill, cuda_decode, cuda_copy, cuda_reset, cuda_truncate, gpu, model->config.vocab_size, slots,
                       capacity};
  return 0;
}

void rollout_policy_cuda_free(RolloutPolicy *p) {
  CudaPolicy *gpu = p->ctx;
  if (gpu) {
    gemma_cuda_kv_cache_free(&gpu->cache);
    free(gpu);
  }
  memset(p, 0, sizeof *p);
}

#endif  // FIMI_HAVE_CUDA
