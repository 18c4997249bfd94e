// tests/test_ops_lm_head.c: the fused, chunked LM head (kernels/cpu/lm_head.c)
// against a float64 reference that forms all logits:
// logprob[n] = log softmax(cap(hidden[n] @ wte^T))[target[n]], cap(z) =
// c*tanh(z/c) when c > 0, rows with target -1 giving 0. Backward: dhidden and
// the accumulated dwte vs central finite differences of L = sum(g * logprob),
// including every element of the target rows of wte. Shapes cover vocabs
// that are not a multiple of the vector width, targets in the first and last
// columns, more rows than one block (the op takes R = min(512, 7M / V) rows
// per block), and all-skipped batches. The fused forward+backward is checked
// against forward then backward, including a vocab large enough for blocks
// of 24 rows, and across thread counts.
#include "kernels/cpu/blas.h"
#include <omp.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// logits are fp32 dot products over C <= 64, lse a sum over <= 5000 columns
// (fp32 vector lanes, segments added in double): ~1e-7 of the largest
// logprob. Measured <= 2e-7.
#define TOL_FORWARD 1e-5
// dhidden sums V terms in fp32 (one sgemm per block); dwte is a sum over
// rows of fp32 products. Measured <= 8e-7 (20x headroom for other BLAS
// kernels' rounding; a softcap-derivative sign slip gives O(1)).
#define TOL_BACKWARD 5e-5
#define FD_WORK_BUDGET 1.5e8

typedef struct {
  int N, C, V;
  double softcap;
  const int *targets;
  double *hidden, *wte, *g;  // (N, C), (V, C), (N)
} LmHeadRef;

// logits (V) of row n, capped
static void ref_row_logits(double *z, const LmHeadRef *r, int n) {
  for (int v = 0; v < r->V; v++) {
    double s = 0;
    for (int c = 0; c < r->C; c++) s += r->hidden[(long)n * r->C + c] * r->wte[(long)v * r->C + c];
    z[v] = r->softcap > 0 ? r->softcap * tanh(s / r->softcap) : s;
  }
}

// logprobs (N), lse (N)
static void ref_logprobs(double *logprobs, double *lse, const LmHeadRef *r) {
  double *z = malloc(sizeof(double) * r->V);
  for (int n = 0; n < r->N; n++) {
    logprobs[n] = lse[n] = 0;
    if (r->targets[n] < 0 || r->targets[n] >= r->V) continue;
    ref_row_logits(z, r, n);
    double max = -INFINITY, sum = 0;
    for (int v = 0; v < r->V; v++) max = z[v] > max ? z[v] : max;
    for (int v = 0; v < r->V; v++) sum += exp(z[v] - max);
    lse[n] = max + log(sum);
    logprobs[n] = z[r->targets[n]] - lse[n];
  }
  free(z);
}

static double ref_loss(void *ctx) {
  LmHeadRef *r = ctx;
  double *lp = malloc(sizeof(double) * r->N), *lse = malloc(sizeof(double) * r->N);
  ref_logprobs(lp, lse, r);
  double loss = 0;
  for (int n = 0; n < r->N; n++) loss += r->g[n] * lp[n];
  free(lp), free(lse);
  return loss;
}

