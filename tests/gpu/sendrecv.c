/*
 * sendrecv.c - ncclSend/ncclRecv on GPU communicators, in groups.
 *
 * Usage: gpu_sendrecv [-g N]. With -g N one process drives N GPUs
 * (ncclCommInitAll, every rank's calls in one group); without it, one
 * process per GPU (started by chorusrun, mpirun or torchrun; alone it is
 * rank 0 of 1). Exit status 77 (skip) where no GPU is visible.
 *
 * For each size scale, every rank's group holds: two messages to every
 * peer, itself included, of sizes that differ per pair and per message
 * (some pairs send nothing), the second on a second stream; a ring shift
 * (to rank + 1, from rank - 1); an AllReduce between them; and, on a
 * second communicator over the same ranks, a shift the other way issued
 * between the first one's calls (each communicator's calls pair in their
 * own order). In-place shifts are left to sendrecv_perf: NVIDIA's NCCL
 * does not order a send before a receive into the same buffer, so this
 * program, run against it too, keeps them apart. Every element carries
 * its source, destination, message and index, so data from the wrong
 * peer, in the wrong order, truncated, or stale fails the exact check, as
 * does a wrong AllReduce.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

#define MAXG  8
#define NMSG  2
#define ITERS 3

/* Elements of message m from src to dst at this scale (0 for some pairs). */
static size_t msg_count(int src, int dst, int m, size_t scale) {
  unsigned h = (unsigned)(src * 7 + dst * 13 + m * 5) % 11;
  if (h == 3) return 0;
  return scale * (1 + h) + (size_t)(src + 2 * dst + m);
}

static uint32_t value(int src, int dst, int m, size_t i, int iter) {
  return (uint32_t)src << 28 | (uint32_t)dst << 24 | (uint32_t)m << 22 | (uint32_t)iter << 20 |
         (uint32_t)(i & 0xfffff);
}

typedef struct rank_state {
  int rank, device;
  ncclComm_t comm, comm2; /* comm2: the same ranks, for the backward shift */
  cudaStream_t s1, s2;
  uint32_t *send[NMSG][MAXG], *recv[NMSG][MAXG];
  uint32_t *ring, *ring_in; /* ring shift: sent, received */
  uint32_t *back, *back_in; /* backward shift on comm2: sent, received */
  float *ar;                /* AllReduce buffer */
  size_t ring_count, ar_count;
} rank_state;

static void fill(uint32_t *dev, size_t count, int src, int dst, int m, int iter) {
  uint32_t *h = malloc(count * sizeof *h + 1);
  for (size_t i = 0; i < count; i++) h[i] = value(src, dst, m, i, iter);
  CUDA(cudaMemcpy(dev, h, count * sizeof *h, cudaMemcpyHostToDevice));
  free(h);
}

