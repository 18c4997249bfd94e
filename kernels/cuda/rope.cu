// kernels/cuda/rope.cu: rotary position embedding on the GPU, rotate_half
// convention (dimension i paired with i + hd/2). Defines rope_forward_cuda
// and rope_backward_cuda (kernels/cuda/ops_cuda.h); kernels/cpu/rope.c is
// the reference.
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

// The CPU reference's rope_inv_freq, line for line.
static void rope_inv_freq_host(RopeFreqs *f, int hd, float theta, float position_scale) {
  for (int i = 0; i < hd / 2; i++) {
    float exponent = (float)(2 * i) / (float)hd;
    f->inv_freq[i] = 1.0f / powf(theta, exponent);
    if (position_scale != 1.0f) f->inv_freq[i] = f->inv_freq[i] / position_scale;
  }
}

// out, inp (N, nheads, hd), positions (N). direction 1: forward, -1: backward
// (the transpose of an orthogonal rotation is the rotation by -angle).
// In place is safe: the thread that reads a pair is the only one writing it.
__global__ void rope_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *inp, const int *positions, int N, int nheads,
                            int hd, RopeFreqs freqs, float direction) {
  int half = hd / 2;
  size_t total = (size_t)N * half;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    int n = (int)(idx / half);
    int i = (int)(idx % half);
    float pos = (float)positions[n];
    float angle = pos * freqs.inv_freq[i];
    float s, c;
    sincosf(angle, &s, &c);
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

static void rope_launch(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N, int nheads, int hd,
                        float theta, float position_scale, float direction) {
  int half = hd / 2;
  if (N <= 0 || nheads <= 0 || half <= 0) return;
  if (half > ROPE_MAX_HALF) {
    fprintf(stderr, "fimi: rope_cuda: head dim %d above the supported %d\n", hd, 2 * ROPE_MAX_HALF);
    exit(EXIT_FAILURE);
  }
  RopeFreqs freqs;
  memset(&freqs, 0, sizeof freqs);
  rope_inv_freq_host(&freqs, hd, theta, position_scale);
  size_t total = (size_t)N * half;
  size_t blocks = ceil_div_size(total, ROPE_THREADS);
  size_t cap = (size_t)(ctx->multiprocessors > 0 ? ctx->multiprocessors : 1) * 32;
  if (blocks > cap) blocks = cap;
  rope_kernel<<<(unsigned)blocks, ROPE_THREADS, 0, ctx->stream>>>(as_nv(out), as_nv(inp), positions, N, nheads, hd,
                                                                  freqs, direction);
  cuda_check_launch();
}

// out, inp (N, nheads, hd), positions (N). In place allowed.
extern "C" void rope_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N,
                                  int nheads, int hd, float theta, float position_scale) {
  rope_launch(ctx, out, inp, positions, N, nheads, hd, theta, position_scale, 1.0f);
}

// dinp, dout (N, nheads, hd), positions (N). In place allowed.
extern "C" void rope_backward_cuda(CudaContext *ctx, bf16 *dinp, const bf16 *dout, const int *positions, int N,
                                   int nheads, int hd, float theta, float position_scale) {
  rope_launch(ctx, dinp, dout, positions, N, nheads, hd, theta, position_scale, -1.0f);
}
