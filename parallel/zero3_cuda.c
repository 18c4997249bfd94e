// parallel/zero3_cuda.c: ZeRO-3 on GPUs over the sharded GemmaCudaModel's
// layer hooks (see zero3_cuda.h). Defines the gather schedule (two bf16
// working buffers, the next layer's gather in flight while a layer
// computes), the gradient scatter (all-to-all + rank-order double
// accumulation on the owner) and the sharded optimizer step. Plain C over
// ops_cuda.h and comm_device.h, so tests/standin/ runs it on the host.
#ifdef FIMI_HAVE_CUDA

#include "parallel/zero3_cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Gradients to their owners

// Starts the exchange of a unit's full gradient of buffer b (spec.padded
// floats, device, the same layout on every rank): piece q goes to rank q,
// into z->recv. Unit u = call j on rank r with u = j * world + r, so the
// owner, adding the pieces of ranks 0, 1, ... in that order, adds units in
// increasing u (zero3.h).
static int start_exchange(Zero3Cuda *z, Zero3CudaBuffer *b, const float *full, int ticket, const char *what,
                          FimiError *err) {
  if (z->coll->all_to_all_f32(z->coll->impl, full, b->spec.shard_size, z->recv, ticket, err) != 0)
    return fimi_fail_wrap(err, "zero3 (GPU): scattering the gradient of %s", what);
  return 0;
}

// Waits for the exchange with `ticket` and adds its pieces, in rank order in
// double, to b's accumulator.
static int finish_exchange(Zero3Cuda *z, Zero3CudaBuffer *b, int ticket, const char *what, FimiError *err) {
  if (z->coll->wait(z->coll->impl, ticket, err) != 0)
    return fimi_fail_wrap(err, "zero3 (GPU): the gradient of %s", what);
  size_t n = b->spec.shard_size;
  for (int q = 0; q < z->comm->world; q++) accumulate_f64_cuda(z->ctx, b->acc, z->recv + (size_t)q * n, n);
  return 0;
}

// The layer exchange in flight, if any, added to its accumulator.
static int finish_layer_exchange(Zero3Cuda *z, FimiError *err) {
  int l = z->exchanging;
  if (l < 0) return 0;
  z->exchanging = -1;
  char what[32];
  snprintf(what, sizeof what, "layer %d", l);
  return finish_exchange(z, &z->layers[l], ZERO3_CUDA_EXCHANGE_TICKET, what, err);
}

// The globals' unit gradient (the model's grads), after the layers': all of
// it exchanged and added before the call returns.
static int scatter_globals(Zero3Cuda *z, FimiError *err) {
  if (finish_layer_exchange(z, err) != 0 ||
      start_exchange(z, &z->globals, z->model.grads, ZERO3_CUDA_EXCHANGE_TICKET, "the globals", err) != 0)
    return -1;
  return finish_exchange(z, &z->globals, ZERO3_CUDA_EXCHANGE_TICKET, "the globals", err);
}

// ---------------------------------------------------------------------------
// Gathered layers: slot s of work[] holds layer work_layer[s] once the
// gather with ticket s is waited for.

static int start_gather(Zero3Cuda *z, int s, int layer, FimiError *err) {
  z->work_layer[s] = layer;
  z->gathers++;
  const Zero3CudaBuffer *b = &z->layers[layer];
  if (z->coll->all_gather_bf16(z->coll->impl, b->working, b->spec.shard_size, z->work[s], s, err) != 0) {
    z->work_layer[s] = -1;
    return fimi_fail_wrap(err, "zero3 (GPU): gathering layer %d", layer);
  }
  return 0;
}

// The working shards changed (a step, a load): the gathered copies are stale.
static void invalidate_work(Zero3Cuda *z) { z->work_layer[0] = z->work_layer[1] = -1; }

