/*
 * gdr_p2p.c - Send/Recv of GPU buffers handed to a network plugin as they
 * are (a plugin reporting NCCL_PTR_CUDA), between ranks on two hosts.
 *
 * One process per rank (chorusrun --hosts 2, the test plugin loaded with
 * NCCL_NET_PLUGIN and LOOP_CUDA). Each rank sends to rank + 1 and receives
 * from rank - 1, sizes 4 B to 8 MiB, every element checked. Two ways:
 *   mapped  buffers in host-mapped memory (cudaHostAlloc), which the GPU
 *           reaches through UVA and the plugin reads and writes with the
 *           CPU (LOOP_CUDA=host): the network's side without CUDA calls,
 *           as a NIC's DMA has none.
 *   device  cudaMalloc buffers, the plugin copying through the CUDA
 *           runtime (LOOP_CUDA=1). Each call is waited for before the
 *           next: a plugin's CUDA copy queued behind a call of the
 *           program that synchronises the device (a pinned allocation,
 *           say) while a staged call's kernel waits for the plugin would
 *           never run; real GPUDirect NICs make no CUDA calls.
 * Exit status 77 (skip) where no GPU is visible.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

static float value(int src, size_t i) {
  return (float)(src * 1000 + (int)(i % 997));
}

int main(int argc, char **argv) {
  const int mapped = argc > 1 && strcmp(argv[1], "mapped") == 0;
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  const int rc = join_launched(&rank, &n, &comm, &s);
  if (rc) return rc;
  const size_t most = (size_t)8 << 20;
  float *send, *recv, *host;
  if (mapped) {
    CUDA(cudaHostAlloc((void **)&send, most, cudaHostAllocMapped));
    CUDA(cudaHostAlloc((void **)&recv, most, cudaHostAllocMapped));
  } else {
    CUDA(cudaMalloc((void **)&send, most));
    CUDA(cudaMalloc((void **)&recv, most));
  }
  CUDA(cudaMallocHost((void **)&host, most));
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (size_t bytes = 4; bytes <= most; bytes *= 8) {
    const size_t count = bytes / sizeof(float);
    for (size_t i = 0; i < count; i++) host[i] = value(rank, i);
    CUDA(cudaMemcpy(send, host, bytes, cudaMemcpyHostToDevice));
    CUDA(cudaMemset(recv, 0xff, bytes));
    for (int rep = 0; rep < 3; rep++) {
      NCCL(ncclGroupStart());
      NCCL(ncclSend(send, count, ncclFloat, next, comm, s));
      NCCL(ncclRecv(recv, count, ncclFloat, prev, comm, s));
      NCCL(ncclGroupEnd());
      EXPECT(wait_stream(s, 60) >= 0, "rank %d: %zu bytes not done in 60 s", rank, bytes);
    }
    CUDA(cudaMemcpy(host, recv, bytes, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) bad += host[i] != value(prev, i);
    EXPECT(bad == 0, "rank %d: %zu bytes from rank %d: %zu elements wrong", rank, bytes, prev, bad);
  }
  NCCL(ncclCommDestroy(comm));
  if (mapped) {
    CUDA(cudaFreeHost(send));
    CUDA(cudaFreeHost(recv));
  } else {
    CUDA(cudaFree(send));
    CUDA(cudaFree(recv));
  }
  CUDA(cudaFreeHost(host));
  printf("rank %d: %s buffers to rank %d and from rank %d, 4 B to 8 MiB: %s\n", rank,
         mapped ? "host-mapped" : "device", next, prev, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
