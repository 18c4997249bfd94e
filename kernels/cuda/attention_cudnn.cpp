// kernels/cuda/attention_cudnn.cpp: attention forward and backward through
// cuDNN's fused SDPA graphs, the optional reference backend of the
// hand-written kernels in attention.cu (`cuda.attention = cudnn`). Defines
// attention_forward_cudnn, attention_backward_cudnn, attention_cudnn_check
// and attention_cudnn_release (context.cuh).
//
// Plain host C++ (no kernels of its own), compiled by the C++ compiler: the
// frontend's headers took nvcc 3.5 minutes (one parse per GPU target).
// Written against NVIDIA's header-only cuDNN frontend (graph API), compiled in
// only when its headers were found (FIMI_HAVE_CUDNN_FRONTEND); otherwise every
// entry point returns an error saying so. libcudnn is dlopen'ed on first use,
// as cuBLASLt is: a fimi that never asks for cuDNN neither needs nor loads it.
//
// Layouts: fimi's q (B, T, nh, hd) is cuDNN's (B, H, S, D) with strides
// (T*nh*hd, hd, nh*hd, 1); k, v likewise with nkv heads (cuDNN does GQA itself
// when H_k divides H_q); lse (B, nh, T) is cuDNN's Stats (B, H, S, 1), the
// natural-log logsumexp of the scaled scores, as fimi's own kernels save it.
// Masking: causal (right bound 0, top-left diagonal) plus, for a window W < T,
// left bound W, which keeps keys j > i - W: DESIGN.md's sliding window.
// No logit softcap: cuDNN's SDPA refuses a score modifier combined with masks.
//
// A graph (heuristics, plan, compiled kernel) is built once per shape and
// direction and cached in the context; a build takes up to seconds, a run
// microseconds. Graph and run errors are returned as FimiError, never aborted:
// an unsupported shape is a configuration error, not a crash.
#include "kernels/cuda/context.cuh"

#ifdef FIMI_HAVE_CUDNN_FRONTEND

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cudnn_frontend.h>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace fe = cudnn_frontend;

// The frontend's dynamic loading resolves every cuDNN call in this handle.
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
}

namespace {

// Tensor ids in the variant packs.
enum AttentionUid : int64_t { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

struct AttentionKey {
  int backward, B, T, nh, nkv, hd, window;
  float scale;
  bool operator<(const AttentionKey &o) const {
    return std::tie(backward, B, T, nh, nkv, hd, window, scale) <
           std::tie(o.backward, o.B, o.T, o.nh, o.nkv, o.hd, o.window, o.scale);
  }
};

}  // namespace

// One built graph and the workspace it needs.
struct AttentionPlan {
  std::shared_ptr<fe::graph::Graph> graph;
  size_t workspace_bytes = 0;
};

struct CudnnAttention {
  cudnnHandle_t handle = nullptr;
  std::map<AttentionKey, AttentionPlan> plans;
  void *workspace = nullptr;  // shared by every graph, grown to the largest run so far
  size_t workspace_bytes = 0;
};

// Loads libcudnn once per process: FIMI_CUDNN_LIBRARY if set, else
// libcudnn.so.9 from the loader's search path.
static int cudnn_library_load(FimiError *err) {
  if (fe::cudnn_dlhandle) return 0;
  const char *path = getenv("FIMI_CUDNN_LIBRARY");
  const char *name = path && path[0] ? path : "libcudnn.so.9";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return fimi_fail(err, "cuDNN attention: cannot load %s (%s); set FIMI_CUDNN_LIBRARY to libcudnn.so.9's path", name,
                     dlerror());
  // The frontend finds the CUDA runtime by dlopen too, trying libcudart.so.12
  // before .13. Point it at the runtime fimi is linked with (already loaded,
  // so dlopen returns it): one runtime, one view of the device and stream.
  char cudart[32];
  snprintf(cudart, sizeof cudart, "libcudart.so.%d", CUDART_VERSION / 1000);
  setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart, 0);
  fe::cudnn_dlhandle = lib;  // stays loaded for the life of the process
  return 0;
}

