// parallel/zero3.c: ZeRO-3 over the model's layer hooks (see zero3.h and
// docs/distributed.md, "ZeRO-3"). Defines the gather schedule (two working
// buffers: the current layer and the prefetched next one, filled by
// MPI_Iallgather), the gradient scatter (MPI_Alltoall + fixed-order double
// accumulation on the shard owner), and the sharded optimizer step.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/zero3.h"

#include "model/gemma_cuda.h"

void zero3_config_default(Zero3Config *config) {
  memset(config, 0, sizeof *config);
  adamw_config_default(&config->adamw);
  adamw_decay_rules_default(&config->decay);
}

static void *alloc_zeroed(size_t n, size_t size, FimiError *err) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (n ? n : 1) * size) != 0) {
    fimi_fail(err, "zero3: out of memory allocating %zu x %zu bytes", n, size);
    return NULL;
  }
  memset(p, 0, (n ? n : 1) * size);
  return p;
}

// Adds a unit's full gradient of buffer b (spec.padded floats, the same
// layout on every rank) to this rank's shard accumulator: MPI_Alltoall sends
// piece q to rank q (pure data movement), then the pieces from ranks 0, 1, ...
// are added in that order in double. Unit u = call j on rank r with
// u = j * world + r, so the owner always adds units in increasing u.
static int scatter_accumulate(Zero3 *z, Zero3Buffer *b, const float *full, const char *what, FimiError *err) {
  int n = (int)b->spec.shard_size;
  int rc = MPI_Alltoall(full, n, MPI_FLOAT, z->recv, n, MPI_FLOAT, z->comm->mpi);
  if (comm_check_mpi(rc, "MPI_Alltoall (gradient)", z->comm, err) != 0)
    return fimi_fail_wrap(err, "zero3: scattering the gradient of %s", what);
  for (int q = 0; q < z->comm->world; q++) {
    const float *piece = z->recv + (size_t)q * b->spec.shard_size;
    for (size_t i = 0; i < b->spec.shard_size; i++) b->acc[i] += (double)piece[i];
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Gathered layers. Slot s of work[] holds layer work_layer[s] once its
// request (if any) completes.

static int wait_slot(Zero3 *z, int s, FimiError *err) {
  if (z->work_req[s] == MPI_REQUEST_NULL) return 0;
  int rc = MPI_Wait(&z->work_req[s], MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) z->work_layer[s] = -1;
  return comm_check_mpi(rc, "MPI_Wait (layer all-gather)", z->comm, err);
}

static int start_gather(Zero3 *z, int s, int layer, FimiError *err) {
  if (wait_slot(z, s, err) != 0) return -1;
  z->work_layer[s] = layer;
  z->gathers++;
  int n = (int)z->layers[layer].spec.shard_size;  // checked <= INT_MAX at create
  int rc = MPI_Iallgather(z->layers[layer].shard, n, MPI_FLOAT, z->work[s], n, MPI_FLOAT, z->comm->mpi, &z->work_req[s]);
  if (rc != MPI_SUCCESS) {
    z->work_layer[s] = -1;
    z->work_req[s] = MPI_REQUEST_NULL;
  }
  return comm_check_mpi(rc, "MPI_Iallgather (layer)", z->comm, err);
}

// Completes pending gathers and forgets what the slots hold (the shards are
// about to change, or the buffers are needed for something else).
static int invalidate_work(Zero3 *z, FimiError *err) {
  int rc = 0;
  for (int s = 0; s < 2; s++) {
    if (wait_slot(z, s, err) != 0) rc = -1;
    z->work_layer[s] = -1;
  }
  return rc;
}

// Returns layer `layer` gathered in *out; starts the gather of `next` (-1:
// none) into the other slot so it can proceed while this layer computes.
// On CPU with Open MPI the transfer mostly progresses inside the next MPI
// call (docs/distributed.md), so the overlap is partial; the order of
// operations is the one a GPU stream would overlap.
static int acquire_layer(Zero3 *z, int layer, int next, const float **out, FimiError *err) {
  int s = z->work_layer[0] == layer ? 0 : z->work_layer[1] == layer ? 1 : -1;
  if (s < 0) {
    s = z->work_layer[0] == next && next >= 0 ? 1 : 0;
    if (start_gather(z, s, layer, err) != 0) return -1;
  }
  if (wait_slot(z, s, err) != 0) return -1;
  int other = 1 - s;
  if (next >= 0 && next != layer && z->work_layer[other] != next && start_gather(z, other, next, err) != 0) return -1;
  *out = z->work[s];
  return 0;
}

// ---------------------------------------------------------------------------
// Model hooks

static int hook_before_forward(void *ctx, int layer, const float **params, FimiError *err) {
  Zero3 *z = ctx;
  int next = layer + 1 < z->num_layers ? layer + 1 : -1;
  return acquire_layer(z, layer, next, params, err);
}

static int hook_before_backward(void *ctx, int layer, const float **params, float **grads, FimiError *err) {
  Zero3 *z = ctx;
  if (acquire_layer(z, layer, layer - 1, params, err) != 0) return -1;
  // The backward accumulates: start from zero, padding included (padding
  // must reduce to 0 in the shard).
  memset(z->grad_full, 0, z->layers[layer].spec.padded * sizeof(float));
  z->backward_layer = layer;
  *grads = z->grad_full;
  return 0;
}

// The layer's unit gradient is complete: to the shard owners, accumulated.
static int hook_after_backward(void *ctx, int layer, FimiError *err) {
  Zero3 *z = ctx;
  if (z->backward_layer != layer) return fimi_fail(err, "zero3: after_backward(%d) without before_backward", layer);
  z->backward_layer = -1;
  char what[32];
  snprintf(what, sizeof what, "layer %d", layer);
  return scatter_accumulate(z, &z->layers[layer], z->grad_full, what, err);
}

// ---------------------------------------------------------------------------
// Optimizer registration: the globals whole, each layer's shard with the
// decay ranges of the tensors it meets.

int zero3_shard_ranges(const GemmaModel *m, int layer, const ShardSpec *spec, int rank, const AdamWDecayRules *rules,
                       AdamWRange *out, int *count, FimiError *err) {
  TensorRange tr[ZERO3_MAX_BUFFER_TENSORS];
  int decays[ZERO3_MAX_BUFFER_TENSORS], nt = 0;
  for (int i = 0; i < m->num_tensors; i++) {
    const GemmaTensor *t = &m->tensors[i];
    if (t->layer != layer) continue;
    if (nt == ZERO3_MAX_BUFFER_TENSORS)
      return fimi_fail(err, "zero3: layer %d has more than %d tensors", layer, ZERO3_MAX_BUFFER_TENSORS);
    tr[nt] = (TensorRange){t->name, t->offset, t->numel};
    decays[nt++] = !t->frozen && adamw_name_decays(t->name, t->is_norm, rules);  // a buffer never changes
  }
  ShardPiece pieces[ZERO3_MAX_BUFFER_TENSORS];
  int np = 0;
  if (shard_pieces(spec, rank, tr, nt, pieces, &np, err) != 0) return -1;
  for (int i = 0; i < np; i++) out[i] = (AdamWRange){pieces[i].shard_offset, pieces[i].count, decays[pieces[i].tensor]};
  *count = np;
  return 0;
}

// layer: -1 for the globals.
static int add_opt_buffer(Zero3 *z, int layer, FimiError *err) {
  Zero3Buffer *b = layer < 0 ? &z->globals : &z->layers[layer];
  AdamWRange ranges[ZERO3_MAX_BUFFER_TENSORS];
  int np = 0;
  if (zero3_shard_ranges(&z->model, layer, &b->spec, z->comm->rank, &z->decay_rules, ranges, &np, err) != 0) return -1;
  if (np == 0) return 0;  // this rank holds only padding of the buffer: nothing to train
  char name[32];
  snprintf(name, sizeof name, layer < 0 ? "globals" : "layers.%d", layer);
  return adamw_add_buffer(&z->opt, name, b->shard, b->grad, b->spec.shard_size, ranges, np, err);
}

// ---------------------------------------------------------------------------
// Create / free

// Copies this rank's real elements of a full buffer into its shard (padding stays 0).
static void copy_shard_from_full(Zero3 *z, Zero3Buffer *b, const float *full) {
  size_t begin = shard_begin(&b->spec, z->comm->rank), count = shard_real_count(&b->spec, z->comm->rank);
  memset(b->shard, 0, b->spec.shard_size * sizeof(float));
  if (count) memcpy(b->shard, full + begin, count * sizeof(float));
}

static int buffer_init(Zero3 *z, Zero3Buffer *b, size_t numel, FimiError *err) {
  if (shard_spec_init(&b->spec, numel, z->comm->world, err) != 0) return -1;
  if (b->spec.shard_size > (size_t)INT_MAX)
    return fimi_fail(err, "zero3: shard of %zu floats exceeds MPI's int count", b->spec.shard_size);
  if (!(b->shard = alloc_zeroed(b->spec.shard_size, sizeof(float), err))) return -1;
  if (!(b->grad = alloc_zeroed(b->spec.shard_size, sizeof(float), err))) return -1;
  if (!(b->acc = alloc_zeroed(b->spec.shard_size, sizeof(double), err))) return -1;
  return 0;
}

static void buffer_free(Zero3Buffer *b) {
  free(b->shard);
  free(b->grad);
  free(b->acc);
}

int zero3_create(Zero3 *z, const GemmaConfig *cfg, const Zero3Config *config, Communicator *comm, uint64_t seed,
                 FimiError *err) {
  memset(z, 0, sizeof *z);
  z->comm = comm;
  z->work_req[0] = z->work_req[1] = MPI_REQUEST_NULL;
  z->work_layer[0] = z->work_layer[1] = -1;
  z->backward_layer = -1;
  z->decay_rules = config->decay;
  if (adamw_init(&z->opt, &config->adamw, err) != 0) return fimi_fail_wrap(err, "zero3_create");
  if (gemma_model_create(&z->model, cfg, err) != 0) goto fail;
  // The full model exists once here, so the random init is the one-rank
  // init; each rank then keeps its shards (docs: a transient of 4 bytes per
  // parameter at creation).
  gemma_model_init_random(&z->model, seed);
  z->model.recompute = config->recompute ? 1 : 0;
  z->num_layers = cfg->num_hidden_layers;
  if (buffer_init(z, &z->globals, z->model.globals_numel, err) != 0) goto fail;
  copy_shard_from_full(z, &z->globals, z->model.globals);
  for (int l = 0; l < z->num_layers; l++) {
    if (buffer_init(z, &z->layers[l], z->model.layer_numel, err) != 0) goto fail;
    copy_shard_from_full(z, &z->layers[l], z->model.layers[l]);
    // The full layer is no longer needed: the model reads it through the hooks.
    free(z->model.layers[l]);
    z->model.layers[l] = NULL;
  }
  size_t layer_padded = z->num_layers ? z->layers[0].spec.padded : 1;
  size_t max_padded = layer_padded > z->globals.spec.padded ? layer_padded : z->globals.spec.padded;
  for (int s = 0; s < 2; s++)
    if (!(z->work[s] = alloc_zeroed(layer_padded, sizeof(float), err))) goto fail;
  if (!(z->grad_full = alloc_zeroed(layer_padded, sizeof(float), err))) goto fail;
  if (!(z->recv = alloc_zeroed(max_padded, sizeof(float), err))) goto fail;
  // Padded, so it can go to MPI_Alltoall whole; gemma_model_free frees it.
  if (!(z->model.globals_grad = alloc_zeroed(z->globals.spec.padded, sizeof(float), err))) goto fail;
  z->hooks = (GemmaLayerHooks){z, hook_before_forward, NULL, hook_before_backward, hook_after_backward};
  z->model.hooks = &z->hooks;
  for (int l = -1; l < z->num_layers; l++)
    if (add_opt_buffer(z, l, err) != 0) goto fail;
  return 0;
fail:
  zero3_free(z);
  return fimi_fail_wrap(err, "zero3_create");
}

void zero3_free(Zero3 *z) {
  if (!z) return;
  for (int s = 0; s < 2; s++)
    if (z->work_req[s] != MPI_REQUEST_NULL) MPI_Wait(&z->work_req[s], MPI_STATUS_IGNORE);
  adamw_free(&z->opt);
  gemma_model_free(&z->model);
  buffer_free(&z->globals);
  for (int l = 0; l < GEMMA_MAX_LAYERS; l++) buffer_free(&z->layers[l]);
  free(z->work[0]);
  free(z->work[1]);
  free(z->grad_full);
  free(z->recv);
  memset(z, 0, sizeof *z);
  z->work_req[0] = z->work_req[1] = MPI_REQUEST_NULL;
}

// ---------------------------------------------------------------------------
// Weights in and out

int zero3_check_full_model(const GemmaModel *m, size_t layer_numel, size_t globals_numel, int num_layers,
                           const char *what, FimiError *err) {
  if (m->layer_numel != layer_numel || m->globals_numel != globals_numel || m->config.num_hidden_layers != num_layers)
    return fimi_fail(err, "%s: model shape differs (layer %zu vs %zu floats, globals %zu vs %zu, %d vs %d layers)",
                     what, m->layer_numel, layer_numel, m->globals_numel, globals_numel, m->config.num_hidden_layers,
                     num_layers);
  if (!m->globals) return fimi_fail(err, "%s: the full model has no globals", what);
  for (int l = 0; l < num_layers; l++)
    if (!m->layers[l]) return fimi_fail(err, "%s: layer %d of the full model is not allocated", what, l);
  return 0;
}

static int check_same_config(const Zero3 *z, const GemmaModel *m, const char *what, FimiError *err) {
  return zero3_check_full_model(m, z->model.layer_numel, z->model.globals_numel, z->num_layers, what, err);
}

int zero3_load_full_weights(Zero3 *z, const GemmaModel *src, FimiError *err) {
  if (check_same_config(z, src, "zero3_load_full_weights", err) != 0) return -1;
  if (invalidate_work(z, err) != 0) return -1;
  memcpy(z->model.globals, src->globals, z->model.globals_numel * sizeof(float));
  copy_shard_from_full(z, &z->globals, src->globals);
  for (int l = 0; l < z->num_layers; l++) copy_shard_from_full(z, &z->layers[l], src->layers[l]);
  return 0;
}

int zero3_gather_full_weights(Zero3 *z, GemmaModel *dst, FimiError *err) {
  if (check_same_config(z, dst, "zero3_gather_full_weights", err) != 0) return -1;
  if (invalidate_work(z, err) != 0) return -1;
  for (int l = 0; l < z->num_layers; l++) {
    if (comm_all_gather_f32(z->comm, z->layers[l].shard, z->layers[l].spec.shard_size, z->work[0], err) != 0)
      return fimi_fail_wrap(err, "zero3_gather_full_weights: layer %d", l);
    memcpy(dst->layers[l], z->work[0], z->model.layer_numel * sizeof(float));
  }
  // The working copy equals the gathered globals shards (zero3_step keeps it so).
  memcpy(dst->globals, z->model.globals, z->model.globals_numel * sizeof(float));
  return 0;
}

// ---------------------------------------------------------------------------
// Training calls

static void buffer_zero_grad(Zero3Buffer *b) {
  memset(b->acc, 0, b->spec.shard_size * sizeof(double));
  memset(b->grad, 0, b->spec.shard_size * sizeof(float));
}

void zero3_zero_grads(Zero3 *z) {
  buffer_zero_grad(&z->globals);
  for (int l = 0; l < z->num_layers; l++) buffer_zero_grad(&z->layers[l]);
}

// The model accumulates the globals' gradient of one unit from zero.
static void clear_globals_grad(Zero3 *z) {
  memset(z->model.globals_grad, 0, z->globals.spec.padded * sizeof(float));
}

int zero3_forward_backward(Zero3 *z, const int *tokens, const int *targets, int B, int T, const float *dlogprobs,
                           float *logprobs, FimiError *err) {
  clear_globals_grad(z);
  if (gemma_forward_backward(&z->model, tokens, targets, B, T, dlogprobs, logprobs, err) != 0)
    return fimi_fail_wrap(err, "zero3_forward_backward on rank %d", z->comm->rank);
  return scatter_accumulate(z, &z->globals, z->model.globals_grad, "the globals", err);
}

int zero3_forward(Zero3 *z, const int *tokens, const int *targets, int B, int T, float *logprobs, FimiError *err) {
  if (gemma_forward(&z->model, tokens, targets, B, T, logprobs, err) != 0)
    return fimi_fail_wrap(err, "zero3_forward on rank %d", z->comm->rank);
  return 0;
}

int zero3_backward(Zero3 *z, const float *dlogprobs, FimiError *err) {
  clear_globals_grad(z);
  if (gemma_backward(&z->model, dlogprobs, err) != 0) return fimi_fail_wrap(err, "zero3_backward on rank %d", z->comm->rank);
  return scatter_accumulate(z, &z->globals, z->model.globals_grad, "the globals", err);
}

static void round_grad(Zero3Buffer *b) {
  for (size_t i = 0; i < b->spec.shard_size; i++) b->grad[i] = (float)b->acc[i];
}

int zero3_step(Zero3 *z, double lr, double max_norm, ClipResult *out, FimiError *err) {
  if (invalidate_work(z, err) != 0) return -1;
  // Squares of every rank's shards (padding is 0), summed over ranks.
  const float *grads[GEMMA_MAX_LAYERS + 1];
  size_t numels[GEMMA_MAX_LAYERS + 1];
  round_grad(&z->globals);
  grads[0] = z->globals.grad;
  numels[0] = z->globals.spec.shard_size;
  for (int l = 0; l < z->num_layers; l++) {
    round_grad(&z->layers[l]);
    grads[l + 1] = z->layers[l].grad;
    numels[l + 1] = z->layers[l].spec.shard_size;
  }
  double sumsq = clip_local_sumsq(grads, numels, z->num_layers + 1);
  if (comm_all_reduce_f64(z->comm, &sumsq, 1, COMM_SUM, err) != 0)
    return fimi_fail_wrap(err, "zero3_step: all-reduce of the squared gradient norm");
  if (clip_from_sumsq(sumsq, max_norm, out, err) != 0) return -1;
  if (!out->finite) return 0;  // every rank has the same sum: all skip alike
  if (adamw_step(&z->opt, lr, out->scale, err) != 0) return -1;
  // Refresh the replicated globals; the gradient buffer is free until the next unit.
  float *full = z->model.globals_grad;
  if (comm_all_gather_f32(z->comm, z->globals.shard, z->globals.spec.shard_size, full, err) != 0)
    return fimi_fail_wrap(err, "zero3_step: all-gather of the globals");
  memcpy(z->model.globals, full, z->model.globals_numel * sizeof(float));
  return 0;
}

int zero3_memory_estimate(const GemmaConfig *cfg, int world, int unit_tokens, int recompute, Zero3Memory *out,
                          FimiError *err) {
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  GemmaGlobalOffsets goff;
  gemma_global_offsets(cfg, &goff);
  size_t globals = goff.numel;  // embeddings, final norm (+ Gemma 4's per-layer table)
  ShardSpec layer, glob;
  if (shard_spec_init(&layer, off.numel, world, err) != 0 || shard_spec_init(&glob, globals, world, err) != 0)
    return -1;
  double L = cfg->num_hidden_layers, S = (double)layer.shard_size, Sg = (double)glob.shard_size;
  double Pl = (double)layer.padded, Pgp = (double)glob.padded, maxp = Pl > Pgp ? Pl : Pgp;
  // per shard element: master 4 + float grad 4 + double acc 8 + AdamW m, v 8;
  // plus the replicated globals' working copy and its per-unit gradient.
  out->state = 24.0 * (Sg + L * S) + 4.0 * (double)globals + 4.0 * Pgp;
  out->buffers = 4.0 * (3.0 * Pl + maxp);  // 2 gathered layers, full layer gradient, alltoall receive
  out->activations = 4.0 * (double)gemma_activation_floats(cfg, unit_tokens, recompute, 1);
  out->total = out->state + out->buffers + out->activations;
  out->full_model = 4.0 * ((double)globals + L * (double)off.numel);
  return 0;
}

int zero3_gpu_memory_estimate(const GemmaConfig *cfg, int world, int unit_tokens, int recompute, Zero3Memory *out,
                              FimiError *err) {
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  GemmaGlobalOffsets goff;
  gemma_global_offsets(cfg, &goff);
  ShardSpec layer, glob;
  if (shard_spec_init(&layer, off.numel, world, err) != 0 || shard_spec_init(&glob, goff.numel, world, err) != 0)
    return -1;
  if (unit_tokens < 1) return fimi_fail(err, "zero3 GPU memory: unit of %d tokens", unit_tokens);
  double L = cfg->num_hidden_layers, S = (double)layer.shard_size, Sg = (double)glob.shard_size;
  double Pl = (double)layer.padded, Pgp = (double)glob.padded, maxp = Pl > Pgp ? Pl : Pgp;
  // per shard element: fp32 master, AdamW m and v, float grad (4 each), double
  // accumulator 8, bf16 working copy 2; the replicated bf16 globals (padded:
  // gathered whole) and their per-unit fp32 gradient (padded: sent whole).
  out->state = 26.0 * (Sg + L * S) + 2.0 * Pgp + 4.0 * Pgp;
  // 2 gathered bf16 layers, 2 fp32 layer gradients (one computed while the
  // other is exchanged), the all-to-all receive buffer
  out->buffers = 2.0 * 2.0 * Pl + 2.0 * 4.0 * Pl + 4.0 * maxp;
  out->activations = (double)gemma_cuda_activation_bytes(cfg, unit_tokens, recompute);
  out->total = out->state + out->buffers + out->activations;
  out->full_model = 4.0 * ((double)goff.numel + L * (double)off.numel);
  return 0;
}
