/*
 * tree.c - double binary tree AllReduce (NCCL calls its own "Tree"), for
 * latency across many hosts: a piece climbs and descends about 2 log2(n)
 * hops instead of the ring's 2(n-1), and both halves of the buffer move at
 * once, each on its own tree.
 *
 * The trees are over ring positions (the ring groups ranks by host). Tree 0
 * is heap-shaped: position v's children are 2v+1 and 2v+2, its root 0. Tree
 * 1 is the same over the mirrored positions n-1-v, so the inner nodes of
 * one are (all but the middle one) leaves of the other, and no rank carries
 * more than one tree's reductions. Half t of the buffer goes up tree t,
 * each node adding its input to its children's partial sums, and the root's
 * result comes down the same tree.
 *
 * Each half moves in pieces of at most a slot; every rank takes the steps
 * in one order, (piece 0, tree 0), (piece 0, tree 1), (piece 1, tree 0)...,
 * first all the way up, then all the way down. That order is the order of
 * the messages on every connection, from both ends, so two ranks joined in
 * both trees (one's child in one, its parent in the other) always meet.
 * The root of each tree computes the result once and every rank takes it
 * from there, so all ranks end with the same bits.
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/prims.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

#define T (op->u.tree)

/* The rank at position v of tree t, or -1 outside 0..n-1. */
static int tree_rank(const chorus_coll_comm *cc, int t, int v) {
  const int n = cc->nranks;
  if (v < 0 || v >= n) return -1;
  return chorus_cc_ring_rank(cc, t == 0 ? v : n - 1 - v);
}

/* This rank's place in tree t: its parent (-1 at the root) and children. */
static void tree_links(const chorus_coll_comm *cc, int t, int *parent, int kid[2]) {
  const int n = cc->nranks, p = cc->ring_pos[cc->rank];
  const int v = t == 0 ? p : n - 1 - p;
  *parent = v == 0 ? -1 : tree_rank(cc, t, (v - 1) / 2);
  kid[0] = tree_rank(cc, t, 2 * v + 1);
  kid[1] = tree_rank(cc, t, 2 * v + 2);
}

/* Half t of the buffer: elements [first, first + len). Half 0 is the
 * first count/2 elements, rounded down to whole 64-byte lines. */
static void half(const chorus_op *op, int t, size_t *first, size_t *len) {
  const size_t align = CHORUS_MAX((size_t)1, 64 / op->esize);
  const size_t h0 = op->count / 2 / align * align;
  *first = t == 0 ? 0 : h0;
  *len = t == 0 ? h0 : op->count - h0;
}

/* Piece c of half t: its offset (elements) and length; 0 past the end. */
static size_t piece(const chorus_op *op, int t, size_t c, size_t *off) {
  size_t first, len;
  half(op, t, &first, &len);
  const size_t at = c * T.seg;
  *off = first + at;
  return at < len ? CHORUS_MIN(T.seg, len - at) : 0;
}

static chorus_conn *to(chorus_op *op, int peer) {
  return chorus_cc_conn(op->cc, peer, CHORUS_CH_COLL, CHORUS_DIR_SEND);
}

static chorus_conn *from(chorus_op *op, int peer) {
  return chorus_cc_conn(op->cc, peer, CHORUS_CH_COLL, CHORUS_DIR_RECV);
}

/* Flushes link k of tree t: children 0 and 1, then the parent. */
static ncclResult_t flush_link(chorus_op *op, int t, int k) {
  const int peer = k < 2 ? T.kid[t][k] : T.parent[t];
  return peer < 0 ? ncclSuccess : chorus_prim_flush(op, to(op, peer));
}