// Layer `layer` gathered in *out (later compute sees it); starts the gather
// of `next` (-1: none) into the other slot, to run while this layer computes.
static int acquire_layer(Zero3Cuda *z, int layer, int next, const bf16 **out, FimiError *err) {
  int s = z->work_layer[0] == layer ? 0 : z->work_layer[1] == layer ? 1 : -1;
  if (s < 0) {
    s = z->work_layer[0] == next && next >= 0 ? 1 : 0;
    if (start_gather(z, s, layer, err) != 0) return -1;
  }
  if (z->coll->wait(z->coll->impl, s, err) != 0) return fimi_fail_wrap(err, "zero3 (GPU): layer %d", layer);
  int other = 1 - s;
  if (next >= 0 && next != layer && z->work_layer[other] != next && start_gather(z, other, next, err) != 0) return -1;
  *out = z->work[s];
  return 0;
}

// ---------------------------------------------------------------------------
// Model hooks

static int hook_before_forward(void *ctx, int layer, const bf16 **params, FimiError *err) {
  Zero3Cuda *z = ctx;
  return acquire_layer(z, layer, layer + 1 < z->num_layers ? layer + 1 : -1, params, err);
}

// Layer l's gradient goes to grad_full[l % 2]: the exchange of layer l + 1
// (the other buffer) may still be reading its own.
static int hook_before_backward(void *ctx, int layer, const bf16 **params, float **grads, FimiError *err) {
  Zero3Cuda *z = ctx;
  if (acquire_layer(z, layer, layer - 1, params, err) != 0) return -1;
  float *g = z->grad_full[layer % 2];
  if (z->exchanging >= 0 && z->exchanging % 2 == layer % 2 && finish_layer_exchange(z, err) != 0) return -1;
  // The backward accumulates: from zero, padding included (it must reduce to 0).
  cuda_fill_bytes(z->ctx, g, 0, z->layers[layer].spec.padded * sizeof(float));
  z->backward_layer = layer;
  *grads = g;
  return 0;
}

// The previous layer's exchange is added (its wait comes after this layer's
// backward was given to the compute stream, so the two overlapped), then
// this layer's starts.
static int hook_after_backward(void *ctx, int layer, FimiError *err) {
  Zero3Cuda *z = ctx;
  if (z->backward_layer != layer)
    return fimi_fail(err, "zero3 (GPU): after_backward(%d) without before_backward", layer);
  z->backward_layer = -1;
  if (finish_layer_exchange(z, err) != 0) return -1;
  char what[32];
  snprintf(what, sizeof what, "layer %d", layer);
  if (start_exchange(z, &z->layers[layer], z->grad_full[layer % 2], ZERO3_CUDA_EXCHANGE_TICKET, what, err) != 0)
    return -1;
  z->exchanging = layer;
  return 0;
}

// ---------------------------------------------------------------------------
// Create / free

static int device_alloc(void **out, size_t bytes, FimiError *err) {
  *out = NULL;
  return cuda_malloc(out, bytes ? bytes : 1, err);
}

static void buffer_free(Zero3CudaBuffer *b) {
  cuda_free(b->master);
  cuda_free(b->exp_avg);
  cuda_free(b->exp_avg_sq);
  cuda_free(b->grad);
  cuda_free(b->acc);
  cuda_free(b->working);
  memset(b, 0, sizeof *b);
}

// Buffer `layer` (-1: the globals) of m: its shard spec, device arrays
// (zeroed) and the AdamW ranges of this rank's shard.
static int buffer_init(Zero3Cuda *z, Zero3CudaBuffer *b, const GemmaModel *m, int layer,
                       const AdamWDecayRules *rules, FimiError *err) {
  size_t numel = layer < 0 ? m->globals_numel : m->layer_numel;
  b->flat_offset = layer < 0 ? 0 : m->globals_numel + (size_t)layer * m->layer_numel;
  if (shard_spec_init(&b->spec, numel, z->comm->world, err) != 0) return -1;
  size_t n = b->spec.shard_size;
  float **f32[] = {&b->master, &b->exp_avg, &b->exp_avg_sq, &b->grad};
  for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++) {
    if (device_alloc((void **)f32[i], n * sizeof(float), err) != 0) return -1;
    cuda_fill_bytes(z->ctx, *f32[i], 0, n * sizeof(float));
  }
  if (device_alloc((void **)&b->acc, n * sizeof(double), err) != 0) return -1;
  cuda_fill_bytes(z->ctx, b->acc, 0, n * sizeof(double));
  if (device_alloc((void **)&b->working, n * sizeof(bf16), err) != 0) return -1;
  return zero3_shard_ranges(m, layer, &b->spec, z->comm->rank, rules, b->ranges, &b->num_ranges, err);
}

