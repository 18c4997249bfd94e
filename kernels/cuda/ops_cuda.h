// kernels/cuda/ops_cuda.h: the CUDA backend of kernels/ops.h, callable from C.
// Defines bf16 (storage type), CudaContext (stream, cuBLASLt handle and
// workspace, per-shape matmul plan cache) and one *_cuda function per op of
// kernels/ops.h, with the same shapes and conventions (see ops.h), except:
// - Every pointer except ints passed by value is DEVICE memory.
// - Activations, their gradients and weights are bf16; every reduction
//   (matmul, norms, softmax, sums) accumulates in fp32. Parameter gradients
//   (dweight, dwte) are fp32 and ACCUMULATED, as on CPU, so micro-batches add
//   up without bf16 rounding. Statistics saved for backward (rstd, lse) are fp32.
// - Ops are asynchronous on ctx's stream; every CUDA call and every launch is
//   checked (cuda_check aborts with file:line and the CUDA message: a failed
//   launch is a programming or device error, not bad input).
// - Deterministic: no float atomics whose order can vary; the same inputs give
//   bitwise the same outputs on the same GPU and build.
// - Scratch: unlike the CPU ops (ops.h), the attention, RMSNorm and embedding
//   backwards and sum_squares_cuda take small stream-ordered scratch per call
//   (cudaMallocAsync from the device's pool, which the context keeps 256 MiB
//   of, so steady state asks the driver for nothing); the LM-head ops keep
//   theirs in the context. Running out of memory there aborts, like any
//   failed CUDA call inside an op.
// CPU reference and tolerance: each op is tested against kernels/cpu/ in fp32
// on the bf16-rounded inputs (tests/gpu/), bf16 tolerance ~1e-2 relative.
#ifndef FIMI_KERNELS_OPS_CUDA_H
#define FIMI_KERNELS_OPS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

// bf16 bit pattern (the upper 16 bits of an IEEE float32). In .cu files the
// same memory is read as __nv_bfloat16.
typedef uint16_t bf16;

typedef struct CudaContext CudaContext;

// ---- context ----
// Selects `device`, creates a stream, a cuBLASLt handle and a 32 MiB workspace.
int cuda_context_create(CudaContext **out, int device, FimiError *err);
void cuda_context_destroy(CudaContext *ctx);
// Waits for the stream; reports any asynchronous error as a FimiError.
int cuda_context_sync(CudaContext *ctx, FimiError *err);
// The cudaStream_t, as void * so that C callers need no CUDA headers.
void *cuda_context_stream(CudaContext *ctx);

// ---- memory helpers (host <-> device, with conversion) ----
int cuda_malloc(void **out, size_t bytes, FimiError *err);
void cuda_free(void *ptr);
// host fp32 (n) -> device bf16 (n), rounding to nearest even.
void cuda_upload_bf16(CudaContext *ctx, bf16 *dst, const float *src, size_t n);
// device bf16 (n) -> host fp32 (n). Synchronous.
void cuda_download_bf16(CudaContext *ctx, float *dst, const bf16 *src, size_t n);
void cuda_upload_f32(CudaContext *ctx, float *dst, const float *src, size_t n);
void cuda_download_f32(CudaContext *ctx, float *dst, const float *src, size_t n);
void cuda_upload_i32(CudaContext *ctx, int *dst, const int *src, size_t n);
// Fills n bytes with `byte` (tests poison outputs with 0xFF = NaN in bf16 and fp32).
void cuda_fill_bytes(CudaContext *ctx, void *dst, int byte, size_t n);
// Device-to-device copy of `rows` rows of row_bytes, row r from src + r *
// src_pitch to dst + r * dst_pitch (bytes), on ctx's stream.
void cuda_copy_rows(CudaContext *ctx, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes,
                    size_t rows);

// ---- casts and elementwise (kernels/cuda/elementwise.cu) ----
void cast_f32_to_bf16_cuda(CudaContext *ctx, bf16 *out, const float *inp, size_t n);
void cast_bf16_to_f32_cuda(CudaContext *ctx, float *out, const bf16 *inp, size_t n);
// out = a + b (n). In place allowed.
void residual_add_cuda(CudaContext *ctx, bf16 *out, const bf16 *a, const bf16 *b, size_t n);
// acc (n) double += x (n) fp32, one double add per element (a ZeRO-3 shard
// owner adds every rank's gradient piece in rank order: parallel/zero3_cuda.h).
void accumulate_f64_cuda(CudaContext *ctx, double *acc, const float *x, size_t n);
// out (n) fp32 = in (n) double, rounded to nearest even.
void cast_f64_to_f32_cuda(CudaContext *ctx, float *out, const double *in, size_t n);

