// kernels/ops.h: every op fimi's model uses, declared once (DESIGN.md
// principle 2). kernels/cpu/ implements them in float32 (the reference and the
// CPU backend); kernels/cuda/ will implement the same ops with bf16 storage and
// fp32 accumulation behind a run-time backend switch.
//
// Conventions shared by every op:
// - Row-major. N = number of token rows (B*T). Shapes are in the comments.
// - Backward ops OVERWRITE gradients of activations (dinp, dq, ...) and
//   ACCUMULATE (+=) into gradients of parameters (dweight, dwte), so that
//   micro-batches accumulate and a caller zeroes parameter grads once a step.
// - A gradient pointer may be NULL when the caller does not need it.
// - Outputs may alias inputs only where an op says "in place allowed".
// - Ops never allocate per call, except the LM-head ops, which take one
//   scratch block (at most 28 MiB) per call; ops return void, so they abort
//   with a message if that allocation fails.
// - A negative token id is padding: embedding gives a zero row and no
//   gradient. Callers validate ids < V (the embedding ops do not take V).
// - lse (attention) and rstd (rmsnorm) may be NULL when backward is not needed.
#ifndef FIMI_KERNELS_OPS_H
#define FIMI_KERNELS_OPS_H

#include <stddef.h>

// C++ callers (kernels/cuda/*.cu) see C linkage.
#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DEVICE_CPU = 0, DEVICE_CUDA = 1 } Device;

// ---- matmul: out = inp @ weight^T (no bias: Gemma has none) ----
// out (N, OC), inp (N, C), weight (OC, C)
void matmul_forward(float *out, const float *inp, const float *weight, int N, int C, int OC);
// dinp (N, C) overwritten, dweight (OC, C) accumulated, dout (N, OC)
void matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight, int N, int C,
                     int OC);

// ---- RMSNorm, Gemma flavour: out = x * rsqrt(mean(x^2) + eps) * (1 + w) ----
// out (N, C), rstd (N) saved for backward, inp (N, C), weight (C).
// Also used per head for q_norm/k_norm with N = rows*heads, C = head_dim.
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps);
// dinp (N, C) overwritten, dweight (C) accumulated
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C);

// Gemma 4 flavour: out = x * rsqrt(mean(x^2) + eps) * w (the weight is the
// gain itself; HF initializes it to 1), or with weight NULL no gain at all
// (Gemma 4's value norm). Same shapes and conventions as above; the backward
// leaves dweight alone when weight is NULL.
void rmsnorm_forward_gain(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps);
void rmsnorm_backward_gain(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                           const float *rstd, int N, int C);

// ---- RoPE, rotate_half convention: pairs (i, i + hd/2) ----
// x (N, nheads, hd), positions (N). angle = (pos / position_scale) * theta^(-2i/hd),
// cos/sin in fp32 (position_scale is HF's "linear" rope_scaling factor; 1 = none).
// Computed in HF's float32 order (inv_freq / position_scale, then * pos): at
// positions ~40k the order changes the angle by ~1e-3 rad. hd must be even.
// In place allowed (out == inp).
void rope_forward(float *out, const float *inp, const int *positions, int N, int nheads, int hd, float theta,
                  float position_scale);
// The inverse rotation applied to dout. In place allowed (dinp == dout).
void rope_backward(float *dinp, const float *dout, const int *positions, int N, int nheads, int hd, float theta,
                   float position_scale);

// Partial rotation (HF's "proportional" rope, Gemma 4 full-attention layers):
// pairs (i, i + hd/2) with i < rot_pairs rotate by pos * theta^(-2i/hd) (the
// exponent over the whole hd), the others pass through unchanged. rot_pairs
// = hd/2 is rope_forward / rope_backward.
void rope_forward_partial(float *out, const float *inp, const int *positions, int N, int nheads, int hd, float theta,
                          float position_scale, int rot_pairs);
