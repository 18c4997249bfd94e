// tests/standin/test_gemma_cuda_standin.c: the GPU model code
// (model/gemma_cuda.c) run on the CPU through the host stand-in of the CUDA
// op layer (ops_cuda_standin.c), so that its logic is tested in CI without a
// GPU, under AddressSanitizer. The stand-in computes every op with the CPU
// reference on bf16-rounded inputs and rounds bf16 outputs, so the numbers
// are those of a bf16 model; what it cannot test (the CUDA kernels) is
// tests/gpu/'s job. On "tiny" and "tiny-gemma2" with head_dim 64 (the
// smallest the CUDA attention takes), against the CPU model (model/gemma.c,
// fp32) on the same bf16-rounded weights:
//   (a) forward log-probs (absolute error), unscored rows exactly 0, two
//       forwards bitwise equal; a smaller batch first, so the big one grows
//       the activations after a backward allocated its scratch;
//   (b) every parameter tensor's gradient (relative error per tensor);
//   (c) gemma_cuda_forward_backward (fused LM head) == forward then backward,
//       bitwise (log-probs and every gradient);
//   (d) gemma_cuda_set_recompute(1): the same bits, separate and fused;
//   (e) cuda.attention = cudnn: bitwise the "fimi" results on tiny (the
//       stand-in's cuDNN is fimi's attention); refused on tiny-gemma2 with an
//       error naming attn_logit_softcapping; unknown names refused; a cuDNN
//       failure inside forward or backward is an error, not a crash;
//   (f) KV-cache decode, sequence 0 one step behind the others: every step's logits
//       against the forward's (lm_head_logits_cuda on its final hidden
//       state) and the CPU decode's; inactive rows untouched; a full cache
//       fails changing nothing; reset replays the first step bitwise; greedy
//       gemma_cuda_generate repeatable and picking the CPU's best tokens;
//   (g) a second backward accumulates: grads = 2 x one backward's;
// and, at the end, that freeing the model and caches released every block.
// Tolerances: those of tests/gpu/test_gpu_model.c, which explains them (bf16
// roundings after every op through 4 layers and back: 5e-2 relative for
// gradients and logits, 1e-1 for gradients whose terms cancel: norm
// weights, q_proj, k_proj; 5e-2 nats for log-probs). Here only the op
// outputs are rounded to bf16 (the stand-in's ops are fp32 inside), so the
// measured errors are somewhat smaller than on a GPU; a wrong offset, op
// order or scale gives errors of order 1. Exits 1 if any check fails.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"
#include "model/decode.h"
#include "model/gemma.h"
#include "model/gemma_cuda.h"
#include "model/safetensors.h"
#include "tests/model_compare.h"

size_t cuda_standin_live_blocks(void);  // ops_cuda_standin.c: cuda_malloc blocks not yet freed

#define TOL_LOGPROB_ABS 5e-2
#define TOL_MODEL_REL 5e-2
#define TOL_CANCELLING_GRAD_REL 1e-1  // norm weights, q_proj, k_proj
#define TOL_ACCUMULATE 1e-5           // fp32 sums: (g + a) + a vs 2 (g + a), per element order
#define TOL_GREEDY_LOGIT 0.1

static int failures = 0;

// One result line: check, case, measured value, tolerance. value > tol fails (NaN fails).
static void report(const char *check, const char *shape, double value, double tol) {
  int pass = value <= tol;
  if (!pass) failures++;
  printf("STANDIN|%-34s|%-44s|%.3e|tol %.0e|%s\n", check, shape, value, tol, pass ? "pass" : "FAIL");
}

// A step that must succeed: reports rc != 0 as a failure with the error.
static int ok(int rc, const char *shape, const char *what, const FimiError *err) {
  if (rc == 0) return 1;
  printf("%s: %s failed: %s\n", shape, what, err->message);
  failures++;
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


// max |got - ref| / max |ref|; a non-finite got gives INFINITY.
static double max_rel_error(const float *got, const float *ref, size_t n) {
  double max_diff = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    double d = fabs((double)got[i] - (double)ref[i]);
    if (d > max_diff) max_diff = d;
    if (fabs(ref[i]) > max_ref) max_ref = fabs(ref[i]);
  }
  return max_diff / (max_ref > 1e-30 ? max_ref : 1e-30);
}

