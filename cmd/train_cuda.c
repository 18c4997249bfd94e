// cmd/train_cuda.c: `fimi train --device cuda`: see train_cuda.h.
#include "cmd/train_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"

#ifdef FIMI_HAVE_CUDA

#include "cmd/rollout_cuda.h"
#include "kernels/cuda/ops_cuda.h"
#include "model/gemma_cuda.h"
#include "train/state_cuda.h"

struct CudaTrainer {
  CudaContext *ctx;
  GemmaCudaModel gpu;
  CudaTrainState state;
  SftModelOps sft_ops;
  DpoModelOps dpo_ops;
  GrpoModelOps grpo_ops;
  int grpo_prefill_chunk;  // rollout.prefill_chunk
  int have_gpu, have_state;
};

// SFT: dlogprobs are known up front, so the LM head runs fused (one logits
// GEMM per chunk instead of two). Asynchronous errors surface at the sync.
static int gpu_forward_backward(void *ctx, const int *tokens, const int *targets, int B, int T,
                                const float *dlogprobs, float *logprobs, FimiError *err) {
  return gemma_cuda_forward_backward(&((CudaTrainer *)ctx)->gpu, tokens, targets, B, T, dlogprobs, logprobs, err);
}

static int gpu_forward(void *ctx, const int *tokens, const int *targets, int B, int T, float *logprobs,
                       FimiError *err) {
  return gemma_cuda_forward(&((CudaTrainer *)ctx)->gpu, tokens, targets, B, T, logprobs, err);
}

static int gpu_backward(void *ctx, const float *dlogprobs, FimiError *err) {
  return gemma_cuda_backward(&((CudaTrainer *)ctx)->gpu, dlogprobs, err);
}

// One process: the sums are already the totals.
static int gpu_all_reduce_sum(void *ctx, double *data, int count, FimiError *err) {
  (void)ctx, (void)data, (void)count, (void)err;
  return 0;
}

// GRPO's rollout policy: the GPU weights are current after every optimizer
// step (the update writes the bf16 working copy), so s is not needed.
static int gpu_make_policy(void *ctx, TrainState *s, int slots, int capacity, RolloutPolicy *out, FimiError *err) {
  CudaTrainer *t = ctx;
  (void)s;
  return rollout_policy_cuda_create(out, &t->gpu, slots, capacity, t->grpo_prefill_chunk, err);
}

static void gpu_free_policy(void *ctx, RolloutPolicy *p) {
  (void)ctx;
  rollout_policy_cuda_free(p);
}

int cuda_trainer_create(CudaTrainer **out, GemmaModel *model, const AdamWConfig *adamw, const AdamWDecayRules *rules,
                        uint64_t seed, const CudaTrainerOptions *options, TrainState *state, FimiError *err) {
  *out = NULL;
  CudaTrainer *t = fimi_calloc(1, sizeof *t, err);
  if (!t) return -1;
  int rc = cuda_context_create(&t->ctx, 0, err);
  if (rc == 0) rc = gemma_cuda_create(&t->gpu, &model->config, t->ctx, err);
  t->have_gpu = rc == 0;
  if (rc == 0) rc = gemma_cuda_set_attention(&t->gpu, options->attention, err);
  if (rc == 0) gemma_cuda_set_recompute(&t->gpu, options->recompute);
  if (rc == 0) rc = cuda_train_state_init(&t->state, &t->gpu, model, adamw, rules, seed, err);
  t->have_state = rc == 0;
  if (rc != 0) {
    cuda_trainer_free(t);
    return fimi_fail_wrap(err, "--device cuda");
  }
  t->sft_ops = (SftModelOps){gpu_forward_backward, gpu_forward, t};
  // One GPU: the whole micro-batch in one call (as the CPU's plain path).
  t->dpo_ops = (DpoModelOps){gpu_forward, gpu_backward, gpu_all_reduce_sum, t, 0, 1, 1 << 30};
  t->grpo_ops = (GrpoModelOps){gpu_forward, gpu_backward, gpu_all_reduce_sum, t, 0, 1, 1 << 30};
  cuda_train_state_attach(state, &t->state);
  *out = t;
  return 0;
}

void cuda_trainer_use_sft(CudaTrainer *t, SftObjective *sft) { sft_objective_set_model_ops(sft, &t->sft_ops); }

void cuda_trainer_use_dpo(CudaTrainer *t, DpoObjective *dpo) { dpo_objective_set_model_ops(dpo, &t->dpo_ops); }

const GrpoModelOps *cuda_trainer_use_grpo(CudaTrainer *t, int prefill_chunk, GrpoModelAccess *access) {
  t->grpo_prefill_chunk = prefill_chunk;
  *access = (GrpoModelAccess){gpu_make_policy, gpu_free_policy, t};
  return &t->grpo_ops;
}

void cuda_trainer_free(CudaTrainer *t) {
  if (!t) return;
  if (t->have_state) cuda_train_state_free(&t->state);
  if (t->have_gpu) gemma_cuda_free(&t->gpu);
  if (t->ctx) cuda_context_destroy(t->ctx);
  free(t);
}

#else  // no CUDA backend

int cuda_trainer_create(CudaTrainer **out, GemmaModel *model, const AdamWConfig *adamw, const AdamWDecayRules *rules,
                        uint64_t seed, const CudaTrainerOptions *options, TrainState *state, FimiError *err) {
  (void)model, (void)adamw, (void)rules, (void)seed, (void)options, (void)state;
  *out = NULL;
  return device_require(DEVICE_CUDA, err);  // says "built without CUDA"
}

void cuda_trainer_use_sft(CudaTrainer *t, SftObjective *sft) { (void)t, (void)sft; }
void cuda_trainer_use_dpo(CudaTrainer *t, DpoObjective *dpo) { (void)t, (void)dpo; }
const GrpoModelOps *cuda_trainer_use_grpo(CudaTrainer *t, int prefill_chunk, GrpoModelAccess *access) {
  (void)t, (void)prefill_chunk;
  memset(access, 0, sizeof *access);
  return NULL;
}
void cuda_trainer_free(CudaTrainer *t) { (void)t; }

#endif
