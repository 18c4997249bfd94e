// tests/standin/test_rollout_cuda_standin.c: GRPO's GPU rollout path on the
// host stand-in of the CUDA op layer (ops_cuda_standin.c): model/gemma_cuda.c's
// prefill and sequence copy, the GPU RolloutPolicy (cmd/rollout_cuda.c) and
// the CudaTrainer's GRPO access and ops (cmd/train_cuda.c), on the rl
// fixture's tasks and tokenizer with a tiny Gemma 3 of head_dim 64 (the
// smallest the CUDA attention takes) on bf16-rounded weights:
//   (a) gemma_cuda_prefill vs gemma_cuda_decode_step over the same 37
//       tokens (prefill in two calls, 5 then 32 tokens, chunks of 16: a
//       prefill that starts past 0 and spans chunks): the last token's
//       logits, every layer's cached k and v, and the next decode step's
//       logits from both caches; and the prefill's logits vs the CPU's
//       gemma_prefill (fp32);
//   (b) a prefill that fails (token outside the vocabulary, past the
//       capacity, sequence out of range) changes nothing: lengths, the
//       host logits and every cached byte;
//   (c) gemma_cuda_kv_cache_copy_sequence: the copy continues exactly like
//       the original (6 decode steps each, bitwise logits) and has its
//       length; out-of-range indices fail;
//   (d) rollout_run with the GPU policy that cuda_trainer_use_grpo's access
//       makes, on real bank episodes (in-process environment): the mask /
//       log-prob bookkeeping of tests/test_rollout.c; re-scoring every
//       rollout with the GrpoModelOps forward (the GPU model) reproduces its
//       sampling-time log-probs; the CPU fp32 forward close too; prefix
//       sharing on and off give bitwise the same rollouts.
// Tolerances: TOL_MODEL_REL 5e-2 (relative to the tensor's largest value)
// and TOL_LOGPROB_ABS 5e-2 nats, those of test_gemma_cuda_standin.c and
// tests/gpu/test_gpu_model.c (bf16 roundings after every op); the prefill and
// the decode differ only in which rows share a GEMM, so on the stand-in the
// errors are rounding-level. Bitwise checks print 0/1 with tolerance 0.
// Exits 1 if any check fails.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/rollout_cuda.h"
#include "cmd/train_cuda.h"
#include "data/chat.h"
#include "model/decode.h"
#include "model/gemma_cuda.h"
#include "model/safetensors.h"
#include "rl/env_client.h"
#include "rl/rollout.h"
#include "tests/model_compare.h"
#include "tests/rl_fixture.h"

size_t cuda_standin_live_blocks(void);  // ops_cuda_standin.c

#define TOL_LOGPROB_ABS 5e-2
#define TOL_MODEL_REL 5e-2

static const char *const FAMILIES[] = {"balance_enquiry", "fd_paper", "policy_enquiry", "card_temp_block", NULL};
enum { G = 2, N_TOKENS = 37, FIRST = 5, CHUNK = 16, CONT_STEPS = 6 };

static int failures = 0;

static void report(const char *check, double value, double tol) {
  int pass = value <= tol;
  if (!pass) failures++;
  printf("STANDIN|%-40s|%.3e|tol %.0e|%s\n", check, value, tol, pass ? "pass" : "FAIL");
}

static int ok(int rc, const char *what, const FimiError *err) {
  if (rc == 0) return 1;
  printf("%s failed: %s\n", what, err->message);
  failures++;
  return 0;
}

static double differs(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) != 0; }

// max |got - ref| / max |ref|; a non-finite got gives INFINITY.
static double max_rel_error(const float *got, const float *ref, size_t n) {
  RelAcc acc = {0};
  rel_add(&acc, got, ref, n);
  return rel_value(&acc);
}

static RlFixture fx;
static GemmaModel cpu;  // the fixture's vocabulary, head_dim 64, bf16-rounded weights

