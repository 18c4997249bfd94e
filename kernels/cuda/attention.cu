// kernels/cuda/attention.cu: causal attention on the GPU (ops_cuda.h), bf16
// storage, fp32 softmax and accumulation. Defines attention_forward_cuda,
// attention_backward_cuda, attention_decode_cuda and attention_prefill_cuda, with:
// - flash-attention-2 style fast kernels (tensor cores through nvcuda::wmma,
//   bf16 16x16x16 fragments, fp32 accumulators): forward (online softmax over
//   K/V tiles staged in shared memory, lse saved), and a backward in three
//   deterministic passes: D = rowsum(dout * out), then dK/dV per KV tile
//   (looping over the query tiles of every query head of the GQA group in a
//   fixed order), then dQ per query tile (looping over KV tiles). P is
//   recomputed from lse; no atomics anywhere. Global -> shared copies are
//   asynchronous (cp.async) and overlap the tensor-core work of another
//   operand of the same tile, with one buffer per operand.
// - simple reference kernels (one block per query row, or per key row for
//   dK/dV, scalar fp32 math, one key at a time), chosen with the environment
//   variable FIMI_CUDA_SIMPLE=1, so that a wrong fast kernel can be told apart
//   from a wrong test; they are also the fallback when a pointer is not 16-byte
//   aligned (the fast kernels load 8 bf16 at a time), and the only forward
//   and backward for head dim 512 (Gemma 4's full-attention layers), whose
//   tiles do not fit the fast kernels (see "tile shapes per head dim").
// - a decode kernel: one block per (sequence, head), 8 warps taking every 8th
//   cache row with their own online softmax, merged in warp order; prefill
//   (a chunk of one sequence's queries against its cache) is the same kernel
//   with one block per (query, head), all rows reading one cache.
// Head dims: 64, 128, 256 everywhere; 512 on the simple kernels and decode.
// Masking, softcap, scale and GQA follow kernels/cpu/attention.c: score =
// q.k * scale, softcap * tanh(score / softcap) when softcap > 0, query i sees
// keys j <= i and, with a window W > 0, j > i - W; kv head = h / (nh / nkv).
// Whole K tiles that no row of a query tile may see are never visited (the
// loops start at the first visible tile and stop at the diagonal), which is
// what makes a 1024 window at T = 4096 cheap.
#include <cuda_pipeline.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "kernels/cuda/common.cuh"

typedef __nv_bfloat16 bfloat;

// ---------------------------------------------------------------------------
// shared pieces

// Query i sees key j (both in [0, T)): causal, plus the sliding window.
__device__ __forceinline__ bool key_visible(int i, int j, int T, int window) {
  return i < T && j <= i && (window <= 0 || j > i - window);
}

// Gemma 2 softcap on a scaled score; *dcap gets d(capped)/d(raw) = 1 - tanh^2.
__device__ __forceinline__ float capped_score(float raw, float softcap, float *dcap) {
  if (softcap > 0.0f) {
    float t = tanhf(raw / softcap);
    *dcap = 1.0f - t * t;
    return softcap * t;
  }
  *dcap = 1.0f;
  return raw;
}

// First key query i may see.
__host__ __device__ __forceinline__ int first_visible_key(int i, int window) {
  return window > 0 ? (i - window + 1 > 0 ? i - window + 1 : 0) : 0;
}

// Last query (< T) that sees key j: j + window - 1 under a window, written so
// that a huge window (INT_MAX as "no window") cannot overflow.
__device__ __forceinline__ int last_seeing_query(int j, int T, int window) {
  return window > 0 && window - 1 < T - 1 - j ? j + window - 1 : T - 1;
}

// The largest head dim of the tensor-core kernels; above it (512) the
// forward and backward take the simple kernels.
#define ATT_FAST_MAX_HD 256
// The largest head dim at all: the simple kernels' block has hd threads.
#define ATT_MAX_HD 512

// B and the heads go into gridDim.y / .z (at most 65535): say so rather than
// fail the launch with "invalid configuration argument".
static void check_attention_shape(const char *op, int B, int T, int nh, int nkv, int hd) {
  if (B < 0 || B > 65535 || T < 0 || nh <= 0 || nh > 65535 || nkv <= 0 || nh % nkv != 0 ||
      (hd != 64 && hd != 128 && hd != 256 && hd != 512)) {
    fprintf(stderr,
            "fimi: %s: unsupported shape B=%d T=%d nh=%d nkv=%d hd=%d (hd in {64,128,256,512}, nh %% nkv == 0, "
            "B and nh <= 65535)\n",
            op, B, T, nh, nkv, hd);
    exit(EXIT_FAILURE);
  }
}

// ---------------------------------------------------------------------------
// simple reference kernels: one block of hd threads (thread d owns element d),
// keys visited one at a time, each dot product a block_reduce_sum (which
// takes up to 1024 threads: hd 512 is 16 warps). __launch_bounds__(512) keeps
// every kernel's registers within what a 512-thread block may use (128 per
// thread), so hd 512 cannot fail to launch for lack of registers.

// One query row (i, h, b) per block, online softmax over its visible keys.
// out (B, T, nh, hd), lse (B, nh, T) or NULL, q (B, T, nh, hd), k, v (B, T, nkv, hd)
__global__ void __launch_bounds__(ATT_MAX_HD)
    attention_forward_simple_kernel(bfloat *out, float *lse, const bfloat *q, const bfloat *k, const bfloat *v, int T,
                                    int nh, int nkv, int hd, int window, float softcap, float scale) {
  __shared__ float red[32];
  int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, d = threadIdx.x;
  int kvh = h / (nh / nkv);
  size_t q_row = (((size_t)b * T + i) * nh + h) * hd;
  size_t kv_head = (size_t)b * T * nkv * hd + (size_t)kvh * hd;
  size_t kv_stride = (size_t)nkv * hd;
  float qd = bf16_to_float(q[q_row + d]);
  float m = -INFINITY, l = 0.0f, acc = 0.0f, dcap;
  for (int j = first_visible_key(i, window); j <= i; j++) {
    float dot = block_reduce_sum(qd * bf16_to_float(k[kv_head + j * kv_stride + d]), red);
    float s = capped_score(dot * scale, softcap, &dcap);
    float m_new = fmaxf(m, s);
    float corr = expf(m - m_new);  // 0 on the first key (m = -inf)
    float p = expf(s - m_new);
    l = l * corr + p;
    acc = acc * corr + p * bf16_to_float(v[kv_head + j * kv_stride + d]);
    m = m_new;
  }
  // a causal row always sees itself, so l >= 1; guard anyway
  out[q_row + d] = float_to_bf16(l > 0.0f ? acc / l : 0.0f);
  if (lse && d == 0) lse[((size_t)b * nh + h) * T + i] = l > 0.0f ? m + logf(l) : -INFINITY;
}