// 0 when a and b (n floats) are bitwise equal, else 1: the value reported with tolerance 0.
static double differs(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) != 0; }

typedef struct Case {
  const char *preset;
  int head_dim;  // override (query_pre_attn_scalar follows)
  int global_head_dim;  // Gemma 4: full-attention layers' head dim override (0: the preset's)
  int B, T;
} Case;

// What one case's checks share.
typedef struct Run {
  char shape[64];
  GemmaModel cpu;      // fp32 reference on bf16-rounded weights, after one forward+backward
  GemmaCudaModel gpu;  // the model under test
  CudaContext *ctx;
  int B, T, N, V, C;
  int *tokens, *targets;  // (B, T)
  float *dlogprobs;       // (B, T) SFT: -1/count on scored rows
  float *lp_cpu;          // (N) CPU forward
  float *lp;              // (N) GPU forward (fimi attention, no recompute)
  float *grads;           // (num_params) GPU gradients of one backward, from zero
  float *ref_logits;      // (B, T, V) the forward's logits at every position
} Run;

// Zeroed gradients, then forward and backward (fused: gemma_cuda_forward_backward);
// log-probs (N) and gradients (num_params) to the host.
static int gpu_pass(Run *r, int fused, float *lp, float *grads, FimiError *err) {
  gemma_cuda_zero_grads(&r->gpu);
  int rc;
  if (fused) {
    rc = gemma_cuda_forward_backward(&r->gpu, r->tokens, r->targets, r->B, r->T, r->dlogprobs, lp, err);
  } else {
    rc = gemma_cuda_forward(&r->gpu, r->tokens, r->targets, r->B, r->T, lp, err);
    if (rc == 0) rc = gemma_cuda_backward(&r->gpu, r->dlogprobs, err);
  }
  if (rc == 0) rc = cuda_context_sync(r->ctx, err);
  if (rc == 0) gemma_cuda_download_grads(&r->gpu, grads);
  return rc;
}

// ---- (a) forward ----

// A small batch (1 x 5) forward+backward first: the main batch then grows the
// activations after a backward carved its scratch (acts_free + re-carve).
static void check_small_batch_first(Run *r) {
  enum { T_SMALL = 5 };
  FimiError err = {0};
  float lp_cpu[T_SMALL], lp_gpu[T_SMALL], dl[T_SMALL];
  int targets[T_SMALL];
  memcpy(targets, r->targets, sizeof targets);  // sequence 0's first targets (next tokens)
  if (!ok(gemma_forward(&r->cpu, r->tokens, targets, 1, T_SMALL, lp_cpu, &err), r->shape, "CPU small forward", &err))
    return;
  for (int t = 0; t < T_SMALL; t++) dl[t] = targets[t] >= 0 ? -1.0f : 0.0f;
  if (!ok(gemma_cuda_forward(&r->gpu, r->tokens, targets, 1, T_SMALL, lp_gpu, &err), r->shape, "small forward", &err) ||
      !ok(gemma_cuda_backward(&r->gpu, dl, &err), r->shape, "small backward", &err))
    return;
  int bad = 0;
  report("small_batch_logprobs_abs", r->shape, logprob_error(lp_gpu, lp_cpu, targets, T_SMALL, &bad), TOL_LOGPROB_ABS);
  gemma_cuda_zero_grads(&r->gpu);
}

