// kernels/cpu/adamw.c: the optimizer ops on the CPU (see ops.h): the AdamW
// update (fp32, torch.optim.AdamW's order of operations) and the sum of
// squares behind the global gradient norm (double, fixed blocks).
#include <math.h>

#include "kernels/ops.h"

// torch's lerp(start, end, w): start + w * (end - start) for |w| < 0.5,
// else end - (end - start) * (1 - w); the two forms keep the result exact at
// w = 0 and w = 1 respectively.
static inline float lerp_torch(float start, float end, float weight) {
  return fabsf(weight) < 0.5f ? start + weight * (end - start) : end - (end - start) * (1.0f - weight);
}

void adamw_update(float *param, float *m, float *v, const float *grad, size_t n, const AdamWStep *step) {
  // Python-float arithmetic of torch's _single_tensor_adam, in double.
  double t = (double)step->step;
  double bias_correction1 = 1.0 - pow(step->beta1, t);
  double bias_correction2 = 1.0 - pow(step->beta2, t);
  // Scalars become fp32 where torch passes them to an fp32 tensor op.
  float decay = (float)(1.0 - step->lr * step->weight_decay);
  int decays = step->weight_decay != 0.0;
  float weight1 = (float)(1.0 - step->beta1);
  float beta2 = (float)step->beta2;
  float weight2 = (float)(1.0 - step->beta2);
  float neg_step_size = (float)(-(step->lr / bias_correction1));
  float bias_correction2_sqrt = (float)sqrt(bias_correction2);
  float eps = (float)step->eps;
  float grad_scale = step->grad_scale;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float g = grad_scale == 1.0f ? grad[i] : grad[i] * grad_scale;
    float p = decays ? param[i] * decay : param[i];
    float mi = lerp_torch(m[i], g, weight1);
    float vi = v[i] * beta2 + weight2 * g * g;  // addcmul: self + value * t1 * t2
    float denom = sqrtf(vi) / bias_correction2_sqrt + eps;
    param[i] = p + neg_step_size * (mi / denom);  // addcdiv: self + value * (t1 / t2)
    m[i] = mi;
    v[i] = vi;
  }
}

// Blocks: at most SUMSQ_MAX_BLOCKS of a size that depends on n only; each is
// summed by one thread into SUMSQ_LANES interleaved accumulators (independent
// chains the compiler can pipeline), then lanes and blocks are added in a
// fixed order. So no allocation and no dependence on the thread count.
#define SUMSQ_MAX_BLOCKS 256
#define SUMSQ_LANES 8

static double block_sum_squares(const float *x, size_t n) {
  double lane[SUMSQ_LANES] = {0};
  size_t i = 0;
  for (; i + SUMSQ_LANES <= n; i += SUMSQ_LANES)
    for (int k = 0; k < SUMSQ_LANES; k++) lane[k] += (double)x[i + k] * (double)x[i + k];
  for (int k = 0; i < n; i++, k++) lane[k] += (double)x[i] * (double)x[i];
  double sum = 0;
  for (int k = 0; k < SUMSQ_LANES; k++) sum += lane[k];
  return sum;
}

void sum_squares(double *out, const float *x, size_t n) {
  size_t block = (n + SUMSQ_MAX_BLOCKS - 1) / SUMSQ_MAX_BLOCKS;
  block = (block + SUMSQ_LANES - 1) / SUMSQ_LANES * SUMSQ_LANES;
  if (block == 0) block = SUMSQ_LANES;
  long num_blocks = (long)((n + block - 1) / block);
  double partial[SUMSQ_MAX_BLOCKS];
#pragma omp parallel for schedule(static)
  for (long b = 0; b < num_blocks; b++) {
    size_t begin = (size_t)b * block;
    size_t count = n - begin < block ? n - begin : block;
    partial[b] = block_sum_squares(x + begin, count);
  }
  double sum = 0;
  for (long b = 0; b < num_blocks; b++) sum += partial[b];
  out[0] = sum;
}
