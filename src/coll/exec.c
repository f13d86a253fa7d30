/*
 * exec.c - see exec.h.
 */
#include "coll/exec.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "algo/func.h"
#include "coll/calls.h"
#include "coll/progress.h"
#include "coll/prims.h"
#include "coll/steps.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/doorbell.h"
#include "util/misc.h"

#define SLEEP_CAP_NS   (50ll * 1000000)
#define CHECK_EVERY_NS (100ll * 1000000)
/* A stall this long sends what the transports hold back to send together
 * (transport.h: stalled): short enough for a peer that waits on it. */
#define CHORUS_NOTES_DUE_NS (500ll * 1000)

void chorus_exec_fail_comm(chorus_coll_comm *cc, ncclResult_t res, const char *reason) {
  /* Atomic: the status thread reads it (core/status.h). */
  if (cc->failed == ncclSuccess) __atomic_store_n(&cc->failed, res, __ATOMIC_RELAXED);
  if (cc->node) { /* ranks waiting in node memory look here */
    chorus_node_rank *me = &cc->node->rank[cc->rank];
    if (!__atomic_load_n(me->failed, __ATOMIC_ACQUIRE)) {
      snprintf(me->reason, CHORUS_NODE_REASON, "%s", reason);
      __atomic_store_n(me->failed, 1, __ATOMIC_RELEASE);
      for (int p = 0; p < cc->node->nranks; p++) chorus_doorbell_ring(cc->node->rank[p].db);
    }
  }
  for (int p = 0; p < cc->nranks; p++)
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      for (int d = 0; d < 2; d++) {
        chorus_conn *c = chorus_cc_conn(cc, p, ch, d);
        if (c) c->ops->fail(c, reason);
      }
}

/* Fails q's communicator, passing on the first cause: a peer's failure
 * that reached this rank, else this rank's own. */
static void fail_queue(chorus_exec_queue *q, ncclResult_t res) {
  q->result = res;
  chorus_coll_comm *cc = q->cc;
  /* The last error names this rank ("rank R of N on host: ..."). */
  chorus_exec_fail_comm(cc, res, cc->cause[0] ? cc->cause : chorus_last_error(NULL));
  for (int k = 0; k < 2; k++) /* dropped: their profiler events end */
    for (chorus_op *op = k ? q->p2p : q->head; op; op = op->next_op)
      if (op->steps) chorus_steps_end(op);
  q->head = q->p2p = NULL;
}

/* Runs one step of op; returns its result and adds to *ticks. */
static ncclResult_t step(chorus_op *op, uint64_t *ticks) {
  uint64_t before = op->ticks;
  op->wait_conn = NULL;
  if (op->cc->tracing && !op->t_start) op->t_start = chorus_now_ns();
  ncclResult_t res = op->step(op);
  *ticks += op->ticks - before + (res == ncclSuccess);
  if (op->cc->tracing && res == ncclSuccess) op->t_end = chorus_now_ns();
  if (op->steps && res != ncclInProgress) chorus_steps_end(op);
  return res;
}

/* Whether the call board (coll/calls.h) shows collective op's call, or
 * an earlier unchecked one, differing from a peer's: ncclInvalidUsage
 * (reported), else ncclSuccess with *failed set to the connection of a
 * peer that reported a failure, or NULL. */
static ncclResult_t board_mismatch(chorus_op *op, chorus_conn **failed) {
  ncclResult_t seen = chorus_calls_check(op->cc, &op->expect, failed);
  /* A peer that failed (it may have found this very difference and gone)
   * does not excuse an earlier call of this rank's that differed. */
  if (seen != ncclInvalidUsage) seen = chorus_calls_catch_up(op->cc, op->expect.seq);
  return seen == ncclInvalidUsage ? seen : ncclSuccess;
}

/* What the board shows about op, which waits: a mismatch, a peer's
 * failure, or ncclSuccess. */
static ncclResult_t board_sees(chorus_op *op) {
  chorus_conn *failed;
  const ncclResult_t seen = board_mismatch(op, &failed);
  if (seen == ncclSuccess && failed) return chorus_prim_conn_error(op, failed, ncclRemoteError);
  return seen;
}

/* Runs a step of collective op with the call board's checks. A mismatch
 * the board shows is this rank's own finding, so it is reported rather
 * than a peer's word about a failure. */
