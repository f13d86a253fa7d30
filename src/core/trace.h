/*
 * trace.h - CHORUS_TRACE: every call on a timeline.
 *
 * With CHORUS_TRACE=path (%h host, %p pid) each process writes a Chrome
 * trace event file (JSON array; it opens in Perfetto and chrome://tracing):
 * per communicator and rank a row ("pid" the rank, "tid" the
 * communicator's place in this process), and per call one complete event:
 * its start and end (host calls: when the executor first stepped it and
 * when it ended; GPU calls: events recorded around the launch, read back
 * by a thread of the library), the function, its number on the
 * communicator, count, type, operator, root, bytes, algorithm, when the
 * application issued it, and the bus bandwidth it achieved. Times are
 * this host's CLOCK_MONOTONIC in microseconds; a metadata event per
 * communicator holds the offset to rank 0's clock, measured at init by
 * round trips to it, with which tools/chorus_trace.py merges the ranks'
 * files into one timeline and names the stragglers. Calls captured into
 * CUDA graphs are not traced. Off (the default), a call pays one branch.
 */
#ifndef CHORUS_CORE_TRACE_H
#define CHORUS_CORE_TRACE_H

#include "coll/op.h"
#include "nccl.h"

/* At init, collective over comm when CHORUS_TRACE is set: measures the
 * offset to rank 0's clock, opens the process's file (once) and writes
 * comm's rows; comm->cc.tracing then set. A failure to open the file is
 * logged, not fatal. */
ncclResult_t chorus_trace_open(ncclComm_t comm);

/* Host call op of comm ended (op->t_* filled): its event. */
void chorus_trace_host(ncclComm_t comm, const chorus_op *op);

/* GPU calls of comm about to be launched on stream: a timing event
 * before them; returns a slot for chorus_trace_gpu_end, or -1 (not
 * traced: no room, or the stream is being captured). */
int chorus_trace_gpu_begin(ncclComm_t comm, void *stream);
/* They were launched (ops[0, n)): a timing event after them; their events
 * are written once the GPU passed it. */
void chorus_trace_gpu_end(ncclComm_t comm, int slot, chorus_op *const *ops, int n, void *stream);

/* comm ends: its pending GPU events are written (waiting for them), and
 * the file is closed with the process's last traced communicator. */
void chorus_trace_close(ncclComm_t comm);

#endif