// targets (N) are given; hidden and wte are drawn so logits have std ~1.5
static void check_lm_head(Rng *rng, int N, int C, int V, const int *targets, float softcap) {
  long nh = (long)N * C, nw = (long)V * C;
  float *hidden = random_floats(rng, nh, 1.0f), *wte = random_floats(rng, nw, 1.5f / sqrtf((float)C));
  float *g = random_floats(rng, N, 1.0f);
  float *logprobs = malloc(sizeof(float) * N), *lse = malloc(sizeof(float) * N);
  float *dhidden = malloc(sizeof(float) * nh);
  float *dwte_base = random_floats(rng, nw, 0.01f), *dwte = malloc(sizeof(float) * nw);
  memcpy(dwte, dwte_base, sizeof(float) * nw);
  for (long i = 0; i < nh; i++) dhidden[i] = NAN;  // must be overwritten
  lm_head_logprob_forward(logprobs, lse, hidden, wte, targets, N, C, V, softcap);
  lm_head_logprob_backward(dhidden, dwte, g, hidden, wte, targets, lse, N, C, V, softcap);
  float *dwte_acc = malloc(sizeof(float) * nw);
  for (long i = 0; i < nw; i++) dwte_acc[i] = dwte[i] - dwte_base[i];

  LmHeadRef ref = {N, C, V, softcap, targets, to_double(hidden, nh), to_double(wte, nw), to_double(g, N)};
  double *ref_lp = malloc(sizeof(double) * N), *ref_lse = malloc(sizeof(double) * N);
  ref_logprobs(ref_lp, ref_lse, &ref);
  int active = 0;
  for (int n = 0; n < N; n++) active += targets[n] >= 0 && targets[n] < V;
  double work = (double)active * V * C;  // one reference evaluation
  int checks = (int)(FD_WORK_BUDGET / (2 * work + 1));
  if (checks > 200) checks = 200;
  if (checks < 8) checks = 8;

  printf("lm_head N=%d (%d with targets) C=%d V=%d softcap=%g (FD on %d elements per tensor)\n", N, active, C, V,
         softcap, checks);
  check_error("lm_head_logprob_forward logprobs", rel_error_vs(logprobs, ref_lp, N), TOL_FORWARD);
  check_error("lm_head_logprob_forward lse", rel_error_vs(lse, ref_lse, N), TOL_FORWARD);
  check_error("lm_head_logprob_backward dhidden (FD)",
              fd_rel_error(ref_loss, &ref, ref.hidden, dhidden, nh, checks, rng), TOL_BACKWARD);
  // dwte: random elements plus every element of a few target rows, where the
  // one-hot term lands
  int target_rows = (checks + C - 1) / C < 4 ? (checks + C - 1) / C : 4;
  long *idx = malloc(sizeof(long) * (checks + (long)target_rows * C));
  long count = 0;
  for (int k = 0; k < checks; k++) idx[count++] = (long)(rng_next_u64(rng) % (uint64_t)nw);
  for (int n = 0, rows = 0; n < N && rows < target_rows; n++)
    if (targets[n] >= 0 && targets[n] < V) {
      for (int c = 0; c < C; c++) idx[count++] = (long)targets[n] * C + c;
      rows++;
    }
  check_error("lm_head_logprob_backward dwte, accumulated (FD)",
              fd_rel_error_at(ref_loss, &ref, ref.wte, dwte_acc, idx, count), TOL_BACKWARD);

  // skipped rows: logprob 0 and a zero dhidden row, exactly
  int skipped_ok = 1;
  for (int n = 0; n < N; n++)
    if (targets[n] < 0 || targets[n] >= V) {
      skipped_ok &= logprobs[n] == 0.0f;
      for (int c = 0; c < C; c++) skipped_ok &= dhidden[(long)n * C + c] == 0.0f;
    }
  CHECK(skipped_ok, "lm_head: rows without a target must give logprob 0 and dhidden 0");

  // determinism: the same calls again give the same bits
  float *logprobs2 = malloc(sizeof(float) * N), *lse2 = malloc(sizeof(float) * N);
  float *dhidden2 = malloc(sizeof(float) * nh), *dwte2 = malloc(sizeof(float) * nw);
  memcpy(dwte2, dwte_base, sizeof(float) * nw);
  lm_head_logprob_forward(logprobs2, lse2, hidden, wte, targets, N, C, V, softcap);
  lm_head_logprob_backward(dhidden2, dwte2, g, hidden, wte, targets, lse2, N, C, V, softcap);
  CHECK(memcmp(logprobs, logprobs2, sizeof(float) * N) == 0 && memcmp(lse, lse2, sizeof(float) * N) == 0,
        "lm_head forward not deterministic");
  CHECK(memcmp(dhidden, dhidden2, sizeof(float) * nh) == 0 && memcmp(dwte, dwte2, sizeof(float) * nw) == 0,
        "lm_head backward not deterministic");
  // NULL gradients: dhidden alone gives the same bits
  lm_head_logprob_backward(dhidden2, NULL, g, hidden, wte, targets, lse2, N, C, V, softcap);
  CHECK(memcmp(dhidden, dhidden2, sizeof(float) * nh) == 0, "lm_head backward with dwte NULL differs");

  free(hidden), free(wte), free(g), free(logprobs), free(lse), free(dhidden), free(dwte_base), free(dwte),
      free(dwte_acc), free(idx), free(logprobs2), free(lse2), free(dhidden2), free(dwte2);
  free(ref.hidden), free(ref.wte), free(ref.g), free(ref_lp), free(ref_lse);
}