static const float *host_buffer(const GemmaModel *m, int b) { return b == 0 ? m->globals : m->layers[b - 1]; }
static Zero3CudaBuffer *buffer_at(Zero3Cuda *z, int b) { return b == 0 ? &z->globals : &z->layers[b - 1]; }

// Gathers the globals' working shards into the model's replicated copy.
static int gather_globals(Zero3Cuda *z, FimiError *err) {
  Zero3CudaBuffer *g = &z->globals;
  if (z->coll->all_gather_bf16(z->coll->impl, g->working, g->spec.shard_size, z->model.params, 0, err) != 0 ||
      z->coll->wait(z->coll->impl, 0, err) != 0)
    return fimi_fail_wrap(err, "zero3 (GPU): gathering the globals");
  return 0;
}

int zero3_cuda_create(Zero3Cuda *z, const GemmaModel *init, const Zero3Config *config, Communicator *comm,
                      DeviceCollectives *coll, CudaContext *ctx, uint64_t seed, FimiError *err) {
  memset(z, 0, sizeof *z);
  z->comm = comm;
  z->coll = coll;
  z->ctx = ctx;
  z->seed = seed;
  z->adamw = config->adamw;
  z->backward_layer = -1;
  z->exchanging = -1;
  invalidate_work(z);
  z->num_layers = init->config.num_hidden_layers;
  if (coll->world != comm->world || coll->rank != comm->rank) {
    fimi_fail(err, "device collectives (rank %d of %d) and host communicator (rank %d of %d) differ", coll->rank,
              coll->world, comm->rank, comm->world);
    goto fail;
  }
  z->hooks = (GemmaCudaLayerHooks){z, hook_before_forward, NULL, hook_before_backward, hook_after_backward};
  if (buffer_init(z, &z->globals, init, -1, &config->decay, err) != 0) goto fail;
  if (gemma_cuda_create_sharded(&z->model, &init->config, ctx, &z->hooks, z->globals.spec.padded, err) != 0) goto fail;
  gemma_cuda_set_recompute(&z->model, config->recompute);
  if (gemma_cuda_alloc_grads(&z->model, err) != 0) goto fail;
  for (int l = 0; l < z->num_layers; l++)
    if (buffer_init(z, &z->layers[l], init, l, &config->decay, err) != 0) goto fail;
  size_t layer_padded = z->num_layers ? z->layers[0].spec.padded : 1;
  size_t max_padded = layer_padded > z->globals.spec.padded ? layer_padded : z->globals.spec.padded;
  for (int s = 0; s < 2; s++)
    if (device_alloc((void **)&z->work[s], layer_padded * sizeof(bf16), err) != 0) goto fail;
  if (device_alloc((void **)&z->grad_full[0], layer_padded * sizeof(float), err) != 0 ||
      device_alloc((void **)&z->grad_full[1], layer_padded * sizeof(float), err) != 0 ||
      device_alloc((void **)&z->recv, max_padded * sizeof(float), err) != 0 ||
      device_alloc((void **)&z->sumsq, (size_t)(z->num_layers + 1) * sizeof(double), err) != 0)
    goto fail;
  if (zero3_cuda_load_full_weights(z, init, err) != 0) goto fail;
  return 0;
fail:
  zero3_cuda_free(z);
  return fimi_fail_wrap(err, "zero3_cuda_create");
}

