// kernels/cpu/matmul.c: float32 matmul on the CPU via OpenBLAS (see ops.h).
// Defines matmul_forward and matmul_backward. Gemma's projections have no
// bias, so these are plain GEMMs with the PyTorch weight layout (OC, C).
#include "kernels/cpu/blas.h"

#include "kernels/ops.h"

// out = inp @ weight^T
// out (N, OC), inp (N, C), weight (OC, C)
void matmul_forward(float *out, const float *inp, const float *weight, int N, int C, int OC) {
  if (N <= 0 || OC <= 0) return;
  if (C <= 0) {
    // an empty reduction: sgemm would be asked for lda = 0, which BLAS rejects
    for (long i = 0; i < (long)N * OC; i++) out[i] = 0.0f;
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC);
}

// dinp = dout @ weight (overwritten); dweight += dout^T @ inp (accumulated).
// dinp (N, C), dweight (OC, C), dout (N, OC), inp (N, C), weight (OC, C)
void matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight, int N,
                     int C, int OC) {
  if (N <= 0 || C <= 0) return;
  if (OC <= 0) {
    if (dinp) for (long i = 0; i < (long)N * C; i++) dinp[i] = 0.0f;
    return;
  }
  if (dinp) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
  }
  if (dweight) {
    // beta = 1: parameter gradients accumulate across micro-batches
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  }
}
