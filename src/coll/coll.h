/*
 * coll.h - the schedules, and how the core picks one for a call.
 */
#ifndef CHORUS_COLL_COLL_H
#define CHORUS_COLL_COLL_H

#include "coll/op.h"

ncclResult_t chorus_allreduce_ring(chorus_op *op);
ncclResult_t chorus_allreduce_direct(chorus_op *op); /* oneshot and twoshot */
ncclResult_t chorus_allreduce_rd(chorus_op *op);     /* recursive doubling, small */
/* Node-memory oneshot for every other collective but Send/Recv. */
ncclResult_t chorus_coll_direct(chorus_op *op);
ncclResult_t chorus_allgather_ring(chorus_op *op);
ncclResult_t chorus_reducescatter_ring(chorus_op *op);
ncclResult_t chorus_broadcast_ring(chorus_op *op);
ncclResult_t chorus_reduce_ring(chorus_op *op);
ncclResult_t chorus_sendrecv(chorus_op *op);
ncclResult_t chorus_multi(chorus_op *op); /* AlltoAll, Gather, Scatter */
void chorus_p2p_take_ticket(chorus_op *op);

/* Chooses op->algo and op->step for op->func (honouring NCCL_ALGO) and
 * stamps op->meta. ncclInvalidUsage when no allowed algorithm exists. */
ncclResult_t chorus_coll_plan(chorus_op *op);

#endif
