/*
 * ring_coll.c - ring and chain schedules for AllGather, ReduceScatter,
 * Broadcast and Reduce over point-to-point connections (any transport).
 *
 * Every schedule cuts its blocks into pieces of at most one slot and runs the
 * ring steps piece by piece, so large buffers stream through the ring while
 * small ones take one message per step. Received slots are read in place and
 * reduced or copied straight into the next send slot.
 *
 *   AllGather      step 0 sends our block; step k receives block p-k from the
 *                  previous rank, stores it and passes it on (k < n-1).
 *   ReduceScatter  step 0 sends input block p-1; step k receives the partial
 *                  sum of block p-1-k, adds our input and passes it on; after
 *                  step n-1 the partial is block p, complete.
 *   Broadcast      a chain from the root along the ring; each rank stores and
 *                  forwards every piece (the last one only stores).
 *   Reduce         a chain ending at the root: the rank after the root starts,
 *                  each next rank adds its input, the root finishes.
 * (p is the rank's ring position; ring order groups ranks by host.)
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/prims.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

#define R (op->u.ring)

/* Pieces: each round moves one piece of up to seg_max elements per block. */
static void piece_of(const chorus_op *op, size_t round, size_t *off, size_t *len) {
  size_t seg = R.plan.seg_max;
  *off = round * seg;
  *len = *off < op->count ? CHORUS_MIN(seg, op->count - *off) : 0;
}

static void piece(const chorus_op *op, size_t *off, size_t *len) {
  piece_of(op, R.round, off, len);
}

static void ring_setup(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int p = cc->ring_pos[cc->rank];
  R.next = chorus_cc_conn(cc, chorus_cc_ring_rank(cc, p + 1), CHORUS_CH_COLL, CHORUS_DIR_SEND);
  R.prev = chorus_cc_conn(cc, chorus_cc_ring_rank(cc, p - 1), CHORUS_CH_COLL, CHORUS_DIR_RECV);
  size_t seg = CHORUS_MIN(R.next->slot_bytes, R.prev->slot_bytes) / op->esize;
  size_t align = CHORUS_MAX((size_t)1, 64 / op->esize);
  seg = seg / align * align;
  R.plan.seg_max = seg ? seg : 1;
  R.plan.nrounds = CHORUS_DIV_UP(op->count, R.plan.seg_max);
  R.placed = R.taken = 0;
}

static ncclResult_t release_prev(chorus_op *op) {
  R.taken++;
  return chorus_prim_release(op, R.prev);
}

#define CHECK_SIZE(len)                                                                            \
  do {                                                                                             \
    if (R.rbytes != (len)*op->esize)                                                               \
      return chorus_prim_size_error(op, R.prev, R.rbytes, (len)*op->esize);                        \
  } while (0)

static char *blk(const chorus_op *op, const void *base, int b, size_t off) {
  return (char *)base + ((size_t)b * chorus_op_pitch(op) + off) * op->esize;
}

/* AllGather's message j from prev: round j / (n-1), step j % (n-1) + 1,
 * the piece of block p - step. */
static char *allgather_place(const void *ctx, uint64_t j, size_t *bytes) {
  const chorus_op *op = ctx;
  const chorus_coll_comm *cc = op->cc;
  const int n = cc->nranks, k = (int)(j % (uint64_t)(n - 1)) + 1;
  size_t off, len;
  piece_of(op, (size_t)(j / (uint64_t)(n - 1)), &off, &len);
  *bytes = len * op->esize;
  return blk(op, op->recvbuff, chorus_cc_ring_rank(cc, cc->ring_pos[cc->rank] - k), off);
}

/* Broadcast's message j: piece j. */
static char *broadcast_place(const void *ctx, uint64_t j, size_t *bytes) {
  const chorus_op *op = ctx;
  size_t off, len;
  piece_of(op, (size_t)j, &off, &len);
  *bytes = len * op->esize;
  return (char *)op->recvbuff + off * op->esize;
}