// Every layer's cached k and v of sequence b, positions [0, n): (2, L, n, kvd) host floats.
static float *cached_rows(GemmaCudaModel *m, const GemmaCudaKVCache *c, int b, int n) {
  const GemmaConfig *cfg = &m->config;
  size_t kvd = (size_t)cfg->num_key_value_heads * cfg->head_dim, L = cfg->num_hidden_layers;
  size_t S = c->capacity, B = c->batch;
  float *out = malloc(2 * L * n * kvd * sizeof(float));
  for (int t = 0; t < 2; t++)
    for (size_t l = 0; l < L; l++)
      cuda_download_bf16(m->ctx, out + ((t * L + l) * n) * kvd, (t ? c->v : c->k) + ((l * B + b) * S) * kvd,
                         (size_t)n * kvd);
  return out;
}

// ---- (a) prefill vs decode steps, (b) failures, (c) copy ----

static void check_prefill_and_copy(GemmaCudaModel *m) {
  FimiError err = {0};
  int V = m->config.vocab_size, cap = 64;
  GemmaCudaKVCache c;
  if (!ok(gemma_cuda_kv_cache_create_rows(&c, m, 3, cap, CHUNK, &err), "GPU KV cache", &err)) return;
  int tokens[N_TOKENS];
  Rng rng;
  rng_seed(&rng, 11);
  for (int i = 0; i < N_TOKENS; i++) tokens[i] = (int)(rng_next_u64(&rng) % (uint64_t)V);
  float *dec = malloc((size_t)3 * V * sizeof(float)), *pre = malloc((size_t)V * sizeof(float));
  float *cpu_pre = malloc((size_t)V * sizeof(float)), *next = malloc((size_t)3 * V * sizeof(float));
  int step[3] = {0}, only[3] = {0};
  // Sequence 0: one decode step per token.
  only[0] = 1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < N_TOKENS; i++) {
    step[0] = tokens[i];
    rc = gemma_cuda_decode_step(m, &c, step, only, dec, &err);
  }
  // Sequence 1: two prefills, 5 then 32 tokens (chunks 16, 16).
  if (ok(rc, "decode steps", &err) && ok(gemma_cuda_prefill(m, &c, 1, tokens, FIRST, NULL, &err), "prefill 1", &err) &&
      ok(gemma_cuda_prefill(m, &c, 1, tokens + FIRST, N_TOKENS - FIRST, pre, &err), "prefill 2", &err)) {
    report("a_prefill_length_wrong", c.lengths[1] != N_TOKENS || c.lengths[0] != N_TOKENS, 0);
    report("a_prefill_vs_decode_logits_rel", max_rel_error(pre, dec, (size_t)V), TOL_MODEL_REL);
    float *kv_dec = cached_rows(m, &c, 0, N_TOKENS), *kv_pre = cached_rows(m, &c, 1, N_TOKENS);
    size_t nkv = 2 * (size_t)m->config.num_hidden_layers * N_TOKENS * m->config.num_key_value_heads * m->config.head_dim;
    report("a_prefill_vs_decode_kv_rel", max_rel_error(kv_pre, kv_dec, nkv), TOL_MODEL_REL);
    free(kv_dec), free(kv_pre);
    // The next token from both caches, one step.
    int both[3] = {1, 1, 0}, tok[3] = {tokens[0], tokens[0], 0};
    if (ok(gemma_cuda_decode_step(m, &c, tok, both, next, &err), "decode after prefill", &err))
      report("a_next_step_after_prefill_rel", max_rel_error(next + V, next, (size_t)V), TOL_MODEL_REL);
    // The CPU's chunked prefill (fp32) of the same tokens.
    GemmaKVCache cc;
    if (ok(gemma_kv_cache_create_rows(&cc, &cpu.config, 1, cap, CHUNK, &err), "CPU cache", &err)) {
      if (ok(gemma_prefill(&cpu, &cc, 0, tokens, N_TOKENS, cpu_pre, &err), "CPU prefill", &err))
        report("a_prefill_vs_cpu_prefill_rel", max_rel_error(pre, cpu_pre, (size_t)V), TOL_MODEL_REL);
      gemma_kv_cache_free(&cc);
    }
  }

  // (b) Failed prefills change nothing.
  int len1 = c.lengths[1];
  float *kv_before = cached_rows(m, &c, 1, len1);
  for (int v = 0; v < V; v++) pre[v] = -12345.0f;
  int bad[2] = {1, V}, fails = 0;
  fails += gemma_cuda_prefill(m, &c, 1, bad, 2, pre, &err) != 0;           // token V
  fails += gemma_cuda_prefill(m, &c, 1, tokens, cap - len1 + 1, pre, &err) != 0;  // past the capacity
  fails += gemma_cuda_prefill(m, &c, 3, tokens, 2, pre, &err) != 0;        // no sequence 3
  fails += gemma_cuda_prefill(m, &c, 1, tokens, 0, pre, &err) != 0;        // nothing
  report("b_bad_prefills_accepted", 4 - fails, 0);
  float *kv_after = cached_rows(m, &c, 1, len1);
  int untouched = c.lengths[1] == len1 && pre[0] == -12345.0f && pre[V - 1] == -12345.0f;
  report("b_failed_prefill_changed_state",
         !untouched || differs(kv_before, kv_after, 2 * (size_t)m->config.num_hidden_layers * len1 *
                                                        m->config.num_key_value_heads * m->config.head_dim *
                                                        sizeof(float)),
         0);
  free(kv_before), free(kv_after);

  // (c) Copy sequence 1 into 2; both continue with the same tokens, one row per step.
  if (ok(gemma_cuda_kv_cache_copy_sequence(m, &c, 2, 1, &err), "copy", &err)) {
    report("c_copy_length_wrong", c.lengths[2] != c.lengths[1], 0);
    float *a = malloc((size_t)3 * V * sizeof(float)), *b = malloc((size_t)3 * V * sizeof(float));
    double diff = 0;
    for (int s = 0; s < CONT_STEPS; s++) {
      int t[3] = {tokens[s + 3], tokens[s + 3], tokens[s + 3]}, act1[3] = {0, 1, 0}, act2[3] = {0, 0, 1};
      if (!ok(gemma_cuda_decode_step(m, &c, t, act1, a, &err), "decode original", &err) ||
          !ok(gemma_cuda_decode_step(m, &c, t, act2, b, &err), "decode copy", &err))
        break;
      diff += differs(a + V, b + 2 * (size_t)V, (size_t)V * sizeof(float));
    }
    report("c_copy_continues_differently_steps", diff, 0);
    free(a), free(b);
  }
  int bad_copies = (gemma_cuda_kv_cache_copy_sequence(m, &c, 3, 0, &err) != 0) +
                   (gemma_cuda_kv_cache_copy_sequence(m, &c, 0, -1, &err) != 0);
  report("c_bad_copies_accepted", 2 - bad_copies, 0);
  gemma_cuda_kv_cache_free(&c);
  free(dec), free(pre), free(cpu_pre), free(next);
}

