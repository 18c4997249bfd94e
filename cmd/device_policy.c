// cmd/device_policy.c: the rollout policy on the CPU or GPU 0 (see
// device_policy.h).
#include "cmd/device_policy.h"

#include <string.h>

int device_policy_create(DevicePolicy *p, Device device, GemmaModel *model, int slots, int capacity, int chunk,
                         int row_invariant, FimiError *err) {
  memset(p, 0, sizeof *p);
  p->device = device;
  if (device == DEVICE_CPU) return rollout_policy_cpu_create(&p->policy, model, slots, capacity, chunk, row_invariant, err);
#ifdef FIMI_HAVE_CUDA
  if (cuda_context_create(&p->ctx, 0, err) != 0) return -1;
  if (gemma_cuda_create(&p->gpu, &model->config, p->ctx, err) != 0) return -1;
  p->have_gpu = 1;
  if (gemma_cuda_upload_weights(&p->gpu, model, err) != 0) return -1;
  return rollout_policy_cuda_create(&p->policy, &p->gpu, slots, capacity, chunk, err);
#else
  return fimi_fail(err, "this fimi was built without the CUDA backend");
#endif
}

void device_policy_free(DevicePolicy *p) {
  if (p->device == DEVICE_CPU) {
    if (p->policy.ctx) rollout_policy_cpu_free(&p->policy);
    return;
  }
#ifdef FIMI_HAVE_CUDA
  if (p->policy.ctx) rollout_policy_cuda_free(&p->policy);
  if (p->have_gpu) gemma_cuda_free(&p->gpu);
  if (p->ctx) cuda_context_destroy(p->ctx);
#endif
}
