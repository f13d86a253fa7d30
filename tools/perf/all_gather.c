/*
 * all_gather.c - all_gather_perf: ncclAllGather. Rank r's sendcount
 * elements land at recvbuff + r*sendcount on every rank; in place when
 * sendbuff == recvbuff + rank*sendcount. Size = the gathered buffer.
 * busbw = algbw * (n-1)/n.
 */
#include "common.h"

static void counts(size_t count, int nranks, pt_counts *c) {
  size_t per = count / (size_t)nranks;
  *c = (pt_counts){per, per * (size_t)nranks, per, per, 0};
}

static double bus_factor(int n) {
  return (double)(n - 1) / n;
}

static ncclResult_t run(const pt_call *c) {
  return ncclAllGather(c->send, c->recv, c->count, c->type, c->comm, c->stream);
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)rank, (void)nranks, (void)root;
  *s = (pt_src){(int)(j / c->param), j % c->param};
  return 1;
}

static const pt_coll coll = {
    "all_gather_perf", "ncclAllGather", 0, 0, counts, bus_factor, run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