// ---- (d) rollouts with the GPU policy ----

static void base_config(RolloutConfig *c) {
  rollout_config_default(c);
  c->slots = 4;
  c->max_turn_tokens = 16;
  c->max_episode_tokens = 40;
  c->context = 1100;  // the stand-in's decode attention converts the whole cache: keep it short
}

// Rollouts of every fixture task G times through the access's policy.
static int run_rollouts(const GrpoModelAccess *access, TrainState *state, const RolloutConfig *c, Rollout *out,
                        int n, RolloutTimes *times) {
  FimiError err = {0};
  RolloutJob *jobs = calloc((size_t)n, sizeof *jobs);
  for (int j = 0; j < n; j++) jobs[j] = (RolloutJob){j / G, j / G, 1000 + (uint64_t)(j / G)};
  RolloutPolicy policy;
  EnvClient env;
  int rc = access->make_policy(access->ctx, state, c->slots + (c->share_prefix ? 1 : 0), c->context, &policy, &err);
  if (!ok(rc, "make_policy", &err)) {
    free(jobs);
    return -1;
  }
  rc = env_client_local_create(&env, &fx.tasks, &err);
  if (rc == 0) {
    rc = rollout_run(c, &policy, &env, fx.tok, jobs, n, 7, out, times, &err);
    env_client_free(&env);
  }
  ok(rc, "rollout_run", &err);
  access->free_policy(access->ctx, &policy);
  free(jobs);
  return rc;
}

