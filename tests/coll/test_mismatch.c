/*
 * test_mismatch.c - calls that differ across ranks fail on every rank, at
 * once, naming both calls.
 *
 * usage: test_mismatch threads|procs NRANKS SEED TRIALS [ONLY]
 *
 * Every trial draws one collective (function, count, type, op, root) that
 * all ranks agree on, then one rank, also drawn, changes one thing of it:
 * the function, the count, the type, the op or the root. Each rank makes
 * its call on a fresh communicator split from one parent; every rank must
 * return an error naming the mismatch (ncclInvalidUsage, or
 * ncclRemoteError with the words of the rank that found it) within
 * LIMIT_S. A rank that needs no data of the rank that differs (a root of
 * a Broadcast, Scatter) may complete the call; one of its next FOLLOW
 * calls must then fail the same way, within the same time. The parent must still work after all
 * trials. The op timeout is set far above LIMIT_S, so only detection passes. Counts run from 1
 * element to 1 MiB, over every schedule the planner picks (node memory, rings, chains); CTest runs
 * it over shared memory, over TCP (NCCL_SHM_DISABLE=1) and over both (procs, HARNESS_HOSTS=2: two
 * hosts). With ONLY, every trial repeats the seed's trial ONLY: a race
 * that trial loses now and then is lost at once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mix.h"
#include "nccl.h"
#include "spawn.h"

#define LIMIT_S 1.0
#define FOLLOW  80 /* above CHORUS_CALLS_LAG (coll/calls.h) */
#define MAXR    8

enum {
  F_ALLREDUCE,
  F_BROADCAST,
  F_REDUCE,
  F_ALLGATHER,
  F_REDUCESCATTER,
  F_ALLTOALL,
  F_GATHER,
  F_SCATTER,
  F_COUNT
};
static const char *const fnames[F_COUNT] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                            "ReduceScatter", "AlltoAll",  "Gather", "Scatter"};

typedef struct call {
  int func;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
} call;

static const char *const what_names[] = {"function", "count", "type", "op", "root"};

/* The trial's calls, the same on every rank: the agreed call, the rank
 * that deviates, and its call. */
typedef struct trial {
  call agreed, odd;
  int victim, what;
} trial;

static size_t draw_count(uint64_t *s) {
  static const size_t counts[] = {1, 3, 100, 1000, 4096, 16384, 65536, 262144};
  return counts[(*s = mix(*s)) % (sizeof counts / sizeof counts[0])];
}

static trial draw(uint64_t seed, int t, int nranks) {
  uint64_t s = mix(seed * 1000003u + (uint64_t)t);
  trial tr;
  call *a = &tr.agreed;
  a->func = (int)((s = mix(s)) % F_COUNT);
  a->count = draw_count(&s);
  a->type = (s = mix(s)) % 2 ? ncclFloat : ncclInt32;
  a->op = (s = mix(s)) % 2 ? ncclSum : ncclMax;
  a->root = (int)((s = mix(s)) % (uint64_t)nranks);
  tr.odd = *a;
  tr.victim = (int)((s = mix(s)) % (uint64_t)nranks);
  call *o = &tr.odd;
  /* Only what the agreed call uses can differ: a root for rooted
   * functions, an op for reducing ones. */
  const int rooted =
      a->func == F_BROADCAST || a->func == F_REDUCE || a->func == F_GATHER || a->func == F_SCATTER;
  const int reduces = a->func == F_ALLREDUCE || a->func == F_REDUCE || a->func == F_REDUCESCATTER;
  for (;;) {
    tr.what = (int)((s = mix(s)) % 5);
    if (tr.what == 3 && !reduces) continue;
    if (tr.what == 4 && (!rooted || nranks < 2)) continue;
    break;
  }
  switch (tr.what) {
  case 0:
    do o->func = (int)((s = mix(s)) % F_COUNT);
    while (o->func == a->func);
    break;
  case 1:
    o->count = (s = mix(s)) % 2 ? a->count * 2 : a->count + 1;
    break;
  case 2:
    o->type = a->type == ncclFloat ? ncclInt32 : ncclFloat; /* the same size */
    break;
  case 3:
    o->op = a->op == ncclSum ? ncclMax : ncclSum;
    break;
  default:
    o->root = (int)((a->root + 1 + (s = mix(s)) % (uint64_t)(nranks - 1)) % (uint64_t)nranks);
    break;
  }
  return tr;
}

static void describe(const call *c, char *buf, size_t n) {
  snprintf(buf, n, "%s(count=%zu, %s, %s, root=%d)", fnames[c->func], c->count,
           c->type == ncclFloat ? "float" : "int32", c->op == ncclSum ? "sum" : "max", c->root);
}

