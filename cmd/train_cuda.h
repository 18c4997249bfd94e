// cmd/train_cuda.h: `fimi train --device cuda`: the glue between
// cmd/cmd_train.c and the GPU: the model on GPU 0 (model/gemma_cuda.h), its
// TrainState (train/state_cuda.h), the SFT / DPO objectives' model
// callbacks (SftModelOps, DpoModelOps with world 1) and GRPO's (the rollout
// policy on the GPU, cmd/rollout_cuda.h, and GrpoModelOps with world 1).
// Defines CudaTrainer and its functions (cmd/train_cuda.c) and, for ZeRO-3
// across GPUs, CudaSharded (cmd/train_cuda_sharded.c); without the CUDA
// backend they fail with a clear message.
#ifndef FIMI_CMD_TRAIN_CUDA_H
#define FIMI_CMD_TRAIN_CUDA_H

#include <stdint.h>

#include "core/error.h"
#include "dpo/objective.h"
#include "model/gemma.h"
#include "cmd/sharded_model.h"
#include "optim/adamw.h"
#include "parallel/comm.h"
#include "parallel/zero3.h"
#include "rl/grpo.h"
#include "train/sft.h"
#include "train/state.h"

typedef struct CudaTrainer CudaTrainer;

// The config keys the GPU model takes (model/gemma_cuda.h).
typedef struct CudaTrainerOptions {
  const char *attention;  // cuda.attention: "fimi" or "cudnn" (gemma_cuda_set_attention)
  int recompute;          // model.recompute (gemma_cuda_set_recompute)
} CudaTrainerOptions;

// Uploads model (the loaded fp32 weights) to GPU 0 and makes *state a
// TrainState on it (state->model = model: the checkpoint target).
// seed: train.seed (the stochastic rounding of the bf16 weights).
int cuda_trainer_create(CudaTrainer **out, GemmaModel *model, const AdamWConfig *adamw, const AdamWDecayRules *rules,
                        uint64_t seed, const CudaTrainerOptions *options, TrainState *state, FimiError *err);
// Points an objective (after its init) at the GPU model.
void cuda_trainer_use_sft(CudaTrainer *t, SftObjective *sft);
void cuda_trainer_use_dpo(CudaTrainer *t, DpoObjective *dpo);
// GRPO on the GPU. *access (for grpo_objective_init) makes each step's
// rollout policy over the GPU model's bf16 working weights, the ones the
// last optimizer step wrote (its own KV cache of `slots` x `capacity`, freed
// after the step's rollouts; prefill_chunk: rollout.prefill_chunk; the CPU's
// rollout.row_invariant does not apply). The returned ops (for
// grpo_objective_set_model_ops; owned by t) run the loss's forward and
// backward on the GPU model: rank 0 of world 1, the whole micro-batch in one
// call, all_reduce_sum the identity. The KL reference (grpo.kl_coef > 0)
// stays the CPU GemmaModel given to the objective (fp32, on the CPU).
// Without the CUDA backend: *access zeroed, NULL.
const GrpoModelOps *cuda_trainer_use_grpo(CudaTrainer *t, int prefill_chunk, GrpoModelAccess *access);
void cuda_trainer_free(CudaTrainer *t);  // NULL: nothing

// ZeRO-3 across GPUs (`mpirun ... fimi train --device cuda`; SFT, DPO and
// GRPO): one GPU per
// train rank (its node-local rank among the train ranks of comm, modulo the
// node's GPUs; more train ranks on a node than GPUs is refused), the device
// collectives (collectives: "nccl", "mpi" (staged through host memory) or
// "auto": NCCL where it is built, else MPI; dist.device_collectives) and a
// Zero3Cuda over model's weights (parallel/zero3_cuda.h), driven through
// *ops / *ctx (cmd/sharded_model.h). The optimizer the checkpoints save is
// a host mirror of the shards' moments registered as the CPU ZeRO-3
// registers its own (same names and shapes), so a checkpoint of either
// backend resumes on the other at the same world size.
typedef struct CudaSharded CudaSharded;
int cuda_sharded_create(CudaSharded **out, const GemmaModel *model, const Zero3Config *config, Communicator *comm,
                        uint64_t seed, const CudaTrainerOptions *options, const char *collectives,
                        const ShardedModelOps **ops, FimiError *err);
void cuda_sharded_free(CudaSharded *s);  // NULL: nothing
// GRPO's rollouts on the GPU shards: *access (grpo_objective's) makes each
// step's rollout policy over a whole bf16 decode model on this rank's GPU
// (allocated at the first step and kept: the full model's bf16 weights once
// more per GPU), filled by gathering the working shards
// (zero3_cuda_gather_working): the weights the loss scores with.
void cuda_sharded_use_grpo(CudaSharded *s, int prefill_chunk, GrpoModelAccess *access);

#endif
