/*
 * comm.h - the communicator object and its life cycle.
 *
 * States:  INIT (being built, maybe by a background thread)
 *       -> READY -> FINALIZED / REVOKED
 *       -> (freed by ncclCommDestroy / ncclCommAbort)
 * `async` holds what ncclCommGetAsyncError reports: ncclInProgress while the
 * communicator is being built, then ncclSuccess or the error that broke it.
 *
 * Threads: NCCL's rule applies (one thread at a time per communicator), with
 * two exceptions that must work from any thread: ncclCommGetAsyncError and
 * ncclCommAbort. Abort raises abort_flag, which every wait in the library
 * watches, then waits for the calls in flight to drain (chorus_comm_drained).
 */
#ifndef CHORUS_CORE_COMM_H
#define CHORUS_CORE_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "coll/op.h"
#include "coll/progress.h"
#include "gpu/proxy.h"
#include "host/reduce.h"
#include "nccl.h"
#include "topo/topo.h"

#define CHORUS_COMM_MAGIC   0x43484f52434f4d4dull /* "CHORCOMM" */
#define CHORUS_MAX_USER_OPS 1024

enum { CHORUS_COMM_INIT = 0, CHORUS_COMM_READY, CHORUS_COMM_FINALIZED, CHORUS_COMM_REVOKED };

/* One ncclRedOpCreatePreMulSum operator. */
typedef struct chorus_user_op {
  int used;
  int dtype;
  int residence;          /* ncclScalarResidence_t */
  unsigned char value[8]; /* HostImmediate: the scalar */
  const void *ptr;        /* Device (host memory on host comms): read at run time */
} chorus_user_op;

/* What a background (nonblocking or grouped) job needs to finish init. */
typedef struct chorus_init_args {
  chorus_uid *uids;
  int nuids;
  /* The network's figures from a parent (chorus_comm_inherit_net): no
   * probe of its own (core/netprobe.h); 0: none. */
  double net_us, net_bw;
} chorus_init_args;

struct ncclComm {
  uint64_t magic;
  int rank, nranks;
  int device; /* -1: host memory */
  ncclConfig_t config;
  int state;      /* CHORUS_COMM_* (atomic) */
  int async;      /* ncclResult_t (atomic) */
  int abort_flag; /* raised by ncclCommAbort / Destroy during init (atomic) */
  pthread_t job_thread;
  int has_job_thread;
  chorus_init_args init;

  chorus_bootstrap *bs;
  chorus_topo topo;
  void *tstate[2]; /* shm, net */
  /* shm, then the built-in TCP transport or a network plugin's; NULL
   * until chosen (comm.c, transports_of) */
  const chorus_transport *transports[2];
  chorus_conn **conns;
  int *ring;
  chorus_coll_comm cc;
  uint64_t ctl_seq; /* split/shrink counter, same on every rank */
  /* GPU communicators across hosts (hier.c): this host's ranks (a GPU
   * communicator) and this rank's place on every host (host memory, once
   * per lane); NULL when hosts hold different numbers of ranks, or one
   * each. */
  struct ncclComm *part_local, *part_cross[CHORUS_LANES_MAX];
  int nlanes;

  chorus_user_op *user_ops;
  int nuser_ops;
  struct ncclWindow_vidmem *regs; /* registrations and windows, until deregistered (mem.c) */

  int is_part;                             /* a part of another (hier.c): not the user's */
  int is_lane;                             /* ... a host-memory communicator's lane */
  struct chorus_stats *stats;              /* CHORUS_STATS_INTERVAL: its counters (core/stats.h) */
  chorus_progress progress;                /* its calls, for the stuck report (core/status.h) */
  int status_held;                         /* it holds the status service (core/status.h) */
  struct chorus_status_peer *status_peers; /* every rank's, until registered there */
  struct chorus_trace_state *trace;        /* CHORUS_TRACE (core/trace.h), or NULL */
  int traced_by_all;                       /* every rank set CHORUS_TRACE */
  struct chorus_prof_state *prof;          /* a profiler plugin's context (core/profiler.h) */
  struct chorus_tuner_state *tuner;        /* a tuner plugin's context (core/tuner.h) */

  char last_error[1024];
};

/* Validates a handle from the user; `what` names the API call. */
ncclResult_t chorus_comm_check(ncclComm_t comm, const char *what);
/* A call on comm begins: checked as above, and refused while the
 * communicator is being aborted; on success the caller must end it with
 * chorus_comm_leave_call, and ncclCommAbort waits until it has. */
ncclResult_t chorus_comm_enter_call(ncclComm_t comm, const char *what);
void chorus_comm_leave_call(ncclComm_t comm);
/* No call runs on comm (in any thread), and none that enters from now on
 * misses an abort_flag raised before this. */
int chorus_comm_drained(ncclComm_t comm);
/* Sets the thread's log context to comm and returns the previous one. */
chorus_log_ctx chorus_comm_enter(ncclComm_t comm);

/* Allocates a communicator in state INIT (async = ncclInProgress) with its
 * parsed config. */
ncclResult_t chorus_comm_alloc(ncclComm_t *out, int nranks, int rank, const ncclConfig_t *cfg);
/* The device the calling thread's communicators and ncclMemAlloc use: its
 * current CUDA device (as NCCL does), or -1 (host memory) when the process
 * sees no GPU or CHORUS_HOST_COMM=1. */
int chorus_comm_pick_device(void);
/* Builds the communicator (bootstrap, topology, transports). Blocking;
 * sets state/async; records errors. Takes ownership of comm->init. */
ncclResult_t chorus_comm_build(ncclComm_t comm);
/* The parts of a GPU communicator across hosts (hier.c): collective over
 * its bootstrap once its own connections exist; nothing when hosts hold
 * different numbers of ranks, no local part when they hold one each.
 * Freed by chorus_comm_free_parts. */
ncclResult_t chorus_comm_build_parts(ncclComm_t comm);
/* A host-memory communicator's lanes 1..nlanes-1 (part_cross[k]; [0]
 * NULL), each all of its ranks with connections of their own; nlanes set
 * as they are built. Freed by chorus_comm_free_parts. */
ncclResult_t chorus_comm_build_lanes(ncclComm_t comm, int nlanes);
void chorus_comm_free_parts(ncclComm_t comm);
/* The slot of a host connection as the settings ask for it (NCCL_BUFFSIZE
 * over CHORUS_NSLOTS, clamped), and the slot count in *nslots (may be
 * NULL); ranks take the smallest of all. */
size_t chorus_comm_slot_bytes(int *nslots);
/* Runs chorus_comm_build on a background thread (nonblocking init). */
ncclResult_t chorus_comm_build_async(ncclComm_t comm);
/* Joins a background job if any. */
void chorus_comm_join(ncclComm_t comm);
/* Frees everything; the handle becomes invalid. */
void chorus_comm_free(ncclComm_t comm);
/* child, made from parent (a part, split or shrink), is on parent's
 * network: parent's figures serve it, with no probe of its own (none where
 * parent had none: one host, so child too). */
void chorus_comm_inherit_net(ncclComm_t child, const struct ncclComm *parent);
/* Frees the registrations and windows still on comm (mem.c). */
void chorus_comm_regs_free(ncclComm_t comm);

/* Ready for collectives? Returns the reason (and WARNs) if not. */
ncclResult_t chorus_comm_usable(ncclComm_t comm, const char *what);

#endif
