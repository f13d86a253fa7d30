/*
 * host_fault.c - one rank of a job that loses a host while it runs
 * (host_fault.sh cuts the host's link or kills its processes).
 *
 * RANK, WORLD_SIZE and NCCL_COMM_ID as for net_rank.c; LOST_FROM: the
 * first rank of the lost host, which holds ranks LOST_FROM..WORLD_SIZE-1;
 * READY_FILE: rank 0 creates it once three calls have passed.
 *
 * Every rank AllReduces 64K floats in a loop, at most 120 s. A survivor's
 * call must fail with ncclRemoteError, within 40 s of its last good call,
 * and say which host was lost ("host 1"); ncclCommShrink without the lost
 * ranks (NCCL_SHRINK_ABORT) must then give a communicator whose AllReduce
 * is right; it is destroyed, the old one aborted. Survivors print
 * "survivor R: failed after S s: MESSAGE" and "survivor R: shrunk to N
 * ranks: ok"; exit status 0 only then. Ranks of the lost host loop until
 * they are killed or fail (status 3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "spawn.h"

#define COUNT    65536
#define LOOP_S   120.0
#define DETECT_S 40.0

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The shrunk communicator of the survivors: one AllReduce, checked. */
static int check_shrunk(int rank, ncclComm_t old, int lost_from, int nranks, float *buf) {
  int nexcl = nranks - lost_from;
  int *excl = malloc((size_t)nexcl * sizeof *excl);
  for (int i = 0; i < nexcl; i++) excl[i] = lost_from + i;
  ncclComm_t comm;
  ncclResult_t r = ncclCommShrink(old, excl, nexcl, &comm, NULL, NCCL_SHRINK_ABORT);
  free(excl);
  if (r != ncclSuccess) {
    printf("survivor %d: ncclCommShrink failed (%d): %s\n", rank, (int)r, ncclGetLastError(old));
    return 1;
  }
  int n = 0;
  ncclCommCount(comm, &n);
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(rank + 1);
  r = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
  const float want = (float)(n * (n + 1) / 2);
  int wrong = 0;
  for (int i = 0; i < COUNT && r == ncclSuccess; i++) wrong += buf[i] != want;
  if (r != ncclSuccess || wrong || n != lost_from) {
    printf("survivor %d: the shrunk communicator (%d ranks) failed: %s, %d wrong\n", rank, n,
           ncclGetErrorString(r), wrong);
    ncclCommDestroy(comm);
    return 1;
  }
  ncclCommDestroy(comm);
  printf("survivor %d: shrunk to %d ranks: ok\n", rank, n);
  return 0;
}

int main(void) {
  const char *ls = getenv("LOST_FROM"), *ready = getenv("READY_FILE");
  if (!ls || !ready) {
    fprintf(stderr, "host_fault: set LOST_FROM and READY_FILE\n");
    return 2;
  }
  int rank, nranks;
  ncclComm_t comm;
  const int joined = harness_join_env("host_fault", &rank, &nranks, &comm);
  if (joined != 0) return joined;
  const int lost_from = atoi(ls), survivor = rank < lost_from;
  float *buf = malloc(COUNT * sizeof *buf);
  for (int i = 0; i < COUNT; i++) buf[i] = 1.0f;
  const double start = now_s();
  double last_good = start;
  ncclResult_t r = ncclSuccess;
  for (long calls = 0; now_s() - start < LOOP_S; calls++) {
    r = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclMax, comm, NULL);
    if (r != ncclSuccess) break;
    last_good = now_s();
    if (calls == 3 && rank == 0) {
      FILE *f = fopen(ready, "w");
      if (f) fclose(f);
    }
  }
  const double after = now_s() - last_good;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", ncclGetLastError(comm));
  int rc = 0;
  if (!survivor) {
    printf("lost rank %d: %s\n", rank, r == ncclSuccess ? "never failed" : msg);
    rc = 3;
  } else if (r == ncclSuccess) {
    printf("survivor %d: FAIL: no call failed in %.0f s\n", rank, LOOP_S);
    rc = 1;
  } else {
    printf("survivor %d: failed after %.1f s: %s\n", rank, after, msg);
    if (r != ncclRemoteError) {
      printf("survivor %d: FAIL: result %d (%s), not ncclRemoteError\n", rank, (int)r,
             ncclGetErrorString(r));
      rc = 1;
    }
    if (after > DETECT_S) {
      printf("survivor %d: FAIL: %.1f s to notice, more than %.0f\n", rank, after, DETECT_S);
      rc = 1;
    }
    if (!strstr(msg, "host 1")) {
      printf("survivor %d: FAIL: the message does not name host 1\n", rank);
      rc = 1;
    }
    if (rc == 0) rc = check_shrunk(rank, comm, lost_from, nranks, buf);
  }
  ncclCommAbort(comm);
  free(buf);
  return rc;
}
