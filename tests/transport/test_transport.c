/*
 * test_transport.c - one conformance suite for every transport (shared
 * memory, TCP), written against the contract in transport/transport.h:
 *   - ordered delivery of messages of 0, 1, odd and full-slot sizes, with
 *     their metadata, many times around the slot ring;
 *   - a sender that runs ahead is held back (ncclInProgress), never loses or
 *     overwrites data;
 *   - channels are independent: a full channel does not block another;
 *   - fail() on one side surfaces as ncclRemoteError with the reason, as
 *     given (relayed), on the other side;
 *   - post_call() on one side shows on the other's collective receive
 *     connection (heard) after hear(), in call order, and a later post of
 *     the same board slot replaces an earlier one; a note followed by a
 *     message of its call shows once the message is read (TCP: it travels
 *     with the message, the notes socket carries no frame for it); a
 *     backlog of 100 notes, read in pieces that cut one, reads back whole;
 *   - destroying with undelivered messages is clean;
 *   - TCP: a malformed frame on a notes socket fails the pair's connection
 *     with ncclRemoteError naming the peer, not silently;
 *   - shared memory: a peer process that posted and exited is lost only
 *     once its messages are read (exit_after_post);
 *   - where a transport sends from and receives into the caller's memory
 *     (send_post_ref, recv_expect): the bytes sent are those at post time,
 *     whatever the caller writes after the flush; a message lands in its
 *     place only if it arrives after being expected there and matches in
 *     size and call, else in a slot with the place untouched.
 * `test_transport pnet` runs the suite over a network plugin instead.
 * Ranks are threads; every wait is bounded.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transport/net/net_impl.h"
#include "transport/plugin/ext_net.h"
#include "transport/plugin/netplug.h"
#include "transport/transport.h"
#include "unit.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/log.h"

#define SLOT   4096
#define NSLOTS 4

typedef struct {
  const chorus_transport *t;
  chorus_uid uid;
  int rank, nranks;
  int nstreams;
  int nthreads; /* NET: pump threads */
  int garbage;  /* run garbage_notes alone */
  int failures;
  int on_hint; /* NET: the pumps move only while hinted to; stream() flips the hint */
} rank_arg;

#define FAILIF(cond, ...)                                                                          \
  do {                                                                                             \
    if (cond) {                                                                                    \
      fprintf(stderr, "rank %d line %d: ", a->rank, __LINE__);                                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      a->failures++;                                                                               \
    }                                                                                              \
  } while (0)

/* Calls f until it stops returning ncclInProgress (bounded: 10 s). */
#define RETRY(res, state, t, f)                                                                    \
  do {                                                                                             \
    int64_t dl_ = chorus_now_ns() + 10000000000ll;                                                 \
    while (((res) = (f)) == ncclInProgress && !chorus_expired(dl_)) (t)->progress(state);          \
  } while (0)

static size_t msg_size(int i) {
  static const size_t sizes[] = {0, 1, 7, 100, SLOT - 1, SLOT};
  return sizes[i % 6];
}

static unsigned char pattern(int from, int i, size_t k) {
  return (unsigned char)(from * 31 + i * 7 + (int)k);
}

/* Each rank streams nmsg messages to every peer on channel ch and checks
 * what it receives from every peer; sends and receives interleave so the
 * FIFOs fill up and drain many times. */
static void stream(rank_arg *a, void *st, int ch, int nmsg) {
  const chorus_transport *t = a->t;
  int n = a->nranks;
  int *sent = calloc((size_t)n, sizeof(int)), *got = calloc((size_t)n, sizeof(int));
  int64_t dl = chorus_now_ns() + 20000000000ll;
  int done = 0;
  for (unsigned pass = 0; !done && !chorus_expired(dl); pass++) {
    done = 1;
    if (a->on_hint && t->hint) t->hint(st, (int)(pass / 3 % 2));
    for (int p = 0; p < n; p++) {
      chorus_conn *sc = t->conn(st, p, ch, CHORUS_DIR_SEND);
      chorus_conn *rc = t->conn(st, p, ch, CHORUS_DIR_RECV);
      if (!sc || !rc) continue;
      if (sent[p] < nmsg) {
        done = 0;
        void *buf;
        size_t cap;
        ncclResult_t r = sc->ops->send_slot(sc, &buf, &cap);
        if (r == ncclSuccess) {
          FAILIF(cap < SLOT, "slot capacity %zu", cap);
          size_t sz = msg_size(sent[p]);
          for (size_t k = 0; k < sz; k++) ((unsigned char *)buf)[k] = pattern(a->rank, sent[p], k);
          chorus_msg_meta m = {(uint64_t)sent[p], sz, (uint32_t)ch, 5, a->rank, 0};
          FAILIF(sc->ops->send_post(sc, sz, &m) != ncclSuccess, "post");
          sent[p]++;
        } else {
          FAILIF(r != ncclInProgress, "send_slot returned %d", (int)r);
        }
      }
      if (got[p] < nmsg) {
        done = 0;
        const void *buf;
        size_t sz;
        chorus_msg_meta m;
        ncclResult_t r = rc->ops->recv_slot(rc, &buf, &sz, &m);
        if (r == ncclSuccess) {
          FAILIF(sz != msg_size(got[p]), "from %d msg %d: size %zu", p, got[p], sz);
          FAILIF(m.seq != (uint64_t)got[p] || m.root != p || m.call != (uint32_t)ch,
                 "from %d: meta seq %llu root %d", p, (unsigned long long)m.seq, m.root);
          for (size_t k = 0; k < sz; k++)
            if (((const unsigned char *)buf)[k] != pattern(p, got[p], k)) {
              FAILIF(1, "from %d msg %d byte %zu corrupt", p, got[p], k);
              break;
            }
          FAILIF(rc->ops->recv_release(rc) != ncclSuccess, "release");
          got[p]++;
        } else {
          FAILIF(r != ncclInProgress, "recv_slot returned %d", (int)r);
        }
      }
    }
    t->progress(st);
  }
  for (int p = 0; p < n; p++) {
    chorus_conn *sc = t->conn(st, p, ch, CHORUS_DIR_SEND);
    if (!sc) continue;
    ncclResult_t r;
    RETRY(r, st, t, sc->ops->send_flush(sc));
    FAILIF(r != ncclSuccess, "flush to %d: %d", p, (int)r);
  }
  FAILIF(!done, "streaming did not finish in time");
  free(sent);
  free(got);
}

