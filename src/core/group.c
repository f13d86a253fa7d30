/*
 * group.c - see group.h.
 */
#include "core/group.h"

#include <string.h>

#include "core/comm.h"
#include "core/enqueue.h"
#include "core/profiler.h"
#include "util/alloc.h"
#include "util/check.h"

/* A group's first calls are recorded in the thread's group state, not on
 * the heap: most groups hold a few (a Send and a Recv), and a heap copy
 * each cost 15% of a small grouped Send/Recv (the allocator and its
 * accounting, at the call and again after the group). */
#define INLINE_OPS 4
/* The communicators the group holds calls on, each counted once in its
 * cc.queued (a locked instruction), not once per call: per call it cost
 * 7% of a small grouped Send/Recv. */
#define INLINE_HELD 4

typedef struct group_state {
  int depth;
  chorus_job *jobs, *jobs_tail;
  chorus_op *ops, *ops_tail;
  ncclResult_t error;
  chorus_op inline_ops[INLINE_OPS];
  int ninline; /* taken until the outermost group has closed */
  chorus_coll_comm *held_inline[INLINE_HELD];
  chorus_coll_comm **held; /* held_inline, or the heap past INLINE_HELD */
  int nheld, held_cap;
} group_state;

static CHORUS_TLS group_state G;

static int is_inline(const chorus_op *op) {
  const uintptr_t a = (uintptr_t)op, lo = (uintptr_t)G.inline_ops;
  return a >= lo && a < lo + sizeof G.inline_ops;
}

void chorus_group_free_op(chorus_op *op) {
  if (!is_inline(op)) chorus_free(op);
}

int chorus_group_depth(void) {
  return G.depth;
}

void chorus_group_add_job(chorus_job *job) {
  job->next = NULL;
  if (G.jobs_tail)
    G.jobs_tail->next = job;
  else
    G.jobs = job;
  G.jobs_tail = job;
}

/* Counts cc as held by this group, once. */
static ncclResult_t hold(chorus_coll_comm *cc) {
  for (int i = G.nheld - 1; i >= 0; i--)
    if (G.held[i] == cc) return ncclSuccess;
  if (!G.held) G.held = G.held_inline, G.held_cap = INLINE_HELD;
  if (G.nheld == G.held_cap) {
    const int cap = 2 * G.held_cap;
    chorus_coll_comm **more = chorus_malloc((size_t)cap * sizeof *more);
    if (!more) return chorus_error(ncclSystemError, "out of memory recording a grouped call");
    memcpy(more, G.held, (size_t)G.nheld * sizeof *more);
    if (G.held != G.held_inline) chorus_free(G.held);
    G.held = more, G.held_cap = cap;
  }
  G.held[G.nheld++] = cc;
  __atomic_add_fetch(&cc->queued, 1, __ATOMIC_ACQ_REL);
  return ncclSuccess;
}

/* Stops counting cc (whose calls left the group); every one, cc NULL. */
static void release(chorus_coll_comm *cc) {
  for (int i = G.nheld - 1; i >= 0; i--) {
    if (cc && G.held[i] != cc) continue;
    __atomic_sub_fetch(&G.held[i]->queued, 1, __ATOMIC_ACQ_REL);
    G.held[i] = G.held[--G.nheld];
  }
  if (G.nheld == 0 && G.held && G.held != G.held_inline) {
    chorus_free(G.held);
    G.held = NULL;
  }
}

chorus_op *chorus_group_slot(void) {
  return G.ninline < INLINE_OPS ? &G.inline_ops[G.ninline] : NULL;
}

ncclResult_t chorus_group_add_op(const chorus_op *op, ncclComm_t comm) {
  ncclResult_t res = hold(&comm->cc);
  if (res != ncclSuccess) {
    chorus_group_record_error(res);
    return res;
  }
  chorus_op *copy;
  if (op == chorus_group_slot()) { /* built in place: a small call's copy was ~6% of it */
    copy = &G.inline_ops[G.ninline++];
  } else {
    copy = G.ninline < INLINE_OPS ? &G.inline_ops[G.ninline++] : chorus_malloc(sizeof *copy);
    if (!copy) {
      res = chorus_error(ncclSystemError, "out of memory recording a grouped call");
      chorus_group_record_error(res);
      return res; /* cc stays held: the group's end releases it */
    }
    *copy = *op;
  }
  copy->next_op = NULL;
  if (G.ops_tail)
    G.ops_tail->next_op = copy;
  else
    G.ops = copy;
  G.ops_tail = copy;
  return ncclSuccess;
}

int chorus_group_builds(ncclComm_t comm) {
  for (const chorus_job *j = G.jobs; j; j = j->next)
    if (j->owner == comm) return 1;
  return 0;
}

size_t chorus_group_drop(ncclComm_t comm) {
  size_t dropped = 0;
  chorus_op **link = &G.ops;
  G.ops_tail = NULL;
  while (*link) {
    chorus_op *op = *link;
    if (op->cc != &comm->cc) {
      G.ops_tail = op;
      link = &op->next_op;
      continue;
    }
    *link = op->next_op;
    chorus_group_free_op(op);
    dropped++;
  }
  release(&comm->cc);
  if (dropped) chorus_group_record_error(ncclInvalidUsage);
  return dropped;
}

void chorus_group_record_error(ncclResult_t res) {
  if (G.depth > 0 && G.error == ncclSuccess) G.error = res;
}

