/*
 * graph_p2p.c - Send/Recv captured in a CUDA graph with collectives, and
 * replayed.
 *
 * One process per GPU (started by chorusrun, mpirun or torchrun; alone it
 * is rank 0 of 1). For each size, each rank captures into one graph: K
 * ring shifts (send to rank + 1, receive from rank - 1, ping-ponging
 * between two buffers), a swap between ranks 0 and 1 only (the other ranks
 * take no part, so any counter shared by all ranks would fall out of
 * step), then an AllReduce of a third buffer. The graph is replayed R times
 * with fresh inputs that depend on the replay; every element of every
 * result is checked exactly, so a stale line, a skipped or doubled shift,
 * data from the wrong rank or an AllReduce out of step fails. Then it times
 * replays of the ring shifts alone, per shift.
 * Exit status 77 (skip) where no GPU is visible.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

#define K 4 /* ring shifts per graph (even: the result lands in ring[0]) */
#define R 12

/* What rank src puts in element i at replay rep (exact in float). */
static float value(int src, int rep, size_t i) {
  return (float)(src * 1000 + rep * 10 + (int)(i % 7));
}

typedef struct bufs {
  float *ring[2], *swap_in, *swap_out, *sum;
  float *host;
  size_t count;
} bufs;

/* The graph: K ring shifts; ranks 0 and 1 swap; an AllReduce (sum).
 * shifts_only: the ring shifts alone. */
static int capture(int rank, int n, ncclComm_t comm, const bufs *b, int shifts_only, cudaStream_t s,
                   cudaGraphExec_t *exec) {
  cudaGraph_t graph;
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < K; k++) {
    NCCL(ncclGroupStart());
    NCCL(ncclSend(b->ring[k % 2], b->count, ncclFloat, next, comm, s));
    NCCL(ncclRecv(b->ring[(k + 1) % 2], b->count, ncclFloat, prev, comm, s));
    NCCL(ncclGroupEnd());
  }
  if (!shifts_only) {
    if (n >= 2 && rank < 2) {
      NCCL(ncclGroupStart());
      NCCL(ncclSend(b->swap_out, b->count, ncclFloat, 1 - rank, comm, s));
      NCCL(ncclRecv(b->swap_in, b->count, ncclFloat, 1 - rank, comm, s));
      NCCL(ncclGroupEnd());
    }
    NCCL(ncclAllReduce(b->sum, b->sum, b->count, ncclFloat, ncclSum, comm, s));
  }
  CUDA(cudaStreamEndCapture(s, &graph));
  CUDA(cudaGraphInstantiate(exec, graph, 0));
  CUDA(cudaGraphDestroy(graph));
  return 0;
}

/* Fills dev with value(src, rep, .) (through the host buffer). */
static int fill(const bufs *b, float *dev, int src, int rep, cudaStream_t s) {
  for (size_t i = 0; i < b->count; i++) b->host[i] = value(src, rep, i);
  CUDA(cudaMemcpyAsync(dev, b->host, b->count * sizeof(float), cudaMemcpyHostToDevice, s));
  CUDA(cudaStreamSynchronize(s));
  return 0;
}

/* Elements of dev that differ from want(i); prints the first. */
static size_t check(const bufs *b, const float *dev, int rank, const char *what, int rep,
                    float (*want)(size_t, int, int), int arg, cudaStream_t s) {
  if (cudaMemcpyAsync(b->host, dev, b->count * sizeof(float), cudaMemcpyDeviceToHost, s) !=
          cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess) {
    fprintf(stderr, "rank %d: reading %s back failed\n", rank, what);
    return b->count;
  }
  size_t wrong = 0;
  for (size_t i = 0; i < b->count; i++)
    if (b->host[i] != want(i, rep, arg)) {
      if (!wrong)
        fprintf(stderr, "rank %d: %zu floats, replay %d, %s: element %zu is %g, want %g\n", rank,
                b->count, rep, what, i, b->host[i], want(i, rep, arg));
      wrong++;
    }
  return wrong;
}

static float want_from(size_t i, int rep, int src) {
  return value(src, rep, i);
}
static float want_sum(size_t i, int rep, int n) {
  float t = 0;
  for (int r = 0; r < n; r++) t += value(r, rep, i);
  return t;
}

int main(void) {
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  if (join_launched(&rank, &n, &comm, &s) != 0) return 77;
  /* Small (LL lines), around the LL limit, and large (FIFO chunks). */
  static const size_t counts[] = {3, 1000, 4096, 1 << 20};
  int bad = 0;
  const int src = ((rank - K) % n + n) % n; /* whose data K shifts bring here */
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    bufs b;
    memset(&b, 0, sizeof b);
    b.count = counts[c];
    const size_t bytes = b.count * sizeof(float);
    b.host = malloc(bytes);
    if (!b.host) return 1;
    CUDA(cudaMalloc((void **)&b.ring[0], bytes));
    CUDA(cudaMalloc((void **)&b.ring[1], bytes));
    CUDA(cudaMalloc((void **)&b.swap_in, bytes));
    CUDA(cudaMalloc((void **)&b.swap_out, bytes));
    CUDA(cudaMalloc((void **)&b.sum, bytes));
    cudaGraphExec_t exec;
    if (capture(rank, n, comm, &b, 0, s, &exec)) return 1;
    for (int rep = 0; rep < R; rep++) { /* every replay, so that ranks stay in step */
      if (fill(&b, b.ring[0], rank, rep, s) || fill(&b, b.swap_out, rank, rep, s) ||
          fill(&b, b.sum, rank, rep, s))
        return 1;
      CUDA(cudaMemsetAsync(b.ring[1], 0xff, bytes, s));
      CUDA(cudaMemsetAsync(b.swap_in, 0xff, bytes, s));
      CUDA(cudaGraphLaunch(exec, s));
      size_t wrong = check(&b, b.ring[0], rank, "ring shifts", rep, want_from, src, s);
      if (n >= 2 && rank < 2)
        wrong += check(&b, b.swap_in, rank, "swap of ranks 0 and 1", rep, want_from, 1 - rank, s);
      wrong += check(&b, b.sum, rank, "AllReduce", rep, want_sum, n, s);
      bad |= wrong != 0;
    }
    CUDA(cudaGraphExecDestroy(exec));
    /* Timing: the ring shifts alone, replayed. */
    if (capture(rank, n, comm, &b, 1, s, &exec)) return 1;
    double us = replay_us(exec, s, 50) / K;
    if (rank == 0)
      printf("graph replay: %d ranks, %zu floats: %.2f us per ring shift, %s\n", n, b.count, us,
             bad ? "WRONG" : "correct");
    CUDA(cudaGraphExecDestroy(exec));
    CUDA(cudaFree(b.ring[0]));
    CUDA(cudaFree(b.ring[1]));
    CUDA(cudaFree(b.swap_in));
    CUDA(cudaFree(b.swap_out));
    CUDA(cudaFree(b.sum));
    free(b.host);
  }
  ncclResult_t async;
  NCCL(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess) bad = 1;
  NCCL(ncclCommDestroy(comm));
  CUDA(cudaStreamDestroy(s));
  if (rank == 0) printf("graph Send/Recv: %s\n", bad ? "FAILED" : "passed");
  return bad;
}
