/*
 * xfer.h - moving a byte range through one connection.
 *
 * A chorus_xfer is a small resumable state machine of its own, so one op
 * can drive many at once (AlltoAll, Gather, Scatter progress every peer in
 * parallel). The range is cut into messages of at most the connection's slot
 * size; the receiver checks every message's call description and size. A
 * zero-byte range moves nothing.
 *
 * From CHORUS_XFER_READ_MIN bytes (CHORUS_XFER_READ_MIN_EVEN for Send/Recv
 * and AlltoAll), where the peer may read this process's memory
 * (chorus_conn.peer_reads) and the op allows it (chorus_op.by_ref), a
 * send goes by reference in messages of up to CHORUS_XFER_READ_UNIT:
 * the receiver copies each straight from the sender's range into its own,
 * one copy per byte instead of two, and the send's flush waits for it. A
 * receiver takes either kind as it comes.
 *
 * Both return ncclSuccess when the range has moved (sends: flushed),
 * ncclInProgress while waiting (the op records what for), or an error.
 */
#ifndef CHORUS_COLL_XFER_H
#define CHORUS_COLL_XFER_H

#include "coll/op.h"

#define CHORUS_XFER_READ_MIN (64u << 10)
/* Where each rank receives about as much as it sends, the receivers' reads
 * share the copying out as the slots' copies would: smaller messages pay. */
#define CHORUS_XFER_READ_MIN_EVEN (32u << 10)
#define CHORUS_XFER_READ_UNIT     ((size_t)64 << 20) /* bytes per message read in place */

void chorus_xfer_init(chorus_xfer *x, chorus_conn *c, const void *buf, size_t bytes);
ncclResult_t chorus_xfer_send(chorus_op *op, chorus_xfer *x);
ncclResult_t chorus_xfer_recv(chorus_op *op, chorus_xfer *x);
/* A receive that combines each message into the range (buf = buf (+)
 * message, by the op's reduction, unscaled and unfinished) instead of
 * storing it: partial results meeting (coll/rd.c). */
ncclResult_t chorus_xfer_fold(chorus_op *op, chorus_xfer *x);

/* A range of device memory over a connection that takes it (dev_mem): one
 * message says how many bytes come, the network moves them (dev_move).
 * The receiver checks the size against its own before it posts anything,
 * so calls that differ fail naming the peer. */
ncclResult_t chorus_xfer_send_dev(chorus_op *op, chorus_xfer *x);
ncclResult_t chorus_xfer_recv_dev(chorus_op *op, chorus_xfer *x);

/* What a transfer of chorus_xfer_all does. */
enum { CHORUS_XFER_RECV = 0, CHORUS_XFER_SEND = 1, CHORUS_XFER_FOLD = 2 };

/* Runs xs[0..n) until all are done, xs[i] doing kind[i]. */
ncclResult_t chorus_xfer_all(chorus_op *op, chorus_xfer *xs, const uint8_t *kind, int n);

/* op->scratch as room for n transfers and their kinds (chorus_xfer_all's
 * arguments), then `extra` bytes, 64-byte aligned, at *extra_at. */
ncclResult_t chorus_xfer_alloc(chorus_op *op, int n, size_t extra, chorus_xfer **xs, uint8_t **kind,
                               char **extra_at);

#endif