// dq of one query row per block: dq_i = sum_j ds_ij k_j,
// ds = p (dp - D) dcap scale, p = exp(score - lse), dp = dout_i . v_j, D = dout_i . out_i.
// dq (B, T, nh, hd); dout, q, out like dq; k, v (B, T, nkv, hd); lse (B, nh, T)
__global__ void __launch_bounds__(ATT_MAX_HD)
    attention_backward_dq_simple_kernel(bfloat *dq, const bfloat *dout, const bfloat *q, const bfloat *k,
                                        const bfloat *v, const bfloat *out, const float *lse, int T, int nh, int nkv,
                                        int hd, int window, float softcap, float scale) {
  __shared__ float red[32];
  int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, d = threadIdx.x;
  int kvh = h / (nh / nkv);
  size_t q_row = (((size_t)b * T + i) * nh + h) * hd;
  size_t kv_head = (size_t)b * T * nkv * hd + (size_t)kvh * hd;
  size_t kv_stride = (size_t)nkv * hd;
  float qd = bf16_to_float(q[q_row + d]), gd = bf16_to_float(dout[q_row + d]);
  float D = block_reduce_sum(gd * bf16_to_float(out[q_row + d]), red);
  float L = lse[((size_t)b * nh + h) * T + i];
  float acc = 0.0f, dcap;
  for (int j = first_visible_key(i, window); j <= i; j++) {
    float kd = bf16_to_float(k[kv_head + j * kv_stride + d]);
    float dot = block_reduce_sum(qd * kd, red);
    float dp = block_reduce_sum(gd * bf16_to_float(v[kv_head + j * kv_stride + d]), red);
    float s = capped_score(dot * scale, softcap, &dcap);
    float p = L == -INFINITY ? 0.0f : expf(s - L);
    acc += p * (dp - D) * dcap * scale * kd;
  }
  dq[q_row + d] = float_to_bf16(acc);
}

// dk, dv of one key row (j, kvh, b) per block: sums over the group's query
// heads (in order) and the queries that see key j (in order).
// dk, dv (B, T, nkv, hd) or NULL; others as in the dq kernel
__global__ void __launch_bounds__(ATT_MAX_HD)
    attention_backward_dkdv_simple_kernel(bfloat *dk, bfloat *dv, const bfloat *dout, const bfloat *q, const bfloat *k,
                                          const bfloat *v, const bfloat *out, const float *lse, int T, int nh, int nkv,
                                          int hd, int window, float softcap, float scale) {
  __shared__ float red[32];
  int j = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z, d = threadIdx.x;
  int group = nh / nkv;
  size_t kv_row = (((size_t)b * T + j) * nkv + kvh) * hd;
  float kd = bf16_to_float(k[kv_row + d]), vd = bf16_to_float(v[kv_row + d]);
  int last_query = last_seeing_query(j, T, window);
  float dk_acc = 0.0f, dv_acc = 0.0f, dcap;
  for (int h = kvh * group; h < (kvh + 1) * group; h++) {
    for (int i = j; i <= last_query; i++) {
      size_t q_row = (((size_t)b * T + i) * nh + h) * hd;
      float qd = bf16_to_float(q[q_row + d]), gd = bf16_to_float(dout[q_row + d]);
      float D = block_reduce_sum(gd * bf16_to_float(out[q_row + d]), red);
      float dot = block_reduce_sum(qd * kd, red);
      float dp = block_reduce_sum(gd * vd, red);
      float L = lse[((size_t)b * nh + h) * T + i];
      float s = capped_score(dot * scale, softcap, &dcap);
      float p = L == -INFINITY ? 0.0f : expf(s - L);
      dv_acc += p * gd;
      dk_acc += p * (dp - D) * dcap * scale * qd;
    }
  }
  if (dk) dk[kv_row + d] = float_to_bf16(dk_acc);
  if (dv) dv[kv_row + d] = float_to_bf16(dv_acc);
}

// ---------------------------------------------------------------------------
// fast kernels: tiles in shared memory, matmuls on tensor cores.
//
// Shared-memory rows are padded (bf16 rows by 8 elements, fp32 rows by 4) to
// spread the rows over the banks; the paddings keep every row 16-byte aligned
// (vector stores) and every 16-row fragment 32-byte aligned (wmma pointers).
// Padding columns are never read: fragments read only columns < the width.

#define ATT_WARPS 8
#define ATT_THREADS (ATT_WARPS * 32)

// How the (M/16, N/16) output fragments of an (M, N) product are split over
// the warps: warp w owns fragment row tm = w / WPR and the NT columns
// w % WPR + t * WPR, so it loads each A fragment once per kk and reuses it NT
// times. Each output fragment belongs to one warp and is accumulated over kk
// in order: deterministic.
template <int M, int N>
struct WarpTiles {
  static constexpr int TM = M / 16, TN = N / 16;
  static_assert(M % 16 == 0 && N % 16 == 0, "whole fragments");
  static_assert(TM <= ATT_WARPS && ATT_WARPS % TM == 0, "warps split fragment rows evenly");
  static constexpr int WPR = ATT_WARPS / TM;  // warps per fragment row
  static_assert(TN % WPR == 0, "warps split fragment columns evenly");
  static constexpr int NT = TN / WPR;  // fragment columns per warp
};

typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> AccFrag;

// This warp's fragments of C (M, N) += A (M, K) @ B (K, N), bf16 in shared
// memory. A is row-major (A[m * lda + kk]) or, when A_COL, its transpose is
// stored (A[kk * lda + m]); B is row-major (B[kk * ldb + n]) or, when B_COL,
// stored transposed (B[n * ldb + kk]). c stays in registers, so an
// accumulator that lives across tiles (dK, dV, dQ) costs no shared traffic.
template <int M, int N, int K, bool A_COL, bool B_COL>
__device__ __forceinline__ void warp_mma(AccFrag (&c)[WarpTiles<M, N>::NT], const bfloat *A, int lda, const bfloat *B,
                                         int ldb) {
  using namespace nvcuda;
  typedef WarpTiles<M, N> W;
  typedef typename std::conditional<A_COL, wmma::col_major, wmma::row_major>::type ALayout;
  typedef typename std::conditional<B_COL, wmma::col_major, wmma::row_major>::type BLayout;
  static_assert(K % 16 == 0, "whole fragments");
  int warp = threadIdx.x / 32;
  int tm = warp / W::WPR, tn0 = warp % W::WPR;
  for (int kk = 0; kk < K; kk += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bfloat, ALayout> a;
    const bfloat *ap = A_COL ? A + (size_t)kk * lda + tm * 16 : A + (size_t)tm * 16 * lda + kk;
    wmma::load_matrix_sync(a, ap, lda);
#pragma unroll
    for (int t = 0; t < W::NT; t++) {
      int tn = tn0 + t * W::WPR;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bfloat, BLayout> bf;
      const bfloat *bp = B_COL ? B + (size_t)tn * 16 * ldb + kk : B + (size_t)kk * ldb + tn * 16;
      wmma::load_matrix_sync(bf, bp, ldb);
      wmma::mma_sync(c[t], a, bf, c[t]);
    }
  }
}

template <int M, int N>
__device__ __forceinline__ void warp_zero(AccFrag (&c)[WarpTiles<M, N>::NT]) {
#pragma unroll
  for (int t = 0; t < WarpTiles<M, N>::NT; t++) nvcuda::wmma::fill_fragment(c[t], 0.0f);
}

