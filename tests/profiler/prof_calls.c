/*
 * prof_calls.c - calls for a profiler plugin to see (prof_check.py reads
 * what the test plugin logged): N ranks as threads (tests/harness, which
 * bounds them in time), each issuing
 * AllReduce (1024 floats, outside a group), then in one group Broadcast
 * (256 int32 from root 0) and a Send and Recv of 64 bytes around the
 * ring, then AllReduce again; with "paced", PACED more AllReduces of
 * 2048 << i floats, GAP_MS apart and before destroy (time for a plugin that
 * writes on its own clock, as NVIDIA's Inspector does, to see each); results
 * checked; destroy. With "all", one thread makes N communicators with
 * ncclCommInitAll and issues the same calls on all of them, each step one
 * group (as nccl-tests' -g does): a plugin sees one GroupApi per group.
 * With "net", the ranks are processes (HARNESS_HOSTS makes them hosts of
 * their own, so that messages cross the network) and add a group of a
 * Send and a Recv of BIG bytes around the ring.
 * usage: prof_calls N [paced|all|net]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "spawn.h"

#define PACED  4
#define GAP_MS 30
#define BIG    (1 << 20)

/* Send and Recv of BIG bytes around the ring, checked: 0 when right. */
static int big_p2p(int rank, int n, ncclComm_t comm) {
  char *s = malloc(BIG), *r = malloc(BIG);
  int wrong = !s || !r;
  for (int i = 0; i < BIG && !wrong; i++) s[i] = (char)(rank * 7 + i);
  ncclResult_t res = wrong ? ncclSystemError : ncclGroupStart();
  if (res == ncclSuccess) res = ncclSend(s, BIG, ncclInt8, (rank + 1) % n, comm, NULL);
  if (res == ncclSuccess) res = ncclRecv(r, BIG, ncclInt8, (rank + n - 1) % n, comm, NULL);
  if (!wrong) {
    const ncclResult_t end = ncclGroupEnd();
    if (res == ncclSuccess) res = end;
  }
  wrong = res != ncclSuccess;
  const int from = (rank + n - 1) % n;
  for (int i = 0; i < BIG && !wrong; i++) wrong = r[i] != (char)(from * 7 + i);
  free(s);
  free(r);
  return wrong;
}

static int calls(int rank, int n, ncclUniqueId id, const char *param) {
  const int paced = strcmp(param, "paced") == 0;
  ncclComm_t comm;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "profiled";
  if (ncclCommInitRankConfig(&comm, n, id, rank, &cfg) != ncclSuccess) return 1;
  float x[1024];
  int b[256];
  char s[64], r[64];
  for (int i = 0; i < 1024; i++) x[i] = (float)rank;
  for (int i = 0; i < 256; i++) b[i] = rank == 0 ? i : -1;
  for (int i = 0; i < 64; i++) s[i] = (char)rank;
  ncclResult_t res = ncclAllReduce(x, x, 1024, ncclFloat, ncclSum, comm, NULL);
  if (res == ncclSuccess) res = ncclGroupStart();
  if (res == ncclSuccess) res = ncclBroadcast(b, b, 256, ncclInt32, 0, comm, NULL);
  if (res == ncclSuccess) res = ncclSend(s, 64, ncclInt8, (rank + 1) % n, comm, NULL);
  if (res == ncclSuccess) res = ncclRecv(r, 64, ncclInt8, (rank + n - 1) % n, comm, NULL);
  if (res == ncclSuccess) res = ncclGroupEnd();
  if (res == ncclSuccess) res = ncclAllReduce(x, x, 1024, ncclFloat, ncclSum, comm, NULL);
  const float want = (float)(n * (n * (n - 1) / 2));
  int wrong = res != ncclSuccess;
  for (int i = 0; i < 1024 && !wrong; i++) wrong = x[i] != want;
  for (int i = 0; i < 256 && !wrong; i++) wrong = b[i] != i;
  for (int i = 0; i < 64 && !wrong; i++) wrong = r[i] != (char)((rank + n - 1) % n);
  if (!wrong && strcmp(param, "net") == 0) wrong = big_p2p(rank, n, comm);
  for (int i = 0; i < PACED && paced && !wrong; i++) {
    const size_t count = (size_t)2048 << i;
    float *mine = malloc(count * sizeof *mine);
    for (size_t j = 0; j < count && mine; j++) mine[j] = (float)(rank + 1);
    const struct timespec gap = {0, GAP_MS * 1000000L};
    nanosleep(&gap, NULL);
    res = mine ? ncclAllReduce(mine, mine, count, ncclFloat, ncclSum, comm, NULL) : ncclSystemError;
    wrong = res != ncclSuccess;
    for (size_t j = 0; j < count && !wrong; j++) wrong = mine[j] != (float)(n * (n + 1) / 2);
    free(mine);
    if (i == PACED - 1) nanosleep(&gap, NULL); /* the last one too, before finalize */
  }
  if (wrong) printf("rank %d: wrong results (%s)\n", rank, ncclGetErrorString(res));
  ncclCommDestroy(comm);
  return wrong;
}

