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
ncclResult_t chorus_prim_release(chorus_op *op, chorus_conn *c);
ncclResult_t chorus_prim_send_slot(chorus_op *op, chorus_conn *c, void **buf, size_t *cap);
ncclResult_t chorus_prim_post(chorus_op *op, chorus_conn *c, size_t bytes);
ncclResult_t chorus_prim_flush(chorus_op *op, chorus_conn *c);

/* Posts the slot that send_slot gave (slot) with `bytes` from src: by
 * reference where the transport sends from the caller's memory (src must
 * then stay unchanged until the op's flush), else copied into the slot. */
ncclResult_t chorus_prim_post_from(chorus_op *op, chorus_conn *c, void *slot, const void *src,
                                   size_t bytes);

/* Asks c to receive the op's message `ahead` places after the next one
 * straight into dst (it must hold exactly `bytes`); chorus_prim_recv then
 * returns dst as its buffer if it did. 0: too far ahead for now (or the
 * transport cannot); 1: asked. */
int chorus_prim_expect(chorus_op *op, chorus_conn *c, uint64_t ahead, void *dst, size_t bytes);

/* Where message j of an op's line from one connection (counted from the
 * op's first) belongs in the caller's buffers, with its bytes; NULL for
 * one that is not stored as it arrives (reduced, say). */
typedef char *(*chorus_place_fn)(const chorus_op *op, uint64_t j, size_t *bytes);

/* chorus_prim_recv for a line of `total` messages from c, of which the op
 * has released `taken` and asked c to place the first *placed (which this
 * moves on, as far as c holds messages at once). */
ncclResult_t chorus_prim_recv_placed(chorus_op *op, chorus_conn *c, chorus_place_fn place,
                                     uint64_t total, uint64_t *placed, uint64_t taken,
                                     const void **buf, size_t *bytes);

/* Reports an error of a connection (c->err) for this op. */
ncclResult_t chorus_prim_conn_error(chorus_op *op, chorus_conn *c, ncclResult_t res);

#endif