/* Rank 0 fills channel 1 towards rank 1 (which does not read it), then
 * channel 0 must still deliver. */
static void channels_independent(rank_arg *a, chorus_bootstrap *bs, void *st) {
  const chorus_transport *t = a->t;
  if (a->rank == 0) {
    chorus_conn *c1 = t->conn(st, 1, CHORUS_CH_P2P, CHORUS_DIR_SEND);
    chorus_msg_meta m = {0, 0, 0, 0, 0, 0};
    int posted = 0;
    for (int i = 0; i < 64; i++) {
      void *buf;
      size_t cap;
      if (c1->ops->send_slot(c1, &buf, &cap) != ncclSuccess) {
        t->progress(st);
        continue;
      }
      c1->ops->send_post(c1, SLOT, &m);
      posted++;
    }
    FAILIF(posted < NSLOTS, "only %d messages fit", posted);
    chorus_conn *c0 = t->conn(st, 1, CHORUS_CH_COLL, CHORUS_DIR_SEND);
    void *buf;
    size_t cap;
    ncclResult_t r;
    RETRY(r, st, t, c0->ops->send_slot(c0, &buf, &cap));
    FAILIF(r != ncclSuccess, "channel 0 blocked by channel 1");
    if (r == ncclSuccess) {
      memcpy(buf, "ping", 4);
      c0->ops->send_post(c0, 4, &m);
      RETRY(r, st, t, c0->ops->send_flush(c0));
    }
  } else if (a->rank == 1) {
    chorus_conn *c0 = t->conn(st, 0, CHORUS_CH_COLL, CHORUS_DIR_RECV);
    const void *buf;
    size_t sz;
    chorus_msg_meta m;
    ncclResult_t r;
    RETRY(r, st, t, c0->ops->recv_slot(c0, &buf, &sz, &m));
    FAILIF(r != ncclSuccess || sz != 4 || memcmp(buf, "ping", 4), "ping not received");
    if (r == ncclSuccess) c0->ops->recv_release(c0);
  }
  chorus_bootstrap_barrier(bs);
}

/* Rank 1 fails its connections to rank 0; rank 0 sees ncclRemoteError with
 * the reason on receive (and TCP or SHM alike do not hang). */
static void failure_propagates(rank_arg *a, chorus_bootstrap *bs, void *st) {
  const chorus_transport *t = a->t;
  if (a->rank == 1) {
    for (int d = 0; d < 2; d++) {
      chorus_conn *c = t->conn(st, 0, CHORUS_CH_COLL, d);
      c->ops->fail(c, "conformance test failure");
    }
  }
  chorus_bootstrap_barrier(bs);
  if (a->rank == 0) {
    chorus_conn *c = t->conn(st, 1, CHORUS_CH_COLL, CHORUS_DIR_RECV);
    const void *buf;
    size_t sz;
    chorus_msg_meta m;
    ncclResult_t r;
    RETRY(r, st, t, c->ops->recv_slot(c, &buf, &sz, &m));
    FAILIF(r != ncclRemoteError, "recv after peer failure returned %d", (int)r);
    FAILIF(strcmp(c->err, "conformance test failure") != 0 || !c->relayed,
           "reason not passed on as given: \"%s\" (relayed %d)", c->err, c->relayed);
    FAILIF(c->ops->check(c) != ncclRemoteError, "check() did not report the failure");
  }
}

/* Every rank posts calls 0..N-1 (a board entry each); every other rank
 * must then read each peer's last CHORUS_NODE_CALLS of them, as posted,
 * through its connection's heard entries: those CHORUS_CALLS_HELD calls
 * old at once, the younger ones once the poster stalls (TCP holds them
 * back until then where a rank has more than one peer, which the peers
 * must see). */