// This warp's fragments from / to C (M, N) fp32 in shared memory, row stride ldc.
template <int M, int N>
__device__ __forceinline__ void warp_load(AccFrag (&c)[WarpTiles<M, N>::NT], const float *C, int ldc) {
  typedef WarpTiles<M, N> W;
  int warp = threadIdx.x / 32, tm = warp / W::WPR, tn0 = warp % W::WPR;
#pragma unroll
  for (int t = 0; t < W::NT; t++)
    nvcuda::wmma::load_matrix_sync(c[t], C + (size_t)tm * 16 * ldc + (tn0 + t * W::WPR) * 16, ldc,
                                   nvcuda::wmma::mem_row_major);
}

template <int M, int N>
__device__ __forceinline__ void warp_store(float *C, int ldc, const AccFrag (&c)[WarpTiles<M, N>::NT]) {
  typedef WarpTiles<M, N> W;
  int warp = threadIdx.x / 32, tm = warp / W::WPR, tn0 = warp % W::WPR;
#pragma unroll
  for (int t = 0; t < W::NT; t++)
    nvcuda::wmma::store_matrix_sync(C + (size_t)tm * 16 * ldc + (tn0 + t * W::WPR) * 16, c[t], ldc,
                                    nvcuda::wmma::mem_row_major);
}

// C (M, N) fp32 in shared memory (row stride ldc) = or += A (M, K) @ B (K, N),
// operands as in warp_mma. No __syncthreads inside: the caller separates phases.
template <int M, int N, int K, bool A_COL, bool B_COL, bool ACCUMULATE>
__device__ __forceinline__ void smem_mma(float *C, int ldc, const bfloat *A, int lda, const bfloat *B, int ldb) {
  AccFrag c[WarpTiles<M, N>::NT];
  if (ACCUMULATE) warp_load<M, N>(c, C, ldc);
  else warp_zero<M, N>(c);
  warp_mma<M, N, K, A_COL, B_COL>(c, A, lda, B, ldb);
  warp_store<M, N>(C, ldc, c);
}

// dst (ROWS, HD) bf16 shared, row stride ld = rows row0 .. row0 + ROWS - 1 of
// src (row r at src + r * stride); rows >= limit are zero-filled (0 * garbage
// could be NaN). 16-byte loads: src and stride must keep rows 16-byte aligned.
template <int ROWS, int HD>
__device__ __forceinline__ void load_rows(bfloat *dst, int ld, const bfloat *src, size_t stride, int row0, int limit) {
  constexpr int CHUNKS = HD / 8;  // uint4 = 8 bf16
  for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += blockDim.x) {
    int r = idx / CHUNKS, c = idx % CHUNKS;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (row0 + r < limit) val = *reinterpret_cast<const uint4 *>(src + (size_t)(row0 + r) * stride + c * 8);
    *reinterpret_cast<uint4 *>(dst + (size_t)r * ld + c * 8) = val;
  }
}

// load_rows with asynchronous copies (cp.async, 16 bytes each) that the
// caller commits as one group and waits for (__pipeline_wait_prior) before a
// __syncthreads; rows >= limit are zero-filled with plain stores.
template <int ROWS, int HD>
__device__ __forceinline__ void load_rows_async(bfloat *dst, int ld, const bfloat *src, size_t stride, int row0,
                                                int limit) {
  constexpr int CHUNKS = HD / 8;
  for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += blockDim.x) {
    int r = idx / CHUNKS, c = idx % CHUNKS;
    bfloat *d = dst + (size_t)r * ld + c * 8;
    if (row0 + r < limit) __pipeline_memcpy_async(d, src + (size_t)(row0 + r) * stride + c * 8, 16);
    else *reinterpret_cast<uint4 *>(d) = make_uint4(0u, 0u, 0u, 0u);
  }
}

// dst (ROWS, HD) bf16 global rows row0 .. row0 + ROWS - 1 (those < limit only) from fp32 shared rows.
template <int ROWS, int HD>
__device__ __forceinline__ void store_rows(bfloat *dst, size_t stride, int row0, int limit, const float *src, int ld) {
  for (int idx = threadIdx.x; idx < ROWS * HD; idx += blockDim.x) {
    int r = idx / HD, d = idx % HD;
    if (row0 + r < limit) dst[(size_t)(row0 + r) * stride + d] = float_to_bf16(src[(size_t)r * ld + d]);
  }
}

template <int ROWS, int LD>
__device__ __forceinline__ void zero_f32(float *dst) {
  for (int idx = threadIdx.x; idx < ROWS * LD; idx += blockDim.x) dst[idx] = 0.0f;
}

// Bytes of a shared buffer rounded up to 128, so every buffer starts aligned.
__host__ __device__ constexpr size_t smem_round(size_t bytes) { return (bytes + 127) / 128 * 128; }

// ---- forward ----

template <int HD, int BR, int BC>
struct ForwardSmem {
  static constexpr int LDH = HD + 8;  // bf16 rows of Q, K, V
  static constexpr int LDO = HD + 4;  // fp32 rows of O
  static constexpr int LDS = BC + 4;  // fp32 rows of S
  static constexpr int LDP = BC + 8;  // bf16 rows of P
  static constexpr size_t Q = 0;
  static constexpr size_t K = Q + smem_round((size_t)BR * LDH * 2);
  static constexpr size_t V = K + smem_round((size_t)BC * LDH * 2);
  static constexpr size_t O = V + smem_round((size_t)BC * LDH * 2);
  static constexpr size_t S = O + smem_round((size_t)BR * LDO * 4);
  static constexpr size_t P = S + smem_round((size_t)BR * LDS * 4);
  static constexpr size_t MAX = P + smem_round((size_t)BR * LDP * 2);  // row max (BR)
  static constexpr size_t SUM = MAX + smem_round((size_t)BR * 4);      // row sum (BR)
  static constexpr size_t BYTES = SUM + smem_round((size_t)BR * 4);
};