static int frontend_fail(FimiError *err, const char *what, const AttentionKey &key, fe::error_t status) {
  return fimi_fail(err, "cuDNN attention %s (B %d T %d nh %d nkv %d hd %d window %d): %s", what, key.B, key.T, key.nh,
                   key.nkv, key.hd, key.window, status.get_message().c_str());
}

// The graph of one direction and shape, not yet validated. sm_version 0:
// cuDNN's rules for the current device; > 0: for that architecture (the nodes
// copy the graph's context when created, hence set here, first).
static std::shared_ptr<fe::graph::Graph> attention_graph(const AttentionKey &key, int sm_version) {
  int64_t B = key.B, T = key.T, nh = key.nh, nkv = key.nkv, hd = key.hd;
  auto graph = std::make_shared<fe::graph::Graph>();
  if (sm_version > 0) graph->set_sm_version(sm_version);
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  std::vector<int64_t> q_dim = {B, nh, T, hd}, q_stride = {T * nh * hd, hd, nh * hd, 1};
  std::vector<int64_t> kv_dim = {B, nkv, T, hd}, kv_stride = {T * nkv * hd, hd, nkv * hd, 1};
  std::vector<int64_t> stats_dim = {B, nh, T, 1}, stats_stride = {nh * T, T, 1, 1};
  auto tensor = [&](const char *name, int64_t uid, const std::vector<int64_t> &dim,
                    const std::vector<int64_t> &stride) {
    return graph->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
  };
  auto Q = tensor("Q", UID_Q, q_dim, q_stride);
  auto K = tensor("K", UID_K, kv_dim, kv_stride);
  auto V = tensor("V", UID_V, kv_dim, kv_stride);
  bool windowed = key.window > 0 && key.window < key.T;  // a window >= T masks nothing
  if (!key.backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention_forward")
                       .set_generate_stats(true)
                       .set_attn_scale(key.scale)
                       .set_causal_mask(true);
    if (windowed) options.set_diagonal_band_left_bound(key.window);
    auto [O, stats] = graph->sdpa(Q, K, V, options);
    O->set_output(true).set_uid(UID_O).set_dim(q_dim).set_stride(q_stride);
    stats->set_output(true).set_uid(UID_STATS).set_data_type(fe::DataType_t::FLOAT).set_dim(stats_dim).set_stride(
        stats_stride);
  } else {
    auto O = tensor("O", UID_O, q_dim, q_stride);
    auto dO = tensor("dO", UID_DO, q_dim, q_stride);
    auto stats = tensor("Stats", UID_STATS, stats_dim, stats_stride);
    stats->set_data_type(fe::DataType_t::FLOAT);
    // Deterministic: fimi's promise (ops_cuda.h) holds on this path too.
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("attention_backward")
                       .set_attn_scale(key.scale)
                       .set_causal_mask(true)
                       .set_deterministic_algorithm(true);
    if (windowed) options.set_diagonal_band_left_bound(key.window);
    auto [dQ, dK, dV] = graph->sdpa_backward(Q, K, V, O, dO, stats, options);
    dQ->set_output(true).set_uid(UID_DQ).set_dim(q_dim).set_stride(q_stride);
    dK->set_output(true).set_uid(UID_DK).set_dim(kv_dim).set_stride(kv_stride);
    dV->set_output(true).set_uid(UID_DV).set_dim(kv_dim).set_stride(kv_stride);
  }
  return graph;
}

static int check_arguments(const AttentionKey &key, float softcap, FimiError *err) {
  if (softcap > 0.0f)
    return fimi_fail(err,
                     "cuDNN attention has no logit softcap (its SDPA cannot combine a score modifier with masks); "
                     "use cuda.attention = fimi for softcapped models (Gemma 2)");
  if (key.B <= 0 || key.T <= 0 || key.nh <= 0 || key.nkv <= 0 || key.hd <= 0 || key.nh % key.nkv != 0)
    return fimi_fail(err, "cuDNN attention: bad shape B %d T %d nh %d nkv %d hd %d", key.B, key.T, key.nh, key.nkv,
                     key.hd);
  return 0;
}

