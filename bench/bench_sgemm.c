// bench/bench_sgemm.c: GFLOP/s of the CPU backend's GEMMs (matmul_forward
// and matmul_backward of kernels/cpu/matmul.c, so through whichever BLAS the
// build links, kernels/cpu/blas.h) at the shapes of the small-10m preset:
// every projection of a layer (q+k+v fused as one, o, gate, up, down) and the
// LM head, for N rows = 1, 16, 64 (batch-1 and batched decode: thin GEMMs)
// and 2048 (a training micro-batch of 8 x 256). Random inputs in [-1, 1).
// Each shape runs until --seconds have passed (after one warm-up call); the
// rate is 2*N*C*OC flops per forward call (backward: two GEMMs, 4*N*C*OC).
// Prints the BLAS line first, then one row per shape, or with --json one
// object per shape.
//
// Usage: bench_sgemm [--seconds 0.3] [--threads N] [--json]
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/blas.h"
#include "kernels/ops.h"

typedef struct Shape {
  const char *name;
  int C, OC;  // inp (N, C) @ weight (OC, C)^T -> (N, OC)
} Shape;

// small-10m: hidden 256, 4 heads x 64 (2 kv heads), intermediate 1024, vocab 16384.
static const Shape shapes[] = {
    {"qkv", 256, 512}, {"o", 256, 256}, {"gate/up", 256, 1024}, {"down", 1024, 256}, {"lm_head", 256, 16384},
};
static const int rows[] = {1, 16, 64, 2048};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fill(float *x, size_t n, unsigned *seed) {
  for (size_t i = 0; i < n; i++) x[i] = (float)rand_r(seed) / ((float)RAND_MAX + 1.0f) * 2.0f - 1.0f;
}

// Calls per second of one forward (backward = 0) or backward (1) GEMM pair.
static double rate(int N, const Shape *s, int backward, double seconds, float *a, float *w, float *o, float *da,
                   float *dw) {
  int calls = 0;
  double t0 = 0.0;
  for (;; calls++) {
    if (calls == 1) t0 = now();  // the first call warms up (pages, thread pool)
    if (backward)
      matmul_backward(da, dw, o, a, w, N, s->C, s->OC);
    else
      matmul_forward(o, a, w, N, s->C, s->OC);
    if (calls >= 2 && now() - t0 >= seconds) break;
  }
  return (double)calls / (now() - t0);
}

int main(int argc, char **argv) {
  blas_run_on_better_kernels(argv, 1);
  double seconds = 0.3;
  int threads = 0, json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json")) json = 1;
    else {
      fprintf(stderr, "usage: bench_sgemm [--seconds S] [--threads N] [--json]\n");
      return 2;
    }
  }
  if (threads > 0) {
    omp_set_num_threads(threads);
    blas_set_threads(threads);
  }
  BlasInfo info;
  blas_info(&info);
  char line[320];
  blas_describe(&info, line, sizeof line);
  if (!json) printf("BLAS: %s\n%-8s %6s %6s %6s %12s %12s\n", line, "gemm", "N", "C", "OC", "fwd GFLOP/s",
                    "bwd GFLOP/s");
  size_t max_n = 2048, max_c = 1024, max_oc = 16384;
  float *a = malloc(max_n * max_c * sizeof *a), *w = malloc(max_oc * max_c * sizeof *w);
  float *o = malloc(max_n * max_oc * sizeof *o), *da = malloc(max_n * max_c * sizeof *da);
  float *dw = calloc(max_oc * max_c, sizeof *dw);
  if (!a || !w || !o || !da || !dw) {
    fprintf(stderr, "bench_sgemm: out of memory\n");
    return 1;
  }
  unsigned seed = 1234;
  fill(a, max_n * max_c, &seed);
  fill(w, max_oc * max_c, &seed);
  fill(o, max_n * max_oc, &seed);
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      const Shape *sh = &shapes[s];
      int N = rows[r];
      double flops = 2.0 * N * sh->C * sh->OC;
      double fwd = rate(N, sh, 0, seconds, a, w, o, da, dw) * flops * 1e-9;
      // Decode never runs a backward; training does.
      double bwd = N >= 2048 ? rate(N, sh, 1, seconds, a, w, o, da, dw) * 2.0 * flops * 1e-9 : 0.0;
      if (json)
        printf("{\"blas\":\"%s\",\"kernels\":\"%s\",\"gemm\":\"%s\",\"N\":%d,\"C\":%d,\"OC\":%d,"
               "\"fwd_gflops\":%.2f,\"bwd_gflops\":%.2f}\n",
               info.library, info.kernels, sh->name, N, sh->C, sh->OC, fwd, bwd);
      else {
        char bwd_text[32] = "-";
        if (bwd > 0) snprintf(bwd_text, sizeof bwd_text, "%.1f", bwd);
        printf("%-8s %6d %6d %6d %12.1f %12s\n", sh->name, N, sh->C, sh->OC, fwd, bwd_text);
      }
    }
  free(a);
  free(w);
  free(o);
  free(da);
  free(dw);
  return 0;
}
