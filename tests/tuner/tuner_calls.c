/*
 * tuner_calls.c - calls for a tuner plugin to choose (tuner_check.py reads
 * what the test plugin logged and which algorithms ran): N ranks of host
 * memory, as threads or processes (tests/harness, which bounds them in
 * time), each issuing AllReduce (4096 floats), AllGather (1024 floats a
 * rank), Broadcast (4096 floats from root 0) and AlltoAll (256 floats a
 * peer), twice, every result checked; destroy. With "initfail" each rank
 * expects its init to fail (a plugin whose init fails): with
 * ncclInternalError, the plugin's, or ncclRemoteError where a peer's
 * failure reached it first.
 * usage: tuner_calls N [threads|procs] [initfail]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "spawn.h"

#define AR  4096
#define AG  1024
#define BC  4096
#define A2A 256

static int calls(int rank, int n, ncclUniqueId id, const char *param) {
  ncclComm_t comm = NULL;
  const ncclResult_t init = ncclCommInitRank(&comm, n, id, rank);
  if (init != ncclSuccess && comm) ncclCommAbort(comm); /* what it holds goes */
  if (strcmp(param, "initfail") == 0) {
    /* Its own plugin's error, or a peer's first (the bootstrap names it). */
    if (init == ncclInternalError || init == ncclRemoteError) return 0;
    printf("rank %d: init returned %d, not ncclInternalError or ncclRemoteError\n", rank,
           (int)init);
    if (init == ncclSuccess) ncclCommDestroy(comm);
    return 1;
  }
  if (init != ncclSuccess) return 1;
  float *x = malloc(AR * sizeof *x), *g = malloc((size_t)AG * n * sizeof *g),
        *b = malloc(BC * sizeof *b), *s = malloc((size_t)A2A * n * sizeof *s),
        *r = malloc((size_t)A2A * n * sizeof *r);
  int wrong = !x || !g || !b || !s || !r;
  ncclResult_t res = ncclSuccess;
  for (int round = 0; round < 2 && !wrong && res == ncclSuccess; round++) {
    for (int i = 0; i < AR; i++) x[i] = (float)(rank + i % 7);
    for (int i = 0; i < BC; i++) b[i] = rank == 0 ? (float)i : -1.0f;
    for (int i = 0; i < A2A * n; i++) s[i] = (float)(rank * 1000 + i);
    float *mine = g + (size_t)rank * AG;
    for (int i = 0; i < AG; i++) mine[i] = (float)(rank * 10000 + i);
    res = ncclAllReduce(x, x, AR, ncclFloat, ncclSum, comm, NULL);
    if (res == ncclSuccess) res = ncclAllGather(mine, g, AG, ncclFloat, comm, NULL);
    if (res == ncclSuccess) res = ncclBroadcast(b, b, BC, ncclFloat, 0, comm, NULL);
    if (res == ncclSuccess) res = ncclAlltoAll(s, r, A2A, ncclFloat, comm, NULL);
    wrong = res != ncclSuccess;
    for (int i = 0; i < AR && !wrong; i++) wrong = x[i] != (float)(n * (n - 1) / 2 + n * (i % 7));
    for (int p = 0; p < n && !wrong; p++)
      for (int i = 0; i < AG && !wrong; i++)
        wrong = g[(size_t)p * AG + i] != (float)(p * 10000 + i);
    for (int i = 0; i < BC && !wrong; i++) wrong = b[i] != (float)i;
    for (int p = 0; p < n && !wrong; p++)
      for (int i = 0; i < A2A && !wrong; i++)
        wrong = r[(size_t)p * A2A + i] != (float)(p * 1000 + rank * A2A + i);
  }
  if (wrong) printf("rank %d: wrong results (%s)\n", rank, ncclGetErrorString(res));
  free(x), free(g), free(b), free(s), free(r);
  ncclCommDestroy(comm);
  return wrong;
}

static const harness_case cases[] = {{"calls", calls}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  const int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 2 || n > 16) return 2;
  const harness_mode mode = argc > 2 && !strcmp(argv[2], "procs") ? HARNESS_PROCS : HARNESS_THREADS;
  const int failed = harness_spawn(mode, n, "calls", argc > 3 ? argv[3] : "", 60);
  printf("%s\n", failed ? "FAIL" : "ok");
  return failed ? 1 : 0;
}
