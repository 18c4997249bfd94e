// kernels/cuda/sampling.cu: token sampling on the GPU (kernels/cuda/ops_cuda.h).
// Defines sample_tokens_cuda: greedy (temperature <= 0) or temperature +
// top-p (nucleus) sampling of one token per row of fp32 logits.
//
// One block of SAMPLE_THREADS threads per row; every decision is taken from
// block-wide reductions that all threads see with the same bits, so control
// flow stays uniform across the block (every __syncthreads is reached by all).
//   1. argmax over the non-NaN logits, lowest index on ties (all NaN: 0).
//      temperature <= 0, top_p <= 0, or an infinite max: the argmax.
//   2. weights w_i = exp((l_i - max) / T) in fp32 (0 for NaN), so the argmax
//      has w = 1 and total = sum w_i (double) >= 1.
//   3. top_p < 1: the nucleus is the shortest prefix of the tokens sorted by
//      w descending, lower index first on ties, whose mass reaches top_p *
//      total (as model/decode.c's sample_token). Without sorting: its last
//      token's weight tau is the largest float such that mass(w >= tau) >=
//      need, found by bisection on the float's bits (w >= 0, so bits order as
//      values), one pass over the row and one block sum per step (~30 steps).
//      Tokens with w > tau are kept; of those with w == tau (ties at the
//      boundary) the c lowest indices are kept, c the fewest whose weight
//      brings the mass to need. top_p >= 1: every token with w > 0.
//   4. u = uniform in [0, 1) from hash_u64(seed, row) (53 bits), target =
//      u * (mass of the kept tokens), and the kept tokens are walked in
//      index order: the first whose running mass exceeds target is drawn.
//      Each thread owns a contiguous range of indices; an exclusive block
//      scan gives the mass before each range; the drawn token is the lowest
//      index any thread finds (rounding fallback: the last kept token).
// The result depends on (logits, temperature, top_p, seed, row) only, not on
// the launch or on the other rows. The sorted-order walk of the CPU sampler
// and this index-order walk draw from the same distribution but map u to
// tokens differently (and the CPU draws u from its own Rng), so the two
// backends do not give the same token for a given seed.
#include <limits.h>
#include <math.h>

#include "kernels/cuda/common.cuh"

// Threads per row block (a multiple of 32). V = 262144 gives 512 logits per thread.
#define SAMPLE_THREADS 512

// ---- block-wide reductions and scans (blockDim.x a multiple of 32, <= 1024) ----
// Each starts with a barrier, so a call may reuse the shared array of the
// previous one. All threads receive the result.

template <typename T>
__device__ __forceinline__ T shfl_xor(T x, int offset) {
  return __shfl_xor_sync(0xffffffffu, x, offset);
}

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MinOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a < b ? a : b; }
};
struct MaxOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Butterfly within warps then across warp results. IEEE + is commutative, so
// both lanes of each exchange compute the same value and all threads end
// with the same bits.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T x, T identity, Op op, T *shared /* 32 */) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset >>= 1) x = op(x, shfl_xor(x, offset));
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : identity;
  for (int offset = 16; offset > 0; offset >>= 1) x = op(x, shfl_xor(x, offset));
  return x;
}

// Exclusive prefix sum over the threads in threadIdx order; *total gets the
// sum over the block. shared: 32 elements.
template <typename T>
__device__ __forceinline__ T block_exclusive_scan(T x, T *shared, T *total) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  T inclusive = x;
  for (int offset = 1; offset < 32; offset <<= 1) {
    T y = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += y;
  }
  T exclusive = __shfl_up_sync(0xffffffffu, inclusive, 1);
  if (lane == 0) exclusive = (T)0;
  __syncthreads();
  if (lane == 31) shared[warp] = inclusive;  // the warp's total
  __syncthreads();
  if (warp == 0) {  // inclusive scan of the warp totals, in place
    T s = lane < warps ? shared[lane] : (T)0;
    for (int offset = 1; offset < 32; offset <<= 1) {
      T y = __shfl_up_sync(0xffffffffu, s, offset);
      if (lane >= offset) s += y;
    }
    shared[lane] = s;
  }
  __syncthreads();
  *total = shared[warps - 1];
  return warp > 0 ? shared[warp - 1] + exclusive : exclusive;
}

// ---- per-token weights ----

// exp((l - max) / T) in fp32; 0 for NaN (and for -inf logits).
__device__ __forceinline__ float token_weight(float logit, float max, float temperature) {
  if (logit != logit) return 0.0f;
  return expf((logit - max) / temperature);
}

// Whether a token of weight w is in the kept set: w > tau, or w == tau and
// it is among the first `ties_kept` tokens of weight tau in index order
// (*tie_rank counts those seen so far and is advanced here).
__device__ __forceinline__ bool is_kept(float w, float tau, int ties_kept, int *tie_rank) {
  if (w > tau) return true;
  if (w == tau && w > 0.0f) return (*tie_rank)++ < ties_kept;
  return false;
}

// Sum of the weights >= threshold over the row (strided: coalesced loads).
__device__ double mass_at_least(const float *z, int V, float max, float temperature, float threshold,
                                double *shared) {
  double local = 0.0;
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    float w = token_weight(z[v], max, temperature);
    if (w >= threshold) local += (double)w;
  }
  return block_reduce(local, 0.0, SumOp(), shared);
}

