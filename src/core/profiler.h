/*
 * profiler.h - NCCL's profiler plugins, fed the events NCCL emits.
 *
 * The process loads one plugin library, as NCCL does: NCCL_PROFILER_PLUGIN
 * names it (a path, or NAME for libnccl-profiler-NAME.so; "none": no
 * plugin), else libnccl-profiler.so when it can be found; the newest table
 * it exports of ncclProfiler_v5 .. _v1 is used (profiler_abi.h). Each
 * communicator gets the plugin's context at init and gives it back at
 * destroy. The events, as in NCCL's hierarchy, each only where the
 * plugin's activation mask asks for it or for an event below it:
 *   GroupApi   one per outermost group of a thread (or call outside a
 *              group), from its first call until the group ended, in its
 *              first communicator's context (depth 1 outside a group, 2
 *              inside); every communicator's API events hang under it
 *   CollApi / P2pApi   started and stopped when the application issues it
 *   KernelLaunch       around the launch of GPU calls
 *   Group, Coll / P2p  when the calls are handed to the executor or GPU
 *              (Coll's parent its CollApi; its sequence number per function)
 *   KernelCh   one channel per call, when it has run: host calls with the
 *              executor's times, GPU calls with timing events around the
 *              launch, both in nanoseconds of the host's clock (the ptimer
 *              of the start, then its stop as state 22)
 *   ProxyOp    per call and connection across the network that it uses
 *              (coll/steps.h): the lane as channel, the peer, send or
 *              receive, the slot size as chunk; nSteps a Send's or Recv's
 *              messages, 0 for a collective's (not known ahead); state 19
 *              (in progress) at its start, from version 4
 *   ProxyStep  per message on it, through its direction's states in
 *              NCCL's order: sends SendGPUWait (8: waiting for a free slot
 *              and filling it), SendPeerWait (20, from version 4) and
 *              SendWait (9) at its post, with its bytes, until the network
 *              took it; receives RecvWait (10), then RecvFlushWait (11) and
 *              RecvGPUWait (12) at its arrival, with its bytes, until the
 *              schedule released it
 *   ProxyCtrl  the threads that run calls for the application's (a host
 *              communicator's lanes, a GPU communicator's proxy): Sleep
 *              (15) until woken (16), Append (17) of the calls taken (18,
 *              with their number), Active (14) while running them (13)
 *   NetPlugin  a network plugin's own (version 10 or later, through NCCL's
 *              ncclProfilerCallback_t), under the ProxyStep of the message
 *              it sent (its phandle); receives are posted ahead of their
 *              steps, so theirs have no parent and are dropped
 * Versions 1-4 get what their descriptors hold (no API events before 5,
 * no KernelCh before 3, no times before 4). A plugin whose init fails is
 * left out for that communicator, with a WARN naming it.
 */
#ifndef CHORUS_CORE_PROFILER_H
#define CHORUS_CORE_PROFILER_H

#include <stdint.h>

#include "coll/op.h"
#include "nccl.h"

/* At init: the plugin's context for comm (loading the plugin first);
 * comm->prof stays NULL when there is none. */
void chorus_prof_open(ncclComm_t comm);
/* At destroy: finalize; the library is unloaded with the last context. */
void chorus_prof_close(ncclComm_t comm);

/* The application issued op (filled; not yet enqueued); depth: its
 * group depth (0: outside a group). */
void chorus_prof_issue(ncclComm_t comm, chorus_op *op, int depth);
/* ops[0, n) of comm are handed to the executor or a GPU: their Group and
 * Coll/P2p events. */
void chorus_prof_hand(ncclComm_t comm, chorus_op *const *ops, int n);
/* A launch of comm's GPU calls begins (its KernelLaunch event's handle,
 * or NULL) and ends. */
void *chorus_prof_launch_start(ncclComm_t comm, void *stream);
void chorus_prof_launch_stop(ncclComm_t comm, void *handle);
/* A call ran from start_ns to end_ns (host clock): its KernelCh event.
 * coll: its Coll/P2p handle (op->prof_coll). */
void chorus_prof_ran(ncclComm_t comm, void *coll, int64_t start_ns, int64_t end_ns);
/* The thread's outermost group (or call outside a group) ended, run or
 * not: its GroupApi ends. */
void chorus_prof_group_end(void);

#endif