void rope_backward_partial(float *dinp, const float *dout, const int *positions, int N, int nheads, int hd,
                           float theta, float position_scale, int rot_pairs);

// ---- attention (causal, optional sliding window, optional softcap, GQA) ----
// q (B, T, nh, hd), k and v (B, T, nkv, hd), out (B, T, nh, hd), lse (B, nh, T).
// score = q.k * scale; if softcap > 0: score = softcap * tanh(score / softcap);
// query i sees keys j with j <= i and, if window > 0, j > i - window.
// kv head of query head h = h / (nh / nkv). Memory is linear in T: keys are
// visited in tiles with a running max and sum (online softmax); lse is the
// log-sum-exp of each query row's scores, saved for backward.
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T, int nh,
                       int nkv, int hd, int window, float softcap, float scale);
// dq (B, T, nh, hd), dk and dv (B, T, nkv, hd) overwritten; dout, out like out.
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                        const float *v, const float *out, const float *lse, int B, int T, int nh, int nkv, int hd,
                        int window, float softcap, float scale);
// Decode: one new query per sequence against its KV cache.
// q (B, nh, hd), k_cache and v_cache (B, S, nkv, hd), lengths (B): number of
// valid cache rows for each sequence, the new token's own k/v included (the
// query's position is lengths[b] - 1). out (B, nh, hd).
void attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache, const int *lengths,
                      int B, int S, int nh, int nkv, int hd, int window, float softcap, float scale);
// Decode rows or a prefill chunk against a cache whose keys are kept
// transposed per tile of ATTN_CACHE_TILE positions: k_tiles (B, ceil(S/TILE),
// nkv, hd, TILE), element [b][p / TILE][h][d][p % TILE] = key d of head h at
// position p; v_cache (B, S, nkv, hd). Query i (q, out (N, nh, hd)) belongs
// to sequence seqs[i] (N) and sees its rows [0, lengths[i]) (N), its own k/v
// already written; window and softcap as above. Each query gives the bits
// attention_decode gives it on the row-layout cache; consecutive queries of
// one sequence share each key tile. A length outside [1, S]: zero row.
#define ATTN_CACHE_TILE 64
void attention_cached(float *out, const float *q, const float *k_tiles, const float *v_cache, const int *seqs,
                      const int *lengths, int N, int S, int nh, int nkv, int hd, int window, float softcap,
                      float scale);

// ---- GeGLU: out = gelu_tanh(gate) * up ----
// out, gate, up (n) elementwise (n = N * intermediate)
void geglu_forward(float *out, const float *gate, const float *up, size_t n);
// dgate, dup (n) overwritten
void geglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n);

// ---- embedding: out = wte[token] * scale ----
// out (N, C), tokens (N) in [0, V), wte (V, C). `scale` is sqrt(C) rounded to
// the working dtype by the caller (fp32 on CPU, bf16 on CUDA), as HF does.
void embedding_forward(float *out, const int *tokens, const float *wte, int N, int C, float scale);
// dwte (V, C) accumulated, deterministically (fixed order per token row).
// The row of padding_idx gets no gradient (nn.Embedding(padding_idx) in HF
// Gemma: its pad row stays as initialized); padding_idx < 0: none.
void embedding_backward(float *dwte, const float *dout, const int *tokens, int N, int C, float scale,
                        int padding_idx);

// ---- fused LM head + optional final softcap + log-softmax + gather ----
// hidden (N, C) (after the final norm), wte (V, C) tied head, targets (N).
// logprobs (N) = log softmax(cap(hidden @ wte^T))[target]; lse (N) saved (or NULL).
// Rows with target < 0 (or >= V) get logprob 0 and are skipped. Never materializes
// (N, V): token rows are taken in blocks whose full logits fit a bounded
// scratch (28 MiB; 28 rows at V = 262k).
void lm_head_logprob_forward(float *logprobs, float *lse, const float *hidden, const float *wte, const int *targets,
                             int N, int C, int V, float softcap);
