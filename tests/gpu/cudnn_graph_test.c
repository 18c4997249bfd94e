// tests/gpu/cudnn_graph_test.c: the cuDNN attention graphs (kernels/cuda/
// attention_cudnn.cpp) checked on the host, without a GPU: for each shape fimi
// runs (Gemma 3 heads, GQA, causal and sliding layers, T from 1 to 4096), the
// forward and backward graphs fimi describes must pass cuDNN's own validation
// for sm_90 (H100/H200); the shapes cuDNN cannot run must be refused with a
// message naming why. What this cannot see: plans, kernels and numbers (those
// are tests/gpu/test_gpu_attention_cudnn.c, on a device).
// Exit 77 (skipped) only when libcudnn.so.9 cannot be loaded on this machine.
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/ops_cuda.h"

static int failures = 0;

typedef struct GraphCase {
  int B, T, nh, nkv, hd, window;
  float softcap;
  const char *refusal[2];  // forward, backward: NULL must validate; else a substring of the error
} GraphCase;

static void check_case(const GraphCase *c) {
  float scale = 1.0f / 16.0f;
  for (int backward = 0; backward <= 1; backward++) {
    FimiError err = {0};
    int rc = attention_cudnn_check(backward, c->B, c->T, c->nh, c->nkv, c->hd, c->window, c->softcap, scale, &err);
    const char *refusal = c->refusal[backward];
    int ok = refusal ? rc != 0 && strstr(err.message, refusal) != NULL : rc == 0;
    printf("%s %s B%d T%d nh%d nkv%d hd%d w%d cap%g: %s%s\n", ok ? "ok  " : "FAIL", backward ? "bwd" : "fwd", c->B,
           c->T, c->nh, c->nkv, c->hd, c->window, c->softcap, rc == 0 ? "valid" : "refused: ", rc == 0 ? "" : err.message);
    failures += !ok;
  }
}

int main(void) {
  FimiError probe = {0};
  if (attention_cudnn_check(0, 1, 16, 1, 1, 64, 0, 0.0f, 0.125f, &probe) != 0 &&
      strstr(probe.message, "cannot load") != NULL) {
    printf("cudnn_graph_test: %s, skipped\n", probe.message);
    return 77;
  }
  const GraphCase cases[] = {
      // Gemma 3 1b (4 heads, 1 kv head, hd 256) and 4b (8/4, hd 256): global and sliding layers
      {1, 4096, 4, 1, 256, 0, 0.0f, {NULL, NULL}},
      {1, 4096, 4, 1, 256, 512, 0.0f, {NULL, NULL}},
      {1, 4096, 8, 4, 256, 1024, 0.0f, {NULL, NULL}},
      {2, 333, 8, 4, 256, 1024, 0.0f, {NULL, NULL}},  // window >= T: plain causal
      // the GPU test's shapes: hd 64 and 128, odd T, MHA, a window of 1
      {2, 17, 4, 4, 64, 5, 0.0f, {NULL, NULL}},
      {2, 333, 8, 4, 128, 32, 0.0f, {NULL, NULL}},
      {2, 1, 8, 4, 128, 0, 0.0f, {NULL, "s_q = s_kv = 1"}},  // cuDNN has no backward for T = 1
      {1, 64, 2, 1, 64, 1, 0.0f, {NULL, NULL}},
      // refused: softcap (Gemma 2), a head dim cuDNN has no kernel for, heads not a multiple of kv heads
      {1, 128, 8, 4, 256, 0, 50.0f, {"no logit softcap", "no logit softcap"}},
      {1, 128, 8, 4, 36, 0, 0.0f, {"hidden_dim", "hidden_dim"}},
      {1, 128, 8, 3, 64, 0, 0.0f, {"bad shape", "bad shape"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
  printf("cudnn_graph_test: %s (%d failures)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
