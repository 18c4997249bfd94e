// tests/test_decode.c: KV-cache decoding and sampling (model/decode.c).
// - Decoding 3 sequences of different lengths (two longer than the sliding
//   window) token by token gives the same log-probs as the full forward, for
//   "tiny" (gemma3) and "tiny-gemma2" (softcaps);
// - inactive sequences are untouched, a full cache is an error;
// - a chunked prefill (chunks smaller and larger than the prompt, across the
//   sliding window) gives the decode steps' next-token logits and cache, and
//   a copied sequence continues exactly as the original (bitwise); a long
//   prefill (layer by layer over groups of chunks) equals chunk-by-chunk
//   prefill bitwise;
// - generation is reproducible from its seed, greedy generation follows the
//   forward's argmax, and the sampler's distribution, temperature, top-p and
//   tie rules behave as documented.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/decode.h"
#include "test_util.h"

#define NSEQ 3
#define MAXLEN 20

// Same scale as test_model_grad: O(1) activations and logits.
static void init_test_params(GemmaModel *m, uint64_t seed) {
  Rng rng;
  rng_seed(&rng, seed);
  for (int i = 0; i < m->num_tensors; i++) {
    const GemmaTensor *t = &m->tensors[i];
    float std = t->is_norm ? 0.1f : 1.0f / sqrtf((float)t->shape[1]);
    rng_fill_normal(&rng, gemma_tensor_data(m, t), (long)t->numel, 0.0f, std);
  }
}

// The preset's model with init_test_params(seed); a failure is a failed check.
static int make_model(const char *preset, uint64_t seed, GemmaConfig *cfg, GemmaModel *model) {
  FimiError err = {0};
  if (gemma_config_preset(cfg, preset, &err) != 0 || gemma_model_create(model, cfg, &err) != 0) {
    CHECK(0, "%s: %s", preset, err.message);
    return -1;
  }
  init_test_params(model, seed);
  return 0;
}

static double log_softmax_at(const float *logits, int V, int target) {
  double mx = -INFINITY, sum = 0;
  for (int v = 0; v < V; v++) mx = fmax(mx, logits[v]);
  for (int v = 0; v < V; v++) sum += exp((double)logits[v] - mx);
  return (double)logits[target] - mx - log(sum);
}