static void expect(const uint32_t *dev, size_t count, int src, int dst, int m, int iter,
                   const char *what, size_t scale) {
  uint32_t *h = malloc(count * sizeof *h + 1);
  CUDA(cudaMemcpy(h, dev, count * sizeof *h, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; i++)
    if (h[i] != value(src, dst, m, i, iter)) {
      fprintf(stderr,
              "scale %zu iter %d: %s %d -> %d message %d element %zu of %zu: %08x, expected "
              "%08x\n",
              scale, iter, what, src, dst, m, i, count, h[i], value(src, dst, m, i, iter));
      failures++;
      break;
    }
  free(h);
}

static void setup(rank_state *r, int n, size_t scale) {
  CUDA(cudaSetDevice(r->device));
  for (int m = 0; m < NMSG; m++)
    for (int p = 0; p < n; p++) {
      size_t sc = msg_count(r->rank, p, m, scale), rc = msg_count(p, r->rank, m, scale);
      CUDA(cudaMalloc((void **)&r->send[m][p], sc * 4 + 4));
      CUDA(cudaMalloc((void **)&r->recv[m][p], rc * 4 + 4));
    }
  r->ring_count = scale * 3 + 1;
  r->ar_count = scale + 5;
  CUDA(cudaMalloc((void **)&r->ring, r->ring_count * 4));
  CUDA(cudaMalloc((void **)&r->ring_in, r->ring_count * 4));
  CUDA(cudaMalloc((void **)&r->back, r->ring_count * 4));
  CUDA(cudaMalloc((void **)&r->back_in, r->ring_count * 4));
  CUDA(cudaMalloc((void **)&r->ar, r->ar_count * 4));
}

static void teardown(rank_state *r, int n) {
  CUDA(cudaSetDevice(r->device));
  for (int m = 0; m < NMSG; m++)
    for (int p = 0; p < n; p++) {
      CUDA(cudaFree(r->send[m][p]));
      CUDA(cudaFree(r->recv[m][p]));
    }
  CUDA(cudaFree(r->ring));
  CUDA(cudaFree(r->ring_in));
  CUDA(cudaFree(r->back));
  CUDA(cudaFree(r->back_in));
  CUDA(cudaFree(r->ar));
}

static void prepare(rank_state *r, int n, size_t scale, int iter) {
  CUDA(cudaSetDevice(r->device));
  for (int m = 0; m < NMSG; m++)
    for (int p = 0; p < n; p++) {
      fill(r->send[m][p], msg_count(r->rank, p, m, scale), r->rank, p, m, iter);
      CUDA(cudaMemset(r->recv[m][p], 0xee, msg_count(p, r->rank, m, scale) * 4 + 4));
    }
  fill(r->ring, r->ring_count, r->rank, (r->rank + 1) % n, 3, iter);
  CUDA(cudaMemset(r->ring_in, 0xee, r->ring_count * 4));
  fill(r->back, r->ring_count, r->rank, (r->rank + n - 1) % n, 2, iter);
  CUDA(cudaMemset(r->back_in, 0xee, r->ring_count * 4));
  float *h = malloc(r->ar_count * sizeof *h);
  for (size_t i = 0; i < r->ar_count; i++) h[i] = (float)((r->rank + 1) * (int)(i % 100));
  CUDA(cudaMemcpy(r->ar, h, r->ar_count * sizeof *h, cudaMemcpyHostToDevice));
  free(h);
  /* A copy from pageable memory may return before it lands, and the
   * calls run on non-blocking streams. */
  CUDA(cudaDeviceSynchronize());
}

/* This rank's calls (inside the caller's group). */
static void issue(rank_state *r, int n, size_t scale) {
  CUDA(cudaSetDevice(r->device));
  for (int m = 0; m < NMSG; m++) {
    cudaStream_t s = m == 0 ? r->s1 : r->s2;
    for (int k = 0; k < n; k++) { /* peers in a rank-dependent order */
      int p = (r->rank + k) % n, q = (r->rank + n - k) % n;
      NCCL(ncclSend(r->send[m][p], msg_count(r->rank, p, m, scale), ncclUint32, p, r->comm, s));
      NCCL(ncclRecv(r->recv[m][q], msg_count(q, r->rank, m, scale), ncclUint32, q, r->comm, s));
    }
    if (m == 0) NCCL(ncclAllReduce(r->ar, r->ar, r->ar_count, ncclFloat, ncclSum, r->comm, r->s1));
  }
  NCCL(ncclSend(r->back, r->ring_count, ncclUint32, (r->rank + n - 1) % n, r->comm2, r->s1));
  NCCL(ncclRecv(r->back_in, r->ring_count, ncclUint32, (r->rank + 1) % n, r->comm2, r->s1));
  NCCL(ncclSend(r->ring, r->ring_count, ncclUint32, (r->rank + 1) % n, r->comm, r->s1));
  NCCL(ncclRecv(r->ring_in, r->ring_count, ncclUint32, (r->rank + n - 1) % n, r->comm, r->s1));
}

static void verify(rank_state *r, int n, size_t scale, int iter) {
  CUDA(cudaSetDevice(r->device));
  CUDA(cudaStreamSynchronize(r->s1));
  CUDA(cudaStreamSynchronize(r->s2));
  for (int m = 0; m < NMSG; m++)
    for (int p = 0; p < n; p++)
      expect(r->recv[m][p], msg_count(p, r->rank, m, scale), p, r->rank, m, iter, "message", scale);
  int prev = (r->rank + n - 1) % n;
  expect(r->ring_in, r->ring_count, prev, r->rank, 3, iter, "ring shift", scale);
  expect(r->back_in, r->ring_count, (r->rank + 1) % n, r->rank, 2, iter, "backward shift", scale);
  float *h = malloc(r->ar_count * sizeof *h);
  CUDA(cudaMemcpy(h, r->ar, r->ar_count * sizeof *h, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < r->ar_count; i++)
    if (h[i] != (float)(n * (n + 1) / 2 * (int)(i % 100))) {
      fprintf(stderr, "scale %zu iter %d: rank %d AllReduce element %zu: %g\n", scale, iter,
              r->rank, i, (double)h[i]);
      failures++;
      break;
    }
  free(h);
}

int main(int argc, char **argv) {
  int g = argc > 2 && !strcmp(argv[1], "-g") ? atoi(argv[2]) : 0;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("no GPU visible: skipped\n");
    return 77;
  }
  rank_state st[MAXG];
  memset(st, 0, sizeof st);
  int n, nlocal;
  if (g > 0) { /* one process, g GPUs */
    if (g > ndev || g > MAXG) {
      printf("-g %d: only %d GPUs: skipped\n", g, ndev);
      return 77;
    }
    n = nlocal = g;
    ncclComm_t comms[MAXG], comms2[MAXG];
    NCCL(ncclCommInitAll(comms, g, NULL));
    NCCL(ncclCommInitAll(comms2, g, NULL));
    for (int i = 0; i < g; i++)
      st[i] = (rank_state){.rank = i, .device = i, .comm = comms[i], .comm2 = comms2[i]};
  } else {
    n = env_int("WORLD_SIZE", 1);
    nlocal = 1;
    st[0].rank = env_int("RANK", 0);
    st[0].device = env_int("LOCAL_RANK", 0) % ndev;
    CUDA(cudaSetDevice(st[0].device));
    ncclUniqueId id;
    NCCL(ncclGetUniqueId(&id));
    NCCL(ncclCommInitRank(&st[0].comm, n, id, st[0].rank));
    NCCL(ncclCommSplit(st[0].comm, 0, st[0].rank, &st[0].comm2, NULL));
  }
  for (int i = 0; i < nlocal; i++) {
    CUDA(cudaSetDevice(st[i].device));
    CUDA(cudaStreamCreateWithFlags(&st[i].s1, cudaStreamNonBlocking));
    CUDA(cudaStreamCreateWithFlags(&st[i].s2, cudaStreamNonBlocking));
  }
  /* 4 B .. ~8 MiB per message: LL-free single chunks, many chunks per
   * channel, FIFOs that wrap around. */
  static const size_t scales[] = {1, 1000, 100000, 200000};
  for (size_t sc = 0; sc < sizeof scales / sizeof scales[0]; sc++) {
    size_t scale = scales[sc];
    for (int i = 0; i < nlocal; i++) setup(&st[i], n, scale);
    for (int iter = 0; iter < ITERS; iter++) {
      for (int i = 0; i < nlocal; i++) prepare(&st[i], n, scale, iter);
      NCCL(ncclGroupStart());
      for (int i = 0; i < nlocal; i++) issue(&st[i], n, scale);
      NCCL(ncclGroupEnd());
      for (int i = 0; i < nlocal; i++) verify(&st[i], n, scale, iter);
    }
    for (int i = 0; i < nlocal; i++) teardown(&st[i], n);
    printf("rank %d%s: scale %zu: %s\n", st[0].rank, nlocal > 1 ? "+" : "", scale,
           failures ? "FAILED" : "ok");
  }
  for (int i = 0; i < nlocal; i++) {
    CUDA(cudaSetDevice(st[i].device));
    CUDA(cudaStreamDestroy(st[i].s1));
    CUDA(cudaStreamDestroy(st[i].s2));
    NCCL(ncclCommDestroy(st[i].comm));
    NCCL(ncclCommDestroy(st[i].comm2));
  }
  printf("sendrecv: %d ranks%s: %s\n", n, nlocal > 1 ? " in one process" : "",
         failures ? "FAILED" : "all exact");
  return failures ? 1 : 0;
}