static ncclResult_t step_coll(chorus_op *op, uint64_t *ticks) {
  if (!chorus_calls_on_board(op)) return step(op, ticks);
  ncclResult_t res = op->moved ? ncclSuccess : step(op, ticks);
  if (res == ncclInProgress) return res;
  if (res != ncclSuccess) {
    /* A mismatch is the root cause; a peer's failure only another word for what res says. */
    chorus_conn *failed;
    return board_mismatch(op, &failed) == ncclInvalidUsage ? ncclInvalidUsage : res;
  }
  op->moved = 1;
  op->wait_conn = NULL;
  res = chorus_calls_end(op);
  *ticks += res == ncclSuccess;
  return res;
}

/* Progresses a queue's collectives (in order) and point-to-point calls
 * (all). Returns an error when one failed. */
static ncclResult_t run_queue(chorus_exec_queue *q, uint64_t *ticks) {
  while (q->head) {
    ncclResult_t res = step_coll(q->head, ticks);
    if (res == ncclInProgress) break;
    if (res != ncclSuccess) return res;
    q->head = q->head->next_op;
  }
  for (chorus_op **link = &q->p2p; *link;) {
    ncclResult_t res = step(*link, ticks);
    if (res == ncclSuccess) {
      *link = (*link)->next_op;
    } else if (res == ncclInProgress) {
      link = &(*link)->next_op;
    } else {
      return res;
    }
  }
  return ncclSuccess;
}

/* A call that only moves bytes in messages this large (a rank's block, or
 * the whole Broadcast) may leave them to the transports' helper threads.
 * Under it a hand-off per message cost more than it saved (256 KiB
 * AllGather and AlltoAll on 2 ranks: 0.6x; NCCL_SOCKET_NTHREADS=auto,
 * core/comm.c). A share of a call cut across lanes (whole_count set) is
 * moved by its lane's thread like the others: lane 0's share through the
 * helpers while the other lanes' went without made 2 MiB byte moves on 2
 * ranks 0.65-0.86x as fast as four lanes without (core/enqueue.c). */
#define MOVES_HELPED_BYTES (512u << 10)

/* Tells q's transports what its next call does, when that changes. */
static void hint(chorus_exec_queue *q) {
  chorus_coll_comm *cc = q->cc;
  const chorus_op *op = q->head ? q->head : q->p2p;
  const int moves = op && !chorus_func_reduces(op->func) && !op->whole_count &&
                    op->count * op->esize >= MOVES_HELPED_BYTES;
  if (moves == cc->moves) return;
  cc->moves = moves;
  for (int t = 0; t < cc->ntransports; t++)
    if (cc->transports[t]->hint) cc->transports[t]->hint(cc->tstates[t], moves);
}

/* One pass over all queues. Returns how many queues still have work. */
static int pass(chorus_exec_queue *qs, int nq, uint64_t *ticks) {
  int pending = 0;
  for (int i = 0; i < nq; i++) {
    chorus_exec_queue *q = &qs[i];
    if (!q->head && !q->p2p) continue;
    /* Messages name this queue's rank (usually the caller's context already). */
    chorus_log_ctx old = chorus_log_ctx_get();
    if (old.err_buf != q->cc->log_ctx.err_buf) chorus_log_ctx_set(q->cc->log_ctx);
    ncclResult_t res = ncclSuccess;
    if (__atomic_load_n(q->cc->abort_flag, __ATOMIC_ACQUIRE))
      res = chorus_error(ncclInvalidUsage, "operation stopped: the communicator is being aborted");
    /* The queue first: a call's TCP notes then leave with its first
     * message to each peer, where it sends one (net_post_call). */
    if (res == ncclSuccess) {
      hint(q);
      res = run_queue(q, ticks);
    }
    for (int t = 0; t < q->cc->ntransports && res == ncclSuccess; t++)
      res = q->cc->transports[t]->progress(q->cc->tstates[t]);
    if (res != ncclSuccess) fail_queue(q, res);
    if (q->head || q->p2p) pending++;
    if (old.err_buf != q->cc->log_ctx.err_buf) chorus_log_ctx_set(old);
  }
  return pending;
}

