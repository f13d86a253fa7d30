/*
 * hier.c - AllReduce in steps for host-memory communicators across hosts,
 * where every host holds the same number L >= 2 of ranks.
 *
 * The buffer is cut as a ring over the L ranks of a host cuts it (rounds of
 * L slot-sized segments, algo/ring.h). Per round:
 *   1. ReduceScatter around the host's ring (shared memory): each rank ends
 *      with one segment summed over its host, in its output;
 *   2. AllReduce of that segment with the rank of the same place on every
 *      other host, around their ring (the network), the segment cut in H
 *      parts: ReduceScatter, then AllGather;
 *   3. AllGather around the host's ring.
 * So each byte crosses the network once per host instead of once per rank,
 * L places at once over L connections, and latency pays 2 (H - 1) network
 * hops rather than 2 (n - 1). PreMulSum scales each input once (step 1),
 * an average divides once (the last reduction of step 2).
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/prims.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

#define S (op->u.hier)

/* Element range [*off, +*len) of part j of H of a segment of len elements. */
static void part(size_t seg_off, size_t seg_len, int j, int h, size_t *off, size_t *len) {
  const size_t a = seg_len * (size_t)j / (size_t)h, b = seg_len * (size_t)(j + 1) / (size_t)h;
  *off = seg_off + a;
  *len = b - a;
}

static ncclResult_t check_size(chorus_op *op, chorus_conn *c, size_t len) {
  if (S.rbytes == len * op->esize) return ncclSuccess;
  return chorus_prim_size_error(op, c, S.rbytes, len * op->esize);
}

/* dst = this rank's input, scaled for PreMulSum (+ a received partial). */
static void reduce_input(chorus_op *op, void *dst, const void *rbuf, size_t off, size_t len) {
  const char *in = (const char *)op->sendbuff + off * op->esize;
  if (rbuf) {
    const void *src[2] = {rbuf, in};
    chorus_reduce(&op->red, dst, src, 2, len, 2u, 0);
  } else {
    const void *src[1] = {in};
    chorus_reduce(&op->red, dst, src, 1, len, 1u, 0);
  }
}

/* dst = two partial sums (scaled already); finalize: the call's last. */
static void reduce_partials(chorus_op *op, void *dst, const void *a, const void *b, size_t len,
                            int finalize) {
  const void *src[2] = {a, b};
  chorus_reduce(&op->red, dst, src, 2, len, 0u, finalize ? CHORUS_RED_FINALIZE : 0);
}

/* The ring of this host's ranks and that of this place across hosts. */
static void find_peers(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  const chorus_topo *t = cc->topo;
  const int n = cc->nranks, me = cc->rank, li = t->local_index[me];
  S.L = t->nlocal;
  S.li = li;
  S.lnext = chorus_cc_conn(cc, t->local_ranks[(li + 1) % S.L], CHORUS_CH_COLL, CHORUS_DIR_SEND);
  S.lprev =
      chorus_cc_conn(cc, t->local_ranks[(li + S.L - 1) % S.L], CHORUS_CH_COLL, CHORUS_DIR_RECV);
  int first = -1, last = -1, before = -1, after = -1, h = 0, pos = 0;
  for (int r = 0; r < n; r++) {
    if (t->local_index[r] != li) continue;
    if (first < 0) first = r;
    last = r;
    if (r < me) before = r, pos++;
    if (r > me && after < 0) after = r;
    h++;
  }
  S.H = h;
  S.hi = pos;
  S.xnext = chorus_cc_conn(cc, after >= 0 ? after : first, CHORUS_CH_COLL, CHORUS_DIR_SEND);
  S.xprev = chorus_cc_conn(cc, before >= 0 ? before : last, CHORUS_CH_COLL, CHORUS_DIR_RECV);
}

