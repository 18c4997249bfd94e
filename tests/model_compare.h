// tests/model_compare.h: what the two tests of the GPU model code share
// (tests/gpu/test_gpu_model.c on a GPU, tests/standin/test_gemma_cuda_standin.c
// on the host stand-in): the CPU reference's weights rounded to bf16, the
// SFT batch both use, and the error measures. Defines round_model_to_bf16,
// make_sft_batch, logprob_error and RelAcc (rel_add, rel_value).
#ifndef FIMI_TESTS_MODEL_COMPARE_H
#define FIMI_TESTS_MODEL_COMPARE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "model/gemma.h"
#include "model/safetensors.h"  // float_to_bf16 (nearest even), bf16_to_float

// The CPU model's fp32 weights rounded to bf16, the values the GPU holds.
static inline void round_model_to_bf16(GemmaModel *m) {
  for (size_t i = 0; i < m->globals_numel; i++) m->globals[i] = bf16_to_float(float_to_bf16(m->globals[i]));
  for (int l = 0; l < m->config.num_hidden_layers; l++)
    for (size_t i = 0; i < m->layer_numel; i++) m->layers[l][i] = bf16_to_float(float_to_bf16(m->layers[l][i]));
}

// tokens, targets, dlogprobs (B, T): random tokens with one padding token (a
// zero embedding row that gets no input-side gradient), next-token targets
// with the last position and every 7th (a "prompt" mask) not scored, and
// SFT's mean-NLL dlogprobs.
static inline void make_sft_batch(const GemmaConfig *cfg, int B, int T, int *tokens, int *targets, float *dlogprobs,
                                  uint64_t seed) {
  Rng rng;
  rng_seed(&rng, seed);
  int V = cfg->vocab_size, N = B * T, count = 0;
  for (int i = 0; i < N; i++) tokens[i] = 1 + (int)(rng_next_u64(&rng) % (uint64_t)(V - 1));
  if (T > 3) tokens[3] = cfg->pad_token_id >= 0 ? cfg->pad_token_id : 0;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      int i = b * T + t;
      targets[i] = t + 1 < T && t % 7 != 2 ? tokens[i + 1] : -1;
      count += targets[i] >= 0;
    }
  for (int i = 0; i < N; i++) dlogprobs[i] = targets[i] >= 0 ? -1.0f / (float)count : 0.0f;
}

// Max |got - ref| over the scored rows; counts unscored rows of `got` that
// are not exactly 0 (the GPU model writes 0 there).
static inline double logprob_error(const float *got, const float *ref, const int *targets, int N,
                                   int *bad_unscored) {
  double max_err = 0;
  *bad_unscored = 0;
  for (int i = 0; i < N; i++) {
    if (targets[i] < 0) {
      *bad_unscored += got[i] != 0.0f;
      continue;
    }
    double e = fabs((double)got[i] - (double)ref[i]);
    if (!(e <= max_err)) max_err = isfinite(e) ? e : INFINITY;
  }
  return max_err;
}

// Running max |got - ref| and max |ref| over many rows; their ratio is the
// relative error of all the rows together (a non-finite got: INFINITY).
typedef struct RelAcc {
  double max_diff, max_ref;
  int nonfinite;
} RelAcc;

static inline void rel_add(RelAcc *a, const float *got, const float *ref, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) a->nonfinite++;
    double d = fabs((double)got[i] - (double)ref[i]);
    if (d > a->max_diff) a->max_diff = d;
    if (fabs(ref[i]) > a->max_ref) a->max_ref = fabs(ref[i]);
  }
}

static inline double rel_value(const RelAcc *a) {
  return a->nonfinite ? INFINITY : a->max_diff / (a->max_ref > 1e-30 ? a->max_ref : 1e-30);
}

#endif