// out (n) = inp (n) * scale, in fp32 then rounded to bf16. In place allowed.
void scale_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, float scale, size_t n);
// out (n) = inp (n) * scalar[0], scalar ONE bf16 in device memory (Gemma 4's
// layer_scalar, read on the device so no host synchronization). In place
// allowed (out == inp); out must not cover the scalar.
void scale_by_device_scalar_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const bf16 *scalar, size_t n);
// Gemma 4's per-layer inputs from their two parts, into layer-major order:
// out (L, N, P) with out[l][n][p] = (normed[n][l*P + p] + embedded[n][l*P + p])
// * scale, in fp32 then rounded once; normed, embedded (N, L*P). Not in place.
void per_layer_inputs_combine_cuda(CudaContext *ctx, bf16 *out, const bf16 *normed, const bf16 *embedded, int N,
                                   int L, int P, float scale);
// Its backward for either part: dflat (N, L*P) with dflat[n][l*P + p] =
// dple[l][n][p] * scale; dple (L, N, P). Not in place.
void per_layer_inputs_split_cuda(CudaContext *ctx, bf16 *dflat, const bf16 *dple, int N, int L, int P, float scale);

// ---- matmul through cuBLASLt (kernels/cuda/matmul.cu) ----
// out (N, OC) bf16 = inp (N, C) @ weight (OC, C)^T, fp32 compute. The
// descriptors and the algorithm chosen by the heuristic are cached per shape.
void matmul_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const bf16 *weight, int N, int C, int OC);
// dinp (N, C) bf16 overwritten (may be NULL), dweight (OC, C) fp32 accumulated
// (may be NULL), dout (N, OC).
void matmul_backward_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                          const bf16 *weight, int N, int C, int OC);

// ---- RMSNorm (1 + w), fp32 statistics (kernels/cuda/rmsnorm.cu) ----
// out (N, C), rstd (N) fp32 (or NULL), inp (N, C), weight (C).
void rmsnorm_forward_cuda(CudaContext *ctx, bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight, int N, int C,
                          float eps);
// dinp (N, C) overwritten, dweight (C) fp32 accumulated (deterministic: fixed
// per-block partial sums then a fixed-order reduction, no atomics).
void rmsnorm_backward_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                           const bf16 *weight, const float *rstd, int N, int C);

// Gemma 4 flavour (rmsnorm_forward_gain / rmsnorm_backward_gain in ops.h):
// out = x * rstd * w, the weight the gain itself, or with weight NULL no gain
// (Gemma 4's value norm). dweight may be NULL (it must be when weight is
// NULL); otherwise accumulated, deterministic as above.
void rmsnorm_forward_gain_cuda(CudaContext *ctx, bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight, int N,
                               int C, float eps);
void rmsnorm_backward_gain_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                                const bf16 *weight, const float *rstd, int N, int C);

// ---- RoPE (kernels/cuda/rope.cu), angles computed in fp32 as on CPU ----
// x (N, nheads, hd), positions (N). In place allowed.
void rope_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N, int nheads, int hd,
                       float theta, float position_scale);
void rope_backward_cuda(CudaContext *ctx, bf16 *dinp, const bf16 *dout, const int *positions, int N, int nheads, int hd,
                        float theta, float position_scale);

// Partial rotation (rope_forward_partial in ops.h, Gemma 4's "proportional"
// rope): pairs (i, i + hd/2) with i < rot_pairs rotate, the others pass
// through; rot_pairs = hd/2 is rope_forward_cuda (the same kernel: same
// bits). 0 <= rot_pairs <= hd/2, else the op exits. In place allowed.
void rope_forward_partial_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N, int nheads,
                               int hd, float theta, float position_scale, int rot_pairs);
