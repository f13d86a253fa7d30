/*
 * xfer.h - moving a byte range through one connection.
 *
 * A chorus_xfer is a small resumable state machine of its own, so one op
 * can drive many at once (AlltoAll, Gather, Scatter progress every peer in
 * parallel). The range is cut into messages of at most the connection's slot
 * size; the receiver checks every message's call description and size. A
 * zero-byte range moves nothing.
 *
 * Both return ncclSuccess when the range has moved (sends: flushed),
 * ncclInProgress while waiting (the op records what for), or an error.
 */
#ifndef CHORUS_COLL_XFER_H
#define CHORUS_COLL_XFER_H

#include "coll/op.h"

void chorus_xfer_init(chorus_xfer *x, chorus_conn *c, const void *buf, size_t bytes);
ncclResult_t chorus_xfer_send(chorus_op *op, chorus_xfer *x);
ncclResult_t chorus_xfer_recv(chorus_op *op, chorus_xfer *x);

/* Runs xs[0..n) until all are done; sends are marked by send[i]. */
ncclResult_t chorus_xfer_all(chorus_op *op, chorus_xfer *xs, const uint8_t *send, int n);

#endif