static void check_forward(Run *r) {
  FimiError err = {0};
  float *lp2 = malloc((size_t)r->N * sizeof(float));
  double t0 = now_s();
  if (!ok(gemma_cuda_forward(&r->gpu, r->tokens, r->targets, r->B, r->T, r->lp, &err), r->shape, "forward", &err) ||
      !ok(gemma_cuda_forward(&r->gpu, r->tokens, r->targets, r->B, r->T, lp2, &err), r->shape, "forward", &err)) {
    free(lp2);
    return;
  }
  printf("%s: two forwards %.3f s\n", r->shape, now_s() - t0);
  int bad_unscored = 0;
  report("a_forward_logprobs_abs", r->shape, logprob_error(r->lp, r->lp_cpu, r->targets, r->N, &bad_unscored),
         TOL_LOGPROB_ABS);
  report("a_forward_unscored_rows_nonzero", r->shape, bad_unscored, 0);
  report("a_forward_deterministic_differs", r->shape, differs(r->lp, lp2, (size_t)r->N), 0);
  double loss_cpu = 0, loss_gpu = 0;
  for (int i = 0; i < r->N; i++) {
    loss_cpu += (double)r->dlogprobs[i] * r->lp_cpu[i];
    loss_gpu += (double)r->dlogprobs[i] * r->lp[i];
  }
  printf("%s: SFT loss CPU %.6f stand-in %.6f\n", r->shape, loss_cpu, loss_gpu);
  free(lp2);
}

// The forward's logits at every position (B, T, V), for the decode check.
static void save_forward_logits(Run *r) {
  FimiError err = {0};
  void *d_logits = NULL;
  const bf16 *hidden = gemma_cuda_final_hidden_device(&r->gpu);
  size_t n = (size_t)r->N * r->V;
  if (!hidden || !ok(cuda_malloc(&d_logits, n * sizeof(float), &err), r->shape, "logits buffer", &err)) {
    failures += !hidden;
    return;
  }
  lm_head_logits_cuda(r->ctx, d_logits, hidden, r->gpu.params, r->N, r->C, r->V,
                      (float)r->gpu.config.final_logit_softcapping);
  r->ref_logits = malloc(n * sizeof(float));
  cuda_download_f32(r->ctx, r->ref_logits, d_logits, n);
  cuda_free(d_logits);
}

// ---- (b) gradients, (g) accumulation ----

static void check_grads(Run *r) {
  FimiError err = {0};
  double t0 = now_s();
  if (!ok(gemma_cuda_backward(&r->gpu, r->dlogprobs, &err), r->shape, "backward", &err)) return;
  printf("%s: backward %.3f s\n", r->shape, now_s() - t0);
  gemma_cuda_download_grads(&r->gpu, r->grads);
  double worst = -1;
  const char *worst_name = "";
  for (int i = 0; i < r->cpu.num_tensors; i++) {
    const GemmaTensor *t = &r->cpu.tensors[i];
    double e = max_rel_error(r->grads + gemma_cuda_tensor_offset(&r->gpu, t), gemma_tensor_grad(&r->cpu, t), t->numel);
    double tol = grad_tolerance(&r->cpu, t, TOL_MODEL_REL, TOL_CANCELLING_GRAD_REL);
    char name[160];
    snprintf(name, sizeof name, "%s %s", r->shape, t->name + (strncmp(t->name, "model.", 6) ? 0 : 6));
    report("b_grad_rel", name, e, tol);
    if (!(e / tol <= worst)) {
      worst = e / tol;
      worst_name = t->name;
    }
  }
  printf("%s: worst gradient relative to its tolerance: %s (%.2f of it)\n", r->shape, worst_name, worst);
}

static void check_accumulate(Run *r) {
  FimiError err = {0};
  size_t np = r->gpu.num_params;
  float *g2 = malloc(np * sizeof(float)), *twice = malloc(np * sizeof(float));
  if (ok(gemma_cuda_backward(&r->gpu, r->dlogprobs, &err), r->shape, "second backward", &err)) {
    gemma_cuda_download_grads(&r->gpu, g2);
    for (size_t i = 0; i < np; i++) twice[i] = 2.0f * r->grads[i];
    report("g_second_backward_vs_2x_rel", r->shape, max_rel_error(g2, twice, np), TOL_ACCUMULATE);
  }
  free(g2);
  free(twice);
}

// ---- (c) fused, (d) recompute, (e) attention backend: all bitwise ----

