// kernels/device.c: backend parsing and selection (see device.h). The CUDA
// queries live in kernels/cuda/device.cu, or in the stubs below when the
// binary is built without CUDA.
#include "kernels/device.h"

#include <string.h>

int device_parse(const char *text, Device *out, FimiError *err) {
  if (strcmp(text, "cpu") == 0) {
    *out = DEVICE_CPU;
    return 0;
  }
  if (strcmp(text, "cuda") == 0) {
    *out = DEVICE_CUDA;
    return 0;
  }
  return fimi_fail(err, "--device: unknown device \"%s\" (expected cpu or cuda)", text);
}

#ifndef FIMI_HAVE_CUDA
int cuda_backend_compiled(void) { return 0; }
int cuda_device_count(void) { return 0; }
int cuda_device_info(int index, DeviceInfo *info, FimiError *err) {
  (void)index;
  (void)info;
  return fimi_fail(err, "this fimi binary was built without the CUDA backend");
}
#endif

int device_require(Device device, FimiError *err) {
  if (device == DEVICE_CPU) return 0;
  if (!cuda_backend_compiled())
    return fimi_fail(err, "--device cuda: this fimi binary was built without CUDA (rebuild with nvcc installed)");
  if (cuda_device_count() <= 0) return fimi_fail(err, "--device cuda: no CUDA device is available on this machine");
  return 0;
}