void zero3_cuda_free(Zero3Cuda *z) {
  if (!z) return;
  gemma_cuda_free(&z->model);
  buffer_free(&z->globals);
  for (int l = 0; l < GEMMA_MAX_LAYERS; l++) buffer_free(&z->layers[l]);
  cuda_free(z->work[0]);
  cuda_free(z->work[1]);
  cuda_free(z->grad_full[0]);
  cuda_free(z->grad_full[1]);
  cuda_free(z->recv);
  cuda_free(z->sumsq);
  memset(z, 0, sizeof *z);
}

// ---------------------------------------------------------------------------
// Weights in and out

static int check_same_shape(const Zero3Cuda *z, const GemmaModel *m, const char *what, FimiError *err) {
  return zero3_check_full_model(m, z->model.layer_numel, z->model.globals_numel, z->num_layers, what, err);
}

// The working shard as update z->step wrote it from the masters: the
// stochastic rounding of that update's seed, or nearest before any update.
static void round_working(Zero3Cuda *z, Zero3CudaBuffer *b) {
  if (z->step == 0) {
    cast_f32_to_bf16_cuda(z->ctx, b->working, b->master, b->spec.shard_size);
    return;
  }
  // Padding (and any untrained element) rounds from 0.0f: exactly 0.
  size_t begin = shard_begin(&b->spec, z->comm->rank);
  round_bf16_stochastic_cuda(z->ctx, b->working, b->master, b->spec.shard_size, adamw_rounding_seed(z->seed, z->step),
                             b->flat_offset + begin);
}

int zero3_cuda_load_full_weights(Zero3Cuda *z, const GemmaModel *src, FimiError *err) {
  if (check_same_shape(z, src, "zero3_cuda_load_full_weights", err) != 0) return -1;
  for (int b = 0; b <= z->num_layers; b++) {
    Zero3CudaBuffer *buf = buffer_at(z, b);
    size_t begin = shard_begin(&buf->spec, z->comm->rank), count = shard_real_count(&buf->spec, z->comm->rank);
    cuda_fill_bytes(z->ctx, buf->master, 0, buf->spec.shard_size * sizeof(float));
    if (count) cuda_upload_f32(z->ctx, buf->master, host_buffer(src, b) + begin, count);
    round_working(z, buf);
  }
  invalidate_work(z);
  if (gather_globals(z, err) != 0) return -1;
  return cuda_context_sync(z->ctx, err);
}

int zero3_cuda_gather_full_weights(Zero3Cuda *z, GemmaModel *dst, FimiError *err) {
  if (check_same_shape(z, dst, "zero3_cuda_gather_full_weights", err) != 0) return -1;
  size_t most = z->globals.spec.padded;
  for (int l = 0; l < z->num_layers; l++)
    if (z->layers[l].spec.padded > most) most = z->layers[l].spec.padded;
  float *full = malloc(most * sizeof(float)), *shard = malloc(most * sizeof(float));
  int rc = full && shard ? 0 : fimi_fail(err, "zero3_cuda_gather_full_weights: out of host memory");
  for (int b = 0; rc == 0 && b <= z->num_layers; b++) {
    Zero3CudaBuffer *buf = buffer_at(z, b);
    cuda_download_f32(z->ctx, shard, buf->master, buf->spec.shard_size);
    rc = comm_all_gather_f32(z->comm, shard, buf->spec.shard_size, full, err);
    if (rc == 0) memcpy(b == 0 ? dst->globals : dst->layers[b - 1], full, buf->spec.numel * sizeof(float));
  }
  free(full);
  free(shard);
  return rc == 0 ? 0 : fimi_fail_wrap(err, "zero3_cuda_gather_full_weights");
}

