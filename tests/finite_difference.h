// tests/finite_difference.h: the gradient check the model tests share
// (tests/test_model_grad.c, tests/test_gemma4.c): central differences of a
// float64 reference loss at a few entries of one tensor against the
// analytic gradient. Defines FdLossFn and fd_tensor_error.
#ifndef FIMI_TESTS_FINITE_DIFFERENCE_H
#define FIMI_TESTS_FINITE_DIFFERENCE_H

#include <math.h>
#include <stddef.h>

#include "core/rng.h"

// The reference loss at the current float64 parameters.
typedef double (*FdLossFn)(void *ctx);

// Checks param[0..numel) (the reference's float64 copy of one tensor, left
// unchanged) at 4 entries: the largest analytic gradient, because an error
// there is largest in absolute terms, and 3 drawn from pick. Returns
// max |fd - grad| / max |fd|; *max_fd gets max |fd| (near 0: the check is empty).
static inline double fd_tensor_error(double *param, const float *grad, size_t numel, Rng *pick, FdLossFn loss,
                                     void *ctx, double *max_fd) {
  size_t idx[4] = {0};
  for (size_t j = 1; j < numel; j++)
    if (fabsf(grad[j]) > fabsf(grad[idx[0]])) idx[0] = j;
  for (int e = 1; e < 4; e++) idx[e] = (size_t)(rng_next_u64(pick) % numel);
  double max_diff = 0, max_ref = 0;
  for (int e = 0; e < 4; e++) {
    double *p = &param[idx[e]], saved = *p, h = 1e-5 * fmax(1.0, fabs(saved));
    *p = saved + h;
    double lp = loss(ctx);
    *p = saved - h;
    double lm = loss(ctx);
    *p = saved;
    double fd = (lp - lm) / (2 * h);
    max_diff = fmax(max_diff, fabs(fd - grad[idx[e]]));
    max_ref = fmax(max_ref, fabs(fd));
  }
  *max_fd = max_ref;
  return max_diff / fmax(max_ref, 1e-8);
}

#endif
