// parallel/zero3.h: ZeRO-3 training of the Gemma model over a Communicator
// (docs/distributed.md, "ZeRO-3"). Defines Zero3Config, Zero3 (a rank's
// shards, gather buffers and optimizer), and the calls the training loop
// makes: zero3_create, zero3_zero_grads, zero3_forward_backward (SFT-style),
// zero3_forward + zero3_backward (DPO/GRPO-style), zero3_step (global-norm
// clipping + AdamW on the shards), zero3_gather_full_weights (for saving),
// zero3_load_full_weights (for loading/resuming), and the optimizer state.
//
// What each rank holds (docs/distributed.md has the memory formula):
// - every transformer layer and the globals (tied embedding + final norm),
//   each one flat buffer split into equal padded shards (parallel/shard.h): the
//   rank's fp32 shard (master weights), its gradient as a double accumulator
//   plus the float copy AdamW reads, and the AdamW moments of the shard
//   (registered as "globals" and "layers.N", shard_size floats each);
// - a replicated fp32 working copy of the globals (the embedding is read at
//   both ends of the model), all-gathered from the shards after each update,
//   and its full per-micro-batch gradient;
// - two gathered-layer working buffers (current + prefetched), one full layer
//   gradient buffer and one receive buffer, reused by every layer.
// The model's own per-layer buffers are freed: the model reads layer l from a
// working buffer through its layer hooks (model/gemma.h).
//
// Gradients and world-size invariance: each zero3_forward_backward (or
// zero3_backward) call is one micro-batch ("unit"). Right after a layer's
// backward, the unit's layer gradient is scattered (MPI_Alltoall, pure data
// movement) so that every shard owner holds all ranks' pieces, and the owner
// adds them in rank order into its double accumulator; the globals' gradient
// likewise after the whole backward. If the global batch is cut into units of
// a fixed size and unit u goes to rank u % world as its (u / world)-th call of
// the step, every owner adds the units in order u = 0, 1, 2, ... in double, so
// the gradients, and with them the weights, are bitwise the same at every
// world size (the clipping norm's sum may differ in the last bits). dlogprobs
// must be normalized by the GLOBAL batch (e.g. SFT: -mask / global count).
//
// Every call below is collective: all ranks call it in the same order. Do
// not copy a Zero3 after zero3_create (the model's hooks point into it).
#ifndef FIMI_PARALLEL_ZERO3_H
#define FIMI_PARALLEL_ZERO3_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/shard.h"
#include "model/gemma.h"
#include "optim/adamw.h"
#include "optim/clip.h"

typedef struct Zero3Config {
  AdamWConfig adamw;
  AdamWDecayRules decay;
  int recompute;  // the model's activation recomputation (1 = on)
} Zero3Config;

// adamw_config_default, adamw_decay_rules_default, recompute 0.
void zero3_config_default(Zero3Config *config);

// One sharded flat buffer: the globals or one layer.
typedef struct Zero3Buffer {
  ShardSpec spec;
  float *shard;  // (shard_size) fp32 master weights; padding stays 0
  float *grad;   // (shard_size) float gradient for AdamW, set from acc by zero3_step
  double *acc;   // (shard_size) gradient accumulated over the step's units
} Zero3Buffer;

typedef struct Zero3 {
  Communicator *comm;   // borrowed
  GemmaModel model;     // globals: replicated working copy + full gradient; layers[] are NULL
  GemmaLayerHooks hooks;
  int num_layers;
  Zero3Buffer globals;
  Zero3Buffer layers[GEMMA_MAX_LAYERS];
  // Gathered layers: work[i] holds layer work_layer[i] (-1 none); a
  // nonblocking all-gather into it is in flight while work_req[i] is active.
  float *work[2];
  int work_layer[2];
  MPI_Request work_req[2];
  float *grad_full;     // (layer padded) the current layer's full unit gradient
  float *recv;          // (max padded) the pieces of this rank's shard from every rank
  int backward_layer;   // layer whose gradient grad_full holds (-1 none)
  AdamWDecayRules decay_rules;
  AdamW opt;
  int64_t gathers;      // layer all-gathers issued (statistics for tests)
} Zero3;

