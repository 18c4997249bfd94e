// tests/model_compare.h: what the two tests of the GPU model code share
// (tests/gpu/test_gpu_model.c on a GPU, tests/standin/test_gemma_cuda_standin.c
// on the host stand-in): the CPU reference's weights rounded to bf16, the
// SFT batch both use, and the error measures. Defines round_model_to_bf16,
// temper_gemma4_scores, grad_tolerance, make_sft_batch, logprob_error and RelAcc (rel_add, rel_value).
#ifndef FIMI_TESTS_MODEL_COMPARE_H
#define FIMI_TESTS_MODEL_COMPARE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/rng.h"
#include "model/gemma.h"
#include "model/safetensors.h"  // float_to_bf16 (nearest even), bf16_to_float

// The CPU model's fp32 weights rounded to bf16, the values the GPU holds.
static inline void round_model_to_bf16(GemmaModel *m) {
  for (size_t i = 0; i < m->globals_numel; i++) m->globals[i] = bf16_to_float(float_to_bf16(m->globals[i]));
  for (int l = 0; l < m->config.num_hidden_layers; l++)
    for (size_t i = 0; i < m->layer_numel; i++) m->layers[l][i] = bf16_to_float(float_to_bf16(m->layers[l][i]));
}

// Gemma 4 scales attention scores by 1 (not hd^-0.5): with q_norm gains at
// their init of 1 the normed queries and keys have norm sqrt(hd), so random
// scores have a spread of sqrt(hd) (22.6 at hd 512) and each softmax is
// nearly one-hot; a bf16 rounding of q or k (2^-9 relative) then moves a
// score by ~hd / 512, which flips which key wins and makes the bf16 and fp32
// models disagree by order 1 for reasons of precision alone. Trained models
// learn small q_norm gains; set them to hd^-0.5 (scores of spread ~1, as a
// standard attention's) on both models, before rounding to bf16.
static inline void temper_gemma4_scores(GemmaModel *m) {
  if (m->config.family != GEMMA_FAMILY_GEMMA4) return;
  for (int i = 0; i < m->num_tensors; i++) {
    const GemmaTensor *t = &m->tensors[i];
    if (!strstr(t->name, "self_attn.q_norm.weight")) continue;
    float *w = gemma_tensor_data(m, t);
    for (size_t j = 0; j < t->numel; j++) w[j] = 1.0f / sqrtf((float)t->numel);  // numel = this layer's hd
  }
}

// The tolerance of a parameter tensor's gradient: tol_cancelling for those
// whose terms largely cancel (norm weights, q_proj, k_proj:
// tests/gpu/test_gpu_model.c explains), tol_model for the rest, and
// tol_cancelling for every Gemma 4 tensor: its layers add ~10 bf16-rounded
// ops (per-layer input block, value norm, layer scalar) and the embedding
// also feeds the per-layer projection. On the host stand-in tiny-g4's
// gradients measured up to 6.4e-2 at B 3 and 7.9e-2 at B 2
// (per_layer_input_gate; tiny's worst is 2.6e-2), while dropping the gradient kv-shared layers send their source,
// or the keys-as-values term of k_proj's, gives 0.25 to 0.6 on most tensors.
static inline double grad_tolerance(const GemmaModel *m, const GemmaTensor *t, double tol_model,
                                    double tol_cancelling) {
  if (m->config.family == GEMMA_FAMILY_GEMMA4) return tol_cancelling;
  int cancelling = t->is_norm || strstr(t->name, "q_proj") || strstr(t->name, "k_proj");
  return cancelling ? tol_cancelling : tol_model;
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