// One forward+backward pass (fused or not) against the reference pass's bits.
static void check_pass_bitwise(Run *r, const char *check, int fused) {
  FimiError err = {0};
  size_t np = r->gpu.num_params;
  float *lp = malloc((size_t)r->N * sizeof(float)), *g = malloc(np * sizeof(float));
  double t0 = now_s();
  if (ok(gpu_pass(r, fused, lp, g, &err), r->shape, check, &err)) {
    printf("%s: %s pass %.3f s\n", r->shape, check, now_s() - t0);
    report(check, r->shape, differs(lp, r->lp, (size_t)r->N) + differs(g, r->grads, np), 0);
  }
  free(lp);
  free(g);
}

static void check_fused_and_recompute(Run *r) {
  check_pass_bitwise(r, "c_fused_vs_separate_differs", 1);
  gemma_cuda_set_recompute(&r->gpu, 1);
  check_pass_bitwise(r, "d_recompute_differs", 0);
  check_pass_bitwise(r, "d_recompute_fused_differs", 1);
  gemma_cuda_set_recompute(&r->gpu, 0);
}

// A name refused with an error containing `needle`, the backend unchanged.
static void check_refused(Run *r, const char *check, const char *name, const char *needle) {
  FimiError err = {0};
  GemmaCudaAttention before = r->gpu.attention;
  int rc = gemma_cuda_set_attention(&r->gpu, name, &err);
  printf("%s: set_attention(\"%s\"): rc %d, \"%s\"\n", r->shape, name, rc, err.message);
  report(check, r->shape, rc == 0 || !strstr(err.message, needle) || r->gpu.attention != before, 0);
}

// cuDNN failing inside a pass (forced past set_attention's check): an error
// naming the softcap from forward and from backward, and no crash.
static void check_cudnn_failure_is_error(Run *r) {
  FimiError err = {0};
  float *lp = malloc((size_t)r->N * sizeof(float));
  r->gpu.attention = GEMMA_CUDA_ATTENTION_CUDNN;
  int rc = gemma_cuda_forward(&r->gpu, r->tokens, r->targets, r->B, r->T, lp, &err);
  printf("%s: forced cudnn forward: rc %d, \"%s\"\n", r->shape, rc, err.message);
  report("e_cudnn_forward_fails_cleanly", r->shape, rc == 0 || !strstr(err.message, "softcap"), 0);
  r->gpu.attention = GEMMA_CUDA_ATTENTION_FIMI;
  FimiError err2 = {0};
  if (ok(gemma_cuda_forward(&r->gpu, r->tokens, r->targets, r->B, r->T, lp, &err2), r->shape, "forward", &err2)) {
    report("e_forward_after_failure_differs", r->shape, differs(lp, r->lp, (size_t)r->N), 0);
    r->gpu.attention = GEMMA_CUDA_ATTENTION_CUDNN;
    FimiError err3 = {0};
    rc = gemma_cuda_backward(&r->gpu, r->dlogprobs, &err3);
    printf("%s: forced cudnn backward: rc %d, \"%s\"\n", r->shape, rc, err3.message);
    report("e_cudnn_backward_fails_cleanly", r->shape, rc == 0 || !strstr(err3.message, "softcap"), 0);
    r->gpu.attention = GEMMA_CUDA_ATTENTION_FIMI;
  }
  free(lp);
}

