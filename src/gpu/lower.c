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
  int k = plan_ring(CHORUS_RING_ALLREDUCE, op->sendbuff, op->recvbuff, share * op->esize, out);
  return k + allreduce_tail(me, n, op, main, &out[k]);
}

/* Whether a block of `bytes` moves in LL lines: below pipe_bytes, unless
 * NCCL_PROTO leaves only one of LL and Simple. */
static int use_ll(int func, const chorus_gpu_tune *t, size_t bytes) {
  const uint32_t deny = t->proto_deny[func];
  if (deny & (1u << CHORUS_PROTO_LL)) return 0;
  if (deny & (1u << CHORUS_PROTO_SIMPLE)) return 1;
  return bytes < t->pipe_bytes;
}

/* Whether an LL two-shot's two shares of `share` bytes fit a slot. */
static int twoshot_fits_ll(const chorus_gpu_tune *t, size_t share) {
  const size_t lines = (share + 7) / 8;
  return t->ll_lines > 0 && t->ll_cta_lines > 0 &&
         chorus_ll_second(lines, t->ll_cta_lines) + lines <= t->ll_lines;
}

/* The two-shot's protocol for op (1 LL, 0 FIFO chunks), or -1 when
 * neither is possible. */
static int twoshot_proto(int n, const chorus_gpu_tune *t, const chorus_op *op) {
  const uint32_t deny = t->proto_deny[op->func];
  const int ll = twoshot_fits_ll(t, twoshot_share(n, op)) && !(deny & (1u << CHORUS_PROTO_LL));
  const int fifo = t->fifo_twoshot && !(deny & (1u << CHORUS_PROTO_SIMPLE));
  if (ll && (op->count * op->esize <= t->twoshot_ll_bytes || !fifo)) return 1;
  return fifo ? 0 : -1;
}

/* Whether algo (CHORUS_ALGO_*) can run op here at all (an AllReduce has
 * at least one element per rank by then: pick). */
static int feasible(int algo, int n, const chorus_gpu_tune *t, const chorus_op *op) {
  const int f = op->func;
  switch (algo) {
  case CHORUS_ALGO_RING: /* rings and chains stream Simple chunks */
    if (n < 2 || (t->proto_deny[f] & (1u << CHORUS_PROTO_SIMPLE))) return 0;
    return f == CHORUS_FUNC_ALLREDUCE || f == CHORUS_FUNC_ALLGATHER ||
           f == CHORUS_FUNC_REDUCESCATTER || f == CHORUS_FUNC_BROADCAST || f == CHORUS_FUNC_REDUCE;
  case CHORUS_ALGO_TWOSHOT:
    return f == CHORUS_FUNC_ALLREDUCE && n > 1 && twoshot_proto(n, t, op) >= 0;
  case CHORUS_ALGO_ONESHOT:
    return 1;
  default:
    return 0;
  }
}

/* Whether NCCL_ALGO lets algo run op (an exchange with every peer is
 * "oneshot", and "direct" too for AlltoAll, Gather and Scatter). */
static int allowed(int algo, const chorus_gpu_tune *t, int func) {
  const uint32_t deny = t->algo_deny[func];
  if (!(deny & (1u << algo))) return 1;
  return algo == CHORUS_ALGO_ONESHOT && !(deny & (1u << CHORUS_ALGO_DIRECT)) &&
         (func == CHORUS_FUNC_ALLTOALL || func == CHORUS_FUNC_GATHER ||
          func == CHORUS_FUNC_SCATTER);
}

/* The algorithm the thresholds pick (measured crossovers, gpu.c). */
static int default_algo(int n, const chorus_gpu_tune *t, const chorus_op *op) {
  const size_t bytes = op->count * op->esize;
  const int ring = feasible(CHORUS_ALGO_RING, n, t, op);
  switch (op->func) {
  case CHORUS_FUNC_ALLREDUCE:
    if (ring && bytes / (size_t)n >= t->ring_bytes) return CHORUS_ALGO_RING;
    if (bytes >= t->twoshot_bytes && bytes <= t->twoshot_max &&
        feasible(CHORUS_ALGO_TWOSHOT, n, t, op))
      return CHORUS_ALGO_TWOSHOT;
    return CHORUS_ALGO_ONESHOT;
  case CHORUS_FUNC_ALLGATHER:
  case CHORUS_FUNC_REDUCESCATTER:
    return ring && bytes >= t->ring_bytes ? CHORUS_ALGO_RING : CHORUS_ALGO_ONESHOT;
  case CHORUS_FUNC_BROADCAST:
  case CHORUS_FUNC_REDUCE:
    return ring && bytes >= t->chain_bytes ? CHORUS_ALGO_RING : CHORUS_ALGO_ONESHOT;
  default:
    return CHORUS_ALGO_ONESHOT;
  }
}

