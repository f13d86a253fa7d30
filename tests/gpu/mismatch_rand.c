/*
 * mismatch_rand.c - random mismatched calls on GPU communicators, every
 * one caught (the host's twin is tests/coll/test_mismatch.c).
 *
 * One process drives two GPUs (ncclCommInitAll). Each trial draws a call
 * both ranks agree on (AllReduce, Broadcast, Reduce, AllGather,
 * ReduceScatter; a count from LL lines to FIFO chunks; an operator; a
 * root), then one rank changes one thing of it: the function, the count,
 * the operator or the root. Both ranks issue their calls in one group.
 * Each rank must then fail within LIMIT seconds, with ncclInvalidUsage or
 * ncclRemoteError and a message that says "mismatch": either the call
 * itself, or, for a rank that needed nothing of the other (both think
 * they are a Broadcast's root, say), an AllReduce issued after it.
 *
 * usage: gpu_mismatch_rand [TRIALS] [SEED] [noroot]; exit 0 when all are
 * caught, 1 otherwise, 77 with fewer than two GPUs. noroot leaves out
 * roots that differ.
 *
 * Not in checks.tsv yet, because it does not pass (2xH200, 2026-11-26):
 * calls where both ranks wait and neither receives anything of the other
 * (roots that differ; a Broadcast's root beside a Reduce to the same
 * root; some FIFO-sized AllReduce counts) run until the op timeout, since
 * the kernels compare calls only in the headers of data they receive;
 * and aborting the first of the two communicators while the second's
 * kernel still reads its memory (one process, both GPUs) leaves an
 * illegal address that poisons the context. The function, count and
 * operator mismatches that move data are caught at once.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_test.h"
#include "nccl.h"

#define LIMIT 2.0

enum { F_ALLREDUCE, F_BROADCAST, F_REDUCE, F_ALLGATHER, F_REDUCESCATTER, F_COUNT };
static const char *const fname[F_COUNT] = {"AllReduce", "Broadcast", "Reduce", "AllGather",
                                           "ReduceScatter"};

typedef struct call {
  int func;
  size_t count;
  ncclRedOp_t op;
  int root;
} call;

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static ncclResult_t issue(const call *c, float *buf, ncclComm_t comm, cudaStream_t s) {
  switch (c->func) {
  case F_BROADCAST:
    return ncclBroadcast(buf, buf, c->count, ncclFloat, c->root, comm, s);
  case F_REDUCE:
    return ncclReduce(buf, buf, c->count, ncclFloat, c->op, c->root, comm, s);
  case F_ALLGATHER:
    return ncclAllGather(buf, buf + c->count, c->count, ncclFloat, comm, s);
  case F_REDUCESCATTER:
    return ncclReduceScatter(buf, buf + 2 * c->count, c->count, ncclFloat, c->op, comm, s);
  default:
    return ncclAllReduce(buf, buf, c->count, ncclFloat, c->op, comm, s);
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
  const int trials = argc > 1 ? atoi(argv[1]) : 40;
  const uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  const int roots = !(argc > 3 && strcmp(argv[3], "noroot") == 0);
  setenv("CHORUS_OP_TIMEOUT", "10", 1); /* a miss shows as slow, not as a hang */
  static const size_t counts[] = {1, 100, 1000, 16384, 262144, 1 << 20};
  const size_t most = 4 * (2u << 20) + 64;
  float *buf[2];
  cudaStream_t st[2];
  for (int i = 0; i < 2; i++) {
    CUDA(cudaSetDevice(i));
    CUDA(cudaMalloc((void **)&buf[i], most * sizeof(float)));
    CUDA(cudaMemset(buf[i], 0, most * sizeof(float)));
    CUDA(cudaStreamCreate(&st[i]));
  }
  int missed = 0;
  double worst = 0;
  for (int t = 0; t < trials; t++) {
    uint64_t s = mix(seed * 7919 + (uint64_t)t);
    call a = {(int)((s = mix(s)) % F_COUNT), counts[(s = mix(s)) % 6],
              (s = mix(s)) % 2 ? ncclSum : ncclMax, (int)((s = mix(s)) % 2)};
    call odd = a;
    const int victim = (int)((s = mix(s)) % 2);
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
      odd.root = 1 - a.root;
    ncclComm_t comms[2];
    int devs[2] = {0, 1};
    NCCL(ncclCommInitAll(comms, 2, devs));
    const call *mine[2] = {victim == 0 ? &odd : &a, victim == 1 ? &odd : &a};
    ncclGroupStart();
    for (int i = 0; i < 2; i++) issue(mine[i], buf[i], comms[i], st[i]);
    ncclResult_t r = ncclGroupEnd();
    char da[96], dodd[96];
    describe(&a, da, sizeof da);
    describe(&odd, dodd, sizeof dodd);
    double w[2] = {0, 0};
    int caught[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
      w[i] = wait_stream(st[i], LIMIT);
      ncclResult_t as = ncclSuccess;
      ncclCommGetAsyncError(comms[i], &as);
      const char *msg = ncclGetLastError(comms[i]);
      caught[i] = (r != ncclSuccess || as == ncclInvalidUsage || as == ncclRemoteError) && msg &&
                  strstr(msg, "mismatch");
    }
    /* A rank whose call ended cleanly learns it with its next call. */
    for (int i = 0; i < 2; i++) {
      if (caught[i] || w[i] < 0) continue;
      const double t0 = now();
      call next = {F_ALLREDUCE, 1, ncclSum, 0};
      ncclResult_t r2 = issue(&next, buf[i], comms[i], st[i]);
      double w2 = r2 == ncclSuccess ? wait_stream(st[i], LIMIT) : 0;
      ncclResult_t as = ncclSuccess;
      ncclCommGetAsyncError(comms[i], &as);
      const char *msg = ncclGetLastError(comms[i]);
      caught[i] = (r2 != ncclSuccess || as != ncclSuccess) && msg && strstr(msg, "mismatch");
      w[i] = w2 < 0 ? -1 : w[i] + (now() - t0);
    }
    for (int i = 0; i < 2; i++) {
      if (w[i] > worst) worst = w[i];
      if (!caught[i] || w[i] < 0) {
        missed++;
        fprintf(stderr,
                "FAIL trial %d: rank %d changed the %s: %s against %s: rank %d %s after %.2f s: "
                "%s\n",
                t, victim, (const char *[]){"function", "count", "op", "root"}[what], dodd, da, i,
                w[i] < 0 ? "still runs" : "was not told", w[i],
                ncclGetLastError(comms[i]) ? ncclGetLastError(comms[i]) : "");
      }
    }
    for (int i = 0; i < 2; i++) ncclCommAbort(comms[i]);
    /* An aborted stream may still hold a kernel that gave up: start clean. */
    for (int i = 0; i < 2; i++) {
      CUDA(cudaSetDevice(i));
      if (wait_stream(st[i], 10) < 0) {
        fprintf(stderr, "FAIL trial %d: rank %d's stream is busy after the abort\n", t, i);
        return 1;
      }
    }
  }
  printf("random mismatches on 2 GPUs: %d of %d ranks' trials caught, worst %.2f s\n",
         2 * trials - missed, 2 * trials, worst);
  return missed ? 1 : 0;
}
