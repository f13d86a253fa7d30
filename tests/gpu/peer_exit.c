/*
 * peer_exit.c - a rank whose process exits becomes an error on the rank
 * waiting for it at once, not at the deadline.
 *
 * One process per GPU, two or more (started by chorusrun): every rank
 * joins the communicator, then the last rank exits a second later (status
 * 0, without destroying anything) while rank 0 waits in an AllReduce the
 * last rank never joins. With CHORUS_OP_TIMEOUT=120, rank 0's kernel must
 * end within 10 s, and ncclCommGetAsyncError must give ncclRemoteError
 * with a message naming the rank that exited (and its host, where it is
 * another). Ranks in between wait for the end and leave. Exit status 77
 * (skip) where no GPU is visible, 0 with one rank. The AllReduce has 1024
 * floats, or argv[1] (large calls across hosts move in pieces).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_test.h"
#include "nccl.h"

int main(int argc, char **argv) {
  setenv("CHORUS_OP_TIMEOUT", "120", 1);
  const size_t count = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  const int joined = join_peers(&rank, &n, &comm, &s);
  if (joined >= 0) return joined;
  if (rank == n - 1) { /* gone, communicator and all, once the others are past init */
    sleep(1);
    _exit(0);
  }
  if (rank != 0) {
    sleep(2);
    ncclCommAbort(comm);
    return 0;
  }
  float *buf;
  CUDA(cudaMalloc((void **)&buf, count * sizeof(float)));
  NCCL(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, s));
  double t0 = now();
  while (cudaStreamQuery(s) == cudaErrorNotReady && now() - t0 < 10) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  double took = now() - t0;
  EXPECT(took < 10, "rank 0's kernel still waits 10 s after rank %d exited", n - 1);
  ncclResult_t async = ncclSuccess;
  NCCL(ncclCommGetAsyncError(comm, &async));
  const char *msg = ncclGetLastError(comm);
  /* On this host the life line says the process exited; on another
   * host (NCCL_HOSTID) its connection closes, and the message names the
   * rank and its host. */
  char want[32], across[32];
  snprintf(want, sizeof want, "rank %d exited", n - 1);
  snprintf(across, sizeof across, "to rank %d on host", n - 1);
  EXPECT(async == ncclRemoteError, "async error %s, want ncclRemoteError",
         ncclGetErrorString(async));
  EXPECT(msg && (strstr(msg, want) || strstr(msg, across)),
         "the message does not say \"%s\" or \"%s\": \"%s\"", want, across, msg ? msg : "");
  printf("peer exit: kernel ended after %.2f s: %s\n", took, msg ? msg : "");
  ncclCommAbort(comm);
  return failures ? 1 : 0;
}
