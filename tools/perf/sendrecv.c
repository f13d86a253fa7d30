/*
 * sendrecv.c - sendrecv_perf: ncclSend to rank+1 and ncclRecv from rank-1
 * (modulo n) in one group: a ring shift. In place when sendbuff == recvbuff
 * (as nccl-tests). busbw = algbw.
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
  int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;
  ncclResult_t res = ncclGroupStart();
  if (res != ncclSuccess) return res;
  ncclResult_t r1 = ncclSend(c->send, c->count, c->type, next, c->comm, c->stream);
  ncclResult_t r2 = ncclRecv(c->recv, c->count, c->type, prev, c->comm, c->stream);
  res = ncclGroupEnd();
  return r1 != ncclSuccess ? r1 : r2 != ncclSuccess ? r2 : res;
}

static int source(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *s) {
  (void)c, (void)root;
  *s = (pt_src){(rank + nranks - 1) % nranks, j};
  return 1;
}

static const pt_coll coll = {"sendrecv_perf", "ncclSend/ncclRecv", 0,   0,
                             counts,          bus_factor,          run, source};

int main(int argc, char **argv) {
  return pt_main(argc, argv, &coll);
}
