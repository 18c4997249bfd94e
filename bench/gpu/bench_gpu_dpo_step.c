// bench/gpu/bench_gpu_dpo_step.c: one whole DPO training step on one GPU,
// default gemma3-1b, P = 1 pair (2 rows: chosen, rejected) of T = 2048
// tokens. Prints GPU_RESULT lines (tests/gpu/gpu_test.h): dpo_step (ms per
// step; tokens/s = 2P*T / step time and pairs/s in the shape string; model
// TFLOP/s as bench_gpu_model counts them) and dpo_step_memory (peak device
// memory in use against the 18 B/param + activations formula).
//
// Usage: bench_gpu_dpo_step [preset [P [T]]].
//
// One step, as the DPO objective runs it (dpo/objective.c, sigmoid loss):
//   zero the gradients (CudaTrainState) -> gemma_cuda_forward of the 2P rows,
//   log-probs to the host -> on the host, each response's summed log-prob
//   (the last T/2 positions of its row), the sigmoid loss
//   -log sigmoid(beta * ((pc - rc) - (pr - rr))) averaged over the P pairs and
//   its gradient d loss / d sum spread over the response's tokens as
//   dlogprobs (fill_dlogprobs) -> gemma_cuda_backward -> the clip (max norm 1)
//   + AdamW step of CudaTrainState (train/state_cuda.c: fp32 masters and
//   moments on the device, bf16 working weights with stochastic rounding),
//   lr 5e-7. Reference sums: the policy's sums at step 0 (the first warm-up
//   step), beta 0.1. 2 warm-up steps, 5 timed ones (wall clock around
//   complete steps: each step synchronizes twice anyway, for the log-probs
//   and for the gradient norm, so the host's share is part of the step).
//
// Rows: random token ids; the chosen and rejected rows of a pair share their
// first T - T/2 tokens (the prompt) and differ in the response; target t is
// token t + 1 (the last position unscored).
//
// Memory: cudaMemGetInfo (total - free) right after the first backward
// (synchronized), minus the same measure taken before the model was created
// (after the CUDA context: the context's own memory and other processes'
// are not counted; cuBLAS workspaces and the context's scratch created
// later are; the few stream-ordered temporaries freed inside a kernel call,
// e.g. attention backward's (rows) fp32, are not). The formula printed next to it: bf16 weights 2 B/param + fp32
// gradients 4 + fp32 masters 4 + AdamW moments 8 = 18 B/param, plus the
// activations model/gemma_cuda.c carves (carve_forward + carve_backward,
// written out again in activation_bytes below; 256-byte rounding ignored).
//
// Setup cost: CudaTrainState needs a host GemmaModel (its AdamW mirror and
// checkpoint target): gemma_model_create allocates and zeroes the fp32
// weights (4.0 GB at gemma3-1b) and cuda_train_state_init uploads them as
// masters and, rounded on the host, as the bf16 working copy. The random
// weights are then written straight on the device (one 16 Mi-element block
// uploaded, copied across the masters and the working copy, as
// bench_gpu_model does), so no CPU init runs. Both host costs are measured
// and printed ("setup:" line). Measured on the (2-core, virtualized) build
// machine at gemma3-1b: gemma_model_create 8.1 s (first-touch page faults
// while zeroing 4.0 GB), the host bf16 rounding pass of the working-copy
// upload 0.8 s; add the pageable 4 GB + 2 GB host-to-device copies (~1-2 s).
// So setup takes seconds to ~12 s of the 60 s bench limit; the steps
// themselves take well under a second each.
//
// Fit: the activations at T are predicted from the formula and T is halved
// (down to 256) until they fit in what is free after the train state with a
// 10% + 2 GB margin; an out-of-memory failure anyway tears the GPU state
// down, halves T and tries again. Either way the output says so.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "dpo/loss.h"
#include "model/gemma.h"
#include "model/gemma_cuda.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "bench/gpu/bench_gpu.h"
#include "tests/gpu/gpu_test.h"
#include "train/state.h"
#include "train/state_cuda.h"