static void check_decode_matches_forward(const char *preset) {
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaModel model;
  if (make_model(preset, 42, &cfg, &model) != 0) return;
  int V = cfg.vocab_size, lengths[NSEQ] = {5, 13, MAXLEN};
  CHECK(lengths[1] > cfg.sliding_window && lengths[2] > cfg.sliding_window, "lengths should exceed the window %d",
        cfg.sliding_window);
  int tokens[NSEQ * MAXLEN], targets[NSEQ * MAXLEN];
  Rng rng;
  rng_seed(&rng, 3);
  for (int i = 0; i < NSEQ * MAXLEN; i++) tokens[i] = (int)(rng_next_u64(&rng) % (uint64_t)V);
  for (int b = 0; b < NSEQ; b++)
    for (int t = 0; t < MAXLEN; t++)
      targets[b * MAXLEN + t] = t + 1 < lengths[b] ? tokens[b * MAXLEN + t + 1] : -1;
  float logprobs[NSEQ * MAXLEN];
  CHECK(gemma_forward(&model, tokens, targets, NSEQ, MAXLEN, logprobs, &err) == 0, "%s", err.message);

  GemmaKVCache cache;
  CHECK(gemma_kv_cache_create(&cache, &cfg, NSEQ, MAXLEN, &err) == 0, "%s", err.message);
  float *logits = malloc((size_t)NSEQ * V * sizeof(float));
  int step_tokens[NSEQ], active[NSEQ];
  double max_diff = 0;
  int compared = 0;
  for (int t = 0; t < MAXLEN; t++) {
    for (int b = 0; b < NSEQ; b++) {
      active[b] = t < lengths[b];
      step_tokens[b] = active[b] ? tokens[b * MAXLEN + t] : 0;
    }
    // Poison: inactive rows must stay as they were.
    for (size_t i = 0; i < (size_t)NSEQ * V; i++) logits[i] = -12345.0f;
    CHECK(gemma_decode_step(&model, &cache, step_tokens, active, logits, &err) == 0, "%s", err.message);
    for (int b = 0; b < NSEQ; b++) {
      if (!active[b]) {
        CHECK(logits[(size_t)b * V] == -12345.0f && cache.lengths[b] == lengths[b], "inactive sequence %d touched", b);
        continue;
      }
      CHECK(cache.lengths[b] == t + 1, "length of sequence %d", b);
      int target = targets[b * MAXLEN + t];
      if (target < 0) continue;
      double d = fabs(log_softmax_at(logits + (size_t)b * V, V, target) - logprobs[b * MAXLEN + t]);
      max_diff = fmax(max_diff, d);
      compared++;
    }
  }
  printf("%s: decode vs forward over %d positions (lengths 5, 13, 20; window %d): max |logprob diff| = %.3g\n", preset,
         compared, cfg.sliding_window, max_diff);
  CHECK(max_diff <= 1e-5, "%s: decode differs from the forward by %g", preset, max_diff);

  // The longest sequence is now full: another step must fail and change nothing.
  int all[NSEQ] = {1, 1, 1};
  int before[NSEQ];
  memcpy(before, cache.lengths, sizeof before);
  CHECK(gemma_decode_step(&model, &cache, step_tokens, all, logits, &err) != 0 && strstr(err.message, "full"),
        "a full cache must fail");
  CHECK(memcmp(before, cache.lengths, sizeof before) == 0, "a failed step must not advance any sequence");
  step_tokens[0] = V;
  int first_only[NSEQ] = {1, 0, 0};
  CHECK(gemma_decode_step(&model, &cache, step_tokens, first_only, logits, &err) != 0, "token out of range must fail");

  // After a reset the cache decodes from scratch again.
  gemma_kv_cache_reset(&cache);
  step_tokens[0] = tokens[0];
  CHECK(gemma_decode_step(&model, &cache, step_tokens, first_only, logits, &err) == 0, "%s", err.message);
  CHECK_CLOSE(log_softmax_at(logits, V, targets[0]), logprobs[0], 1e-5, "first step after reset");

  free(logits);
  gemma_kv_cache_free(&cache);
  gemma_model_free(&model);
}

// Records what gemma_generate's on_token callback reports, per sequence.
typedef struct TokenLog {
  int tokens[3][16];
  int lengths[3];
  int count;
} TokenLog;

// Prefill vs decode: 17 tokens of sequence 1 through gemma_prefill with
// chunk rows R, against 17 decode steps; then one decode step more on both.
static void check_prefill(const char *preset, int R) {
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaModel model;
  if (make_model(preset, 7, &cfg, &model) != 0) return;
  enum { N = 17 };
  int V = cfg.vocab_size, tokens[N + 1];
  Rng rng;
  rng_seed(&rng, 11);
  for (int i = 0; i <= N; i++) tokens[i] = (int)(rng_next_u64(&rng) % (uint64_t)V);
  GemmaKVCache a, b;
  float *la = malloc(sizeof(float) * 3 * V), *lb = malloc(sizeof(float) * 3 * V);
  int ok = gemma_kv_cache_create(&a, &cfg, 3, 32, &err) == 0 && gemma_kv_cache_create_rows(&b, &cfg, 3, 32, R, &err) == 0;
  CHECK(ok, "%s", err.message);
  if (!ok) return;
  int step_tokens[3] = {0}, active[3] = {0, 1, 0};
  for (int t = 0; t < N; t++) {
    step_tokens[1] = tokens[t];
    CHECK(gemma_decode_step(&model, &a, step_tokens, active, la, &err) == 0, "%s", err.message);
  }
  CHECK(gemma_prefill(&model, &b, 1, tokens, N, lb + V, &err) == 0, "%s", err.message);
  CHECK(b.lengths[1] == N && b.lengths[0] == 0 && b.lengths[2] == 0, "prefill lengths %d %d %d", b.lengths[0],
        b.lengths[1], b.lengths[2]);
  double worst = 0;
  for (int v = 0; v < V; v++) worst = fmax(worst, fabs((double)la[V + v] - lb[V + v]));
  CHECK(worst < 1e-4, "%s R=%d: prefill logits differ from decode by %.3g", preset, R, worst);
  // Copy sequence 1 to 2, then one decode step on both rows: equal bitwise.
  CHECK(gemma_kv_cache_copy_sequence(&b, &cfg, 2, 1, &err) == 0, "%s", err.message);
  int both[3] = {0, 1, 1}, next[3] = {0, tokens[N], tokens[N]};
  CHECK(gemma_decode_step(&model, &b, next, both, lb, &err) == 0, "%s", err.message);
  CHECK(memcmp(lb + V, lb + 2 * V, sizeof(float) * V) == 0, "%s: copied sequence decodes differently", preset);
  // Errors change nothing: a token outside the vocabulary, a full cache.
  int bad[2] = {1, V};
  CHECK(gemma_prefill(&model, &b, 0, bad, 2, NULL, &err) != 0 && b.lengths[0] == 0, "bad token accepted");
  CHECK(gemma_prefill(&model, &b, 1, tokens, 32, NULL, &err) != 0 && b.lengths[1] == N + 1, "overflow accepted");
  gemma_kv_cache_free(&a);
  gemma_kv_cache_free(&b);
  free(la);
  free(lb);
  gemma_model_free(&model);
}

