// tests/gpu/test_gpu_train.c: training on one GPU (train/state_cuda.c: fp32
// masters and AdamW moments on the device, bf16 working weights written by
// adamw_update_cuda with stochastic rounding) against the CPU TrainState
// (train/state.c: fp32 model, AdamW on the host), on "tiny" with head_dim 64
// (the smallest the CUDA attention takes) and the same bf16-rounded initial
// weights. SFT-style steps on random data (token cross-entropy, mean over
// the scored tokens, weight decay 0.1 on the decaying ranges, clipping at 1).
// Checks:
// 1. 20 steps: the loss of every step within 2e-2 relative of the CPU's
//    (bf16 activations and weights, ~1e-2 per forward, test_gpu_model.c);
//    the gradient norms within 1e-1 (printed).
// 2. The final fp32 masters (gathered into a host model, exactly what a
//    checkpoint saves) against the CPU's weights: the UPDATES (final -
//    initial) within 0.5 relative L2 of the CPU's. Why so loose: Adam
//    normalizes each element's step to ~lr whatever its gradient's size, so
//    elements whose gradient is small next to its bf16 error (~1e-2
//    relative) move by ~lr in a random direction on one side; a wrong offset,
//    range or decay gives >= 1. Also max |difference| <= 2 * lr * steps
//    (no element can drift further) and the bf16 working copy is one of the
//    two bf16 neighbours of its master (stochastic rounding).
// 3. Checkpoint compatibility: the GPU state's optimizer mirror has the CPU
//    AdamW's state arrays (same names, same sizes, in order) and step; a
//    gather -> load -> gather round trip is exact, and load restores the
//    bf16 working copy bitwise (what a resumed run continues from).
// 4. Unbiased rounding: from the initial weights, 10 steps with lr 2e-6 move
//    each master by ~1e-5, below a bf16 gap (~1e-4 at these weights):
//    round-to-nearest would leave the working copy unchanged (drift 0); the
//    stochastic rounding's expected working copy is the master, so the
//    working copy's drift projected on each master's direction, summed,
//    matches the masters' own: ratio within 1 +- 0.1 (the noise is ~1e-2 at
//    these sizes).
//
// Build note: the GPU check build (FIMI_GPU_CHECK) has core/ kernels/ model/
// optim/ but not train/ (HDF5); tests/gpu/CMakeLists.txt compiles
// train/state.c and train/state_cuda.c into this test.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "model/gemma.h"
#include "model/gemma_cuda.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "train/state.h"
#include "train/state_cuda.h"

#define STEPS 20
#define LR 1e-3
#define MAX_NORM 1.0
#define TOL_LOSS_REL 2e-2
#define TOL_NORM_REL 1e-1
#define TOL_UPDATE_REL 0.5
#define DRIFT_STEPS 10
#define DRIFT_LR 2e-6
#define TOL_DRIFT 0.1

static const char *NAME = "test_gpu_train";

static void die(const char *what, const FimiError *err) {
  fprintf(stderr, "%s: %s: %s\n", NAME, what, err->message);
  exit(1);
}

static void round_model_to_bf16(GemmaModel *m) {
  for (size_t i = 0; i < m->globals_numel; i++) m->globals[i] = host_round_bf16(m->globals[i]);
  for (int l = 0; l < m->config.num_hidden_layers; l++)
    for (size_t i = 0; i < m->layer_numel; i++) m->layers[l][i] = host_round_bf16(m->layers[l][i]);
}

static void copy_model(GemmaModel *dst, const GemmaModel *src) {
  memcpy(dst->globals, src->globals, src->globals_numel * sizeof(float));
  for (int l = 0; l < src->config.num_hidden_layers; l++)
    memcpy(dst->layers[l], src->layers[l], src->layer_numel * sizeof(float));
}

// The model's flat parameters (globals, then each layer) into one host array.
static float *flat_params(const GemmaModel *m) {
  size_t n = m->globals_numel + (size_t)m->config.num_hidden_layers * m->layer_numel;
  float *f = malloc(n * sizeof *f);
  memcpy(f, m->globals, m->globals_numel * sizeof(float));
  for (int l = 0; l < m->config.num_hidden_layers; l++)
    memcpy(f + m->globals_numel + (size_t)l * m->layer_numel, m->layers[l], m->layer_numel * sizeof(float));
  return f;
}