void rope_backward_partial_cuda(CudaContext *ctx, bf16 *dinp, const bf16 *dout, const int *positions, int N,
                                int nheads, int hd, float theta, float position_scale, int rot_pairs);

// ---- GeGLU, gelu_tanh (kernels/cuda/geglu.cu) ----
void geglu_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *gate, const bf16 *up, size_t n);
void geglu_backward_cuda(CudaContext *ctx, bf16 *dgate, bf16 *dup, const bf16 *dout, const bf16 *gate, const bf16 *up,
                         size_t n);

// ---- embedding (kernels/cuda/embedding.cu) ----
// out (N, C) = wte[token] * scale (scale already rounded to bf16 by the caller);
// token < 0 gives a zero row.
void embedding_forward_cuda(CudaContext *ctx, bf16 *out, const int *tokens, const bf16 *wte, int N, int C, float scale);
// dwte (V, C) fp32 accumulated, deterministic (rows of the same token are added
// in token-row order, no atomics); padding_idx's row gets nothing (< 0: none).
// `V` is needed on GPU to bucket the rows by token.
void embedding_backward_cuda(CudaContext *ctx, float *dwte, const bf16 *dout, const int *tokens, int N, int C, int V,
                             float scale, int padding_idx);

// ---- attention, flash style (kernels/cuda/attention.cu) ----
// q (B, T, nh, hd), k and v (B, T, nkv, hd), out (B, T, nh, hd), lse (B, nh, T)
// fp32. hd in {64, 128, 256, 512} (512, Gemma 4's full-attention layers:
// the simple kernels, see attention.cu). Same masking, softcap and GQA as ops.h.
void attention_forward_cuda(CudaContext *ctx, bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B,
                            int T, int nh, int nkv, int hd, int window, float softcap, float scale);
// dq (B, T, nh, hd), dk and dv (B, T, nkv, hd) overwritten, deterministic.
void attention_backward_cuda(CudaContext *ctx, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                             const bf16 *k, const bf16 *v, const bf16 *out, const float *lse, int B, int T, int nh,
                             int nkv, int hd, int window, float softcap, float scale);
// Decode: q (B, nh, hd), k_cache and v_cache (B, S, nkv, hd), lengths (B) on
// device, out (B, nh, hd). As attention_decode in ops.h.
void attention_decode_cuda(CudaContext *ctx, bf16 *out, const bf16 *q, const bf16 *k_cache, const bf16 *v_cache,
                           const int *lengths, int B, int S, int nh, int nkv, int hd, int window, float softcap,
                           float scale);
// Prefill: N queries of ONE sequence (a prefill chunk at consecutive
// positions) against that sequence's cache: q (N, nh, hd), k_cache and
// v_cache (S, nkv, hd), lengths (N) on device, out (N, nh, hd); query i sees
// cache rows [0, lengths[i]) (causal within the chunk: lengths[i] = its
// position + 1). Each query exactly as attention_decode_cuda with B = 1 and
// lengths + i (the same kernel, one block per (head, query)); the CPU
// reference is N such calls of attention_decode.
void attention_prefill_cuda(CudaContext *ctx, bf16 *out, const bf16 *q, const bf16 *k_cache, const bf16 *v_cache,
                            const int *lengths, int N, int S, int nh, int nkv, int hd, int window, float softcap,
                            float scale);

// ---- attention through cuDNN, optional (kernels/cuda/attention_cudnn.cpp) ----
// The contract of attention_forward_cuda / attention_backward_cuda (shapes,
// causal and window masks, GQA, lse layout, deterministic backward), computed
// by cuDNN's fused SDPA graphs: a speed and correctness reference for the
// hand-written kernels (`cuda.attention = cudnn`). libcudnn.so.9 (or
// FIMI_CUDNN_LIBRARY) is dlopen'ed on first use; each shape's graph is built
// on first use and cached in ctx. Returns -1 with err set, never aborts, when
// cuDNN is missing, the build lacks it, the shape is unsupported, or softcap
// > 0 (cuDNN's SDPA cannot combine a softcap with masks).
int attention_forward_cudnn(CudaContext *ctx, bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                            int B, int T, int nh, int nkv, int hd, int window, float softcap, float scale,
                            FimiError *err);