#define WARMUP 2
#define STEPS 5
#define LR 5e-7
#define MAX_NORM 1.0
#define BETA 0.1
#define MIN_T 256

static const char *NAME = "bench_gpu_dpo_step";

// Device bytes of the activations at N rows: model/gemma_cuda.c's
// carve_forward (kept for the backward) + carve_backward (scratch).
static double activation_bytes(const GemmaConfig *cfg, size_t N) {
  double C = cfg->hidden_size, I = cfg->intermediate_size, L = cfg->num_hidden_layers;
  double nh = cfg->num_attention_heads, nkv = cfg->num_key_value_heads;
  double qd = nh * cfg->head_dim, kvd = nkv * cfg->head_dim;
  int g3 = cfg->family == GEMMA_FAMILY_GEMMA3;
  // Per row and layer: bf16 ln1, (q_raw, k_raw), q, k, v, att, o, h_mid,
  // ln2, gate, up, gelu, mlp; fp32 four rstd, (q/k rstd), att_lse.
  double layer = 2.0 * (5 * C + (g3 ? 3 : 2) * qd + (g3 ? 3 : 2) * kvd + 3 * I) +
                 4.0 * (4 + nh + (g3 ? nh + nkv : 0));
  // Residual stream (L+1, C) bf16, final norm, its rstd, lse, logprobs,
  // dlogprobs, tokens, targets, positions.
  double fwd = L * layer + 2.0 * (L + 1) * C + 2.0 * C + 4.0 * 4 + 3 * 4.0;
  // Backward: dres, dA, dB (C), dgelu, dgate, dup (I), dq, datt (qd), dk, dv, (dk_raw).
  double bwd = 2.0 * (3 * C + 3 * I + 2 * qd + (g3 ? 3 : 2) * kvd);
  return (double)N * (fwd + bwd);
}

static double used_bytes(void) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
  return (double)(total_b - free_b);
}

static double free_bytes(void) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
  return (double)free_b;
}

// The GPU side of the run: model, train state, and its TrainState view.
typedef struct GpuRun {
  GemmaCudaModel gpu;
  CudaTrainState cts;
  TrainState ts;
  int live;
} GpuRun;

// Random bf16-exact values (uniform, scale 0.03) into the masters (fp32) and
// the working copy (bf16): the same block in both, so the working copy is
// exactly the masters rounded, as after cuda_train_state_init.
static int fill_device_weights(CudaContext *ctx, GpuRun *r, FimiError *err) {
  size_t n = r->gpu.num_params, block = (size_t)16 << 20;
  if (block > n) block = n;
  float *host = host_random_bf16(block, 0.03f, 7);
  cuda_upload_f32(ctx, r->cts.master, host, block);
  cuda_upload_bf16(ctx, r->gpu.params, host, block);
  free(host);
  cudaStream_t stream = (cudaStream_t)cuda_context_stream(ctx);
  for (size_t at = block; at < n; at += block) {
    size_t len = n - at < block ? n - at : block;
    cudaError_t st = cudaMemcpyAsync(r->cts.master + at, r->cts.master, len * sizeof(float), cudaMemcpyDeviceToDevice,
                                     stream);
    if (st == cudaSuccess)
      st = cudaMemcpyAsync(r->gpu.params + at, r->gpu.params, len * sizeof(bf16), cudaMemcpyDeviceToDevice, stream);
    if (st != cudaSuccess) return fimi_fail(err, "filling the weights: %s", cudaGetErrorString(st));
  }
  return cuda_context_sync(ctx, err);
}

