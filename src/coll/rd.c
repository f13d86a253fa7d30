/*
 * rd.c - recursive doubling across hosts: log2(n) pairwise exchanges
 * instead of a ring's n-1 or 2(n-1) hops, for calls small enough that the
 * hops' latency dominates.
 *
 *   AllReduce      each exchange swaps the whole buffer (it fits a slot)
 *                  and both partners combine the same two values.
 *   AllGather      each exchange swaps the blocks gathered so far, doubling
 *                  them: after step k a rank holds the 2^(k+1) blocks of
 *                  its group of that size, contiguous in the output.
 *   ReduceScatter  recursive halving: each exchange sends the half of the
 *                  blocks still held that the partner keeps and folds in
 *                  the partner's partial sums of the other half, until one
 *                  rank's block is left.
 *
 * With p2 the largest power of two <= n and rem = n - p2: among the first
 * 2*rem ranks, each even rank hands its data to the odd rank above it and
 * sits out; the p2 remaining ranks (new index v) exchange with v ^ 1, v ^ 2,
 * v ^ 4, ... ; finally each odd rank of the first 2*rem hands the result
 * back. Participant v stands for ranks 2v and 2v+1 when v < rem, else for
 * rank v + rem, so the blocks of participants [a, b) are the ranks' blocks
 * [first(a), first(b)): every exchange moves one contiguous range.
 * Combining is commutative and both partners combine the same two values,
 * so every rank ends with the same bits.
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/prims.h"
#include "coll/xfer.h"
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

/* The first rank participant v stands for (v = p2: n). */
static int first_rank(int v, int rem) {
  return v < rem ? 2 * v : v + rem;
}

static chorus_conn *tx(const chorus_op *op, int peer) {
  return chorus_cc_conn(op->cc, peer, CHORUS_CH_COLL, CHORUS_DIR_SEND);
}
static chorus_conn *rx(const chorus_op *op, int peer) {
  return chorus_cc_conn(op->cc, peer, CHORUS_CH_COLL, CHORUS_DIR_RECV);
}

