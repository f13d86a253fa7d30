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
 * queued per communicator in list order. Frees the ops' scratch, and with
 * CHORUS_RUN_FREE gives the ops back to the group that copied them
 * (chorus_group_free_op); with
 * CHORUS_RUN_COUNTED the caller has counted the call in its communicator's
 * busy count already (chorus_comm_enter_call). */
enum { CHORUS_RUN_FREE = 1, CHORUS_RUN_COUNTED = 2 };
ncclResult_t chorus_run_ops(chorus_op *ops, int flags);

/* Modelled time in microseconds of a list of ops (ncclGroupSimulateEnd):
 * the planner's tasks priced by its cost model. */
ncclResult_t chorus_estimate_ops(const chorus_op *ops, float *us);

#endif