int attention_backward_cudnn(CudaContext *ctx, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                             const bf16 *k, const bf16 *v, const bf16 *out, const float *lse, int B, int T, int nh,
                             int nkv, int hd, int window, float softcap, float scale, FimiError *err);
// Host-only check of one direction's graph (backward != 0: the backward):
// loads cuDNN and validates the graph fimi would build for sm_90 (H100/H200),
// without a device or context: a machine without a GPU can test the graph's
// description and cuDNN's shape rules, not the plan or the numbers.
int attention_cudnn_check(int backward, int B, int T, int nh, int nkv, int hd, int window, float softcap,
                          float scale, FimiError *err);

// ---- fused LM head log-probs (kernels/cuda/lm_head.cu) ----
// hidden (N, C), wte (V, C), targets (N); logprobs (N) fp32, lse (N) fp32.
// Rows are taken in chunks whose logits fit a bounded scratch owned by ctx, so
// (N, V) is never materialized. Targets < 0 or >= V: logprob 0, no gradient.
void lm_head_logprob_forward_cuda(CudaContext *ctx, float *logprobs, float *lse, const bf16 *hidden, const bf16 *wte,
                                  const int *targets, int N, int C, int V, float softcap);
// dhidden (N, C) bf16 overwritten, dwte (V, C) fp32 accumulated, dlogprobs (N) fp32.
void lm_head_logprob_backward_cuda(CudaContext *ctx, bf16 *dhidden, float *dwte, const float *dlogprobs,
                                   const bf16 *hidden, const bf16 *wte, const int *targets, const float *lse, int N,
                                   int C, int V, float softcap);
// Both in one pass when dlogprobs is known before the forward (SFT): one
// logits GEMM per chunk instead of two; logprobs, lse (N, required),
// dhidden and dwte bitwise those of the forward then the backward.
void lm_head_logprob_forward_backward_cuda(CudaContext *ctx, float *logprobs, float *lse, bf16 *dhidden, float *dwte,
                                           const float *dlogprobs, const bf16 *hidden, const bf16 *wte,
                                           const int *targets, int N, int C, int V, float softcap);
// Full logits for a few rows (decode/sampling): logits (N, V) fp32, softcap applied.
void lm_head_logits_cuda(CudaContext *ctx, float *logits, const bf16 *hidden, const bf16 *wte, int N, int C, int V,
                         float softcap);

// ---- sampling (kernels/cuda/sampling.cu) ----
// logits (N, V) fp32; out_tokens (N) int on device. temperature <= 0: argmax
// (lowest index on ties); else softmax(logits / temperature) restricted to the
// smallest set of top tokens whose mass reaches top_p (top_p >= 1: all), drawn
// with a counter-based RNG from (seed, row) so a result does not depend on the
// launch configuration.
void sample_tokens_cuda(CudaContext *ctx, int *out_tokens, const float *logits, int N, int V, float temperature,
                        float top_p, uint64_t seed);

// ---- optimizer (kernels/cuda/adamw.cu) ----
// AdamW as adamw_update in ops.h on fp32 param/m/v/grad (n), then writes the
// bf16 working copy of param with stochastic rounding: bf16_param (n) gets
// one of the two bf16 neighbours of the fp32 value, the upper with
// probability equal to the fraction of the gap (unbiased), random bits from a
// counter-based hash of (seed, index0 + i) for element i: index0 is the
// first element's index in the buffer the caller numbers its elements in, so
// a buffer updated piece by piece (ZeRO-3 shards) gets the same bits as
// updated whole. bf16_param may be NULL.
void adamw_update_cuda(CudaContext *ctx, float *param, float *m, float *v, const float *grad, bf16 *bf16_param,
                       size_t n, const AdamWStep *step, uint64_t seed, size_t index0);
// out (n) bf16 = in (n) fp32 with the stochastic rounding adamw_update_cuda
// applies under the same seed and index0 (element i: the same random bits),
// and no update: how a resume rebuilds the working copy an update wrote.
void round_bf16_stochastic_cuda(CudaContext *ctx, bf16 *out, const float *in, size_t n, uint64_t seed, size_t index0);
// out (1) double on device = sum of x[i]^2 (n), fixed-order blocks (deterministic).
void sum_squares_cuda(CudaContext *ctx, double *out, const float *x, size_t n);

#ifdef __cplusplus
}
#endif

#endif
