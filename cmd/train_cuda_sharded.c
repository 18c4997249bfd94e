// cmd/train_cuda_sharded.c: `mpirun ... fimi train --device cuda`: ZeRO-3
// across GPUs, one per train rank (cuda_sharded_* in cmd/train_cuda.h): the
// rank's GPU, the device collectives, a Zero3Cuda (parallel/zero3_cuda.h)
// behind ShardedModelOps, the host mirror of the shard moments for
// checkpoints, and GRPO's decode model. Without the CUDA backend the calls
// fail with a clear message.
#include "cmd/train_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"

#ifdef FIMI_HAVE_CUDA

#include "cmd/rollout_cuda.h"
#include "core/log.h"
#include "kernels/cuda/ops_cuda.h"
#include "model/gemma_cuda.h"
#include "parallel/comm_device.h"
#include "parallel/zero3_cuda.h"
// NCCL needs the real CUDA runtime: the host stand-in (tests/standin) uses MPI.
#if defined(FIMI_HAVE_NCCL) && !defined(FIMI_CUDA_STANDIN)
#define FIMI_TRAIN_NCCL 1
#include "parallel/comm_nccl.h"
#endif

struct CudaSharded {
  CudaContext *ctx;
  DeviceCollectives coll;
#ifdef FIMI_TRAIN_NCCL
  DeviceComm nccl;
  int have_nccl;
#endif
  int have_coll, have_z;
  Zero3Cuda z;
  GemmaCudaModel decode;  // GRPO: the whole bf16 model the rollouts sample from
  int have_decode, grpo_prefill_chunk;
  const char *attention;  // cuda.attention, for the decode model too
  AdamW mirror;        // the shards' moments and step, for checkpoints
  float *mirror_param;  // (largest shard) what adamw_add_buffer wants as param/grad; never read
};

// This rank's GPU: its index among the node's train ranks.
static int pick_device(Communicator *comm, int *device, FimiError *err) {
  int local = 0, local_size = 1, devices = cuda_device_count();
  if (comm_node_local_rank(comm, &local, &local_size, err) != 0) return -1;
  if (devices < 1) return fimi_fail(err, "rank %d: no CUDA device", comm->rank);
#ifndef FIMI_CUDA_STANDIN
  if (local_size > devices)
    return fimi_fail(err, "%d train ranks on rank %d's node and %d GPU%s: one GPU per train rank (fewer ranks per "
                     "node, or dist.env_ranks for the rest)", local_size, comm->rank, devices, devices > 1 ? "s" : "");
#endif
  *device = local % devices;
  return 0;
}

static int open_collectives(CudaSharded *s, Communicator *comm, int device, const char *which, FimiError *err) {
  int nccl = !strcmp(which, "nccl");
  if (!nccl && strcmp(which, "mpi") && strcmp(which, "auto"))
    return fimi_fail(err, "dist.device_collectives: unknown value '%s' (expected auto, nccl or mpi)", which);
#ifdef FIMI_TRAIN_NCCL
  if (nccl || !strcmp(which, "auto")) {
    if (device_comm_init(&s->nccl, comm, device, err) != 0) return -1;
    s->have_nccl = 1;
    if (device_collectives_nccl(&s->coll, &s->nccl, s->ctx, err) != 0) return -1;
    s->have_coll = 1;
    return 0;
  }
#else
  (void)device;
  if (nccl) return fimi_fail(err, "dist.device_collectives = nccl: this build has no NCCL (use mpi or auto)");
#endif
  if (device_collectives_mpi(&s->coll, comm, s->ctx, err) != 0) return -1;
  s->have_coll = 1;
  return 0;
}

