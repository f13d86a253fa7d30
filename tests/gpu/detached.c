/*
 * detached.c - rooted calls across hosts are carried out whole, with the
 * right data in every call, when a rank destroys its communicator as soon
 * as its stream has passed its last call (a rank whose call takes nothing
 * back may see its stream end before the host has sent its data).
 *
 * Usage: gpu_detached reduce|broadcast COUNT: one rank per host (started
 * by chorusrun --hosts), 20 calls of COUNT floats with root 0, each with
 * values of its own. reduce: rank r sends r + 1 + call everywhere; the
 * root checks every element of every call against the sum over ranks;
 * the others synchronize their stream after the last call and destroy
 * their communicator at once. broadcast: the root sends call + 1 and,
 * after the last call, does the same; every rank checks every element
 * (the root all but its last call's). Exit status 77 (skip) where no GPU
 * is visible, 0 with one rank.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

#define CALLS 20

int main(int argc, char **argv) {
  setenv("CHORUS_OP_TIMEOUT", "60", 1);
  if (argc != 3 || (strcmp(argv[1], "reduce") && strcmp(argv[1], "broadcast"))) {
    fprintf(stderr, "usage: %s reduce|broadcast COUNT\n", argv[0]);
    return 2;
  }
  const int reduce = !strcmp(argv[1], "reduce");
  const size_t count = strtoul(argv[2], NULL, 10);
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  const int joined = join_peers(&rank, &n, &comm, &s);
  if (joined >= 0) return joined;
  /* The ranks whose calls take something back check it: a Reduce's
   * root; every rank of a Broadcast, the root (its output copied on the
   * GPU) but for its last call, after which it destroys at once. */
  const int gets = reduce ? rank == 0 : 1, last_too = reduce || rank != 0;
  float *send, *recv, *host = malloc(count * sizeof *host);
  if (!host) return 1;
  CUDA(cudaMalloc((void **)&send, count * sizeof(float)));
  CUDA(cudaMalloc((void **)&recv, count * sizeof(float)));
  long wrong = 0;
  for (int c = 0; c < CALLS; c++) {
    const float mine = reduce ? (float)(rank + 1 + c) : (float)(c + 1);
    for (size_t i = 0; i < count; i++) host[i] = mine;
    /* On s: a stream that does not wait for the legacy one. */
    CUDA(cudaMemcpyAsync(send, host, count * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDA(cudaMemsetAsync(recv, 0, count * sizeof(float), s));
    if (reduce)
      NCCL(ncclReduce(send, recv, count, ncclFloat, ncclSum, 0, comm, s));
    else
      NCCL(ncclBroadcast(send, recv, count, ncclFloat, 0, comm, s));
    CUDA(cudaStreamSynchronize(s));
    if (!gets || (c == CALLS - 1 && !last_too)) continue;
    CUDA(cudaMemcpyAsync(host, recv, count * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA(cudaStreamSynchronize(s));
    const float want = reduce ? (float)(n * (n + 1) / 2 + n * c) : (float)(c + 1);
    for (size_t i = 0; i < count; i++) wrong += host[i] != want;
  }
  ncclResult_t async = ncclSuccess;
  NCCL(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclSuccess, "rank %d: async error %s: %s", rank, ncclGetErrorString(async),
         ncclGetLastError(comm));
  EXPECT(wrong == 0, "rank %d: %ld wrong elements in %d calls of %zu", rank, wrong, CALLS, count);
  printf("rank %d: %s of %zu floats, %d calls, %ld wrong%s\n", rank, argv[1], count, CALLS, wrong,
         last_too ? "" : " (its last not checked: destroys at once)");
  NCCL(ncclCommDestroy(comm));
  cudaFree(send);
  cudaFree(recv);
  free(host);
  return failures ? 1 : 0;
}