static ncclResult_t issue(const call *c, void *send, void *recv, ncclComm_t comm) {
  switch (c->func) {
  case F_ALLREDUCE:
    return ncclAllReduce(send, recv, c->count, c->type, c->op, comm, NULL);
  case F_BROADCAST:
    return ncclBroadcast(send, recv, c->count, c->type, c->root, comm, NULL);
  case F_REDUCE:
    return ncclReduce(send, recv, c->count, c->type, c->op, c->root, comm, NULL);
  case F_ALLGATHER:
    return ncclAllGather(send, recv, c->count, c->type, comm, NULL);
  case F_REDUCESCATTER:
    return ncclReduceScatter(send, recv, c->count, c->type, c->op, comm, NULL);
  case F_ALLTOALL:
    return ncclAlltoAll(send, recv, c->count, c->type, comm, NULL);
  case F_GATHER:
    return ncclGather(send, recv, c->count, c->type, c->root, comm, NULL);
  default:
    return ncclScatter(send, recv, c->count, c->type, c->root, comm, NULL);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int body(int rank, int nranks, ncclUniqueId id, const char *param) {
  unsigned long long seed = 0;
  int trials = 0, only = -1;
  if (sscanf(param, "%llu %d %d", &seed, &trials, &only) < 2) return 1;
  ncclComm_t parent;
  if (ncclCommInitRank(&parent, nranks, id, rank) != ncclSuccess) return 1;
  /* Room for the largest call: a count of 2 x 1 MiB elements per rank. */
  const size_t room = (size_t)2 * 262144 * MAXR * 4 + 64;
  char *send = malloc(room), *recv = malloc(room);
  memset(send, 1, room);
  int bad = 0;
  double *tooks = calloc((size_t)trials + 1, sizeof *tooks);
  for (int t = 0; t < trials; t++) {
    const trial tr = draw(seed, only >= 0 ? only : t, nranks);
    const call *mine = rank == tr.victim ? &tr.odd : &tr.agreed;
    ncclComm_t comm;
    if (ncclCommSplit(parent, 0, rank, &comm, NULL) != ncclSuccess) {
      harness_log(rank, "trial %d: split failed: %s", t, ncclGetLastError(parent));
      return 1;
    }
    const double t0 = now_s();
    ncclResult_t r = issue(mine, send, recv, comm);
    const int next = r == ncclSuccess;
    for (int f = 0; next && f < FOLLOW && r == ncclSuccess; f++) { /* later calls learn it */
      float x = 0;
      r = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL);
    }
    const double took = now_s() - t0;
    tooks[t] = took;
    const char *msg = ncclGetLastError(comm);
    if (r == ncclSuccess || took > LIMIT_S || !strstr(msg, "mismatched") ||
        (r != ncclInvalidUsage && r != ncclRemoteError)) {
      char a[96], o[96];
      describe(&tr.agreed, a, sizeof a);
      describe(&tr.odd, o, sizeof o);
      harness_log(rank,
                  "trial %d: rank %d changed the %s: %s against %s: this rank got %s%s after "
                  "%.2f s: %s",
                  t, tr.victim, what_names[tr.what], o, a, next ? "success, then " : "",
                  ncclGetErrorString(r), took, r == ncclSuccess ? "(nothing)" : msg);
      bad++;
    }
    ncclCommAbort(comm);
  }
  /* The parent is untouched by its children's failures. */
  float x = (float)(rank + 1);
  ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, parent, NULL);
  if (r != ncclSuccess || x != (float)(nranks * (nranks + 1) / 2)) {
    harness_log(rank, "the parent after the trials: %s, %g", ncclGetErrorString(r), (double)x);
    bad++;
  }
  ncclCommDestroy(parent);
  free(send);
  free(recv);
  if (bad) harness_log(rank, "%d of %d trials not detected in time", bad, trials);
  /* For the campaign (scripts/campaign.py): this rank's detection times. */
  qsort(tooks, (size_t)trials, sizeof *tooks, cmp_double);
  if (trials > 0)
    harness_log(rank, "detected %d of %d in time; median %.1f ms, max %.1f ms", trials - bad,
                trials, 1e3 * tooks[trials / 2], 1e3 * tooks[trials - 1]);
  free(tooks);
  return bad != 0;
}

static const harness_case cases[] = {{"mismatch", body}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: %s threads|procs NRANKS SEED TRIALS [ONLY]\n", argv[0]);
    return 2;
  }
  const harness_mode mode = strcmp(argv[1], "procs") == 0 ? HARNESS_PROCS : HARNESS_THREADS;
  const int n = atoi(argv[2]);
  if (n < 2 || n > MAXR) {
    fprintf(stderr, "NRANKS must be 2..%d\n", MAXR);
    return 2;
  }
  int trials = atoi(argv[4]);
#ifdef CHORUS_SANITIZED
  /* The same trials' first quarter (or a quarter of one trial's
   * repeats): each costs a sanitized build several times as much, and
   * the suite runs again there for its memory errors, not its random
   * coverage (the plain build runs them all). */
  trials = (trials + 3) / 4;
#endif
  char param[64];
  snprintf(param, sizeof param, "%s %d %s", argv[3], trials, argc == 6 ? argv[5] : "-1");
  setenv("CHORUS_OP_TIMEOUT", "20", 0); /* a miss shows as slow, not as a hang */
  const int failed = harness_spawn(mode, n, "mismatch", param, 600);
  printf("mismatch %s x%d seed %s, %d trials: %s\n", argv[1], n, argv[3], trials,
         failed ? "FAILED" : "all detected");
  return failed ? 1 : 0;
}
