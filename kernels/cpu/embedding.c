// kernels/cpu/embedding.c: token embedding lookup on the CPU (see ops.h).
// Defines embedding_forward and embedding_backward. Gemma multiplies the
// looked-up row by sqrt(hidden); the caller passes that scale already
// rounded to the working dtype. A negative token id is treated as padding:
// its output row is zero and it adds nothing to dwte.
#include "kernels/ops.h"

#include <string.h>

// Columns per task in the backward: each task owns a column range of dwte
// and adds token rows in order 0..N-1, so repeated tokens accumulate in a
// fixed order whatever the thread count.
#define EMBEDDING_COL_TILE 256

// out (N, C), tokens (N), wte (V, C)
void embedding_forward(float *out, const int *tokens, const float *wte, int N, int C, float scale) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float *o = out + (long)n * C;  // (C)
    if (tokens[n] < 0) {
      memset(o, 0, sizeof(float) * C);
      continue;
    }
    const float *w = wte + (long)tokens[n] * C;  // (C)
    for (int c = 0; c < C; c++) o[c] = w[c] * scale;
  }
}

// dwte[tokens[n]] += dout[n] * scale, accumulated.
// dwte (V, C), dout (N, C), tokens (N)
void embedding_backward(float *dwte, const float *dout, const int *tokens, int N, int C, float scale,
                        int padding_idx) {
  if (!dwte) return;
  int tiles = (C + EMBEDDING_COL_TILE - 1) / EMBEDDING_COL_TILE;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < tiles; t++) {
    int c0 = t * EMBEDDING_COL_TILE;
    int c1 = c0 + EMBEDDING_COL_TILE < C ? c0 + EMBEDDING_COL_TILE : C;
    for (int n = 0; n < N; n++) {
      if (tokens[n] < 0 || tokens[n] == padding_idx) continue;
      float *dw = dwte + (long)tokens[n] * C;  // (C)
      const float *d = dout + (long)n * C;     // (C)
      for (int c = c0; c < c1; c++) dw[c] += d[c] * scale;
    }
  }
}
