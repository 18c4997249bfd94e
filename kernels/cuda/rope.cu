// kernels/cuda/rope.cu: rotary position embedding on the GPU, rotate_half
// convention (dimension i paired with i + hd/2). Defines rope_forward_cuda
// and rope_backward_cuda, and rope_forward_partial_cuda and
// rope_backward_partial_cuda (Gemma 4's "proportional" rope: only pairs i <
// rot_pairs rotate), all in kernels/cuda/ops_cuda.h; kernels/cpu/rope.c is
// the reference. One kernel serves all four: the full rotation is the
// partial one with rot_pairs = hd/2.
//
// Angles as the CPU computes them, step by step in fp32:
//   inv_freq_i = 1 / powf(theta, (float)(2i) / (float)hd)   [/ position_scale]
//   angle      = (float)pos * inv_freq_i
// inv_freq is computed on the HOST with the same libm powf the CPU reference
// uses and passed by value to the kernel, so it is bitwise the CPU's: at
// positions ~40k one ulp of inv_freq moves the angle by ~2e-3 rad, which a
// device powf (up to 2 ulp off glibc's) would cost. The one product is the
// same fp32 multiply on both sides; only cosf/sinf differ (CUDA's full-range
// versions, <= 2 ulp; the build never uses --use_fast_math).
//
// Launch: one thread per (row, pair index i) in a grid-stride loop; it
// computes sincos once and rotates that pair in every head of the row (the
// angle depends on the row and i only). Consecutive threads take consecutive
// i, so each head's loads and stores are contiguous.
//
// Pairs i >= rot_pairs go through the same rotation with cos 1 and sin 0,
// which is what the CPU computes for them (frequency 0, and cosf(0) = 1,
// sinf(0) = 0 exactly): the CPU's arithmetic, so its bits (a NaN partner
// included), and an out-of-place call still writes every element. Only the
// sincos is skipped.
extern "C" {
#include "core/error.h"
}
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

#define ROPE_MAX_HALF 512  // hd <= 1024
#define ROPE_THREADS 256

// Passed by value (2 KiB of kernel parameters): no device buffer, no copy.
struct RopeFreqs {
  float inv_freq[ROPE_MAX_HALF];  // (hd/2)
};

// The CPU reference's rope_inv_freq, line for line (the caller zeroed f, the
// pass-through pairs' frequency).
static void rope_inv_freq_host(RopeFreqs *f, int hd, float theta, float position_scale, int rot_pairs) {
  for (int i = 0; i < hd / 2 && i < rot_pairs; i++) {
    float exponent = (float)(2 * i) / (float)hd;
    f->inv_freq[i] = 1.0f / powf(theta, exponent);
    if (position_scale != 1.0f) f->inv_freq[i] = f->inv_freq[i] / position_scale;
  }
}

// out, inp (N, nheads, hd), positions (N). direction 1: forward, -1: backward
// (the transpose of an orthogonal rotation is the rotation by -angle). Pairs
// i < rot_pairs rotate, the others get cos 1, sin 0.
// In place is safe: the thread that reads a pair is the only one writing it.
__global__ void rope_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *inp, const int *positions, int N, int nheads,
                            int hd, int rot_pairs, RopeFreqs freqs, float direction) {
  int half = hd / 2;
  size_t total = (size_t)N * half;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    int n = (int)(idx / half);
    int i = (int)(idx % half);
    float s = 0.0f, c = 1.0f;
    if (i < rot_pairs) {
      float pos = (float)positions[n];
      float angle = pos * freqs.inv_freq[i];
      sincosf(angle, &s, &c);
    }
    s = direction * s;
    size_t row = (size_t)n * nheads * hd;
    for (int h = 0; h < nheads; h++) {
      size_t base = row + (size_t)h * hd + i;
      float x1 = bf16_to_float(inp[base]);
      float x2 = bf16_to_float(inp[base + half]);
      out[base] = float_to_bf16(x1 * c - x2 * s);
      out[base + half] = float_to_bf16(x2 * c + x1 * s);
    }
  }
}

// out, inp (N, nheads, hd), positions (N); 0 <= rot_pairs <= hd/2 (anything
// else is a caller's bug: a GPU op has no error return, so it stops here).
static void rope_launch(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N, int nheads, int hd,
                        float theta, float position_scale, int rot_pairs, float direction) {
  int half = hd / 2;
  if (N <= 0 || nheads <= 0 || half <= 0) return;
  if (half > ROPE_MAX_HALF || rot_pairs < 0 || rot_pairs > half) {
    fprintf(stderr, "fimi: rope_cuda: head dim %d with %d rotated pairs (head dim at most %d, pairs in [0, hd/2])\n",
            hd, rot_pairs, 2 * ROPE_MAX_HALF);
    exit(EXIT_FAILURE);
  }
  RopeFreqs freqs;
  memset(&freqs, 0, sizeof freqs);
  rope_inv_freq_host(&freqs, hd, theta, position_scale, rot_pairs);
  size_t total = (size_t)N * half;
  size_t blocks = ceil_div_size(total, ROPE_THREADS);
  size_t cap = (size_t)(ctx->multiprocessors > 0 ? ctx->multiprocessors : 1) * 32;
  if (blocks > cap) blocks = cap;
  rope_kernel<<<(unsigned)blocks, ROPE_THREADS, 0, ctx->stream>>>(as_nv(out), as_nv(inp), positions, N, nheads, hd,
                                                                  rot_pairs, freqs, direction);
  cuda_check_launch();
}

// out, inp (N, nheads, hd), positions (N). In place allowed.
extern "C" void rope_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N,
                                  int nheads, int hd, float theta, float position_scale) {
  rope_launch(ctx, out, inp, positions, N, nheads, hd, theta, position_scale, hd / 2, 1.0f);
}

// dinp, dout (N, nheads, hd), positions (N). In place allowed.
extern "C" void rope_backward_cuda(CudaContext *ctx, bf16 *dinp, const bf16 *dout, const int *positions, int N,
                                   int nheads, int hd, float theta, float position_scale) {
  rope_launch(ctx, dinp, dout, positions, N, nheads, hd, theta, position_scale, hd / 2, -1.0f);
}

// out, inp (N, nheads, hd), positions (N); pairs i < rot_pairs rotate. In place allowed.
extern "C" void rope_forward_partial_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N,
                                          int nheads, int hd, float theta, float position_scale, int rot_pairs) {
  rope_launch(ctx, out, inp, positions, N, nheads, hd, theta, position_scale, rot_pairs, 1.0f);
}

// dinp, dout (N, nheads, hd), positions (N); pairs i < rot_pairs rotate back. In place allowed.
extern "C" void rope_backward_partial_cuda(CudaContext *ctx, bf16 *dinp, const bf16 *dout, const int *positions,
                                           int N, int nheads, int hd, float theta, float position_scale,
                                           int rot_pairs) {
  rope_launch(ctx, dinp, dout, positions, N, nheads, hd, theta, position_scale, rot_pairs, -1.0f);
}
