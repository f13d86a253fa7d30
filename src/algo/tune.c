/*
 * tune.c - see tune.h.
 *
 * One host. Each fit is t = a * (n / n_cal) + S / bw, with S the size the
 * perf tools report (the whole buffer for AllReduce, Broadcast, Reduce;
 * n blocks for AllGather, ReduceScatter, AlltoAll, Gather, Scatter), a in
 * microseconds, bw in bytes per microsecond, n_cal = 2 with a core per rank
 * and 4 when ranks outnumber cores. Values: bench/calibration-2026-11-21.txt
 * (AllReduce from a longer run, see docs/PERFORMANCE.md).
 */
#include "algo/tune.h"

typedef struct fit {
  int func;
  chorus_algo algo;
  double a_own, bw_own;   /* a core per rank (n_cal = 2) */
  double a_over, bw_over; /* ranks outnumber cores (n_cal = 4) */
} fit;

static const fit fits[] = {
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RING, 0.625, 10150, 19.3, 2990},
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ONESHOT, 0.474, 5530, 4.84, 2320},
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_TWOSHOT, 0.455, 7750, 10.4, 4270},
    {CHORUS_FUNC_ALLGATHER, CHORUS_ALGO_RING, 0.615, 14370, 11.5, 1605},
    {CHORUS_FUNC_ALLGATHER, CHORUS_ALGO_ONESHOT, 0.559, 14497, 6.38, 6551},
    {CHORUS_FUNC_REDUCESCATTER, CHORUS_ALGO_RING, 0.665, 11450, 9.12, 6920},
    {CHORUS_FUNC_REDUCESCATTER, CHORUS_ALGO_ONESHOT, 0.589, 12452, 6.30, 6273},
    {CHORUS_FUNC_BROADCAST, CHORUS_ALGO_RING, 0.387, 9235, 1.77, 5436},
    {CHORUS_FUNC_BROADCAST, CHORUS_ALGO_ONESHOT, 0.426, 8539, 5.58, 6779},
    {CHORUS_FUNC_REDUCE, CHORUS_ALGO_RING, 0.544, 2491, 2.20, 6017},
    {CHORUS_FUNC_REDUCE, CHORUS_ALGO_ONESHOT, 0.733, 10203, 11.2, 1132},
    {CHORUS_FUNC_ALLTOALL, CHORUS_ALGO_DIRECT, 0.758, 18403, 6.30, 2991},
    {CHORUS_FUNC_ALLTOALL, CHORUS_ALGO_ONESHOT, 0.550, 13172, 6.84, 1410},
    {CHORUS_FUNC_GATHER, CHORUS_ALGO_DIRECT, 0.441, 32747, 1.96, 23617},
    {CHORUS_FUNC_GATHER, CHORUS_ALGO_ONESHOT, 0.528, 19942, 5.93, 4276},
    {CHORUS_FUNC_SCATTER, CHORUS_ALGO_DIRECT, 0.565, 21551, 2.83, 13633},
    {CHORUS_FUNC_SCATTER, CHORUS_ALGO_ONESHOT, 0.680, 4056, 5.40, 9028},
};

/* Across hosts: one TCP hop on loopback-class links (measured over veth in
 * network namespaces), and its bandwidth. */
#define NET_HOP_US 25.0
#define NET_BW     1000.0

static int blocks_per_rank(int func) {
  return func == CHORUS_FUNC_ALLGATHER || func == CHORUS_FUNC_REDUCESCATTER ||
         func == CHORUS_FUNC_ALLTOALL || func == CHORUS_FUNC_GATHER || func == CHORUS_FUNC_SCATTER;
}

static double one_host(int func, chorus_algo algo, double size, const chorus_tune_env *e) {
  if ((algo == CHORUS_ALGO_ONESHOT || algo == CHORUS_ALGO_TWOSHOT) && !e->node) return -1;
  for (size_t i = 0; i < sizeof fits / sizeof fits[0]; i++) {
    const fit *f = &fits[i];
    if (f->func != func || f->algo != algo) continue;
    if (e->oversubscribed) return f->a_over * e->nranks / 4.0 + size / f->bw_over;
    return f->a_own * e->nranks / 2.0 + size / f->bw_own;
  }
  return -1;
}

static int log2_floor(int n) {
  int k = 0;
  while ((1 << (k + 1)) <= n) k++;
  return k;
}

/* Several hosts: network hops dominate. */
static double across_hosts(int func, chorus_algo algo, double bytes, const chorus_tune_env *e) {
  int n = e->nranks;
  double perhop = NET_HOP_US;
  switch (algo) {
  case CHORUS_ALGO_RING:
    if (func == CHORUS_FUNC_ALLTOALL || func == CHORUS_FUNC_GATHER || func == CHORUS_FUNC_SCATTER)
      return -1;
    if (func == CHORUS_FUNC_ALLREDUCE)
      return 2.0 * (n - 1) * perhop + 2.0 * (n - 1) / n * bytes / NET_BW;
    if (func == CHORUS_FUNC_BROADCAST || func == CHORUS_FUNC_REDUCE)
      return (n - 1) * perhop + bytes / NET_BW;
    return (n - 1) * (perhop + bytes / NET_BW);
  case CHORUS_ALGO_RD: {
    if (func != CHORUS_FUNC_ALLREDUCE || bytes > (double)e->max_msg) return -1;
    int p2 = 1 << log2_floor(n);
    int steps = log2_floor(n) + (n > p2 ? 2 : 0);
    return steps * (perhop + bytes / NET_BW);
  }
  case CHORUS_ALGO_DIRECT:
    if (func != CHORUS_FUNC_ALLTOALL && func != CHORUS_FUNC_GATHER && func != CHORUS_FUNC_SCATTER)
      return -1;
    return perhop + (n - 1) * bytes / NET_BW;
  default:
    return -1;
  }
}

double chorus_tune_time_us(int func, chorus_algo algo, size_t bytes, const chorus_tune_env *e) {
  if (func == CHORUS_FUNC_SEND || func == CHORUS_FUNC_RECV)
    return algo == CHORUS_ALGO_DIRECT ? 1.0 : -1;
  if (e->nranks <= 1) return algo == CHORUS_ALGO_RING || algo == CHORUS_ALGO_DIRECT ? 0.1 : -1;
  /* Without node memory (several hosts, or shared memory turned off) the
   * point-to-point hop dominates: price hops. */
  if (e->nhosts > 1 || !e->node) return across_hosts(func, algo, (double)bytes, e);
  if (algo == CHORUS_ALGO_RD) return -1;
  double size = (double)bytes * (blocks_per_rank(func) ? e->nranks : 1);
  return one_host(func, algo, size, e);
}