ncclResult_t chorus_allgather_ring(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, p = cc->ring_pos[cc->rank];
  size_t off, len;
  ncclResult_t res;
  char *own = blk(op, op->recvbuff, cc->rank, 0);
  CORO_BEGIN(op->co);
  /* Our own block: in place when sendbuff already is recvbuff's block. */
  if (n == 1 && op->sendbuff != own) memcpy(own, op->sendbuff, op->count * op->esize);
  if (n == 1 || op->count == 0) return ncclSuccess;
  ring_setup(op);
  /* Every piece is sent from, and received into, its place in recvbuff
   * (no copy through the slots where the transport allows); our own
   * pieces from sendbuff, each copied to its place once posted, as
   * Broadcast's root does. */
  for (R.round = 0; R.round < R.plan.nrounds; R.round++) {
    CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
    piece(op, &off, &len);
    CHECK(chorus_prim_post_from(op, R.next, R.sbuf, (const char *)op->sendbuff + off * op->esize,
                                len * op->esize));
    if (op->sendbuff != own)
      memcpy(own + off * op->esize, (const char *)op->sendbuff + off * op->esize, len * op->esize);
    for (R.k = 1; R.k < n; R.k++) {
      CORO_AWAIT_RES(op->co, res,
                     chorus_prim_recv_placed(op, R.prev, allgather_place, op,
                                             (uint64_t)R.plan.nrounds * (uint64_t)(n - 1),
                                             &R.placed, R.taken, &R.rbuf, &R.rbytes));
      piece(op, &off, &len);
      CHECK_SIZE(len);
      char *dst = blk(op, op->recvbuff, chorus_cc_ring_rank(cc, p - R.k), off);
      if (R.rbuf != dst) memcpy(dst, R.rbuf, R.rbytes);
      if (R.k < n - 1) {
        CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
        piece(op, &off, &len);
        CHECK(chorus_prim_post_from(op, R.next, R.sbuf,
                                    blk(op, op->recvbuff, chorus_cc_ring_rank(cc, p - R.k), off),
                                    len * op->esize));
      }
      CHECK(release_prev(op));
    }
  }
  CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, R.next));
  CORO_END(op->co);
}

/* dst = scaled input piece [+ received partial]; finalize on the last step. */
static void reduce_piece(chorus_op *op, void *dst, const void *in, const void *rbuf, size_t len,
                         int finalize) {
  if (rbuf) {
    const void *src[2] = {rbuf, in};
    chorus_reduce(&op->red, dst, src, 2, len, 2u, finalize);
  } else {
    const void *src[1] = {in};
    chorus_reduce(&op->red, dst, src, 1, len, 1u, finalize);
  }
}

ncclResult_t chorus_reducescatter_ring(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, p = cc->ring_pos[cc->rank];
  size_t off, len;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (n == 1) {
    if (op->count) chorus_coll_own_input(op, op->recvbuff, op->count, CHORUS_RED_FINALIZE);
    return ncclSuccess;
  }
  if (op->count == 0) return ncclSuccess;
  ring_setup(op);
  for (R.round = 0; R.round < R.plan.nrounds; R.round++) {
    CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
    piece(op, &off, &len);
    reduce_piece(op, R.sbuf, blk(op, op->sendbuff, chorus_cc_ring_rank(cc, p - 1), off), NULL, len,
                 0);
    CHECK(chorus_prim_post(op, R.next, len * op->esize));
    for (R.k = 1; R.k < n; R.k++) {
      CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, R.prev, &R.rbuf, &R.rbytes));
      piece(op, &off, &len);
      CHECK_SIZE(len);
      if (R.k < n - 1) {
        CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
        piece(op, &off, &len);
        reduce_piece(op, R.sbuf, blk(op, op->sendbuff, chorus_cc_ring_rank(cc, p - 1 - R.k), off),
                     R.rbuf, len, 0);
        CHECK(chorus_prim_post(op, R.next, len * op->esize));
      } else {
        /* Block p - n = p: ours, complete. In place, recvbuff is that very
         * input block and reading it while writing it is allowed. */
        reduce_piece(op, (char *)op->recvbuff + off * op->esize,
                     blk(op, op->sendbuff, cc->rank, off), R.rbuf, len, 1);
      }
      CHECK(chorus_prim_release(op, R.prev));
    }
  }
  CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, R.next));
  CORO_END(op->co);
}