static ncclResult_t check_size(chorus_op *op, size_t bytes) {
  if (X.rbytes == bytes) return ncclSuccess;
  return chorus_prim_size_error(op, rx(op, X.peer), X.rbytes, bytes);
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
  if (!chorus_op_scratch(op, bytes))
    return chorus_error(ncclSystemError, "out of memory for an AllReduce");
  X.acc = op->sendbuff;
  if (op->red.kind == CHORUS_RED_PREMULSUM && bytes) { /* each input scaled once, here */
    chorus_coll_own_input(op, op->scratch, op->count, 0);
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

/* Blocks [a, b) of participants, in bytes: offset and length. */
static size_t span_at(const chorus_op *op, int a) {
  return (size_t)first_rank(a, X.rem) * op->count * op->esize;
}

/* One exchange with X.peer: send [s0, s1) of sbase, take [r0, r1) of rbase
 * (kind: stored or folded in), both at once. */
static void exchange(chorus_op *op, const char *sbase, size_t s0, size_t s1, char *rbase, size_t r0,
                     size_t r1, int kind) {
  chorus_xfer_init(&X.x[0], tx(op, X.peer), sbase + s0, s1 - s0);
  chorus_xfer_init(&X.x[1], rx(op, X.peer), rbase + r0, r1 - r0);
  X.kind[0] = CHORUS_XFER_SEND;
  X.kind[1] = (uint8_t)kind;
}

static ncclResult_t run_exchange(chorus_op *op) {
  return chorus_xfer_all(op, X.x, X.kind, 2);
}

/* One transfer alone (the hand-up and hand-back of the first 2*rem ranks). */
static void one_way(chorus_op *op, int kind, char *buf, size_t bytes) {
  chorus_xfer_init(&X.x[0], kind == CHORUS_XFER_SEND ? tx(op, X.peer) : rx(op, X.peer), buf, bytes);
  X.kind[0] = (uint8_t)kind;
}

static ncclResult_t run_one_way(chorus_op *op) {
  return chorus_xfer_all(op, X.x, X.kind, 1);
}

ncclResult_t chorus_allgather_rd(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, r = cc->rank;
  const size_t blk = op->count * op->esize;
  char *out = op->recvbuff, *own = out + (size_t)r * blk;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (op->sendbuff != own && blk) memcpy(own, op->sendbuff, blk);
  if (n == 1 || blk == 0) return ncclSuccess;
  X.p2 = pow2_below(n);
  X.rem = n - X.p2;
  if (r < 2 * X.rem && r % 2 == 0) {
    /* Sit out: hand our block up, then take every block. */
    X.peer = r + 1;
    one_way(op, CHORUS_XFER_SEND, own, blk);
    CORO_AWAIT_RES(op->co, res, run_one_way(op));
    one_way(op, CHORUS_XFER_RECV, out, (size_t)n * blk);
    CORO_AWAIT_RES(op->co, res, run_one_way(op));
    return ncclSuccess;
  }
  X.v = r < 2 * X.rem ? r / 2 : r - X.rem;
  if (r < 2 * X.rem) { /* the block of the rank below */
    X.peer = r - 1;
    one_way(op, CHORUS_XFER_RECV, out + (size_t)(r - 1) * blk, blk);
    CORO_AWAIT_RES(op->co, res, run_one_way(op));
  }
  for (X.mask = 1; X.mask < X.p2; X.mask <<= 1) {
    {
      const int a = X.v & ~(X.mask - 1), pa = (X.v ^ X.mask) & ~(X.mask - 1);
      X.peer = real_rank(X.v ^ X.mask, X.rem);
      exchange(op, out, span_at(op, a), span_at(op, a + X.mask), out, span_at(op, pa),
               span_at(op, pa + X.mask), CHORUS_XFER_RECV);
    }
    CORO_AWAIT_RES(op->co, res, run_exchange(op));
  }
  if (r < 2 * X.rem) { /* every block back down */
    X.peer = r - 1;
    one_way(op, CHORUS_XFER_SEND, out, (size_t)n * blk);
    CORO_AWAIT_RES(op->co, res, run_one_way(op));
  }
  CORO_END(op->co);
}

ncclResult_t chorus_reducescatter_rd(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, r = cc->rank;
  const size_t blk = op->count * op->esize;
  char *acc = op->scratch;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (n == 1 || blk == 0) {
    if (blk) chorus_coll_own_input(op, op->recvbuff, op->count, CHORUS_RED_FINALIZE);
    return ncclSuccess;
  }
  X.p2 = pow2_below(n);
  X.rem = n - X.p2;
  /* The partial sums travel from a copy of the input, scaled where
   * PreMulSum scales it. */
  if (!chorus_op_scratch(op, (size_t)n * blk))
    return chorus_error(ncclSystemError, "out of memory for a ReduceScatter");
  acc = op->scratch;
  chorus_coll_own_input(op, acc, op->count * (size_t)n, 0);
  if (r < 2 * X.rem && r % 2 == 0) {
    /* Sit out: hand every block up, then take our own, finished. */
    X.peer = r + 1;
    one_way(op, CHORUS_XFER_SEND, acc, (size_t)n * blk);
    CORO_AWAIT_RES(op->co, res, run_one_way(op));
    one_way(op, CHORUS_XFER_RECV, op->recvbuff, blk);
    CORO_AWAIT_RES(op->co, res, run_one_way(op));
    return ncclSuccess;
  }
  X.v = r < 2 * X.rem ? r / 2 : r - X.rem;
  if (r < 2 * X.rem) { /* fold in every block of the rank below */
    X.peer = r - 1;
    one_way(op, CHORUS_XFER_FOLD, acc, (size_t)n * blk);
    CORO_AWAIT_RES(op->co, res, run_one_way(op));
  }
  X.lo = 0;
  X.hi = X.p2;
  for (X.mask = X.p2 / 2; X.mask >= 1; X.mask >>= 1) {
    {
      const int mid = X.lo + X.mask, keep_lo = X.v < mid;
      const int k0 = keep_lo ? X.lo : mid, k1 = keep_lo ? mid : X.hi;
      const int s0 = keep_lo ? mid : X.lo, s1 = keep_lo ? X.hi : mid;
      X.peer = real_rank(X.v ^ X.mask, X.rem);
      exchange(op, acc, span_at(op, s0), span_at(op, s1), acc, span_at(op, k0), span_at(op, k1),
               CHORUS_XFER_FOLD);
      X.lo = k0;
      X.hi = k1;
    }
    CORO_AWAIT_RES(op->co, res, run_exchange(op));
  }
  {
    /* Our block, finished (in place, recvbuff is the input's block: the
     * input was copied already). */
    const void *src[1] = {acc + (size_t)r * blk};
    chorus_reduce(&op->red, op->recvbuff, src, 1, op->count, 0, CHORUS_RED_FINALIZE);
  }
  if (r < 2 * X.rem) { /* the rank below's block, finished */
    {
      char *theirs = acc + (size_t)(r - 1) * blk;
      const void *src[1] = {theirs};
      chorus_reduce(&op->red, theirs, src, 1, op->count, 0, CHORUS_RED_FINALIZE);
    }
    X.peer = r - 1;
    one_way(op, CHORUS_XFER_SEND, acc + (size_t)(r - 1) * blk, blk);
    CORO_AWAIT_RES(op->co, res, run_one_way(op));
  }
  CORO_END(op->co);
}
