/*
 * coll.h - the host schedules, and how a planned call gets one.
 */
#ifndef CHORUS_COLL_COLL_H
#define CHORUS_COLL_COLL_H

#include "coll/op.h"

ncclResult_t chorus_allreduce_ring(chorus_op *op);
ncclResult_t chorus_allreduce_node(chorus_op *op);     /* oneshot and twoshot */
ncclResult_t chorus_allreduce_rd(chorus_op *op);       /* recursive doubling, small */
ncclResult_t chorus_allgather_rd(chorus_op *op);       /* recursive doubling, small */
ncclResult_t chorus_reducescatter_rd(chorus_op *op);   /* recursive halving, small */
ncclResult_t chorus_allreduce_tree(chorus_op *op);     /* double binary tree, many hosts */
ncclResult_t chorus_broadcast_binomial(chorus_op *op); /* binomial tree, small, many hosts */
ncclResult_t chorus_reduce_binomial(chorus_op *op);    /* binomial tree, small, many hosts */
ncclResult_t chorus_allreduce_hier(chorus_op *op);     /* in each host, across, in each host */
/* Node-memory oneshot for every other collective but Send/Recv. */
ncclResult_t chorus_coll_node(chorus_op *op);
/* Node memory's peer reads (zerocopy): AllGather, AlltoAll, Broadcast,
 * Gather, Scatter in one copy per byte, straight from the peers' inputs. */
ncclResult_t chorus_coll_peer_read(chorus_op *op);
/* ... and AllReduce, ReduceScatter: each rank reduces its share straight
 * from the peers' inputs; AllReduce then reads the peers' finished shares. */
ncclResult_t chorus_coll_peer_reduce(chorus_op *op);
ncclResult_t chorus_allgather_ring(chorus_op *op);
ncclResult_t chorus_reducescatter_ring(chorus_op *op);
ncclResult_t chorus_broadcast_ring(chorus_op *op);
ncclResult_t chorus_reduce_ring(chorus_op *op);
ncclResult_t chorus_sendrecv(chorus_op *op);
ncclResult_t chorus_multi(chorus_op *op); /* AlltoAll, Gather, Scatter */
/* CHORUS_REPRODUCIBLE: AllReduce, ReduceScatter and Reduce gathered, then
 * added in rank order; _prepare makes the gathering call (coll/ordered.c). */
ncclResult_t chorus_ordered(chorus_op *op);
ncclResult_t chorus_ordered_prepare(chorus_op *op);
/* op->scratch, at least `bytes`, from its communicator's kept buffers
 * (util/bufcache.h); NULL when out of memory. */
void *chorus_op_scratch(chorus_op *op, size_t bytes);
/* Gives op->scratch back (NULL: nothing). */
void chorus_op_scratch_drop(chorus_op *op);
/* Frees what a prepared op holds once it ended or failed (its scratch,
 * and an ordered op's gathering call's). */
void chorus_coll_release(chorus_op *op);
/* dst = the first count elements of this rank's input, scaled where
 * PreMulSum scales each rank's input; flags as chorus_reduce takes them
 * (CHORUS_RED_FINALIZE: finished too, for a rank alone). */
void chorus_coll_own_input(chorus_op *op, void *dst, size_t count, unsigned flags);
/* An in-place AlltoAll's copy of its input for the peers: every block of
 * op's buffer but this rank's own into dst, count elements apart (as the
 * buffer, but for a share's rows, chorus_op.pitch). */
void chorus_coll_peers_blocks(const chorus_op *op, char *dst);
void chorus_p2p_take_ticket(chorus_op *op);
/* The host calls of one group, prepared and not yet run. Sends may go by
 * reference (chorus_op.by_ref) where the group also receives. A Send
 * whose buffer a Recv of the group writes (one buffer sent to one peer
 * and received from another, "in place") sends from a copy taken now, so
 * it sends what was there rather than what arrives. */
ncclResult_t chorus_p2p_snapshot(chorus_op **ops, size_t n);
/* Its first part alone, for a group copied before its planning (which
 * sets by_ref as for a lone call): marks the Sends that may go by
 * reference; returns how many host Recvs the group has. */
size_t chorus_p2p_mark_by_ref(chorus_op **ops, size_t n);

typedef ncclResult_t (*chorus_coll_step)(chorus_op *);
/* The schedule of func with algorithm algo, or NULL (prepare.c). */
chorus_coll_step chorus_coll_schedule(int func, int algo);

/* What host planning needs of a communicator, at init: its cost-model
 * inputs (cc->plan.env) and how it stores outputs. */
void chorus_coll_setup(chorus_coll_comm *cc);

/* Chooses op->algo (the planner, plan/plan.h) and op->step, and stamps
 * op->meta. ncclInvalidUsage when the filters allow no algorithm. */
ncclResult_t chorus_coll_prepare(chorus_op *op);

#endif