static void board_posts(rank_arg *a, chorus_bootstrap *bs, void *st) {
  const chorus_transport *t = a->t;
  enum { N = CHORUS_NODE_CALLS + 40 };
  for (uint64_t k = 0; k < N; k++) {
    chorus_call_entry e;
    memset(&e, 0, sizeof e);
    e.posted = k + 1;
    e.chain = k * 1000 + (uint64_t)a->rank;
    e.meta.seq = k;
    e.meta.count = k + 7;
    e.meta.root = a->rank;
    t->post_call(st, &e);
    t->progress(st);
  }
  chorus_bootstrap_barrier(bs);
  for (int q = 0; q < a->nranks; q++) {
    if (q == a->rank) continue;
    chorus_conn *c = t->conn(st, q, CHORUS_CH_COLL, CHORUS_DIR_RECV);
    if (!c || !c->heard) continue;
    const chorus_call_entry *old = &c->heard[(N - 1 - CHORUS_CALLS_HELD) % CHORUS_NODE_CALLS];
    const chorus_call_entry *last = &c->heard[(N - 1) % CHORUS_NODE_CALLS];
    int64_t dl = chorus_now_ns() + 10000000000ll;
    while (__atomic_load_n(&old->posted, __ATOMIC_ACQUIRE) != N - CHORUS_CALLS_HELD &&
           !chorus_expired(dl)) {
      t->progress(st);
      FAILIF(c->ops->hear(c) != ncclSuccess, "hear() failed: %s", c->err);
    }
    FAILIF(old->posted != N - CHORUS_CALLS_HELD,
           "rank %d's post of call %d, %d calls old, "
           "did not arrive before it stalled",
           q, N - 1 - CHORUS_CALLS_HELD, CHORUS_CALLS_HELD);
    if (t->stalled) {
      /* Transports that hold notes: with more than one peer the youngest
       * stay back (20 ms to show it); with one they go at once. */
      const int held = a->nranks > 2;
      dl = chorus_now_ns() + (held ? 20000000ll : 10000000000ll);
      while (!chorus_expired(dl) && (held || last->posted != N)) {
        t->progress(st);
        FAILIF(c->ops->hear(c) != ncclSuccess, "hear() failed: %s", c->err);
      }
      FAILIF(held && last->posted == N, "rank %d's post of its newest call came before it stalled",
             q);
      FAILIF(!held && last->posted != N, "rank %d, the only peer, held its newest post back", q);
    }
  }
  chorus_bootstrap_barrier(bs);
  if (t->stalled) t->stalled(st); /* as a rank that waits: the held ones go */
  t->progress(st);
  for (int q = 0; q < a->nranks; q++) {
    if (q == a->rank) continue;
    chorus_conn *c = t->conn(st, q, CHORUS_CH_COLL, CHORUS_DIR_RECV);
    FAILIF(!c || !c->heard, "no board for rank %d", q);
    if (!c || !c->heard) continue;
    const chorus_call_entry *last = &c->heard[(N - 1) % CHORUS_NODE_CALLS];
    int64_t dl = chorus_now_ns() + 10000000000ll;
    while (__atomic_load_n(&last->posted, __ATOMIC_ACQUIRE) != N && !chorus_expired(dl)) {
      t->progress(st);
      FAILIF(c->ops->hear(c) != ncclSuccess, "hear() failed: %s", c->err);
    }
    for (uint64_t k = N - CHORUS_NODE_CALLS; k < N; k++) {
      const chorus_call_entry *e = &c->heard[k % CHORUS_NODE_CALLS];
      FAILIF(e->posted != k + 1 || e->chain != k * 1000 + (uint64_t)q || e->meta.seq != k ||
                 e->meta.count != k + 7 || e->meta.root != q,
             "rank %d's post of call %llu reads back as posted %llu chain %llu", q,
             (unsigned long long)k, (unsigned long long)e->posted, (unsigned long long)e->chain);
    }
  }
  chorus_bootstrap_barrier(bs);
}

/* Rank 0 posts call K's note and then a message of call K to rank 1,
 * then call K + 1's note and a message of another call. Rank 1's board
 * must show both calls once it has read the messages and heard (the
 * first note may travel with its call's message: TCP's DATA_NOTE, which
 * leaves the notes socket only the second note). */
