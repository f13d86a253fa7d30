/*
 * memop.cu - device.h's stream waits on a word the host writes, through
 * the driver's stream memory operations (cuStreamWaitValue32), reached
 * through the runtime's entry points so that the library never links
 * libcuda. A stream so waiting holds no SM, where a kernel polling the
 * word would hold one and, on a GPU that several processes share, keep
 * the others' work waiting for the time slice.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>

extern "C" {
#include "device/device.h"
}

static decltype(&cuStreamWaitValue32) wait_value;
static pthread_once_t found = PTHREAD_ONCE_INIT;

static void find(void) {
  cudaDriverEntryPointQueryResult q;
  void *fn = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q) ==
          cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    wait_value = (decltype(&cuStreamWaitValue32))fn;
  cudaGetLastError();
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