/* The default if NCCL_ALGO allows it, else the first allowed of ring,
 * two-shot and one-shot that can run op; -1 when none is and NCCL_ALGO
 * names op's function (a global list naming nothing the function has
 * does not bind it, as in NCCL). */
static int pick(int n, const chorus_gpu_tune *t, const chorus_op *op) {
  /* An AllReduce of fewer elements than ranks has no shares to split:
   * whatever the lists say, it is one exchange (nccl-tests' own result
   * checks are such calls). */
  if (op->func == CHORUS_FUNC_ALLREDUCE && op->count < (size_t)n) return CHORUS_ALGO_ONESHOT;
  const int def = default_algo(n, t, op);
  if (allowed(def, t, op->func)) return def;
  static const int order[] = {CHORUS_ALGO_RING, CHORUS_ALGO_TWOSHOT, CHORUS_ALGO_ONESHOT};
  for (int i = 0; i < 3; i++)
    if (allowed(order[i], t, op->func) && feasible(order[i], n, t, op)) return order[i];
  return t->algo_named[op->func] ? -1 : def;
}

static int is_rooted(int func) {
  return func == CHORUS_FUNC_BROADCAST || func == CHORUS_FUNC_REDUCE ||
         func == CHORUS_FUNC_GATHER || func == CHORUS_FUNC_SCATTER;
}
static int is_reduction(int func) {
  return func == CHORUS_FUNC_ALLREDUCE || func == CHORUS_FUNC_REDUCE ||
         func == CHORUS_FUNC_REDUCESCATTER;
}

/* Bits 0-3 function, 4-7 type, 8-10 operator (reductions), 11-14 root
 * (rooted calls), 15-63 count. */
uint64_t chorus_gpu_call_desc(const chorus_op *op) {
  uint64_t d = (uint64_t)(op->func & 15) | (uint64_t)(op->dtype & 15) << 4;
  if (is_reduction(op->func)) d |= (uint64_t)(op->nccl_op & 7) << 8;
  if (is_rooted(op->func)) d |= (uint64_t)(op->root & 15) << 11;
  return d | (uint64_t)op->count << 15;
}

void chorus_gpu_call_describe(uint64_t desc, char *buf, size_t size) {
  chorus_msg_meta m;
  memset(&m, 0, sizeof m);
  const int func = (int)(desc & 15);
  m.call = (uint32_t)func | (uint32_t)((desc >> 4) & 15) << 8;
  m.redop = (uint32_t)((desc >> 8) & 7);
  m.root = is_rooted(func) ? (int32_t)((desc >> 11) & 15) : -1;
  m.count = desc >> 15;
  chorus_meta_describe(&m, buf, size);
  char *seq = strrchr(buf, '#'); /* no sequence number here */
  if (seq && seq > buf) seq[-1] = '\0';
}

int chorus_gpu_plan(int rank, int nranks, const chorus_gpu_tune *tune, const chorus_op *op,
                    chorus_kern_xchg out[CHORUS_GPU_MAX_STEPS]) {
  if (!describe(rank, nranks, op, &out[0])) return 0;
  const int algo = pick(nranks, tune, op), f = op->func;
  const size_t bytes = op->count * op->esize;
  int k = 1;
  if (algo < 0) return -1;
  if (algo == CHORUS_ALGO_TWOSHOT) {
    plan_twoshot(nranks, op, out);
    out[0].ll = twoshot_proto(nranks, tune, op) == 1;
    out[0].desc = chorus_gpu_call_desc(op);
    return 1;
  }
  if (algo == CHORUS_ALGO_RING) {
    if (f == CHORUS_FUNC_ALLREDUCE) {
      k = plan_ring_allreduce(rank, nranks, op, out);
    } else if (f == CHORUS_FUNC_BROADCAST || f == CHORUS_FUNC_REDUCE) {
      /* A chain: root, root + 1, ... for Broadcast, root + 1, ..., root
       * for Reduce; each rank takes from the one before and passes on,
       * so every link carries the buffer once instead of the root's
       * links carrying it n - 1 times. */
      plan_ring(f == CHORUS_FUNC_REDUCE ? CHORUS_RING_REDUCE : CHORUS_RING_BROADCAST, op->sendbuff,
                op->recvbuff, bytes, out);
      out[0].root = op->root;
    } else if (f == CHORUS_FUNC_ALLGATHER || f == CHORUS_FUNC_REDUCESCATTER) {
      plan_ring(f == CHORUS_FUNC_ALLGATHER ? CHORUS_RING_ALLGATHER : CHORUS_RING_REDUCESCATTER,
                op->sendbuff, op->recvbuff, bytes, out);
    }
  }
  for (int i = 0; i < k; i++) {
    if (!out[i].ring) out[i].ll = use_ll(f, tune, out[i].bytes);
    out[i].desc = chorus_gpu_call_desc(op);
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