static void note_with_data(rank_arg *a, chorus_bootstrap *bs, void *st) {
  const chorus_transport *t = a->t;
  enum { K = 100000 };
  if (a->rank == 0) {
    chorus_conn *c = t->conn(st, 1, CHORUS_CH_COLL, CHORUS_DIR_SEND);
    for (int j = 0; j < 2; j++) {
      chorus_call_entry e;
      memset(&e, 0, sizeof e);
      e.posted = K + j + 1;
      e.chain = 777 + (uint64_t)j;
      e.meta.seq = K + (uint64_t)j;
      e.meta.count = 5;
      t->post_call(st, &e);
      chorus_msg_meta m = e.meta;
      if (j == 1) m.seq = K + 50;
      void *buf;
      size_t cap;
      ncclResult_t r;
      RETRY(r, st, t, c->ops->send_slot(c, &buf, &cap));
      FAILIF(r != ncclSuccess, "send_slot: %d", (int)r);
      if (r != ncclSuccess) continue;
      memcpy(buf, "note", 4);
      FAILIF(c->ops->send_post(c, 4, &m) != ncclSuccess, "post");
      RETRY(r, st, t, c->ops->send_flush(c));
      t->progress(st);
    }
    if (t->stalled) t->stalled(st); /* call K + 1's note goes now (TCP holds it back) */
    t->progress(st);
  }
  chorus_bootstrap_barrier(bs);
  if (a->rank != 1) {
    chorus_bootstrap_barrier(bs);
    return;
  }
  chorus_conn *c = t->conn(st, 0, CHORUS_CH_COLL, CHORUS_DIR_RECV);
  const int fd = t == &chorus_transport_net ? chorus_net_notes_fd(st, 0) : -1;
  if (fd >= 0) { /* what the notes socket holds, once it stops growing */
    int have = 0, was = -1;
    for (int i = 0; i < 100 && (have == 0 || have != was); i++) {
      was = have;
      usleep(10000);
      FAILIF(ioctl(fd, FIONREAD, &have) != 0, "FIONREAD");
    }
    FAILIF(have != (int)sizeof(net_wire_hdr),
           "the notes socket holds %d bytes, not one note's %zu: call %d's note did not "
           "travel with its message",
           have, sizeof(net_wire_hdr), K);
  }
  for (int j = 0; j < 2; j++) {
    const void *buf;
    size_t sz;
    chorus_msg_meta m;
    ncclResult_t r;
    RETRY(r, st, t, c->ops->recv_slot(c, &buf, &sz, &m));
    FAILIF(r != ncclSuccess || sz != 4 || memcmp(buf, "note", 4) != 0 ||
               m.seq != (j ? K + 50u : K + 0u),
           "message %d not received as sent", j);
    if (r == ncclSuccess) c->ops->recv_release(c);
    const chorus_call_entry *e = &c->heard[(K + j) % CHORUS_NODE_CALLS];
    const int64_t dl = chorus_now_ns() + 10000000000ll;
    while (__atomic_load_n(&e->posted, __ATOMIC_ACQUIRE) != (uint64_t)(K + j + 1) &&
           !chorus_expired(dl)) {
      t->progress(st);
      FAILIF(c->ops->hear(c) != ncclSuccess, "hear() failed: %s", c->err);
    }
    FAILIF(e->posted != (uint64_t)(K + j + 1) || e->chain != 777u + (uint64_t)j ||
               e->meta.seq != (uint64_t)(K + j) || e->meta.count != 5,
           "call %d's note reads back as posted %llu chain %llu", K + j,
           (unsigned long long)e->posted, (unsigned long long)e->chain);
  }
  chorus_bootstrap_barrier(bs);
}

/* Rank 0 posts 100 calls' notes and no data; rank 1 waits until its
 * notes socket holds them all (5600 bytes over TCP: a note is cut between
 * two reads of the socket) and then hears. Every call must read back from
 * its board as posted. */
static void notes_backlog(rank_arg *a, chorus_bootstrap *bs, void *st) {
  const chorus_transport *t = a->t;
  enum { K = 200000, N = 100 };
  if (a->rank == 0) {
    for (int j = 0; j < N; j++) {
      chorus_call_entry e;
      memset(&e, 0, sizeof e);
      e.posted = K + j + 1;
      e.chain = 5000 + (uint64_t)j;
      e.meta.seq = K + (uint64_t)j;
      e.meta.count = 3 + (uint64_t)j;
      t->post_call(st, &e);
    }
    if (t->stalled) t->stalled(st); /* held notes go now */
    t->progress(st);
  }
  chorus_bootstrap_barrier(bs);
  if (a->rank == 1) {
    chorus_conn *c = t->conn(st, 0, CHORUS_CH_COLL, CHORUS_DIR_RECV);
    const int fd = t == &chorus_transport_net ? chorus_net_notes_fd(st, 0) : -1;
    int have = 0;
    for (int i = 0; fd >= 0 && i < 500 && have < N * (int)sizeof(net_wire_hdr); i++) {
      usleep(10000);
      FAILIF(ioctl(fd, FIONREAD, &have) != 0, "FIONREAD");
    }
    const chorus_call_entry *last = &c->heard[(K + N - 1) % CHORUS_NODE_CALLS];
    const int64_t dl = chorus_now_ns() + 10000000000ll;
    while (__atomic_load_n(&last->posted, __ATOMIC_ACQUIRE) != (uint64_t)(K + N) &&
           !chorus_expired(dl)) {
      t->progress(st);
      FAILIF(c->ops->hear(c) != ncclSuccess, "hear() failed: %s", c->err);
    }
    for (int j = 0; j < N; j++) {
      const chorus_call_entry *e = &c->heard[(K + j) % CHORUS_NODE_CALLS];
      FAILIF(e->posted != (uint64_t)(K + j + 1) || e->chain != 5000u + (uint64_t)j ||
                 e->meta.seq != (uint64_t)(K + j) || e->meta.count != 3u + (uint64_t)j,
             "call %d of a backlog of %d notes reads back as posted %llu chain %llu", K + j, N,
             (unsigned long long)e->posted, (unsigned long long)e->chain);
    }
  }
  chorus_bootstrap_barrier(bs);
}

/* Rank 1 writes bytes no rank sends on its notes socket to rank 0; rank
 * 0's hear() must fail the connection naming rank 1 (not relayed: rank 1
 * said no such thing). */
