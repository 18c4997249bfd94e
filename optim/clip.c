// optim/clip.c: global gradient-norm clipping (see clip.h).
#include <math.h>

#include "kernels/ops.h"
#include "optim/clip.h"

double clip_local_sumsq(const float *const *grads, const size_t *numels, int count) {
  double total = 0;
  for (int i = 0; i < count; i++) {
    double s = 0;
    if (numels[i] > 0) sum_squares(&s, grads[i], numels[i]);
    total += s;
  }
  return total;
}

int clip_from_sumsq(double sumsq, double max_norm, ClipResult *out, FimiError *err) {
  out->norm = sqrt(sumsq);  // NaN for a NaN (or negative, impossible) sum
  out->scale = 1.0f;
  out->clipped = 0;
  out->finite = isfinite(out->norm) != 0;
  if (isnan(max_norm)) return fimi_fail(err, "optim.max_grad_norm is NaN");
  if (!out->finite || max_norm <= 0) return 0;
  double coef = max_norm / (out->norm + CLIP_NORM_EPS);
  if (coef < 1.0) {
    out->scale = (float)coef;
    out->clipped = 1;
  }
  return 0;
}

int clip_grad_norm(float *const *grads, const size_t *numels, int count, double max_norm, ClipResult *out,
                   FimiError *err) {
  double sumsq = clip_local_sumsq((const float *const *)grads, numels, count);
  if (clip_from_sumsq(sumsq, max_norm, out, err) != 0) return -1;
  if (!out->clipped) return 0;
  for (int i = 0; i < count; i++) {
    float *g = grads[i];
    float s = out->scale;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < numels[i]; k++) g[k] *= s;
  }
  return 0;
}
