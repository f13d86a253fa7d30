/*
 * mismatch_rand.c - random mismatched calls on GPU communicators, every
 * one caught (the host's twin is tests/coll/test_mismatch.c).
 *
 * One process drives 2 to 4 GPUs (ncclCommInitAll; the rank count drawn
 * per trial). Each trial draws a call all ranks agree on (AllReduce,
 * Broadcast, Reduce, AllGather, ReduceScatter; a count from LL lines to
 * FIFO chunks; an operator; a root), then one rank changes one thing of
 * it: the function, the count, the operator or the root. The ranks issue
 * their calls in one group. Each rank must then fail within LIMIT seconds,
 * with ncclInvalidUsage or ncclRemoteError and a message that says
 * "mismatch": either the call itself, or, for a rank whose call ended
 * cleanly (both think they are a Broadcast's root, say: neither waits for
 * the other), an AllReduce issued after it. Calls that wait on each other
 * without exchanging anything are caught by the kernels' call board
 * (kernels.h: board_off), the rest by the headers their data carries.
 *
 * usage: gpu_mismatch_rand [TRIALS] [SEED] [noroot]; exit 0 when all are
 * caught, 1 otherwise, 77 with fewer than two GPUs. noroot leaves out
 * roots that differ.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_test.h"
#include "mix.h"
#include "nccl.h"

#define LIMIT 1.0 /* seconds: the issue's bound for detection on every rank */
#define MAXG  4

enum { F_ALLREDUCE, F_BROADCAST, F_REDUCE, F_ALLGATHER, F_REDUCESCATTER, F_COUNT };
static const char *const fname[F_COUNT] = {"AllReduce", "Broadcast", "Reduce", "AllGather",
                                           "ReduceScatter"};

typedef struct call {
  int func;
  size_t count;
  ncclRedOp_t op;
  int root;
} call;

static ncclResult_t issue(const call *c, float *sbuf, float *rbuf, ncclComm_t comm,
                          cudaStream_t s) {
  switch (c->func) {
  case F_BROADCAST:
    return ncclBroadcast(sbuf, rbuf, c->count, ncclFloat, c->root, comm, s);
  case F_REDUCE:
    return ncclReduce(sbuf, rbuf, c->count, ncclFloat, c->op, c->root, comm, s);
  case F_ALLGATHER:
    return ncclAllGather(sbuf, rbuf, c->count, ncclFloat, comm, s);
  case F_REDUCESCATTER:
    return ncclReduceScatter(sbuf, rbuf, c->count, ncclFloat, c->op, comm, s);
  default:
    return ncclAllReduce(sbuf, rbuf, c->count, ncclFloat, c->op, comm, s);
  }
}

static void describe(const call *c, char *b, size_t n) {
  snprintf(b, n, "%s(count=%zu, %s, root=%d)", fname[c->func], c->count,
           c->op == ncclSum ? "sum" : "max", c->root);
}

