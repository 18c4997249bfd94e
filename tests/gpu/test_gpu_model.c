// tests/gpu/test_gpu_model.c: the whole Gemma model on the GPU
// (model/gemma_cuda.c) against the CPU fp32 model (model/gemma.c) on the
// same bf16-rounded random weights, for "tiny" and "tiny-gemma2" (with
// head_dim 64, the smallest the CUDA attention takes), "tiny-g4" (Gemma 4,
// head dims 64 and 512 on its full-attention layers) and "gpu-100m":
// - per-token log-probs of a forward (absolute error) and bitwise
//   determinism of two forwards;
// - the gradient of EVERY parameter tensor after one backward (max rel.
//   error per tensor: one GPU_RESULT line per tensor for the tiny models,
//   the worst tensor for gpu-100m, with every tensor's error printed as plain
//   lines), that a second backward ACCUMULATES (grad2 = 2 * grad1), and
//   that the fused forward+backward (SFT) and the recomputing backward
//   (model.recompute) give the same bits;
// - the same checks with cuda.attention = cudnn on tiny (cuDNN's SDPA in
//   forward and backward; skipped where libcudnn is missing);
// - KV-cache decoding: token-by-token decode steps of two sequences (the
//   second starting one step late, so the sequences sit at different
//   positions) give, at every step, the logits of the full forward at that
//   position (lm_head_logits_cuda on the forward's final hidden state) and
//   of the CPU decode; inactive rows are left untouched.
// Tolerances (bf16 everywhere on the GPU; the CPU is fp32 on the same
// weights): activations are rounded to bf16 (relative 2^-9) after every op,
// through 4 to 12 layers and their backward, with the residual stream's
// gradient itself in bf16. Each rounding is ~2e-3 relative; they add up
// (partly cancelling) over the ~25 ops per layer, so 5e-2 relative for
// weight-matrix gradients and logits is the first, safe bound: the numbers
// are printed so that it can be tightened once measured. Norm weights
// (input/post/pre/q/k norms) get 1e-1: their gradient is a sum over every
// row (and head) of dout * x_hat whose terms mostly cancel at this init, so
// the bf16 error of the terms is large relative to the sum (an emulation of
// the GPU's bf16 roundings on the CPU measured 5.3e-2 on tiny's
// layers.2.q_norm, 1-3e-2 elsewhere). q_proj and k_proj get 1e-1 too: their
// gradient goes through the softmax derivative P * (dP - rowsum(P * dP)),
// whose terms cancel when attention is near uniform (random init), so the
// result is small next to the bf16 errors of its terms (emulation: up to
// 3.8e-2 on gpu-100m's k_proj). A wrong op, offset or scale gives errors
// of order 1, far above these bounds. Log-probs are ~-ln V ~ -10: their
// error is that of a logit (|logit| < ~3 at this init, 1e-2 relative of
// it) plus that of the log-sum-exp, so 5e-2 nats absolute.
// gpu-100m also differs by the embedding scale: sqrt(640) = 25.298 on the
// CPU (fp32) vs 25.25 on the GPU (rounded to bf16 as HF does with bf16
// weights), a 0.2% change of the embedding inside the residual stream.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_test.h"
#include "model/decode.h"
#include "model/gemma.h"
#include "model/gemma_cuda.h"
#include "tests/model_compare.h"

#define TOL_LOGPROB_ABS 5e-2
#define TOL_MODEL_REL 5e-2
#define TOL_CANCELLING_GRAD_REL 1e-1  // norm weights, q_proj, k_proj (see above)
// A second backward adds the same contribution again: 2x within fp32
// accumulation roundoff (the embedding rows and LM-head chunks are added one
// after another onto the first pass's sums).
#define TOL_ACCUMULATE 1e-5