int zero3_cuda_gather_working(Zero3Cuda *z, GemmaCudaModel *dst, FimiError *err) {
  if (dst->hooks || dst->num_params != z->model.num_params || dst->layer_numel != z->model.layer_numel)
    return fimi_fail(err, "zero3_cuda_gather_working: the target is not a whole model of the same config");
  size_t g = z->model.globals_numel, n = z->model.layer_numel;
  cuda_copy_rows(z->ctx, dst->params, g * sizeof(bf16), z->model.params, g * sizeof(bf16), g * sizeof(bf16), 1);
  // A gather fills `padded` elements: through a work buffer, then the layer's own.
  for (int l = 0; l < z->num_layers; l++) {
    if (start_gather(z, 0, l, err) != 0 || z->coll->wait(z->coll->impl, 0, err) != 0)
      return fimi_fail_wrap(err, "zero3_cuda_gather_working");
    cuda_copy_rows(z->ctx, dst->params + g + (size_t)l * n, n * sizeof(bf16), z->work[0], n * sizeof(bf16),
                   n * sizeof(bf16), 1);
  }
  return cuda_context_sync(z->ctx, err);
}

int zero3_cuda_download_moments(Zero3Cuda *z, int b, float *exp_avg, float *exp_avg_sq, FimiError *err) {
  if (b < 0 || b > z->num_layers) return fimi_fail(err, "zero3 (GPU): no buffer %d", b);
  Zero3CudaBuffer *buf = buffer_at(z, b);
  cuda_download_f32(z->ctx, exp_avg, buf->exp_avg, buf->spec.shard_size);
  cuda_download_f32(z->ctx, exp_avg_sq, buf->exp_avg_sq, buf->spec.shard_size);
  return cuda_context_sync(z->ctx, err);
}

int zero3_cuda_upload_moments(Zero3Cuda *z, int b, const float *exp_avg, const float *exp_avg_sq, FimiError *err) {
  if (b < 0 || b > z->num_layers) return fimi_fail(err, "zero3 (GPU): no buffer %d", b);
  Zero3CudaBuffer *buf = buffer_at(z, b);
  cuda_upload_f32(z->ctx, buf->exp_avg, exp_avg, buf->spec.shard_size);
  cuda_upload_f32(z->ctx, buf->exp_avg_sq, exp_avg_sq, buf->spec.shard_size);
  return cuda_context_sync(z->ctx, err);
}

// ---------------------------------------------------------------------------
// Training calls

void zero3_cuda_zero_grads(Zero3Cuda *z) {
  // A backward that failed may have left an exchange in flight: wait for it
  // (its data is dropped with the accumulators below).
  if (z->exchanging >= 0) {
    FimiError ignored = {0};
    z->coll->wait(z->coll->impl, ZERO3_CUDA_EXCHANGE_TICKET, &ignored);
    z->exchanging = -1;
  }
  for (int b = 0; b <= z->num_layers; b++) {
    Zero3CudaBuffer *buf = buffer_at(z, b);
    cuda_fill_bytes(z->ctx, buf->acc, 0, buf->spec.shard_size * sizeof(double));
    cuda_fill_bytes(z->ctx, buf->grad, 0, buf->spec.shard_size * sizeof(float));
  }
}

int zero3_cuda_forward_backward(Zero3Cuda *z, const int *tokens, const int *targets, int B, int T,
                                const float *dlogprobs, float *logprobs, FimiError *err) {
  gemma_cuda_zero_grads(&z->model);  // the globals' unit gradient, padding included
  if (gemma_cuda_forward_backward(&z->model, tokens, targets, B, T, dlogprobs, logprobs, err) != 0)
    return fimi_fail_wrap(err, "zero3_cuda_forward_backward on rank %d", z->comm->rank);
  return scatter_globals(z, err);
}

int zero3_cuda_forward(Zero3Cuda *z, const int *tokens, const int *targets, int B, int T, float *logprobs,
                       FimiError *err) {
  if (gemma_cuda_forward(&z->model, tokens, targets, B, T, logprobs, err) != 0)
    return fimi_fail_wrap(err, "zero3_cuda_forward on rank %d", z->comm->rank);
  return 0;
}