static int gpu_run_create(GpuRun *r, CudaContext *ctx, const GemmaConfig *cfg, GemmaModel *host, FimiError *err) {
  memset(r, 0, sizeof *r);
  AdamWConfig adamw;
  adamw_config_default(&adamw);
  AdamWDecayRules rules;
  adamw_decay_rules_default(&rules);
  if (gemma_cuda_create(&r->gpu, cfg, ctx, err) != 0) return -1;
  if (cuda_train_state_init(&r->cts, &r->gpu, host, &adamw, &rules, 42, err) != 0) {
    gemma_cuda_free(&r->gpu);
    return -1;
  }
  cuda_train_state_attach(&r->ts, &r->cts);
  r->live = 1;
  return fill_device_weights(ctx, r, err);
}

static void gpu_run_free(GpuRun *r) {
  if (!r->live) return;
  cuda_train_state_free(&r->cts);
  gemma_cuda_free(&r->gpu);
  r->live = 0;
}

// The 2P rows (pair i: row 2i chosen, 2i+1 rejected) and their targets.
static void make_rows(int P, int T, int V, int *tokens, int *targets) {
  Rng rng;
  rng_seed(&rng, 11);
  int prompt = T - T / 2;
  for (int i = 0; i < P; i++) {
    int *c = tokens + (size_t)(2 * i) * T, *r = c + T;
    for (int t = 0; t < T; t++) {
      c[t] = 1 + (int)(rng_next_u64(&rng) % (uint64_t)(V - 1));
      r[t] = t < prompt ? c[t] : 1 + (int)(rng_next_u64(&rng) % (uint64_t)(V - 1));
    }
  }
  for (size_t row = 0; row < (size_t)2 * P; row++)
    for (int t = 0; t < T; t++) targets[row * T + t] = t + 1 < T ? tokens[row * T + t + 1] : -1;
}

// Summed log-prob of each row's response (positions [T - T/2, T), scored only).
static void response_sums(const float *logprobs, const int *targets, int rows, int T, double *sums) {
  for (int row = 0; row < rows; row++) {
    double s = 0;
    for (int t = T - T / 2; t < T; t++) {
      size_t i = (size_t)row * T + t;
      if (targets[i] >= 0) s += logprobs[i];
    }
    sums[row] = s;
  }
}

// The mean sigmoid DPO loss over the P pairs (dpo/loss.c's dpo_pair_loss,
// beta BETA) and dlogprobs (2P, T): each response token gets d loss / d (its
// row's sum), prompt tokens 0.
static double dpo_loss_grad(const double *policy, const double *ref, const int *targets, int P, int T,
                            float *dlogprobs) {
  DpoConfig config;
  dpo_config_default(&config);
  config.beta = BETA;
  double loss = 0;
  memset(dlogprobs, 0, (size_t)2 * P * T * sizeof(float));
  for (int i = 0; i < P; i++) {
    DpoPair pair = {policy[2 * i], policy[2 * i + 1], ref[2 * i], ref[2 * i + 1], T / 2, T / 2, 0.0};
    DpoPairResult res;
    FimiError err = {0};
    if (dpo_pair_loss(&config, &pair, &res, &err) != 0) return NAN;  // a non-finite log-prob
    loss += res.loss / P;
    for (int k = 0; k < 2; k++) {
      float g = (float)((k == 0 ? res.dpolicy_chosen : res.dpolicy_rejected) / P);
      size_t row = (size_t)(2 * i + k);
      for (int t = T - T / 2; t < T; t++)
        if (targets[row * T + t] >= 0) dlogprobs[row * T + t] = g;
    }
  }
  return loss;
}

