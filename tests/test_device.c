// tests/test_device.c: backend selection. On a machine without a GPU (CI)
// asking for CUDA must fail with a clear message, not crash; with a GPU the
// discovery must return sane properties.
#include <string.h>

#include "kernels/device.h"
#include "tests/test_util.h"

int main(void) {
  FimiError err = {0};
  Device device;
  CHECK(device_parse("cpu", &device, &err) == 0 && device == DEVICE_CPU, "parse cpu");
  CHECK(device_parse("cuda", &device, &err) == 0 && device == DEVICE_CUDA, "parse cuda");
  CHECK(device_parse("gpu", &device, &err) != 0 && strstr(err.message, "\"gpu\""), "bad name: %s", err.message);
  CHECK(device_require(DEVICE_CPU, &err) == 0, "cpu always available");
  int count = cuda_device_count();
  CHECK(count >= 0, "device count never negative");
  fimi_error_clear(&err);
  CHECK(device_require(DEVICE_CUDA, &err) != 0 && strstr(err.message, "CUDA"), "cuda request explained: %s",
        err.message);
  printf("CUDA compiled: %d, devices: %d, message: %s\n", cuda_backend_compiled(), count, err.message);
  for (int i = 0; i < count; i++) {
    DeviceInfo info;
    CHECK(cuda_device_info(i, &info, &err) == 0, "device %d info: %s", i, err.message);
    CHECK(info.name[0] && info.total_memory_bytes > 0 && info.compute_major >= 1, "device %d properties", i);
  }
  if (count == 0) CHECK(cuda_device_info(0, &(DeviceInfo){0}, &err) != 0, "info on a missing device fails");
  TEST_MAIN_END();
}