/* The calls above, from one thread for n communicators: a group per step. */
static int calls_all(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)rank, (void)nranks, (void)id;
  const int n = atoi(param);
  ncclComm_t comm[4];
  float x[4][1024];
  int b[4][256];
  char s[4][64], r[4][64];
  if (n < 2 || n > 4 || ncclCommInitAll(comm, n, NULL) != ncclSuccess) return 1;
  for (int k = 0; k < n; k++) {
    for (int i = 0; i < 1024; i++) x[k][i] = (float)k;
    for (int i = 0; i < 256; i++) b[k][i] = k == 0 ? i : -1;
    for (int i = 0; i < 64; i++) s[k][i] = (char)k;
  }
  ncclResult_t res = ncclSuccess;
  for (int step = 0; step < 3 && res == ncclSuccess; step++) {
    res = ncclGroupStart();
    for (int k = 0; k < n && res == ncclSuccess; k++) {
      if (step != 1) {
        res = ncclAllReduce(x[k], x[k], 1024, ncclFloat, ncclSum, comm[k], NULL);
        continue;
      }
      res = ncclBroadcast(b[k], b[k], 256, ncclInt32, 0, comm[k], NULL);
      if (res == ncclSuccess) res = ncclSend(s[k], 64, ncclInt8, (k + 1) % n, comm[k], NULL);
      if (res == ncclSuccess) res = ncclRecv(r[k], 64, ncclInt8, (k + n - 1) % n, comm[k], NULL);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (res == ncclSuccess) res = end;
  }
  const float want = (float)(n * (n * (n - 1) / 2));
  int wrong = res != ncclSuccess;
  for (int k = 0; k < n; k++) {
    for (int i = 0; i < 1024 && !wrong; i++) wrong = x[k][i] != want;
    for (int i = 0; i < 256 && !wrong; i++) wrong = b[k][i] != i;
    for (int i = 0; i < 64 && !wrong; i++) wrong = r[k][i] != (char)((k + n - 1) % n);
  }
  if (wrong) printf("all: wrong results (%s)\n", ncclGetErrorString(res));
  for (int k = 0; k < n; k++) ncclCommDestroy(comm[k]);
  return wrong;
}

static const harness_case cases[] = {{"calls", calls}, {"all", calls_all}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  const int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 2 || n > 16) return 2;
  const int all = argc > 2 && strcmp(argv[2], "all") == 0;
  const int net = argc > 2 && strcmp(argv[2], "net") == 0;
  const int failed = all ? harness_spawn_ex(HARNESS_THREADS, 1, "all", argv[1], 60, 0)
                         : harness_spawn(net ? HARNESS_PROCS : HARNESS_THREADS, n, "calls",
                                         argc > 2 ? argv[2] : "", 60);
  printf("%s\n", failed ? "FAIL" : "ok");
  return failed ? 1 : 0;
}