typedef struct ModelCase {
  const char *preset;
  int head_dim;        // 0: the preset's; else override (query_pre_attn_scalar follows)
  int global_head_dim; // Gemma 4: 0 = the preset's; else the full-attention layers' head dim
  int B, T;
  int decode_len;      // positions checked by the decode test (<= T)
  int report_tensors;  // 1: one GPU_RESULT line per tensor; 0: the worst one
  const char *attention;  // cuda.attention: NULL = fimi's kernels, "cudnn" = cuDNN's SDPA
} ModelCase;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// FLOPs of one forward over B*T tokens: 2 per weight of every matmul (the
// tied embedding once, as the LM head) per token, plus the attention's
// QK^T and AV over the keys each query actually sees (causal, window).
// Per layer shape (Gemma 4 layers differ; kv-shared layers have no k/v
// projections); Gemma 4's per-layer input block counted, its table gather not.
static double forward_flops(const GemmaConfig *cfg, int B, int T) {
  double C = cfg->hidden_size, P = cfg->family == GEMMA_FAMILY_GEMMA4 ? cfg->hidden_size_per_layer_input : 0;
  double weights = (double)cfg->vocab_size * C + C * P * cfg->num_hidden_layers, attn = 0;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    double qd = (double)cfg->num_attention_heads * shape.head_dim, kvd = (double)shape.kv_heads * shape.head_dim;
    weights += C * qd * 2 + C * kvd * (shape.has_kv + shape.has_v) + 3 * C * shape.intermediate + 2 * C * P;
    GemmaAttnSpec spec;
    gemma_attn_spec(cfg, l, &spec);
    attn += 4.0 * qd * gemma_visible_pairs(T, spec.window) * B;
  }
  return 2.0 * weights * B * T + attn;
}

// Decode two sequences token by token on the GPU (and the CPU), comparing
// every step's logits with the full forward's at that position. ref_logits
// (B, decode_len, V) are the GPU forward's logits of the first decode_len
// positions of each sequence.
static void check_decode(GemmaModel *cpu, GemmaCudaModel *gpu, const ModelCase *mc,
                         const int *tokens, const float *ref_logits, const char *shape) {
  const GemmaConfig *cfg = &cpu->config;
  int V = cfg->vocab_size, B = mc->B, T = mc->T, P = mc->decode_len;
  FimiError err = {0};
  GemmaCudaKVCache gcache;
  GemmaKVCache ccache;
  if (gemma_cuda_kv_cache_create(&gcache, gpu, B, P, &err) != 0 ||
      gemma_kv_cache_create(&ccache, cfg, B, P, &err) != 0) {
    printf("decode: %s\n", err.message);
    gpu_failures++;
    return;
  }
  float *glogits = malloc((size_t)B * V * sizeof(float));  // (B, V)
  float *clogits = malloc((size_t)B * V * sizeof(float));
  int *step_tokens = calloc((size_t)B, sizeof(int)), *active = calloc((size_t)B, sizeof(int));
  RelAcc vs_forward = {0}, vs_cpu = {0};
  int untouched_bad = 0, argmax_same = 0, compared = 0;
  double t_gpu = 0;
  // Sequence b starts b steps late, so after the first steps the active
  // sequences sit at different positions (the KV-cache writes cannot be one
  // strided copy) and some steps have an inactive sequence.
  for (int s = 0; s < P + B - 1; s++) {
    for (int b = 0; b < B; b++) {
      int p = s - b;
      active[b] = p >= 0 && p < P;
      step_tokens[b] = active[b] ? tokens[(size_t)b * T + p] : 0;
    }
    for (size_t i = 0; i < (size_t)B * V; i++) glogits[i] = -12345.0f;
    double t0 = now_s();
    int rc = gemma_cuda_decode_step(gpu, &gcache, step_tokens, active, glogits, &err);
    t_gpu += now_s() - t0;  // host wall time of a step incl. the logits download
    if (rc != 0 || gemma_decode_step(cpu, &ccache, step_tokens, active, clogits, &err) != 0) {
      printf("decode step %d: %s\n", s, err.message);
      gpu_failures++;
      break;
    }
    for (int b = 0; b < B; b++) {
      const float *g = glogits + (size_t)b * V;
      if (!active[b]) {
        untouched_bad += g[0] != -12345.0f || g[V - 1] != -12345.0f;
        continue;
      }
      int p = s - b;
      if (gcache.lengths[b] != p + 1) untouched_bad++;
      rel_add(&vs_forward, g, ref_logits + ((size_t)b * P + p) * V, (size_t)V);
      rel_add(&vs_cpu, g, clogits + (size_t)b * V, (size_t)V);
      int ag = 0, ac = 0;
      for (int v = 1; v < V; v++) {
        if (g[v] > g[ag]) ag = v;
        if (clogits[(size_t)b * V + v] > clogits[(size_t)b * V + ac]) ac = v;
      }
      argmax_same += ag == ac;
      compared++;
    }
  }
  char line[160];
  snprintf(line, sizeof line, "%s P%d argmax=cpu %d/%d", shape, P, argmax_same, compared);
  gpu_report("model_decode_vs_forward", line, rel_value(&vs_forward), TOL_MODEL_REL, 1e3 * t_gpu / (P + B - 1), 0, 0);
  gpu_report("model_decode_vs_cpu_decode", line, rel_value(&vs_cpu), TOL_MODEL_REL, 0, 0, 0);
  gpu_report("model_decode_inactive_untouched", shape, untouched_bad, 0, 0, 0, 0);
  // A full cache is an error that changes nothing.
  for (int b = 0; b < B; b++) active[b] = 1;
  int rc = gemma_cuda_decode_step(gpu, &gcache, step_tokens, active, NULL, &err);
  gpu_report("model_decode_full_cache_fails", shape, rc == 0 || gcache.lengths[0] != P, 0, 0, 0, 0);
  free(glogits);
  free(clogits);
  free(step_tokens);
  free(active);
  gemma_cuda_kv_cache_free(&gcache);
  gemma_kv_cache_free(&ccache);
}