static void garbage_notes(rank_arg *a, chorus_bootstrap *bs, void *st) {
  const chorus_transport *t = a->t;
  if (a->rank == 1) {
    unsigned char junk[64];
    memset(junk, 0xab, sizeof junk);
    const int fd = chorus_net_notes_fd(st, 0);
    FAILIF(fd < 0, "no notes socket to rank 0");
    FAILIF(fd >= 0 && send(fd, junk, sizeof junk, MSG_NOSIGNAL) != (ssize_t)sizeof junk,
           "could not write the junk");
  }
  chorus_bootstrap_barrier(bs);
  if (a->rank == 0) {
    chorus_conn *c = t->conn(st, 1, CHORUS_CH_COLL, CHORUS_DIR_RECV);
    ncclResult_t r = ncclSuccess;
    const int64_t dl = chorus_now_ns() + 10000000000ll;
    while ((r = c->ops->hear(c)) == ncclSuccess && !chorus_expired(dl)) t->progress(st);
    FAILIF(r != ncclRemoteError, "hear() after junk returned %d", (int)r);
    FAILIF(!strstr(c->err, "rank 1") || !strstr(c->err, "malformed") || c->relayed,
           "junk reported as \"%s\" (relayed %d)", c->err, c->relayed);
  }
  chorus_bootstrap_barrier(bs);
}

/* Message i of direct_places: its size, and how rank 1 expects it. */
enum { EXPECT_EXACT, EXPECT_BIGGER, EXPECT_OTHER_CALL, EXPECT_NONE, EXPECT_KINDS };

static size_t direct_size(int i) {
  return i % 3 == 0 ? SLOT : i % 3 == 1 ? 7 : 1000;
}

/* Rank 0 sends rank 1 messages by reference; rank 1 expects them in
 * places of its own, in rounds of NSLOTS: first too late (they have
 * arrived), then ahead of time (a barrier orders it), every kind of
 * expectation in turn. */
static void direct_places(rank_arg *a, chorus_bootstrap *bs, void *st) {
  const chorus_transport *t = a->t;
  enum { ROUNDS = 6, N = ROUNDS * NSLOTS };
  unsigned char *src = calloc(NSLOTS, SLOT), *place = calloc(NSLOTS, SLOT + 64);
  for (int r = 0; r < ROUNDS; r++) {
    const int late = r == 0;
    if (a->rank == 1 && !late) { /* expect the round's messages before they are sent */
      chorus_conn *c = t->conn(st, 0, CHORUS_CH_COLL, CHORUS_DIR_RECV);
      memset(place, 0x5a, (size_t)NSLOTS * (SLOT + 64));
      for (int j = 0; j < NSLOTS; j++) {
        const int i = r * NSLOTS + j, kind = i % EXPECT_KINDS;
        if (kind == EXPECT_NONE) continue;
        chorus_msg_meta m = {
            (uint64_t)i + (kind == EXPECT_OTHER_CALL ? 1000 : 0), direct_size(i), 7, 0, 0, 0};
        const size_t want = direct_size(i) + (kind == EXPECT_BIGGER ? 1 : 0);
        FAILIF(c->ops->recv_expect(c, (unsigned)j, place + (size_t)j * (SLOT + 64), want, &m) != 1,
               "expecting message %d %d ahead refused", i, j);
      }
      FAILIF(c->ops->recv_expect(c, NSLOTS, place, SLOT, &(chorus_msg_meta){0}) != 0,
             "expecting a message beyond the slots accepted");
    }
    chorus_bootstrap_barrier(bs);
    if (a->rank == 0) {
      chorus_conn *c = t->conn(st, 1, CHORUS_CH_COLL, CHORUS_DIR_SEND);
      for (int j = 0; j < NSLOTS; j++) {
        const int i = r * NSLOTS + j;
        unsigned char *from = src + (size_t)j * SLOT;
        for (size_t k = 0; k < direct_size(i); k++) from[k] = pattern(0, i, k);
        void *slot;
        size_t cap;
        ncclResult_t res;
        RETRY(res, st, t, c->ops->send_slot(c, &slot, &cap));
        FAILIF(res != ncclSuccess, "send_slot: %d", (int)res);
        memset(slot, 0xee, cap); /* the slot's own bytes must not be what goes */
        chorus_msg_meta m = {(uint64_t)i, direct_size(i), 7, 0, 0, 0};
        res = c->ops->send_post_ref(c, from, direct_size(i), &m);
        FAILIF(res != ncclSuccess && res != ncclInProgress, "send_post_ref: %d", (int)res);
      }
      ncclResult_t res;
      RETRY(res, st, t, c->ops->send_flush(c));
      FAILIF(res != ncclSuccess, "flush: %d", (int)res);
      memset(src, 0xdd, (size_t)NSLOTS * SLOT); /* after the flush: free to change */
    }
    chorus_bootstrap_barrier(bs);
    if (a->rank == 1) {
      chorus_conn *c = t->conn(st, 0, CHORUS_CH_COLL, CHORUS_DIR_RECV);
      for (int j = 0; j < NSLOTS; j++) {
        const int i = r * NSLOTS + j, kind = i % EXPECT_KINDS;
        unsigned char *mine = place + (size_t)j * (SLOT + 64);
        const void *buf;
        size_t sz;
        chorus_msg_meta m;
        ncclResult_t res;
        RETRY(res, st, t, c->ops->recv_slot(c, &buf, &sz, &m));
        FAILIF(res != ncclSuccess, "recv_slot: %d", (int)res);
        if (res != ncclSuccess) break;
        if (late && j == 0) { /* all of the round is in: expect the rest now, too late */
          struct timespec ts = {0, 5000000};
          nanosleep(&ts, NULL);
          FAILIF(c->ops->hear(c) != ncclSuccess, "hear: %s", c->err); /* takes in what came */
          memset(place, 0x5a, (size_t)NSLOTS * (SLOT + 64));
          for (int q = 1; q < NSLOTS; q++) {
            chorus_msg_meta e = {(uint64_t)(i + q), direct_size(i + q), 7, 0, 0, 0};
            c->ops->recv_expect(c, (unsigned)q, place + (size_t)q * (SLOT + 64), direct_size(i + q),
                                &e);
          }
        }
        FAILIF(sz != direct_size(i) || m.seq != (uint64_t)i, "message %d: %zu bytes, seq %llu", i,
               sz, (unsigned long long)m.seq);
        for (size_t k = 0; k < sz; k++)
          if (((const unsigned char *)buf)[k] != pattern(0, i, k)) {
            FAILIF(1, "message %d byte %zu is %#x", i, k, ((const unsigned char *)buf)[k]);
            break;
          }
        const int placed = !late && kind == EXPECT_EXACT;
        FAILIF(placed != (buf == mine), "message %d (kind %d%s) %s its place", i, kind,
               late ? ", expected late" : "", buf == mine ? "landed in" : "missed");
        if (!placed)
          for (size_t k = 0; k < SLOT + 64; k++)
            if (mine[k] != 0x5a) {
              FAILIF(1, "message %d wrote its place at byte %zu", i, k);
              break;
            }
        FAILIF(c->ops->recv_release(c) != ncclSuccess, "release");
      }
    }
    chorus_bootstrap_barrier(bs);
  }
  free(src);
  free(place);
}

