// optim/clip.h: global gradient-norm clipping, as torch.nn.utils.
// clip_grad_norm_ does it: coefficient max_norm / (norm + 1e-6), applied
// only when below 1. Defines ClipResult, clip_local_sumsq (a rank's part),
// clip_from_sumsq (the decision, from the sum over all ranks) and
// clip_grad_norm (both, plus scaling in place, for a single process).
//
// Sharded use (ZeRO-3): each rank sums the squares of its gradient shards
// (clip_local_sumsq), the ranks all-reduce that one double, and every rank
// calls clip_from_sumsq on the total, so all ranks take the same decision.
// Replicated tensors (kept whole on every rank) must be counted on one rank
// only, or their squares would be added `world` times. The coefficient is
// then passed to adamw_step as grad_scale, so no extra pass over the
// gradients is needed.
#ifndef FIMI_OPTIM_CLIP_H
#define FIMI_OPTIM_CLIP_H

#include <stddef.h>

#include "core/error.h"

// torch's clip_grad_norm_ adds this to the norm before dividing.
#define CLIP_NORM_EPS 1e-6

typedef struct ClipResult {
  double norm;   // the global L2 norm before clipping (reported as grad_norm)
  float scale;   // multiply gradients by this: min(1, max_norm / (norm + 1e-6)); 1 when not clipping
  int finite;    // 0 when the norm is inf or NaN: skip the step (scale is then 1)
  int clipped;   // 1 when scale < 1
} ClipResult;

// Sum of squares (double) over `count` gradient buffers, buffer i holding
// numels[i] floats. Deterministic (kernels' sum_squares per buffer, buffers
// added in order).
double clip_local_sumsq(const float *const *grads, const size_t *numels, int count);
// The decision from the global sum of squares. max_norm <= 0 disables
// clipping (scale 1) but the norm is still reported. Fails only on a NaN
// max_norm.
int clip_from_sumsq(double sumsq, double max_norm, ClipResult *out, FimiError *err);
// Single process: norm of all buffers, then (if finite and clipping) scales
// every gradient in place by out->scale, as torch does.
int clip_grad_norm(float *const *grads, const size_t *numels, int count, double max_norm, ClipResult *out,
                   FimiError *err);

#endif