// A long prefill runs layer by layer over groups of whole chunks; that must
// give, bitwise, what chunk after chunk gives: N tokens in one gemma_prefill
// call (two groups, the last chunk short) against one call per chunk, on
// sequence 1 of two caches with chunk rows R; the cached k/v of every layer
// and the next-token logits are compared.
static void check_prefill_groups(const char *preset, int R, int N) {
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaModel model;
  if (make_model(preset, 9, &cfg, &model) != 0) return;
  int V = cfg.vocab_size, *tokens = malloc(sizeof(int) * N);
  Rng rng;
  rng_seed(&rng, 12);
  for (int i = 0; i < N; i++) tokens[i] = (int)(rng_next_u64(&rng) % (uint64_t)V);
  GemmaKVCache whole, chunked;
  float *lw = malloc(sizeof(float) * V), *lc = malloc(sizeof(float) * V);
  int ok = gemma_kv_cache_create_rows(&whole, &cfg, 2, N, R, &err) == 0 &&
           gemma_kv_cache_create_rows(&chunked, &cfg, 2, N, R, &err) == 0;
  CHECK(ok, "%s", err.message);
  if (!ok) return;
  CHECK(N > whole.group_rows && whole.group_rows % R == 0, "%d tokens should span groups of %d", N, whole.group_rows);
  CHECK(gemma_prefill(&model, &whole, 1, tokens, N, lw, &err) == 0, "%s", err.message);
  for (int start = 0; start < N; start += R) {
    int m = N - start < R ? N - start : R;
    CHECK(gemma_prefill(&model, &chunked, 1, tokens + start, m, lc, &err) == 0, "%s", err.message);
  }
  CHECK(whole.lengths[1] == N && chunked.lengths[1] == N && whole.lengths[0] == 0, "lengths %d %d %d",
        whole.lengths[1], chunked.lengths[1], whole.lengths[0]);
  size_t kvd = (size_t)cfg.num_key_value_heads * cfg.head_dim, rows = (size_t)N * kvd;
  int differ = memcmp(lw, lc, sizeof(float) * V) != 0;
  for (int l = 0; l < cfg.num_hidden_layers; l++) {
    size_t seq1 = (((size_t)l * 2 + 1) * N) * kvd;  // cache[l][1][0]
    differ += memcmp(whole.k + seq1, chunked.k + seq1, rows * sizeof(float)) != 0;
    differ += memcmp(whole.v + seq1, chunked.v + seq1, rows * sizeof(float)) != 0;
  }
  CHECK(differ == 0, "%s R=%d N=%d: grouped prefill differs from chunk-by-chunk prefill (%d of %d arrays)", preset, R,
        N, differ, 1 + 2 * cfg.num_hidden_layers);
  printf("%s: prefill of %d tokens in groups of %d (chunks of %d) = chunk by chunk: %s\n", preset, N,
         whole.group_rows, R, differ ? "no" : "bitwise");
  gemma_kv_cache_free(&whole);
  gemma_kv_cache_free(&chunked);
  free(tokens);
  free(lw);
  free(lc);
  gemma_model_free(&model);
}

