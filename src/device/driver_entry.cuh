/*
 * driver_entry.cuh - a driver API function found through the runtime's
 * entry points, so that the library never links libcuda (it must load on
 * machines without a driver). Included by the .cu files that need one.
 */
#ifndef CHORUS_DEVICE_DRIVER_ENTRY_CUH
#define CHORUS_DEVICE_DRIVER_ENTRY_CUH

#include <cuda_runtime.h>

/* The driver's `name` as of the CUDA 12 interface into *fn: cudaSuccess,
 * or why not (cudaErrorNotSupported where the driver lacks it; the
 * runtime's last error then cleared). */
static inline cudaError_t chorus_driver_entry(const char *name, void **fn) {
  cudaDriverEntryPointQueryResult q;
  *fn = NULL;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
  if (e == cudaSuccess && q == cudaDriverEntryPointSuccess && *fn) return cudaSuccess;
  cudaGetLastError();
  return e != cudaSuccess ? e : cudaErrorNotSupported;
}

#endif
