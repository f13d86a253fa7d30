/*
 * memop.cu - device.h's stream waits on a word the host writes, through
 * the driver's stream memory operations (cuStreamWaitValue32, found as
 * driver_entry.cuh finds driver functions). A stream so waiting holds no
 * SM, where a kernel polling the word would hold one and, on a GPU that
 * several processes share, keep the others' work waiting for the time
 * slice.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "device/driver_entry.cuh"

extern "C" {
#include "device/device.h"
}

static decltype(&cuStreamWaitValue32) wait_value;
static pthread_once_t found = PTHREAD_ONCE_INIT;

/* Whether a wait on host-mapped memory works here: one on a word that
 * already holds its value, on a stream of its own (a driver may offer the
 * entry point and refuse the operation). */
static int works(decltype(&cuStreamWaitValue32) fn) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  uint32_t *word = NULL;
  void *dev = NULL;
  cudaStream_t s = NULL;
  int ok = cudaHostAlloc((void **)&word, sizeof *word, cudaHostAllocMapped) == cudaSuccess;
  if (ok) {
    *word = 1;
    ok = cudaHostGetDevicePointer(&dev, word, 0) == cudaSuccess &&
         cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
         fn(s, (CUdeviceptr)dev, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS &&
         cudaStreamSynchronize(s) == cudaSuccess;
  }
  if (s) cudaStreamDestroy(s);
  if (word) cudaFreeHost(word);
  cudaGetLastError();
  cudaThreadExchangeStreamCaptureMode(&mode);
  return ok;
}

static void find(void) {
  void *fn;
  if (chorus_driver_entry("cuStreamWaitValue32", &fn) == cudaSuccess &&
      works((decltype(&cuStreamWaitValue32))fn))
    wait_value = (decltype(&cuStreamWaitValue32))fn;
}

extern "C" int chorus_dev_word_waits(void) {
  pthread_once(&found, find);
  return wait_value != NULL;
}

extern "C" int chorus_dev_stream_wait_word(void *stream, const void *word, uint32_t value) {
  if (!chorus_dev_word_waits())
    return chorus_dev_fail((int)cudaErrorNotSupported, "finding the driver's cuStreamWaitValue32");
  const CUresult r =
      wait_value((CUstream)stream, (CUdeviceptr)word, value, CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) {
    char what[64];
    snprintf(what, sizeof what, "cuStreamWaitValue32 (CUresult %d)", (int)r);
    return chorus_dev_fail((int)cudaErrorUnknown, what);
  }
  return 0;
}
