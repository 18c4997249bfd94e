// tests/standin/device_standin.c: the CUDA device queries of kernels/device.h
// for the host stand-in (ops_cuda_standin.c): one "device", the host. Linked
// into fimi_standin (tests/standin/CMakeLists.txt) together with
// kernels/device.c compiled with FIMI_HAVE_CUDA=1 (no stubs there), so that
// `--device cuda` passes device_require and runs on the stand-in, with no
// CUDA runtime in the binary.
#include <stdio.h>
#include <string.h>

#include "kernels/device.h"

int cuda_backend_compiled(void) { return 1; }

int cuda_device_count(void) { return 1; }

int cuda_device_info(int index, DeviceInfo *info, FimiError *err) {
  if (index != 0) return fimi_fail(err, "CUDA device %d: the host stand-in has only device 0", index);
  memset(info, 0, sizeof *info);
  snprintf(info->name, sizeof info->name, "host stand-in (tests/standin, CPU kernels, bf16-rounded)");
  info->total_memory_bytes = (size_t)1 << 30;
  info->compute_major = 9;
  info->compute_minor = 0;
  info->multiprocessors = 1;
  return 0;
}