// One block per (query tile of BR rows, head, batch); blockIdx.x counts tiles
// from the last, so the long causal rows start first. Per K/V tile of BC keys:
// S = Q K^T (tensor cores), then per row (one warp per row) the capped, masked
// scores update the running max and sum, P = exp(s - max) goes to bf16 and the
// O row is rescaled, then O += P V (tensor cores). O stays fp32 in shared
// memory throughout. out = O / sum, lse = max + log(sum).
// Loads overlap compute without a second buffer: V of this tile is copied
// (cp.async) while S and the softmax run, K of the next tile while P V runs.
// out (B, T, nh, hd), lse (B, nh, T) or NULL, q (B, T, nh, hd), k, v (B, T, nkv, hd)
template <int HD, int BR, int BC>
__global__ void __launch_bounds__(ATT_THREADS, 1)
    attention_forward_kernel(bfloat *out, float *lse, const bfloat *q, const bfloat *k, const bfloat *v, int T, int nh,
                             int nkv, int window, float softcap, float scale) {
  typedef ForwardSmem<HD, BR, BC> L;
  extern __shared__ __align__(1024) unsigned char smem[];
  bfloat *sQ = reinterpret_cast<bfloat *>(smem + L::Q);
  bfloat *sK = reinterpret_cast<bfloat *>(smem + L::K);
  bfloat *sV = reinterpret_cast<bfloat *>(smem + L::V);
  float *sO = reinterpret_cast<float *>(smem + L::O);
  float *sS = reinterpret_cast<float *>(smem + L::S);
  bfloat *sP = reinterpret_cast<bfloat *>(smem + L::P);
  float *row_max = reinterpret_cast<float *>(smem + L::MAX);
  float *row_sum = reinterpret_cast<float *>(smem + L::SUM);

  int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  int kvh = h / (nh / nkv);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  size_t q_stride = (size_t)nh * HD, kv_stride = (size_t)nkv * HD;
  const bfloat *q_head = q + (size_t)b * T * q_stride + (size_t)h * HD;  // query row 0 of (b, h)
  const bfloat *k_head = k + (size_t)b * T * kv_stride + (size_t)kvh * HD;
  const bfloat *v_head = v + (size_t)b * T * kv_stride + (size_t)kvh * HD;
  int i0 = qt * BR, i_last = min(T - 1, i0 + BR - 1);

  load_rows<BR, HD>(sQ, L::LDH, q_head, q_stride, i0, T);
  zero_f32<BR, L::LDO>(sO);
  for (int r = threadIdx.x; r < BR; r += blockDim.x) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
  // key tiles from the first one the first row may see to the diagonal
  int kt_first = first_visible_key(i0, window) / BC, kt_last = i_last / BC;
  load_rows_async<BC, HD>(sK, L::LDH, k_head, kv_stride, kt_first * BC, T);
  __pipeline_commit();
  for (int kt = kt_first; kt <= kt_last; kt++) {
    int j0 = kt * BC;
    __pipeline_wait_prior(0);  // this thread's copies of K (this tile) have landed
    // everyone's K copies visible; every warp is past the previous P V, so V may be overwritten
    __syncthreads();
    load_rows_async<BC, HD>(sV, L::LDH, v_head, kv_stride, j0, T);
    __pipeline_commit();
    smem_mma<BR, BC, HD, false, true, false>(sS, L::LDS, sQ, L::LDH, sK, L::LDH);
    __syncthreads();
    for (int r = warp; r < BR; r += ATT_WARPS) {
      int i = i0 + r;
      float m_old = row_max[r];
      float s[BC / 32];
      float tile_max = -INFINITY, dcap;
#pragma unroll
      for (int u = 0; u < BC / 32; u++) {
        int c = lane + 32 * u;
        float sc = capped_score(sS[r * L::LDS + c] * scale, softcap, &dcap);
        s[u] = key_visible(i, j0 + c, T, window) ? sc : -INFINITY;
        tile_max = fmaxf(tile_max, s[u]);
      }
      tile_max = warp_reduce_max(tile_max);  // every lane has read m_old before lane 0 writes below
      float m_new = fmaxf(m_old, tile_max);
      // nothing visible yet: keep p = 0 without computing inf - inf
      float m_ref = m_new == -INFINITY ? 0.0f : m_new;
      float psum = 0.0f;
#pragma unroll
      for (int u = 0; u < BC / 32; u++) {
        float p = expf(s[u] - m_ref);  // masked: exp(-inf) = 0
        sP[r * L::LDP + lane + 32 * u] = float_to_bf16(p);
        psum += p;
      }
      psum = warp_reduce_sum(psum);
      float corr = expf(m_old - m_ref);  // 0 while the row had nothing (m_old = -inf)
      if (lane == 0) {
        row_max[r] = m_new;
        row_sum[r] = row_sum[r] * corr + psum;
      }
      for (int d = lane; d < HD; d += 32) sO[r * L::LDO + d] *= corr;
    }
    __pipeline_wait_prior(0);  // V (this tile)
    __syncthreads();           // V visible, P and O rows done; nobody reads K any more this tile
    if (kt < kt_last) {
      load_rows_async<BC, HD>(sK, L::LDH, k_head, kv_stride, j0 + BC, T);
      __pipeline_commit();
    }
    smem_mma<BR, HD, BC, false, false, true>(sO, L::LDO, sP, L::LDP, sV, L::LDH);
  }
  __syncthreads();
  for (int r = warp; r < BR; r += ATT_WARPS) {
    int i = i0 + r;
    if (i >= T) continue;
    float l = row_sum[r];
    float inv = l > 0.0f ? 1.0f / l : 0.0f;  // a causal row always sees itself; guard anyway
    bfloat *out_row = out + ((size_t)b * T + i) * q_stride + (size_t)h * HD;
    for (int d = lane; d < HD; d += 32) out_row[d] = float_to_bf16(sO[r * L::LDO + d] * inv);
    if (lse && lane == 0) lse[((size_t)b * nh + h) * T + i] = l > 0.0f ? row_max[r] + logf(l) : -INFINITY;
  }
}

// ---- backward ----

// D (B, nh, T) fp32 = rowsum(dout * out), one warp per (b, i, h) row, lanes
// over d then a fixed xor tree. dout, out (B, T, nh, hd)
__global__ void attention_row_dot_kernel(float *D, const bfloat *dout, const bfloat *out, int B, int T, int nh,
                                         int hd) {
  size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // (b, i, h) row of dout
  int lane = threadIdx.x % 32;
  if (row >= (size_t)B * T * nh) return;  // whole warps leave together
  const bfloat *g = dout + row * hd, *o = out + row * hd;
  float sum = 0.0f;
  for (int d = lane; d < hd; d += 32) sum += bf16_to_float(g[d]) * bf16_to_float(o[d]);
  sum = warp_reduce_sum(sum);
  if (lane == 0) {
    int h = (int)(row % nh), i = (int)((row / nh) % T), b = (int)(row / ((size_t)nh * T));
    D[((size_t)b * nh + h) * T + i] = sum;
  }
}

// Per (query tile, key tile) pair, given sS = Q K^T and sdP = dO V^T (fp32):
// P = exp(capped score - lse) and dS = P (dP - D) dcap scale, both 0 where
// masked, written as bf16 (sP may be NULL when P is not needed).
template <int BR, int BC, int LDS, int LDP>
__device__ __forceinline__ void probs_and_grads(bfloat *sP, bfloat *sdS, const float *sS, const float *sdP,
                                                const float *s_lse, const float *s_D, int i0, int j0, int T,
                                                int window, float softcap, float scale) {
  for (int idx = threadIdx.x; idx < BR * BC; idx += blockDim.x) {
    int r = idx / BC, c = idx % BC;
    float p = 0.0f, ds = 0.0f;
    float L = s_lse[r];
    if (key_visible(i0 + r, j0 + c, T, window) && j0 + c < T && L != -INFINITY) {
      float dcap;
      float s = capped_score(sS[r * LDS + c] * scale, softcap, &dcap);
      p = expf(s - L);
      ds = p * (sdP[r * LDS + c] - s_D[r]) * dcap * scale;
    }
    if (sP) sP[r * LDP + c] = float_to_bf16(p);
    sdS[r * LDP + c] = float_to_bf16(ds);
  }
}

