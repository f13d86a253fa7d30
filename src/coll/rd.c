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

/* acc = acc (+) received, finalize only at the end. */
static void combine(chorus_op *op, const void *rbuf) {
  const void *src[2] = {op->scratch, rbuf};
  chorus_reduce(&op->red, op->scratch, src, 2, op->count, 0, 0);
}

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
  {
    const void *src[1] = {op->sendbuff};
    if (bytes) chorus_reduce(&op->red, op->scratch, src, 1, op->count, 1u, 0);
  }
  if (r < 2 * X.rem && r % 2 == 0) {
    /* Sit out: hand our data up, then wait for the result. */
    X.peer = r + 1;
    CORO_AWAIT_RES(
        op->co, res,
        chorus_prim_send_slot(op, chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_SEND),
                              &X.sbuf, &X.scap));
    memcpy(X.sbuf, op->scratch, bytes);
    CHECK(chorus_prim_post(op, chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_SEND), bytes));
    CORO_AWAIT_RES(op->co, res,
                   chorus_prim_recv(op, chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_RECV),
                                    &X.rbuf, &X.rbytes));
    memcpy(op->scratch, X.rbuf, bytes);
    CHECK(chorus_prim_release(op, chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_RECV)));
  } else {
    X.v = r < 2 * X.rem ? r / 2 : r - X.rem;
    if (r < 2 * X.rem) { /* take the data of the rank below */
      CORO_AWAIT_RES(op->co, res,
                     chorus_prim_recv(op,
                                      chorus_cc_conn(cc, r - 1, CHORUS_CH_COLL, CHORUS_DIR_RECV),
                                      &X.rbuf, &X.rbytes));
      combine(op, X.rbuf);
      CHECK(chorus_prim_release(op, chorus_cc_conn(cc, r - 1, CHORUS_CH_COLL, CHORUS_DIR_RECV)));
    }
    for (X.mask = 1; X.mask < X.p2; X.mask <<= 1) {
      X.peer = real_rank(X.v ^ X.mask, X.rem);
      CORO_AWAIT_RES(
          op->co, res,
          chorus_prim_send_slot(op, chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_SEND),
                                &X.sbuf, &X.scap));
      memcpy(X.sbuf, op->scratch, bytes);
      CHECK(
          chorus_prim_post(op, chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_SEND), bytes));
      CORO_AWAIT_RES(op->co, res,
                     chorus_prim_recv(op,
                                      chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_RECV),
                                      &X.rbuf, &X.rbytes));
      if (X.rbytes != bytes)
        return chorus_error(ncclInvalidUsage, "AllReduce: rank %d sent %zu bytes, expected %zu",
                            X.peer, X.rbytes, bytes);
      combine(op, X.rbuf);
      CHECK(chorus_prim_release(op, chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_RECV)));
    }
    if (r < 2 * X.rem) { /* hand the result back down */
      CORO_AWAIT_RES(
          op->co, res,
          chorus_prim_send_slot(op, chorus_cc_conn(cc, r - 1, CHORUS_CH_COLL, CHORUS_DIR_SEND),
                                &X.sbuf, &X.scap));
      memcpy(X.sbuf, op->scratch, bytes);
      CHECK(
          chorus_prim_post(op, chorus_cc_conn(cc, r - 1, CHORUS_CH_COLL, CHORUS_DIR_SEND), bytes));
    }
  }
  {
    /* Result, with SUMPOSTDIV's division applied once. */
    const void *src[1] = {op->scratch};
    if (bytes) chorus_reduce(&op->red, op->recvbuff, src, 1, op->count, 0, 1);
  }
  /* Flush whatever we sent (TCP hands it to the kernel). */
  for (X.peer = 0; X.peer < n; X.peer++) {
    if (X.peer == r) continue;
    CORO_AWAIT_RES(
        op->co, res,
        chorus_prim_flush(op, chorus_cc_conn(cc, X.peer, CHORUS_CH_COLL, CHORUS_DIR_SEND)));
  }
  CORO_END(op->co);
}
