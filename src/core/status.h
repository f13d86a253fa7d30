/*
 * status.h - the stuck report: a call that waits too long says who it
 * waits for, and why.
 *
 * Each process that holds communicators runs a status service: a TCP
 * listener beside its bootstrap's address, answered by a thread of its
 * own, so it answers while the application computes, sleeps in another
 * call, or spins in a GPU kernel. Its address travels in the rank records
 * at init. An answer describes one rank of one communicator (the query
 * carries a key only the communicator's ranks know): how many collectives
 * it issued and ended, its recent calls, the call it is stalled in and on
 * whom it waits (coll/progress.h), and the longest stall of its process
 * on any other communicator.
 *
 * A reporter thread watches this process's communicators. Once a call has
 * made no progress for CHORUS_STUCK_WARN seconds, it asks every peer (in
 * parallel, a second at most) and writes one WARN: the call and what it
 * waits for; which ranks have not issued it (with their last call and how
 * long ago), which issued a different call, which are inside it (and on
 * whom they wait), which finished it; and the culprits named with host and
 * pid. A peer that does not answer is named too, as stopped when /proc
 * shows it so (a process of this machine and PID namespace). One report
 * per stall; the call then waits on as before (CHORUS_OP_TIMEOUT ends it).
 *
 * On GPU communicators the host does not wait: an event recorded after
 * each launch (outside graph capture) tells the reporter what the GPU
 * finished, and a call whose event has not completed for CHORUS_STUCK_WARN
 * seconds is reported the same way ("has not finished on the GPU"), its
 * peers' answers counting calls finished on their GPUs.
 *
 * The state dump: on CHORUS_DUMP_SIGNAL (chorus.h's chorusDumpState raises
 * it) the server thread writes every communicator of the process to
 * CHORUS_DUMP_FILE: calls issued and ended, the recent ones, a stall and
 * whom it waits for, the peers and their transports, a failure.
 * `chorus_info --dump PID` asks a process for it and prints it.
 */
#ifndef CHORUS_CORE_STATUS_H
#define CHORUS_CORE_STATUS_H

#include <stdint.h>

#include "nccl.h"
#include "util/socket.h"

/* Where a rank's process answers (family 0: it does not). */
typedef struct chorus_status_peer {
  chorus_sockaddr addr;
  uint64_t pid_ns; /* its PID namespace (util/proc.h) */
} chorus_status_peer;

/* This rank's record: the process's listener on the address family and
 * interface of `near` (the bootstrap's), opened once per address; family
 * 0 when reports are off (CHORUS_STUCK_WARN=off) or it cannot open
 * (logged). Holds the service for comm until chorus_status_unregister. */
void chorus_status_listen(ncclComm_t comm, const chorus_sockaddr *near, chorus_status_peer *out);

/* comm (ready) answers and is watched from now on. peers: every rank's
 * record, taken over (chorus_malloc'd). */
void chorus_status_register(ncclComm_t comm, chorus_status_peer *peers);

/* GPU communicator comm launched collectives up to #index on stream:
 * its event follows them (not while the stream is being captured). */
void chorus_status_gpu_launched(ncclComm_t comm, uint64_t index, void *stream);

/* The signal CHORUS_DUMP_SIGNAL's text names ("USR1", "SIGUSR1", "10"):
 * its number, 0 for none ("off", unset), -1 when not one to catch. */
int chorus_status_signal(const char *text);

/* comm answers no more; the service stops with its last holder. Safe on
 * any communicator. */
void chorus_status_unregister(ncclComm_t comm);

#endif
