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

/* Reports an error of a connection (c->err) for this op. */
ncclResult_t chorus_prim_conn_error(chorus_op *op, chorus_conn *c, ncclResult_t res);

#endif