static void log_token(void *ctx, int b, int token) {
  TokenLog *log = ctx;
  log->count++;
  if (b >= 0 && b < 3 && log->lengths[b] < 16) log->tokens[b][log->lengths[b]++] = token;
}

static void check_generation(const char *preset) {
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaModel model;
  if (make_model(preset, 8, &cfg, &model) != 0) return;
  int V = cfg.vocab_size;
  enum { MAX_NEW = 10 };
  int p0[3] = {5, 6, 7}, p1[11] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, p2[1] = {3};
  const int *prompts[3] = {p0, p1, p2};
  int plen[3] = {3, 11, 1};
  int out_a[3 * MAX_NEW], out_b[3 * MAX_NEW], len_a[3], len_b[3];

  GenerateOptions hot = {.max_new = MAX_NEW, .sampler = {1.0f, 0.9f}, .seed = 77};
  CHECK(gemma_generate(&model, prompts, plen, 3, &hot, out_a, len_a, &err) == 0, "%s", err.message);
  TokenLog streamed = {0};
  hot.on_token = log_token;
  hot.on_token_ctx = &streamed;
  CHECK(gemma_generate(&model, prompts, plen, 3, &hot, out_b, len_b, &err) == 0, "%s", err.message);
  CHECK(memcmp(out_a, out_b, sizeof out_a) == 0 && memcmp(len_a, len_b, sizeof len_a) == 0,
        "%s: same seed must give the same tokens", preset);
  CHECK(len_a[0] == MAX_NEW && len_a[1] == MAX_NEW && len_a[2] == MAX_NEW, "no stop token: full length");
  int streamed_ok = streamed.count == 3 * MAX_NEW;
  for (int b = 0; b < 3 && streamed_ok; b++)
    streamed_ok = streamed.lengths[b] == MAX_NEW && !memcmp(streamed.tokens[b], out_a + b * MAX_NEW, MAX_NEW * sizeof(int));
  CHECK(streamed_ok, "%s: the on_token callback sees every sampled token in order", preset);

  // Greedy: each generated token is the argmax of the full forward at its
  // position. Score every vocab id at once: batch row v targets v everywhere.
  GenerateOptions greedy = {.max_new = MAX_NEW, .sampler = {0.0f, 1.0f}, .seed = 1};
  CHECK(gemma_generate(&model, prompts, plen, 3, &greedy, out_a, len_a, &err) == 0, "%s", err.message);
  int greedy_ok = 1;
  for (int s = 0; s < 3; s++) {
    int T = plen[s] + MAX_NEW - 1;  // the last generated token is never fed
    int *tok = malloc((size_t)V * T * sizeof(int)), *tgt = malloc((size_t)V * T * sizeof(int));
    float *lp = malloc((size_t)V * T * sizeof(float));
    for (int v = 0; v < V; v++)
      for (int t = 0; t < T; t++) {
        tok[v * T + t] = t < plen[s] ? prompts[s][t] : out_a[s * MAX_NEW + t - plen[s]];
        tgt[v * T + t] = v;
      }
    CHECK(gemma_forward(&model, tok, tgt, V, T, lp, &err) == 0, "%s", err.message);
    for (int j = 0; j < MAX_NEW; j++) {
      int t = plen[s] - 1 + j, chosen = out_a[s * MAX_NEW + j];
      for (int v = 0; v < V; v++)
        if (lp[v * T + t] > lp[chosen * T + t] + 1e-5f) greedy_ok = 0;
    }
    free(tok), free(tgt), free(lp);
  }
  CHECK(greedy_ok, "%s: greedy generation must follow the forward's argmax", preset);

  // A stop token ends a sequence (and is kept); the rest is -1.
  int stop = out_a[0 * MAX_NEW + 2];
  int stops[2] = {V + 5, stop};  // an id never sampled, then the real one: any of the list stops
  greedy.stop_tokens = stops;
  greedy.num_stop_tokens = 2;
  CHECK(gemma_generate(&model, prompts, plen, 3, &greedy, out_b, len_b, &err) == 0, "%s", err.message);
  int first = 0;
  while (out_a[first] != stop) first++;
  CHECK(len_b[0] == first + 1 && out_b[first] == stop && (first + 1 == MAX_NEW || out_b[first + 1] == -1),
        "stop token handling (len %d)", len_b[0]);
  int empty_len[1] = {0};
  CHECK(gemma_generate(&model, prompts, empty_len, 1, &greedy, out_b, len_b, &err) != 0,
        "an empty prompt must fail");
  gemma_model_free(&model);
}

