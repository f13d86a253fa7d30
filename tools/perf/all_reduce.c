/*
 * all_reduce.c - all_reduce_perf: ncclAllReduce. Every rank ends with the
 * reduction of all inputs; in place when sendbuff == recvbuff.
 * busbw = algbw * 2(n-1)/n: each rank sends and receives (n-1)/n of the
 * data twice (reduce-scatter, then all-gather).
 */
#include "common.h"

static void counts(size_t count, int nranks, pt_counts *c) {
  (void)nranks;
  *c = (pt_counts){count, count, count, 0, 0};
}

static double bus_factor(int n) {
  return 2.0 * (n - 1) / n;
}

static ncclResult_t run(const pt_call *c) {
  return ncclAllReduce(c->send, c->recv, c->count, c->type, c->op, c->comm, c->stream);
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)c, (void)rank, (void)nranks, (void)root;
  *s = (pt_src){PT_ALL_RANKS, j};
  return 1;
}

static const pt_coll coll = {
    "all_reduce_perf", "ncclAllReduce", 1, 0, counts, bus_factor, run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
