// kernels/cpu/geglu.c: Gemma's gated MLP activation on the CPU (see ops.h).
// Defines geglu_forward and geglu_backward: out = gelu_tanh(gate) * up, with
// the tanh approximation of GELU (HF "gelu_pytorch_tanh"):
//   gelu_tanh(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
#include "kernels/ops.h"

#include <math.h>

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

// out, gate, up (n)
void geglu_forward(float *out, const float *gate, const float *up, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float x = gate[i];
    // same operation order as torch's CPU kernel: kappa * (x * x * x)
    float inner = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * (x * x * x));
    out[i] = 0.5f * x * (1.0f + tanhf(inner)) * up[i];
  }
}

// d gelu/dx = 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2/pi) * (1 + 3 * 0.044715 * x^2)
// with t = tanh(inner). dgate, dup (n) overwritten (either may be NULL);
// dout, gate, up (n)
void geglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float x = gate[i];
    float inner = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * (x * x * x));
    float t = tanhf(inner);
    if (dup) dup[i] = dout[i] * 0.5f * x * (1.0f + t);
    if (dgate) {
      float dinner = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * x * x);
      float dgelu = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
      dgate[i] = dout[i] * up[i] * dgelu;
    }
  }
}