/* A network that takes GPU memory (dev_mem): ranks 0 and 1 move ranges
 * past the messages, each all of it to the other's matching call, sizes
 * from 1 byte to several of the plugin's pieces. The test plugin stands in
 * host memory for the GPU's (LOOP_CUDA=host). */
static void dev_moves(rank_arg *a, chorus_bootstrap *bs, void *st) {
  const chorus_transport *t = a->t;
  static const size_t sizes[] = {1, 4096, 3 * SLOT + 5, (size_t)3 << 20};
  const int peer = 1 - a->rank;
  chorus_conn *snd = t->conn(st, peer, CHORUS_CH_P2P, CHORUS_DIR_SEND);
  chorus_conn *rcv = t->conn(st, peer, CHORUS_CH_P2P, CHORUS_DIR_RECV);
  FAILIF(!snd->dev_mem || !rcv->dev_mem, "point-to-point connections take no device memory");
  if (!snd->dev_mem || !rcv->dev_mem) return;
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
    const size_t n = sizes[z];
    unsigned char *out = malloc(n), *in = malloc(n);
    for (size_t k = 0; k < n; k++) out[k] = pattern(a->rank, (int)z, k);
    memset(in, 0x5a, n);
    ncclResult_t res;
    if (a->rank == 0) { /* 0 sends first, then receives; 1 the other way */
      RETRY(res, st, t, snd->ops->dev_move(snd, out, n));
      FAILIF(res != ncclSuccess, "dev_move of %zu bytes out: %d %s", n, (int)res, snd->err);
      RETRY(res, st, t, rcv->ops->dev_move(rcv, in, n));
    } else {
      RETRY(res, st, t, rcv->ops->dev_move(rcv, in, n));
      FAILIF(res != ncclSuccess, "dev_move of %zu bytes in: %d %s", n, (int)res, rcv->err);
      RETRY(res, st, t, snd->ops->dev_move(snd, out, n));
    }
    FAILIF(res != ncclSuccess, "dev_move of %zu bytes: %d", n, (int)res);
    for (size_t k = 0; k < n; k++)
      if (in[k] != pattern(peer, (int)z, k)) {
        FAILIF(1, "moved %zu bytes: byte %zu is %#x", n, k, in[k]);
        break;
      }
    free(out);
    free(in);
  }
  chorus_bootstrap_barrier(bs);
}