static void check_sampler(void) {
  Rng rng;
  rng_seed(&rng, 11);
  // Greedy ties go to the lowest id; NaN never wins.
  float tie[5] = {0.5f, 2.0f, NAN, 2.0f, 1.0f};
  SamplerConfig greedy = {0.0f, 1.0f};
  CHECK(sample_token(tie, 5, &greedy, &rng) == 1, "greedy tie -> lowest id");

  // Distribution: probabilities 0.4, 0.3, 0.2, 0.1.
  float logits[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
  double expect_full[4] = {0.4, 0.3, 0.2, 0.1}, expect_nucleus[4] = {0.4 / 0.7, 0.3 / 0.7, 0, 0};
  double expect_cold[4];  // temperature 0.5 squares the probabilities
  double z = 0.16 + 0.09 + 0.04 + 0.01;
  for (int i = 0; i < 4; i++) expect_cold[i] = expect_full[i] * expect_full[i] / z;
  struct {
    SamplerConfig s;
    const double *expect;
    const char *what;
  } cases[3] = {{{1.0f, 1.0f}, expect_full, "T=1 top_p=1"},
                {{1.0f, 0.5f}, expect_nucleus, "top_p=0.5 keeps {0,1}"},
                {{0.5f, 1.0f}, expect_cold, "T=0.5"}};
  const int draws = 200000;
  for (int c = 0; c < 3; c++) {
    int counts[4] = {0};
    for (int i = 0; i < draws; i++) counts[sample_token(logits, 4, &cases[c].s, &rng)]++;
    double worst = 0;
    for (int i = 0; i < 4; i++) worst = fmax(worst, fabs((double)counts[i] / draws - cases[c].expect[i]));
    printf("sampler %s: max |freq - p| = %.4f\n", cases[c].what, worst);
    CHECK(worst < 0.005, "sampler %s: frequencies off by %g", cases[c].what, worst);
  }
  // A tiny top_p keeps only the most likely token.
  float random_logits[1000];
  rng_fill_normal(&rng, random_logits, 1000, 0.0f, 2.0f);
  int best = 0;
  for (int i = 1; i < 1000; i++)
    if (random_logits[i] > random_logits[best]) best = i;
  SamplerConfig narrow = {1.0f, 1e-6f};
  int all_best = 1;
  for (int i = 0; i < 100; i++) all_best &= sample_token(random_logits, 1000, &narrow, &rng) == best;
  CHECK(all_best, "tiny top_p must pick the argmax");
  // Same state, same draw.
  Rng r1, r2;
  rng_seed(&r1, 5);
  rng_seed(&r2, 5);
  SamplerConfig hot = {1.0f, 0.95f};
  int same = 1;
  for (int i = 0; i < 100; i++) same &= sample_token(random_logits, 1000, &hot, &r1) == sample_token(random_logits, 1000, &hot, &r2);
  CHECK(same, "sampling is deterministic given the rng state");
}

int main(void) {
  check_decode_matches_forward("tiny");
  check_decode_matches_forward("tiny-gemma2");
  check_prefill("tiny", 1);
  check_prefill("tiny", 5);
  check_prefill("tiny", 64);
  check_prefill("tiny-gemma2", 8);
  check_prefill_groups("tiny", 5, 1103);       // groups of 1020 tokens, last chunk 3 tokens
  check_prefill_groups("tiny-gemma2", 300, 1000);  // groups of 900 (3 chunks)
  check_generation("tiny");
  check_generation("tiny-gemma2");
  check_sampler();
  TEST_MAIN_END();
}
