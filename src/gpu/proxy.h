/*
 * proxy.h - GPU calls carried by the host, for communicators whose ranks
 * span hosts.
 *
 * Ranks on other hosts share no memory with this one, so no kernel can
 * reach them. A call on such a communicator is staged instead: its inputs
 * are copied into pinned host memory on the caller's stream, a one-block
 * kernel (device/proxy.cu) posts the call's batch to this rank's progress
 * thread and waits, the thread runs the calls as host-memory calls of the
 * communicator (coll/: the host schedules, over shared memory inside a
 * host and the network between hosts, with their mismatch checks, first
 * causes and deadlines), and once it says done the outputs are copied
 * back. The stream sees only copies and a kernel, so the calls can be
 * captured in CUDA graphs: every replay takes a fresh number from a
 * counter in device memory, and the thread runs batches in that order,
 * which is the order the calls were made in on every rank.
 */
#ifndef CHORUS_GPU_PROXY_H
#define CHORUS_GPU_PROXY_H

#include <stddef.h>

#include "coll/lanes.h"
#include "coll/op.h"
#include "nccl.h"

typedef struct chorus_proxy chorus_proxy;

/* Starts the staging of communicator cc's calls on `device` (its host
 * side, connections and planner, ready). */
ncclResult_t chorus_proxy_setup(chorus_proxy **out, chorus_coll_comm *cc, int device);
/* Stops the progress thread (after ending the call it runs, if any) and
 * frees the staging memory; NULL is fine. */
void chorus_proxy_free(chorus_proxy *px);
/* The communicator's parts (core/hier.c): the GPU side of its ranks on
 * this host (NULL with one rank per host), and the host side of its ranks
 * at this rank's place on every host, nlanes times (each its own
 * connections; a thread each). AllReduce, AllGather and ReduceScatter the
 * planner gives to `hier` then run across them (steps in the host, a step
 * across hosts cut across the lanes; proxy.c says which). */
struct chorus_gpu;
ncclResult_t chorus_proxy_set_parts(chorus_proxy *px, struct chorus_gpu *local,
                                    chorus_coll_comm *local_cc, chorus_coll_comm *const *cross_cc,
                                    int nlanes);
/* ncclSuccess, or the first failure of the communicator's calls or of its
 * host-local part's kernels. */
ncclResult_t chorus_proxy_async_error(chorus_proxy *px);
/* Stops every kernel of this communicator that waits (any thread). */
void chorus_proxy_abort(chorus_proxy *px);
/* Waits (bounded) until the host has run the calls whose streams have
 * passed them without waiting for it (those that write nothing back on
 * this rank), so that a communicator destroyed after its streams finish
 * ends none of them early. */
void chorus_proxy_settle(chorus_proxy *px);
/* Queues the calls (checked, in call order, all on communicators with a
 * proxy) on their streams: each communicator's calls of the group as one
 * batch, which its progress thread runs together (Send/Recv all at once,
 * collectives in order). Returns once queued. */
ncclResult_t chorus_proxy_run_ops(chorus_op **ops, size_t n);

#endif