template <int HD, int BR, int BC>
struct BackwardSmem {
  static constexpr int LDH = HD + 8;  // bf16 rows of Q, dO, K, V
  static constexpr int LDO = HD + 4;  // fp32 rows of dK, dV / dQ
  static constexpr int LDS = BC + 4;  // fp32 rows of S, dP
  static constexpr int LDP = BC + 8;  // bf16 rows of P, dS
  static constexpr size_t Q = 0;
  static constexpr size_t DO = Q + smem_round((size_t)BR * LDH * 2);
  static constexpr size_t K = DO + smem_round((size_t)BR * LDH * 2);
  static constexpr size_t V = K + smem_round((size_t)BC * LDH * 2);
  static constexpr size_t S = V + smem_round((size_t)BC * LDH * 2);
  static constexpr size_t DP = S + smem_round((size_t)BR * LDS * 4);
  static constexpr size_t P = DP + smem_round((size_t)BR * LDS * 4);
  static constexpr size_t DS = P + smem_round((size_t)BR * LDP * 2);
  static constexpr size_t LSE = DS + smem_round((size_t)BR * LDP * 2);
  static constexpr size_t D = LSE + smem_round((size_t)BR * 4);
  // fp32 staging of the register accumulators for the final bf16 stores:
  // dQ (BR, LDO), or dK then dV (BC, LDO) each
  static constexpr size_t ACC = D + smem_round((size_t)BR * 4);
  static constexpr size_t DQ_BYTES = ACC + smem_round((size_t)BR * LDO * 4);
  static constexpr size_t DKDV_BYTES = ACC + 2 * smem_round((size_t)BC * LDO * 4);
};

// lse and D of query rows i0 .. i0 + BR - 1 (0 past T, where every key is masked anyway).
template <int BR>
__device__ __forceinline__ void load_row_stats(float *s_lse, float *s_D, const float *lse_row, const float *D_row, int i0,
                                               int T) {
  for (int r = threadIdx.x; r < BR; r += blockDim.x) {
    bool valid = i0 + r < T;
    s_lse[r] = valid ? lse_row[i0 + r] : 0.0f;
    s_D[r] = valid ? D_row[i0 + r] : 0.0f;
  }
}

// Loads the query-side tile of a backward pass: Q, dO rows i0.. of head h,
// and their lse and D (0 past T, where every key is masked anyway).
template <int HD, int BR>
__device__ __forceinline__ void load_query_tile(bfloat *sQ, bfloat *sdO, float *s_lse, float *s_D, int ld,
                                                const bfloat *q_head, const bfloat *dout_head, size_t q_stride,
                                                const float *lse_row, const float *D_row, int i0, int T) {
  load_rows<BR, HD>(sQ, ld, q_head, q_stride, i0, T);
  load_rows<BR, HD>(sdO, ld, dout_head, q_stride, i0, T);
  load_row_stats<BR>(s_lse, s_D, lse_row, D_row, i0, T);
}

// dK, dV of one key tile (BC keys) of kv head kvh in sequence b per block.
// Loops over the group's query heads in order and, for each, over the query
// tiles that can see the keys (from the diagonal to the window's end); per
// pair: S = Q K^T, dP = dO V^T, P and dS, then dV += P^T dO and dK += dS^T Q
// into fp32 register accumulators (each fragment owned by one warp, summed in
// loop order: deterministic, no atomics). Block 0 (keys 0..) has the most
// queries and starts first.
// dk, dv (B, T, nkv, hd) or NULL; dout, q (B, T, nh, hd); k, v (B, T, nkv, hd);
// lse, D (B, nh, T)
template <int HD, int BR, int BC>
__global__ void __launch_bounds__(ATT_THREADS, 1)
    attention_backward_dkdv_kernel(bfloat *dk, bfloat *dv, const bfloat *dout, const bfloat *q, const bfloat *k,
                                   const bfloat *v, const float *lse, const float *D, int T, int nh, int nkv,
                                   int window, float softcap, float scale) {
  typedef BackwardSmem<HD, BR, BC> L;
  extern __shared__ __align__(1024) unsigned char smem[];
  bfloat *sQ = reinterpret_cast<bfloat *>(smem + L::Q);
  bfloat *sdO = reinterpret_cast<bfloat *>(smem + L::DO);
  bfloat *sK = reinterpret_cast<bfloat *>(smem + L::K);
  bfloat *sV = reinterpret_cast<bfloat *>(smem + L::V);
  float *sS = reinterpret_cast<float *>(smem + L::S);
  float *sdP = reinterpret_cast<float *>(smem + L::DP);
  bfloat *sP = reinterpret_cast<bfloat *>(smem + L::P);
  bfloat *sdS = reinterpret_cast<bfloat *>(smem + L::DS);
  float *s_lse = reinterpret_cast<float *>(smem + L::LSE);
  float *s_D = reinterpret_cast<float *>(smem + L::D);
  float *sdK = reinterpret_cast<float *>(smem + L::ACC);
  float *sdV = reinterpret_cast<float *>(smem + L::ACC + smem_round((size_t)BC * L::LDO * 4));

  int kt = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  int group = nh / nkv;
  size_t q_stride = (size_t)nh * HD, kv_stride = (size_t)nkv * HD;
  size_t kv_offset = (size_t)b * T * kv_stride + (size_t)kvh * HD;  // key row 0 of (b, kvh)
  int j0 = kt * BC, j_last = min(T - 1, j0 + BC - 1);

  load_rows<BC, HD>(sK, L::LDH, k + kv_offset, kv_stride, j0, T);
  load_rows<BC, HD>(sV, L::LDH, v + kv_offset, kv_stride, j0, T);
  // dK, dV (BC, HD): this warp's fragments, in registers for the whole block
  AccFrag dk_acc[WarpTiles<BC, HD>::NT], dv_acc[WarpTiles<BC, HD>::NT];
  warp_zero<BC, HD>(dk_acc);
  warp_zero<BC, HD>(dv_acc);
  // the last query that sees key j_last is j_last + W - 1 under a window
  int last_query = last_seeing_query(j_last, T, window);
  int qt_first = j0 / BR, qt_count = last_query / BR - qt_first + 1;
  int pairs = group * qt_count;  // (query head, query tile) pairs, head-major
  // Loads overlap compute: dO of a pair is copied while S = Q K^T runs, Q of
  // the next pair while dV += P^T dO runs (dK, the other reader of Q, first).
  // lse and D rows are plain loads: tiny, and only read between the syncs
  // that bracket probs_and_grads.
  {
    size_t q_offset = (size_t)b * T * q_stride + (size_t)(kvh * group) * HD;
    load_rows_async<BR, HD>(sQ, L::LDH, q + q_offset, q_stride, qt_first * BR, T);
    __pipeline_commit();
    load_row_stats<BR>(s_lse, s_D, lse + ((size_t)b * nh + kvh * group) * T, D + ((size_t)b * nh + kvh * group) * T,
                       qt_first * BR, T);
  }
  for (int pair = 0; pair < pairs; pair++) {
    int h = kvh * group + pair / qt_count, i0 = (qt_first + pair % qt_count) * BR;
    size_t q_offset = (size_t)b * T * q_stride + (size_t)h * HD;  // query row 0 of (b, h)
    __pipeline_wait_prior(0);  // this thread's copies of Q (this pair)
    // Q, lse, D visible; every warp is past the previous dV += P^T dO: dO and P may be overwritten
    __syncthreads();
    load_rows_async<BR, HD>(sdO, L::LDH, dout + q_offset, q_stride, i0, T);
    __pipeline_commit();
    smem_mma<BR, BC, HD, false, true, false>(sS, L::LDS, sQ, L::LDH, sK, L::LDH);
    __pipeline_wait_prior(0);  // dO
    __syncthreads();
    smem_mma<BR, BC, HD, false, true, false>(sdP, L::LDS, sdO, L::LDH, sV, L::LDH);
    __syncthreads();
    probs_and_grads<BR, BC, L::LDS, L::LDP>(sP, sdS, sS, sdP, s_lse, s_D, i0, j0, T, window, softcap, scale);
    __syncthreads();
    warp_mma<BC, HD, BR, true, false>(dk_acc, sdS, L::LDP, sQ, L::LDH);  // dK += dS^T Q
    __syncthreads();  // nobody reads Q, lse, D of this pair any more
    if (pair + 1 < pairs) {
      int h1 = kvh * group + (pair + 1) / qt_count, i1 = (qt_first + (pair + 1) % qt_count) * BR;
      load_rows_async<BR, HD>(sQ, L::LDH, q + (size_t)b * T * q_stride + (size_t)h1 * HD, q_stride, i1, T);
      __pipeline_commit();
      load_row_stats<BR>(s_lse, s_D, lse + ((size_t)b * nh + h1) * T, D + ((size_t)b * nh + h1) * T, i1, T);
    }
    warp_mma<BC, HD, BR, true, false>(dv_acc, sP, L::LDP, sdO, L::LDH);  // dV += P^T dO
  }
  warp_store<BC, HD>(sdK, L::LDO, dk_acc);  // staging for the bf16 rows
  warp_store<BC, HD>(sdV, L::LDO, dv_acc);
  __syncthreads();
  if (dk) store_rows<BC, HD>(dk + kv_offset, kv_stride, j0, T, sdK, L::LDO);
  if (dv) store_rows<BC, HD>(dv + kv_offset, kv_stride, j0, T, sdV, L::LDO);
}