int main(int argc, char **argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    printf("fewer than two GPUs visible: skipped\n");
    return 77;
  }
  if (ndev > MAXG) ndev = MAXG;
  const int trials = argc > 1 ? atoi(argv[1]) : 40;
  const uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  const int roots = !(argc > 3 && strcmp(argv[3], "noroot") == 0);
  setenv("CHORUS_OP_TIMEOUT", "10", 1); /* a miss shows as slow, not as a hang */
  static const size_t counts[] = {1, 100, 1000, 16384, 262144, 1 << 20};
  /* The most a rank sends or receives: MAXG blocks of twice the largest count. */
  const size_t most = (size_t)MAXG * (2u << 20) + 64;
  float *sbuf[MAXG], *rbuf[MAXG];
  cudaStream_t st[MAXG];
  for (int i = 0; i < ndev; i++) {
    CUDA(cudaSetDevice(i));
    CUDA(cudaMalloc((void **)&sbuf[i], most * sizeof(float)));
    CUDA(cudaMalloc((void **)&rbuf[i], most * sizeof(float)));
    CUDA(cudaMemset(sbuf[i], 0, most * sizeof(float)));
    CUDA(cudaStreamCreate(&st[i]));
  }
  int missed = 0, ranks_seen = 0;
  double worst = 0;
  for (int t = 0; t < trials; t++) {
    uint64_t s = mix(seed * 7919 + (uint64_t)t);
    const int n = 2 + (int)((s = mix(s)) % (uint64_t)(ndev - 1));
    call a = {(int)((s = mix(s)) % F_COUNT), counts[(s = mix(s)) % 6],
              (s = mix(s)) % 2 ? ncclSum : ncclMax, (int)((s = mix(s)) % (uint64_t)n)};
    call odd = a;
    const int victim = (int)((s = mix(s)) % (uint64_t)n);
    const int rooted = a.func == F_BROADCAST || a.func == F_REDUCE;
    const int reduces = a.func != F_BROADCAST && a.func != F_ALLGATHER;
    int what;
    for (;;) {
      what = (int)((s = mix(s)) % 4);
      if ((what == 2 && !reduces) || (what == 3 && (!rooted || !roots))) continue;
      break;
    }
    if (what == 0)
      odd.func = (a.func + 1 + (int)((s = mix(s)) % (F_COUNT - 1))) % F_COUNT;
    else if (what == 1)
      odd.count = a.count * 2;
    else if (what == 2)
      odd.op = a.op == ncclSum ? ncclMax : ncclSum;
    else
      odd.root = (a.root + 1 + (int)((s = mix(s)) % (uint64_t)(n - 1))) % n;
    ncclComm_t comms[MAXG];
    int devs[MAXG] = {0, 1, 2, 3};
    NCCL(ncclCommInitAll(comms, n, devs));
    ncclGroupStart();
    for (int i = 0; i < n; i++) issue(i == victim ? &odd : &a, sbuf[i], rbuf[i], comms[i], st[i]);
    ncclResult_t r = ncclGroupEnd();
    char da[96], dodd[96];
    describe(&a, da, sizeof da);
    describe(&odd, dodd, sizeof dodd);
    double w[MAXG] = {0};
    int caught[MAXG] = {0};
    for (int i = 0; i < n; i++) {
      w[i] = wait_stream(st[i], LIMIT);
      ncclResult_t as = ncclSuccess;
      ncclCommGetAsyncError(comms[i], &as);
      const char *msg = ncclGetLastError(comms[i]);
      caught[i] = (r != ncclSuccess || as == ncclInvalidUsage || as == ncclRemoteError) && msg &&
                  strstr(msg, "mismatch");
    }
    /* A rank whose call ended cleanly learns it with its next call, which
     * every rank whose call ended cleanly makes together. */
    int again = 0;
    double t0 = now();
    ncclGroupStart();
    for (int i = 0; i < n; i++) {
      if (caught[i] || w[i] < 0) continue;
      call next = {F_ALLREDUCE, 1, ncclSum, 0};
      if (issue(&next, sbuf[i], rbuf[i], comms[i], st[i]) != ncclSuccess) caught[i] = -1;
      again = 1;
    }
    ncclGroupEnd();
    for (int i = 0; again && i < n; i++) {
      if (caught[i] > 0 || w[i] < 0) continue;
      const double w2 = caught[i] < 0 ? 0 : wait_stream(st[i], LIMIT);
      ncclResult_t as = ncclSuccess;
      ncclCommGetAsyncError(comms[i], &as);
      const char *msg = ncclGetLastError(comms[i]);
      caught[i] = (caught[i] < 0 || as != ncclSuccess) && msg && strstr(msg, "mismatch");
      w[i] = w2 < 0 ? -1 : w[i] + (now() - t0);
    }
    for (int i = 0; i < n; i++) {
      ranks_seen++;
      if (w[i] > worst) worst = w[i];
      if (!caught[i] || w[i] < 0 || w[i] > LIMIT) {
        missed++;
        fprintf(stderr,
                "FAIL trial %d (%d GPUs): rank %d changed the %s: %s against %s: rank %d %s "
                "after %.2f s: %s\n",
                t, n, victim, (const char *[]){"function", "count", "op", "root"}[what], dodd, da,
                i,
                w[i] < 0    ? "still runs"
                : caught[i] ? "was told late"
                            : "was not told",
                w[i], ncclGetLastError(comms[i]) ? ncclGetLastError(comms[i]) : "");
      }
    }
    for (int i = 0; i < n; i++) ncclCommAbort(comms[i]);
    /* An aborted stream may still hold a kernel that gave up: start clean. */
    for (int i = 0; i < n; i++) {
      CUDA(cudaSetDevice(i));
      if (wait_stream(st[i], 10) < 0) {
        fprintf(stderr, "FAIL trial %d: rank %d's stream is busy after the abort\n", t, i);
        return 1;
      }
    }
  }
  printf("random mismatches on 2-%d GPUs: %d of %d ranks' trials caught within %.1f s, worst "
         "%.3f s\n",
         ndev, ranks_seen - missed, ranks_seen, LIMIT, worst);
  return missed ? 1 : 0;
}
