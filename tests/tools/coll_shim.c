/*
 * coll_shim.c - test-only stand-ins for the collectives Chorus does not
 * implement yet, built on ncclAllReduce, so that the perf programs' buffer
 * sizes, in-place pointers and result checks are tested today.
 *
 * Loaded with LD_PRELOAD, these definitions come before libnccl's. Data
 * movement is a sum in which every other rank contributes zeros (x + 0 is
 * exact in every type); reductions are an allreduce followed by a copy.
 * Every call goes through a zeroed temporary buffer, so in-place layouts are
 * safe. Supported: ungrouped calls, and the ncclSend/ncclRecv pair of a ring
 * shift inside one group (what the perf programs issue with -g 1 -m 1).
 * When the real collectives land these tests still pass through the shim;
 * run the perf programs without it to test the library.
 */
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

static size_t type_size(ncclDataType_t t) {
  static const size_t s[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return (t >= 0 && t < ncclNumTypes) ? s[t] : 0;
}

typedef struct shape {
  int n, rank;
  size_t es;
} shape;

static ncclResult_t shape_of(ncclComm_t comm, ncclDataType_t type, shape *s) {
  ncclResult_t res = ncclCommCount(comm, &s->n);
  if (res == ncclSuccess) res = ncclCommUserRank(comm, &s->rank);
  s->es = type_size(type);
  return s->es ? res : ncclInvalidArgument;
}

/* Sums, in place, a zeroed buffer of count elements in which each rank
 * placed its own data. */
static ncclResult_t sum_blocks(void *tmp, size_t count, ncclDataType_t type, ncclComm_t comm) {
  if (count == 0) return ncclSuccess;
  return ncclAllReduce(tmp, tmp, count, type, ncclSum, comm, NULL);
}

static void *zeroed(size_t count, size_t es) {
  return calloc(count ? count : 1, es);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  shape s;
  ncclResult_t res = shape_of(comm, datatype, &s);
  size_t block = sendcount * s.es, total = sendcount * (size_t)s.n;
  char *tmp = res == ncclSuccess ? zeroed(total, s.es) : NULL;
  if (!tmp) return res != ncclSuccess ? res : ncclSystemError;
  memcpy(tmp + (size_t)s.rank * block, sendbuff, block);
  res = sum_blocks(tmp, total, datatype, comm);
  if (res == ncclSuccess) memcpy(recvbuff, tmp, total * s.es);
  free(tmp);
  return res;
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  shape s;
  ncclResult_t res = shape_of(comm, datatype, &s);
  char *tmp = res == ncclSuccess ? zeroed(count, s.es) : NULL;
  if (!tmp) return res != ncclSuccess ? res : ncclSystemError;
  if (s.rank == root) memcpy(tmp, sendbuff, count * s.es);
  res = sum_blocks(tmp, count, datatype, comm);
  if (res == ncclSuccess) memcpy(recvbuff, tmp, count * s.es);
  free(tmp);
  return res;
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  shape s;
  ncclResult_t res = shape_of(comm, datatype, &s);
  char *tmp = res == ncclSuccess ? zeroed(count, s.es) : NULL;
  if (!tmp) return res != ncclSuccess ? res : ncclSystemError;
  if (count) res = ncclAllReduce(sendbuff, tmp, count, datatype, op, comm, NULL);
  if (res == ncclSuccess && s.rank == root) memcpy(recvbuff, tmp, count * s.es);
  free(tmp);
  return res;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  shape s;
  ncclResult_t res = shape_of(comm, datatype, &s);
  size_t total = recvcount * (size_t)s.n;
  char *tmp = res == ncclSuccess ? zeroed(total, s.es) : NULL;
  if (!tmp) return res != ncclSuccess ? res : ncclSystemError;
  if (total) res = ncclAllReduce(sendbuff, tmp, total, datatype, op, comm, NULL);
  if (res == ncclSuccess)
    memcpy(recvbuff, tmp + (size_t)s.rank * recvcount * s.es, recvcount * s.es);
  free(tmp);
  return res;
}

/* Slot (src, dst) of an n x n matrix of blocks carries src's block for dst. */
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  shape s;
  ncclResult_t res = shape_of(comm, datatype, &s);
  size_t n = (size_t)s.n, block = count * s.es;
  char *tmp = res == ncclSuccess ? zeroed(n * n * count, s.es) : NULL;
  if (!tmp) return res != ncclSuccess ? res : ncclSystemError;
  memcpy(tmp + (size_t)s.rank * n * block, sendbuff, n * block);
  res = sum_blocks(tmp, n * n * count, datatype, comm);
  for (size_t j = 0; res == ncclSuccess && j < n; j++)
    memcpy((char *)recvbuff + j * block, tmp + (j * n + (size_t)s.rank) * block, block);
  free(tmp);
  return res;
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  shape s;
  ncclResult_t res = shape_of(comm, datatype, &s);
  size_t block = count * s.es, total = count * (size_t)s.n;
  char *tmp = res == ncclSuccess ? zeroed(total, s.es) : NULL;
  if (!tmp) return res != ncclSuccess ? res : ncclSystemError;
  memcpy(tmp + (size_t)s.rank * block, sendbuff, block);
  res = sum_blocks(tmp, total, datatype, comm);
  if (res == ncclSuccess && s.rank == root) memcpy(recvbuff, tmp, total * s.es);
  free(tmp);
  return res;
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  shape s;
  ncclResult_t res = shape_of(comm, datatype, &s);
  size_t block = count * s.es, total = count * (size_t)s.n;
  char *tmp = res == ncclSuccess ? zeroed(total, s.es) : NULL;
  if (!tmp) return res != ncclSuccess ? res : ncclSystemError;
  if (s.rank == root) memcpy(tmp, sendbuff, total * s.es);
  res = sum_blocks(tmp, total, datatype, comm);
  if (res == ncclSuccess) memcpy(recvbuff, tmp + (size_t)s.rank * block, block);
  free(tmp);
  return res;
}