// Step s's batch: random tokens and targets (every 7th target unscored), and
// dlogprobs = -1 / (scored tokens): the gradient of the mean cross-entropy.
static int make_batch(int step, int B, int T, int V, int *tokens, int *targets, float *dlogprobs) {
  Rng rng;
  rng_seed(&rng, 1000 + (uint64_t)step);
  int scored = 0;
  for (int i = 0; i < B * T; i++) {
    tokens[i] = (int)(rng_next_u64(&rng) % (uint64_t)V);
    targets[i] = i % 7 == 3 ? -1 : (int)(rng_next_u64(&rng) % (uint64_t)V);
    scored += targets[i] >= 0;
  }
  for (int i = 0; i < B * T; i++) dlogprobs[i] = targets[i] >= 0 ? -1.0f / (float)scored : 0.0f;
  return scored;
}

static double loss_of(const float *logprobs, const int *targets, int n) {
  double sum = 0;
  int count = 0;
  for (int i = 0; i < n; i++)
    if (targets[i] >= 0) sum += logprobs[i], count++;
  return -sum / count;
}

// The gap between the two bf16 neighbours around x (x finite, not tiny).
static double bf16_gap(float x) {
  int e;
  frexpf(x, &e);  // |x| in [2^(e-1), 2^e)
  return ldexp(1.0, e - 8);
}

