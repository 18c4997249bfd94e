// train/state_cuda.c: the TrainState of a run on one GPU: see state_cuda.h.
// train/ globs *.c, so the body is compiled only with the CUDA backend.
#ifdef FIMI_HAVE_CUDA

#include "train/state_cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/ops_cuda.h"
#include "optim/clip.h"

// Flat element offset of parameter buffer b (0 = globals, 1 + l = layer l).
static size_t buffer_offset(const GemmaCudaModel *gpu, int b) {
  return b == 0 ? 0 : gpu->globals_numel + (size_t)(b - 1) * gpu->layer_numel;
}

static float *host_buffer(GemmaModel *m, int b) { return b == 0 ? m->globals : m->layers[b - 1]; }

static int check_host(const CudaTrainState *s, const GemmaModel *m, FimiError *err) {
  const GemmaCudaModel *gpu = s->gpu;
  if (m->globals_numel != gpu->globals_numel || m->layer_numel != gpu->layer_numel ||
      m->config.num_hidden_layers != gpu->config.num_hidden_layers)
    return fimi_fail(err, "GPU train state: the host model's shape differs from the GPU model's");
  if (!m->globals) return fimi_fail(err, "GPU train state: the host model has no parameters");
  for (int l = 0; l < m->config.num_hidden_layers; l++)
    if (!m->layers[l]) return fimi_fail(err, "GPU train state: the host model's layer %d is absent", l);
  return 0;
}

// Host model -> device masters (exact fp32).
static void upload_masters(CudaTrainState *s, const GemmaModel *m) {
  for (int b = 0; b <= m->config.num_hidden_layers; b++)
    cuda_upload_f32(s->gpu->ctx, s->master + buffer_offset(s->gpu, b), host_buffer((GemmaModel *)m, b),
                    s->mirror.buffers[b].numel);
}

// Registers the mirror's buffers as train_state_init registers the CPU
// optimizer's, and collects the same ranges at flat offsets.
static int register_mirror(CudaTrainState *s, const AdamWDecayRules *rules, FimiError *err) {
  GemmaModel *m = s->host;
  int L = m->config.num_hidden_layers;
  for (int b = 0; b <= L; b++) {
    AdamWRange *ranges = NULL;
    int count = 0;
    if (train_state_buffer_ranges(m, b - 1, rules, &ranges, &count, err) != 0) return -1;
    char name[32];
    if (b == 0) snprintf(name, sizeof name, "globals");
    else snprintf(name, sizeof name, "layers.%d", b - 1);
    size_t numel = b == 0 ? m->globals_numel : m->layer_numel;
    // The mirror never steps: its param is the host buffer (gather's target)
    // and its grad pointer, which adamw_add_buffer wants non-NULL, is never read.
    float *param = host_buffer(m, b);
    int rc = adamw_add_buffer(&s->mirror, name, param, param, numel, ranges, count, err);
    CudaTrainRange *grown = NULL;
    if (rc == 0 && count > 0) {
      grown = realloc(s->ranges, (size_t)(s->num_ranges + count) * sizeof *grown);
      if (!grown) rc = fimi_fail(err, "out of memory (GPU optimizer ranges)");
    }
    if (grown) {
      s->ranges = grown;
      for (int r = 0; r < count; r++)
        s->ranges[s->num_ranges++] =
            (CudaTrainRange){buffer_offset(s->gpu, b) + ranges[r].offset, ranges[r].size, ranges[r].decay};
    }
    free(ranges);
    if (rc != 0) return -1;
  }
  return 0;
}