// Validation, then the frontend's build steps: lowering, heuristics (mode A,
// cuDNN's fast heuristic, then its fallback list), support check, compiling
// the chosen plan.
static fe::error_t graph_build(fe::graph::Graph &graph, cudnnHandle_t handle) {
  if (auto status = graph.validate(); status.is_bad()) return status;
  if (auto status = graph.build_operation_graph(handle); status.is_bad()) return status;
  if (auto status = graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}); status.is_bad())
    return status;
  if (auto status = graph.check_support(handle); status.is_bad()) return status;
  return graph.build_plans(handle);
}

// The shared workspace grown to `bytes` (checked before every run: a graph
// built while a larger allocation failed must not run on a smaller buffer).
static int workspace_reserve(CudaContext *ctx, CudnnAttention *state, size_t bytes, FimiError *err) {
  if (bytes <= state->workspace_bytes) return 0;
  cuda_free(state->workspace);  // cudaFree waits for the device: no run still uses it
  state->workspace = nullptr;
  state->workspace_bytes = 0;
  void *memory = nullptr;
  if (cuda_malloc(&memory, bytes, err) != 0)
    return fimi_fail_wrap(err, "cuDNN attention workspace of %zu MiB on device %d", bytes >> 20, ctx->device);
  state->workspace = memory;
  state->workspace_bytes = bytes;
  return 0;
}

// The context's cuDNN handle, created on first use on the context's stream.
static int cudnn_state(CudaContext *ctx, CudnnAttention **out, FimiError *err) {
  if (!ctx->cudnn_attention) {
    std::unique_ptr<CudnnAttention> state(new CudnnAttention());
    cudnnStatus_t status = fe::detail::create_handle(&state->handle);
    if (status != CUDNN_STATUS_SUCCESS)
      return fimi_fail(err, "cuDNN attention: cudnnCreate on device %d failed (status %d)", ctx->device, (int)status);
    status = fe::detail::set_stream(state->handle, ctx->stream);
    if (status != CUDNN_STATUS_SUCCESS) {
      fe::detail::destroy_handle(state->handle);
      return fimi_fail(err, "cuDNN attention: cudnnSetStream failed (status %d)", (int)status);
    }
    ctx->cudnn_attention = state.release();
  }
  *out = ctx->cudnn_attention;
  return 0;
}

// The plan of `key`, built and cached on first use; the frontend throws on a
// symbol missing from the loaded cuDNN, hence the try.
static int attention_plan(CudaContext *ctx, const AttentionKey &key, AttentionPlan **out, FimiError *err) {
  *out = nullptr;
  if (cudnn_library_load(err) != 0) return -1;
  try {
    CudnnAttention *state = nullptr;
    if (cudnn_state(ctx, &state, err) != 0) return -1;
    auto found = state->plans.find(key);
    if (found == state->plans.end()) {
      AttentionPlan plan;
      plan.graph = attention_graph(key, 0);
      if (fe::error_t status = graph_build(*plan.graph, state->handle); status.is_bad())
        return frontend_fail(err, key.backward ? "backward graph" : "forward graph", key, status);
      int64_t bytes = 0;
      if (fe::error_t status = plan.graph->get_workspace_size(bytes); status.is_bad())
        return frontend_fail(err, "workspace size", key, status);
      plan.workspace_bytes = (size_t)bytes;
      found = state->plans.emplace(key, plan).first;
    }
    if (workspace_reserve(ctx, state, found->second.workspace_bytes, err) != 0) return -1;
    *out = &found->second;
    return 0;
  } catch (const std::exception &e) {
    return fimi_fail(err, "cuDNN attention: %s", e.what());
  }
}

static int attention_plan_run(CudaContext *ctx, AttentionPlan *plan, std::unordered_map<int64_t, void *> &pack,
                              const AttentionKey &key, FimiError *err) {
  try {
    if (fe::error_t status = plan->graph->execute(ctx->cudnn_attention->handle, pack, ctx->cudnn_attention->workspace);
        status.is_bad())
      return frontend_fail(err, "run", key, status);
  } catch (const std::exception &e) {
    return fimi_fail(err, "cuDNN attention: %s", e.what());
  }
  return 0;
}

// The cache key: a window that masks nothing (>= T) is the plain causal graph.
static AttentionKey attention_key(int backward, int B, int T, int nh, int nkv, int hd, int window, float scale) {
  return AttentionKey{backward, B, T, nh, nkv, hd, window > 0 && window < T ? window : 0, scale};
}