static void *rank_main(void *p) {
  rank_arg *a = p;
  chorus_log_ctx_set((chorus_log_ctx){a->rank, a->nranks, NULL, 0});
  chorus_bootstrap *bs = NULL;
  void *st = NULL;
  chorus_topo topo;
  memset(&topo, 0, sizeof topo);
  if (chorus_bootstrap_init(&bs, &a->uid, 1, a->nranks, a->rank, NULL) != ncclSuccess) {
    a->failures++;
    return NULL;
  }
  chorus_rank_info *info = chorus_calloc((size_t)a->nranks, sizeof *info);
  chorus_topo_self(&info[a->rank], a->rank, -1);
  chorus_bootstrap_allgather(bs, info, sizeof *info);
  chorus_topo_build(&topo, info, a->nranks, a->rank);
  int peers[8], np = 0;
  for (int q = 0; q < a->nranks; q++)
    if (q != a->rank || a->t == &chorus_transport_shm) peers[np++] = q;
  chorus_transport_ctx ctx = {bs, &topo, a->rank,     a->nranks,   SLOT,       NSLOTS,
                              0,  0,     a->nstreams, a->nthreads, a->on_hint, NULL};
  /* The plugin transport takes a network over (NCCL_NET_PLUGIN names it). */
  if (a->t == &chorus_transport_pnet &&
      chorus_net_open(7, NCCL_NET_TRAFFIC_CLASS_UNDEF, NULL, &ctx.net) != ncclSuccess)
    a->failures++;
  if (a->t->setup(&ctx, peers, np, &st) != ncclSuccess || chorus_bootstrap_barrier(bs) ||
      a->t->finish(st) != ncclSuccess) {
    a->failures++;
  } else if (a->garbage) {
    garbage_notes(a, bs, st);
  } else {
    stream(a, st, CHORUS_CH_COLL, 200);
    stream(a, st, CHORUS_CH_P2P, 50);
    chorus_bootstrap_barrier(bs);
    if (a->nranks == 2 && a->t->conn(st, 1 - a->rank, 0, 0)->ops->recv_expect)
      direct_places(a, bs, st);
    if (a->nranks == 2 && getenv("LOOP_CUDA")) dev_moves(a, bs, st);
    if (a->nranks >= 2) {
      board_posts(a, bs, st);
      if (a->nranks == 2) note_with_data(a, bs, st);
      if (a->nranks == 2) notes_backlog(a, bs, st);
      channels_independent(a, bs, st);
      failure_propagates(a, bs, st);
    }
    chorus_bootstrap_barrier(bs);
  }
  a->t->destroy(st); /* rank 0 still holds unread channel-1 messages */
  chorus_topo_free(&topo);
  chorus_bootstrap_destroy(bs);
  return NULL;
}

static int run_hinted(const chorus_transport *t, int nranks, int nstreams, int nthreads,
                      int garbage, int on_hint) {
  rank_arg a[8];
  pthread_t th[8];
  chorus_uid uid;
  if (chorus_uid_create(&uid) != ncclSuccess) return 0;
  for (int r = 0; r < nranks; r++) {
    a[r] = (rank_arg){t, uid, r, nranks, nstreams, nthreads, garbage, 0, on_hint};
    pthread_create(&th[r], NULL, rank_main, &a[r]);
  }
  int failures = 0;
  for (int r = 0; r < nranks; r++) {
    pthread_join(th[r], NULL);
    failures += a[r].failures;
  }
  return failures == 0;
}

static int run_ex(const chorus_transport *t, int nranks, int nstreams, int nthreads, int garbage) {
  return run_hinted(t, nranks, nstreams, nthreads, garbage, 0);
}

static int run(const chorus_transport *t, int nranks, int nstreams) {
  return run_ex(t, nranks, nstreams, 0, 0);
}

static void shm_conformance(void) {
  for (int n = 1; n <= 4; n++) EXPECT(run(&chorus_transport_shm, n, 1));
}

static void net_conformance(void) {
  for (int n = 2; n <= 4; n++) EXPECT(run(&chorus_transport_net, n, 1));
  /* Several sockets per peer: messages alternate between streams. */
  EXPECT(run(&chorus_transport_net, 2, 3));
  EXPECT(run(&chorus_transport_net, 3, 8));
  EXPECT(run_ex(&chorus_transport_net, 2, 1, 0, 1));
  /* Pump threads move the streams (NCCL_SOCKET_NTHREADS): one each, two
   * per thread, one left over, and garbage met by a pump. */
  EXPECT(run_ex(&chorus_transport_net, 2, 1, 1, 0));
  EXPECT(run_ex(&chorus_transport_net, 2, 2, 2, 0));
  EXPECT(run_ex(&chorus_transport_net, 3, 4, 2, 0));
  EXPECT(run_ex(&chorus_transport_net, 4, 3, 2, 0));
  EXPECT(run_ex(&chorus_transport_net, 2, 2, 2, 1));
  /* Pumps that move only while the executor says so (NCCL_SOCKET_NTHREADS
   * =auto): the hint flips every few passes, mid-frame too. */
  EXPECT(run_hinted(&chorus_transport_net, 2, 2, 2, 0, 1));
  EXPECT(run_hinted(&chorus_transport_net, 3, 4, 2, 0, 1));
}

/* The same suite over a network plugin (test_transport pnet, with
 * NCCL_NET_PLUGIN set: CTest netplug.transport). */
static void pnet_conformance(void) {
  REQUIRE(getenv("NCCL_NET_PLUGIN") != NULL);
  for (int n = 2; n <= 4; n++) EXPECT(run(&chorus_transport_pnet, n, 1));
}

/* ---- a peer that posts and exits (shared memory) ------------------------------- */

/* Both processes of exit_after_post: 2 ranks over shared memory, from
 * rank 0's id. Returns the transport's state, or NULL. */
