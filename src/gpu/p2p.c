/*
 * p2p.c - Send/Recv on GPU communicators: a group's point-to-point calls
 * as rounds of one kernel launch each (gpu.h).
 *
 * Calls with the same peer pair up in call order, as in NCCL: the k-th
 * send to p matches p's k-th receive from this rank. Round k holds every
 * k-th send and k-th receive of this rank, so matching calls meet in the
 * same round on both ends, and everything of one round moves at once: a
 * rank that sends to p and receives from p in one group never waits for
 * one before starting the other.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "gpu/gpu.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/log.h"
#include "util/misc.h"

int chorus_gpu_p2p_rounds(int rank, chorus_op *const *ops, const chorus_task *const *tasks,
                          int nops, chorus_kern_p2p *ll, chorus_kern_p2p *fifo, char *err,
                          size_t errlen) {
  int nrounds = 0;
  for (int i = 0; i < nops; i++) {
    const chorus_op *op = ops[i];
    const size_t bytes = op->count * op->esize;
    const int p = op->root, k = tasks[i]->round;
    if (!bytes || k < 0 || k >= nops) continue; /* empty calls move nothing */
    chorus_kern_p2p *r = tasks[i]->proto == CHORUS_PROTO_LL ? &ll[k] : &fifo[k];
    if (op->func == CHORUS_FUNC_SEND) {
      r->send[p] = op->sendbuff;
      r->sbytes[p] = bytes;
    } else {
      r->recv[p] = op->recvbuff;
      r->rbytes[p] = bytes;
    }
    if (k + 1 > nrounds) nrounds = k + 1;
  }
  /* A send to itself is a copy inside one launch: its receive must be in
   * the same one. */
  for (int k = 0; k < nrounds; k++)
    if (ll[k].sbytes[rank] != ll[k].rbytes[rank] || fifo[k].sbytes[rank] != fifo[k].rbytes[rank]) {
      snprintf(err, errlen,
               "rank %d: its call %d to itself is ncclSend of %zu bytes but ncclRecv of %zu "
               "bytes in the same group (a send to itself needs a receive of the same size)",
               rank, k + 1, ll[k].sbytes[rank] + fifo[k].sbytes[rank],
               ll[k].rbytes[rank] + fifo[k].rbytes[rank]);
      return -1;
    }
  return nrounds;
}

void chorus_gpu_p2p_descs(uint64_t *send, uint64_t *recv) {
  chorus_op op;
  memset(&op, 0, sizeof op); /* count 0, int8 */
  op.func = CHORUS_FUNC_SEND;
  *send = chorus_gpu_call_desc(&op);
  op.func = CHORUS_FUNC_RECV;
  *recv = chorus_gpu_call_desc(&op);
}

int chorus_gpu_p2p_overlap(const chorus_kern_p2p *p, int rank, int nranks) {
  for (int r = 0; r < nranks; r++)
    for (int s = 0; s < nranks; s++) {
      if (r == rank && s == rank && p->recv[r] == p->send[s]) continue; /* no copy */
      if (chorus_ranges_meet(p->recv[r], p->rbytes[r], p->send[s], p->sbytes[s])) return 1;
    }
  return 0;
}

#define P2P_STACK_ROUNDS 4

ncclResult_t chorus_gpu_enqueue_p2p(chorus_gpu *g, chorus_op *const *ops,
                                    const chorus_task *const *tasks, int nops) {
  /* Rounds as the planner numbered them (most groups have one or two: a
   * send and a receive per peer), on the stack where they fit. */
  int most = 0;
  for (int i = 0; i < nops; i++)
    if (tasks[i]->round >= most && tasks[i]->round < nops) most = tasks[i]->round + 1;
  chorus_kern_p2p stack[2 * P2P_STACK_ROUNDS], *ll = stack;
  if (most > P2P_STACK_ROUNDS && !(ll = chorus_malloc(2 * (size_t)most * sizeof *ll)))
    return chorus_error(ncclSystemError, "out of memory planning %d Send/Recv", nops);
  memset(ll, 0, 2 * (size_t)most * sizeof *ll);
  chorus_kern_p2p *fifo = ll + most;
  char err[256];
  const int rank = chorus_gpu_rank(g);
  const int saved = chorus_dev_current(), device = chorus_gpu_device(g);
  int nrounds = chorus_gpu_p2p_rounds(rank, ops, tasks, nops, ll, fifo, err, sizeof err);
  ncclResult_t res = ncclSuccess;
  if (nrounds < 0) {
    res = chorus_error(ncclInvalidUsage, "%s", err);
    goto out;
  }
  /* The calls may name different streams: the rounds run on the first
   * call's, after everything queued before on the others, and the others
   * wait for them. Events belong to the communicator's GPU, which one
   * thread driving several GPUs may not have current. */
  void *stream = ops[0]->cuda_stream;
  if (saved != device && chorus_dev_use(device) != 0) {
    res = chorus_error(ncclUnhandledCudaError, "ncclSend/ncclRecv: %s", chorus_dev_error());
    goto out;
  }
  for (int i = 1; i < nops; i++)
    if (chorus_dev_stream_wait(stream, ops[i]->cuda_stream) != 0) {
      res = chorus_error(ncclUnhandledCudaError, "ncclSend/ncclRecv: %s", chorus_dev_error());
      goto out;
    }
  for (int k = 0; k < nrounds && res == ncclSuccess; k++)
    res = chorus_gpu_sendrecv(g, &ll[k], &fifo[k], stream);
  for (int i = 1; i < nops && res == ncclSuccess; i++)
    if (chorus_dev_stream_wait(ops[i]->cuda_stream, stream) != 0)
      res = chorus_error(ncclUnhandledCudaError, "ncclSend/ncclRecv: %s", chorus_dev_error());
out:
  if (saved >= 0 && saved != device) chorus_dev_use(saved);
  if (ll != stack) chorus_free(ll);
  return res;
}
