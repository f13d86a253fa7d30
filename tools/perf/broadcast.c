/*
 * broadcast.c - broadcast_perf: ncclBroadcast. The root's send buffer is
 * copied to every rank's receive buffer; in place when sendbuff == recvbuff.
 * busbw = algbw.
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
  return ncclBroadcast(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream);
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)c, (void)rank, (void)nranks;
  *s = (pt_src){root, j};
  return 1;
}

static const pt_coll coll = {"broadcast_perf", "ncclBroadcast", 0,   1,
                             counts,           bus_factor,      run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