ncclResult_t chorus_allreduce_hier(chorus_op *op) {
  char *out = op->recvbuff;
  const size_t es = op->esize;
  size_t off, len;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  if (op->count == 0) return ncclSuccess;
  find_peers(op);
  chorus_ring_plan_init(&S.plan, op->count, S.L,
                        CHORUS_MIN(S.lnext->slot_bytes, S.lprev->slot_bytes) / es,
                        CHORUS_MAX((size_t)1, 64 / es));
  for (S.round = 0; S.round < S.plan.nrounds; S.round++) {
    /* 1. ReduceScatter in the host: step 0 sends our own segment, scaled. */
    CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, S.lnext, &S.sbuf, &S.scap));
    chorus_ring_segment(&S.plan, S.round, chorus_ring_rs_seg(S.li, 0, S.L), &off, &len);
    reduce_input(op, S.sbuf, NULL, off, len);
    CHECK(chorus_prim_post(op, S.lnext, len * es));
    for (S.k = 1; S.k < S.L; S.k++) {
      CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, S.lprev, &S.rbuf, &S.rbytes));
      chorus_ring_segment(&S.plan, S.round, chorus_ring_rs_seg(S.li, S.k, S.L), &off, &len);
      CHECK(check_size(op, S.lprev, len));
      if (S.k < S.L - 1) {
        CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, S.lnext, &S.sbuf, &S.scap));
        chorus_ring_segment(&S.plan, S.round, chorus_ring_rs_seg(S.li, S.k, S.L), &off, &len);
        reduce_input(op, S.sbuf, S.rbuf, off, len);
        CHECK(chorus_prim_post(op, S.lnext, len * es));
      } else {
        reduce_input(op, out + off * es, S.rbuf, off, len); /* the host's sum of our segment */
      }
      CHECK(chorus_prim_release(op, S.lprev));
    }
    /* 2. Our segment across the hosts: ReduceScatter of its H parts ... */
    chorus_ring_segment(&S.plan, S.round, chorus_ring_rs_seg(S.li, S.L - 1, S.L), &S.seg_off,
                        &S.seg_len);
    CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, S.xnext, &S.sbuf, &S.scap));
    part(S.seg_off, S.seg_len, chorus_ring_rs_seg(S.hi, 0, S.H), S.H, &off, &len);
    memcpy(S.sbuf, out + off * es, len * es);
    CHECK(chorus_prim_post(op, S.xnext, len * es));
    for (S.k = 1; S.k < S.H; S.k++) {
      CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, S.xprev, &S.rbuf, &S.rbytes));
      part(S.seg_off, S.seg_len, chorus_ring_rs_seg(S.hi, S.k, S.H), S.H, &off, &len);
      CHECK(check_size(op, S.xprev, len));
      if (S.k < S.H - 1) {
        CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, S.xnext, &S.sbuf, &S.scap));
        part(S.seg_off, S.seg_len, chorus_ring_rs_seg(S.hi, S.k, S.H), S.H, &off, &len);
        reduce_partials(op, S.sbuf, S.rbuf, out + off * es, len, 0);
        CHECK(chorus_prim_post(op, S.xnext, len * es));
      } else {
        reduce_partials(op, out + off * es, S.rbuf, out + off * es, len, 1);
        CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, S.xnext, &S.sbuf, &S.scap));
        part(S.seg_off, S.seg_len, chorus_ring_rs_seg(S.hi, S.k, S.H), S.H, &off, &len);
        CHECK(chorus_prim_post_from(op, S.xnext, S.sbuf, out + off * es, len * es));
      }
      CHECK(chorus_prim_release(op, S.xprev));
    }
    /* ... then AllGather of the finished parts. */
    for (S.k = 1; S.k < S.H; S.k++) {
      CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, S.xprev, &S.rbuf, &S.rbytes));
      part(S.seg_off, S.seg_len, chorus_ring_ag_seg(S.hi, S.k, S.H), S.H, &off, &len);
      CHECK(check_size(op, S.xprev, len));
      if (S.rbuf != out + off * es) memcpy(out + off * es, S.rbuf, len * es);
      if (S.k < S.H - 1) {
        CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, S.xnext, &S.sbuf, &S.scap));
        part(S.seg_off, S.seg_len, chorus_ring_ag_seg(S.hi, S.k, S.H), S.H, &off, &len);
        CHECK(chorus_prim_post_from(op, S.xnext, S.sbuf, out + off * es, len * es));
      }
      CHECK(chorus_prim_release(op, S.xprev));
    }
    /* 3. AllGather in the host: our finished segment first. */
    CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, S.lnext, &S.sbuf, &S.scap));
    CHECK(chorus_prim_post_from(op, S.lnext, S.sbuf, out + S.seg_off * es, S.seg_len * es));
    for (S.k = 1; S.k < S.L; S.k++) {
      CORO_AWAIT_RES(op->co, res, chorus_prim_recv(op, S.lprev, &S.rbuf, &S.rbytes));
      chorus_ring_segment(&S.plan, S.round, chorus_ring_ag_seg(S.li, S.k, S.L), &off, &len);
      CHECK(check_size(op, S.lprev, len));
      if (S.rbuf != out + off * es) memcpy(out + off * es, S.rbuf, len * es);
      if (S.k < S.L - 1) {
        CORO_AWAIT_RES(op->co, res, chorus_prim_send_slot(op, S.lnext, &S.sbuf, &S.scap));
        chorus_ring_segment(&S.plan, S.round, chorus_ring_ag_seg(S.li, S.k, S.L), &off, &len);
        CHECK(chorus_prim_post_from(op, S.lnext, S.sbuf, out + off * es, len * es));
      }
      CHECK(chorus_prim_release(op, S.lprev));
    }
  }
  CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, S.lnext));
  CORO_AWAIT_RES(op->co, res, chorus_prim_flush(op, S.xnext));
  CORO_END(op->co);
}
