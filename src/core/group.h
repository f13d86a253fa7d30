/*
 * group.h - ncclGroupStart/End: per-thread batching of calls.
 *
 * Between the outermost Start and End, calls are recorded instead of run:
 *   jobs  communicator creation and splits (each needs every rank present,
 *         so at End they run concurrently, one thread each, which is how one
 *         thread creates several ranks);
 *   ops   collectives and point-to-point calls (at End they run together in
 *         this thread through the executor, one queue per communicator).
 * The first argument error recorded while grouping makes End fail without
 * running the ops.
 */
#ifndef CHORUS_CORE_GROUP_H
#define CHORUS_CORE_GROUP_H

#include <pthread.h>

#include "coll/op.h"
#include "nccl.h"

/* A deferred job: fn(arg) runs on its own thread at group end; it returns
 * its ncclResult_t cast to void*. owner (may be NULL) receives the thread
 * when nonblocking, so it is joined by ncclCommGetAsyncError/Destroy. */
typedef struct chorus_job {
  void *(*fn)(void *);
  void *arg;
  ncclComm_t owner;
  int blocking;
  pthread_t thread;
  int started;
  struct chorus_job *next;
} chorus_job;

/* ncclGroupStart, ncclGroupEnd and ncclGroupSimulateEnd (group_entry.c). */
ncclResult_t chorus_group_start(void);
ncclResult_t chorus_group_end(void);
ncclResult_t chorus_group_simulate_end(ncclSimInfo_t *simInfo);

int chorus_group_depth(void);
/* Takes ownership of job (allocated with chorus_malloc). */
void chorus_group_add_job(chorus_job *job);
/* Where the group's next call may be built in place (NULL: build it
 * elsewhere; chorus_group_add_op copies it). Not taken until added. */
chorus_op *chorus_group_slot(void);
/* Adds op to the group: taken where chorus_group_slot put it, else
 * copied. */
ncclResult_t chorus_group_add_op(const chorus_op *op, ncclComm_t comm);
/* Gives back a copy chorus_group_add_op made, once it has run (on the
 * thread whose group it was). */
void chorus_group_free_op(chorus_op *op);
/* Before comm goes (destroy, abort): whether this thread's open group
 * builds comm (a job it owns: it cannot go yet), else drops the group's
 * calls on comm and returns how many (the group then ends with
 * ncclInvalidUsage). */
int chorus_group_builds(ncclComm_t comm);
size_t chorus_group_drop(ncclComm_t comm);
/* Records an error from a call made inside the group. */
void chorus_group_record_error(ncclResult_t res);

/* Runs a job now, outside any group: inline when blocking, else on a thread
 * handed to owner (or detached). Returns the job's result or ncclInProgress. */
ncclResult_t chorus_job_run_now(chorus_job *job);

#endif