// dQ of one query tile (BR rows) of head h in sequence b per block: loops over
// the visible key tiles in order; per tile S, dP, dS as above and dQ += dS K
// in fp32 registers. Tiles counted from the last, as in the forward.
// dq (B, T, nh, hd); others as in the dK/dV kernel
template <int HD, int BR, int BC>
__global__ void __launch_bounds__(ATT_THREADS, 1)
    attention_backward_dq_kernel(bfloat *dq, const bfloat *dout, const bfloat *q, const bfloat *k, const bfloat *v,
                                 const float *lse, const float *D, int T, int nh, int nkv, int window, float softcap,
                                 float scale) {
  typedef BackwardSmem<HD, BR, BC> L;
  extern __shared__ __align__(1024) unsigned char smem[];
  bfloat *sQ = reinterpret_cast<bfloat *>(smem + L::Q);
  bfloat *sdO = reinterpret_cast<bfloat *>(smem + L::DO);
  bfloat *sK = reinterpret_cast<bfloat *>(smem + L::K);
  bfloat *sV = reinterpret_cast<bfloat *>(smem + L::V);
  float *sS = reinterpret_cast<float *>(smem + L::S);
  float *sdP = reinterpret_cast<float *>(smem + L::DP);
  bfloat *sdS = reinterpret_cast<bfloat *>(smem + L::DS);
  float *s_lse = reinterpret_cast<float *>(smem + L::LSE);
  float *s_D = reinterpret_cast<float *>(smem + L::D);
  float *sdQ = reinterpret_cast<float *>(smem + L::ACC);

  int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  int kvh = h / (nh / nkv);
  size_t q_stride = (size_t)nh * HD, kv_stride = (size_t)nkv * HD;
  size_t q_offset = (size_t)b * T * q_stride + (size_t)h * HD;
  size_t kv_offset = (size_t)b * T * kv_stride + (size_t)kvh * HD;
  int i0 = qt * BR, i_last = min(T - 1, i0 + BR - 1);

  load_query_tile<HD, BR>(sQ, sdO, s_lse, s_D, L::LDH, q + q_offset, dout + q_offset, q_stride,
                          lse + ((size_t)b * nh + h) * T, D + ((size_t)b * nh + h) * T, i0, T);
  AccFrag dq_acc[WarpTiles<BR, HD>::NT];  // dQ (BR, HD): this warp's fragments, in registers
  warp_zero<BR, HD>(dq_acc);
  int kt_first = first_visible_key(i0, window) / BC, kt_last = i_last / BC;
  // V of the next tile is copied while dS and dQ += dS K run (K is read to the end)
  load_rows_async<BC, HD>(sK, L::LDH, k + kv_offset, kv_stride, kt_first * BC, T);
  load_rows_async<BC, HD>(sV, L::LDH, v + kv_offset, kv_stride, kt_first * BC, T);
  __pipeline_commit();
  for (int kt = kt_first; kt <= kt_last; kt++) {
    int j0 = kt * BC;
    __pipeline_wait_prior(0);  // this thread's copies of K and V (this tile)
    __syncthreads();           // everyone's copies visible (and Q, dO, lse, D, dQ at the first tile)
    smem_mma<BR, BC, HD, false, true, false>(sS, L::LDS, sQ, L::LDH, sK, L::LDH);
    smem_mma<BR, BC, HD, false, true, false>(sdP, L::LDS, sdO, L::LDH, sV, L::LDH);
    __syncthreads();  // S, dP done: V is free
    if (kt < kt_last) {
      load_rows_async<BC, HD>(sV, L::LDH, v + kv_offset, kv_stride, j0 + BC, T);
      __pipeline_commit();
    }
    probs_and_grads<BR, BC, L::LDS, L::LDP>(NULL, sdS, sS, sdP, s_lse, s_D, i0, j0, T, window, softcap, scale);
    __syncthreads();
    warp_mma<BR, HD, BC, false, false>(dq_acc, sdS, L::LDP, sK, L::LDH);  // dQ += dS K
    __syncthreads();  // K and dS are free
    if (kt < kt_last) {
      load_rows_async<BC, HD>(sK, L::LDH, k + kv_offset, kv_stride, j0 + BC, T);
      __pipeline_commit();
    }
  }
  warp_store<BR, HD>(sdQ, L::LDO, dq_acc);  // staging for the bf16 rows
  __syncthreads();
  store_rows<BR, HD>(dq + q_offset, q_stride, i0, T, sdQ, L::LDO);
}