// lm_head_logits: full capped rows vs the reference, and their log-softmax at
// the target vs lm_head_logprob_forward.
static void check_logits(Rng *rng, int N, int C, int V, float softcap) {
  long nh = (long)N * C, nw = (long)V * C;
  float *hidden = random_floats(rng, nh, 1.0f), *wte = random_floats(rng, nw, 1.5f / sqrtf((float)C));
  float *logits = malloc(sizeof(float) * N * V);
  lm_head_logits(logits, hidden, wte, N, C, V, softcap);
  LmHeadRef ref = {N, C, V, softcap, NULL, to_double(hidden, nh), to_double(wte, nw), NULL};
  double *ref_logits = malloc(sizeof(double) * N * V);
  for (int n = 0; n < N; n++) ref_row_logits(ref_logits + (long)n * V, &ref, n);
  printf("lm_head_logits N=%d C=%d V=%d softcap=%g\n", N, C, V, softcap);
  check_error("lm_head_logits logits", rel_error_vs(logits, ref_logits, (long)N * V), TOL_FORWARD);

  int *targets = malloc(sizeof(int) * N);
  for (int n = 0; n < N; n++) targets[n] = (int)(rng_next_u64(rng) % (uint64_t)V);
  float *logprobs = malloc(sizeof(float) * N), *lse = malloc(sizeof(float) * N);
  lm_head_logprob_forward(logprobs, lse, hidden, wte, targets, N, C, V, softcap);
  double *from_logits = malloc(sizeof(double) * N);
  for (int n = 0; n < N; n++) {
    const float *z = logits + (long)n * V;
    double max = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) max = z[v] > max ? z[v] : max;
    for (int v = 0; v < V; v++) sum += exp(z[v] - max);
    from_logits[n] = z[targets[n]] - (max + log(sum));
  }
  check_error("lm_head_logprob_forward vs log_softmax(lm_head_logits)", rel_error_vs(logprobs, from_logits, N),
              TOL_FORWARD);
  free(hidden), free(wte), free(logits), free(ref.hidden), free(ref.wte), free(ref_logits), free(targets),
      free(logprobs), free(lse), free(from_logits);
}

// The fused op against forward then backward. Both walk the same blocks with
// the same sgemm calls, so on one build they agree bitwise (printed); the
// tolerance is what the ops.h contract promises, fp32 rounding: a backend
// that sums in another order moves results by ~1e-7 relative, while a missing
// or doubled term (a skipped block, a wrong one-hot) is >= 1e-3.
#define TOL_FUSED 1e-5

// max |a - b| / max |b| over n floats
static double rel_error_f(const float *a, const float *b, long n) {
  double *bd = to_double(b, n);
  double e = rel_error_vs(a, bd, n);
  free(bd);
  return e;
}

// Outputs of one LM-head evaluation: logprobs, lse (N), dhidden (N, C) and
// dwte (V, C) accumulated onto a shared random base.
typedef struct LmHeadOut {
  float *logprobs, *lse, *dhidden, *dwte;
} LmHeadOut;

static LmHeadOut lm_head_out_alloc(int N, int C, int V, const float *dwte_base) {
  LmHeadOut o = {malloc(sizeof(float) * N), malloc(sizeof(float) * N), malloc(sizeof(float) * (size_t)N * C),
                 malloc(sizeof(float) * (size_t)V * C)};
  memcpy(o.dwte, dwte_base, sizeof(float) * (size_t)V * C);
  for (long i = 0; i < (long)N * C; i++) o.dhidden[i] = NAN;  // must be overwritten
  for (int n = 0; n < N; n++) o.logprobs[n] = o.lse[n] = NAN;
  return o;
}