// The mirror: buffer "globals", then "layers.N", each registered only where
// this rank's shard holds trained elements (as zero3_create does).
static int register_shard_mirror(CudaSharded *s, const AdamWConfig *config, FimiError *err) {
  Zero3Cuda *z = &s->z;
  size_t most = z->globals.spec.shard_size;
  for (int l = 0; l < z->num_layers; l++)
    if (z->layers[l].spec.shard_size > most) most = z->layers[l].spec.shard_size;
  if (!(s->mirror_param = fimi_calloc(most ? most : 1, sizeof(float), err))) return -1;
  if (adamw_init(&s->mirror, config, err) != 0) return -1;
  for (int b = 0; b <= z->num_layers; b++) {
    Zero3CudaBuffer *buf = b == 0 ? &z->globals : &z->layers[b - 1];
    if (buf->num_ranges == 0) continue;
    char name[32];
    if (b == 0) snprintf(name, sizeof name, "globals");
    else snprintf(name, sizeof name, "layers.%d", b - 1);
    if (adamw_add_buffer(&s->mirror, name, s->mirror_param, s->mirror_param, buf->spec.shard_size, buf->ranges,
                         buf->num_ranges, err) != 0)
      return -1;
  }
  return 0;
}

// Mirror buffer i's Zero3Cuda buffer index (0 = globals, 1 + l = layer l).
static int mirror_buffer_index(const AdamWBuffer *buf) {
  return strcmp(buf->name, "globals") ? 1 + atoi(buf->name + strlen("layers.")) : 0;
}

static int sharded_gpu_forward_backward(void *ctx, const int *tokens, const int *targets, int B, int T,
                                        const float *dlogprobs, float *logprobs, FimiError *err) {
  return zero3_cuda_forward_backward(&((CudaSharded *)ctx)->z, tokens, targets, B, T, dlogprobs, logprobs, err);
}

static int sharded_gpu_forward(void *ctx, const int *tokens, const int *targets, int B, int T, float *logprobs,
                               FimiError *err) {
  return zero3_cuda_forward(&((CudaSharded *)ctx)->z, tokens, targets, B, T, logprobs, err);
}

static int sharded_gpu_backward(void *ctx, const float *dlogprobs, FimiError *err) {
  return zero3_cuda_backward(&((CudaSharded *)ctx)->z, dlogprobs, err);
}

static void sharded_gpu_zero_grads(void *ctx) { zero3_cuda_zero_grads(&((CudaSharded *)ctx)->z); }

static int sharded_gpu_step(void *ctx, double lr, double max_norm, ClipResult *out, FimiError *err) {
  return zero3_cuda_step(&((CudaSharded *)ctx)->z, lr, max_norm, out, err);
}

// The masters into dst, the moments and step into the mirror.
static int sharded_gpu_gather(void *ctx, GemmaModel *dst, FimiError *err) {
  CudaSharded *s = ctx;
  if (zero3_cuda_gather_full_weights(&s->z, dst, err) != 0) return -1;
  for (int i = 0; i < s->mirror.num_buffers; i++) {
    AdamWBuffer *buf = &s->mirror.buffers[i];
    if (zero3_cuda_download_moments(&s->z, mirror_buffer_index(buf), buf->exp_avg, buf->exp_avg_sq, err) != 0)
      return -1;
  }
  s->mirror.step = s->z.step;
  return 0;
}

static AdamW *sharded_gpu_optimizer(void *ctx) { return &((CudaSharded *)ctx)->mirror; }

// After a checkpoint was read into src and the mirror: the step first (the
// working copy is rounded as that update wrote it), then moments and weights.
static int sharded_gpu_load(void *ctx, const GemmaModel *src, FimiError *err) {
  CudaSharded *s = ctx;
  s->z.step = s->mirror.step;
  for (int i = 0; i < s->mirror.num_buffers; i++) {
    AdamWBuffer *buf = &s->mirror.buffers[i];
    if (zero3_cuda_upload_moments(&s->z, mirror_buffer_index(buf), buf->exp_avg, buf->exp_avg_sq, err) != 0)
      return -1;
  }
  return zero3_cuda_load_full_weights(&s->z, src, err);
}

