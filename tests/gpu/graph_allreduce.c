/*
 * graph_allreduce.c - collectives captured in a CUDA graph and replayed.
 *
 * One process per GPU (started by chorusrun, mpirun or torchrun; alone it
 * is rank 0 of 1). Each rank captures K in-place AllReduces on its stream,
 * then replays the graph R times, refilling its buffer before each replay:
 * each replay must give exactly sum(rank+1) * n^(K-1) in every element, so
 * a replay that reused a stale epoch, skipped a peer or read old data
 * fails. Then it times replays of a graph of AllReduce(max), per operation.
 * Last, a graph of an AllGather then a ReduceScatter of what it gathered,
 * replayed with fresh inputs: every block must hold its rank's values,
 * and every rank get back its own block times n.
 * Exit status 77 (skip) where no GPU is visible.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpu_test.h"
#include "nccl.h"

#define K 4
#define R 20

/* Captures K in-place AllReduces of count floats with op into a graph. */
static int capture(int rank, ncclComm_t comm, float *buf, size_t count, ncclRedOp_t op,
                   cudaStream_t s, cudaGraphExec_t *exec) {
  cudaGraph_t graph;
  CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < K; k++) NCCL(ncclAllReduce(buf, buf, count, ncclFloat, op, comm, s));
  CUDA(cudaStreamEndCapture(s, &graph));
  CUDA(cudaGraphInstantiate(exec, graph, 0));
  CUDA(cudaGraphDestroy(graph));
  return 0;
}

/* Element i of rank r's block in replay rep: small integers, exact. */
static float value(int r, int rep, size_t i) {
  return (float)((r + 1) * 8 + rep + (int)(i % 5));
}

/* The AllGather + ReduceScatter graph over blocks of `count` floats. */
static int gather_scatter(int rank, int n, ncclComm_t comm, cudaStream_t s, size_t count) {
  const size_t all = count * (size_t)n;
  float *mine, *gathered, *back, *host = malloc(all * sizeof *host);
  CUDA(cudaMalloc((void **)&mine, count * sizeof *mine));
  CUDA(cudaMalloc((void **)&gathered, all * sizeof *gathered));
  CUDA(cudaMalloc((void **)&back, count * sizeof *back));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  NCCL(ncclAllGather(mine, gathered, count, ncclFloat, comm, s));
  NCCL(ncclReduceScatter(gathered, back, count, ncclFloat, ncclSum, comm, s));
  CUDA(cudaStreamEndCapture(s, &graph));
  CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CUDA(cudaGraphDestroy(graph));
  int bad = 0;
  for (int rep = 0; rep < 5 && !bad; rep++) {
    for (size_t i = 0; i < count; i++) host[i] = value(rank, rep, i);
    CUDA(cudaMemcpyAsync(mine, host, count * sizeof *host, cudaMemcpyHostToDevice, s));
    CUDA(cudaGraphLaunch(exec, s));
    CUDA(cudaMemcpyAsync(host, gathered, all * sizeof *host, cudaMemcpyDeviceToHost, s));
    CUDA(cudaStreamSynchronize(s));
    for (size_t i = 0; i < all && !bad; i++)
      if (host[i] != value((int)(i / count), rep, i % count)) {
        fprintf(stderr,
                "rank %d: AllGather of %zu in a graph, replay %d: element %zu is %g, want %g\n",
                rank, count, rep, i, host[i], value((int)(i / count), rep, i % count));
        bad = 1;
      }
    CUDA(cudaMemcpy(host, back, count * sizeof *host, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count && !bad; i++)
      if (host[i] != (float)n * value(rank, rep, i)) {
        fprintf(stderr,
                "rank %d: ReduceScatter of %zu in a graph, replay %d: element %zu is %g, want %g\n",
                rank, count, rep, i, host[i], (float)n * value(rank, rep, i));
        bad = 1;
      }
  }
  if (rank == 0)
    printf("graph replay: %d ranks, AllGather + ReduceScatter of %zu floats: %s\n", n, count,
           bad ? "WRONG" : "correct");
  CUDA(cudaGraphExecDestroy(exec));
  CUDA(cudaFree(mine));
  CUDA(cudaFree(gathered));
  CUDA(cudaFree(back));
  free(host);
  return bad;
}

int main(void) {
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  if (join_launched(&rank, &n, &comm, &s) != 0) return 77;
  static const size_t counts[] = {2, 1000, 1 << 20};
  int bad = 0;
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    size_t count = counts[c];
    float *buf, *host = malloc(count * sizeof *host);
    CUDA(cudaMalloc((void **)&buf, count * sizeof *buf));
    cudaGraphExec_t exec;
    if (capture(rank, comm, buf, count, ncclSum, s, &exec)) return 1;
    double expect = n * (n + 1) / 2.0;
    for (int k = 1; k < K; k++) expect *= n;
    for (int rep = 0; rep < R; rep++) {
      for (size_t i = 0; i < count; i++) host[i] = (float)(rank + 1);
      CUDA(cudaMemcpyAsync(buf, host, count * sizeof *host, cudaMemcpyHostToDevice, s));
      CUDA(cudaGraphLaunch(exec, s));
      CUDA(cudaMemcpyAsync(host, buf, count * sizeof *host, cudaMemcpyDeviceToHost, s));
      CUDA(cudaStreamSynchronize(s));
      size_t wrong = 0;
      for (size_t i = 0; i < count; i++) wrong += host[i] != (float)expect;
      if (wrong) {
        fprintf(stderr, "rank %d: count %zu replay %d: %zu wrong (first %g, want %g)\n", rank,
                count, rep, wrong, host[0], expect);
        bad = 1;
        break;
      }
    }
    CUDA(cudaGraphExecDestroy(exec));
    /* Timing: a graph of K AllReduce(max) (values stay put), replayed. */
    if (capture(rank, comm, buf, count, ncclMax, s, &exec)) return 1;
    double us = replay_us(exec, s, 50) / K;
    if (rank == 0)
      printf("graph replay: %d ranks, %zu floats: %.2f us per AllReduce, %s\n", n, count, us,
             bad ? "WRONG" : "correct");
    CUDA(cudaGraphExecDestroy(exec));
    CUDA(cudaFree(buf));
    free(host);
  }
  if (gather_scatter(rank, n, comm, s, 1000) || gather_scatter(rank, n, comm, s, 1 << 18)) bad = 1;
  ncclResult_t async;
  NCCL(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess) bad = 1;
  NCCL(ncclCommDestroy(comm));
  CUDA(cudaStreamDestroy(s));
  return bad;
}
