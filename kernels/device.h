// kernels/device.h: backend selection and CUDA device discovery. Defines
// DeviceInfo, device_parse, cuda_device_count, cuda_device_info,
// device_require. A binary built with CUDA still runs without a GPU: asking
// for --device cuda there fails with a clear message instead of crashing.
#ifndef FIMI_KERNELS_DEVICE_H
#define FIMI_KERNELS_DEVICE_H

#include <stddef.h>

#include "core/error.h"
#include "kernels/ops.h"

typedef struct DeviceInfo {
  char name[256];
  size_t total_memory_bytes;
  int compute_major, compute_minor;
  int multiprocessors;
} DeviceInfo;

// "cpu" or "cuda" -> Device.
int device_parse(const char *text, Device *out, FimiError *err);
// 1 when this binary was compiled with the CUDA backend.
int cuda_backend_compiled(void);
// Number of visible CUDA devices; 0 when there are none or no driver.
int cuda_device_count(void);
int cuda_device_info(int index, DeviceInfo *info, FimiError *err);
// Fails with a clear message if the device cannot be used on this machine.
int device_require(Device device, FimiError *err);

#endif