// GRPO's rollout policy: the working shards gathered into the decode model.
static int sharded_gpu_make_policy(void *ctx, TrainState *ts, int slots, int capacity, RolloutPolicy *out,
                                   FimiError *err) {
  CudaSharded *s = ctx;
  (void)ts;
  if (!s->have_decode) {
    if (gemma_cuda_create(&s->decode, &s->z.model.config, s->ctx, err) != 0) return -1;
    s->have_decode = 1;
    if (gemma_cuda_set_attention(&s->decode, s->attention, err) != 0) return -1;
  }
  if (zero3_cuda_gather_working(&s->z, &s->decode, err) != 0) return -1;
  return rollout_policy_cuda_create(out, &s->decode, slots, capacity, s->grpo_prefill_chunk, err);
}

static void sharded_gpu_free_policy(void *ctx, RolloutPolicy *p) {
  (void)ctx;
  rollout_policy_cuda_free(p);
}

void cuda_sharded_use_grpo(CudaSharded *s, int prefill_chunk, GrpoModelAccess *access) {
  s->grpo_prefill_chunk = prefill_chunk;
  *access = (GrpoModelAccess){sharded_gpu_make_policy, sharded_gpu_free_policy, s};
}

static const ShardedModelOps sharded_gpu_ops = {
    sharded_gpu_forward_backward, sharded_gpu_forward, sharded_gpu_backward,  sharded_gpu_zero_grads,
    sharded_gpu_step,             sharded_gpu_gather,  sharded_gpu_optimizer, sharded_gpu_load};

int cuda_sharded_create(CudaSharded **out, const GemmaModel *model, const Zero3Config *config, Communicator *comm,
                        uint64_t seed, const CudaTrainerOptions *options, const char *collectives,
                        const ShardedModelOps **ops, FimiError *err) {
  *out = NULL;
  *ops = NULL;
  CudaSharded *s = fimi_calloc(1, sizeof *s, err);
  if (!s) return -1;
  int device = 0;
  int rc = pick_device(comm, &device, err);
  if (rc == 0) rc = cuda_context_create(&s->ctx, device, err);
  if (rc == 0) rc = open_collectives(s, comm, device, collectives, err);
  if (rc == 0) rc = zero3_cuda_create(&s->z, model, config, comm, &s->coll, s->ctx, seed, err);
  s->have_z = rc == 0;
  s->attention = options->attention;
  if (rc == 0) rc = gemma_cuda_set_attention(&s->z.model, options->attention, err);
  if (rc == 0) rc = register_shard_mirror(s, &config->adamw, err);
  if (rc != 0) {
    cuda_sharded_free(s);
    return fimi_fail_wrap(err, "--device cuda, rank %d", comm->rank);
  }
  if (comm->rank == 0)
    log_info("ZeRO-3 on %d GPU%s, device collectives over %s", comm->world, comm->world > 1 ? "s" : "",
             s->coll.backend);
  *out = s;
  *ops = &sharded_gpu_ops;
  return 0;
}

void cuda_sharded_free(CudaSharded *s) {
  if (!s) return;
  if (s->have_decode) gemma_cuda_free(&s->decode);
  if (s->have_z) zero3_cuda_free(&s->z);
  if (s->have_coll) device_collectives_free(&s->coll);
#ifdef FIMI_TRAIN_NCCL
  if (s->have_nccl) device_comm_free(&s->nccl);
#endif
  adamw_free(&s->mirror);
  free(s->mirror_param);
  if (s->ctx) cuda_context_destroy(s->ctx);
  free(s);
}

#else  // no CUDA backend

int cuda_sharded_create(CudaSharded **out, const GemmaModel *model, const Zero3Config *config, Communicator *comm,
                        uint64_t seed, const CudaTrainerOptions *options, const char *collectives,
                        const ShardedModelOps **ops, FimiError *err) {
  (void)model, (void)config, (void)comm, (void)seed, (void)options, (void)collectives;
  *out = NULL;
  *ops = NULL;
  return device_require(DEVICE_CUDA, err);
}

void cuda_sharded_free(CudaSharded *s) { (void)s; }
void cuda_sharded_use_grpo(CudaSharded *s, int prefill_chunk, GrpoModelAccess *access) {
  (void)s, (void)prefill_chunk;
  memset(access, 0, sizeof *access);
}

#endif
