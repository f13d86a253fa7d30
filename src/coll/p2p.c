/*
 * p2p.c - point-to-point calls and the collectives built from them.
 *
 * Send/Recv: one transfer on the peer's point-to-point channel. Calls to the
 * same peer and direction take tickets in call order (at planning time) and
 * use the connection one after another, so the k-th send to a peer meets the
 * peer's k-th receive from us however the executor interleaves them.
 *
 * AlltoAll, Gather, Scatter: one op drives a transfer per peer on the
 * collective channel, all at once, and copies its own block locally.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/prims.h"
#include "coll/xfer.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

#define P (op->u.p2p)
#define M (op->u.multi)

static chorus_conn *p2p_conn(const chorus_op *op) {
  int dir = op->func == CHORUS_FUNC_SEND ? CHORUS_DIR_SEND : CHORUS_DIR_RECV;
  return chorus_cc_conn(op->cc, op->root, CHORUS_CH_P2P, dir);
}

void chorus_p2p_take_ticket(chorus_op *op) {
  op->ticket = p2p_conn(op)->tickets_issued++;
}

ncclResult_t chorus_sendrecv(chorus_op *op) {
  chorus_conn *c = p2p_conn(op);
  ncclResult_t res;
  CORO_BEGIN(op->co);
  /* Wait for our turn on this connection (earlier calls to the same peer
   * in the same direction go first). */
  op->wait_conn = NULL;
  CORO_AWAIT(op->co, c->ticket_serving == op->ticket);
  chorus_xfer_init(&P.x, c, op->func == CHORUS_FUNC_SEND ? op->sendbuff : op->recvbuff,
                   op->count * op->esize);
  if (op->dev_mem) /* the network moves the GPU buffer itself */
    CORO_AWAIT_RES(op->co, res,
                   op->func == CHORUS_FUNC_SEND ? chorus_xfer_send_dev(op, &P.x)
                                                : chorus_xfer_recv_dev(op, &P.x));
  else
    CORO_AWAIT_RES(op->co, res,
                   op->func == CHORUS_FUNC_SEND ? chorus_xfer_send(op, &P.x)
                                                : chorus_xfer_recv(op, &P.x));
  c->ticket_serving++;
  op->ticks++;
  CORO_END(op->co);
}

typedef struct span {
  uintptr_t lo, hi;
} span;

static int span_cmp(const void *a, const void *b) {
  const uintptr_t x = ((const span *)a)->lo, y = ((const span *)b)->lo;
  return x < y ? -1 : x > y;
}

#define SPANS_ON_STACK 16

static int host_p2p(const chorus_op *op, int func) {
  return op->func == func && !op->cc->gpu && !op->cc->proxy && op->count > 0;
}

size_t chorus_p2p_mark_by_ref(chorus_op **ops, size_t n) {
  size_t nr = 0;
  for (size_t i = 0; i < n; i++) nr += host_p2p(ops[i], CHORUS_FUNC_RECV);
  for (size_t i = 0; i < n; i++)
    if (host_p2p(ops[i], CHORUS_FUNC_SEND)) ops[i]->by_ref = nr > 0;
  return nr;
}

ncclResult_t chorus_p2p_snapshot(chorus_op **ops, size_t n) {
  size_t nr = chorus_p2p_mark_by_ref(ops, n);
  if (!nr) return ncclSuccess;
  /* Receive spans by start, each with the furthest end so far: a send
   * [a, b) meets one if some span starting before b ends after a. A few
   * on the stack: small grouped Send/Recv pay no allocation here. */
  span few[SPANS_ON_STACK];
  span *r = nr <= SPANS_ON_STACK ? few : chorus_malloc(nr * sizeof *r);
  if (!r) return chorus_error(ncclSystemError, "out of memory checking a group's buffers");
  nr = 0;
  for (size_t i = 0; i < n; i++)
    if (host_p2p(ops[i], CHORUS_FUNC_RECV)) {
      const uintptr_t lo = (uintptr_t)ops[i]->recvbuff;
      r[nr++] = (span){lo, lo + ops[i]->count * ops[i]->esize};
    }
  if (nr > 1) qsort(r, nr, sizeof *r, span_cmp); /* a call of its own for one: 2% of a Send/Recv */
  for (size_t i = 1; i < nr; i++) r[i].hi = CHORUS_MAX(r[i].hi, r[i - 1].hi);
  ncclResult_t res = ncclSuccess;
  for (size_t i = 0; i < n && res == ncclSuccess; i++) {
    chorus_op *op = ops[i];
    if (!host_p2p(op, CHORUS_FUNC_SEND)) continue;
    const size_t bytes = op->count * op->esize;
    const uintptr_t a = (uintptr_t)op->sendbuff, b = a + bytes;
    size_t lo = 0, hi = nr; /* spans [0, lo) start before b */
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (r[mid].lo < b)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0 || r[lo - 1].hi <= a) continue;
    if (!chorus_op_scratch(op, bytes)) {
      res =
          chorus_error(ncclSystemError, "out of memory copying a Send's buffer (%zu bytes)", bytes);
      break;
    }
    memcpy(op->scratch, op->sendbuff, bytes);
    op->sendbuff = op->scratch;
  }
  if (r != few) chorus_free(r);
  return res;
}

