/*
 * allreduce.c - AllReduce schedules.
 *
 * ring: reduce-scatter then all-gather around the ring, pipelined in
 * slot-sized segments (algo/ring.h has the partition). Every step reads a
 * received slot in place and reduces straight into the next send slot, so
 * each byte is touched once per hop. Works on any mix of transports.
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/prims.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

#define R (op->u.ring)

/* One segment's location in the user buffers. */
static void segment(const chorus_op *op, int seg, size_t *off, size_t *len) {
  chorus_ring_segment(&R.plan, R.round, seg, off, len);
}

static ncclResult_t check_size(chorus_op *op, size_t len) {
  if (R.rbytes == len * op->esize) return ncclSuccess;
  return chorus_prim_size_error(op, R.prev, R.rbytes, len * op->esize);
}

/* dst = local input (scaled for PREMULSUM) [+ received partial]. */
static void reduce_into(chorus_op *op, void *dst, const void *rbuf, size_t off, size_t len,
                        int finalize) {
  const char *in = (const char *)op->sendbuff + off * op->esize;
  if (rbuf) {
    const void *src[2] = {rbuf, in};
    chorus_reduce(&op->red, dst, src, 2, len, 2u, finalize);
  } else {
    const void *src[1] = {in};
    chorus_reduce(&op->red, dst, src, 1, len, 1u, finalize);
  }
}

/* Message j from prev: round j / (2(n-1)); of its 2(n-1) steps, the
 * first n-1 carry partial sums (reduced from the slot), the rest finished
 * segments, stored where they belong in recvbuff. */
static char *allreduce_place(const void *ctx, uint64_t j, size_t *bytes) {
  const chorus_op *op = ctx;
  const chorus_coll_comm *cc = op->cc;
  const int n = cc->nranks;
  const uint64_t steps = 2 * (uint64_t)(n - 1), t = j % steps;
  if (t < (uint64_t)(n - 1)) return NULL;
  size_t off, len;
  chorus_ring_segment(
      &R.plan, (size_t)(j / steps),
      chorus_ring_ag_seg(cc->ring_pos[cc->rank], (int)(t - (uint64_t)(n - 1)) + 1, n), &off, &len);
  *bytes = len * op->esize;
  return (char *)op->recvbuff + off * op->esize;
}

ncclResult_t chorus_allreduce_ring(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, p = cc->ring_pos[cc->rank];
  char *out = op->recvbuff;
  size_t off, len;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (n == 1 || op->count == 0) {
    if (n == 1 && op->count)
      chorus_coll_own_input(op, op->recvbuff, op->count, CHORUS_RED_FINALIZE);
    return ncclSuccess;
  }
  R.next = chorus_cc_conn(cc, chorus_cc_ring_rank(cc, p + 1), CHORUS_CH_COLL, CHORUS_DIR_SEND);
  R.prev = chorus_cc_conn(cc, chorus_cc_ring_rank(cc, p - 1), CHORUS_CH_COLL, CHORUS_DIR_RECV);
  chorus_ring_plan_init(&R.plan, op->count, n,
                        CHORUS_MIN(R.next->slot_bytes, R.prev->slot_bytes) / op->esize,
                        CHORUS_MAX((size_t)1, 64 / op->esize));
  R.placed = R.taken = 0;
  for (R.round = 0; R.round < R.plan.nrounds; R.round++) {
    /* Reduce-scatter, step 0: our own segment, scaled, to next. */
    CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
    segment(op, chorus_ring_rs_seg(p, 0, n), &off, &len);
    reduce_into(op, R.sbuf, NULL, off, len, 0);
    CHECK(chorus_prim_post(op, R.next, len * op->esize));
    /* Steps 1..n-1: extend the partial sum from prev; the last one is final. */
    for (R.k = 1; R.k < n; R.k++) {
      CORO_AWAIT_RES(op->co, res,
                     chorus_prim_recv_placed(op, R.prev, allreduce_place, op,
                                             (uint64_t)R.plan.nrounds * 2 * (uint64_t)(n - 1),
                                             &R.placed, R.taken, &R.rbuf, &R.rbytes));
      segment(op, chorus_ring_rs_seg(p, R.k, n), &off, &len);
      CHECK(check_size(op, len));
      CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
      segment(op, chorus_ring_rs_seg(p, R.k, n), &off, &len);
      if (R.k < n - 1) {
        reduce_into(op, R.sbuf, R.rbuf, off, len, 0);
        CHECK(chorus_prim_post(op, R.next, len * op->esize));
      } else {
        reduce_into(op, out + off * op->esize, R.rbuf, off, len, 1);
        CHECK(chorus_prim_post_from(op, R.next, R.sbuf, out + off * op->esize, len * op->esize));
      }
      R.taken++;
      CHECK(chorus_prim_release(op, R.prev));
    }
    /* All-gather: receive finished segments, keep them, pass them on. */
    for (R.k = 1; R.k < n; R.k++) {
      CORO_AWAIT_RES(op->co, res,
                     chorus_prim_recv_placed(op, R.prev, allreduce_place, op,
                                             (uint64_t)R.plan.nrounds * 2 * (uint64_t)(n - 1),
                                             &R.placed, R.taken, &R.rbuf, &R.rbytes));
      segment(op, chorus_ring_ag_seg(p, R.k, n), &off, &len);
      CHECK(check_size(op, len));
      if (R.rbuf != out + off * op->esize) memcpy(out + off * op->esize, R.rbuf, len * op->esize);
      if (R.k < n - 1) {
        CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, R.next, &R.sbuf, &R.scap));
        segment(op, chorus_ring_ag_seg(p, R.k, n), &off, &len);
        CHECK(chorus_prim_post_from(op, R.next, R.sbuf, out + off * op->esize, len * op->esize));
      }
      R.taken++;
      CHECK(chorus_prim_release(op, R.prev));
    }
  }
  CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, R.next));
  CORO_END(op->co);
}
