/*
 * p2p_mismatch.c - a Send and its Recv whose counts differ, across hosts
 * where large ones are cut across lanes by their own size, are an error
 * that names the peer within seconds, and neither rank's stream waits on.
 *
 * Usage: gpu_p2p_mismatch SEND RECV: rank 0 sends SEND floats to rank 1,
 * which receives RECV floats from rank 0 (one rank per host, started by
 * chorusrun --hosts 2). One of 4 MiB against one of 1 MiB: the first cut
 * into shares (gpu/proxy.c run_p2p_lanes) whose first has the other's
 * size; only the count the messages carry tells them apart. Rank 1 must
 * see an ncclInvalidUsage naming rank 0 within 10 s (CHORUS_OP_TIMEOUT is
 * 120), then aborts; rank 0's stream must end within 20 s, whatever its
 * result. Exit status 77 (skip) where no GPU is visible, 0 with one rank.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

int main(int argc, char **argv) {
  setenv("CHORUS_OP_TIMEOUT", "120", 1);
  if (argc != 3) {
    fprintf(stderr, "usage: %s SEND_COUNT RECV_COUNT\n", argv[0]);
    return 2;
  }
  const size_t sends = strtoul(argv[1], NULL, 10), recvs = strtoul(argv[2], NULL, 10);
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  const int joined = join_peers(&rank, &n, &comm, &s);
  if (joined >= 0) return joined;
  float *buf = NULL;
  const size_t count = rank == 0 ? sends : recvs;
  CUDA(cudaMalloc((void **)&buf, count * sizeof(float)));
  CUDA(cudaMemset(buf, 0, count * sizeof(float)));
  ncclResult_t r = ncclSuccess;
  if (rank == 0) r = ncclSend(buf, sends, ncclFloat, 1, comm, s);
  if (rank == 1) r = ncclRecv(buf, recvs, ncclFloat, 0, comm, s);
  const double took = wait_stream(s, rank == 1 ? 10 : 20);
  ncclResult_t async = ncclSuccess;
  NCCL(ncclCommGetAsyncError(comm, &async));
  const char *msg = ncclGetLastError(comm);
  if (r == ncclSuccess) r = async;
  if (rank == 1) {
    EXPECT(took >= 0, "rank 1's stream still waits 10 s after its Recv of %zu floats", recvs);
    EXPECT(r == ncclInvalidUsage, "rank 1: %s, want ncclInvalidUsage", ncclGetErrorString(r));
    EXPECT(msg && strstr(msg, "rank 0"), "rank 1's message does not name rank 0: \"%s\"",
           msg ? msg : "");
  } else if (rank == 0) {
    EXPECT(took >= 0, "rank 0's stream still waits 20 s after its Send of %zu floats", sends);
  }
  printf("rank %d: stream ended after %.2f s, %s: %s\n", rank, took, ncclGetErrorString(r),
         msg ? msg : "");
  /* The stream may still wait: abort first, then free. */
  ncclCommAbort(comm);
  if (took >= 0) cudaFree(buf);
  return failures ? 1 : 0;
}
