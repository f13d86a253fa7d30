/*
 * probe.cu - device.h with the CUDA runtime. Kernels arrive with the GPU
 * collectives; for now this answers the queries that decide whether a
 * communicator binds to a GPU.
 */
#include <cuda_runtime.h>

extern "C" {
#include "device/device.h"
}

extern "C" int chorus_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no device" error */
    return 0;
  }
  return n;
}

extern "C" int chorus_device_current(void) {
  if (chorus_device_count() == 0) return -1;
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

extern "C" int chorus_device_built(void) {
  return 1;
}