static void lm_head_out_free(LmHeadOut *o) { free(o->logprobs), free(o->lse), free(o->dhidden), free(o->dwte); }

static int lm_head_out_equal(const LmHeadOut *a, const LmHeadOut *b, int N, int C, int V) {
  return memcmp(a->logprobs, b->logprobs, sizeof(float) * N) == 0 && memcmp(a->lse, b->lse, sizeof(float) * N) == 0 &&
         memcmp(a->dhidden, b->dhidden, sizeof(float) * (size_t)N * C) == 0 &&
         memcmp(a->dwte, b->dwte, sizeof(float) * (size_t)V * C) == 0;
}

static void set_threads(int n) {
  omp_set_num_threads(n);
  blas_set_threads(n);
}

static void check_fused(Rng *rng, int N, int C, int V, const int *targets, float softcap) {
  long nh = (long)N * C, nw = (long)V * C;
  float *hidden = random_floats(rng, nh, 1.0f), *wte = random_floats(rng, nw, 1.5f / sqrtf((float)C));
  float *g = random_floats(rng, N, 1.0f), *dwte_base = random_floats(rng, nw, 0.01f);
  LmHeadOut sep = lm_head_out_alloc(N, C, V, dwte_base), fused = lm_head_out_alloc(N, C, V, dwte_base);
  lm_head_logprob_forward(sep.logprobs, sep.lse, hidden, wte, targets, N, C, V, softcap);
  lm_head_logprob_backward(sep.dhidden, sep.dwte, g, hidden, wte, targets, sep.lse, N, C, V, softcap);
  lm_head_logprob_forward_backward(fused.logprobs, fused.lse, fused.dhidden, fused.dwte, g, hidden, wte, targets, N,
                                   C, V, softcap);
  int active = 0;
  for (int n = 0; n < N; n++) active += targets[n] >= 0 && targets[n] < V;
  printf("lm_head fused vs forward+backward N=%d (%d with targets) C=%d V=%d softcap=%g: %s\n", N, active, C, V,
         softcap, lm_head_out_equal(&sep, &fused, N, C, V) ? "bitwise equal" : "differ");
  check_error("fused logprobs", rel_error_f(fused.logprobs, sep.logprobs, N), TOL_FUSED);
  check_error("fused lse", rel_error_f(fused.lse, sep.lse, N), TOL_FUSED);
  check_error("fused dhidden", rel_error_f(fused.dhidden, sep.dhidden, nh), TOL_FUSED);
  check_error("fused dwte (accumulated)", rel_error_f(fused.dwte, sep.dwte, nw), TOL_FUSED);

  // skipped rows: logprob and lse 0, a zero dhidden row, exactly
  int skipped_ok = 1;
  for (int n = 0; n < N; n++)
    if (targets[n] < 0 || targets[n] >= V) {
      skipped_ok &= fused.logprobs[n] == 0.0f && fused.lse[n] == 0.0f;
      for (int c = 0; c < C; c++) skipped_ok &= fused.dhidden[(long)n * C + c] == 0.0f;
    }
  CHECK(skipped_ok, "lm_head fused: rows without a target must give logprob 0 and dhidden 0");

  // deterministic: the same call again gives the same bits, and so do NULL
  // lse, dhidden or dwte for the rest
  LmHeadOut again = lm_head_out_alloc(N, C, V, dwte_base);
  lm_head_logprob_forward_backward(again.logprobs, again.lse, again.dhidden, again.dwte, g, hidden, wte, targets, N, C,
                                   V, softcap);
  CHECK(lm_head_out_equal(&fused, &again, N, C, V), "lm_head fused: a repeated call gives other bits");
  float *lp = malloc(sizeof(float) * N);
  lm_head_logprob_forward_backward(lp, NULL, again.dhidden, NULL, g, hidden, wte, targets, N, C, V, softcap);
  CHECK(memcmp(lp, fused.logprobs, sizeof(float) * N) == 0 &&
            memcmp(again.dhidden, fused.dhidden, sizeof(float) * nh) == 0,
        "lm_head fused with lse and dwte NULL differs");
  lm_head_logprob_forward_backward(lp, NULL, NULL, NULL, g, hidden, wte, targets, N, C, V, softcap);
  CHECK(memcmp(lp, fused.logprobs, sizeof(float) * N) == 0, "lm_head fused with no gradients differs");
  // 1 thread instead of 2: the op's own loops split no sum between threads,
  // but OpenBLAS partitions its sgemms by thread count and may round the edge
  // tiles differently, so only fp32 rounding may differ
  set_threads(1);
  LmHeadOut one = lm_head_out_alloc(N, C, V, dwte_base);
  lm_head_logprob_forward_backward(one.logprobs, one.lse, one.dhidden, one.dwte, g, hidden, wte, targets, N, C, V,
                                   softcap);
  double thread_err = fmax(fmax(rel_error_f(one.logprobs, fused.logprobs, N), rel_error_f(one.lse, fused.lse, N)),
                           fmax(rel_error_f(one.dhidden, fused.dhidden, nh), rel_error_f(one.dwte, fused.dwte, nw)));
  check_error("fused, 1 thread vs 2 (all outputs)", thread_err, TOL_FUSED);
  free(lp);
  lm_head_out_free(&again), lm_head_out_free(&one);
  set_threads(2);
  lm_head_out_free(&sep), lm_head_out_free(&fused);
  free(hidden), free(wte), free(g), free(dwte_base);
}

