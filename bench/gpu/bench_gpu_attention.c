// bench/gpu/bench_gpu_attention.c: throughput of fimi's fast attention kernels
// (kernels/cuda/attention.cu) at a Gemma 3 shape: B = 1, T = 4096, hd = 256,
// nh = 8, nkv = 4 (GQA 8/4), causal (global layers) and sliding window 1024.
// Prints GPU_RESULT lines (tests/gpu/gpu_test.h) for the forward and for
// forward + backward. FLOPs: 4 * B * nh * pairs * hd for the forward (two
// matmuls of 2 FLOPs per multiply-add), 2.5 times that for the backward; pairs
// = T * T / 2 when causal (the usual convention), the visible (query, key)
// pairs exactly under the window. The same rows with suffix _cudnn time
// cuDNN's fused SDPA (attention_cudnn.cpp; absent where libcudnn is missing),
// and bench/gpu/sdpa_torch.py prints PyTorch's numbers for the same shapes.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/gemma.h"
#include "tests/gpu/gpu_test.h"

typedef struct AttnShape {
  int B, T, nh, nkv, hd, window;
  float scale;
} AttnShape;

// fimi's kernels (cudnn 0) or cuDNN's fused SDPA (1, attention_cudnn.cpp);
// 0 when it ran, else cuDNN's reason is printed.
static int forward(int cudnn, CudaContext *ctx, bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                   const AttnShape *s) {
  if (!cudnn) {
    attention_forward_cuda(ctx, out, lse, q, k, v, s->B, s->T, s->nh, s->nkv, s->hd, s->window, 0.0f, s->scale);
    return 0;
  }
  FimiError err = {0};
  if (attention_forward_cudnn(ctx, out, lse, q, k, v, s->B, s->T, s->nh, s->nkv, s->hd, s->window, 0.0f, s->scale,
                              &err) == 0)
    return 0;
  printf("bench_gpu_attention: cudnn forward not run: %s\n", err.message);
  return -1;
}

static int backward(int cudnn, CudaContext *ctx, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                    const bf16 *k, const bf16 *v, const bf16 *out, const float *lse, const AttnShape *s) {
  if (!cudnn) {
    attention_backward_cuda(ctx, dq, dk, dv, dout, q, k, v, out, lse, s->B, s->T, s->nh, s->nkv, s->hd, s->window,
                            0.0f, s->scale);
    return 0;
  }
  FimiError err = {0};
  if (attention_backward_cudnn(ctx, dq, dk, dv, dout, q, k, v, out, lse, s->B, s->T, s->nh, s->nkv, s->hd, s->window,
                               0.0f, s->scale, &err) == 0)
    return 0;
  printf("bench_gpu_attention: cudnn backward not run: %s\n", err.message);
  return -1;
}