int zero3_cuda_backward(Zero3Cuda *z, const float *dlogprobs, FimiError *err) {
  gemma_cuda_zero_grads(&z->model);
  if (gemma_cuda_backward(&z->model, dlogprobs, err) != 0)
    return fimi_fail_wrap(err, "zero3_cuda_backward on rank %d", z->comm->rank);
  return scatter_globals(z, err);
}

// The squared norm of every shard's rounded gradient, summed on the host in
// buffer order, then over ranks (a fixed-order all-reduce: parallel/comm.h).
static int global_sumsq(Zero3Cuda *z, double *out, FimiError *err) {
  int nb = z->num_layers + 1;
  for (int b = 0; b < nb; b++) {
    Zero3CudaBuffer *buf = buffer_at(z, b);
    cast_f64_to_f32_cuda(z->ctx, buf->grad, buf->acc, buf->spec.shard_size);
    sum_squares_cuda(z->ctx, z->sumsq + b, buf->grad, buf->spec.shard_size);
  }
  double local[GEMMA_MAX_LAYERS + 1];
  // doubles as pairs of floats' bytes (a synchronous byte copy)
  cuda_download_f32(z->ctx, (float *)(void *)local, (const float *)(const void *)z->sumsq,
                    (size_t)nb * (sizeof(double) / sizeof(float)));
  if (cuda_context_sync(z->ctx, err) != 0) return fimi_fail_wrap(err, "zero3 (GPU): gradient norm");
  double sum = 0.0;
  for (int b = 0; b < nb; b++) sum += local[b];
  if (comm_all_reduce_f64(z->comm, &sum, 1, COMM_SUM, err) != 0)
    return fimi_fail_wrap(err, "zero3 (GPU): all-reduce of the squared gradient norm");
  *out = sum;
  return 0;
}

static void update_buffer(Zero3Cuda *z, Zero3CudaBuffer *b, double lr, float scale, int64_t t) {
  const AdamWConfig *c = &z->adamw;
  uint64_t seed = adamw_rounding_seed(z->seed, t);
  size_t begin = shard_begin(&b->spec, z->comm->rank);
  for (int r = 0; r < b->num_ranges; r++) {
    const AdamWRange *g = &b->ranges[r];
    AdamWStep st = {.lr = lr, .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
                    .weight_decay = g->decay ? c->weight_decay : 0.0, .step = (long)t, .grad_scale = scale};
    size_t o = g->offset;
    adamw_update_cuda(z->ctx, b->master + o, b->exp_avg + o, b->exp_avg_sq + o, b->grad + o, b->working + o, g->size,
                      &st, seed, b->flat_offset + begin + o);
  }
}

int zero3_cuda_step(Zero3Cuda *z, double lr, double max_norm, ClipResult *out, FimiError *err) {
  double sumsq = 0.0;
  if (global_sumsq(z, &sumsq, err) != 0) return -1;
  if (clip_from_sumsq(sumsq, max_norm, out, err) != 0) return -1;
  if (!out->finite) return 0;  // every rank has the same sum: all skip alike
  int64_t t = z->step + 1;
  // adamw_step's checks, so the GPU fails where the CPU fails.
  if (!isfinite(lr) || lr < 0)
    return fimi_fail(err, "adamw step %lld: learning rate %g is not finite and >= 0", (long long)t, lr);
  if (!isfinite(out->scale) || !(out->scale > 0))
    return fimi_fail(err, "adamw step %lld: grad_scale %g is not finite and > 0", (long long)t, (double)out->scale);
  for (int b = 0; b <= z->num_layers; b++) update_buffer(z, buffer_at(z, b), lr, out->scale, t);
  z->step = t;
  invalidate_work(z);
  if (gather_globals(z, err) != 0) return -1;
  if (cuda_context_sync(z->ctx, err) != 0) return fimi_fail_wrap(err, "adamw step %lld", (long long)t);
  return 0;
}

#endif  // FIMI_HAVE_CUDA