static void hand_over(chorus_job *job) {
  if (job->owner) {
    job->owner->job_thread = job->thread;
    job->owner->has_job_thread = 1;
  } else {
    pthread_detach(job->thread);
  }
}

ncclResult_t chorus_job_run_now(chorus_job *job) {
  if (job->blocking) {
    ncclResult_t res = (ncclResult_t)(intptr_t)job->fn(job->arg);
    chorus_free(job);
    return res;
  }
  if (pthread_create(&job->thread, NULL, job->fn, job->arg) != 0) {
    chorus_free(job);
    return chorus_error(ncclSystemError, "cannot start a thread for a nonblocking call");
  }
  hand_over(job);
  chorus_free(job);
  return ncclInProgress;
}

/* Starts every job on its own thread, then joins the blocking ones. */
static ncclResult_t run_jobs(chorus_job *jobs) {
  ncclResult_t res = ncclSuccess;
  int pending_nonblocking = 0;
  for (chorus_job *j = jobs; j; j = j->next) {
    if (pthread_create(&j->thread, NULL, j->fn, j->arg) == 0) {
      j->started = 1;
    } else if (res == ncclSuccess) {
      res = chorus_error(ncclSystemError, "cannot start a thread for a grouped call");
    }
  }
  chorus_job *next;
  for (chorus_job *j = jobs; j; j = next) {
    next = j->next;
    if (j->started && j->blocking) {
      void *ret = NULL;
      pthread_join(j->thread, &ret);
      ncclResult_t r = (ncclResult_t)(intptr_t)ret;
      /* The cause over its echo: ranks that learned of another's failure
       * return ncclRemoteError, whichever thread is joined first. */
      if (r != ncclSuccess && (res == ncclSuccess || (res == ncclRemoteError && r != res))) res = r;
    } else if (j->started) {
      hand_over(j);
      pending_nonblocking = 1;
    }
    chorus_free(j);
  }
  if (res == ncclSuccess && pending_nonblocking) res = ncclInProgress;
  return res;
}

/* A call in the group failed: nothing runs, and communicators that were
 * waiting to be built carry the error. */
static void cancel_jobs(chorus_job *jobs, ncclResult_t error) {
  chorus_job *next;
  for (chorus_job *j = jobs; j; j = next) {
    next = j->next;
    if (j->owner) __atomic_store_n(&j->owner->async, error, __ATOMIC_RELEASE);
    chorus_free(j);
  }
}

static void free_ops(chorus_op *ops) {
  chorus_op *next;
  for (chorus_op *op = ops; op; op = next) {
    next = op->next_op;
    chorus_group_free_op(op);
  }
}

/* Takes the group's contents and resets it (so nothing leaks on error). */
static void take(chorus_job **jobs, chorus_op **ops, ncclResult_t *error) {
  *jobs = G.jobs;
  *ops = G.ops;
  release(NULL);
  *error = G.error;
  G.jobs = G.jobs_tail = NULL;
  G.ops = G.ops_tail = NULL;
  G.error = ncclSuccess;
}

ncclResult_t chorus_group_start(void) {
  G.depth++;
  return ncclSuccess;
}

/* Closes the outermost group: its jobs run first, then its ops run, or with
 * sim (ncclGroupSimulateEnd) are only costed and dropped. */
static ncclResult_t close_ops(ncclSimInfo_t *sim) {
  chorus_job *jobs;
  chorus_op *ops;
  ncclResult_t error;
  take(&jobs, &ops, &error);
  if (error != ncclSuccess) {
    cancel_jobs(jobs, error);
    free_ops(ops);
    return error;
  }
  ncclResult_t res = jobs ? run_jobs(jobs) : ncclSuccess;
  if (sim) {
    ncclSimInfo_t out = *sim;
    const ncclResult_t eres = chorus_estimate_ops(ops, &out.estimatedTime);
    free_ops(ops);
    if (eres != ncclSuccess) return eres;
    memcpy(sim, &out, sim->size < sizeof out ? sim->size : sizeof out);
    return res;
  }
  if (res != ncclSuccess && res != ncclInProgress) {
    free_ops(ops);
    return res;
  }
  ncclResult_t ores = chorus_run_ops(ops, CHORUS_RUN_FREE);
  return ores != ncclSuccess ? ores : res;
}

static ncclResult_t close_group(ncclSimInfo_t *sim) {
  const ncclResult_t res = close_ops(sim);
  G.ninline = 0; /* every op of the group has run or gone */
  return res;
}

ncclResult_t chorus_group_end(void) {
  if (G.depth == 0)
    return chorus_error(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  if (--G.depth > 0) return ncclSuccess;
  const ncclResult_t res = close_group(NULL);
  chorus_prof_group_end();
  return res;
}

ncclResult_t chorus_group_simulate_end(ncclSimInfo_t *simInfo) {
  if (G.depth == 0)
    return chorus_error(ncclInvalidUsage,
                        "ncclGroupSimulateEnd called without a matching ncclGroupStart");
  if (!simInfo || simInfo->magic != 0x74685283u)
    return chorus_error(
        ncclInvalidArgument,
        "ncclGroupSimulateEnd: simInfo not initialized via NCCL_SIM_INFO_INITIALIZER");
  if (--G.depth > 0) return ncclSuccess;
  const ncclResult_t res = close_group(simInfo);
  chorus_prof_group_end();
  return res;
}