/* Distance from the root along the ring (0 = root). */
static int from_root(const chorus_op *op) {
  const chorus_coll_comm *cc = op->cc;
  int n = cc->nranks;
  return ((cc->ring_pos[cc->rank] - cc->ring_pos[op->root]) % n + n) % n;
}

ncclResult_t chorus_broadcast_ring(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, d = from_root(op);
  size_t off, len;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (n == 1 && op->sendbuff != op->recvbuff && op->count)
    memcpy(op->recvbuff, op->sendbuff, op->count * op->esize);
  if (n == 1 || op->count == 0) return ncclSuccess;
  ring_setup(op);
  /* The root sends from its input and copies each piece to its output
   * once the piece is posted: the copy then overlaps the pieces in
   * flight, and reads what the send has just brought into the cache,
   * where a copy of the whole buffer first would delay the first piece. */
  for (R.round = 0; R.round < R.plan.nrounds; R.round++) {
    if (d > 0) {
      CORO_AWAIT_RES(op->co, res,
                     chorus_prim_recv_placed(op, R.prev, broadcast_place, op, R.plan.nrounds,
                                             &R.placed, R.taken, &R.rbuf, &R.rbytes));
      piece(op, &off, &len);
      CHECK_SIZE(len);
      if (R.rbuf != (char *)op->recvbuff + off * op->esize)
        memcpy((char *)op->recvbuff + off * op->esize, R.rbuf, R.rbytes);
    }
    if (d < n - 1) {
      CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
      piece(op, &off, &len);
      CHECK(chorus_prim_post_from(
          op, R.next, R.sbuf,
          (const char *)(d == 0 ? op->sendbuff : op->recvbuff) + off * op->esize, len * op->esize));
      if (d == 0 && op->sendbuff != op->recvbuff)
        memcpy((char *)op->recvbuff + off * op->esize, (const char *)op->sendbuff + off * op->esize,
               len * op->esize);
    }
    if (d > 0) CHECK(release_prev(op));
  }
  if (d < n - 1) CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, R.next));
  CORO_END(op->co);
}

ncclResult_t chorus_reduce_ring(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks;
  /* Chain position: 0 is the rank after the root, n-1 the root. */
  int c = (from_root(op) + n - 1) % n;
  size_t off, len;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (n == 1) {
    if (op->count) chorus_coll_own_input(op, op->recvbuff, op->count, CHORUS_RED_FINALIZE);
    return ncclSuccess;
  }
  if (op->count == 0) return ncclSuccess;
  ring_setup(op);
  for (R.round = 0; R.round < R.plan.nrounds; R.round++) {
    if (c > 0) {
      CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, R.prev, &R.rbuf, &R.rbytes));
      piece(op, &off, &len);
      CHECK_SIZE(len);
    }
    if (c < n - 1) {
      CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
      piece(op, &off, &len);
      reduce_piece(op, R.sbuf, (const char *)op->sendbuff + off * op->esize, c > 0 ? R.rbuf : NULL,
                   len, 0);
      CHECK(chorus_prim_post(op, R.next, len * op->esize));
    } else {
      piece(op, &off, &len);
      reduce_piece(op, (char *)op->recvbuff + off * op->esize,
                   (const char *)op->sendbuff + off * op->esize, R.rbuf, len, 1);
    }
    if (c > 0) CHECK(chorus_prim_release(op, R.prev));
  }
  if (c < n - 1) CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, R.next));
  CORO_END(op->co);
}