/* What a blocked op may be woken by. */
static void op_wait_info(chorus_op *op, chorus_waitset *ws) {
  if (op->moved) { /* waits for a peer's post (calls.h) */
    if (op->wait_conn) op->wait_conn->ops->wait_info(op->wait_conn, op->wait_dir, ws);
    return;
  }
  if (op->wait_info)
    op->wait_info(op, ws);
  else if (op->wait_conn)
    op->wait_conn->ops->wait_info(op->wait_conn, op->wait_dir, ws);
}

/* Sleeps until something may have changed, at most SLEEP_CAP_NS. The
 * doorbell was prepared before the last pass (see doorbell.h); every path
 * leaves it unprepared. */
static void nap(chorus_exec_queue *qs, int nq, chorus_doorbell *db, uint32_t seen) {
  chorus_waitset ws;
  memset(&ws, 0, sizeof ws);
  for (int i = 0; i < nq; i++) {
    chorus_exec_queue *q = &qs[i];
    if (!q->head && !q->p2p) continue;
    if (q->cc->doorbell) chorus_waitset_add_db(&ws, q->cc->doorbell);
    if (q->head) op_wait_info(q->head, &ws);
    for (chorus_op *op = q->p2p; op; op = op->next_op) op_wait_info(op, &ws);
    for (int t = 0; t < q->cc->ntransports; t++)
      q->cc->transports[t]->wait_info(q->cc->tstates[t], &ws);
  }
  if (db && ws.nfds == 0 && ws.ndb == 1 && db == ws.db[0] && !ws.must_poll) {
    chorus_doorbell_sleep(db, seen, SLEEP_CAP_NS);
    return;
  }
  if (ws.must_poll) { /* a network plugin moves bytes only when asked */
    if (ws.nfds > 0) (void)poll(ws.fds, (nfds_t)ws.nfds, 0);
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  } else if (ws.nfds > 0) {
    /* Sockets and (maybe) doorbells: poll briefly so a doorbell ring is
     * never missed for long. */
    poll(ws.fds, (nfds_t)ws.nfds, ws.ndb ? 1 : (int)(SLEEP_CAP_NS / 1000000));
  } else {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  if (db) chorus_doorbell_cancel(db);
}

/* Records on the communicator's progress record (coll/progress.h) that
 * q's first call has not moved since `since`, and on whom it waits. */
static void publish_stall(chorus_exec_queue *q, int64_t since) {
  chorus_progress *p = q->cc->progress;
  if (!p) return;
  const chorus_op *op = q->head ? q->head : q->p2p;
  const chorus_conn *c = op->wait_conn;
  const chorus_call_desc d = {op->app_index,
                              op->count,
                              op->func,
                              op->dtype,
                              chorus_func_reduces(op->func) ? op->nccl_op : -1,
                              op->root};
  chorus_progress_stall(p, &d, op->concurrent, 0, since, c ? c->peer : -1, c ? op->wait_dir : -1);
  q->published = 1;
}

static void unpublish_stalls(chorus_exec_queue *qs, int nq) {
  for (int i = 0; i < nq; i++)
    if (qs[i].published) {
      chorus_progress_unstall(qs[i].cc->progress);
      qs[i].published = 0;
    }
}

/* Slow checks on a stalled queue: are the peers its ops wait for alive?
 * Has it run out of time? */
static void check_stalled(chorus_exec_queue *q, int64_t stalled_ns, int64_t since) {
  chorus_log_ctx old = chorus_log_ctx_set(q->cc->log_ctx);
  char me[160];
  /* Calls that wait on each other because they differ. */
  if (q->head && chorus_calls_on_board(q->head)) {
    const ncclResult_t seen = board_sees(q->head);
    if (seen != ncclSuccess) {
      fail_queue(q, seen);
      chorus_log_ctx_set(old);
      return;
    }
  }
  for (chorus_op *op = q->head ? q->head : q->p2p; op; op = op == q->head ? q->p2p : op->next_op) {
    chorus_conn *c = op->wait_conn;
    if (!c) continue;
    ncclResult_t res = c->ops->check(c);
    if (res != ncclSuccess) {
      fail_queue(q, chorus_prim_conn_error(op, c, res));
      chorus_log_ctx_set(old);
      return;
    }
  }
  publish_stall(q, since);
  chorus_op *op = q->head ? q->head : q->p2p;
  chorus_conn *c = op->wait_conn;
  chorus_op_describe(op, me, sizeof me);
  if (q->cc->timeout_ns > 0 && stalled_ns > q->cc->timeout_ns) {
    const chorus_rank_info *pi = c ? &q->cc->topo->info[c->peer] : NULL;
    fail_queue(q, chorus_error(ncclRemoteError,
                               "%s made no progress for %lld s while waiting for %s rank %d "
                               "(host %s, pid %d, %s transport). That rank may be dead, stuck, "
                               "or in a different call. CHORUS_OP_TIMEOUT sets this limit",
                               me, (long long)(stalled_ns / 1000000000),
                               !c                                ? "a peer"
                               : op->wait_dir == CHORUS_DIR_RECV ? "data from"
                                                                 : "room at",
                               c ? c->peer : -1, pi ? pi->hostname : "?", pi ? pi->pid : -1,
                               c ? c->transport : "?"));
  }
  chorus_log_ctx_set(old);
}

/* Tells the transports of the queues with calls left that they stall. */
static void tell_stalled(chorus_exec_queue *qs, int nq) {
  for (int i = 0; i < nq; i++) {
    const chorus_coll_comm *cc = qs[i].cc;
    if (!qs[i].head && !qs[i].p2p) continue;
    for (int t = 0; t < cc->ntransports; t++)
      if (cc->transports[t]->stalled) cc->transports[t]->stalled(cc->tstates[t]);
  }
}

ncclResult_t chorus_exec_run(chorus_exec_queue *qs, int nq) {
  int64_t spin_ns = 0, yield_ns = 0;
  for (int i = 0; i < nq; i++) {
    qs[i].result = ncclSuccess;
    spin_ns = CHORUS_MAX(spin_ns, qs[i].cc->spin_ns);
    yield_ns = CHORUS_MAX(yield_ns, qs[i].cc->yield_ns);
  }
  chorus_doorbell *db = NULL;
  for (int i = 0; i < nq && !db; i++) db = qs[i].cc->doorbell;
  /* Waiting goes poll -> yield -> sleep, timed from the last progress.
   * While spinning the clock is read every 16th idle pass only: a read
   * costs about what a pass does, and delays seeing the peer's data. A
   * wait starts spinning, so a short one (a small call's peer a few
   * passes behind) reads no clock at all; its stall is timed from its
   * 16th idle pass. */
  int64_t stall_start = 0, last_check = 0;
  int sleepy = 0, spinning = 1, told = 0;
  unsigned idle = 0;
  for (;;) {
    uint64_t ticks = 0;
    uint32_t seen = sleepy && db ? chorus_doorbell_prepare(db) : 0;
    int pending = pass(qs, nq, &ticks);
    if (sleepy && db && (!pending || ticks)) chorus_doorbell_cancel(db);
    if (!pending) break;
    if (ticks) {
      if (stall_start) unpublish_stalls(qs, nq);
      stall_start = 0;
      sleepy = 0;
      spinning = 1;
      told = 0;
      idle = 0;
      continue;
    }
    if (spinning && (++idle & 15u)) {
      chorus_cpu_relax();
      continue;
    }
    int64_t now = chorus_now_ns();
    if (!stall_start) stall_start = last_check = now;
    int64_t stalled = now - stall_start;
    if (!told && stalled >= CHORUS_NOTES_DUE_NS) {
      told = 1;
      tell_stalled(qs, nq);
    }
    spinning = stalled < spin_ns;
    if (spinning) {
      chorus_cpu_relax();
      continue;
    }
    if (now - last_check >= CHECK_EVERY_NS) {
      last_check = now;
      if (sleepy && db) chorus_doorbell_cancel(db);
      for (int i = 0; i < nq; i++)
        if (qs[i].head || qs[i].p2p) check_stalled(&qs[i], stalled, stall_start);
      continue;
    }
    if (stalled < spin_ns + yield_ns) {
      sched_yield();
      continue;
    }
    /* The doorbell must be prepared before the pass that found nothing
     * (see doorbell.h): take one more pass with it prepared. */
    if (!sleepy) {
      sleepy = 1;
      continue;
    }
    nap(qs, nq, db, seen);
  }
  unpublish_stalls(qs, nq);
  for (int i = 0; i < nq; i++)
    if (qs[i].result != ncclSuccess) return qs[i].result;
  return ncclSuccess;
}
