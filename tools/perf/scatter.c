/*
 * scatter.c - scatter_perf: ncclScatter. Block r (count elements) of the
 * root's send buffer lands in rank r's receive buffer; in place when
 * recvbuff == sendbuff + rank*count (on the root: root*count). Size = the
 * root's send buffer. busbw = algbw.
 */
#include "common.h"

static void counts(size_t count, int nranks, pt_counts *c) {
  size_t per = count / (size_t)nranks;
  *c = (pt_counts){per * (size_t)nranks, per, per, 0, per};
}

static double bus_factor(int n) {
  (void)n;
  return 1;
}

static ncclResult_t run(const pt_call *c) {
  return ncclScatter(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream);
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)nranks;
  *s = (pt_src){root, (size_t)rank * c->param + j};
  return 1;
}

static const pt_coll coll = {"scatter_perf", "ncclScatter", 0, 1, counts, bus_factor, run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