static void multi_wait_info(chorus_op *op, chorus_waitset *ws) {
  for (int i = 0; i < M.nx; i++)
    if (M.x[i].co != -1)
      M.x[i].conn->ops->wait_info(
          M.x[i].conn, M.kind[i] == CHORUS_XFER_SEND ? CHORUS_DIR_SEND : CHORUS_DIR_RECV, ws);
}

static void multi_add(chorus_op *op, int peer, int send, const void *buf, size_t bytes) {
  int dir = send ? CHORUS_DIR_SEND : CHORUS_DIR_RECV;
  chorus_xfer_init(&M.x[M.nx], chorus_cc_conn(op->cc, peer, CHORUS_CH_COLL, dir), buf, bytes);
  M.kind[M.nx++] = send ? CHORUS_XFER_SEND : CHORUS_XFER_RECV;
}

static void own_block(chorus_op *op, char *dst, const char *src, size_t bytes) {
  M.own_dst = dst;
  M.own_src = src;
  M.own_left = bytes;
}

/* Lays out the transfers of AlltoAll, Gather or Scatter and this rank's
 * own block (no peer needed). In-place AlltoAll sends from a copy of
 * the input, since what arrives overwrites what is still to be sent. */
static ncclResult_t multi_plan(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, me = cc->rank;
  /* blk bytes a block, `ss` and `rs` from one to the next in the buffers
   * sent from and received into (a share's rows are pitch apart). */
  const size_t blk = op->count * op->esize, pitch = chorus_op_pitch(op) * op->esize;
  size_t ss = pitch, rs = pitch;
  int inplace_a2a = op->func == CHORUS_FUNC_ALLTOALL && op->sendbuff == op->recvbuff && n > 1;
  char *copy;
  CHECK(chorus_xfer_alloc(op, 2 * n, inplace_a2a ? blk * (size_t)n : 0, &M.x, &M.kind, &copy));
  M.nx = 0;
  M.own_left = 0;
  op->wait_info = multi_wait_info;
  const char *send = op->sendbuff;
  char *recv = op->recvbuff;
  if (inplace_a2a) { /* the peers' blocks: this rank's own stays where it is */
    chorus_coll_peers_blocks(op, copy);
    send = copy;
    ss = blk;
  }
  switch (op->func) {
  case CHORUS_FUNC_ALLTOALL:
    for (int p = 0; p < n; p++)
      if (p != me) {
        multi_add(op, p, 1, send + (size_t)p * ss, blk);
        multi_add(op, p, 0, recv + (size_t)p * rs, blk);
      }
    if (!inplace_a2a && send != recv)
      own_block(op, recv + (size_t)me * rs, send + (size_t)me * ss, blk);
    break;
  case CHORUS_FUNC_GATHER:
    if (me == op->root) {
      for (int p = 0; p < n; p++)
        if (p != me) multi_add(op, p, 0, recv + (size_t)p * rs, blk);
      if (send != recv + (size_t)me * rs) own_block(op, recv + (size_t)me * rs, send, blk);
    } else {
      multi_add(op, op->root, 1, send, blk);
    }
    break;
  case CHORUS_FUNC_SCATTER:
    if (me == op->root) {
      for (int p = 0; p < n; p++)
        if (p != me) multi_add(op, p, 1, send + (size_t)p * ss, blk);
      if (recv != send + (size_t)me * ss) own_block(op, recv, send + (size_t)me * ss, blk);
    } else {
      multi_add(op, op->root, 0, recv, blk);
    }
    break;
  default:
    return chorus_error(ncclInternalError, "multi_plan: unexpected function");
  }
  return ncclSuccess;
}

/* The transfers, and the own block in pieces of OWN_PIECE whenever they
 * wait: across hosts the copy then overlaps the bytes in flight instead of
 * delaying the first message. */
#define OWN_PIECE ((size_t)256 << 10)

static ncclResult_t multi_step(chorus_op *op) {
  for (;;) {
    ncclResult_t res = chorus_xfer_all(op, M.x, M.kind, M.nx);
    if ((res != ncclInProgress && res != ncclSuccess) || !M.own_left) return res;
    const size_t n = CHORUS_MIN(M.own_left, OWN_PIECE);
    memcpy(M.own_dst, M.own_src, n);
    M.own_dst += n;
    M.own_src += n;
    M.own_left -= n;
  }
}

ncclResult_t chorus_multi(chorus_op *op) {
  ncclResult_t res;
  CORO_BEGIN(op->co);
  CHECK(multi_plan(op));
  CORO_AWAIT_RES(op->co, res, multi_step(op));
  CORO_END(op->co);
}
