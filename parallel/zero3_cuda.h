// parallel/zero3_cuda.h: ZeRO-3 training of the Gemma model on GPUs, one GPU
// per rank (docs/distributed.md, "ZeRO-3 on GPUs"). The sharding rules of
// parallel/zero3.h on device buffers, over a DeviceCollectives
// (parallel/comm_device.h: NCCL, or MPI staged through the host). Defines
// Zero3Cuda and the calls the training loop makes: zero3_cuda_create,
// zero3_cuda_zero_grads, zero3_cuda_forward_backward (SFT-style),
// zero3_cuda_forward + zero3_cuda_backward (DPO/GRPO-style),
// zero3_cuda_step, zero3_cuda_gather_full_weights and
// zero3_cuda_load_full_weights (checkpoints), the shard moments, and
// zero3_cuda_gather_working (a whole bf16 model for decoding).
//
// What each GPU holds (zero3_gpu_memory_estimate in zero3.h):
// - every layer and the globals (embedding + final norm) one flat buffer in
//   `world` equal padded shards (parallel/shard.h); per shard element the
//   fp32 master, AdamW m and v, the float gradient AdamW reads, a double
//   gradient accumulator and the bf16 working copy of the shard;
// - the globals' bf16 working copy replicated (the embedding is read at both
//   ends of the model), all-gathered from the working shards after every
//   step, and their per-unit fp32 gradient;
// - two gathered bf16 layers (current + prefetched), one layer's full fp32
//   unit gradient, one all-to-all receive buffer; a sharded GemmaCudaModel
//   (model/gemma_cuda.h) reads each layer from its gather through its hooks.
//
// Schedule: before layer l's forward its gather (issued earlier) is waited
// for and layer l+1's gather starts into the other buffer, on the NCCL
// stream while layer l computes (the backward likewise downwards: l, then
// l-1); right after layer l's backward its unit gradient starts to the
// shard owners (all-to-all, piece q to rank q) and runs while layer l-1's
// backward computes into the other gradient buffer; after that backward the
// compute stream waits for it and each owner adds the world pieces in rank
// order into its double accumulator (accumulate_f64_cuda). The globals'
// gradient, last, is exchanged and added at once.
//
// Determinism and world-size invariance, as on the CPU (zero3.h): with the
// global batch cut into units of a fixed size and unit u given to rank
// u % world as its (u / world)-th call, every owner adds units in the order
// u = 0, 1, ... in double and rounds to float once per step; AdamW runs
// elementwise on the shards; the working copy's stochastic rounding draws
// element e's bits from (train seed, step, e's flat index), the bits a whole
// model gets (train/state_cuda.h). So gradients, weights and the bf16 working
// copy are bitwise the same at every world size; only the clipping norm's
// sum of squares runs over differently cut shards (last bits of a double).
// At world 1 with one unit per step the run equals the one-GPU train state
// (train/state_cuda.h) bitwise.
//
// Every call is collective: all ranks call it in the same order. Do not copy
// a Zero3Cuda after zero3_cuda_create (the model's hooks point into it).
// Only compiled with the CUDA backend (FIMI_HAVE_CUDA).
#ifndef FIMI_PARALLEL_ZERO3_CUDA_H
#define FIMI_PARALLEL_ZERO3_CUDA_H

#ifdef FIMI_HAVE_CUDA

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "kernels/cuda/ops_cuda.h"
#include "model/gemma.h"
#include "model/gemma_cuda.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "parallel/comm.h"
#include "parallel/comm_device.h"
#include "parallel/shard.h"
#include "parallel/zero3.h"

// One sharded flat buffer (the globals or a layer) on the device.
typedef struct Zero3CudaBuffer {
  ShardSpec spec;
  size_t flat_offset;   // where the buffer starts in the whole model's flat layout
  float *master;        // device (shard_size) fp32 master weights; padding stays 0
  float *exp_avg;       // device (shard_size) AdamW m
  float *exp_avg_sq;    // device (shard_size) AdamW v
  float *grad;          // device (shard_size) float gradient, set from acc by zero3_cuda_step
  double *acc;          // device (shard_size) gradient accumulated over the step's units
  bf16 *working;        // device (shard_size) bf16 working copy of the shard: what gathers send
  AdamWRange ranges[ZERO3_MAX_BUFFER_TENSORS];  // trained pieces of the shard (zero3_shard_ranges)
  int num_ranges;
} Zero3CudaBuffer;

