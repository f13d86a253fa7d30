/*
 * abi_allreduce.c - a program built against NVIDIA's nccl.h (not ours) and
 * linked with Chorus's libnccl.so.2: drop-in compatibility end to end.
 *
 * The parent forks 4 processes before touching NCCL. Rank 0 calls
 * ncclGetUniqueId and writes the id into a pipe for each other rank; all four
 * create a communicator, all-reduce host buffers of every data type with
 * every operator (built-ins and PreMulSum), in place and out of place, check
 * every element against an independent reference, and destroy their
 * communicators. The parent bounds the run in time and kills only its own
 * children.
 */
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ref.h"

#define NRANKS 4
#define COUNT  4099

static int rank_main(int rank, int nranks, ncclUniqueId id) {
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetErrorString(r));
    return 1;
  }
  int count = -1, me = -1;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &me);
  if (count != nranks || me != rank) {
    fprintf(stderr, "rank %d: count %d rank %d\n", rank, count, me);
    return 1;
  }
  unsigned char *send = malloc(COUNT * 8), *recv = malloc(COUNT * 8);
  int failures = 0;
  for (int t = 0; t < ncclNumTypes; t++) {
    for (int opi = 0; opi <= 5; opi++) {
      for (int inplace = 0; inplace < 2; inplace++) {
        ncclDataType_t dt = (ncclDataType_t)t;
        double scalar = opi == 4 ? 1.0 / nranks : 2.0;
        for (size_t i = 0; i < COUNT; i++) {
          if (ref_is_float(dt))
            ref_set(dt, send, i, ref_input(dt, opi, rank, i));
          else
            ref_set_u64(dt, send, i, (uint64_t)(int64_t)ref_input(dt, opi, rank, i));
        }
        ncclRedOp_t op = (ncclRedOp_t)opi;
        unsigned char s[8];
        if (opi == 5) {
          if (ref_is_float(dt))
            ref_set(dt, s, 0, ref_premul_scalar(rank));
          else
            ref_set_u64(dt, s, 0, (uint64_t)ref_premul_scalar(rank));
          if (ncclRedOpCreatePreMulSum(&op, s, dt, ncclScalarHostImmediate, comm) != ncclSuccess)
            return 1;
        }
        void *out = inplace ? (void *)send : (void *)recv;
        r = ncclAllReduce(send, out, COUNT, dt, op, comm, (cudaStream_t)0);
        if (opi == 5) ncclRedOpDestroy(op, comm);
        if (r != ncclSuccess) {
          fprintf(stderr, "rank %d: ncclAllReduce: %s (%s)\n", rank, ncclGetErrorString(r),
                  ncclGetLastError(comm));
          return 1;
        }
        char what[64];
        snprintf(what, sizeof what, "rank %d type %d op %d %s", rank, t, opi,
                 inplace ? "in place" : "out of place");
        failures += ref_check(dt, opi, nranks, out, COUNT, scalar, what) != 0;
      }
    }
  }
  free(send);
  free(recv);
  r = ncclCommDestroy(comm);
  if (r != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

int main(void) {
  int pipes[NRANKS][2];
  pid_t pids[NRANKS];
  for (int i = 0; i < NRANKS; i++)
    if (pipe(pipes[i]) != 0) return 2;
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  for (int rank = 0; rank < NRANKS; rank++) {
    pids[rank] = fork();
    if (pids[rank] != 0) continue;
    ncclUniqueId id;
    if (rank == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess) _exit(1);
      for (int p = 1; p < NRANKS; p++)
        if (write(pipes[p][1], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
    } else if (read(pipes[rank][0], &id, sizeof id) != (ssize_t)sizeof id) {
      _exit(1);
    }
    int rc = rank_main(rank, NRANKS, id);
    fflush(NULL);
    _exit(rc);
  }
  int failed = 0, left = NRANKS;
  time_t deadline = time(NULL) + 120;
  while (left > 0 && time(NULL) < deadline) {
    for (int i = 0; i < NRANKS; i++) {
      int st;
      if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
        pids[i] = 0;
        left--;
      }
    }
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < NRANKS; i++)
    if (pids[i] > 0) {
      fprintf(stderr, "rank %d (pid %d) timed out; killing it\n", i, (int)pids[i]);
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
      failed++;
    }
  printf("abi_allreduce: %d ranks, %s\n", NRANKS, failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
