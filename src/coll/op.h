/*
 * op.h - one collective or point-to-point call being executed, and the view
 * of its communicator that schedules need.
 *
 * A schedule is a resumable function (util/coro.h) stored in op->step. It
 * returns ncclSuccess when the call is complete on this rank, ncclInProgress
 * when it must wait (after saying what for, in op->wait_conn/wait_dir), or an
 * error. It never blocks; the executor (exec.h) decides when to call it again
 * and when to sleep.
 */
#ifndef CHORUS_COLL_OP_H
#define CHORUS_COLL_OP_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algos.h"
#include "algo/ring.h"
#include "host/reduce.h"
#include "nccl.h"
#include "transport/transport.h"
#include "util/log.h"

/* A communicator as seen by schedules and the executor. Filled by core. */
typedef struct chorus_coll_comm {
  int rank, nranks;
  chorus_conn **conns; /* [peer][channel][dir] */
  const chorus_transport *const *transports;
  void **tstates;
  int ntransports;
  chorus_doorbell *doorbell; /* this rank's, or NULL */
  int *abort_flag;           /* set by ncclCommAbort (any thread) */
  int64_t timeout_ns;        /* CHORUS_OP_TIMEOUT; <= 0: none */
  int spin;                  /* polls before yielding */
  uint64_t seq[CHORUS_NCHANNELS];
  const int *ring;           /* ring order: position -> rank */
  int ring_pos;              /* this rank's position */
  const chorus_topo *topo;
  /* Set once a call on this communicator failed; later calls are refused. */
  ncclResult_t failed;
  /* Calls in flight (atomic): ncclCommAbort waits for it to drain. */
  int busy;
  /* Log context of this communicator (rank and last-error buffer). */
  chorus_log_ctx log_ctx;
} chorus_coll_comm;

static inline chorus_conn *chorus_cc_conn(const chorus_coll_comm *cc, int peer, int ch, int dir) {
  return cc->conns[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * 2 + (size_t)dir];
}

typedef struct chorus_op chorus_op;

struct chorus_op {
  ncclResult_t (*step)(chorus_op *op);
  chorus_coll_comm *cc;
  int co;                /* coroutine resume point */
  uint64_t ticks;        /* bumped whenever the schedule moves */
  chorus_conn *wait_conn;
  int wait_dir;
  /* The call. */
  int func;              /* chorus_func */
  int algo;              /* chorus_algo */
  const void *sendbuff;
  void *recvbuff;
  size_t count;
  int dtype;
  size_t esize;
  chorus_red red;
  int nccl_op;           /* the caller's ncclRedOp_t kind, for messages */
  int root;              /* root or peer; -1 */
  chorus_msg_meta meta;  /* what every message of this call carries */
  /* Schedule state. */
  union {
    struct {
      chorus_ring_plan plan;
      size_t round;
      int k;
      chorus_conn *next, *prev;
      const void *rbuf;
      size_t rbytes;
      void *sbuf;
      size_t scap;
    } ring;
  } u;
  chorus_op *next_op;    /* executor queue link */
};

/* Fills op->meta from the call fields and the communicator's next sequence
 * number on channel ch (and advances it). */
void chorus_op_stamp(chorus_op *op, int ch);

/* Human-readable description of a call, e.g.
 * "AllReduce(count=1024, float, sum) #17". */
void chorus_meta_describe(const chorus_msg_meta *m, char *buf, size_t size);

#endif