static void check_attention_backend(Run *r) {
  FimiError err = {0};
  check_refused(r, "e_unknown_name_accepted", "flash", "flash");
  for (int l = 0; l < r->gpu.config.num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(&r->gpu.config, l, &shape);
    if (shape.head_dim > 256) {  // cuDNN's attention takes head dims up to 256
      check_refused(r, "e_cudnn_head_dim_512_accepted", "cudnn", "head dim 512");
      return;
    }
  }
  if (r->gpu.config.attn_logit_softcapping > 0) {
    check_refused(r, "e_cudnn_softcap_accepted", "cudnn", "attn_logit_softcapping");
    check_cudnn_failure_is_error(r);
    return;
  }
  if (!ok(gemma_cuda_set_attention(&r->gpu, "cudnn", &err), r->shape, "set_attention cudnn", &err)) return;
  report("e_cudnn_selected_not", r->shape, r->gpu.attention != GEMMA_CUDA_ATTENTION_CUDNN, 0);
  check_pass_bitwise(r, "e_cudnn_vs_fimi_differs", 0);
  check_pass_bitwise(r, "e_cudnn_fused_vs_fimi_differs", 1);
  if (ok(gemma_cuda_set_attention(&r->gpu, "fimi", &err), r->shape, "set_attention fimi", &err))
    report("e_fimi_selected_not", r->shape, r->gpu.attention != GEMMA_CUDA_ATTENTION_FIMI, 0);
}

// ---- (f) KV-cache decode ----

// Decode state of the check: both caches and the host buffers of a step.
typedef struct DecodeCheck {
  GemmaCudaKVCache gcache;
  GemmaKVCache ccache;
  float *glogits, *clogits, *first_step;  // (B, V) each
  int *step_tokens, *active;              // (B)
  RelAcc vs_forward, vs_cpu;
  int bad_rows, argmax_same, compared;
} DecodeCheck;

// Sequence 0 starts one step after the others: the first and last steps
// have inactive rows (the first step's run starts at sequence 1, so its
// lengths are read at an offset), sequence 0 sits at another position than
// the rest (its own KV-cache copy), and sequences 1.. are in lockstep (one
// strided copy of consecutive rows).
static int decode_delay(int b) { return b == 0; }
#define DECODE_MAX_DELAY 1

// Step s: sequence b feeds its token at position s - decode_delay(b).
static void set_step(const Run *r, DecodeCheck *d, int s) {
  for (int b = 0; b < r->B; b++) {
    int p = s - decode_delay(b);
    d->active[b] = p >= 0 && p < r->T;
    d->step_tokens[b] = d->active[b] ? r->tokens[(size_t)b * r->T + p] : 0;
  }
}

static void compare_step(const Run *r, DecodeCheck *d, int s) {
  int V = r->V;
  for (int b = 0; b < r->B; b++) {
    const float *g = d->glogits + (size_t)b * V, *c = d->clogits + (size_t)b * V;
    if (!d->active[b]) {
      d->bad_rows += g[0] != -12345.0f || g[V - 1] != -12345.0f;  // inactive: untouched
      continue;
    }
    int p = s - decode_delay(b);
    d->bad_rows += d->gcache.lengths[b] != p + 1;
    rel_add(&d->vs_forward, g, r->ref_logits + ((size_t)b * r->T + p) * V, (size_t)V);
    rel_add(&d->vs_cpu, g, c, (size_t)V);
    int ag = 0, ac = 0;
    for (int v = 1; v < V; v++) {
      ag = g[v] > g[ag] ? v : ag;
      ac = c[v] > c[ac] ? v : ac;
    }
    d->argmax_same += ag == ac;
    d->compared++;
  }
}

// Every step of both sequences on both backends; 0 when all succeeded.
static int run_decode_steps(Run *r, DecodeCheck *d) {
  FimiError err = {0};
  size_t BV = (size_t)r->B * r->V;
  for (int s = 0; s < r->T + DECODE_MAX_DELAY; s++) {
    set_step(r, d, s);
    for (size_t i = 0; i < BV; i++) d->glogits[i] = -12345.0f;
    if (!ok(gemma_cuda_decode_step(&r->gpu, &d->gcache, d->step_tokens, d->active, d->glogits, &err), r->shape,
            "decode step", &err) ||
        !ok(gemma_decode_step(&r->cpu, &d->ccache, d->step_tokens, d->active, d->clogits, &err), r->shape,
            "CPU decode step", &err))
      return -1;
    if (s == 0) memcpy(d->first_step, d->glogits, BV * sizeof(float));
    compare_step(r, d, s);
  }
  return 0;
}

