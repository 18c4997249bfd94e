// kernels/cpu/elementwise.c: elementwise ops on the CPU (see ops.h).
// Defines residual_add.
#include "kernels/ops.h"

// out = a + b. out, a, b (n); in place allowed (out == a or out == b), since
// each element is read before it is written.
void residual_add(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
