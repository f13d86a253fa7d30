/*
 * alltoall.c - alltoall_perf: ncclAlltoAll. Block j (count elements) of
 * rank r's send buffer lands in block r of rank j's receive buffer; in place
 * when sendbuff == recvbuff. Size = the whole send buffer.
 * busbw = algbw * (n-1)/n.
 */
#include "common.h"

static void counts(size_t count, int nranks, pt_counts *c) {
  size_t per = count / (size_t)nranks;
  *c = (pt_counts){per * (size_t)nranks, per * (size_t)nranks, per, 0, 0};
}

static double bus_factor(int n) {
  return (double)(n - 1) / n;
}

static ncclResult_t run(const pt_call *c) {
  return ncclAlltoAll(c->send, c->recv, c->count, c->type, c->comm, c->stream);
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)nranks, (void)root;
  *s = (pt_src){(int)(j / c->param), (size_t)rank * c->param + j % c->param};
  return 1;
}

static const pt_coll coll = {"alltoall_perf", "ncclAlltoAll", 0,   0,
                             counts,          bus_factor,     run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