// n targets: every `skip`-th row -1 (skip 0: none), the others uniform in [0, V)
static int *random_targets(Rng *rng, int n, int V, int skip) {
  int *t = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) t[i] = skip && i % skip == skip - 1 ? -1 : (int)(rng_next_u64(rng) % (uint64_t)V);
  return t;
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 42);
  printf("tolerance: forward %.0e (fp32 logits, online lse), backward %.0e (fp32 sums over the vocab)\n",
         TOL_FORWARD, TOL_BACKWARD);
  // V = 5000: one full 4096 chunk and a partial one; targets in both, -1 rows
  int targets_a[9] = {4500, -1, 0, 4999, 17, -1, 4095, 4096, 1234};
  check_lm_head(&rng, 9, 32, 5000, targets_a, 0.0f);
  check_lm_head(&rng, 9, 32, 5000, targets_a, 3.0f);
  // 600 rows, 500 with targets: a full 256-row block and a partial one
  int *targets_b = malloc(sizeof(int) * 600);
  for (int n = 0; n < 600; n++) targets_b[n] = n % 6 == 5 ? -1 : (int)(rng_next_u64(&rng) % 300);
  check_lm_head(&rng, 600, 16, 300, targets_b, 2.0f);
  free(targets_b);
  int targets_c[1] = {3};  // one row, vocab smaller than a chunk
  check_lm_head(&rng, 1, 8, 10, targets_c, 0.0f);
  int targets_d[4] = {-1, 10, -7, -1};  // nothing to compute (10 >= V is treated as no target)
  check_lm_head(&rng, 4, 8, 10, targets_d, 1.0f);
  check_logits(&rng, 3, 32, 5000, 0.0f);
  check_logits(&rng, 3, 64, 4097, 2.5f);

  printf("fused forward+backward: tolerance %.0e relative (fp32 rounding; expected bitwise)\n", TOL_FUSED);
  check_fused(&rng, 9, 32, 5000, targets_a, 0.0f);
  check_fused(&rng, 9, 32, 5000, targets_a, 3.0f);
  // 1100 rows, 943 with targets, at V = 5000: a block of 512 and a partial one
  int *targets_e = random_targets(&rng, 1100, 5000, 7);
  check_fused(&rng, 1100, 16, 5000, targets_e, 0.0f);
  check_fused(&rng, 1100, 16, 5000, targets_e, 2.0f);
  free(targets_e);
  // V = 300001 (odd): blocks of 24 rows, 100 with targets = 4 full blocks and a partial one
  int *targets_f = random_targets(&rng, 120, 300001, 6);
  targets_f[0] = 300000, targets_f[2] = 0;
  check_fused(&rng, 120, 8, 300001, targets_f, 30.0f);
  free(targets_f);
  check_fused(&rng, 4, 8, 10, targets_d, 1.0f);  // nothing to compute
  TEST_MAIN_END();
}
