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

#include "util/check.h"
#include "util/clock.h"
#include "util/doorbell.h"

#define YIELDS 16
#define SLEEP_CAP_NS (50ll * 1000000)
#define CHECK_EVERY_NS (100ll * 1000000)

void chorus_exec_fail_comm(chorus_coll_comm *cc, ncclResult_t res, const char *reason) {
  if (cc->failed == ncclSuccess) cc->failed = res;
  for (int p = 0; p < cc->nranks; p++)
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      for (int d = 0; d < 2; d++) {
        chorus_conn *c = chorus_cc_conn(cc, p, ch, d);
        if (c) c->ops->fail(c, reason);
      }
}

static void fail_queue(chorus_exec_queue *q, ncclResult_t res) {
  q->result = res;
  chorus_exec_fail_comm(q->cc, res, chorus_last_error(NULL));
  q->head = NULL;
}

/* One pass over all queues. Returns how many ops are still pending. */
static int pass(chorus_exec_queue *qs, int nq, uint64_t *ticks) {
  int pending = 0;
  for (int i = 0; i < nq; i++) {
    chorus_exec_queue *q = &qs[i];
    if (!q->head) continue;
    chorus_log_ctx old = chorus_log_ctx_set(q->cc->log_ctx);
    if (__atomic_load_n(q->cc->abort_flag, __ATOMIC_ACQUIRE)) {
      fail_queue(q, chorus_error(ncclInvalidUsage, "operation stopped: the communicator is "
                                                   "being aborted"));
      chorus_log_ctx_set(old);
      continue;
    }
    for (int t = 0; t < q->cc->ntransports; t++) {
      ncclResult_t res = q->cc->transports[t]->progress(q->cc->tstates[t]);
      if (res != ncclSuccess) {
        fail_queue(q, res);
        break;
      }
    }
    while (q->head) {
      chorus_op *op = q->head;
      uint64_t before = op->ticks;
      op->wait_conn = NULL;
      ncclResult_t res = op->step(op);
      *ticks += op->ticks - before;
      if (res == ncclSuccess) {
        (*ticks)++;
        q->head = op->next_op;
        continue;
      }
      if (res != ncclInProgress) fail_queue(q, res);
      break;
    }
    if (q->head) pending++;
    chorus_log_ctx_set(old);
  }
  return pending;
}

/* Sleeps until something may have changed, at most SLEEP_CAP_NS. The
 * doorbell values were read before the last pass (see doorbell.h). */
static void nap(chorus_exec_queue *qs, int nq, chorus_doorbell *db, uint32_t seen) {
  chorus_waitset ws;
  memset(&ws, 0, sizeof ws);
  for (int i = 0; i < nq; i++) {
    chorus_exec_queue *q = &qs[i];
    if (!q->head) continue;
    if (q->cc->doorbell) chorus_waitset_add_db(&ws, q->cc->doorbell);
    chorus_op *op = q->head;
    if (op->wait_conn) op->wait_conn->ops->wait_info(op->wait_conn, op->wait_dir, &ws);
    for (int t = 0; t < q->cc->ntransports; t++)
      q->cc->transports[t]->wait_info(q->cc->tstates[t], &ws);
  }
  if (ws.nfds == 0 && ws.ndb == 1 && db == ws.db[0]) {
    chorus_doorbell_sleep(db, seen, SLEEP_CAP_NS);
  } else if (ws.nfds > 0) {
    /* Sockets and (maybe) doorbells: poll briefly so a doorbell ring is
     * never missed for long. */
    poll(ws.fds, (nfds_t)ws.nfds, ws.ndb ? 1 : (int)(SLEEP_CAP_NS / 1000000));
  } else {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
}

/* Slow checks on a stalled queue: peer alive? timeout? */
static void check_stalled(chorus_exec_queue *q, int64_t stalled_ns) {
  chorus_op *op = q->head;
  chorus_log_ctx old = chorus_log_ctx_set(q->cc->log_ctx);
  chorus_conn *c = op->wait_conn;
  char me[160];
  chorus_meta_describe(&op->meta, me, sizeof me);
  if (c) {
    ncclResult_t res = c->ops->check(c);
    if (res != ncclSuccess) {
      fail_queue(q, chorus_error(res, "%s failed: %s", me, c->err));
      chorus_log_ctx_set(old);
      return;
    }
  }
  if (q->cc->timeout_ns > 0 && stalled_ns > q->cc->timeout_ns) {
    const chorus_rank_info *pi = c ? &q->cc->topo->info[c->peer] : NULL;
    fail_queue(q, chorus_error(ncclRemoteError,
                               "%s made no progress for %lld s while waiting for %s rank %d "
                               "(host %s, pid %d, %s transport). That rank may be dead, stuck, "
                               "or in a different call. CHORUS_OP_TIMEOUT sets this limit",
                               me, (long long)(stalled_ns / 1000000000),
                               !c ? "a peer"
                                  : op->wait_dir == CHORUS_DIR_RECV ? "data from" : "room at",
                               c ? c->peer : -1, pi ? pi->hostname : "?", pi ? pi->pid : -1,
                               c ? c->transport : "?"));
  }
  chorus_log_ctx_set(old);
}

ncclResult_t chorus_exec_run(chorus_exec_queue *qs, int nq) {
  int spin = 0;
  for (int i = 0; i < nq; i++) {
    qs[i].result = ncclSuccess;
    if (qs[i].cc->spin > spin) spin = qs[i].cc->spin;
  }
  chorus_doorbell *db = NULL;
  for (int i = 0; i < nq && !db; i++) db = qs[i].cc->doorbell;
  int idle = 0;
  int64_t stall_start = 0, last_check = 0;
  for (;;) {
    uint64_t ticks = 0;
    uint32_t seen = idle >= spin + YIELDS && db ? chorus_doorbell_read(db) : 0;
    int pending = pass(qs, nq, &ticks);
    if (!pending) break;
    if (ticks) {
      idle = 0;
      stall_start = 0;
      continue;
    }
    idle++;
    if (idle <= spin) {
      chorus_cpu_relax();
      continue;
    }
    if (idle <= spin + YIELDS) {
      sched_yield();
      continue;
    }
    int64_t now = chorus_now_ns();
    if (!stall_start) stall_start = last_check = now;
    if (now - last_check >= CHECK_EVERY_NS) {
      last_check = now;
      for (int i = 0; i < nq; i++)
        if (qs[i].head) check_stalled(&qs[i], now - stall_start);
      continue;
    }
    nap(qs, nq, db, seen);
  }
  for (int i = 0; i < nq; i++)
    if (qs[i].result != ncclSuccess) return qs[i].result;
  return ncclSuccess;
}