int cuda_train_state_init(CudaTrainState *s, GemmaCudaModel *gpu, GemmaModel *host, const AdamWConfig *config,
                          const AdamWDecayRules *rules, uint64_t seed, FimiError *err) {
  memset(s, 0, sizeof *s);
  s->gpu = gpu;
  s->host = host;
  s->seed = seed;
  size_t n = gpu->num_params;
  if (check_host(s, host, err) != 0) return -1;
  if (n != host->globals_numel + (size_t)host->config.num_hidden_layers * host->layer_numel || n > SIZE_MAX / 4)
    return fimi_fail(err, "GPU train state: %zu parameters do not match the host model", n);
  if (adamw_init(&s->mirror, config, err) != 0) return -1;
  int rc = register_mirror(s, rules, err);
  if (rc == 0) rc = gemma_cuda_alloc_grads(gpu, err);
  if (rc == 0) rc = cuda_malloc((void **)&s->master, n * sizeof(float), err);
  if (rc == 0) rc = cuda_malloc((void **)&s->exp_avg, n * sizeof(float), err);
  if (rc == 0) rc = cuda_malloc((void **)&s->exp_avg_sq, n * sizeof(float), err);
  if (rc == 0) rc = cuda_malloc((void **)&s->sumsq, sizeof(double), err);
  if (rc == 0) {
    upload_masters(s, host);
    // All-zero bytes are 0.0f: fresh moments, as adamw_add_buffer's.
    cuda_fill_bytes(gpu->ctx, s->exp_avg, 0, n * sizeof(float));
    cuda_fill_bytes(gpu->ctx, s->exp_avg_sq, 0, n * sizeof(float));
    rc = gemma_cuda_upload_weights(gpu, host, err);
  }
  if (rc == 0) rc = cuda_context_sync(gpu->ctx, err);
  if (rc != 0) {
    cuda_train_state_free(s);
    return fimi_fail_wrap(err, "GPU optimizer state");
  }
  return 0;
}

void cuda_train_state_free(CudaTrainState *s) {
  if (s->master) cuda_free(s->master);
  if (s->exp_avg) cuda_free(s->exp_avg);
  if (s->exp_avg_sq) cuda_free(s->exp_avg_sq);
  if (s->sumsq) cuda_free(s->sumsq);
  free(s->ranges);
  adamw_free(&s->mirror);
  memset(s, 0, sizeof *s);
}

// ---- TrainStateOps ------------------------------------------------------------------

static void cuda_zero_grad(void *ctx) { gemma_cuda_zero_grads(((CudaTrainState *)ctx)->gpu); }

// The global norm on the device, the clipping decision on the host (as the
// CPU: clip_from_sumsq), then one AdamW launch per range with the clipping
// coefficient as grad_scale. The norm is computed even when update is 0
// (a non-finite loss), as train_state_clip_step does on the CPU.
static int cuda_clip_step(void *ctx, double lr, double max_norm, int update, ClipResult *out, FimiError *err) {
  CudaTrainState *s = ctx;
  GemmaCudaModel *gpu = s->gpu;
  double sumsq = 0;
  sum_squares_cuda(gpu->ctx, s->sumsq, gpu->grads, gpu->num_params);
  // One double as two floats' bytes (a synchronous byte copy).
  cuda_download_f32(gpu->ctx, (float *)(void *)&sumsq, (const float *)(const void *)s->sumsq,
                    sizeof(double) / sizeof(float));
  if (cuda_context_sync(gpu->ctx, err) != 0) return fimi_fail_wrap(err, "gradient norm");
  if (clip_from_sumsq(sumsq, max_norm, out, err) != 0) return -1;
  if (!update || !out->finite) return 0;
  // adamw_step's checks, so the GPU fails where the CPU fails.
  int64_t t = s->mirror.step + 1;
  if (!isfinite(lr) || lr < 0)
    return fimi_fail(err, "adamw step %lld: learning rate %g is not finite and >= 0", (long long)t, lr);
  if (!isfinite(out->scale) || !(out->scale > 0))
    return fimi_fail(err, "adamw step %lld: grad_scale %g is not finite and > 0", (long long)t, (double)out->scale);
  const AdamWConfig *c = &s->mirror.config;
  for (int r = 0; r < s->num_ranges; r++) {
    const CudaTrainRange *g = &s->ranges[r];
    AdamWStep st = {.lr = lr, .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
                    .weight_decay = g->decay ? c->weight_decay : 0.0, .step = (long)t, .grad_scale = out->scale};
    size_t o = g->offset;
    adamw_update_cuda(gpu->ctx, s->master + o, s->exp_avg + o, s->exp_avg_sq + o, gpu->grads + o, gpu->params + o,
                      g->size, &st, adamw_rounding_seed(s->seed, t), o);
  }
  s->mirror.step = t;
  if (cuda_context_sync(gpu->ctx, err) != 0) return fimi_fail_wrap(err, "adamw step %lld", (long long)t);
  return 0;
}