// A full cache fails and changes nothing; reset, then step 0 again gives the same bits.
static void check_full_then_reset(Run *r, DecodeCheck *d) {
  FimiError err = {0};
  size_t BV = (size_t)r->B * r->V;
  for (int b = 0; b < r->B; b++) d->active[b] = 1;
  int rc = gemma_cuda_decode_step(&r->gpu, &d->gcache, d->step_tokens, d->active, NULL, &err);
  int changed = 0;
  for (int b = 0; b < r->B; b++) changed += d->gcache.lengths[b] != r->T;
  report("f_full_cache_accepted", r->shape, rc == 0 || changed, 0);
  gemma_cuda_kv_cache_reset(&d->gcache);
  set_step(r, d, 0);
  for (size_t i = 0; i < BV; i++) d->glogits[i] = -12345.0f;
  if (ok(gemma_cuda_decode_step(&r->gpu, &d->gcache, d->step_tokens, d->active, d->glogits, &err), r->shape,
         "decode after reset", &err))
    report("f_reset_replay_differs", r->shape, differs(d->glogits, d->first_step, BV), 0);
}

static void check_decode(Run *r) {
  FimiError err = {0};
  DecodeCheck d = {0};
  size_t BV = (size_t)r->B * r->V;
  if (!r->ref_logits ||
      !ok(gemma_cuda_kv_cache_create(&d.gcache, &r->gpu, r->B, r->T, &err), r->shape, "KV cache", &err))
    return;
  if (!ok(gemma_kv_cache_create(&d.ccache, &r->cpu.config, r->B, r->T, &err), r->shape, "CPU KV cache", &err)) {
    gemma_cuda_kv_cache_free(&d.gcache);
    return;
  }
  d.glogits = malloc(BV * sizeof(float));
  d.clogits = malloc(BV * sizeof(float));
  d.first_step = malloc(BV * sizeof(float));
  d.step_tokens = calloc((size_t)r->B, sizeof(int));
  d.active = calloc((size_t)r->B, sizeof(int));
  double t0 = now_s();
  if (run_decode_steps(r, &d) == 0) {
    printf("%s: %d decode steps %.3f s, argmax = CPU decode's %d/%d\n", r->shape, r->T + DECODE_MAX_DELAY, now_s() - t0,
           d.argmax_same, d.compared);
    report("f_decode_vs_forward_rel", r->shape, rel_value(&d.vs_forward), TOL_MODEL_REL);
    report("f_decode_vs_cpu_decode_rel", r->shape, rel_value(&d.vs_cpu), TOL_MODEL_REL);
    report("f_decode_rows_compared_short", r->shape, r->B * r->T - d.compared, 0);
    report("f_decode_bad_rows_or_lengths", r->shape, d.bad_rows, 0);
    check_full_then_reset(r, &d);
  }
  free(d.glogits), free(d.clogits), free(d.first_step), free(d.step_tokens), free(d.active);
  gemma_cuda_kv_cache_free(&d.gcache);
  gemma_kv_cache_free(&d.ccache);
}

// Largest CPU logit minus the CPU logit of each token greedy generation picked
// (teacher-forced CPU decode over the generated tokens).
static double greedy_gap(Run *r, const int *const *prompts, const int *lengths, const int *out, const int *out_len,
                         int B, int max_new) {
  FimiError err = {0};
  double worst = 0;
  float *logits = malloc((size_t)r->V * sizeof(float));
  for (int b = 0; b < B; b++) {
    GemmaKVCache cache;
    if (!ok(gemma_kv_cache_create(&cache, &r->cpu.config, 1, lengths[b] + max_new, &err), r->shape, "cache", &err))
      break;
    for (int t = 0; t < lengths[b] + out_len[b] - 1; t++) {
      int tok = t < lengths[b] ? prompts[b][t] : out[b * max_new + t - lengths[b]];
      if (!ok(gemma_decode_step(&r->cpu, &cache, &tok, NULL, logits, &err), r->shape, "CPU decode", &err)) break;
      if (t < lengths[b] - 1) continue;
      int picked = out[b * max_new + t + 1 - lengths[b]];
      float best = logits[0];
      for (int v = 1; v < r->V; v++) best = logits[v] > best ? logits[v] : best;
      double gap = picked >= 0 && picked < r->V ? best - logits[picked] : INFINITY;
      worst = gap > worst ? gap : worst;
    }
    gemma_kv_cache_free(&cache);
  }
  free(logits);
  return worst;
}

