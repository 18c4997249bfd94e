// kernels/cuda/device.cu: CUDA device discovery (name, memory, compute
// capability). Every CUDA call is checked; a machine without a driver or GPU
// reports zero devices instead of failing.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "kernels/device.h"
}

extern "C" int cuda_backend_compiled(void) { return 1; }

extern "C" int cuda_device_count(void) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return count;
}

extern "C" int cuda_device_info(int index, DeviceInfo *info, FimiError *err) {
  cudaDeviceProp prop;
  cudaError_t status = cudaGetDeviceProperties(&prop, index);
  if (status != cudaSuccess)
    return fimi_fail(err, "cudaGetDeviceProperties(%d): %s", index, cudaGetErrorString(status));
  memset(info, 0, sizeof *info);
  snprintf(info->name, sizeof info->name, "%s", prop.name);
  info->total_memory_bytes = prop.totalGlobalMem;
  info->compute_major = prop.major;
  info->compute_minor = prop.minor;
  info->multiprocessors = prop.multiProcessorCount;
  return 0;
}