int main(void) {
  const char *name = "bench_gpu_attention";
  CudaContext *ctx = gpu_test_open(name);
  int B = 1, T = 4096, nh = 8, nkv = 4, hd = 256, warmup = 3, reps = 20;
  float scale = 1.0f / sqrtf((float)hd);
  size_t nq = (size_t)B * T * nh * hd, nk = (size_t)B * T * nkv * hd, nl = (size_t)B * nh * T;
  float *hq = host_random_bf16(nq, 2.0f, 1), *hk = host_random_bf16(nk, 2.0f, 2);
  float *hv = host_random_bf16(nk, 1.0f, 3), *hdout = host_random_bf16(nq, 1.0f, 4);
  bf16 *q = gpu_bf16_from(ctx, hq, nq), *k = gpu_bf16_from(ctx, hk, nk), *v = gpu_bf16_from(ctx, hv, nk);
  bf16 *dout = gpu_bf16_from(ctx, hdout, nq);
  bf16 *out = gpu_poisoned(ctx, nq * sizeof(bf16)), *dq = gpu_poisoned(ctx, nq * sizeof(bf16));
  bf16 *dk = gpu_poisoned(ctx, nk * sizeof(bf16)), *dv = gpu_poisoned(ctx, nk * sizeof(bf16));
  float *lse = gpu_poisoned(ctx, nl * sizeof(float));
  const int windows[2] = {0, 1024};
  for (int cudnn = 0; cudnn <= 1; cudnn++)
    for (int w = 0; w < 2; w++) {
      AttnShape sh = {B, T, nh, nkv, hd, windows[w], scale};
      double pairs = sh.window > 0 ? gemma_visible_pairs(T, sh.window) : (double)T * T / 2.0;
      double fwd_flops = 4.0 * B * nh * pairs * hd, bwd_flops = 2.5 * fwd_flops;
      const char *mask = sh.window > 0 ? "window1024" : "causal", *suffix = cudnn ? "_cudnn" : "";
      char shape[96], op[64];
      snprintf(shape, sizeof shape, "B%d T%d nh%d nkv%d hd%d w%d", B, T, nh, nkv, hd, sh.window);
      int ok = 1;
      for (int r = 0; r < warmup && ok; r++) ok = forward(cudnn, ctx, out, lse, q, k, v, &sh) == 0;
      if (!ok) break;  // cuDNN missing or refusing: said above, its rows are absent
      GpuTimer timer;
      gpu_timer_start(&timer, ctx);
      for (int r = 0; r < reps; r++) forward(cudnn, ctx, out, lse, q, k, v, &sh);
      double ms = gpu_timer_stop_ms(&timer, ctx, reps);
      snprintf(op, sizeof op, "attention_fwd_%s%s", mask, suffix);
      gpu_report(op, shape, -1.0, 0.0, ms, fwd_flops / (ms * 1e-3) / 1e12, 0.0);
      // sanity: finite outputs, and a second forward gives the same bits
      float *o1 = host_from_bf16(ctx, out, nq), *l1 = host_from_f32(ctx, lse, nl);
      forward(cudnn, ctx, out, lse, q, k, v, &sh);
      float *o2 = host_from_bf16(ctx, out, nq);
      size_t bad = 0;
      for (size_t i = 0; i < nq; i++) bad += !isfinite(o1[i]);
      for (size_t i = 0; i < nl; i++) bad += !isfinite(l1[i]);
      double rerun = max_rel_error(o2, o1, nq);
      if (bad || rerun != 0.0) {
        printf("%s: %s%s forward: %zu non-finite values, rerun differs by %.3e\n", name, mask, suffix, bad, rerun);
        gpu_failures++;
      }
      free(o1), free(l1), free(o2);
      for (int r = 0; r < warmup && ok; r++)
        ok = backward(cudnn, ctx, dq, dk, dv, dout, q, k, v, out, lse, &sh) == 0;
      if (!ok) break;
      gpu_timer_start(&timer, ctx);
      for (int r = 0; r < reps; r++) {
        forward(cudnn, ctx, out, lse, q, k, v, &sh);
        backward(cudnn, ctx, dq, dk, dv, dout, q, k, v, out, lse, &sh);
      }
      ms = gpu_timer_stop_ms(&timer, ctx, reps);
      snprintf(op, sizeof op, "attention_fwdbwd_%s%s", mask, suffix);
      gpu_report(op, shape, -1.0, 0.0, ms, (fwd_flops + bwd_flops) / (ms * 1e-3) / 1e12, 0.0);
    }
  // decode: 8 sequences of 4096 cached tokens, one query each (bandwidth bound)
  {
    int Bd = 8, S = 4096;
    size_t nqd = (size_t)Bd * nh * hd, nc = (size_t)Bd * S * nkv * hd;
    float *hc = host_random_bf16(nc, 1.0f, 5);
    bf16 *kc = gpu_bf16_from(ctx, hc, nc), *vc = gpu_bf16_from(ctx, hc, nc), *qd = gpu_bf16_from(ctx, hq, nqd);
    bf16 *od = gpu_poisoned(ctx, nqd * sizeof(bf16));
    int lengths[8];
    for (int b = 0; b < Bd; b++) lengths[b] = S;
    int *d_len = gpu_alloc(Bd * sizeof(int));
    cuda_upload_i32(ctx, d_len, lengths, Bd);
    for (int r = 0; r < warmup; r++)
      attention_decode_cuda(ctx, od, qd, kc, vc, d_len, Bd, S, nh, nkv, hd, 0, 0.0f, scale);
    GpuTimer timer;
    gpu_timer_start(&timer, ctx);
    for (int r = 0; r < reps; r++)
      attention_decode_cuda(ctx, od, qd, kc, vc, d_len, Bd, S, nh, nkv, hd, 0, 0.0f, scale);
    double ms = gpu_timer_stop_ms(&timer, ctx, reps);
    double bytes = 2.0 * nc * sizeof(bf16);  // every K and V row read once (per kv head)
    char shape[96];
    snprintf(shape, sizeof shape, "B%d S%d nh%d nkv%d hd%d", Bd, S, nh, nkv, hd);
    gpu_report("attention_decode", shape, -1.0, 0.0, ms, 0.0, bytes / (ms * 1e-3) / 1e9);
    cuda_free(kc), cuda_free(vc), cuda_free(qd), cuda_free(od), cuda_free(d_len);
    free(hc);
  }
  cuda_free(q), cuda_free(k), cuda_free(v), cuda_free(dout), cuda_free(out), cuda_free(dq), cuda_free(dk),
      cuda_free(dv), cuda_free(lse);
  free(hq), free(hk), free(hv), free(hdout);
  return gpu_test_close(ctx, name);
}