static void *shm_pair(const chorus_uid *uid, int rank, chorus_bootstrap **bs, chorus_topo *topo) {
  void *st = NULL;
  memset(topo, 0, sizeof *topo);
  if (chorus_bootstrap_init(bs, uid, 1, 2, rank, NULL) != ncclSuccess) return NULL;
  chorus_rank_info *info = chorus_calloc(2, sizeof *info); /* the topology takes it */
  if (!info) return NULL;
  chorus_topo_self(&info[rank], rank, -1);
  int peers[2] = {0, 1};
  chorus_transport_ctx ctx = {*bs, topo, rank, 2, SLOT, NSLOTS, 0, 0, 1, 0, 0, NULL};
  if (chorus_bootstrap_allgather(*bs, info, sizeof info[0]) != ncclSuccess ||
      chorus_topo_build(topo, info, 2, rank) != ncclSuccess ||
      chorus_transport_shm.setup(&ctx, peers, 2, &st) != ncclSuccess ||
      chorus_bootstrap_barrier(*bs) != ncclSuccess ||
      chorus_transport_shm.finish(st) != ncclSuccess)
    return NULL;
  return st;
}

/* Rank 1 of exit_after_post, in a process of its own (argv: the id in
 * hex): posts one message to rank 0, then ends and exits. */
static int exit_after_post_child(const char *hex) {
  chorus_uid uid;
  unsigned char *u = (unsigned char *)&uid;
  for (size_t i = 0; i < sizeof uid; i++)
    if (sscanf(hex + 2 * i, "%2hhx", &u[i]) != 1) return 2;
  chorus_bootstrap *bs = NULL;
  chorus_topo topo;
  void *st = shm_pair(&uid, 1, &bs, &topo);
  if (!st) return 1;
  chorus_conn *c = chorus_transport_shm.conn(st, 0, CHORUS_CH_P2P, CHORUS_DIR_SEND);
  void *buf;
  size_t cap;
  chorus_msg_meta m = {.seq = 7, .count = 100};
  ncclResult_t r;
  RETRY(r, st, &chorus_transport_shm, c->ops->send_slot(c, &buf, &cap));
  if (r != ncclSuccess || cap < 100) return 1;
  memset(buf, 0x5a, 100);
  if (c->ops->send_post(c, 100, &m) != ncclSuccess) return 1;
  RETRY(r, st, &chorus_transport_shm, c->ops->send_flush(c));
  chorus_bootstrap_barrier(bs); /* rank 0 has finished its setup too */
  chorus_transport_shm.destroy(st);
  chorus_topo_free(&topo);
  chorus_bootstrap_destroy(bs);
  return r == ncclSuccess ? 0 : 1;
}

/* A peer that posted its last message and exited is not lost while that
 * message is unread: check() passes, the message reads whole, and only
 * then does check() report the exit, naming the rank. The peer is a real
 * process (the suite's ranks are threads of one, whose exit nobody could
 * see), reaped before rank 0 looks. */
static void exit_after_post(void) {
  chorus_uid uid;
  REQUIRE(chorus_uid_create(&uid) == ncclSuccess);
  char hex[2 * sizeof uid + 1];
  for (size_t i = 0; i < sizeof uid; i++) sprintf(hex + 2 * i, "%02x", ((unsigned char *)&uid)[i]);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execl("/proc/self/exe", "test_transport", "exit-after-post", hex, (char *)NULL);
    _exit(127);
  }
  chorus_bootstrap *bs = NULL;
  chorus_topo topo;
  void *st = shm_pair(&uid, 0, &bs, &topo);
  EXPECT(st != NULL);
  if (st) EXPECT(chorus_bootstrap_barrier(bs) == ncclSuccess);
  int status = -1;
  for (int64_t dl = chorus_now_ns() + 10000000000ll; !chorus_expired(dl);) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  if (status == -1) { /* bounded: the child is ours, by pid */
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!st) return;
  chorus_conn *c = chorus_transport_shm.conn(st, 1, CHORUS_CH_P2P, CHORUS_DIR_RECV);
  EXPECT(c->ops->check(c) == ncclSuccess); /* exited, but its message waits */
  const void *buf = NULL;
  size_t n = 0;
  chorus_msg_meta m;
  ncclResult_t r;
  RETRY(r, st, &chorus_transport_shm, c->ops->recv_slot(c, &buf, &n, &m));
  EXPECT(r == ncclSuccess && n == 100 && m.seq == 7);
  if (r == ncclSuccess) {
    EXPECT(n == 100 && ((const unsigned char *)buf)[0] == 0x5a &&
           ((const unsigned char *)buf)[99] == 0x5a);
    EXPECT(c->ops->recv_release(c) == ncclSuccess);
  }
  EXPECT(c->ops->check(c) == ncclRemoteError); /* now it is lost */
  EXPECT(strstr(c->err, "rank 1") != NULL && strstr(c->err, "exited") != NULL);
  chorus_transport_shm.destroy(st);
  chorus_topo_free(&topo);
  chorus_bootstrap_destroy(bs);
}

static void nothing_leaks(void) {
  EXPECT_EQ_INT(chorus_alloc_blocks(CHORUS_MEM_SHM), 0);
}

int main(int argc, char **argv) {
  /* The pumps asked for, however few cores this machine has. */
  setenv("CHORUS_SOCKET_THREADS_FIT", "0", 1);
  if (argc == 3 && strcmp(argv[1], "exit-after-post") == 0) return exit_after_post_child(argv[2]);
  if (argc == 2 && strcmp(argv[1], "pnet") == 0) {
    RUN(pnet_conformance);
    return unit_report();
  }
  RUN(exit_after_post);
  RUN(shm_conformance);
  RUN(net_conformance);
  RUN(nothing_leaks);
  return unit_report();
}
