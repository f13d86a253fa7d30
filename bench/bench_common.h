/*
 * bench_common.h - what mpi_bench.c and gloo_bench.cc (the reference
 * programs of bench/compare.py) share: the collectives they time (names,
 * element counts and busbw factors as the Chorus perf programs compute
 * them), the size syntax of the command line and the input pattern whose
 * sums are exact. Plain C, also valid C++.
 */
#ifndef CHORUS_BENCH_COMMON_H
#define CHORUS_BENCH_COMMON_H

#include <stddef.h>
#include <stdlib.h>

/* The collectives, in the order both programs run them. */
enum {
  ALLREDUCE,
  ALLGATHER,
  BROADCAST,
  REDUCESCATTER,
  ALLTOALL,
  REDUCE,
  GATHER,
  SCATTER,
  SENDRECV,
  NCOLLS
};

typedef struct bench_coll {
  const char *opt;  /* -c name */
  const char *name; /* "collective" in the JSON, as the Chorus program */
  int reduces;      /* redop "sum", else "none" */
  int rooted;       /* root 0, else -1 */
  int factor_kind;  /* busbw factor: 0 -> 1, 1 -> (n-1)/n, 2 -> 2(n-1)/n */
  int shape;        /* counts: 0 same, 1 gather-like, 2 scatter-like, 3 alltoall */
} bench_coll;

static const bench_coll bench_colls[NCOLLS] = {
    {"allreduce", "all_reduce_perf", 1, 0, 2, 0},
    {"allgather", "all_gather_perf", 0, 0, 1, 1},
    {"broadcast", "broadcast_perf", 0, 1, 0, 0},
    {"reducescatter", "reduce_scatter_perf", 1, 0, 1, 2},
    {"alltoall", "alltoall_perf", 0, 0, 1, 3},
    {"reduce", "reduce_perf", 1, 1, 0, 0},
    {"gather", "gather_perf", 0, 1, 0, 1},
    {"scatter", "scatter_perf", 0, 1, 0, 2},
    {"sendrecv", "sendrecv_perf", 0, 0, 0, 0},
};

/* Element counts of one size: buffer lengths, and the count the call takes
 * (per rank where the call is per rank). */
typedef struct bench_counts {
  size_t send, recv, param;
} bench_counts;

static inline bench_counts bench_counts_of(const bench_coll *c, size_t count, int n) {
  size_t per = count / (size_t)n, all = per * (size_t)n;
  bench_counts k = {count, count, count};
  switch (c->shape) {
  case 1: /* send per rank, receive all */
    k.send = per, k.recv = all, k.param = per;
    break;
  case 2: /* send all, receive per rank */
    k.send = all, k.recv = per, k.param = per;
    break;
  case 3:
    k.send = all, k.recv = all, k.param = per;
    break;
  default:
    break;
  }
  return k;
}

static inline double bench_bus_factor(const bench_coll *c, int n) {
  if (c->factor_kind == 1) return (double)(n - 1) / n;
  if (c->factor_kind == 2) return 2.0 * (n - 1) / n;
  return 1.0;
}

/* "8", "64K", "256M", "1G" -> bytes; 0 on error. */
static inline size_t bench_parse_size(const char *s) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (!end || end == s || v < 0) return 0;
  switch (*end) {
  case 'k':
  case 'K':
    v *= 1024;
    break;
  case 'm':
  case 'M':
    v *= 1024 * 1024;
    break;
  case 'g':
  case 'G':
    v *= 1024.0 * 1024 * 1024;
    break;
  case '\0':
    break;
  default:
    return 0;
  }
  return (size_t)v;
}

/* Input element i of rank r: a small integer, so sums over ranks are exact. */
static inline float bench_pattern(int r, size_t i) {
  return (float)((i * 7 + (size_t)r * 13 + 1) % 101);
}

static inline float bench_sum_over_ranks(int n, size_t i) {
  float s = 0;
  for (int r = 0; r < n; r++) s += bench_pattern(r, i);
  return s;
}

#endif
