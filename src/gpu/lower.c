/*
 * lower.c - the exchanges that run a collective on GPU communicators, as
 * its task says (gpu.h): pure functions of the call, the rank and the
 * task, the same on every rank, replayed on host memory by the unit tests.
 */
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/ordered.h"

/* A ring or chain (ring.cu) over blocks of sb bytes: one launch for the
 * whole collective, in which every rank streams to the next one only. */
static int plan_ring(int kind, const void *send, void *recv, size_t sb, chorus_kern_xchg *x) {
  memset(x, 0, sizeof *x);
  x->send = send;
  x->recv = recv;
  x->bytes = sb;
  x->ring = kind;
  x->reduce = chorus_kern_ring_is_reduction(kind);
  return 1;
}

/* Fills the one-shot exchange of op (before splitting into pieces). 0 when
 * the function has no GPU schedule. */
static int describe(int me, int n, const chorus_op *op, chorus_kern_xchg *x) {
  const int root = op->root;
  const uint32_t all = n >= 32 ? 0xffffffffu : (1u << n) - 1, self = 1u << me;
  const size_t bytes = op->count * op->esize;
  memset(x, 0, sizeof *x);
  x->send = op->sendbuff;
  x->recv = op->recvbuff;
  x->bytes = bytes;
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
static size_t twoshot_share(int n, const chorus_op *op) {
  const size_t es = op->esize, per = es < 16 ? 16 / es : 1;
  return ((op->count + (size_t)n - 1) / (size_t)n + per - 1) / per * per * es;
}
static int plan_twoshot(int n, const chorus_op *op, chorus_kern_xchg *x) {
  memset(x, 0, sizeof *x);
  x->send = op->sendbuff;
  x->recv = op->recvbuff;
  x->bytes = twoshot_share(n, op);
  x->total = op->count * op->esize;
  x->reduce = 1;
  x->twoshot = 1;
  return 1;
}

/* AllReduce as a ring over n shares; elements past the last whole share
 * go one-shot. */
static int plan_ring_allreduce(int me, int n, const chorus_op *op, chorus_kern_xchg *out) {
  const size_t share = op->count / (size_t)n, main = share * (size_t)n;
  int k = plan_ring(CHORUS_KERN_RING_ALLREDUCE, op->sendbuff, op->recvbuff, share * op->esize, out);
  return k + allreduce_tail(me, n, op, main, &out[k]);
}

size_t chorus_gpu_twoshot_ll_max(size_t ll_lines, uint32_t cta_lines, uint32_t blocks) {
  if (!ll_lines || !cta_lines) return 0;
  /* The two halves fit when the second starts early enough: the largest
   * share of whole lines for which it does (the fit only shrinks as the
   * share grows). */
  size_t lo = 0, hi = ll_lines;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    if (chorus_kern_ll_second(mid, cta_lines, blocks) + mid <= ll_lines)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo * 8;
}

/* Bits 0-3 function, 4-7 type, 8-10 operator (reductions), 11-14 root
 * (rooted calls), 15-63 count. */
uint64_t chorus_gpu_call_desc(const chorus_op *op) {
  const int f = chorus_gpu_ordered_func(op);
  uint64_t d = (uint64_t)(f & 15) | (uint64_t)(op->dtype & 15) << 4;
  if (chorus_func_reduces(f)) d |= (uint64_t)(op->nccl_op & 7) << 8;
  if (chorus_func_rooted(f)) d |= (uint64_t)(op->root & 15) << 11;
  return d | (uint64_t)op->count << 15;
}

void chorus_gpu_call_describe(uint64_t desc, char *buf, size_t size) {
  chorus_msg_meta m;
  memset(&m, 0, sizeof m);
  const int func = (int)(desc & 15);
  m.call = (uint32_t)func | (uint32_t)((desc >> 4) & 15) << 8;
  m.redop = (uint32_t)((desc >> 8) & 7);
  m.root = chorus_func_rooted(func) ? (int32_t)((desc >> 11) & 15) : -1;
  m.count = desc >> 15;
  chorus_meta_describe(&m, buf, size);
  char *seq = strrchr(buf, '#'); /* no sequence number here */
  if (seq && seq > buf) seq[-1] = '\0';
}

int chorus_gpu_lower(int rank, int nranks, const chorus_op *op, const chorus_task *t,
                     chorus_kern_xchg out[CHORUS_GPU_MAX_STEPS]) {
  if (!describe(rank, nranks, op, &out[0])) return 0;
  const int f = op->func, ll = t->proto == CHORUS_PROTO_LL;
  const size_t bytes = op->count * op->esize;
  int k = 1;
  switch (t->algo) {
  case CHORUS_ALGO_ONESHOT:
    break;
  case CHORUS_ALGO_TWOSHOT:
    if (f != CHORUS_FUNC_ALLREDUCE) return 0;
    plan_twoshot(nranks, op, out);
    break;
  case CHORUS_ALGO_RING:
    if (f == CHORUS_FUNC_ALLREDUCE)
      k = plan_ring_allreduce(rank, nranks, op, out);
    else if (f == CHORUS_FUNC_ALLGATHER || f == CHORUS_FUNC_REDUCESCATTER)
      plan_ring(f == CHORUS_FUNC_ALLGATHER ? CHORUS_KERN_RING_ALLGATHER
                                           : CHORUS_KERN_RING_REDUCESCATTER,
                op->sendbuff, op->recvbuff, bytes, out);
    else
      return 0;
    break;
  case CHORUS_ALGO_CHAIN:
    /* Root, root + 1, ... for Broadcast, root + 1, ..., root for Reduce;
     * each rank takes from the one before and passes on, so every link
     * carries the buffer once instead of the root's links carrying it
     * n - 1 times. */
    if (f != CHORUS_FUNC_BROADCAST && f != CHORUS_FUNC_REDUCE) return 0;
    plan_ring(f == CHORUS_FUNC_REDUCE ? CHORUS_KERN_RING_REDUCE : CHORUS_KERN_RING_BROADCAST,
              op->sendbuff, op->recvbuff, bytes, out);
    out[0].root = op->root;
    break;
  default:
    return 0;
  }
  /* Rings and chains stream chunks; the rest take the task's protocol, a
   * ring AllReduce's tail its own. */
  for (int i = 0; i < k; i++) {
    if (!out[i].ring)
      out[i].ll = t->algo == CHORUS_ALGO_RING ? t->tail_proto == CHORUS_PROTO_LL : ll;
    out[i].desc = chorus_gpu_call_desc(op);
    out[i].seq = (uint32_t)op->meta.seq;
  }
  return k;
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