// dhidden (N, C) overwritten, dwte (V, C) accumulated, dlogprobs (N).
void lm_head_logprob_backward(float *dhidden, float *dwte, const float *dlogprobs, const float *hidden,
                              const float *wte, const int *targets, const float *lse, int N, int C, int V,
                              float softcap);
// Forward and backward in one pass, for when dlogprobs is known before the
// forward (SFT and other per-token objectives): each block's logits are
// computed once and turned into dlogits in place, where forward + backward
// would compute them twice (the backward recomputes from lse). Same results
// as lm_head_logprob_forward then lm_head_logprob_backward (the same blocks
// and calls: bitwise on one build), same conventions: logprobs (N) and lse
// (N) (or NULL) written as the forward does, dhidden (N, C) overwritten, dwte
// (V, C) accumulated, either may be NULL; dlogprobs (N); rows without a
// target get logprob 0 and no gradient. Deterministic: blocks in row order,
// no per-thread partial sums; bitwise at a given thread count (OpenBLAS tiles
// by thread count: 1 vs 2 threads differ by fp32 rounding, ~1e-7).
void lm_head_logprob_forward_backward(float *logprobs, float *lse, float *dhidden, float *dwte, const float *dlogprobs,
                                      const float *hidden, const float *wte, const int *targets, int N, int C, int V,
                                      float softcap);
// Full logits for a few rows (decode/sampling): logits (N, V), softcap applied.
void lm_head_logits(float *logits, const float *hidden, const float *wte, int N, int C, int V, float softcap);

// ---- elementwise ----
// out = a + b (n). In place allowed (out == a or out == b).
void residual_add(float *out, const float *a, const float *b, size_t n);

// ==== optimizer ops (AdamW update, gradient sum of squares) ====
// These run on a rank's shard of a flat fp32 buffer: the fp32 master weights,
// the fp32 moments and the fp32 gradient shard, all n elements. The CPU
// version is the fp32 reference; the CUDA version (another issue) writes the
// bf16 working weights with stochastic rounding as well.

// One AdamW step's scalars. Python-side arithmetic of torch.optim.AdamW is in
// double (bias corrections, step size); the kernel casts to fp32 where torch
// casts a Python scalar to the tensor's dtype (docs/optimizer.md).
typedef struct AdamWStep {
  double lr;            // learning rate of this step (after the schedule)
  double beta1, beta2;  // moment decay rates, in [0, 1)
  double eps;           // added to sqrt(v_hat)
  double weight_decay;  // decoupled: param *= 1 - lr * weight_decay (0 = none)
  long step;            // t >= 1: steps taken including this one (bias corrections)
  float grad_scale;     // grad is multiplied by it first (clipping coefficient; 1 = none)
} AdamWStep;

// torch.optim.AdamW (single-tensor path, amsgrad off, maximize off), per element:
//   g = grad * grad_scale
//   param *= 1 - lr * wd                    (skipped when wd == 0)
//   m = lerp(m, g, 1 - beta1)
//   v = v * beta2 + (1 - beta2) * g * g
//   param += -(lr / (1 - beta1^t)) * (m / (sqrt(v) / sqrt(1 - beta2^t) + eps))
// param, m, v (n) updated in place; grad (n) read only. Elementwise, so the
// result does not depend on the thread count.
void adamw_update(float *param, float *m, float *v, const float *grad, size_t n, const AdamWStep *step);

// out[0] = sum of x[i]^2 (n), accumulated in double: each square is exact in
// double, so the only error is the summation's, at most (n/2048 + 265) * 2^-53
// relative (fixed blocks of 8 interleaved sums). The block layout depends on n
// only: the result is bitwise the same at any thread count. Inf or NaN in x
// gives a non-finite sum (the caller skips the step).
void sum_squares(double *out, const float *x, size_t n);

#ifdef __cplusplus
}
#endif

#endif