extern "C" int attention_forward_cudnn(CudaContext *ctx, bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                       const bf16 *v, int B, int T, int nh, int nkv, int hd, int window, float softcap,
                                       float scale, FimiError *err) {
  AttentionKey key = attention_key(0, B, T, nh, nkv, hd, window, scale);
  AttentionPlan *plan = nullptr;
  if (check_arguments(key, softcap, err) != 0 || attention_plan(ctx, key, &plan, err) != 0) return -1;
  std::unordered_map<int64_t, void *> pack = {
      {UID_Q, (void *)q}, {UID_K, (void *)k}, {UID_V, (void *)v}, {UID_O, out}, {UID_STATS, lse}};
  return attention_plan_run(ctx, plan, pack, key, err);
}

extern "C" int attention_backward_cudnn(CudaContext *ctx, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout,
                                        const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *out,
                                        const float *lse, int B, int T, int nh, int nkv, int hd, int window,
                                        float softcap, float scale, FimiError *err) {
  AttentionKey key = attention_key(1, B, T, nh, nkv, hd, window, scale);
  AttentionPlan *plan = nullptr;
  if (check_arguments(key, softcap, err) != 0 || attention_plan(ctx, key, &plan, err) != 0) return -1;
  std::unordered_map<int64_t, void *> pack = {{UID_Q, (void *)q},      {UID_K, (void *)k},       {UID_V, (void *)v},
                                              {UID_O, (void *)out},    {UID_DO, (void *)dout},   {UID_STATS, (void *)lse},
                                              {UID_DQ, dq},            {UID_DK, dk},             {UID_DV, dv}};
  return attention_plan_run(ctx, plan, pack, key, err);
}

extern "C" int attention_cudnn_check(int backward, int B, int T, int nh, int nkv, int hd, int window, float softcap,
                                     float scale, FimiError *err) {
  AttentionKey key = attention_key(backward, B, T, nh, nkv, hd, window, scale);
  if (check_arguments(key, softcap, err) != 0 || cudnn_library_load(err) != 0) return -1;
  try {
    auto graph = attention_graph(key, 90);  // the build's target (sm_90a), instead of asking a device
    if (fe::error_t status = graph->validate(); status.is_bad())
      return frontend_fail(err, backward ? "backward graph" : "forward graph", key, status);
  } catch (const std::exception &e) {
    return fimi_fail(err, "cuDNN attention: %s", e.what());
  }
  return 0;
}

void attention_cudnn_release(CudaContext *ctx) {
  CudnnAttention *state = ctx->cudnn_attention;
  if (!state) return;
  try {  // destructors reach cuDNN through the frontend, which may throw
    state->plans.clear();
    if (state->handle) fe::detail::destroy_handle(state->handle);
  } catch (const std::exception &e) {
    fprintf(stderr, "fimi: releasing cuDNN attention: %s\n", e.what());
  }
  cuda_free(state->workspace);
  delete state;
  ctx->cudnn_attention = nullptr;
}

#else  // built without the cuDNN frontend headers

static int cudnn_not_built(FimiError *err) {
  return fimi_fail(err,
                   "cuDNN attention: this fimi was built without the cuDNN frontend headers "
                   "(launch/install-deps.sh fetches them when nvcc is present; then rebuild)");
}

extern "C" int attention_forward_cudnn(CudaContext *, bf16 *, float *, const bf16 *, const bf16 *, const bf16 *, int,
                                       int, int, int, int, int, float, float, FimiError *err) {
  return cudnn_not_built(err);
}

extern "C" int attention_backward_cudnn(CudaContext *, bf16 *, bf16 *, bf16 *, const bf16 *, const bf16 *,
                                        const bf16 *, const bf16 *, const bf16 *, const float *, int, int, int, int,
                                        int, int, float, float, FimiError *err) {
  return cudnn_not_built(err);
}

extern "C" int attention_cudnn_check(int, int, int, int, int, int, int, float, float, FimiError *err) {
  return cudnn_not_built(err);
}

void attention_cudnn_release(CudaContext *) {}

#endif
