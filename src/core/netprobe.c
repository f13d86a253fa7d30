/*
 * netprobe.c - see netprobe.h.
 *
 * The first rank (a) and the first rank of another host (b) use their
 * point-to-point connections, idle before any call: ROUNDS round trips
 * of a word (latency: half the fastest), then BULK bytes from a to b
 * answered by a word (bandwidth: BULK over the trip's time less one round
 * trip). Each rank then takes rank 0's figures in one allgather, so that
 * every rank prices alike and every rank's planner chooses alike.
 */
#include "core/netprobe.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/op.h"
#include "core/comm.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/param.h"

#define ROUNDS 8
#define WORD   8
#define BULK   (4u << 20)

int chorus_netprobe_parse(const char *text, double *us, double *bw) {
  char *end;
  const double lat = strtod(text, &end);
  if (end == text || *end != ',') return -1;
  const char *second = end + 1;
  const double gbps = strtod(second, &end);
  if (end == second || *end != '\0' || !(lat > 0) || !(gbps > 0)) return -1;
  *us = lat;
  *bw = gbps * 1e3; /* GB/s = 1e9 bytes per 1e6 us */
  return 0;
}

int chorus_netprobe_setting(double *us, double *bw) {
  const char *set = chorus_param_str(CHORUS_P_NET_MODEL);
  if (!set || !*set) return 0;
  if (chorus_netprobe_parse(set, us, bw) == 0) return 1;
  (void)chorus_error(ncclInvalidUsage,
                     "CHORUS_NET=%s: want latency and bandwidth, e.g. 25,1.5 (us, GB/s)", set);
  return -1;
}

typedef struct probe {
  struct ncclComm *comm;
  int peer;
  chorus_conn *tx, *rx;
  int64_t deadline;
} probe;

/* A connection op's failure, or the deadline passed. */
static ncclResult_t failed(const probe *p, const chorus_conn *c, ncclResult_t res) {
  return chorus_error(res == ncclInProgress ? ncclSystemError : res,
                      "rank %d: measuring the network with rank %d at init: %s", p->comm->rank,
                      p->peer,
                      res == ncclInProgress ? "no answer in CHORUS_BOOTSTRAP_TIMEOUT" : c->err);
}

static int overdue(const probe *p, unsigned *spins) {
  if (++*spins % 64 == 0) sched_yield();
  return chorus_now_ns() > p->deadline;
}

/* Sends `bytes` (slot-sized messages) and waits until they left. */
static ncclResult_t put(probe *p, size_t bytes) {
  static const chorus_msg_meta meta; /* no call: nothing checks it */
  unsigned spins = 0;
  ncclResult_t res;
  size_t left = bytes;
  while (left > 0) {
    void *buf;
    size_t cap;
    while ((res = p->tx->ops->send_slot(p->tx, &buf, &cap)) == ncclInProgress)
      if (overdue(p, &spins)) return failed(p, p->tx, res);
    if (res != ncclSuccess) return failed(p, p->tx, res);
    const size_t n = left < cap ? left : cap;
    memset(buf, 0, n);
    if ((res = p->tx->ops->send_post(p->tx, n, &meta)) != ncclSuccess && res != ncclInProgress)
      return failed(p, p->tx, res);
    left -= n;
  }
  while ((res = p->tx->ops->send_flush(p->tx)) == ncclInProgress)
    if (overdue(p, &spins)) return failed(p, p->tx, res);
  return res == ncclSuccess ? ncclSuccess : failed(p, p->tx, res);
}

/* Receives messages until `bytes` came. */
static ncclResult_t take(probe *p, size_t bytes) {
  unsigned spins = 0;
  size_t got = 0;
  while (got < bytes) {
    const void *buf;
    size_t n;
    chorus_msg_meta meta;
    ncclResult_t res;
    while ((res = p->rx->ops->recv_slot(p->rx, &buf, &n, &meta)) == ncclInProgress)
      if (overdue(p, &spins)) return failed(p, p->rx, res);
    if (res != ncclSuccess) return failed(p, p->rx, res);
    got += n;
    if ((res = p->rx->ops->recv_release(p->rx)) != ncclSuccess) return failed(p, p->rx, res);
  }
  return ncclSuccess;
}

/* Rank a's side: the figures. */
static ncclResult_t measure(probe *p, double *us, double *bw) {
  int64_t best = -1;
  for (int i = 0; i < ROUNDS; i++) {
    const int64_t t0 = chorus_now_ns();
    CHECK(put(p, WORD));
    CHECK(take(p, WORD));
    const int64_t rtt = chorus_now_ns() - t0;
    if (best < 0 || rtt < best) best = rtt;
  }
  const int64_t t0 = chorus_now_ns();
  CHECK(put(p, BULK));
  CHECK(take(p, WORD));
  int64_t moving = chorus_now_ns() - t0 - best;
  if (moving < 1000) moving = 1000;
  *us = (double)best / 2e3;
  *bw = (double)BULK / ((double)moving / 1e3);
  return ncclSuccess;
}

/* Rank b's side: the echoes. */
static ncclResult_t answer(probe *p) {
  for (int i = 0; i < ROUNDS; i++) {
    CHECK(take(p, WORD));
    CHECK(put(p, WORD));
  }
  CHECK(take(p, BULK));
  return put(p, WORD);
}

ncclResult_t chorus_netprobe_run(struct ncclComm *comm, double *us, double *bw) {
  const int set = chorus_netprobe_setting(us, bw);
  if (set != 0) return set > 0 ? ncclSuccess : ncclInvalidUsage;
  const chorus_topo *t = &comm->topo;
  int b = -1;
  for (int r = 1; r < comm->nranks && b < 0; r++)
    if (t->host_of[r] != t->host_of[0]) b = r;
  double mine[2] = {0, 0};
  if (b >= 0 && (comm->rank == 0 || comm->rank == b)) {
    probe p = {comm, comm->rank == 0 ? b : 0, NULL, NULL, 0};
    p.tx = chorus_cc_conn(&comm->cc, p.peer, CHORUS_CH_P2P, CHORUS_DIR_SEND);
    p.rx = chorus_cc_conn(&comm->cc, p.peer, CHORUS_CH_P2P, CHORUS_DIR_RECV);
    p.deadline = chorus_now_ns() + chorus_param_int(CHORUS_P_BOOTSTRAP_TIMEOUT) * 1000000000ll;
    if (!p.tx || !p.rx)
      return chorus_error(ncclInternalError, "rank %d: no connection to rank %d to measure",
                          comm->rank, p.peer);
    CHECK(comm->rank == 0 ? measure(&p, &mine[0], &mine[1]) : answer(&p));
  }
  double *all = chorus_calloc((size_t)comm->nranks * 2, sizeof *all);
  if (!all) return chorus_error(ncclSystemError, "out of memory measuring the network");
  all[2 * (size_t)comm->rank] = mine[0];
  all[2 * (size_t)comm->rank + 1] = mine[1];
  ncclResult_t res = chorus_bootstrap_allgather(comm->bs, all, 2 * sizeof *all);
  *us = all[0];
  *bw = all[1];
  chorus_free(all);
  if (res == ncclSuccess && comm->rank == 0)
    INFO(CHORUS_INIT | CHORUS_TUNING | CHORUS_NET,
         "network probe, rank 0 to rank %d (another host): %.1f us one way, %.2f GB/s; the cost "
         "model prices hops across hosts so (CHORUS_NET sets them)",
         b, *us, *bw / 1e3);
  return res;
}
