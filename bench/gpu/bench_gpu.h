// bench/gpu/bench_gpu.h: what the GPU benchmarks share. Defines bench_check
// and bench_sync (stop with the benchmark's name and the CUDA message; the
// including file defines BENCH_NAME first), bench_fill_random_weights (a
// model's device weights without initializing billions of them on the CPU)
// and train_flops_per_token (the model FLOPs per token of one forward +
// backward, for TFLOP/s and MFU).
#ifndef FIMI_BENCH_GPU_H
#define FIMI_BENCH_GPU_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/ops_cuda.h"
#include "model/gemma.h"
#include "model/gemma_config.h"
#include "model/gemma_cuda.h"
#include "tests/gpu/gpu_test.h"

#ifdef BENCH_NAME
static inline void bench_check(cudaError_t status, const char *what) {
  if (status != cudaSuccess) {
    fprintf(stderr, BENCH_NAME ": %s: %s\n", what, cudaGetErrorString(status));
    exit(1);
  }
}

static inline void bench_sync(CudaContext *ctx, const char *what) {
  FimiError err = {0};
  if (cuda_context_sync(ctx, &err) != 0) {
    fprintf(stderr, BENCH_NAME ": %s: %s\n", what, err.message);
    exit(1);
  }
}

// One random bf16 block (uniform, scale 0.03) uploaded, then repeated over
// the rest of the device weights.
static inline void bench_fill_random_weights(CudaContext *ctx, GemmaCudaModel *m) {
  size_t block = (size_t)16 << 20;
  if (block > m->num_params) block = m->num_params;
  float *host = host_random_bf16(block, 0.03f, 7);
  cuda_upload_bf16(ctx, m->params, host, block);
  cudaStream_t stream = (cudaStream_t)cuda_context_stream(ctx);
  for (size_t at = block; at < m->num_params; at += block) {
    size_t n = m->num_params - at < block ? m->num_params - at : block;
    bench_check(cudaMemcpyAsync(m->params + at, m->params, n * sizeof(bf16), cudaMemcpyDeviceToDevice, stream),
                "weights");
  }
  free(host);
}
#endif

// 6 per parameter (forward 2 + backward 4) plus attention: 12 * nh * hd per
// key a query sees (QK^T and PV, forward and backward), averaged over the T
// positions of a sequence (causal, or capped by the layer's window).
static inline double train_flops_per_token(const GemmaConfig *cfg, int T) {
  double attn = 0;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaAttnSpec spec;
    gemma_attn_spec(cfg, l, &spec);
    attn += 12.0 * cfg->num_attention_heads * cfg->head_dim * gemma_visible_pairs(T, spec.window) / T;
  }
  return 6.0 * (double)gemma_config_param_count(cfg) + attn;
}

#endif
