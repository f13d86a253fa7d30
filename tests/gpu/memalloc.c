/*
 * memalloc.c - ncclMemAlloc/ncclMemFree on GPUs.
 *
 * One process, every visible GPU (at most 8). On each GPU: ncclMemAlloc of
 * an odd size returns device memory of that GPU (cudaPointerGetAttributes)
 * that holds what is written to it; 256 MiB allocated and freed come back
 * (cudaMemGetInfo, within 64 MiB); a second ncclMemFree of the same
 * pointer and ncclMemFree of memory it did not hand out are
 * ncclInvalidArgument. Then an AllReduce over all GPUs (ncclCommInitAll)
 * with both buffers from ncclMemAlloc gives the exact sum. Exit status 0
 * when every check holds, 1 otherwise, 77 (skip) without a GPU.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

#define MAXG 8

static void one_gpu(int d) {
  cudaSetDevice(d);
  const size_t odd = 1000003;
  void *p = NULL;
  ncclResult_t r = ncclMemAlloc(&p, odd);
  EXPECT(r == ncclSuccess && p, "GPU %d: ncclMemAlloc(%zu): %s (%s)", d, odd, ncclGetErrorString(r),
         ncclGetLastError(NULL));
  if (r != ncclSuccess || !p) return;
  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  EXPECT(cudaPointerGetAttributes(&a, p) == cudaSuccess, "GPU %d: cudaPointerGetAttributes", d);
  EXPECT(a.type == cudaMemoryTypeDevice && a.device == d,
         "GPU %d: ncclMemAlloc gave memory of type %d on device %d", d, (int)a.type, a.device);
  unsigned char *h = malloc(odd);
  EXPECT(cudaMemset(p, 0x5a, odd) == cudaSuccess, "GPU %d: cudaMemset", d);
  EXPECT(cudaMemcpy(h, p, odd, cudaMemcpyDeviceToHost) == cudaSuccess, "GPU %d: cudaMemcpy", d);
  size_t bad = 0;
  for (size_t i = 0; i < odd; i++) bad += h[i] != 0x5a;
  EXPECT(bad == 0, "GPU %d: %zu of %zu bytes did not hold what was written", d, bad, odd);
  free(h);
  EXPECT(ncclMemFree(p) == ncclSuccess, "GPU %d: ncclMemFree: %s", d, ncclGetLastError(NULL));
  EXPECT(ncclMemFree(p) == ncclInvalidArgument, "GPU %d: a second ncclMemFree was accepted", d);
  void *other = NULL;
  if (cudaMalloc(&other, 64) == cudaSuccess) {
    EXPECT(ncclMemFree(other) == ncclInvalidArgument,
           "GPU %d: ncclMemFree of cudaMalloc memory was accepted", d);
    cudaFree(other);
  }
  /* Freed memory goes back to the GPU. */
  size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
  cudaDeviceSynchronize();
  cudaMemGetInfo(&free0, &total);
  const size_t big = (size_t)256 << 20;
  r = ncclMemAlloc(&p, big);
  EXPECT(r == ncclSuccess, "GPU %d: ncclMemAlloc(256 MiB): %s", d, ncclGetLastError(NULL));
  cudaMemGetInfo(&free1, &total);
  if (r == ncclSuccess) EXPECT(ncclMemFree(p) == ncclSuccess, "GPU %d: ncclMemFree(256 MiB)", d);
  cudaMemGetInfo(&free2, &total);
  EXPECT(free1 + ((size_t)192 << 20) <= free0, "GPU %d: 256 MiB took only %zu MiB", d,
         (free0 - free1) >> 20);
  EXPECT(free2 + ((size_t)64 << 20) >= free0, "GPU %d: %zu MiB not back after ncclMemFree", d,
         (free0 - free2) >> 20);
  printf("GPU %d: ncclMemAlloc: device memory, %zu MiB taken and given back\n", d,
         (free0 - free1) >> 20);
}

static void allreduce(int n) {
  ncclComm_t comms[MAXG];
  ncclResult_t r = ncclCommInitAll(comms, n, NULL);
  EXPECT(r == ncclSuccess, "ncclCommInitAll(%d): %s", n, ncclGetLastError(NULL));
  if (r != ncclSuccess) return;
  const size_t count = 3 << 20;
  float *buf[MAXG], *out[MAXG];
  cudaStream_t s[MAXG];
  float *h = malloc(count * sizeof *h);
  for (int i = 0; i < n; i++) {
    cudaSetDevice(i);
    cudaStreamCreate(&s[i]);
    EXPECT(ncclMemAlloc((void **)&buf[i], count * sizeof(float)) == ncclSuccess, "alloc");
    EXPECT(ncclMemAlloc((void **)&out[i], count * sizeof(float)) == ncclSuccess, "alloc");
    for (size_t j = 0; j < count; j++) h[j] = (float)((i + 1) * (int)(j % 1000));
    cudaMemcpy(buf[i], h, count * sizeof *h, cudaMemcpyHostToDevice);
  }
  ncclGroupStart();
  for (int i = 0; i < n; i++)
    ncclAllReduce(buf[i], out[i], count, ncclFloat, ncclSum, comms[i], s[i]);
  r = ncclGroupEnd();
  EXPECT(r == ncclSuccess, "ncclAllReduce: %s", ncclGetLastError(NULL));
  for (int i = 0; i < n; i++) {
    cudaSetDevice(i);
    cudaStreamSynchronize(s[i]);
    cudaMemcpy(h, out[i], count * sizeof *h, cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (size_t j = 0; j < count; j++) bad += h[j] != (float)(n * (n + 1) / 2 * (int)(j % 1000));
    EXPECT(bad == 0, "rank %d: %zu of %zu elements wrong", i, bad, count);
    ncclMemFree(buf[i]);
    ncclMemFree(out[i]);
    cudaStreamDestroy(s[i]);
    ncclCommDestroy(comms[i]);
  }
  free(h);
  printf("AllReduce on %d GPUs, buffers from ncclMemAlloc: %s\n", n, failures ? "FAILED" : "exact");
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("no GPU visible: skipped\n");
    return 77;
  }
  if (ndev > MAXG) ndev = MAXG;
  for (int d = 0; d < ndev; d++) one_gpu(d);
  allreduce(ndev);
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
