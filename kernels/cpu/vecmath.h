// kernels/cpu/vecmath.h: float exp and tanh that GCC can vectorize.
// Defines vm_expf and vm_tanhf (static inline, header only).
//
// Why not libm: glibc's expf/tanhf are scalar calls, and GCC only swaps in
// its vector variants under -ffast-math, which also assumes there are no
// infinities (the online softmax starts from -INFINITY). These functions are
// straight-line code (every "branch" is a select), so a loop that calls them
// vectorizes at -O3 with plain IEEE semantics. They are deterministic: the
// same input gives the same bits, scalar or vector, on a given build (FMA
// contraction is decided at compile time, so the bits may differ between a
// -march=native build and a portable one, never between runs or threads).
//
// Accuracy, measured by tests/test_ops_vecmath.c against double exp/tanh
// over ~10M points each: vm_expf within 1.3 ulp, vm_tanhf within 2.1 ulp
// (docs/kernels-cpu.md has the numbers for both builds).
//
// Special values: vm_expf(NaN) = NaN, vm_expf(-INFINITY) = 0 exactly,
// 0 below the underflow limit (results in the subnormal range are computed),
// +INFINITY above ln(FLT_MAX). vm_tanhf(NaN) = NaN, vm_tanhf(+-0) = +-0,
// saturates to +-1.
#ifndef FIMI_KERNELS_CPU_VECMATH_H
#define FIMI_KERNELS_CPU_VECMATH_H

#include <math.h>
#include <stdint.h>

// Bit casts through a union: GCC turns them into register moves and still
// vectorizes; memcpy would do the same, this reads shorter.
static inline uint32_t vm_float_bits(float x) {
  union {
    float f;
    uint32_t u;
  } c = {.f = x};
  return c.u;
}

static inline float vm_bits_float(uint32_t u) {
  union {
    uint32_t u;
    float f;
  } c = {.u = u};
  return c.f;
}

// exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2 in [-ln2/2, ln2/2].
// ln2 is split in a hi part with 9 significant bits (so n * hi is exact for
// |n| <= 150) and a lo correction, so r keeps full float precision. exp(r)
// is its Taylor polynomial to degree 7: the first dropped term,
// (ln2/2)^8 / 8!, is 5e-9 relative, well under half an ulp.
#define VM_LOG2E 1.44269504088896341f
#define VM_LN2_HI 0.693359375f
#define VM_LN2_LO -2.12194440e-4f
// Above ln(FLT_MAX) the result overflows; below ln(2^-150) it rounds to 0.
#define VM_EXP_OVERFLOW 88.72283935546875f
#define VM_EXP_UNDERFLOW -103.97208404541016f
// Adding 1.5 * 2^23 rounds a float of magnitude < 2^22 to an integer (the
// current rounding mode, to nearest) and leaves it in the low mantissa bits.
#define VM_ROUND_MAGIC 12582912.0f

static inline float vm_expf(float x) {
  // clamp so that n stays in [-150, 128]; a NaN compares false and becomes
  // the lower bound here (the NaN is restored at the end)
  float xc = x > VM_EXP_UNDERFLOW ? x : VM_EXP_UNDERFLOW;
  xc = xc < VM_EXP_OVERFLOW ? xc : VM_EXP_OVERFLOW;
  float shifted = xc * VM_LOG2E + VM_ROUND_MAGIC;
  float n = shifted - VM_ROUND_MAGIC;  // round(x / ln2), as a float
  // the integer n from the mantissa bits: no float-to-int conversion
  int32_t ni = (int32_t)(vm_float_bits(shifted) - vm_float_bits(VM_ROUND_MAGIC));
  float r = (xc - n * VM_LN2_HI) - n * VM_LN2_LO;
  // exp(r) by Horner, 1/k! coefficients
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n in two factors, each a normal float: n = -150 or 128 alone is not
  // representable as a float exponent, and the split lets results in the
  // subnormal range round once, in the last product
  int32_t n1 = ni / 2, n2 = ni - n1;
  float scale1 = vm_bits_float((uint32_t)(n1 + 127) << 23);
  float scale2 = vm_bits_float((uint32_t)(n2 + 127) << 23);
  float result = (p * scale1) * scale2;
  result = x > VM_EXP_OVERFLOW ? INFINITY : result;
  result = x < VM_EXP_UNDERFLOW ? 0.0f : result;
  return x != x ? x : result;
}

// tanh(a), a = |x|: below 0.5 its odd Taylor series to x^15 (first dropped
// term 1e-8 relative at 0.5); from 0.5 on, 1 - 2 / (exp(2a) + 1), whose
// cancellation costs at most a factor 2 there (tanh(0.5) = 0.46 vs 0.54
// subtracted). exp(2a) = inf beyond 44 gives exactly 1. Both are computed
// and one is selected, so the function stays branch-free.
#define VM_TANH_POLY_LIMIT 0.5f

static inline float vm_tanhf(float x) {
  float a = fabsf(x);
  float a2 = a * a;
  // tanh(a) = a (1 + a2 (c3 + a2 (c5 + ...))), c_k the Taylor coefficients
  float q = 929569.0f / 638512875.0f * -1.0f;
  q = q * a2 + 21844.0f / 6081075.0f;
  q = q * a2 - 1382.0f / 155925.0f;
  q = q * a2 + 62.0f / 2835.0f;
  q = q * a2 - 17.0f / 315.0f;
  q = q * a2 + 2.0f / 15.0f;
  q = q * a2 - 1.0f / 3.0f;
  float small = a + a * (a2 * q);
  float large = 1.0f - 2.0f / (vm_expf(2.0f * a) + 1.0f);
  float t = a < VM_TANH_POLY_LIMIT ? small : large;
  return copysignf(t, x);  // NaN: a NaN stays NaN through `large`
}

#endif
