/*
 * zerocopy.c - zero-copy collectives on GPU communicators (gpu.h; the
 * kernel: device/zerocopy.cu): the kernel's shape for a call the planner
 * took zero-copy, and where every rank's buffers are, as this rank's GPU
 * reaches them.
 *
 * Two ways to know the peers' buffers:
 *   one process: all ranks' calls in one group (ncclCommInitAll and
 *     nccl-tests' -g, say). The group holds every rank's pointers, and
 *     cudaMalloc or cuMem memory mapped for every GPU (ncclMemAlloc's) is
 *     reachable from them all; other memory (pools, host) is not used;
 *   one process per rank: windows registered with NCCL_WIN_COLL_SYMMETRIC.
 *     Registering one hands its cuMem allocation to every rank (a POSIX
 *     descriptor over a Unix socket, util/fdpass) and maps theirs; a call
 *     whose buffers lie in windows at the same offsets on every rank (the
 *     kernel checks the offsets before it touches anything) then reaches
 *     the peers' buffers as their window plus that offset.
 * Every rank decides alike: from the call and the settings, and from what
 * all ranks share (the group's calls; a window every rank mapped).
 */
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/gpu_impl.h"
#include "gpu/regwin.h"
#include "util/misc.h"

static int kind_of(int func) {
  return func == CHORUS_FUNC_ALLREDUCE       ? CHORUS_KERN_ZC_ALLREDUCE
         : func == CHORUS_FUNC_ALLGATHER     ? CHORUS_KERN_ZC_ALLGATHER
         : func == CHORUS_FUNC_REDUCESCATTER ? CHORUS_KERN_ZC_REDUCESCATTER
                                             : 0;
}

/* Whether memory at p is 16-byte aligned. */
static int aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

/* Whose buffers a kind touches on other ranks: AllReduce reads every
 * rank's input and writes every rank's output, AllGather only writes the
 * outputs, ReduceScatter only reads the inputs. */
static int peers_send(int kind) {
  return kind != CHORUS_KERN_ZC_ALLGATHER;
}
static int peers_recv(int kind) {
  return kind != CHORUS_KERN_ZC_REDUCESCATTER;
}

int chorus_gpu_zc_shape(const chorus_op *op, const chorus_task *t, int nranks, chorus_kern_zc *d) {
  memset(d, 0, sizeof *d);
  const int kind = kind_of(op->func);
  if (!kind) return 0;
  const size_t bytes = op->count * op->esize;
  /* Blocks of whole 16-byte units, so that every rank's starts aligned
   * (the planner takes AllGather and ReduceScatter only in such blocks). */
  if (kind == CHORUS_KERN_ZC_ALLREDUCE)
    d->block = ((bytes + (size_t)nranks - 1) / (size_t)nranks + 15) / 16 * 16;
  d->grid = t->channels ? t->channels : 1;
  d->kind = kind;
  d->bytes = bytes;
  d->desc = chorus_gpu_call_desc(op);
  d->seq = (uint32_t)op->meta.seq;
  return kind;
}

/* Where op's buffers are in the windows: the windows (NULL where a buffer
 * is not one peers touch) and offsets; 0 when some buffer is not in one. */
static int windows_of(const chorus_gpu *g, const chorus_op *op, int kind,
                      const chorus_gpu_window **ws, size_t *soff, const chorus_gpu_window **wr,
                      size_t *roff) {
  *ws = *wr = NULL;
  *soff = *roff = 0;
  if (!g->all_remote || !g->windows || g->staged) return 0;
  const size_t bytes = op->count * op->esize, n = (size_t)g->nranks;
  const size_t whole = kind == CHORUS_KERN_ZC_ALLREDUCE ? bytes : bytes * n;
  const size_t send_len = kind == CHORUS_KERN_ZC_ALLGATHER ? bytes : whole;
  const size_t recv_len = kind == CHORUS_KERN_ZC_REDUCESCATTER ? bytes : whole;
  /* The buffers peers reach must lie in windows; this rank's own are used
   * as they are. */
  if (peers_send(kind) && !(*ws = chorus_gpu_window_find(g, op->sendbuff, send_len, soff)))
    return 0;
  if (peers_recv(kind) && !(*wr = chorus_gpu_window_find(g, op->recvbuff, recv_len, roff)))
    return 0;
  return aligned16(op->sendbuff) && aligned16(op->recvbuff) && *soff % 16 == 0 && *roff % 16 == 0;
}

int chorus_gpu_in_windows(const chorus_gpu *g, const chorus_op *op) {
  const chorus_gpu_window *ws, *wr;
  size_t soff, roff;
  const int kind = kind_of(op->func);
  return kind && windows_of(g, op, kind, &ws, &soff, &wr, &roff);
}

int chorus_gpu_zc_from_windows(const chorus_gpu *g, const chorus_op *op, const chorus_task *t,
                               chorus_kern_zc *d) {
  const chorus_gpu_window *ws, *wr;
  size_t soff, roff;
  if (!chorus_gpu_zc_shape(op, t, g->nranks, d) ||
      !windows_of(g, op, d->kind, &ws, &soff, &wr, &roff)) {
    memset(d, 0, sizeof *d);
    return 0;
  }
  const int n = g->nranks, me = g->rank;
  for (int p = 0; p < n; p++) {
    d->send[p] = ws ? ws->peer[p] + soff : NULL;
    d->recv[p] = wr ? wr->peer[p] + roff : NULL;
  }
  d->send[me] = op->sendbuff;
  d->recv[me] = op->recvbuff;
  d->soff = ws ? soff : 0;
  d->roff = wr ? roff : 0;
  return d->kind;
}