// out_tokens (N), logits (N, V). Grid N, block SAMPLE_THREADS.
__global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_tokens_kernel(int *out_tokens, const float *logits, int V, float temperature, float top_p,
                         uint64_t seed) {
  __shared__ double shared_d[32];
  __shared__ float shared_f[32];
  __shared__ int shared_i[32];
  int row = blockIdx.x;
  const float *z = logits + (size_t)row * V;  // (V)

  // 1. argmax, lowest index on ties, NaN skipped. Each thread sees its
  //    indices in increasing order, so a strict > keeps its lowest; across
  //    threads the max value is reduced first, then the lowest index holding it.
  float best_val = -INFINITY;
  int best_idx = INT_MAX;
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    float x = z[v];
    if (x != x) continue;
    if (best_idx == INT_MAX || x > best_val) {
      best_val = x;
      best_idx = v;
    }
  }
  float max = block_reduce(best_val, -INFINITY, MaxOp(), shared_f);
  int argmax = block_reduce(best_idx != INT_MAX && best_val == max ? best_idx : INT_MAX, INT_MAX, MinOp(), shared_i);
  int greedy = argmax == INT_MAX ? 0 : argmax;  // all NaN: token 0, as the CPU sampler
  if (!(temperature > 0.0f) || argmax == INT_MAX || isinf(max) || !(top_p > 0.0f)) {
    if (threadIdx.x == 0) out_tokens[row] = greedy;
    return;  // uniform: every thread holds the same max and argmax
  }

  // 3. the nucleus boundary tau and how many ties at tau are kept
  float tau = 0.0f;
  int ties_kept = 0;
  if (top_p < 1.0f) {
    double total = mass_at_least(z, V, max, temperature, 0.0f, shared_d);
    double need = (double)top_p * total;
    float w_max = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) w_max = fmaxf(w_max, token_weight(z[v], max, temperature));
    w_max = block_reduce(w_max, 0.0f, MaxOp(), shared_f);
    // Invariant: mass(w >= float(lo)) >= need (lo = 0: the total, and need <=
    // total), mass(w >= float(hi)) < need (above every weight: 0 < need).
    // Sums of non-negative terms in a fixed order are monotone in each term,
    // so mass(w >= x) is non-increasing in x and lo ends on a token's weight.
    uint32_t lo = 0u, hi = __float_as_uint(w_max) + 1u;
    while (hi - lo > 1u) {
      uint32_t mid = lo + (hi - lo) / 2u;
      double mass = mass_at_least(z, V, max, temperature, __uint_as_float(mid), shared_d);
      if (mass >= need)
        lo = mid;
      else
        hi = mid;
    }
    tau = __uint_as_float(lo);
    // mass strictly above tau (< need), and the ties at tau
    double above = 0.0;
    int ties = 0;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
      float w = token_weight(z[v], max, temperature);
      if (w > tau) above += (double)w;
      if (w == tau) ties++;
    }
    above = block_reduce(above, 0.0, SumOp(), shared_d);
    ties = block_reduce(ties, 0, SumOp(), shared_i);
    // the fewest c >= 1 with above + c * tau >= need, at most the ties there are
    double c = tau > 0.0f ? ceil((need - above) / (double)tau) : 1.0;
    if (!(c >= 1.0)) c = 1.0;
    ties_kept = c < (double)ties ? (int)c : ties;
  }

  // 4. the draw: kept tokens in index order, contiguous ranges per thread
  int per_thread = (V + (int)blockDim.x - 1) / (int)blockDim.x;
  int begin = (int)threadIdx.x * per_thread;
  int end = begin + per_thread < V ? begin + per_thread : V;  // begin >= V: empty range
  int local_ties = 0;
  if (ties_kept > 0)
    for (int v = begin; v < end; v++)
      if (token_weight(z[v], max, temperature) == tau) local_ties++;
  int total_ties;
  int tie_rank0 = block_exclusive_scan(local_ties, shared_i, &total_ties);
  double local_mass = 0.0;
  int rank = tie_rank0;
  for (int v = begin; v < end; v++) {
    float w = token_weight(z[v], max, temperature);
    if (is_kept(w, tau, ties_kept, &rank)) local_mass += (double)w;
  }
  double kept_mass;
  double mass_before = block_exclusive_scan(local_mass, shared_d, &kept_mass);
  if (!(kept_mass > 0.0)) {  // cannot happen (the argmax has weight 1), but never draw from nothing
    if (threadIdx.x == 0) out_tokens[row] = greedy;
    return;
  }
  double u = (double)(hash_u64(seed, (uint64_t)row) >> 11) * 0x1.0p-53;  // [0, 1)
  double target = u * kept_mass;
  int found = INT_MAX, last_kept = -1;
  double running = 0.0;
  rank = tie_rank0;
  for (int v = begin; v < end; v++) {
    float w = token_weight(z[v], max, temperature);
    if (!is_kept(w, tau, ties_kept, &rank)) continue;
    running += (double)w;
    last_kept = v;
    if (found == INT_MAX && mass_before + running > target) found = v;
  }
  int chosen = block_reduce(found, INT_MAX, MinOp(), shared_i);
  if (chosen == INT_MAX) chosen = block_reduce(last_kept, -1, MaxOp(), shared_i);  // u * mass rounded to the end
  if (threadIdx.x == 0) out_tokens[row] = chosen >= 0 ? chosen : greedy;
}

// out_tokens (N) int on device, logits (N, V) fp32 on device
extern "C" void sample_tokens_cuda(CudaContext *ctx, int *out_tokens, const float *logits, int N, int V,
                                   float temperature, float top_p, uint64_t seed) {
  if (N <= 0) return;
  if (V <= 0) {  // nothing to draw from: token 0, as the argmax of an empty row would be
    cuda_check(cudaMemsetAsync(out_tokens, 0, sizeof(int) * (size_t)N, ctx->stream));
    return;
  }
  sample_tokens_kernel<<<N, SAMPLE_THREADS, 0, ctx->stream>>>(out_tokens, logits, V, temperature, top_p, seed);
  cuda_check_launch();
}
