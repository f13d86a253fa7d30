/*
 * binomial.c - Broadcast and Reduce down and up a binomial tree (the host
 * side of algorithm `tree`), for calls small enough across hosts that the
 * hops' latency dominates: ceil(log2(n)) levels instead of the chain's n-1
 * hops.
 *
 * Positions are counted along the ring from the root (the ring groups
 * ranks by host), v = 0 the root. Position v > 0 hangs below v minus its
 * lowest set bit; its children are v + m for the powers of two m below
 * that bit (every m < n for the root), so the widest jumps, the ones most
 * likely to leave a host, come first from the root.
 *
 *   Broadcast  each rank takes the whole buffer from its parent, then
 *              sends it to all its children at once, from its output.
 *   Reduce     each rank folds its children's partial results into a
 *              copy of its input, one child after another in a fixed
 *              order (so the root's bits do not depend on timing), and
 *              sends the sum up; the root finishes it into its output.
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/prims.h"
#include "coll/xfer.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

#define B (op->u.binomial)

/* This rank's position counted from the root along the ring. */
static int position(const chorus_op *op) {
  const chorus_coll_comm *cc = op->cc;
  const int n = cc->nranks;
  return ((cc->ring_pos[cc->rank] - cc->ring_pos[op->root]) % n + n) % n;
}

/* The rank at position v from the root. */
static int rank_at(const chorus_op *op, int v) {
  return chorus_cc_ring_rank(op->cc, op->cc->ring_pos[op->root] + v);
}

/* The lowest set bit of v > 0; for the root the first power of two >= n. */
static int low_bit(int v, int n) {
  if (v == 0) {
    int m = 1;
    while (m < n) m <<= 1;
    return m;
  }
  return v & -v;
}

static chorus_conn *conn(const chorus_op *op, int peer, int dir) {
  return chorus_cc_conn(op->cc, peer, CHORUS_CH_COLL, dir);
}

/* Room for a transfer per child: at most log2(n) + 1 of them. */
static ncclResult_t alloc_xfers(chorus_op *op, size_t extra) {
  int nx = 1;
  while ((1 << nx) < op->cc->nranks) nx++;
  return chorus_xfer_alloc(op, nx + 1, extra, &B.x, &B.kind, &B.acc);
}

ncclResult_t chorus_broadcast_binomial(chorus_op *op) {
  const int n = op->cc->nranks, v = position(op);
  const size_t bytes = op->count * op->esize;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (v == 0 && op->sendbuff != op->recvbuff && bytes) memcpy(op->recvbuff, op->sendbuff, bytes);
  if (n == 1 || bytes == 0) return ncclSuccess;
  CHECK(alloc_xfers(op, 0));
  if (v > 0) {
    chorus_xfer_init(&B.x[0], conn(op, rank_at(op, v - low_bit(v, n)), CHORUS_DIR_RECV),
                     op->recvbuff, bytes);
    B.kind[0] = CHORUS_XFER_RECV;
    CORO_AWAIT_RES(op->co, res, chorus_xfer_all(op, B.x, B.kind, 1));
  }
  B.nx = 0;
  for (int m = low_bit(v, n) >> 1; m > 0; m >>= 1)
    if (v + m < n) {
      chorus_xfer_init(&B.x[B.nx], conn(op, rank_at(op, v + m), CHORUS_DIR_SEND), op->recvbuff,
                       bytes);
      B.kind[B.nx++] = CHORUS_XFER_SEND;
    }
  if (B.nx) CORO_AWAIT_RES(op->co, res, chorus_xfer_all(op, B.x, B.kind, B.nx));
  CORO_END(op->co);
}

ncclResult_t chorus_reduce_binomial(chorus_op *op) {
  const int n = op->cc->nranks, v = position(op);
  const size_t bytes = op->count * op->esize;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (n == 1 || bytes == 0) {
    if (bytes) chorus_coll_own_input(op, op->recvbuff, op->count, CHORUS_RED_FINALIZE);
    return ncclSuccess;
  }
  CHECK(alloc_xfers(op, bytes));
  chorus_coll_own_input(op, B.acc, op->count, 0); /* this rank's contribution */
  for (B.m = 1; B.m < low_bit(v, n); B.m <<= 1) {
    if (v + B.m >= n) break; /* no child here, nor further out */
    chorus_xfer_init(&B.x[0], conn(op, rank_at(op, v + B.m), CHORUS_DIR_RECV), B.acc, bytes);
    B.kind[0] = CHORUS_XFER_FOLD;
    CORO_AWAIT_RES(op->co, res, chorus_xfer_all(op, B.x, B.kind, 1));
  }
  if (v > 0) {
    chorus_xfer_init(&B.x[0], conn(op, rank_at(op, v - low_bit(v, n)), CHORUS_DIR_SEND), B.acc,
                     bytes);
    B.kind[0] = CHORUS_XFER_SEND;
    CORO_AWAIT_RES(op->co, res, chorus_xfer_all(op, B.x, B.kind, 1));
  } else {
    const void *src[1] = {B.acc};
    chorus_reduce(&op->red, op->recvbuff, src, 1, op->count, 0, CHORUS_RED_FINALIZE);
  }
  CORO_END(op->co);
}