// Masters -> dst (exact fp32) and moments -> the mirror, for a checkpoint.
static int cuda_gather(void *ctx, GemmaModel *dst, FimiError *err) {
  CudaTrainState *s = ctx;
  if (check_host(s, dst, err) != 0) return -1;
  CudaContext *cc = s->gpu->ctx;
  for (int b = 0; b < s->mirror.num_buffers; b++) {
    AdamWBuffer *buf = &s->mirror.buffers[b];
    size_t o = buffer_offset(s->gpu, b);
    cuda_download_f32(cc, host_buffer(dst, b), s->master + o, buf->numel);
    cuda_download_f32(cc, buf->exp_avg, s->exp_avg + o, buf->numel);
    cuda_download_f32(cc, buf->exp_avg_sq, s->exp_avg_sq + o, buf->numel);
  }
  return cuda_context_sync(cc, err);
}

static AdamW *cuda_optimizer(void *ctx) { return &((CudaTrainState *)ctx)->mirror; }

// The working copy that update t wrote, from the masters it left: each
// range's masters rounded with update t's random bits (the rounding
// adamw_update_cuda applied, without the update). So a run resumed on the GPU
// continues bitwise as the uninterrupted run would have.
static void restore_working_copy(CudaTrainState *s, int64_t t) {
  GemmaCudaModel *gpu = s->gpu;
  for (int r = 0; r < s->num_ranges; r++) {
    size_t o = s->ranges[r].offset;
    round_bf16_stochastic_cuda(gpu->ctx, gpu->params + o, s->master + o, s->ranges[r].size,
                               adamw_rounding_seed(s->seed, t), o);
  }
}

// After a checkpoint was read into src (the weights) and the mirror (the
// moments and step): everything back to the device. The working copy: the
// masters rounded to nearest, then (after t >= 1 updates) to what update t
// wrote (restore_working_copy; a CPU checkpoint gets the same treatment,
// an unbiased rounding of its weights).
static int cuda_load(void *ctx, const GemmaModel *src, FimiError *err) {
  CudaTrainState *s = ctx;
  if (check_host(s, src, err) != 0) return -1;
  CudaContext *cc = s->gpu->ctx;
  upload_masters(s, src);
  for (int b = 0; b < s->mirror.num_buffers; b++) {
    const AdamWBuffer *buf = &s->mirror.buffers[b];
    size_t o = buffer_offset(s->gpu, b);
    cuda_upload_f32(cc, s->exp_avg + o, buf->exp_avg, buf->numel);
    cuda_upload_f32(cc, s->exp_avg_sq + o, buf->exp_avg_sq, buf->numel);
  }
  if (gemma_cuda_upload_weights(s->gpu, src, err) != 0) return -1;
  if (s->mirror.step > 0) restore_working_copy(s, s->mirror.step);
  return cuda_context_sync(cc, err);
}

static int cuda_all_ok(void *ctx, int ok) {
  (void)ctx;
  return ok != 0;
}

static const TrainStateOps cuda_train_state_ops = {cuda_zero_grad, cuda_clip_step, cuda_gather,
                                                   cuda_optimizer, cuda_load,      cuda_all_ok};

void cuda_train_state_attach(TrainState *ts, CudaTrainState *s) {
  train_state_init_sharded(ts, s->host, &cuda_train_state_ops, s, 0, 1);
}

#endif  // FIMI_HAVE_CUDA
