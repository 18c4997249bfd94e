// cmd/device_policy.h: a model's rollout policy (rl/rollout.h) on the device
// a command was asked for: the CPU policy, or on GPU 0 the weights uploaded
// in bf16 and the GPU policy (cmd/rollout_cuda.h). Used by `fimi eval` and
// `fimi serve`. Defines DevicePolicy, device_policy_create / _free.
#ifndef FIMI_CMD_DEVICE_POLICY_H
#define FIMI_CMD_DEVICE_POLICY_H

#include "cmd/rollout_cuda.h"
#include "core/error.h"
#include "kernels/device.h"
#include "model/gemma.h"
#include "rl/rollout.h"

typedef struct DevicePolicy {
  RolloutPolicy policy;
  Device device;
#ifdef FIMI_HAVE_CUDA
  CudaContext *ctx;
  GemmaCudaModel gpu;
  int have_gpu;
#endif
} DevicePolicy;

// slots sequences of capacity tokens, prefill in chunks of chunk tokens;
// row_invariant: the CPU policy's decode rows one GEMM each (rl/rollout.h).
// model is borrowed (the CPU policy reads it at every call). On failure
// call device_policy_free all the same.
int device_policy_create(DevicePolicy *p, Device device, GemmaModel *model, int slots, int capacity, int chunk,
                         int row_invariant, FimiError *err);
void device_policy_free(DevicePolicy *p);

#endif