// gemma_cuda_generate (greedy, two prompts of different lengths, 12 new
// tokens): the same call twice gives the same tokens, and every token it
// picks is the CPU model's best next token up to bf16 error: its CPU logit
// (teacher-forced CPU decode over the GPU's own output) is within
// TOL_GREEDY_LOGIT of the CPU's largest.
#define TOL_GREEDY_LOGIT 0.1
static void check_generate(GemmaModel *cpu, GemmaCudaModel *gpu, const int *tokens, int T, const char *shape) {
  enum { B = 2, NEW = 12 };
  int V = cpu->config.vocab_size, lengths[B] = {5, 9};
  const int *prompts[B] = {tokens, tokens + T};
  GenerateOptions opt = {.max_new = NEW, .sampler = {0.0f, 1.0f}, .seed = 7};
  int out[2][B * NEW], out_len[2][B];
  FimiError err = {0};
  for (int r = 0; r < 2; r++)
    if (gemma_cuda_generate(gpu, prompts, lengths, B, &opt, out[r], out_len[r], &err) != 0) {
      printf("%s: generate: %s\n", shape, err.message);
      gpu_failures++;
      return;
    }
  int same = memcmp(out[0], out[1], sizeof out[0]) == 0 && memcmp(out_len[0], out_len[1], sizeof out_len[0]) == 0;
  gpu_report("model_generate_repeatable", shape, !same, 0, 0, 0, 0);
  double worst_gap = 0;
  float *logits = malloc((size_t)V * sizeof(float));
  for (int b = 0; b < B; b++) {
    GemmaKVCache cache;
    if (gemma_kv_cache_create(&cache, &cpu->config, 1, lengths[b] + NEW, &err) != 0) break;
    for (int t = 0; t < lengths[b] + out_len[0][b] - 1; t++) {
      int tok = t < lengths[b] ? prompts[b][t] : out[0][b * NEW + t - lengths[b]];
      if (gemma_decode_step(cpu, &cache, &tok, NULL, logits, &err) != 0) break;
      if (t < lengths[b] - 1) continue;
      int picked = out[0][b * NEW + t + 1 - lengths[b]];
      float best = logits[0];
      for (int v = 1; v < V; v++) best = logits[v] > best ? logits[v] : best;
      double gap = picked >= 0 && picked < V ? best - logits[picked] : INFINITY;
      if (gap > worst_gap) worst_gap = gap;
    }
    gemma_kv_cache_free(&cache);
  }
  free(logits);
  char line[160];
  snprintf(line, sizeof line, "%s greedy %dx%d, worst CPU logit gap", shape, B, NEW);
  gpu_report("model_generate_greedy_vs_cpu", line, worst_gap, TOL_GREEDY_LOGIT, 0, 0, 0);
}

