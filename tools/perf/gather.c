/*
 * gather.c - gather_perf: ncclGather. Rank r's count elements land at
 * recvbuff + r*count on the root (only the root's result is checked); in
 * place when sendbuff == recvbuff + rank*count (on the root: root*count).
 * Size = the gathered buffer. busbw = algbw.
 */
#include "common.h"

static void counts(size_t count, int nranks, pt_counts *c) {
  size_t per = count / (size_t)nranks;
  *c = (pt_counts){per, per * (size_t)nranks, per, per, 0};
}

static double bus_factor(int n) {
  (void)n;
  return 1;
}

static ncclResult_t run(const pt_call *c) {
  return ncclGather(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream);
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)nranks;
  *s = (pt_src){(int)(j / c->param), j % c->param};
  return rank == root;
}

static const pt_coll coll = {"gather_perf", "ncclGather", 0, 1, counts, bus_factor, run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