// ---- tile shapes per head dim ----
// (BR query rows, BC keys). hd 256 takes 32-key tiles in the backward to fit
// its tiles and fp32 staging in the 227 KiB of shared memory an H100/H200 block may use.
//
// hd 512 has no tile shape here, so it runs on the simple kernels (bytes of
// the layouts above, against the 232,448 B limit):
// - forward at (64, 64): Q, K, V 66,560 B each (rows padded to 520 bf16),
//   O 132,096 B (fp32, rows of 516), S and P 26,624 B, row max and sum
//   512 B: 358,912 B.
//   At (32, 64): 246,016 B, still too much. At (32, 32) it would fit
//   (173,312 B), but WarpTiles<32, 32> (S = Q K^T) cannot split the work:
//   2 fragment rows over 8 warps is 4 warps per row, and the tile's 2
//   fragment columns do not divide among 4 warps (static_assert); (16, 64)
//   fails the same way (1 row, 8 warps, 4 columns).
// - backward: at hd 256's (64, 32), 360,960 B for either pass; at (32, 32)
//   the dK/dV pass needs 279,808 B (and hits the same WarpTiles<32, 32>
//   limit); its dK and dV register accumulators would also be 2 x 8
//   fragments (128 fp32 registers) per thread.
// A 512 fast path needs a different split (e.g. O and dK/dV over head-dim
// slices, or fragments from registers rather than fp32 shared tiles).
#define ATT_SMEM_LIMIT 232448
template <int HD>
struct AttentionTiles {
  static constexpr int FWD_BR = 64, FWD_BC = 64;
  static constexpr int BWD_BR = 64, BWD_BC = HD >= 256 ? 32 : 64;
  static_assert(ForwardSmem<HD, FWD_BR, FWD_BC>::BYTES <= ATT_SMEM_LIMIT, "forward shared memory");
  static_assert(BackwardSmem<HD, BWD_BR, BWD_BC>::DQ_BYTES <= ATT_SMEM_LIMIT, "dq shared memory");
  static_assert(BackwardSmem<HD, BWD_BR, BWD_BC>::DKDV_BYTES <= ATT_SMEM_LIMIT, "dkdv shared memory");
};