static void run_case(CudaContext *ctx, const ModelCase *mc) {
  FimiError err = {0};
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, mc->preset, &err) != 0) {
    printf("%s: %s\n", mc->preset, err.message);
    gpu_failures++;
    return;
  }
  if (mc->head_dim) {
    cfg.head_dim = mc->head_dim;
    cfg.query_pre_attn_scalar = mc->head_dim;
  }
  if (mc->global_head_dim) cfg.global_head_dim = mc->global_head_dim;
  int B = mc->B, T = mc->T, N = B * T, V = cfg.vocab_size, C = cfg.hidden_size;
  char shape[96];
  snprintf(shape, sizeof shape, "%s%s%s%.0d%s B%d T%d", mc->preset, mc->head_dim ? " hd64" : "",
           mc->global_head_dim ? "/" : "", mc->global_head_dim, mc->attention ? " cudnn" : "", B, T);

  // CPU reference on bf16-rounded weights, fp32 everywhere else.
  GemmaModel cpu;
  if (gemma_model_create(&cpu, &cfg, &err) != 0 || gemma_model_alloc_grads(&cpu, &err) != 0) {
    printf("%s: %s\n", shape, err.message);
    gpu_failures++;
    return;
  }
  gemma_model_init_random(&cpu, 1234);
  temper_gemma4_scores(&cpu);
  round_model_to_bf16(&cpu);
  int *tokens = malloc((size_t)N * sizeof(int)), *targets = malloc((size_t)N * sizeof(int));
  float *dlogprobs = malloc((size_t)N * sizeof(float));
  float *lp_cpu = malloc((size_t)N * sizeof(float)), *lp_gpu = malloc((size_t)N * sizeof(float));
  float *lp_gpu2 = malloc((size_t)N * sizeof(float));
  make_sft_batch(&cfg, B, T, tokens, targets, dlogprobs, 99);
  double t0 = now_s();
  if (gemma_forward(&cpu, tokens, targets, B, T, lp_cpu, &err) != 0 || gemma_backward(&cpu, dlogprobs, &err) != 0) {
    printf("%s: CPU: %s\n", shape, err.message);
    gpu_failures++;
    return;
  }
  printf("%s: CPU reference forward+backward %.2f s\n", shape, now_s() - t0);

  GemmaCudaModel gpu;
  if (gemma_cuda_create(&gpu, &cfg, ctx, &err) != 0 || gemma_cuda_upload_weights(&gpu, &cpu, &err) != 0 ||
      gemma_cuda_alloc_grads(&gpu, &err) != 0 ||
      (mc->attention && gemma_cuda_set_attention(&gpu, mc->attention, &err) != 0)) {
    printf("%s: GPU: %s\n", shape, err.message);
    gpu_failures++;
    return;
  }
  printf("%s: %lld parameters, GPU embed scale %.4f (CPU %.4f)\n", shape, (long long)gemma_model_param_count(&cpu),
         gpu.embed_scale, gemma_embed_scale(&cfg));

  // Forward: log-probs, then bitwise determinism of a second forward.
  for (int i = 0; i < N; i++) lp_gpu[i] = lp_gpu2[i] = NAN;
  // The second forward is the timed one: the first builds the matmul plans.
  GpuTimer timer;
  int rc = gemma_cuda_forward(&gpu, tokens, targets, B, T, lp_gpu, &err);
  gpu_timer_start(&timer, ctx);
  if (rc == 0) rc = gemma_cuda_forward(&gpu, tokens, targets, B, T, lp_gpu2, &err);
  double fwd_ms = gpu_timer_stop_ms(&timer, ctx, 1);
  if (rc != 0 && (strstr(err.message, "cannot load") || strstr(err.message, "built without"))) {
    printf("%s: skipped: %s\n", shape, err.message);  // this machine lacks cuDNN
    free(tokens), free(targets), free(dlogprobs), free(lp_cpu), free(lp_gpu), free(lp_gpu2);
    gemma_cuda_free(&gpu);
    gemma_model_free(&cpu);
    return;
  }
  if (rc != 0) {
    printf("%s: GPU forward: %s\n", shape, err.message);
    gpu_failures++;
    return;
  }
  int bad_unscored = 0;
  double lp_err = logprob_error(lp_gpu, lp_cpu, targets, N, &bad_unscored);
  double flops = forward_flops(&cfg, B, T);
  gpu_report("model_forward_logprobs_abs", shape, lp_err, TOL_LOGPROB_ABS, fwd_ms, flops / (fwd_ms * 1e9), 0);
  gpu_report("model_forward_unscored_zero", shape, bad_unscored, 0, 0, 0, 0);
  gpu_report("model_forward_deterministic", shape, memcmp(lp_gpu, lp_gpu2, (size_t)N * sizeof(float)) != 0, 0, 0, 0,
             0);
  double loss_cpu = 0, loss_gpu = 0;
  for (int i = 0; i < N; i++) {
    loss_cpu += (double)dlogprobs[i] * lp_cpu[i];
    loss_gpu += (double)dlogprobs[i] * lp_gpu[i];
  }
  printf("%s: SFT loss CPU %.6f GPU %.6f\n", shape, loss_cpu, loss_gpu);

  // Full-forward logits of the first decode_len positions of each sequence,
  // for the decode check: (B, P, V).
  int P = mc->decode_len;
  float *ref_logits = malloc((size_t)B * P * V * sizeof(float));
  float *d_logits = gpu_alloc((size_t)P * V * sizeof(float));
  const bf16 *hidden = gemma_cuda_final_hidden_device(&gpu);
  for (int b = 0; b < B; b++) {
    lm_head_logits_cuda(ctx, d_logits, hidden + (size_t)b * T * C, gpu.params, P, C, V,
                        (float)cfg.final_logit_softcapping);
    cuda_download_f32(ctx, ref_logits + (size_t)b * P * V, d_logits, (size_t)P * V);
  }
  cuda_free(d_logits);

  // Backward: every tensor's gradient against the CPU's.
  size_t np = gpu.num_params;
  float *g1 = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
  if (gemma_cuda_backward(&gpu, dlogprobs, &err) != 0 || cuda_context_sync(ctx, &err) != 0) {
    printf("%s: GPU backward: %s\n", shape, err.message);
    gpu_failures++;
    return;
  }
  gemma_cuda_download_grads(&gpu, g1);
  double worst = -1, worst_tol = TOL_MODEL_REL;
  const char *worst_name = "";
  for (int i = 0; i < cpu.num_tensors; i++) {
    const GemmaTensor *t = &cpu.tensors[i];
    double e = max_rel_error(g1 + gemma_cuda_tensor_offset(&gpu, t), gemma_tensor_grad(&cpu, t), t->numel);
    double tol = grad_tolerance(&cpu, t, TOL_MODEL_REL, TOL_CANCELLING_GRAD_REL);
    if (mc->report_tensors) {
      char name[200];
      snprintf(name, sizeof name, "%s %s", shape, t->name);
      gpu_report("model_grad", name, e, tol, 0, 0, 0);
    } else {
      printf("  grad %-56s rel err %.3e (tol %.0e)\n", t->name, e, tol);
    }
    // The worst tensor relative to its tolerance.
    if (!(e / tol <= worst)) {
      worst = e / tol;
      worst_name = t->name;
      worst_tol = tol;
    }
  }
  char line[200];
  snprintf(line, sizeof line, "%s worst=%s", shape, worst_name);
  if (mc->report_tensors)
    printf("%s: worst gradient %s, %.3e (tol %.0e)\n", shape, worst_name, worst * worst_tol, worst_tol);
  else
    gpu_report("model_grad_worst_tensor", line, worst * worst_tol, worst_tol, 0, 0, 0);

  // Accumulation: a second backward of the same forward doubles every
  // gradient. Timed (the first built the backward's matmul plans).
  gpu_timer_start(&timer, ctx);
  rc = gemma_cuda_backward(&gpu, dlogprobs, &err);
  double bwd_ms = gpu_timer_stop_ms(&timer, ctx, 1);
  if (rc != 0) {
    printf("%s: GPU backward: %s\n", shape, err.message);
    gpu_failures++;
    return;
  }
  gpu_report("model_backward", shape, -1, 0, bwd_ms, 2 * flops / (bwd_ms * 1e9), 0);
  gemma_cuda_download_grads(&gpu, g2);
  for (size_t i = 0; i < np; i++) g1[i] *= 2.0f;
  gpu_report("model_grad_accumulates", shape, max_rel_error(g2, g1, np), TOL_ACCUMULATE, 0, 0, 0);
  printf("%s: GPU forward %.3f ms, backward %.3f ms, %.0f tokens/s\n", shape, fwd_ms, bwd_ms,
         N / (1e-3 * (fwd_ms + bwd_ms)));

  // Fused forward+backward (SFT's path, one logits GEMM per LM-head chunk):
  // from zeroed gradients, bitwise the separate forward then backward.
  for (size_t i = 0; i < np; i++) g1[i] *= 0.5f;  // back to one backward's gradients (exact)
  float *lp_fused = malloc((size_t)N * sizeof(float));
  gemma_cuda_zero_grads(&gpu);
  gpu_timer_start(&timer, ctx);
  rc = gemma_cuda_forward_backward(&gpu, tokens, targets, B, T, dlogprobs, lp_fused, &err);
  double fused_ms = gpu_timer_stop_ms(&timer, ctx, 1);
  if (rc != 0) {
    printf("%s: GPU fused forward+backward: %s\n", shape, err.message);
    gpu_failures++;
  } else {
    gemma_cuda_download_grads(&gpu, g2);
    int same = memcmp(lp_fused, lp_gpu, (size_t)N * sizeof(float)) == 0 && memcmp(g2, g1, np * sizeof(float)) == 0;
    // error column: 0 when bitwise equal, else 1 (limit 0)
    gpu_report("model_fused_fwdbwd_bitwise", shape, same ? 0.0 : 1.0, 0.0, fused_ms, 3 * flops / (fused_ms * 1e9), 0);
    printf("%s: fused forward+backward %.3f ms (separate %.3f ms)\n", shape, fused_ms, fwd_ms + bwd_ms);
  }

  // Recompute (model.recompute): one layer's activations kept, each layer's
  // forward run again in backward; bitwise the same log-probs and gradients.
  gemma_cuda_set_recompute(&gpu, 1);
  gemma_cuda_zero_grads(&gpu);
  gpu_timer_start(&timer, ctx);
  rc = gemma_cuda_forward(&gpu, tokens, targets, B, T, lp_fused, &err);
  if (rc == 0) rc = gemma_cuda_backward(&gpu, dlogprobs, &err);
  double recompute_ms = gpu_timer_stop_ms(&timer, ctx, 1);
  if (rc != 0) {
    printf("%s: GPU recompute forward+backward: %s\n", shape, err.message);
    gpu_failures++;
  } else {
    gemma_cuda_download_grads(&gpu, g2);
    int same = memcmp(lp_fused, lp_gpu, (size_t)N * sizeof(float)) == 0 && memcmp(g2, g1, np * sizeof(float)) == 0;
    gpu_report("model_recompute_bitwise", shape, same ? 0.0 : 1.0, 0.0, recompute_ms,
               4 * flops / (recompute_ms * 1e9), 0);
  }
  gemma_cuda_set_recompute(&gpu, 0);
  free(lp_fused);

  check_decode(&cpu, &gpu, mc, tokens, ref_logits, shape);
  if (mc->T >= 9) check_generate(&cpu, &gpu, tokens, mc->T, shape);

  free(ref_logits);
  free(g1);
  free(g2);
  free(tokens);
  free(targets);
  free(dlogprobs);
  free(lp_cpu);
  free(lp_gpu);
  free(lp_gpu2);
  gemma_cuda_free(&gpu);
  gemma_model_free(&cpu);
}

// Arguments: preset names to run (default: all cases), e.g. `test_gpu_model tiny`.
int main(int argc, char **argv) {
  CudaContext *ctx = gpu_test_open("test_gpu_model");
  // T not a multiple of any tile; longer than the sliding window (tiny: 8,
  // gpu-100m: 512) so that sliding and global layers differ, and the decode
  // runs past the window too.
  static const ModelCase cases[] = {
      {"tiny", 64, 0, 2, 37, 37, 1, NULL},
      {"tiny-gemma2", 64, 0, 2, 37, 37, 1, NULL},
      // Gemma 4: per-layer inputs, kv sharing, keys as values, partial rope,
      // and head dim 512 on the full-attention layers (E2B / E4B's)
      {"tiny-g4", 64, 512, 2, 37, 37, 1, NULL},
      {"gpu-100m", 0, 0, 2, 600, 40, 0, NULL},
      // cuDNN's attention in the same model (window 8 < T: sliding layers masked)
      {"tiny", 64, 0, 2, 37, 37, 1, "cudnn"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int wanted = argc <= 1;
    for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], cases[i].preset) == 0;
    if (wanted) run_case(ctx, &cases[i]);
  }
  return gpu_test_close(ctx, "test_gpu_model");
}