// Bookkeeping as tests/test_rollout.c checks it; the number of violations.
static int bookkeeping_errors(const Rollout *out, int n) {
  ChatBuilder b;
  FimiError err = {0};
  if (!ok(chat_init(&b, fx.tok, &err), "chat_init", &err)) return 1;
  int bad = 0, h = (int)b.header[CHAT_MODEL].len;
  for (int j = 0; j < n; j++) {
    const Rollout *r = &out[j];
    if (r->end == ROLLOUT_END_FAILED) {
      printf("rollout %d failed: %s\n", j, r->error);
      bad++;
    }
    int sampled = 0;
    for (int t = 0; t < r->len; t++) {
      sampled += r->mask[t];
      if (!r->mask[t] && r->logp[t] != 0.0f) bad++;
      if (r->mask[t] && !(r->logp[t] <= 0.0f && isfinite(r->logp[t]))) bad++;
    }
    if (sampled != r->sampled || sampled == 0) bad++;
    if (!(r->prompt_len > 0 && r->prompt_len < r->len && !r->mask[r->prompt_len - 1] && r->mask[r->prompt_len])) bad++;
    for (int t = 1; t < r->len; t++)
      if (r->mask[t] && !r->mask[t - 1] &&
          !(t - h - 1 >= 0 && r->ids[t - h - 1] == b.specials.start_of_turn &&
            !memcmp(&r->ids[t - h], b.header[CHAT_MODEL].data, (size_t)h * sizeof(int32_t))))
        bad++;
  }
  chat_free(&b);
  return bad;
}

// Worst |logp - forward| over the sampled tokens of every rollout, the
// forward being the GPU ops' (gpu != NULL) or the CPU model's.
static double rescore_error(const GrpoModelOps *gpu, const Rollout *out, int n) {
  double worst = 0;
  for (int j = 0; j < n; j++) {
    const Rollout *r = &out[j];
    int T = r->len - 1;
    int *tokens = malloc(sizeof(int) * T), *targets = malloc(sizeof(int) * T);
    float *lp = malloc(sizeof(float) * T);
    for (int t = 0; t < T; t++) tokens[t] = r->ids[t], targets[t] = r->ids[t + 1];
    FimiError err = {0};
    int rc = gpu ? gpu->forward(gpu->ctx, tokens, targets, 1, T, lp, &err)
                 : gemma_forward(&cpu, tokens, targets, 1, T, lp, &err);
    if (!ok(rc, "re-scoring forward", &err)) worst = INFINITY;
    for (int t = 0; rc == 0 && t < T; t++)
      if (r->mask[t + 1]) {
        double e = fabs((double)lp[t] - r->logp[t + 1]);
        if (!(e <= worst)) worst = isfinite(e) ? e : INFINITY;
      }
    free(tokens), free(targets), free(lp);
  }
  return worst;
}

static int same_rollout(const Rollout *a, const Rollout *b) {
  return a->len == b->len && a->end == b->end && a->turns == b->turns &&
         !memcmp(a->ids, b->ids, sizeof(int32_t) * a->len) && !memcmp(a->mask, b->mask, (size_t)a->len) &&
         !memcmp(a->logp, b->logp, sizeof(float) * a->len) && a->reward.total == b->reward.total;
}

static void free_all(Rollout *r, int n) {
  for (int j = 0; j < n; j++) rollout_free(&r[j]);
}