// Runs the benchmark at (P, T). Returns 0, or -1 when a step fails (out of
// memory: the caller retries at a smaller T).
static int bench(CudaContext *ctx, GpuRun *r, const char *preset, int P, int T, double base_used) {
  const GemmaConfig *cfg = &r->gpu.config;
  FimiError err = {0};
  int rows = 2 * P;
  size_t N = (size_t)rows * T;
  int *tokens = malloc(N * sizeof *tokens), *targets = malloc(N * sizeof *targets);
  float *logprobs = malloc(N * sizeof *logprobs), *dlogprobs = malloc(N * sizeof *dlogprobs);
  double *policy = malloc((size_t)rows * sizeof *policy), *ref = malloc((size_t)rows * sizeof *ref);
  int rc = -1;
  if (!tokens || !targets || !logprobs || !dlogprobs || !policy || !ref) {
    fprintf(stderr, "%s: out of host memory\n", NAME);
    goto done;
  }
  make_rows(P, T, cfg->vocab_size, tokens, targets);
  double peak_used = 0, total_s = 0, loss = 0;
  ClipResult clip = {0};
  for (int step = 0; step < WARMUP + STEPS; step++) {
    double t0 = monotonic_seconds();
    train_state_zero_grad(&r->ts);
    if (gemma_cuda_forward(&r->gpu, tokens, targets, rows, T, logprobs, &err) != 0) {
      printf("%s P%d T%d: forward: %s\n", preset, P, T, err.message);
      goto done;
    }
    response_sums(logprobs, targets, rows, T, policy);
    if (step == 0) memcpy(ref, policy, (size_t)rows * sizeof *ref);
    loss = dpo_loss_grad(policy, ref, targets, P, T, dlogprobs);
    if (gemma_cuda_backward(&r->gpu, dlogprobs, &err) != 0) {
      printf("%s P%d T%d: backward: %s\n", preset, P, T, err.message);
      goto done;
    }
    if (step == 0) {
      // Peak: everything is allocated by the end of the first backward.
      if (cuda_context_sync(ctx, &err) != 0) {
        printf("%s P%d T%d: backward: %s\n", preset, P, T, err.message);
        goto done;
      }
      peak_used = used_bytes() - base_used;
    }
    if (train_state_clip_step(&r->ts, LR, MAX_NORM, 1, &clip, &err) != 0) {
      printf("%s P%d T%d: optimizer step: %s\n", preset, P, T, err.message);
      goto done;
    }
    double dt = monotonic_seconds() - t0;
    if (step >= WARMUP) total_s += dt;
    printf("step %d%s: %.1f ms, loss %.6f, grad norm %.4g%s, sums chosen %.2f rejected %.2f\n", step,
           step < WARMUP ? " (warm-up)" : "", dt * 1e3, loss, clip.norm, clip.clipped ? " (clipped)" : "", policy[0],
           policy[1]);
  }
  if (!isfinite(loss) || !clip.finite) printf("%s P%d T%d: non-finite loss or gradient norm\n", preset, P, T);

  double step_ms = total_s * 1e3 / STEPS;
  double tok_s = (double)N / (total_s / STEPS), pairs_s = P / (total_s / STEPS);
  double fpt = train_flops_per_token(cfg, T);
  char shape[192];
  snprintf(shape, sizeof shape, "%s P%d T%d: %.0f tok/s %.2f pairs/s", preset, P, T, tok_s, pairs_s);
  gpu_report("dpo_step", shape, -1, 0, step_ms, tok_s * fpt / 1e12, 0);

  double np = (double)r->gpu.num_params, states = 18.0 * np, acts = activation_bytes(cfg, N);
  snprintf(shape, sizeof shape, "%s P%d T%d: peak %.2f GB vs formula %.2f GB", preset, P, T, peak_used / 1e9,
           (states + acts) / 1e9);
  gpu_report("dpo_step_memory", shape, -1, 0, 0, 0, 0);
  printf("%s P%d T%d: %.1f ms/step, %.0f tokens/s, %.2f pairs/s, %.1f model TFLOP/s\n", preset, P, T, step_ms, tok_s,
         pairs_s, tok_s * fpt / 1e12);
  printf("memory: peak in use after the first backward %.2f GB (cudaMemGetInfo total - free, minus the %.2f GB in "
         "use before the model was created)\n",
         peak_used / 1e9, base_used / 1e9);
  printf("memory formula: %.3fB params x 18 B (bf16 weights 2 + fp32 grads 4 + masters 4 + moments 8) = %.2f GB, "
         "+ activations at %zu rows %.2f GB = %.2f GB; measured - formula = %.2f GB (cuBLAS workspaces, scratch, "
         "alignment)\n",
         np / 1e9, states / 1e9, N, acts / 1e9, (states + acts) / 1e9, (peak_used - states - acts) / 1e9);
  rc = 0;
done:
  free(tokens), free(targets), free(logprobs), free(dlogprobs), free(policy), free(ref);
  return rc;
}

