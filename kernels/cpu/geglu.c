// kernels/cpu/geglu.c: Gemma's gated MLP activation on the CPU (see ops.h).
// Defines geglu_forward and geglu_backward: out = gelu_tanh(gate) * up, with
// the tanh approximation of GELU (HF "gelu_pytorch_tanh"):
//   gelu_tanh(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// tanh is vm_tanhf (vecmath.h), so each loop is one vectorized pass with no
// libm call; the NULL-gradient cases get their own loops so that no loop
// carries a branch.
#include "kernels/ops.h"

#include "kernels/cpu/vecmath.h"

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

// tanh of GELU's inner argument, in torch's CPU operation order:
// kappa * (x + c * (x * x * x))
static inline float gelu_tanh_inner(float x) {
  return vm_tanhf(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * (x * x * x)));
}

// d gelu/dx = 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2/pi) * (1 + 3 * 0.044715 * x^2)
static inline float gelu_tanh_grad(float x, float t) {
  float dinner = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}

// out, gate, up (n)
void geglu_forward(float *restrict out, const float *restrict gate, const float *restrict up, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    float x = gate[i];
    out[i] = 0.5f * x * (1.0f + gelu_tanh_inner(x)) * up[i];
  }
}

// dgate, dup (n) overwritten (either may be NULL); dout, gate, up (n)
void geglu_backward(float *restrict dgate, float *restrict dup, const float *restrict dout,
                    const float *restrict gate, const float *restrict up, size_t n) {
  if (dgate && dup) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
      float x = gate[i];
      float t = gelu_tanh_inner(x);
      dup[i] = dout[i] * 0.5f * x * (1.0f + t);
      dgate[i] = dout[i] * up[i] * gelu_tanh_grad(x, t);
    }
  } else if (dup) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
      float x = gate[i];
      dup[i] = dout[i] * 0.5f * x * (1.0f + gelu_tanh_inner(x));
    }
  } else if (dgate) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
      float x = gate[i];
      dgate[i] = dout[i] * up[i] * gelu_tanh_grad(x, gelu_tanh_inner(x));
    }
  }
}
