/*
 * reduce_scatter.c - reduce_scatter_perf: ncclReduceScatter. Rank r gets
 * block r (recvcount elements) of the reduction of all send buffers; in
 * place when recvbuff == sendbuff + rank*recvcount. Size = the send buffer.
 * busbw = algbw * (n-1)/n.
 */
#include "common.h"

static void counts(size_t count, int nranks, pt_counts *c) {
  size_t per = count / (size_t)nranks;
  *c = (pt_counts){per * (size_t)nranks, per, per, 0, per};
}

static double bus_factor(int n) {
  return (double)(n - 1) / n;
}

static ncclResult_t run(const pt_call *c) {
  return ncclReduceScatter(c->send, c->recv, c->count, c->type, c->op, c->comm, c->stream);
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)nranks, (void)root;
  *s = (pt_src){PT_ALL_RANKS, (size_t)rank * c->param + j};
  return 1;
}

static const pt_coll coll = {
    "reduce_scatter_perf", "ncclReduceScatter", 1, 0, counts, bus_factor, run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