static void check_generate(Run *r) {
  enum { B = 2, NEW = 12 };
  int lengths[B] = {5, 9};
  const int *prompts[B] = {r->tokens, r->tokens + r->T};
  GenerateOptions opt = {.max_new = NEW, .sampler = {0.0f, 1.0f}, .seed = 7};
  int out[2][B * NEW], out_len[2][B];
  FimiError err = {0};
  for (int k = 0; k < 2; k++)
    if (!ok(gemma_cuda_generate(&r->gpu, prompts, lengths, B, &opt, out[k], out_len[k], &err), r->shape, "generate",
            &err))
      return;
  int same = memcmp(out[0], out[1], sizeof out[0]) == 0 && memcmp(out_len[0], out_len[1], sizeof out_len[0]) == 0;
  report("f_generate_not_repeatable", r->shape, !same, 0);
  report("f_generate_greedy_cpu_logit_gap", r->shape, greedy_gap(r, prompts, lengths, out[0], out_len[0], B, NEW),
         TOL_GREEDY_LOGIT);
}

// ---- API misuse: errors, not crashes ----

static void check_errors(Run *r) {
  FimiError err = {0};
  int saved = r->tokens[1];
  r->tokens[1] = r->V;  // out of the vocabulary
  int rc = gemma_cuda_forward(&r->gpu, r->tokens, r->targets, r->B, r->T, NULL, &err);
  r->tokens[1] = saved;
  printf("%s: forward with token V: rc %d, \"%s\"\n", r->shape, rc, err.message);
  report("api_bad_token_accepted", r->shape, rc == 0, 0);
  GemmaCudaModel fresh;
  FimiError err2 = {0};
  if (!ok(gemma_cuda_create(&fresh, &r->gpu.config, r->ctx, &err2), r->shape, "second model", &err2)) return;
  rc = gemma_cuda_backward(&fresh, r->dlogprobs, &err2);
  printf("%s: backward before any forward: rc %d, \"%s\"\n", r->shape, rc, err2.message);
  report("api_backward_without_forward_ok", r->shape, rc == 0, 0);
  gemma_cuda_free(&fresh);
}

// ---- one case ----

static int setup(Run *r, const Case *c, CudaContext *ctx) {
  FimiError err = {0};
  GemmaConfig cfg;
  memset(r, 0, sizeof *r);
  // "hd64" or, with a global head dim, "hd64/512"
  snprintf(r->shape, sizeof r->shape, "%s hd%d%s%.0d B%d T%d", c->preset, c->head_dim, c->global_head_dim ? "/" : "",
           c->global_head_dim, c->B, c->T);
  if (!ok(gemma_config_preset(&cfg, c->preset, &err), r->shape, "preset", &err)) return -1;
  cfg.head_dim = c->head_dim;
  cfg.query_pre_attn_scalar = c->head_dim;
  if (c->global_head_dim) cfg.global_head_dim = c->global_head_dim;
  r->ctx = ctx;
  r->B = c->B, r->T = c->T, r->N = c->B * c->T, r->V = cfg.vocab_size, r->C = cfg.hidden_size;
  if (!ok(gemma_model_create(&r->cpu, &cfg, &err), r->shape, "CPU model", &err)) return -1;
  if (!ok(gemma_model_alloc_grads(&r->cpu, &err), r->shape, "CPU grads", &err)) return -1;
  gemma_model_init_random(&r->cpu, 1234);
  temper_gemma4_scores(&r->cpu);
  round_model_to_bf16(&r->cpu);
  r->tokens = malloc((size_t)r->N * sizeof(int));
  r->targets = malloc((size_t)r->N * sizeof(int));
  r->dlogprobs = malloc((size_t)r->N * sizeof(float));
  r->lp_cpu = malloc((size_t)r->N * sizeof(float));
  r->lp = malloc((size_t)r->N * sizeof(float));
  make_sft_batch(&cfg, r->B, r->T, r->tokens, r->targets, r->dlogprobs, 99);
  if (!ok(gemma_cuda_create(&r->gpu, &cfg, ctx, &err), r->shape, "GPU model", &err) ||
      !ok(gemma_cuda_upload_weights(&r->gpu, &r->cpu, &err), r->shape, "upload", &err) ||
      !ok(gemma_cuda_alloc_grads(&r->gpu, &err), r->shape, "GPU grads", &err))
    return -1;
  r->grads = malloc(r->gpu.num_params * sizeof(float));
  gemma_cuda_download_grads(&r->gpu, r->grads);  // alloc_grads zeroes (cuda_malloc's memory is NaN here)
  size_t nonzero = 0;
  for (size_t i = 0; i < r->gpu.num_params; i++) nonzero += r->grads[i] != 0.0f;
  report("alloc_grads_nonzero", r->shape, (double)nonzero, 0);
  printf("%s: %lld parameters, embed scale %.4f (CPU %.4f)\n", r->shape, (long long)gemma_model_param_count(&r->cpu),
         r->gpu.embed_scale, gemma_embed_scale(&cfg));
  return 0;
}

