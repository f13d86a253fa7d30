/*
 * dump_bytes.c - calls of known sizes, then the state dump
 * (dump_check.py reads it): N ranks as threads on one communicator each
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

#define SEND_BYTES   1000
#define GATHER_COUNT 3000
#define REDUCE_COUNT 5000

typedef struct arg {
  int rank, n, rc;
  ncclUniqueId id;
  pthread_barrier_t *bar;
} arg;

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

static void *rank_main(void *p) {
  arg *a = p;
  ncclComm_t comm;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "counted";
  if (ncclCommInitRankConfig(&comm, a->n, a->id, a->rank, &cfg) != ncclSuccess) {
    a->rc = 1;
    return NULL;
  }
  a->rc = calls(comm, a->rank, a->n);
  pthread_barrier_wait(a->bar);
  if (a->rank == 0) {
    const char *path = getenv("CHORUS_DUMP_FILE");
    if (!path || chorusDumpState() != 0) a->rc = 1;
    for (int i = 0; i < 1000 && path && access(path, F_OK) != 0; i++) {
      const struct timespec t = {0, 10 * 1000000L};
      nanosleep(&t, NULL);
    }
    if (path && access(path, F_OK) != 0) printf("no dump at %s\n", path), a->rc = 1;
  }
  pthread_barrier_wait(a->bar);
  ncclCommDestroy(comm);
  return NULL;
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 3;
  ncclUniqueId id;
  if (n < 2 || n > 16 || ncclGetUniqueId(&id) != ncclSuccess) return 2;
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)n);
  pthread_t t[16];
  arg a[16];
  for (int r = 0; r < n; r++) {
    a[r] = (arg){r, n, 0, id, &bar};
    pthread_create(&t[r], NULL, rank_main, &a[r]);
  }
  int rc = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(t[r], NULL);
    rc |= a[r].rc;
  }
  pthread_barrier_destroy(&bar);
  printf("%s\n", rc ? "FAIL" : "ok");
  return rc;
}
