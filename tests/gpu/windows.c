/*
 * windows.c - zero-copy collectives through symmetric windows
 * (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC), one process per
 * GPU (started by chorusrun).
 *
 * Every rank takes two ncclMemAlloc buffers and registers each as a
 * symmetric window (and a third, default one, that must change nothing).
 * With CHORUS_TUNE=allreduce|allgather|reducescatter:zerocopy every
 * AllReduce, AllGather and ReduceScatter whose buffers sit in windows runs
 * zero-copy. Checked
 * against exact host references (small integers in floats, so sums are
 * exact): odd counts, buffers at an offset inside their windows, in place
 * and out of place, and an AllReduce captured in a CUDA graph and replayed
 * with new inputs. Then buffers at different offsets on different ranks:
 * every rank must fail at once (not at the deadline) with
 * ncclInvalidUsage and a message naming the offsets. Exit 77 where no GPU
 * is visible, 0 with one rank.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

#define WIN_BYTES ((size_t)16 << 20)

static float input(int rank, size_t i) {
  return (float)((rank + 1) * ((int)(i % 97) - 48));
}

static void fill(float *dev, size_t count, int rank, size_t first) {
  float *h = malloc(count * sizeof *h);
  for (size_t i = 0; i < count; i++) h[i] = input(rank, first + i);
  CUDA(cudaMemcpy(dev, h, count * sizeof *h, cudaMemcpyHostToDevice));
  /* A copy from pageable memory may return before its last bytes land, and
   * the collectives run on a non-blocking stream: without this, the tail of
   * a 2 MiB fill once landed after an in-place ReduceScatter had written
   * its result there (2xH200). */
  CUDA(cudaDeviceSynchronize());
  free(h);
}