int main(void) {
  CudaContext *ctx = gpu_test_open(NAME);
  FimiError err = {0};
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, "tiny", &err) != 0) die("preset", &err);
  cfg.head_dim = 64;
  cfg.query_pre_attn_scalar = 64;
  const int B = 2, T = 37, V = cfg.vocab_size;
  const char *shape = "tiny hd64 B2 T37";

  GemmaModel cpu, host, init;
  if (gemma_model_create(&cpu, &cfg, &err) != 0 || gemma_model_create(&host, &cfg, &err) != 0 ||
      gemma_model_create(&init, &cfg, &err) != 0)
    die("model", &err);
  gemma_model_init_random(&cpu, 1234);
  round_model_to_bf16(&cpu);  // so the GPU's working copy starts equal to the masters
  copy_model(&host, &cpu);
  copy_model(&init, &cpu);
  float *w0 = flat_params(&cpu);
  size_t n = cpu.globals_numel + (size_t)cfg.num_hidden_layers * cpu.layer_numel;

  AdamWConfig adamw;
  adamw_config_default(&adamw);
  adamw.weight_decay = 0.1;
  AdamWDecayRules rules;
  adamw_decay_rules_default(&rules);

  TrainState cs, gs;
  if (train_state_init(&cs, &cpu, &adamw, &rules, &err) != 0) die("CPU train state", &err);
  GemmaCudaModel gpu;
  CudaTrainState cts;
  if (gemma_cuda_create(&gpu, &cfg, ctx, &err) != 0) die("GPU model", &err);
  if (cuda_train_state_init(&cts, &gpu, &host, &adamw, &rules, 42, &err) != 0) die("GPU train state", &err);
  cuda_train_state_attach(&gs, &cts);

  int *tokens = malloc((size_t)B * T * sizeof *tokens), *targets = malloc((size_t)B * T * sizeof *targets);
  float *dlogprobs = malloc((size_t)B * T * sizeof *dlogprobs);
  float *lp_cpu = malloc((size_t)B * T * sizeof *lp_cpu), *lp_gpu = malloc((size_t)B * T * sizeof *lp_gpu);

  // ---- 1. 20 steps on both ----
  double worst_loss = 0, worst_norm = 0;
  GpuTimer timer;
  double gpu_ms = 0;
  for (int step = 1; step <= STEPS; step++) {
    make_batch(step, B, T, V, tokens, targets, dlogprobs);
    ClipResult cc, gc;
    train_state_zero_grad(&cs);
    if (gemma_forward_backward(&cpu, tokens, targets, B, T, dlogprobs, lp_cpu, &err) != 0) die("CPU step", &err);
    if (train_state_clip_step(&cs, LR, MAX_NORM, 1, &cc, &err) != 0) die("CPU update", &err);
    gpu_timer_start(&timer, ctx);
    train_state_zero_grad(&gs);
    if (gemma_cuda_forward(&gpu, tokens, targets, B, T, lp_gpu, &err) != 0 ||
        gemma_cuda_backward(&gpu, dlogprobs, &err) != 0)
      die("GPU step", &err);
    if (train_state_clip_step(&gs, LR, MAX_NORM, 1, &gc, &err) != 0) die("GPU update", &err);
    gpu_ms += gpu_timer_stop_ms(&timer, ctx, 1);
    double lc = loss_of(lp_cpu, targets, B * T), lg = loss_of(lp_gpu, targets, B * T);
    double el = fabs(lg - lc) / fabs(lc), en = fabs(gc.norm - cc.norm) / cc.norm;
    if (!isfinite(lg) || !isfinite(gc.norm)) el = en = INFINITY;
    printf("step %2d: loss CPU %.6f GPU %.6f (rel %.2e), grad norm CPU %.5f GPU %.5f (rel %.2e)%s\n", step, lc, lg,
           el, cc.norm, gc.norm, en, gc.clipped ? " clipped" : "");
    if (el > worst_loss) worst_loss = el;
    if (en > worst_norm) worst_norm = en;
  }
  gpu_report("train_step_loss", shape, worst_loss, TOL_LOSS_REL, gpu_ms / STEPS, 0, 0);
  gpu_report("train_step_grad_norm", shape, worst_norm, TOL_NORM_REL, gpu_ms / STEPS, 0, 0);
  if (cts.mirror.step != STEPS || cs.opt.step != STEPS) {
    printf("step counters: GPU %lld CPU %lld, expected %d\n", (long long)cts.mirror.step, (long long)cs.opt.step,
           STEPS);
    gpu_failures++;
  }

  // ---- 2. the masters against the CPU weights ----
  if (train_state_sync_model(&gs, &err) != 0) die("gather", &err);
  float *wc = flat_params(&cpu), *wg = flat_params(&host);
  double diff2 = 0, upd2 = 0, max_diff = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)wg[i] - wc[i], u = (double)wc[i] - w0[i];
    diff2 += d * d;
    upd2 += u * u;
    if (!isfinite(d)) max_diff = INFINITY;
    else if (fabs(d) > max_diff) max_diff = fabs(d);
  }
  double upd_rel = upd2 > 0 ? sqrt(diff2 / upd2) : INFINITY;
  printf("masters: update rel L2 %.3e, max |GPU - CPU| %.3e (bound %.3e)\n", upd_rel, max_diff, 2 * LR * STEPS);
  gpu_report("train_masters_update", shape, upd_rel, TOL_UPDATE_REL, 0, 0, 0);
  gpu_report("train_masters_max_abs", shape, max_diff, 2 * LR * STEPS, 0, 0, 0);
  // The working copy: one of the two bf16 neighbours of its master.
  float *w16 = host_from_bf16(ctx, gpu.params, n);
  size_t off_neighbour = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)w16[i] - wg[i]);
    if (!(d == 0 || d < bf16_gap(wg[i]))) off_neighbour++;
  }
  printf("working copy: %zu of %zu elements not a bf16 neighbour of their master\n", off_neighbour, n);
  gpu_report("train_working_copy_neighbour", shape, (double)off_neighbour, 0, 0, 0, 0);

  // ---- 3. checkpoint compatibility ----
  AdamW *mirror = gs.ops->optimizer(gs.ops_ctx);
  int layout_bad = adamw_state_count(mirror) != adamw_state_count(&cs.opt);
  for (int i = 0; !layout_bad && i < adamw_state_count(mirror); i++) {
    AdamWStateArray a, b;
    if (adamw_state_array(mirror, i, &a, &err) != 0 || adamw_state_array(&cs.opt, i, &b, &err) != 0) die("state", &err);
    if (strcmp(a.name, b.name) || a.numel != b.numel) layout_bad = 1;
  }
  layout_bad |= mirror->step != cs.opt.step;
  printf("optimizer state layout %s the CPU's\n", layout_bad ? "DIFFERS FROM" : "matches");
  gpu_report("train_checkpoint_layout", shape, layout_bad, 0, 0, 0, 0);
  // The moments: the mirror's exp_avg_sq against the CPU's (same tolerance
  // argument as the gradients: second moments of bf16 gradients).
  double worst_v = 0;
  for (int i = 1; i < adamw_state_count(mirror); i += 2) {
    AdamWStateArray a, b;
    adamw_state_array(mirror, i, &a, &err);
    adamw_state_array(&cs.opt, i, &b, &err);
    double e = max_rel_error(a.data, b.data, a.numel);
    if (e > worst_v) worst_v = e;
  }
  printf("exp_avg_sq: worst buffer max rel error %.3e (printed only)\n", worst_v);
  // gather -> load -> gather is exact.
  float *m_before = malloc(n * sizeof *m_before);
  size_t o = 0;
  for (int b = 0; b < mirror->num_buffers; b++) {
    memcpy(m_before + o, mirror->buffers[b].exp_avg, mirror->buffers[b].numel * sizeof(float));
    o += mirror->buffers[b].numel;
  }
  if (gs.ops->load(gs.ops_ctx, &host, &err) != 0 || train_state_sync_model(&gs, &err) != 0) die("round trip", &err);
  float *wg2 = flat_params(&host);
  size_t round_trip_bad = 0;
  o = 0;
  for (int b = 0; b < mirror->num_buffers; b++) {
    round_trip_bad += memcmp(m_before + o, mirror->buffers[b].exp_avg, mirror->buffers[b].numel * sizeof(float)) != 0;
    o += mirror->buffers[b].numel;
  }
  round_trip_bad += memcmp(wg, wg2, n * sizeof(float)) != 0;
  gpu_report("train_gather_load_exact", shape, (double)round_trip_bad, 0, 0, 0, 0);
  // load restores the working copy that step 20 wrote (bitwise), so a resumed
  // run continues as the uninterrupted one.
  float *w16_loaded = host_from_bf16(ctx, gpu.params, n);
  size_t w16_diff = 0;
  for (size_t i = 0; i < n; i++) w16_diff += memcmp(&w16[i], &w16_loaded[i], sizeof(float)) != 0;
  printf("working copy after load: %zu of %zu elements differ from the trained one\n", w16_diff, n);
  gpu_report("train_load_working_copy_exact", shape, (double)w16_diff, 0, 0, 0, 0);
  free(w16_loaded);

  // ---- 4. unbiased stochastic rounding ----
  cuda_train_state_free(&cts);
  copy_model(&host, &init);
  AdamWConfig plain = adamw;
  plain.weight_decay = 0;
  if (cuda_train_state_init(&cts, &gpu, &host, &plain, &rules, 7, &err) != 0) die("GPU train state 2", &err);
  cuda_train_state_attach(&gs, &cts);
  for (int step = 1; step <= DRIFT_STEPS; step++) {
    make_batch(100 + step, B, T, V, tokens, targets, dlogprobs);
    ClipResult gc;
    train_state_zero_grad(&gs);
    if (gemma_cuda_forward(&gpu, tokens, targets, B, T, NULL, &err) != 0 ||
        gemma_cuda_backward(&gpu, dlogprobs, &err) != 0 || train_state_clip_step(&gs, DRIFT_LR, 0, 1, &gc, &err) != 0)
      die("drift step", &err);
  }
  if (train_state_sync_model(&gs, &err) != 0) die("gather 2", &err);
  float *m1 = flat_params(&host);
  free(w16);
  w16 = host_from_bf16(ctx, gpu.params, n);
  double master_drift = 0, working_drift = 0, max_move = 0;
  for (size_t i = 0; i < n; i++) {
    double dm = (double)m1[i] - w0[i];
    double s = dm > 0 ? 1 : dm < 0 ? -1 : 0;
    master_drift += fabs(dm);
    working_drift += s * ((double)w16[i] - w0[i]);
    if (fabs(dm) > max_move) max_move = fabs(dm);
  }
  double ratio = master_drift > 0 ? working_drift / master_drift : INFINITY;
  printf("drift: masters %.4e (largest move %.2e), working copy along them %.4e, ratio %.4f\n", master_drift,
         max_move, working_drift, ratio);
  gpu_report("train_stochastic_rounding_unbiased", shape, fabs(ratio - 1), TOL_DRIFT, 0, 0, 0);

  cuda_train_state_free(&cts);
  gemma_cuda_free(&gpu);
  train_state_free(&cs);
  gemma_model_free(&cpu);
  gemma_model_free(&host);
  gemma_model_free(&init);
  free(w0), free(wc), free(wg), free(wg2), free(w16), free(m1), free(m_before);
  free(tokens), free(targets), free(dlogprobs), free(lp_cpu), free(lp_gpu);
  return gpu_test_close(ctx, NAME);
}
