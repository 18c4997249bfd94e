// kernels/cpu/rmsnorm.c: Gemma RMSNorm on the CPU in float32 (see ops.h).
// Defines rmsnorm_forward and rmsnorm_backward (gain 1 + w), and
// rmsnorm_forward_gain and rmsnorm_backward_gain (gain w, or 1 without a weight).
// Gemma 2/3 store the norm weight centred on 0, so the gain is (1 + w);
// Gemma 4 stores the gain itself. Hugging Face computes the whole norm in
// fp32: x * rsqrt(mean(x^2) + eps).
#include "kernels/ops.h"

#include <math.h>

// Columns per task when summing dweight over rows: each task owns its columns,
// so the sum over rows runs in one fixed order whatever the thread count.
#define RMSNORM_COL_TILE 64

// The gain of column c: offset + weight[c] (offset 1: Gemma 2/3, 0: Gemma 4),
// or 1 without a weight.
static inline float norm_gain(const float *weight, float offset, int c) { return weight ? offset + weight[c] : 1.0f; }

// out (N, C), rstd (N) or NULL, inp (N, C), weight (C) or NULL
static void rmsnorm_forward_offset(float *out, float *rstd, const float *inp, const float *weight, float offset, int N,
                                   int C, float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = inp + (long)n * C;  // (C)
    float *o = out + (long)n * C;        // (C)
    // The mean of squares in double is closer to torch's pairwise fp32 sum
    // than a naive float loop over thousands of columns would be. `omp simd`
    // splits it into vector lanes in an order fixed by the compiled code.
    double sum_sq = 0.0;
#pragma omp simd reduction(+ : sum_sq)
    for (int c = 0; c < C; c++) sum_sq += (double)x[c] * x[c];
    float mean_sq = (float)(sum_sq / C);
    float r = 1.0f / sqrtf(mean_sq + eps);
    // HF order: normalize first, then apply the gain
    for (int c = 0; c < C; c++) o[c] = (x[c] * r) * norm_gain(weight, offset, c);
    if (rstd) rstd[n] = r;
  }
}

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps) {
  rmsnorm_forward_offset(out, rstd, inp, weight, 1.0f, N, C, eps);
}

void rmsnorm_forward_gain(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps) {
  rmsnorm_forward_offset(out, rstd, inp, weight, 0.0f, N, C, eps);
}

// dweight[c] += sum_n dout[n,c] * x[n,c] * rstd[n], summed in row order.
// dweight (C), dout (N, C), inp (N, C), rstd (N)
static void rmsnorm_backward_weight(float *dweight, const float *dout, const float *inp, const float *rstd, int N,
                                    int C) {
  int tiles = (C + RMSNORM_COL_TILE - 1) / RMSNORM_COL_TILE;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < tiles; t++) {
    int c0 = t * RMSNORM_COL_TILE;
    int c1 = c0 + RMSNORM_COL_TILE < C ? c0 + RMSNORM_COL_TILE : C;
    int width = c1 - c0;
    double acc[RMSNORM_COL_TILE] = {0};  // (tile) this task's columns
    for (int n = 0; n < N; n++) {
      const float *x = inp + (long)n * C + c0;   // (width)
      const float *d = dout + (long)n * C + c0;  // (width)
      float r = rstd[n];
#pragma omp simd
      for (int c = 0; c < width; c++) acc[c] += (double)(d[c] * x[c] * r);
    }
    for (int c = c0; c < c1; c++) dweight[c] += (float)acc[c - c0];
  }
}

// y = x * r * g with g = offset + w and r = (mean(x^2) + eps)^-1/2, so
// dx_i = r * g_i * dy_i - x_i * r^3 / C * sum_j(dy_j * g_j * x_j).
// dinp (N, C) overwritten, dweight (C) accumulated, dout (N, C), inp (N, C),
// weight (C) or NULL (g = 1), rstd (N) from the forward
static void rmsnorm_backward_offset(float *dinp, float *dweight, const float *dout, const float *inp,
                                    const float *weight, float offset, const float *rstd, int N, int C) {
  if (dinp) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
      const float *x = inp + (long)n * C;   // (C)
      const float *d = dout + (long)n * C;  // (C)
      float *dx = dinp + (long)n * C;       // (C)
      float r = rstd[n];
      double dot = 0.0;  // sum_j dy_j * g_j * x_j, vector lanes as in the forward
#pragma omp simd reduction(+ : dot)
      for (int c = 0; c < C; c++) dot += (double)(d[c] * norm_gain(weight, offset, c)) * x[c];
      float coef = (float)(dot / C) * r * r * r;
      for (int c = 0; c < C; c++) dx[c] = r * norm_gain(weight, offset, c) * d[c] - x[c] * coef;
    }
  }
  if (dweight && weight) rmsnorm_backward_weight(dweight, dout, inp, rstd, N, C);
}

void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C) {
  rmsnorm_backward_offset(dinp, dweight, dout, inp, weight, 1.0f, rstd, N, C);
}

void rmsnorm_backward_gain(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                           const float *rstd, int N, int C) {
  rmsnorm_backward_offset(dinp, dweight, dout, inp, weight, 0.0f, rstd, N, C);
}
