// train/state_cuda.h: the TrainState of a run on one GPU (--device cuda),
// plugged into train/loop.h through TrainStateOps (train/state.h).
// Defines CudaTrainState, cuda_train_state_init / _free / _attach.
//
// Where things live:
//   device: the bf16 working weights and the fp32 gradients (the
//           GemmaCudaModel's params / grads), the fp32 master weights and the
//           AdamW moments (one flat fp32 buffer each, the model's flat layout:
//           globals, then layer l at globals_numel + l * layer_numel).
//   host:   the GemmaModel the run was loaded into (fp32), and an AdamW
//           "mirror" registered exactly as train_state_init registers the CPU
//           optimizer (buffers "globals", "layers.N", same ranges), holding
//           the moments only while a checkpoint is written or read.
// One step (clip_step): the global norm from sum_squares_cuda over all the
// gradients (one double), clip_from_sumsq as on the CPU, then one
// adamw_update_cuda per decay range (train_state_buffer_ranges: the CPU's
// ranges and decay rules), which also writes the bf16 working copy with
// stochastic rounding (random bits from adamw_rounding_seed(train.seed,
// step) and each element's flat index, so a run is reproducible on one GPU
// and build, and equal to a ZeRO-3 run's bits: parallel/zero3_cuda.h).
// Checkpoints: gather downloads the masters (exact fp32) into the host model
// and the moments into the mirror, whose state arrays have the CPU
// optimizer's names and shapes, so the loop writes the same files as a CPU
// run (optimizer.h5, world 1): a GPU checkpoint resumes on the CPU and a CPU
// checkpoint on the GPU. load uploads them back and rounds the working copy
// to nearest.
// Only compiled with the CUDA backend (FIMI_HAVE_CUDA).
#ifndef FIMI_TRAIN_STATE_CUDA_H
#define FIMI_TRAIN_STATE_CUDA_H

#ifdef FIMI_HAVE_CUDA

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "model/gemma.h"
#include "model/gemma_cuda.h"
#include "optim/adamw.h"
#include "train/state.h"

// One AdamW range in the flat device layout.
typedef struct CudaTrainRange {
  size_t offset;  // flat element offset (globals first, then the layers)
  size_t size;
  int decay;
} CudaTrainRange;

typedef struct CudaTrainState {
  GemmaCudaModel *gpu;  // borrowed; its grads are allocated by init
  GemmaModel *host;     // borrowed: loaded weights, gather target
  AdamW mirror;         // host copy of the moments and the step counter
  float *master;        // device (num_params) fp32 master weights
  float *exp_avg;       // device (num_params)
  float *exp_avg_sq;    // device (num_params)
  double *sumsq;        // device (1)
  CudaTrainRange *ranges;
  int num_ranges;
  uint64_t seed;        // train.seed: the stochastic rounding's stream
} CudaTrainState;

// gpu: created on the host model's config (its weights need not be uploaded:
// init uploads host's masters, rounds the working copy and zeroes the
// moments). rules and config as for train_state_init.
int cuda_train_state_init(CudaTrainState *s, GemmaCudaModel *gpu, GemmaModel *host, const AdamWConfig *config,
                          const AdamWDecayRules *rules, uint64_t seed, FimiError *err);
void cuda_train_state_free(CudaTrainState *s);
// Makes ts a TrainState running on s (rank 0 of 1; ts->model = s->host).
void cuda_train_state_attach(TrainState *ts, CudaTrainState *s);

#endif  // FIMI_HAVE_CUDA
#endif