// The CPU reference: the small batch's forward happens inside
// check_small_batch_first, so the main forward+backward runs last on the CPU.
static int cpu_reference(Run *r) {
  FimiError err = {0};
  double t0 = now_s();
  if (!ok(gemma_forward(&r->cpu, r->tokens, r->targets, r->B, r->T, r->lp_cpu, &err), r->shape, "CPU forward", &err) ||
      !ok(gemma_backward(&r->cpu, r->dlogprobs, &err), r->shape, "CPU backward", &err))
    return -1;
  printf("%s: CPU reference forward+backward %.3f s\n", r->shape, now_s() - t0);
  return 0;
}

static void teardown(Run *r) {
  gemma_cuda_free(&r->gpu);
  gemma_model_free(&r->cpu);
  free(r->tokens), free(r->targets), free(r->dlogprobs), free(r->lp_cpu), free(r->lp), free(r->grads);
  free(r->ref_logits);
}

static void run_case(const Case *c, CudaContext *ctx) {
  Run r;
  double t0 = now_s();
  if (setup(&r, c, ctx) == 0) {
    check_small_batch_first(&r);
    if (cpu_reference(&r) == 0) {
      check_forward(&r);
      save_forward_logits(&r);
      check_grads(&r);
      check_accumulate(&r);
      check_fused_and_recompute(&r);
      check_attention_backend(&r);
      check_decode(&r);
      check_generate(&r);
      check_errors(&r);
    }
  }
  teardown(&r);
  report("device_blocks_leaked", r.shape, (double)cuda_standin_live_blocks(), 0);
  printf("%s: case %.2f s\n", r.shape, now_s() - t0);
}

int main(void) {
  // T = 37: not a multiple of any tile, longer than the sliding window (8),
  // so sliding and global layers differ and the decode runs past the window.
  // B = 3: the decode check needs two sequences in lockstep beside a third.
  // tiny-g4 (Gemma 4: per-layer inputs, kv sharing, keys as values on the
  // full layers, partial rope, double-wide MLPs) with head dims 64 and, on
  // its full-attention layers, 512 (the E2B/E4B global head dim).
  static const Case cases[] = {
      {"tiny", 64, 0, 3, 37}, {"tiny-gemma2", 64, 0, 3, 37}, {"tiny-g4", 64, 512, 3, 37}};
  CudaContext *ctx = NULL;
  FimiError err = {0};
  if (cuda_context_create(&ctx, 0, &err) != 0) {
    fprintf(stderr, "test_gemma_cuda_standin: %s\n", err.message);
    return 1;
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], ctx);
  cuda_context_destroy(ctx);
  printf("test_gemma_cuda_standin: %s (%d failures)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
