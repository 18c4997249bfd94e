// kernels/cpu/rope.c: rotary position embedding on the CPU (see ops.h).
// Defines rope_forward and rope_backward, rotate_half convention: dimension i
// is paired with i + hd/2 (not interleaved pairs 2i, 2i+1).
// The angles are computed in float32 step by step as Hugging Face does, so
// cos/sin match bitwise up to the libm used:
//   inv_freq_i = 1 / theta^((2i)/hd)   (float32, then / position_scale for
//                                        HF's "linear" rope_scaling)
//   angle      = float(pos) * inv_freq_i (one float32 product)
#include "kernels/ops.h"

#include <math.h>

// inv_freq (hd/2)
static void rope_inv_freq(float *inv_freq, int hd, float theta, float position_scale) {
  for (int i = 0; i < hd / 2; i++) {
    float exponent = (float)(2 * i) / (float)hd;
    inv_freq[i] = 1.0f / powf(theta, exponent);
    // HF applies linear scaling to the frequencies, not to the positions
    if (position_scale != 1.0f) inv_freq[i] = inv_freq[i] / position_scale;
  }
}

// Rotates every head of every row by +angle (direction = 1) or -angle
// (direction = -1, the transpose, which is the backward). In place is safe:
// each pair is read before either half is written.
// out, inp (N, nheads, hd), positions (N)
static void rope_rotate(float *out, const float *inp, const int *positions, int N, int nheads, int hd, float theta,
                        float position_scale, float direction) {
  int half = hd / 2;
  if (N <= 0 || half <= 0) return;
  float inv_freq[half];  // (hd/2)
  rope_inv_freq(inv_freq, hd, theta, position_scale);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float cos_row[half], sin_row[half];  // (hd/2) shared by every head of this row
    float pos = (float)positions[n];
    for (int i = 0; i < half; i++) {
      float angle = pos * inv_freq[i];
      cos_row[i] = cosf(angle);
      sin_row[i] = direction * sinf(angle);
    }
    for (int h = 0; h < nheads; h++) {
      const float *x = inp + ((long)n * nheads + h) * hd;  // (hd)
      float *y = out + ((long)n * nheads + h) * hd;        // (hd)
      for (int i = 0; i < half; i++) {
        float x1 = x[i], x2 = x[i + half];
        // x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1)
        y[i] = x1 * cos_row[i] - x2 * sin_row[i];
        y[i + half] = x2 * cos_row[i] + x1 * sin_row[i];
      }
    }
  }
}

// out, inp (N, nheads, hd), positions (N). In place allowed.
void rope_forward(float *out, const float *inp, const int *positions, int N, int nheads, int hd, float theta,
                  float position_scale) {
  rope_rotate(out, inp, positions, N, nheads, hd, theta, position_scale, 1.0f);
}

// The rotation is orthogonal, so its backward is the rotation by -angle.
// dinp, dout (N, nheads, hd), positions (N). In place allowed.
void rope_backward(float *dinp, const float *dout, const int *positions, int N, int nheads, int hd, float theta,
                   float position_scale) {
  rope_rotate(dinp, dout, positions, N, nheads, hd, theta, position_scale, -1.0f);
}