// Creates the sharded model on every rank: the full model is initialized
// with gemma_model_init_random(seed) (the same on every rank), each rank
// keeps its shards, and the full layers are freed. comm must outlive z.
int zero3_create(Zero3 *z, const GemmaConfig *cfg, const Zero3Config *config, Communicator *comm, uint64_t seed,
                 FimiError *err);
void zero3_free(Zero3 *z);

// Sets every layer shard and the globals from a full model (e.g. loaded from
// a checkpoint); src must have the same config. Local: no communication.
int zero3_load_full_weights(Zero3 *z, const GemmaModel *src, FimiError *err);
// Collective: writes the full weights into dst (a model created with the same
// config, layers allocated) on every rank.
int zero3_gather_full_weights(Zero3 *z, GemmaModel *dst, FimiError *err);

void zero3_zero_grads(Zero3 *z);
// gemma_forward_backward on this rank's unit; each layer's gradient goes to
// its shard owners right after the layer's backward, the globals' after the
// whole backward (see above).
int zero3_forward_backward(Zero3 *z, const int *tokens, const int *targets, int B, int T, const float *dlogprobs,
                           float *logprobs, FimiError *err);
// The two halves, for losses that need the log-probs first (DPO).
int zero3_forward(Zero3 *z, const int *tokens, const int *targets, int B, int T, float *logprobs, FimiError *err);
int zero3_backward(Zero3 *z, const float *dlogprobs, FimiError *err);

// One optimizer step: rounds the accumulated gradients to float, computes
// the global gradient norm (clip_from_sumsq with max_norm; <= 0 = no
// clipping) and, if it is finite, one AdamW update with lr on every shard,
// then all-gathers the globals' working copy. A non-finite norm skips the
// update (out->finite = 0) on every rank alike. Does not zero the gradients.
int zero3_step(Zero3 *z, double lr, double max_norm, ClipResult *out, FimiError *err);

// Memory per rank (CPU, fp32) of ZeRO-3 training at `world` ranks with units
// of unit_tokens tokens (docs/distributed.md, "Memory per rank"), in bytes:
// the shards and the replicated globals (state), the gather, gradient and
// receive buffers (buffers), and one unit's activations. Not counted: the
// full model fimi train keeps as the checkpoint gather target (4 bytes per
// parameter, `full_model`), the datasets and the MPI runtime.
typedef struct Zero3Memory {
  double state, buffers, activations, total;  // total = the three above
  double full_model;
} Zero3Memory;
int zero3_memory_estimate(const GemmaConfig *cfg, int world, int unit_tokens, int recompute, Zero3Memory *out,
                          FimiError *err);
// The same on the GPU (parallel/zero3_cuda.h, docs/distributed.md "ZeRO-3
// on GPUs"), device bytes per GPU: bf16 working weights, the shard state in
// fp32 plus its double accumulator, the activations gemma_cuda carves
// (gemma_cuda_activation_bytes). full_model: the host's fp32 gather target.
// Computed in every build (no GPU needed).
int zero3_gpu_memory_estimate(const GemmaConfig *cfg, int world, int unit_tokens, int recompute, Zero3Memory *out,
                              FimiError *err);

// The most tensors one layer (or the globals) may hold: Gemma 4's layers
// with per-layer embeddings have 17 (Gemma 3's 13).
#define ZERO3_MAX_BUFFER_TENSORS 24

// A full host model (a load's source or a gather's target) of the sharded
// shape: layer_numel, globals_numel, num_layers and every buffer allocated;
// else an error naming `what` and the difference.
int zero3_check_full_model(const GemmaModel *m, size_t layer_numel, size_t globals_numel, int num_layers,
                           const char *what, FimiError *err);

// The AdamW ranges of rank's shard of buffer `layer` (-1: the globals) of m
// (its tensor table): each tensor's piece in the shard, at its shard offset,
// with the tensor's weight decay under rules. out holds
// ZERO3_MAX_BUFFER_TENSORS; *count may be 0 (a shard of padding only).
int zero3_shard_ranges(const GemmaModel *m, int layer, const ShardSpec *spec, int rank, const AdamWDecayRules *rules,
                       AdamWRange *out, int *count, FimiError *err);

// Optimizer state for checkpoints: z->opt (adamw_state_count/array/load,
// opt.step) holds this rank's "globals" and "layers.N" shard moments
// (spec.shard_size each; a rank holding only padding of a buffer registers
// none for it); each rank saves its own, plus its shards (Zero3Buffer.shard).
#endif