/* ---- one Send/Recv pair per group ----------------------------------------------- */
static _Thread_local struct {
  int depth;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t type;
  int to, from;
  ncclComm_t comm;
} P2P;

ncclResult_t ncclGroupStart(void) {
  P2P.depth++;
  return pncclGroupStart();
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  if (P2P.depth == 0 || P2P.send) return ncclInvalidUsage;
  P2P.send = sendbuff, P2P.count = count, P2P.type = datatype, P2P.to = peer, P2P.comm = comm;
  return ncclSuccess;
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  if (P2P.depth == 0 || P2P.recv) return ncclInvalidUsage;
  P2P.recv = recvbuff, P2P.from = peer;
  return ncclSuccess;
}

/* Block d of the sum carries what was sent to rank d. */
static ncclResult_t exchange(void) {
  shape s;
  ncclResult_t res = shape_of(P2P.comm, P2P.type, &s);
  size_t block = P2P.count * s.es, total = P2P.count * (size_t)s.n;
  char *tmp = res == ncclSuccess ? zeroed(total, s.es) : NULL;
  if (!tmp) return res != ncclSuccess ? res : ncclSystemError;
  memcpy(tmp + (size_t)P2P.to * block, P2P.send, block);
  res = sum_blocks(tmp, total, P2P.type, P2P.comm);
  if (res == ncclSuccess) memcpy(P2P.recv, tmp + (size_t)s.rank * block, block);
  free(tmp);
  return res;
}

ncclResult_t ncclGroupEnd(void) {
  ncclResult_t res = pncclGroupEnd();
  if (--P2P.depth > 0 || (!P2P.send && !P2P.recv)) return res;
  if (res == ncclSuccess) res = (P2P.send && P2P.recv) ? exchange() : ncclInvalidUsage;
  P2P.send = NULL, P2P.recv = NULL;
  return res;
}
