/*
 * dump_bytes.c - calls of known sizes, then the state dump
 * (dump_check.py reads it): N ranks as threads (tests/harness, which
 * bounds them in time) on one communicator each
 * Send SEND_BYTES to the next rank and receive from the previous (one
 * group), then AllGather GATHER_COUNT floats each and AllReduce
 * REDUCE_COUNT floats; results checked; chorusDumpState (the file is
 * CHORUS_DUMP_FILE), waiting for the file before the ranks destroy.
 * usage: dump_bytes N
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "chorus.h"
#include "nccl.h"
#include "spawn.h"

#define SEND_BYTES   1000
#define GATHER_COUNT 3000
#define REDUCE_COUNT 5000

/* The ranks meet before the dump and after it (threads of this process). */
static pthread_barrier_t bar;

static int calls(ncclComm_t comm, int rank, int n) {
  char s[SEND_BYTES], r[SEND_BYTES];
  float *g = malloc(sizeof(float) * GATHER_COUNT * (size_t)n), x[REDUCE_COUNT];
  float *mine = malloc(sizeof(float) * GATHER_COUNT);
  if (!g || !mine) return 1;
  for (int i = 0; i < SEND_BYTES; i++) s[i] = (char)(rank + i);
  for (int i = 0; i < GATHER_COUNT; i++) mine[i] = (float)(rank * GATHER_COUNT + i);
  for (int i = 0; i < REDUCE_COUNT; i++) x[i] = (float)(rank + i);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  ncclResult_t res = ncclGroupStart();
  if (res == ncclSuccess) res = ncclSend(s, SEND_BYTES, ncclInt8, next, comm, NULL);
  if (res == ncclSuccess) res = ncclRecv(r, SEND_BYTES, ncclInt8, prev, comm, NULL);
  if (res == ncclSuccess) res = ncclGroupEnd();
  if (res == ncclSuccess) res = ncclAllGather(mine, g, GATHER_COUNT, ncclFloat, comm, NULL);
  if (res == ncclSuccess) res = ncclAllReduce(x, x, REDUCE_COUNT, ncclFloat, ncclSum, comm, NULL);
  int wrong = res != ncclSuccess;
  for (int i = 0; i < SEND_BYTES && !wrong; i++) wrong = r[i] != (char)(prev + i);
  for (int i = 0; i < GATHER_COUNT * n && !wrong; i++) wrong = g[i] != (float)i;
  for (int i = 0; i < REDUCE_COUNT && !wrong; i++) wrong = x[i] != (float)(n * i + n * (n - 1) / 2);
  if (wrong) printf("rank %d: wrong results (%s)\n", rank, ncclGetErrorString(res));
  free(g);
  free(mine);
  return wrong;
}

static int rank_main(int rank, int n, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "counted";
  if (ncclCommInitRankConfig(&comm, n, id, rank, &cfg) != ncclSuccess) return 1;
  int rc = calls(comm, rank, n);
  pthread_barrier_wait(&bar);
  if (rank == 0) {
    const char *path = getenv("CHORUS_DUMP_FILE");
    if (!path || chorusDumpState() != 0) rc = 1;
    for (int i = 0; i < 1000 && path && access(path, F_OK) != 0; i++) {
      const struct timespec t = {0, 10 * 1000000L};
      nanosleep(&t, NULL);
    }
    if (path && access(path, F_OK) != 0) printf("no dump at %s\n", path), rc = 1;
  }
  pthread_barrier_wait(&bar);
  ncclCommDestroy(comm);
  return rc;
}

static const harness_case cases[] = {{"counted", rank_main}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  const int n = argc > 1 ? atoi(argv[1]) : 3;
  if (n < 2 || n > 16) return 2;
  pthread_barrier_init(&bar, NULL, (unsigned)n);
  const int failed = harness_spawn(HARNESS_THREADS, n, "counted", "", 60);
  pthread_barrier_destroy(&bar);
  printf("%s\n", failed ? "FAIL" : "ok");
  return failed ? 1 : 0;
}
