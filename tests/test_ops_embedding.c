// tests/test_ops_embedding.c: the CPU embedding (kernels/cpu/embedding.c)
// against a float64 reference out[n] = wte[tokens[n]] * scale, padding token
// -1 giving a zero row. Backward: the accumulated dwte vs central finite
// differences of L = sum(g * out) for every element of wte, with repeated
// tokens (the accumulation order matters there) and C not a multiple of the
// kernel's column tile. Determinism: bitwise equal for 1 and 3 threads.
#include <omp.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/test_ops_util.h"

// forward: one fp32 product per element (half an ulp); backward: fp32 sums
// over the repeats of a token (<= 40 here). Measured ~1e-7.
#define TOL_FORWARD 1e-6
#define TOL_BACKWARD 1e-5

typedef struct {
  int N, C;
  double scale;
  const int *tokens;
  double *wte, *g;  // (V, C), (N, C)
} EmbeddingRef;

static double ref_loss(void *ctx) {
  EmbeddingRef *r = ctx;
  double loss = 0;
  for (int n = 0; n < r->N; n++) {
    if (r->tokens[n] < 0) continue;
    for (int c = 0; c < r->C; c++) loss += r->g[(long)n * r->C + c] * r->wte[(long)r->tokens[n] * r->C + c] * r->scale;
  }
  return loss;
}

static void check_embedding(Rng *rng, int N, int C, int V) {
  long n_out = (long)N * C, n_wte = (long)V * C;
  int *tokens = malloc(sizeof(int) * N);
  // a small id range so that tokens repeat; one padding row
  for (int n = 0; n < N; n++) tokens[n] = (int)(rng_next_u64(rng) % (uint64_t)(V < 8 ? V : 8));
  if (N > 2) tokens[N / 2] = -1;
  float scale = sqrtf((float)C);
  float *wte = random_floats(rng, n_wte, 1.0f), *g = random_floats(rng, n_out, 1.0f);
  float *out = malloc(sizeof(float) * n_out);
  float *dwte_base = random_floats(rng, n_wte, 0.1f), *dwte = malloc(sizeof(float) * n_wte);
  memcpy(dwte, dwte_base, sizeof(float) * n_wte);
  embedding_forward(out, tokens, wte, N, C, scale);
  embedding_backward(dwte, g, tokens, N, C, scale, -1);
  float *dwte_acc = malloc(sizeof(float) * n_wte);  // the accumulated part
  for (long i = 0; i < n_wte; i++) dwte_acc[i] = dwte[i] - dwte_base[i];

  EmbeddingRef ref = {N, C, scale, tokens, to_double(wte, n_wte), to_double(g, n_out)};
  double *ref_out = malloc(sizeof(double) * n_out);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      ref_out[(long)n * C + c] = tokens[n] < 0 ? 0.0 : ref.wte[(long)tokens[n] * C + c] * ref.scale;
  printf("embedding N=%d C=%d V=%d (ids < 8 so they repeat%s)\n", N, C, V, N > 2 ? ", one padding row" : "");
  check_error("embedding_forward out", rel_error_vs(out, ref_out, n_out), TOL_FORWARD);
  check_error("embedding_backward dwte, accumulated (FD, all elements)",
              fd_rel_error(ref_loss, &ref, ref.wte, dwte_acc, n_wte, (int)n_wte, rng), TOL_BACKWARD);

  // determinism: 1 thread and 3 threads give the same bits
  float *dw1 = malloc(sizeof(float) * n_wte), *dw3 = malloc(sizeof(float) * n_wte);
  memcpy(dw1, dwte_base, sizeof(float) * n_wte);
  memcpy(dw3, dwte_base, sizeof(float) * n_wte);
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  embedding_backward(dw1, g, tokens, N, C, scale, -1);
  omp_set_num_threads(3);
  embedding_backward(dw3, g, tokens, N, C, scale, -1);
  omp_set_num_threads(threads);
  CHECK(memcmp(dw1, dw3, sizeof(float) * n_wte) == 0 && memcmp(dw1, dwte, sizeof(float) * n_wte) == 0,
        "embedding_backward depends on thread count");

  // padding_idx (HF nn.Embedding(padding_idx)): that row gets no gradient,
  // every other row exactly what it got without it.
  int pad = tokens[0];
  float *dwp = malloc(sizeof(float) * n_wte);
  memcpy(dwp, dwte_base, sizeof(float) * n_wte);
  embedding_backward(dwp, g, tokens, N, C, scale, pad);
  int pad_ok = 1;
  for (int v = 0; v < V; v++)
    for (int c = 0; c < C; c++) {
      long i = (long)v * C + c;
      pad_ok &= v == pad ? dwp[i] == dwte_base[i] : dwp[i] == dwte[i];
    }
  CHECK(pad_ok, "embedding_backward with padding_idx %d: pad row untouched, the rest unchanged", pad);
  free(dwp);

  free(tokens), free(wte), free(g), free(out), free(dwte_base), free(dwte), free(dwte_acc), free(dw1), free(dw3);
  free(ref.wte), free(ref.g), free(ref_out);
}

int main(void) {
  Rng rng;
  rng_seed(&rng, 11);
  printf("tolerance: forward %.0e (one fp32 product), backward %.0e (fp32 sums over repeated tokens)\n",
         TOL_FORWARD, TOL_BACKWARD);
  check_embedding(&rng, 1, 1, 1);
  check_embedding(&rng, 40, 300, 50);  // 300 columns = one full 256 tile + a partial one
  check_embedding(&rng, 9, 64, 12);
  TEST_MAIN_END();
}