// Kernels above 48 KiB of dynamic shared memory must opt in (per device and
// kernel; cheap, so done at every launch rather than cached per device).
template <typename Kernel>
static void allow_smem(Kernel kernel, size_t bytes) {
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <int HD>
static void forward_fast(CudaContext *ctx, bfloat *out, float *lse, const bfloat *q, const bfloat *k, const bfloat *v,
                         int B, int T, int nh, int nkv, int window, float softcap, float scale) {
  typedef AttentionTiles<HD> Tiles;
  constexpr int BR = Tiles::FWD_BR, BC = Tiles::FWD_BC;
  size_t bytes = ForwardSmem<HD, BR, BC>::BYTES;
  auto kernel = attention_forward_kernel<HD, BR, BC>;
  allow_smem(kernel, bytes);
  dim3 grid(ceil_div(T, BR), nh, B);
  kernel<<<grid, ATT_THREADS, bytes, ctx->stream>>>(out, lse, q, k, v, T, nh, nkv, window, softcap, scale);
  cuda_check_launch();
}

template <int HD>
static void backward_fast(CudaContext *ctx, bfloat *dq, bfloat *dk, bfloat *dv, const bfloat *dout, const bfloat *q,
                          const bfloat *k, const bfloat *v, const bfloat *out, const float *lse, int B, int T, int nh,
                          int nkv, int window, float softcap, float scale) {
  typedef AttentionTiles<HD> Tiles;
  constexpr int BR = Tiles::BWD_BR, BC = Tiles::BWD_BC;
  typedef BackwardSmem<HD, BR, BC> L;
  // D (B, nh, T): stream-ordered scratch (the op has no workspace argument;
  // the pool recycles the block, so this costs no device synchronization).
  size_t rows = (size_t)B * T * nh;
  float *D = NULL;
  cuda_check(cudaMallocAsync((void **)&D, rows * sizeof(float), ctx->stream));
  int rows_per_block = 256 / 32;
  attention_row_dot_kernel<<<(unsigned)ceil_div_size(rows, rows_per_block), 256, 0, ctx->stream>>>(D, dout, out, B, T,
                                                                                                   nh, HD);
  cuda_check_launch();
  if (dk || dv) {
    auto kernel = attention_backward_dkdv_kernel<HD, BR, BC>;
    allow_smem(kernel, L::DKDV_BYTES);
    dim3 grid(ceil_div(T, BC), nkv, B);
    kernel<<<grid, ATT_THREADS, L::DKDV_BYTES, ctx->stream>>>(dk, dv, dout, q, k, v, lse, D, T, nh, nkv, window,
                                                             softcap, scale);
    cuda_check_launch();
  }
  if (dq) {
    auto kernel = attention_backward_dq_kernel<HD, BR, BC>;
    allow_smem(kernel, L::DQ_BYTES);
    dim3 grid(ceil_div(T, BR), nh, B);
    kernel<<<grid, ATT_THREADS, L::DQ_BYTES, ctx->stream>>>(dq, dout, q, k, v, lse, D, T, nh, nkv, window, softcap,
                                                           scale);
    cuda_check_launch();
  }
  cuda_check(cudaFreeAsync(D, ctx->stream));
}

// ---------------------------------------------------------------------------
// decode

#define DECODE_WARPS 8

// One block per (head, query row b): the query at position lengths[b] - 1
// against cache rows first..lengths[b] - 1 of the cache at k_cache + b *
// seq_stride (decode: S * nkv * HD, each row its own sequence; prefill: 0,
// every row a query of the same sequence). Warp w takes rows first + w, first + w + 8,
// ... with its own running max, sum and accumulator (lane owns HD/32
// consecutive elements); the 8 partial softmaxes are merged in warp order.
// out (B, nh, hd), q (B, nh, hd), k_cache, v_cache (B, S, nkv, hd) or (S, nkv, hd), lengths (B)
template <int HD>
__global__ void __launch_bounds__(DECODE_WARPS * 32)
    attention_decode_kernel(bfloat *out, const bfloat *q, const bfloat *k_cache, const bfloat *v_cache,
                            const int *lengths, size_t seq_stride, int S, int nh, int nkv, int window, float softcap,
                            float scale) {
  constexpr int VPL = HD / 32;  // elements per lane
  // static shared memory is capped at 48 KiB per block: w_acc is 16 KiB at hd 512
  static_assert(sizeof(float) * DECODE_WARPS * (HD + 2) <= 48 * 1024, "decode shared memory");
  __shared__ float w_max[DECODE_WARPS], w_sum[DECODE_WARPS];
  __shared__ float w_acc[DECODE_WARPS][HD];
  int h = blockIdx.x, b = blockIdx.y;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  bfloat *out_row = out + ((size_t)b * nh + h) * HD;
  int length = lengths[b];
  if (length < 1 || length > S) {  // no valid key: zero row, as on CPU (uniform over the block)
    for (int d = threadIdx.x; d < HD; d += blockDim.x) out_row[d] = float_to_bf16(0.0f);
    return;
  }
  int i = length - 1;
  int kvh = h / (nh / nkv);
  size_t kv_stride = (size_t)nkv * HD;
  const bfloat *k_head = k_cache + (size_t)b * seq_stride + (size_t)kvh * HD + lane * VPL;
  const bfloat *v_head = v_cache + (size_t)b * seq_stride + (size_t)kvh * HD + lane * VPL;
  const bfloat *q_row = q + ((size_t)b * nh + h) * HD + lane * VPL;
  float qr[VPL], acc[VPL];
#pragma unroll
  for (int e = 0; e < VPL; e++) {
    qr[e] = bf16_to_float(q_row[e]);
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f, dcap;
  for (int j = first_visible_key(i, window) + warp; j <= i; j += DECODE_WARPS) {
    const bfloat *kr = k_head + (size_t)j * kv_stride, *vr = v_head + (size_t)j * kv_stride;
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < VPL; e++) dot += qr[e] * bf16_to_float(kr[e]);
    dot = warp_reduce_sum(dot);
    float s = capped_score(dot * scale, softcap, &dcap);
    float m_new = fmaxf(m, s);
    float corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
#pragma unroll
    for (int e = 0; e < VPL; e++) acc[e] = acc[e] * corr + p * bf16_to_float(vr[e]);
    m = m_new;
  }
  if (lane == 0) {
    w_max[warp] = m;
    w_sum[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < VPL; e++) w_acc[warp][lane * VPL + e] = acc[e];
  __syncthreads();
  // warp 0 always has key `first` (<= i), so the merged max is finite
  float M = -INFINITY;
  for (int w = 0; w < DECODE_WARPS; w++) M = fmaxf(M, w_max[w]);
  float total = 0.0f;
  for (int w = 0; w < DECODE_WARPS; w++) total += w_sum[w] * expf(w_max[w] - M);  // empty warps: exp(-inf) = 0
  for (int d = threadIdx.x; d < HD; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < DECODE_WARPS; w++) o += w_acc[w][d] * expf(w_max[w] - M);
    out_row[d] = float_to_bf16(total > 0.0f ? o / total : 0.0f);
  }
}

// ---------------------------------------------------------------------------
// C API

extern "C" void attention_forward_cuda(CudaContext *ctx, bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                       const bf16 *v, int B, int T, int nh, int nkv, int hd, int window,
                                       float softcap, float scale) {
  check_attention_shape("attention_forward_cuda", B, T, nh, nkv, hd);
  if (B == 0 || T == 0) return;
  bfloat *o = as_nv(out);
  const bfloat *qn = as_nv(q), *kn = as_nv(k), *vn = as_nv(v);
  int fast = hd <= ATT_FAST_MAX_HD && !cuda_simple_mode() && is_aligned16(out) && is_aligned16(q) &&
             is_aligned16(k) && is_aligned16(v);
  if (!fast) {
    attention_forward_simple_kernel<<<dim3(T, nh, B), hd, 0, ctx->stream>>>(o, lse, qn, kn, vn, T, nh, nkv, hd, window,
                                                                          softcap, scale);
    cuda_check_launch();
    return;
  }
  if (hd == 64) forward_fast<64>(ctx, o, lse, qn, kn, vn, B, T, nh, nkv, window, softcap, scale);
  else if (hd == 128) forward_fast<128>(ctx, o, lse, qn, kn, vn, B, T, nh, nkv, window, softcap, scale);
  else forward_fast<256>(ctx, o, lse, qn, kn, vn, B, T, nh, nkv, window, softcap, scale);
}

extern "C" void attention_backward_cuda(CudaContext *ctx, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout,
                                        const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *out,
                                        const float *lse, int B, int T, int nh, int nkv, int hd, int window,
                                        float softcap, float scale) {
  check_attention_shape("attention_backward_cuda", B, T, nh, nkv, hd);
  if (B == 0 || T == 0 || (!dq && !dk && !dv)) return;
  bfloat *dqn = dq ? as_nv(dq) : NULL, *dkn = dk ? as_nv(dk) : NULL, *dvn = dv ? as_nv(dv) : NULL;
  const bfloat *gn = as_nv(dout), *qn = as_nv(q), *kn = as_nv(k), *vn = as_nv(v), *on = as_nv(out);
  int fast = hd <= ATT_FAST_MAX_HD && !cuda_simple_mode() && is_aligned16(dout) && is_aligned16(q) &&
             is_aligned16(k) && is_aligned16(v) && is_aligned16(out);
  if (!fast) {
    if (dq) {
      attention_backward_dq_simple_kernel<<<dim3(T, nh, B), hd, 0, ctx->stream>>>(dqn, gn, qn, kn, vn, on, lse, T, nh,
                                                                                nkv, hd, window, softcap, scale);
      cuda_check_launch();
    }
    if (dk || dv) {
      attention_backward_dkdv_simple_kernel<<<dim3(T, nkv, B), hd, 0, ctx->stream>>>(
          dkn, dvn, gn, qn, kn, vn, on, lse, T, nh, nkv, hd, window, softcap, scale);
      cuda_check_launch();
    }
    return;
  }
  if (hd == 64) backward_fast<64>(ctx, dqn, dkn, dvn, gn, qn, kn, vn, on, lse, B, T, nh, nkv, window, softcap, scale);
  else if (hd == 128)
    backward_fast<128>(ctx, dqn, dkn, dvn, gn, qn, kn, vn, on, lse, B, T, nh, nkv, window, softcap, scale);
  else backward_fast<256>(ctx, dqn, dkn, dvn, gn, qn, kn, vn, on, lse, B, T, nh, nkv, window, softcap, scale);
}

// B query rows, row b's cache at k_cache + b * seq_stride (elements).
static void decode_launch(CudaContext *ctx, bf16 *out, const bf16 *q, const bf16 *k_cache, const bf16 *v_cache,
                          const int *lengths, size_t seq_stride, int B, int S, int nh, int nkv, int hd, int window,
                          float softcap, float scale) {
  dim3 grid(nh, B);
  bfloat *o = as_nv(out);
  const bfloat *qn = as_nv(q), *kn = as_nv(k_cache), *vn = as_nv(v_cache);
  if (hd == 64)
    attention_decode_kernel<64><<<grid, DECODE_WARPS * 32, 0, ctx->stream>>>(o, qn, kn, vn, lengths, seq_stride, S,
                                                                             nh, nkv, window, softcap, scale);
  else if (hd == 128)
    attention_decode_kernel<128><<<grid, DECODE_WARPS * 32, 0, ctx->stream>>>(o, qn, kn, vn, lengths, seq_stride, S,
                                                                              nh, nkv, window, softcap, scale);
  else if (hd == 256)
    attention_decode_kernel<256><<<grid, DECODE_WARPS * 32, 0, ctx->stream>>>(o, qn, kn, vn, lengths, seq_stride, S,
                                                                              nh, nkv, window, softcap, scale);
  else
    attention_decode_kernel<512><<<grid, DECODE_WARPS * 32, 0, ctx->stream>>>(o, qn, kn, vn, lengths, seq_stride, S,
                                                                              nh, nkv, window, softcap, scale);
  cuda_check_launch();
}

extern "C" void attention_decode_cuda(CudaContext *ctx, bf16 *out, const bf16 *q, const bf16 *k_cache,
                                      const bf16 *v_cache, const int *lengths, int B, int S, int nh, int nkv, int hd,
                                      int window, float softcap, float scale) {
  check_attention_shape("attention_decode_cuda", B, S, nh, nkv, hd);
  if (B == 0) return;
  decode_launch(ctx, out, q, k_cache, v_cache, lengths, (size_t)S * nkv * hd, B, S, nh, nkv, hd, window, softcap,
                scale);
}

extern "C" void attention_prefill_cuda(CudaContext *ctx, bf16 *out, const bf16 *q, const bf16 *k_cache,
                                       const bf16 *v_cache, const int *lengths, int N, int S, int nh, int nkv, int hd,
                                       int window, float softcap, float scale) {
  check_attention_shape("attention_prefill_cuda", N, S, nh, nkv, hd);
  if (N == 0) return;
  decode_launch(ctx, out, q, k_cache, v_cache, lengths, 0, N, S, nh, nkv, hd, window, softcap, scale);
}
