/*
 * tune.c - see tune.h. Constants: microseconds and bytes per microsecond
 * (1 B/us = 1 MB/s), measured with the perf tools on the 2-core test
 * machine; see docs/PERFORMANCE.md for the runs behind them.
 */
#include "algo/tune.h"

typedef struct cost {
  double lat_us;  /* per synchronisation step */
  double bw;      /* bytes per microsecond through one step */
} cost;

/* Shared memory, ranks on their own cores / oversubscribed. */
static const cost ring_step[2] = {{0.35, 9000}, {4.0, 4000}};
static const cost node_sync[2] = {{0.30, 9000}, {3.0, 4000}};
/* TCP between hosts. */
static const cost net_step = {25.0, 1000};

static double ring_allreduce(size_t bytes, const chorus_tune_env *e) {
  int n = e->nranks;
  const cost *c = e->nhosts > 1 ? &net_step : &ring_step[e->oversubscribed];
  return 2.0 * (n - 1) * c->lat_us + 2.0 * (n - 1) / n * (double)bytes / c->bw;
}

/* oneshot: one sync; each rank copies S in and reads n*S. */
static double oneshot(size_t bytes, const chorus_tune_env *e) {
  const cost *c = &node_sync[e->oversubscribed];
  return c->lat_us * (e->oversubscribed ? e->nranks : 1) + (double)(e->nranks + 1) * bytes / c->bw;
}

/* twoshot: two syncs per chunk; each rank copies S in, reads S, copies S out. */
static double twoshot(size_t bytes, const chorus_tune_env *e) {
  const cost *c = &node_sync[e->oversubscribed];
  return 2.0 * c->lat_us * (e->oversubscribed ? e->nranks : 1) + 3.0 * (double)bytes / c->bw;
}

double chorus_tune_time_us(int func, chorus_algo algo, size_t bytes, const chorus_tune_env *e) {
  if (e->nranks <= 1) return algo == CHORUS_ALGO_RING || algo == CHORUS_ALGO_DIRECT ? 0.1 : -1;
  switch (func) {
  case CHORUS_FUNC_ALLREDUCE:
    if (algo == CHORUS_ALGO_RING) return ring_allreduce(bytes, e);
    if (!e->node) return -1;
    if (algo == CHORUS_ALGO_ONESHOT) return oneshot(bytes, e);
    if (algo == CHORUS_ALGO_TWOSHOT) return twoshot(bytes, e);
    return -1;
  default:
    if (algo == CHORUS_ALGO_ONESHOT) return e->node ? oneshot(bytes, e) * 0.5 : -1;
    if (algo == CHORUS_ALGO_TWOSHOT) return -1;
    if (func == CHORUS_FUNC_SEND || func == CHORUS_FUNC_RECV)
      return algo == CHORUS_ALGO_DIRECT ? 1.0 : -1;
    return ring_allreduce(bytes, e);
  }
}