/* Elements of dev that differ from want(i) (reported once). */
static size_t compare(const char *what, const float *dev, size_t count,
                      float (*want)(size_t, void *), void *arg) {
  float *h = malloc(count * sizeof *h);
  CUDA(cudaMemcpy(h, dev, count * sizeof *h, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < count; i++)
    if (h[i] != want(i, arg)) {
      if (!bad) fprintf(stderr, "%s: element %zu is %g, want %g\n", what, i, h[i], want(i, arg));
      bad++;
    }
  free(h);
  return bad;
}

typedef struct ref {
  int n, rank;
  size_t count, base; /* AllGather: elements per rank; ReduceScatter: offset of this rank's */
  int scale;          /* graph replays: inputs times scale */
} ref;

static float sum_of(size_t i, void *arg) { /* AllReduce (and ReduceScatter from base) */
  const ref *r = arg;
  double s = 0;
  for (int p = 0; p < r->n; p++) s += (double)input(p, r->base + i) * r->scale;
  return (float)s;
}
static float gathered(size_t i, void *arg) {
  const ref *r = arg;
  return input((int)(i / r->count), i % r->count);
}

int main(void) {
  setenv("CHORUS_TUNE", "allreduce|allgather|reducescatter:zerocopy", 1);
  setenv("CHORUS_OP_TIMEOUT", "120", 1);
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  const int joined = join_peers(&rank, &n, &comm, &s);
  if (joined >= 0) return joined;
  char *a, *b, *c;
  NCCL(ncclMemAlloc((void **)&a, WIN_BYTES));
  NCCL(ncclMemAlloc((void **)&b, WIN_BYTES));
  NCCL(ncclMemAlloc((void **)&c, 1 << 20));
  ncclWindow_t wa, wb, wc;
  NCCL(ncclCommWindowRegister(comm, a, WIN_BYTES, &wa, NCCL_WIN_COLL_SYMMETRIC));
  NCCL(ncclCommWindowRegister(comm, b, WIN_BYTES, &wb, NCCL_WIN_COLL_SYMMETRIC));
  NCCL(ncclCommWindowRegister(comm, c, 1 << 20, &wc, NCCL_WIN_DEFAULT));

  /* AllReduce: odd counts, at an offset, out of place and in place. */
  const size_t counts[] = {1, 5, 4099, 65536 + 7, 1000003};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    const size_t cnt = counts[k];
    float *send = (float *)(a + 4096), *recv = (float *)(b + 8192);
    fill(send, cnt, rank, 0);
    NCCL(ncclAllReduce(send, recv, cnt, ncclFloat, ncclSum, comm, s));
    CUDA(cudaStreamSynchronize(s));
    ref r = {n, rank, cnt, 0, 1};
    char what[64];
    snprintf(what, sizeof what, "AllReduce of %zu floats", cnt);
    EXPECT(compare(what, recv, cnt, sum_of, &r) == 0, "%s: wrong", what);
    fill(recv, cnt, rank, 0);
    NCCL(ncclAllReduce(recv, recv, cnt, ncclFloat, ncclSum, comm, s));
    CUDA(cudaStreamSynchronize(s));
    snprintf(what, sizeof what, "in-place AllReduce of %zu floats", cnt);
    EXPECT(compare(what, recv, cnt, sum_of, &r) == 0, "%s: wrong", what);
  }
  /* AllGather and ReduceScatter (blocks of whole 16-byte units). */
  const size_t per[] = {4, 1024, 262144 + 4};
  for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
    const size_t cnt = per[k];
    float *recv = (float *)(b + 16), *send = (float *)(a + 4096);
    fill(send, cnt, rank, 0);
    NCCL(ncclAllGather(send, recv, cnt, ncclFloat, comm, s));
    CUDA(cudaStreamSynchronize(s));
    ref r = {n, rank, cnt, 0, 1};
    EXPECT(compare("AllGather", recv, cnt * (size_t)n, gathered, &r) == 0, "AllGather of %zu", cnt);
    fill(recv + (size_t)rank * cnt, cnt, rank, 0); /* in place */
    NCCL(ncclAllGather(recv + (size_t)rank * cnt, recv, cnt, ncclFloat, comm, s));
    CUDA(cudaStreamSynchronize(s));
    EXPECT(compare("in-place AllGather", recv, cnt * (size_t)n, gathered, &r) == 0,
           "in-place AllGather of %zu", cnt);
    fill(send, cnt * (size_t)n, rank, 0);
    NCCL(ncclReduceScatter(send, recv, cnt, ncclFloat, ncclSum, comm, s));
    CUDA(cudaStreamSynchronize(s));
    r.base = (size_t)rank * cnt;
    EXPECT(compare("ReduceScatter", recv, cnt, sum_of, &r) == 0, "ReduceScatter of %zu", cnt);
    fill(send, cnt * (size_t)n, rank, 0);
    NCCL(ncclReduceScatter(send, send + (size_t)rank * cnt, cnt, ncclFloat, ncclSum, comm, s));
    CUDA(cudaStreamSynchronize(s));
    EXPECT(compare("in-place ReduceScatter", send + (size_t)rank * cnt, cnt, sum_of, &r) == 0,
           "in-place ReduceScatter of %zu", cnt);
  }
  /* A CUDA graph of three AllReduces, replayed with new inputs. */
  {
    const size_t cnt = 300001;
    float *send = (float *)a, *recv = (float *)b;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < 3; k++) NCCL(ncclAllReduce(send, recv, cnt, ncclFloat, ncclSum, comm, s));
    CUDA(cudaStreamEndCapture(s, &graph));
    CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 1; rep <= 3; rep++) {
      float *h = malloc(cnt * sizeof *h);
      for (size_t i = 0; i < cnt; i++) h[i] = input(rank, i) * (float)rep;
      CUDA(cudaMemcpy(send, h, cnt * sizeof *h, cudaMemcpyHostToDevice));
      free(h);
      CUDA(cudaGraphLaunch(exec, s));
      CUDA(cudaStreamSynchronize(s));
      ref r = {n, rank, cnt, 0, rep};
      EXPECT(compare("graph AllReduce", recv, cnt, sum_of, &r) == 0, "graph replay %d", rep);
    }
    CUDA(cudaGraphExecDestroy(exec));
    CUDA(cudaGraphDestroy(graph));
  }
  printf("rank %d: windows: AllReduce, AllGather, ReduceScatter and a graph checked\n", rank);

  /* Buffers at different offsets on different ranks: a symmetric window's
   * promise broken. Every rank must stop at once, naming the offsets. */
  {
    float *send = (float *)a, *recv = (float *)(b + (rank == 0 ? 0 : 4096));
    NCCL(ncclAllReduce(send, recv, 1 << 16, ncclFloat, ncclSum, comm, s));
    const double t0 = now();
    while (cudaStreamQuery(s) == cudaErrorNotReady && now() - t0 < 20) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    const double took = now() - t0;
    ncclResult_t async = ncclSuccess;
    NCCL(ncclCommGetAsyncError(comm, &async));
    const char *msg = ncclGetLastError(comm);
    EXPECT(took < 10, "rank %d: the kernel still waits %.1f s after buffers at other offsets", rank,
           took);
    EXPECT(async == ncclInvalidUsage, "rank %d: async error %s, want ncclInvalidUsage", rank,
           ncclGetErrorString(async));
    EXPECT(msg && strstr(msg, "offset"), "rank %d: the message names no offset: \"%s\"", rank,
           msg ? msg : "");
    printf("offset mismatch: rank %d after %.2f s: %s\n", rank, took, msg ? msg : "");
  }
  NCCL(ncclCommWindowDeregister(comm, wa));
  NCCL(ncclCommWindowDeregister(comm, wb));
  NCCL(ncclCommWindowDeregister(comm, wc));
  EXPECT(ncclCommWindowDeregister(comm, wa) == ncclInvalidArgument,
         "a window deregistered twice was accepted");
  ncclCommAbort(comm);
  NCCL(ncclMemFree(a));
  NCCL(ncclMemFree(b));
  NCCL(ncclMemFree(c));
  if (failures) fprintf(stderr, "rank %d: %d failure(s)\n", rank, failures);
  return failures ? 1 : 0;
}
