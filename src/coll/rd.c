/*
 * rd.c - recursive doubling AllReduce for small messages across hosts:
 * log2(n) exchanges instead of the ring's 2(n-1) hops, each exchange one
 * message each way (the buffer fits a slot).
 *
 * With p2 the largest power of two <= n and rem = n - p2: among the first
 * 2*rem ranks, each even rank hands its data to the odd rank above it and
 * sits out; the p2 remaining ranks (new index v) exchange with v ^ 1, v ^ 2,
 * v ^ 4, ... and combine; finally each odd rank of the first 2*rem hands the
 * result back. Combining is commutative and both partners combine the same
 * two values, so every rank ends with the same bits.
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/prims.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

#define X (op->u.rd)

static int pow2_below(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/* Real rank of participant v. */
static int real_rank(int v, int rem) {
  return v < rem ? 2 * v + 1 : v + rem;
}

static chorus_conn *tx(const chorus_op *op, int peer) {
  return chorus_cc_conn(op->cc, peer, CHORUS_CH_COLL, CHORUS_DIR_SEND);
}
static chorus_conn *rx(const chorus_op *op, int peer) {
  return chorus_cc_conn(op->cc, peer, CHORUS_CH_COLL, CHORUS_DIR_RECV);
}

static ncclResult_t check_size(const chorus_op *op, size_t bytes) {
  if (X.rbytes == bytes) return ncclSuccess;
  return chorus_error(ncclInvalidUsage, "AllReduce: rank %d sent %zu bytes, expected %zu", X.peer,
                      X.rbytes, bytes);
}

/* dst = acc (+) what came; the last combine writes the output, finished
 * (SUMPOSTDIV's division applied once). */
static void combine(chorus_op *op, void *dst, int last) {
  const void *src[2] = {X.acc, X.rbuf};
  chorus_reduce(&op->red, dst, src, 2, op->count, 0, last ? CHORUS_RED_FINALIZE : 0);
  X.acc = dst;
}

/* Every message goes out by reference from the partial result (the input
 * itself at first), so a step copies nothing besides its combine; the
 * send is flushed before that combine overwrites what it sent from. */
ncclResult_t chorus_allreduce_rd(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, r = cc->rank;
  size_t bytes = op->count * op->esize;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  X.p2 = pow2_below(n);
  X.rem = n - X.p2;
  op->scratch = chorus_malloc(bytes ? bytes : 1);
  if (!op->scratch) return chorus_error(ncclSystemError, "out of memory for an AllReduce");
  X.acc = op->sendbuff;
  if (op->red.kind == CHORUS_RED_PREMULSUM && bytes) { /* each input scaled once, here */
    const void *src[1] = {op->sendbuff};
    chorus_reduce(&op->red, op->scratch, src, 1, op->count, 1u, 0);
    X.acc = op->scratch;
  }
  if (r < 2 * X.rem && r % 2 == 0) {
    /* Sit out: hand our data up, then take the finished result. */
    X.peer = r + 1;
    CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, tx(op, X.peer), &X.sbuf, &X.scap));
    CHECK(chorus_prim_post_from(op, tx(op, X.peer), X.sbuf, X.acc, bytes));
    CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, rx(op, X.peer), &X.rbuf, &X.rbytes));
    CHECK(check_size(op, bytes));
    CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, tx(op, X.peer)));
    if (bytes) memcpy(op->recvbuff, X.rbuf, bytes);
    CHECK(chorus_prim_release(op, rx(op, X.peer)));
  } else {
    X.v = r < 2 * X.rem ? r / 2 : r - X.rem;
    if (r < 2 * X.rem) { /* take the data of the rank below */
      X.peer = r - 1;
      CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, rx(op, X.peer), &X.rbuf, &X.rbytes));
      CHECK(check_size(op, bytes));
      if (bytes) combine(op, op->scratch, 0);
      CHECK(chorus_prim_release(op, rx(op, X.peer)));
    }
    for (X.mask = 1; X.mask < X.p2; X.mask <<= 1) {
      X.peer = real_rank(X.v ^ X.mask, X.rem);
      CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, tx(op, X.peer), &X.sbuf, &X.scap));
      CHECK(chorus_prim_post_from(op, tx(op, X.peer), X.sbuf, X.acc, bytes));
      CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, rx(op, X.peer), &X.rbuf, &X.rbytes));
      CHECK(check_size(op, bytes));
      CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, tx(op, X.peer)));
      if (bytes) {
        const int last = X.mask << 1 >= X.p2;
        combine(op, last ? op->recvbuff : op->scratch, last);
      }
      CHECK(chorus_prim_release(op, rx(op, X.peer)));
    }
    if (bytes && X.acc != op->recvbuff) { /* one rank: no exchange */
      const void *src[1] = {X.acc};
      chorus_reduce(&op->red, op->recvbuff, src, 1, op->count, 0, CHORUS_RED_FINALIZE);
    }
    if (r < 2 * X.rem) { /* hand the finished result back down */
      X.peer = r - 1;
      CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, tx(op, X.peer), &X.sbuf, &X.scap));
      CHECK(chorus_prim_post_from(op, tx(op, X.peer), X.sbuf, op->recvbuff, bytes));
    }
  }
  /* Flush whatever we sent (TCP hands it to the kernel). */
  for (X.peer = 0; X.peer < n; X.peer++) {
    if (X.peer == r) continue;
    CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, tx(op, X.peer)));
  }
  CORO_END(op->co);
}
