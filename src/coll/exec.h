/*
 * exec.h - driving operations to completion.
 *
 * The executor runs one queue of operations per communicator. A queue's
 * collectives run one after the other (every rank issues them in the same
 * order); its point-to-point calls all run at once (any matched set of sends
 * and receives completes). Different queues progress together in the calling
 * thread, which is what lets one thread drive several ranks
 * (ncclCommInitAll, -g in the perf tools).
 *
 * Waiting: while nothing moves, the executor polls (CHORUS_SPIN times),
 * then yields the CPU, then sleeps on the rank's doorbell or on sockets, so
 * ranks may outnumber cores. While a wait drags on it checks that the peer it
 * waits for is alive, and after CHORUS_OP_TIMEOUT seconds without progress it
 * fails the call, naming the peer. ncclCommAbort from another thread stops
 * it within one sleep period (<= 50 ms).
 *
 * When a call fails, its communicator is marked failed and every connection
 * of it is poisoned, so the peers fail promptly too (with the reason).
 */
#ifndef CHORUS_COLL_EXEC_H
#define CHORUS_COLL_EXEC_H

#include "coll/op.h"

typedef struct chorus_exec_queue {
  chorus_coll_comm *cc;
  chorus_op *head; /* collectives, run in order; linked through next_op */
  chorus_op *p2p;  /* point-to-point calls, run together; linked the same way */
  ncclResult_t result;
  int published; /* a stall of it is on its progress record (coll/progress.h) */
  int lanes;     /* its calls' other shares run on lanes 1..lanes-1 (coll/lanes.h); 0: none */
} chorus_exec_queue;

/* Appends op (prepared: op->concurrent set) to q: a collective after q's
 * last collective, a point-to-point call beside the others. tail[0] and
 * tail[1] keep the last of each (NULL for an empty queue). */
static inline void chorus_exec_queue_push(chorus_exec_queue *q, chorus_op *tail[2], chorus_op *op) {
  chorus_op **t = &tail[op->concurrent];
  if (*t)
    (*t)->next_op = op;
  else if (op->concurrent)
    q->p2p = op;
  else
    q->head = op;
  *t = op;
}

/* Runs every queue to completion or failure; returns the first error. */
ncclResult_t chorus_exec_run(chorus_exec_queue *qs, int nq);

/* Marks cc failed with res and poisons its connections with reason: the
 * first cause, which peers show as it is, so it names the rank it is
 * about ("rank R ..."). */
void chorus_exec_fail_comm(chorus_coll_comm *cc, ncclResult_t res, const char *reason);

#endif