// Tickets (parallel/comm_device.h): gathers use 0 and 1 (their work slot),
// the layer gradient exchange 2.
#define ZERO3_CUDA_EXCHANGE_TICKET 2

typedef struct Zero3Cuda {
  Communicator *comm;       // borrowed: host collectives (norm, checkpoints)
  DeviceCollectives *coll;  // borrowed: device collectives (gathers, gradients)
  CudaContext *ctx;         // borrowed: the compute stream
  GemmaCudaModel model;     // sharded: globals only
  GemmaCudaLayerHooks hooks;
  int num_layers;
  Zero3CudaBuffer globals;
  Zero3CudaBuffer layers[GEMMA_MAX_LAYERS];
  bf16 *work[2];            // device (layer padded) gathered layers
  int work_layer[2];        // layer each holds (-1 none); its gather has ticket = slot
  float *grad_full[2];      // device (layer padded) layer l's unit gradient in grad_full[l % 2]
  float *recv;              // device (max padded) pieces of this rank's shard from every rank
  double *sumsq;            // device (L + 1) squared norms of the shards' gradients
  int backward_layer;       // layer whose backward is running (-1 none)
  int exchanging;           // layer whose gradient exchange is in flight (-1 none; ticket ZERO3_CUDA_EXCHANGE_TICKET)
  AdamWConfig adamw;
  int64_t step;             // AdamW updates done
  uint64_t seed;            // train.seed: the stochastic rounding's stream
  int64_t gathers;          // layer gathers issued (statistics for tests)
} Zero3Cuda;

// Creates the sharded model from init (a full host model: its weights and
// tensor table; the same on every rank), keeping this rank's shards on the
// device: masters exact, working copy rounded to nearest, moments 0.
// config->recompute sets the model's recompute. comm, coll and ctx must
// outlive z.
int zero3_cuda_create(Zero3Cuda *z, const GemmaModel *init, const Zero3Config *config, Communicator *comm,
                      DeviceCollectives *coll, CudaContext *ctx, uint64_t seed, FimiError *err);
void zero3_cuda_free(Zero3Cuda *z);

// Sets the shards from a full host model (same config) and z->step: the
// masters exact, the working copy as update `step` wrote it (its stochastic
// rounding; nearest when step is 0), so a resumed run continues bitwise.
// Collective (the globals' working copy is gathered).
int zero3_cuda_load_full_weights(Zero3Cuda *z, const GemmaModel *src, FimiError *err);
// Collective: the full fp32 masters into dst (same config, layers
// allocated) on every rank.
int zero3_cuda_gather_full_weights(Zero3Cuda *z, GemmaModel *dst, FimiError *err);

// Collective: the bf16 working weights whole into dst (a whole, unsharded
// GemmaCudaModel of the same config, on z's device): the globals' replicated
// copy and every layer's working shards gathered. What the sharded model
// computes with, so a decode model built this way (GRPO's rollouts) samples
// from exactly the weights the loss then scores.
int zero3_cuda_gather_working(Zero3Cuda *z, GemmaCudaModel *dst, FimiError *err);

void zero3_cuda_zero_grads(Zero3Cuda *z);
// As zero3_forward_backward / zero3_forward / zero3_backward (host arrays).
int zero3_cuda_forward_backward(Zero3Cuda *z, const int *tokens, const int *targets, int B, int T,
                                const float *dlogprobs, float *logprobs, FimiError *err);
int zero3_cuda_forward(Zero3Cuda *z, const int *tokens, const int *targets, int B, int T, float *logprobs,
                       FimiError *err);
int zero3_cuda_backward(Zero3Cuda *z, const float *dlogprobs, FimiError *err);
// As zero3_step: rounds the accumulators, global norm (host all-reduce of
// one double), clip_from_sumsq, AdamW on every shard range writing the
// working shard, then the globals' working copy gathered. A non-finite norm
// skips the update on every rank alike. Does not zero the gradients.
int zero3_cuda_step(Zero3Cuda *z, double lr, double max_norm, ClipResult *out, FimiError *err);

// This rank's AdamW moments of buffer b (0 = globals, 1 + l = layer l),
// shard_size floats each, to / from host arrays (checkpoints).
int zero3_cuda_download_moments(Zero3Cuda *z, int b, float *exp_avg, float *exp_avg_sq, FimiError *err);
int zero3_cuda_upload_moments(Zero3Cuda *z, int b, const float *exp_avg, const float *exp_avg_sq, FimiError *err);

#endif  // FIMI_HAVE_CUDA
#endif
