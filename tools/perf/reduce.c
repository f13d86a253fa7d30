/*
 * reduce.c - reduce_perf: ncclReduce. The root gets the reduction of all
 * send buffers (other ranks' receive buffers are not checked); in place
 * when sendbuff == recvbuff. busbw = algbw.
 */
#include "common.h"

static void counts(size_t count, int nranks, pt_counts *c) {
  (void)nranks;
  *c = (pt_counts){count, count, count, 0, 0};
}

static double bus_factor(int n) {
  (void)n;
  return 1;
}

static ncclResult_t run(const pt_call *c) {
  return ncclReduce(c->send, c->recv, c->count, c->type, c->op, c->root, c->comm, c->stream);
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)c, (void)nranks;
  *s = (pt_src){PT_ALL_RANKS, j};
  return rank == root;
}

static const pt_coll coll = {"reduce_perf", "ncclReduce", 1, 1, counts, bus_factor, run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