int main(int argc, char **argv) {
  const char *preset = argc > 1 ? argv[1] : "gemma3-1b";
  int P = argc > 2 ? atoi(argv[2]) : 1, T = argc > 3 ? atoi(argv[3]) : 2048;
  CudaContext *ctx = gpu_test_open(NAME);
  FimiError err = {0};
  GemmaConfig cfg;
  if (P <= 0 || T < 2 || gemma_config_preset(&cfg, preset, &err) != 0) {
    fprintf(stderr, "%s: bad arguments (preset %s, P %d, T %d) %s\n", NAME, preset, P, T, err.message);
    return 1;
  }
  if ((size_t)2 * P * (size_t)T > (size_t)1 << 30) {
    fprintf(stderr, "%s: 2P*T = %zu rows is too many\n", NAME, (size_t)2 * P * (size_t)T);
    return 1;
  }
  double base_used = used_bytes();

  double t0 = monotonic_seconds();
  GemmaModel host;  // zeros: the device weights are written by fill_device_weights
  if (gemma_model_create(&host, &cfg, &err) != 0) {
    fprintf(stderr, "%s: host model: %s\n", NAME, err.message);
    return 1;
  }
  double t1 = monotonic_seconds();
  GpuRun run;
  if (gpu_run_create(&run, ctx, &cfg, &host, &err) != 0) {
    fprintf(stderr, "%s: GPU model and train state: %s\n", NAME, err.message);
    gpu_run_free(&run);
    gemma_model_free(&host);
    return 1;
  }
  double t2 = monotonic_seconds();
  printf("setup: %s, %.3fB params; host model create (zeroed fp32) %.2f s, GPU model + train state init (uploads "
         "masters and bf16 copy from the host) + device fill %.2f s\n",
         preset, run.gpu.num_params / 1e9, t1 - t0, t2 - t1);

  // Shrink T until the predicted activations fit (the train state is in place).
  int T0 = T;
  double avail = free_bytes();
  while (T / 2 >= MIN_T && activation_bytes(&cfg, (size_t)2 * P * T) * 1.1 + 2e9 > avail) T /= 2;
  if (T != T0)
    printf("%s: T %d does not fit (%.1f GB activations predicted, %.1f GB free): measuring T %d\n", NAME, T0,
           activation_bytes(&cfg, (size_t)2 * P * T0) / 1e9, avail / 1e9, T);

  int rc = bench(ctx, &run, preset, P, T, base_used);
  while (rc != 0 && T / 2 >= MIN_T) {
    // Out of memory anyway: drop the whole GPU state (the activations only
    // ever grow) and measure at half the length.
    gpu_run_free(&run);
    T /= 2;
    printf("%s: failed at T %d; measuring T %d\n", NAME, T * 2, T);
    if (gpu_run_create(&run, ctx, &cfg, &host, &err) != 0) {
      fprintf(stderr, "%s: GPU model and train state: %s\n", NAME, err.message);
      break;
    }
    rc = bench(ctx, &run, preset, P, T, base_used);
  }
  gpu_run_free(&run);
  gemma_model_free(&host);
  if (rc != 0) gpu_failures++;
  return gpu_test_close(ctx, NAME);
}