ncclResult_t chorus_allreduce_tree(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  ncclResult_t res;
  size_t off, len;
  CORO_BEGIN(op->co);
  if (op->count == 0) return ncclSuccess;
  if (cc->nranks == 1) {
    const void *src[1] = {op->sendbuff};
    chorus_reduce(&op->red, op->recvbuff, src, 1, op->count, 1u, CHORUS_RED_FINALIZE);
    return ncclSuccess;
  }
  for (int t = 0; t < 2; t++) tree_links(cc, t, &T.parent[t], T.kid[t]);
  {
    /* Pieces of one slot; every connection of a communicator has the
     * same slot size, so all ranks cut alike. */
    const int any = T.parent[0] >= 0 ? T.parent[0] : T.kid[0][0];
    const size_t align = CHORUS_MAX((size_t)1, 64 / op->esize);
    const size_t seg = to(op, any)->slot_bytes / op->esize / align * align;
    T.seg = seg ? seg : 1;
    size_t f, l0, l1;
    half(op, 0, &f, &l0);
    half(op, 1, &f, &l1);
    T.npieces = CHORUS_DIV_UP(CHORUS_MAX(l0, l1), T.seg);
  }
  /* Up: children's partial sums plus this rank's input, to the parent (or,
   * at the root, finished into recvbuff). */
  for (T.c = 0; T.c < T.npieces; T.c++)
    for (T.t = 0; T.t < 2; T.t++) {
      if (!piece(op, T.t, T.c, &off)) continue;
      T.rbuf[0] = T.rbuf[1] = NULL;
      for (T.k = 0; T.k < 2; T.k++) {
        if (T.kid[T.t][T.k] < 0) break;
        CORO_AWAIT_RES(op->co, res,
                       chorus_prim_recv(op, from(op, T.kid[T.t][T.k]), &T.rbuf[T.k], &T.rbytes));
        len = piece(op, T.t, T.c, &off);
        if (T.rbytes != len * op->esize)
          return chorus_prim_size_error(op, from(op, T.kid[T.t][T.k]), T.rbytes, len * op->esize);
      }
      if (T.parent[T.t] >= 0)
        CORO_AWAIT_RES(op->co, res,
                       chorus_prim_send_slot(op, to(op, T.parent[T.t]), &T.sbuf, &T.scap));
      {
        len = piece(op, T.t, T.c, &off);
        const char *in = (const char *)op->sendbuff + off * op->esize;
        const void *src[3] = {in, T.rbuf[0], T.rbuf[1]};
        const int nsrc = 1 + T.k;
        if (T.parent[T.t] < 0) {
          chorus_reduce(&op->red, (char *)op->recvbuff + off * op->esize, src, nsrc, len, 1u,
                        CHORUS_RED_FINALIZE);
        } else if (nsrc == 1) { /* a leaf: its input as it is (scaled, for PreMulSum) */
          if (op->red.kind == CHORUS_RED_PREMULSUM) {
            chorus_reduce(&op->red, T.sbuf, src, 1, len, 1u, 0);
            CHECK(chorus_prim_post(op, to(op, T.parent[T.t]), len * op->esize));
          } else {
            CHECK(chorus_prim_post_from(op, to(op, T.parent[T.t]), T.sbuf, in, len * op->esize));
          }
        } else {
          chorus_reduce(&op->red, T.sbuf, src, nsrc, len, 1u, 0);
          CHECK(chorus_prim_post(op, to(op, T.parent[T.t]), len * op->esize));
        }
      }
      for (T.k = 0; T.k < 2 && T.kid[T.t][T.k] >= 0; T.k++)
        CHECK(chorus_prim_release(op, from(op, T.kid[T.t][T.k])));
    }
  /* Down: the result from the parent into recvbuff, on to the children. */
  for (T.c = 0; T.c < T.npieces; T.c++)
    for (T.t = 0; T.t < 2; T.t++) {
      if (!piece(op, T.t, T.c, &off)) continue;
      if (T.parent[T.t] >= 0) {
        CORO_AWAIT_RES(op->co, res,
                       chorus_prim_recv(op, from(op, T.parent[T.t]), &T.rbuf[0], &T.rbytes));
        len = piece(op, T.t, T.c, &off);
        if (T.rbytes != len * op->esize)
          return chorus_prim_size_error(op, from(op, T.parent[T.t]), T.rbytes, len * op->esize);
        memcpy((char *)op->recvbuff + off * op->esize, T.rbuf[0], T.rbytes);
        CHECK(chorus_prim_release(op, from(op, T.parent[T.t])));
      }
      for (T.k = 0; T.k < 2; T.k++) {
        if (T.kid[T.t][T.k] < 0) break;
        CORO_AWAIT_RES(op->co, res,
                       chorus_prim_send_slot(op, to(op, T.kid[T.t][T.k]), &T.sbuf, &T.scap));
        len = piece(op, T.t, T.c, &off);
        CHECK(chorus_prim_post_from(op, to(op, T.kid[T.t][T.k]), T.sbuf,
                                    (char *)op->recvbuff + off * op->esize, len * op->esize));
      }
    }
  /* Everything sent has left (TCP: the kernel took it). */
  for (T.t = 0; T.t < 2; T.t++)
    for (T.k = 0; T.k < 3; T.k++) CORO_AWAIT_RES(op->co, res, flush_link(op, T.t, T.k));
  CORO_END(op->co);
}