static void check_rollouts(void) {
  FimiError err = {0};
  AdamWConfig adamw;
  AdamWDecayRules rules;
  adamw_config_default(&adamw);
  adamw_decay_rules_default(&rules);
  CudaTrainerOptions options = {"fimi", 0};
  TrainState state;
  CudaTrainer *t = NULL;
  if (!ok(cuda_trainer_create(&t, &cpu, &adamw, &rules, 5, &options, &state, &err), "cuda_trainer_create", &err))
    return;
  GrpoModelAccess access;
  const GrpoModelOps *ops = cuda_trainer_use_grpo(t, 64, &access);
  report("d_ops_not_world_1_whole_batch", !(ops && ops->rank == 0 && ops->world == 1 && ops->unit >= 1 << 20), 0);
  double sums[2] = {1.5, -2.0};
  report("d_all_reduce_not_identity", ops->all_reduce_sum(ops->ctx, sums, 2, &err) != 0 || sums[0] != 1.5 || sums[1] != -2.0, 0);
  int n = fx.tasks.count * G;
  Rollout *ref = calloc((size_t)n, sizeof *ref), *other = calloc((size_t)n, sizeof *other);
  RolloutConfig c;
  base_config(&c);
  RolloutTimes times = {0};
  if (run_rollouts(&access, &state, &c, ref, n, &times) == 0) {
    int ends[ROLLOUT_END_COUNT] = {0}, sampled = 0, longest = 0, turns = 0;
    for (int j = 0; j < n; j++) {
      ends[ref[j].end]++, sampled += ref[j].sampled, turns += ref[j].turns;
      longest = ref[j].len > longest ? ref[j].len : longest;
    }
    printf("%d rollouts, %d model turns, %d sampled tokens, longest %d tokens; ends:", n, turns, sampled, longest);
    for (int e = 0; e < ROLLOUT_END_COUNT; e++)
      if (ends[e]) printf(" %s %d", rollout_end_name(e), ends[e]);
    printf("; prefill %lld tokens (+%lld shared) %.2f s, decode %lld %.2f s\n", (long long)times.prefill_tokens,
           (long long)times.shared_prefill_tokens, times.prefill, (long long)times.decode_tokens, times.decode);
    report("d_bookkeeping_violations", bookkeeping_errors(ref, n), 0);
    report("d_no_prompt_shared", times.shared_prefill_tokens == 0, 0);
    report("d_rescore_gpu_forward_logp_abs", rescore_error(ops, ref, n), TOL_LOGPROB_ABS);
    report("d_rescore_cpu_forward_logp_abs", rescore_error(NULL, ref, n), TOL_LOGPROB_ABS);
    // Without prefix sharing every slot prefills its own prompt: the copies
    // made the same caches, so the same rollouts, bitwise (the same rows
    // share each decode step either way).
    c.share_prefix = 0;
    if (run_rollouts(&access, &state, &c, other, n, NULL) == 0) {
      int same = 0;
      for (int j = 0; j < n; j++) same += same_rollout(&ref[j], &other[j]);
      report("d_no_sharing_rollouts_differ", n - same, 0);
      free_all(other, n);
    }
  }
  free_all(ref, n);
  free(ref), free(other);
  train_state_free(&state);
  cuda_trainer_free(t);
}

int main(void) {
  FimiError err = {0};
  if (rl_fixture_init(&fx, FAMILIES, 1, ENV_CATALOG_FAMILY, 900, 3, &err) != 0) {
    fprintf(stderr, "fixture: %s\n", err.message);
    return 1;
  }
  GemmaConfig cfg = fx.model.config;
  cfg.head_dim = 64;
  cfg.query_pre_attn_scalar = 64;
  if (gemma_model_create(&cpu, &cfg, &err) != 0) {
    fprintf(stderr, "model: %s\n", err.message);
    return 1;
  }
  gemma_model_init_random(&cpu, 3);
  round_model_to_bf16(&cpu);
  CudaContext *ctx = NULL;
  GemmaCudaModel gpu;
  if (ok(cuda_context_create(&ctx, 0, &err), "context", &err)) {
    if (ok(gemma_cuda_create(&gpu, &cfg, ctx, &err), "GPU model", &err)) {
      if (ok(gemma_cuda_upload_weights(&gpu, &cpu, &err), "upload", &err)) check_prefill_and_copy(&gpu);
      gemma_cuda_free(&gpu);
    }
    cuda_context_destroy(ctx);
  }
  check_rollouts();
  report("device_blocks_leaked", (double)cuda_standin_live_blocks(), 0);
  gemma_model_free(&cpu);
  rl_fixture_free(&fx);
  printf("test_rollout_cuda_standin: %s (%d failures)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
