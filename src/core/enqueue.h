/*
 * enqueue.h - from an API call to running schedules.
 *
 * chorus_enqueue takes a fully checked call: outside a group it is planned
 * and run at once (host communicators complete calls before returning);
 * inside a group it is recorded and runs at ncclGroupEnd.
 */
#ifndef CHORUS_CORE_ENQUEUE_H
#define CHORUS_CORE_ENQUEUE_H

#include "coll/op.h"
#include "nccl.h"

ncclResult_t chorus_enqueue(ncclComm_t comm, chorus_op *op);

/* Plans and runs a list of ops (linked by next_op, each with op->cc set),
 * queued per communicator in list order. Frees the ops' scratch, and the ops
 * themselves when free_ops is set (grouped ops are heap copies). */
ncclResult_t chorus_run_ops(chorus_op *ops, int free_ops);

/* Modelled time in microseconds of a list of ops (ncclGroupSimulateEnd):
 * the planner's tasks priced by its cost model. */
ncclResult_t chorus_estimate_ops(const chorus_op *ops, float *us);

#endif
