/*
 * plan.c - which exchanges run each collective on GPU communicators
 * (gpu.h): pure functions of the call, the rank and the thresholds, the
 * same on every rank, replayed on host memory by the unit tests.
 */
#include <string.h>

#include "gpu/gpu.h"

/* A ring or chain (ring.cu) over blocks of sb bytes: one launch for the
 * whole collective, in which every rank streams to the next one only. */
static int plan_ring(int kind, const void *send, void *recv, size_t sb, chorus_kern_xchg *x) {
  memset(x, 0, sizeof *x);
  x->send = send;
  x->recv = recv;
  x->bytes = sb;
  x->ring = kind;
  x->reduce = chorus_ring_is_reduction(kind);
  return 1;
}

/* Fills the one exchange of op (before splitting into pieces). 0 when the
 * function has no GPU schedule yet. */
static int describe(int me, int n, const chorus_gpu_tune *tune, const chorus_op *op,
                    chorus_kern_xchg *x) {
  const int root = op->root;
  const uint32_t all = n >= 32 ? 0xffffffffu : (1u << n) - 1, self = 1u << me;
  const size_t bytes = op->count * op->esize;
  memset(x, 0, sizeof *x);
  x->send = op->sendbuff;
  x->recv = op->recvbuff;
  x->bytes = bytes;
  const int rooted = op->func == CHORUS_FUNC_BROADCAST || op->func == CHORUS_FUNC_REDUCE;
  if (rooted && n > 2 && bytes >= tune->chain_bytes) {
    /* A chain (ring.cu): root, root + 1, ... for Broadcast, root + 1, ...,
     * root for Reduce; each rank takes from the one before and passes on,
     * so every link carries the buffer once instead of the root's links
     * carrying it n - 1 times. */
    plan_ring(op->func == CHORUS_FUNC_REDUCE ? CHORUS_RING_REDUCE : CHORUS_RING_BROADCAST,
              op->sendbuff, op->recvbuff, bytes, x);
    x->root = root;
    return 1;
  }
  switch (op->func) {
  case CHORUS_FUNC_ALLREDUCE:
    x->send_to = all & ~self;
    x->recv_from = all;
    x->reduce = 1;
    return 1;
  case CHORUS_FUNC_REDUCESCATTER:
    x->send_to = all & ~self;
    x->recv_from = all;
    x->reduce = 1;
    for (int p = 0; p < n; p++) x->soff[p] = (size_t)p * bytes;
    return 1;
  case CHORUS_FUNC_REDUCE:
    x->reduce = 1;
    if (me == root)
      x->recv_from = all;
    else
      x->send_to = 1u << root;
    return 1;
  case CHORUS_FUNC_ALLGATHER:
    x->send_to = all & ~self;
    x->recv_from = all;
    for (int p = 0; p < n; p++) x->roff[p] = (size_t)p * bytes;
    return 1;
  case CHORUS_FUNC_BROADCAST:
    if (me == root) {
      x->send_to = all & ~self;
      x->recv_from = self;
    } else {
      x->recv_from = 1u << root;
    }
    return 1;
  case CHORUS_FUNC_ALLTOALL:
    x->send_to = all & ~self;
    x->recv_from = all;
    for (int p = 0; p < n; p++) x->soff[p] = x->roff[p] = (size_t)p * bytes;
    return 1;
  case CHORUS_FUNC_GATHER:
    if (me == root) {
      x->recv_from = all;
      for (int p = 0; p < n; p++) x->roff[p] = (size_t)p * bytes;
    } else {
      x->send_to = 1u << root;
    }
    return 1;
  case CHORUS_FUNC_SCATTER:
    if (me == root) {
      x->send_to = all & ~self;
      x->recv_from = self;
      for (int p = 0; p < n; p++) x->soff[p] = (size_t)p * bytes;
    } else {
      x->recv_from = 1u << root;
    }
    return 1;
  default:
    return 0;
  }
}

/* A split AllReduce's elements past the last whole share (main of them):
 * one one-shot exchange into *tail, or none. Returns how many (0 or 1). */
static int allreduce_tail(int me, int n, const chorus_op *op, size_t main, chorus_kern_xchg *tail) {
  if (main == op->count) return 0;
  const uint32_t all = (1u << n) - 1;
  memset(tail, 0, sizeof *tail);
  tail->send = (const char *)op->sendbuff + main * op->esize;
  tail->recv = (char *)op->recvbuff + main * op->esize;
  tail->bytes = (op->count - main) * op->esize;
  tail->send_to = all & ~(1u << me);
  tail->recv_from = all;
  tail->reduce = 1;
  return 1;
}

/* AllReduce as ReduceScatter then AllGather in one launch (twoshot.cu):
 * 2(n-1)/n of the buffer crosses each link instead of (n-1). Shares are
 * whole 16-byte units (the last ones short or empty), so that every block
 * starts aligned where the buffer does and no element is left over. */
static int plan_twoshot(int n, const chorus_op *op, chorus_kern_xchg *x) {
  const size_t es = op->esize, per = es < 16 ? 16 / es : 1;
  const size_t share = ((op->count + (size_t)n - 1) / (size_t)n + per - 1) / per * per;
  memset(x, 0, sizeof *x);
  x->send = op->sendbuff;
  x->recv = op->recvbuff;
  x->bytes = share * es;
  x->total = op->count * es;
  x->reduce = 1;
  x->twoshot = 1;
  return 1;
}

/* AllReduce as a ring over n shares; elements past the last whole share
 * go one-shot. */
static int plan_ring_allreduce(int me, int n, const chorus_op *op, chorus_kern_xchg *out) {
  const size_t share = op->count / (size_t)n, main = share * (size_t)n;
  int k = plan_ring(CHORUS_RING_ALLREDUCE, op->sendbuff, op->recvbuff, share * op->esize, out);
  return k + allreduce_tail(me, n, op, main, &out[k]);
}

int chorus_gpu_plan(int rank, int nranks, const chorus_gpu_tune *tune, const chorus_op *op,
                    chorus_kern_xchg out[CHORUS_GPU_MAX_STEPS]) {
  if (!describe(rank, nranks, tune, op, &out[0])) return 0;
  const size_t bytes = out[0].bytes; /* per rank's block; an AllReduce's whole buffer */
  const size_t block = op->func == CHORUS_FUNC_ALLREDUCE ? bytes / (size_t)nranks : bytes;
  const int ring = nranks > 1 && block >= tune->ring_bytes;
  switch (op->func) {
  case CHORUS_FUNC_ALLREDUCE:
    if (op->count >= (size_t)nranks) {
      if (ring) return plan_ring_allreduce(rank, nranks, op, out);
      if (nranks > 1 && bytes >= tune->twoshot_bytes && bytes <= tune->twoshot_max)
        return plan_twoshot(nranks, op, out);
    }
    return 1;
  case CHORUS_FUNC_ALLGATHER:
    return ring ? plan_ring(CHORUS_RING_ALLGATHER, op->sendbuff, op->recvbuff, bytes, out) : 1;
  case CHORUS_FUNC_REDUCESCATTER:
    return ring ? plan_ring(CHORUS_RING_REDUCESCATTER, op->sendbuff, op->recvbuff, bytes, out) : 1;
  default:
    return 1;
  }
}

void chorus_gpu_piece(const chorus_kern_xchg *whole, int nranks, size_t off, size_t piece,
                      chorus_kern_xchg *out) {
  *out = *whole;
  out->bytes = whole->bytes - off < piece ? whole->bytes - off : piece;
  for (int p = 0; p < nranks; p++) {
    out->soff[p] += off;
    out->roff[p] += off;
  }
}
