/*
 * prims.h - the steps schedules are made of: take a received message (and
 * check that it belongs to the same call), take a send slot, post it.
 *
 * Each returns ncclSuccess, ncclInProgress (after recording what the op
 * waits for) or an error (recorded with chorus_error, naming the peer).
 */
#ifndef CHORUS_COLL_PRIMS_H
#define CHORUS_COLL_PRIMS_H

#include "coll/op.h"

ncclResult_t chorus_prim_recv(chorus_op *op, chorus_conn *c, const void **buf, size_t *bytes);
/* chorus_prim_recv where c->peer_reads: a message the peer sent by
 * reference for this call, of at most `room` bytes, is read into dst
 * first (*read = 1, *buf = dst). */
ncclResult_t chorus_prim_recv_read(chorus_op *op, chorus_conn *c, void *dst, size_t room,
                                   const void **buf, size_t *bytes, int *read);
ncclResult_t chorus_prim_release(chorus_op *op, chorus_conn *c);
ncclResult_t chorus_prim_send_slot(chorus_op *op, chorus_conn *c, void **buf, size_t *cap);
ncclResult_t chorus_prim_post(chorus_op *op, chorus_conn *c, size_t bytes);
ncclResult_t chorus_prim_flush(chorus_op *op, chorus_conn *c);
/* Moves `bytes` of device memory at buf over c (c->dev_mem): out of it
 * for a Send, into it for a Recv, by the network itself (dev_move). */
ncclResult_t chorus_prim_dev_move(chorus_op *op, chorus_conn *c, void *buf, size_t bytes);

/* Posts the slot that send_slot gave (slot) with `bytes` from src: by
 * reference where the transport sends from the caller's memory (src must
 * then stay unchanged until the op's flush), else copied into the slot. */
ncclResult_t chorus_prim_post_from(chorus_op *op, chorus_conn *c, void *slot, const void *src,
                                   size_t bytes);

/* Posts the slot that send_slot gave as `bytes` the peer reads straight
 * from src (c->peer_reads only); src must stay unchanged until the op's
 * flush, which waits for the peer to have read it. */
ncclResult_t chorus_prim_post_read(chorus_op *op, chorus_conn *c, const void *src, size_t bytes);

/* Where message j of a line of messages from one connection (counted from
 * the line's first) belongs in the caller's buffers, with its bytes; NULL
 * for one that is not stored as it arrives (reduced, say). ctx: the line's
 * owner (an op, a transfer). */
typedef char *(*chorus_place_fn)(const void *ctx, uint64_t j, size_t *bytes);

/* chorus_prim_recv for a line of `total` messages from c, of which the op
 * has released `taken` and asked c (recv_expect) to receive the first
 * *placed straight into their places (this moves *placed on, as far as c
 * holds messages at once); the buffer returned is then that place. */
ncclResult_t chorus_prim_recv_placed(chorus_op *op, chorus_conn *c, chorus_place_fn place,
                                     const void *ctx, uint64_t total, uint64_t *placed,
                                     uint64_t taken, const void **buf, size_t *bytes);

/* A message from c of `got` bytes where the op expected `want`:
 * ncclInvalidUsage, reported naming c's peer. */
ncclResult_t chorus_prim_size_error(chorus_op *op, chorus_conn *c, size_t got, size_t want);

/* Reports an error of a connection (c->err) for this op. */
ncclResult_t chorus_prim_conn_error(chorus_op *op, chorus_conn *c, ncclResult_t res);

#endif
