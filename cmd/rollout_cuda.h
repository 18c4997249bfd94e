// cmd/rollout_cuda.h: the rollout engine's policy on the GPU (rl/rollout.h's
// RolloutPolicy over model/gemma_cuda.h): prefill, decode and the shared
// prompt's sequence copy run on the device in the policy's own
// GemmaCudaKVCache; logits come back to the host, where the engine samples
// (as gemma_cuda_generate does), so the sampling rules and RNG streams are
// the CPU policy's. Defines rollout_policy_cuda_create / _free. Only
// compiled with the CUDA backend (FIMI_HAVE_CUDA).
#ifndef FIMI_CMD_ROLLOUT_CUDA_H
#define FIMI_CMD_ROLLOUT_CUDA_H

#ifdef FIMI_HAVE_CUDA

#include "core/error.h"
#include "model/gemma_cuda.h"
#include "rl/rollout.h"

// A GPU policy over model (borrowed: the trainer's bf16 working weights, read
// at every call, so an optimizer step between rollouts is seen) with `slots`
// sequences of `capacity` tokens; chunk: tokens per prefill pass
// (rollout.prefill_chunk). Device memory: the KV cache, L * slots * capacity
// * nkv * hd * 2 bf16, plus one call's activations for max(slots, chunk)
// rows and (slots, V) fp32 logits. Free with rollout_policy_cuda_free.
int rollout_policy_cuda_create(RolloutPolicy *p, GemmaCudaModel *model, int slots, int capacity, int chunk,
                               FimiError *err);
void rollout_policy_cuda_free(RolloutPolicy *p);

#endif  // FIMI_HAVE_CUDA
#endif
