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

int chorus_gpu_p2p_rounds(int rank, int nranks, chorus_op *const *ops, int nops,
                          chorus_kern_p2p *rounds, char *err, size_t errlen) {
  int nsend[CHORUS_KERN_MAX_RANKS] = {0}, nrecv[CHORUS_KERN_MAX_RANKS] = {0};
  int nrounds = 0;
  for (int i = 0; i < nops; i++) {
    const chorus_op *op = ops[i];
    const size_t bytes = op->count * op->esize;
    const int p = op->root;
    if (!bytes) continue; /* empty calls move nothing and match nothing */
    if (op->func == CHORUS_FUNC_SEND) {
      chorus_kern_p2p *r = &rounds[nsend[p]++];
      r->send[p] = op->sendbuff;
      r->sbytes[p] = bytes;
    } else {
      chorus_kern_p2p *r = &rounds[nrecv[p]++];
      r->recv[p] = op->recvbuff;
      r->rbytes[p] = bytes;
    }
    if (nsend[p] > nrounds) nrounds = nsend[p];
    if (nrecv[p] > nrounds) nrounds = nrecv[p];
  }
  for (int k = 0; k < nrounds; k++) {
    const chorus_kern_p2p *r = &rounds[k];
    if (r->sbytes[rank] != r->rbytes[rank]) {
      snprintf(err, errlen,
               "rank %d: its call %d to itself is ncclSend of %zu bytes but ncclRecv of %zu "
               "bytes in the same group (a send to itself needs a receive of the same size)",
               rank, k + 1, r->sbytes[rank], r->rbytes[rank]);
      return -1;
    }
  }
  (void)nranks;
  return nrounds;
}

int chorus_gpu_p2p_split(const chorus_kern_p2p *round, int nranks, size_t ll_bytes,
                         chorus_kern_p2p *ll, chorus_kern_p2p *fifo) {
  memset(ll, 0, sizeof *ll);
  memset(fifo, 0, sizeof *fifo);
  int any = 0;
  for (int q = 0; q < nranks; q++) {
    const size_t sb = round->sbytes[q], rb = round->rbytes[q];
    if (sb) {
      chorus_kern_p2p *to = sb <= ll_bytes ? ll : fifo;
      to->send[q] = round->send[q];
      to->sbytes[q] = sb;
      any |= to == ll ? 1 : 2;
    }
    if (rb) {
      chorus_kern_p2p *to = rb <= ll_bytes ? ll : fifo;
      to->recv[q] = round->recv[q];
      to->rbytes[q] = rb;
      any |= to == ll ? 1 : 2;
    }
  }
  return any;
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

ncclResult_t chorus_gpu_enqueue_p2p(chorus_gpu *g, chorus_op *const *ops, int nops) {
  chorus_kern_p2p *rounds = chorus_calloc((size_t)nops, sizeof *rounds);
  if (!rounds) return chorus_error(ncclSystemError, "out of memory planning %d Send/Recv", nops);
  char err[256];
  const int rank = chorus_gpu_rank(g), n = chorus_gpu_nranks(g);
  const int saved = chorus_device_current(), device = chorus_gpu_device(g);
  int nrounds = chorus_gpu_p2p_rounds(rank, n, ops, nops, rounds, err, sizeof err);
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
    res = chorus_gpu_sendrecv(g, &rounds[k], stream);
  for (int i = 1; i < nops && res == ncclSuccess; i++)
    if (chorus_dev_stream_wait(ops[i]->cuda_stream, stream) != 0)
      res = chorus_error(ncclUnhandledCudaError, "ncclSend/ncclRecv: %s", chorus_dev_error());
out:
  if (saved >= 0 && saved != device) chorus_dev_use(saved);
  chorus_free(rounds);
  return res;
}
