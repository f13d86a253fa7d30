/*
 * test_gpu_ce.c - the copy-engine programs (gpu/ce.h) run on host memory.
 *
 * A simulator keeps one queue per stream: the user's work before the
 * program (writing the data to send, scribbling over the receive
 * buffers), the program's steps (a copy; or a wait for what another
 * stream held when the step was queued, as an event recorded there), and
 * the user's work after it (reading what arrived). It then runs them in
 * random orders that streams allow: a stream's steps one at a time, a
 * copy started and finished as two events with anything in between. It
 * fails on a deadlock (steps left, none can run), on two copies in flight
 * at once where one writes what the other touches, on user work touching a
 * buffer a copy in flight writes, and on wrong bytes at the end.
 *
 * Afterwards each stream's user work writes over the buffers its rank
 * sent from, which must race no copy still reading them.
 *
 * Programs: random groups of Send/Recv (several ranks, one or two streams
 * each, several messages per pair, some in place, a few calls whose rule
 * chose the kernels) paired by chorus_plan_pair_p2p; random Broadcasts (1
 * to 8 ranks, any root, in place or not, chunks of any size), and two in a
 * row, the second sending what the first delivered; random AllGathers (in
 * place or not) and AlltoAlls. Which copies of a program may run at the
 * same time (a Broadcast's root copy beside the chain, an own block beside
 * the pulls). Which calls of a group go on the copy engine, as the planner
 * (plan/plan.h) decides: the default rules' sizes per function and GPU
 * count, CHORUS_TUNE and NCCL_ALGO over them, Send/Recv only in matched
 * pairs, and only whole collectives whose calls sit side by side.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ce.h"
#include "util/misc.h"
#include "plan_comm.h"
#include "unit.h"

#define MAXS     16   /* streams */
#define MAXITEMS 4096 /* per stream */

enum { COPY, WAIT, WRITE, CHECK };

typedef struct item {
  int kind;
  int of;       /* WAIT: the stream waited for */
  size_t after; /* WAIT: done when that stream finished this many items */
  void *dst;    /* COPY, WRITE: written; CHECK: read */
  const void *src;
  size_t bytes;
} item;

typedef struct sim {
  item q[MAXS][MAXITEMS];
  size_t n[MAXS], done[MAXS];
  unsigned char *snap[MAXS]; /* a started copy's bytes; NULL: none in flight */
  int nstreams;
  unsigned seed; /* the random walk's */
  unsigned id;   /* the world's */
  int quiet;     /* failures expected: say nothing */
  int failed;
} sim;

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 16) & 0x7fff;
}

/* A fresh simulator for world `seed`, its random stream in *s. */
static void world_begin(sim *m, unsigned seed, unsigned *s) {
  memset(m, 0, sizeof *m);
  m->seed = m->id = seed;
  *s = seed;
}

/* The same for a world of 1 to 8 ranks with a stream each: their number. */
static int world_of_ranks(sim *m, unsigned seed, unsigned *s) {
  world_begin(m, seed, s);
  m->nstreams = 1 + (int)(rnd(s) % CHORUS_KERN_MAX_RANKS);
  return m->nstreams;
}

static void add(sim *m, int s, item it) {
  if (m->n[s] < MAXITEMS)
    m->q[s][m->n[s]++] = it;
  else
    m->failed = 1; /* a world too large for the simulator */
}
/* The user's work on stream s: writing bytes into dst, or checking them. */
static void user_write(sim *m, int s, void *dst, const void *src, size_t bytes) {
  add(m, s, (item){WRITE, -1, 0, dst, src, bytes});
}
static void user_check(sim *m, int s, void *dst, const void *want, size_t bytes) {
  add(m, s, (item){CHECK, -1, 0, dst, want, bytes});
}
/* A program's steps, queued as the executor queues them. */
static void queue_program(sim *m, const chorus_gpu_ce_step *st, size_t n) {
  for (size_t k = 0; k < n; k++) {
    if (st[k].of < 0)
      add(m, st[k].on, (item){COPY, -1, 0, st[k].dst, st[k].src, st[k].bytes});
    else if (st[k].of != st[k].on)
      add(m, st[k].on, (item){WAIT, st[k].of, m->n[st[k].of], NULL, NULL, 0});
  }
}

/* Whether an item touching [p, p + len) (writing it when `writes`) meets a
 * copy in flight on another stream than s. */
static int races(const sim *m, int s, const void *p, size_t len, int writes) {
  for (int o = 0; o < m->nstreams; o++) {
    if (o == s || !m->snap[o]) continue;
    const item *c = &m->q[o][m->done[o]];
    if (chorus_ranges_meet(c->dst, c->bytes, p, len) ||
        (writes && chorus_ranges_meet(c->src, c->bytes, p, len)))
      return 1;
  }
  return 0;
}

/* Runs everything queued in a random order streams allow; 0 when it all
 * ran without a race, a deadlock or a wrong byte. */
static int run(sim *m) {
  for (;;) {
    int can[MAXS], nc = 0, left = 0;
    for (int s = 0; s < m->nstreams; s++) {
      if (m->done[s] == m->n[s]) continue;
      left = 1;
      const item *h = &m->q[s][m->done[s]];
      if (h->kind != WAIT || m->done[h->of] >= h->after) can[nc++] = s;
    }
    if (!left) return !m->failed;
    if (!nc) {
      if (!m->quiet) fprintf(stderr, "world %u: deadlock\n", m->id);
      return 0;
    }
    const int s = can[rnd(&m->seed) % (unsigned)nc];
    item *h = &m->q[s][m->done[s]];
    switch (h->kind) {
    case COPY:
      if (!m->snap[s]) { /* start: read the source now */
        if (races(m, s, h->dst, h->bytes, 1) || races(m, s, h->src, h->bytes, 0)) {
          if (!m->quiet) fprintf(stderr, "world %u: copies race\n", m->id);
          m->failed = 1;
        }
        m->snap[s] = malloc(h->bytes + 1);
        memcpy(m->snap[s], h->src, h->bytes);
        continue;
      }
      memcpy(h->dst, m->snap[s], h->bytes); /* finish */
      free(m->snap[s]);
      m->snap[s] = NULL;
      break;
    case WRITE:
    case CHECK:
      if (races(m, s, h->dst, h->bytes, h->kind == WRITE)) {
        if (!m->quiet) fprintf(stderr, "world %u: user work races a copy\n", m->id);
        m->failed = 1;
      }
      if (h->kind == WRITE)
        memcpy(h->dst, h->src, h->bytes);
      else if (memcmp(h->dst, h->src, h->bytes) != 0) {
        if (!m->quiet) fprintf(stderr, "world %u: wrong bytes\n", m->id);
        m->failed = 1;
      }
      break;
    default:
      break;
    }
    m->done[s]++;
  }
}

static unsigned char *pattern(size_t bytes, unsigned tag) {
  unsigned char *p = malloc(bytes + 1);
  for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(tag * 131u + i * 7u + (i >> 8));
  return p;
}

/* Which Send/Recv pairs the copy engine may take: matched as NCCL pairs
 * them, of one size, both ends wanting it (their rules chose it), of
 * candidate communicators, and with buffers no other transfer of the group
 * reads or writes. */
static void ce_pairs(void) {
  static char a[4096], b[4096], x[4096], y[4096];
  long pair[8];
  /* rank 0 sends a to 1 and receives y from 1; rank 1 the other way
   * (key, rank, peer, send, want, bytes, buf) */
  chorus_plan_p2p c[4] = {{7, 0, 1, 1, 1, 1000, a},
                          {7, 0, 1, 0, 1, 1000, y},
                          {7, 1, 0, 0, 1, 1000, b},
                          {7, 1, 0, 1, 1, 1000, x}};
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 2);
  EXPECT_EQ_INT(pair[0], 2);
  EXPECT_EQ_INT(pair[2], 0);
  EXPECT_EQ_INT(pair[1], 3);
  EXPECT_EQ_INT(pair[3], 1);
  /* no call wants the copy engine: none pairs */
  for (int i = 0; i < 4; i++) c[i].want = 0;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 0);
  EXPECT_EQ_INT(pair[0], -1);
  /* one end wanting is not enough: the Send 0->1 wants, its Recv does
   * not; the Recv of 1->0 wants, its Send does not */
  c[0].want = c[1].want = 1;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 0);
  for (int i = 0; i < 4; i++) EXPECT_EQ_INT(pair[i], -1);
  /* the pair whose two ends want goes, the other stays */
  c[2].want = 1;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 1);
  EXPECT_EQ_INT(pair[0], 2);
  EXPECT_EQ_INT(pair[2], 0);
  EXPECT_EQ_INT(pair[1], -1);
  EXPECT_EQ_INT(pair[3], -1);
  c[3].want = 1;
  /* sizes that differ are left to the kernels, which report them */
  c[2].bytes = 999;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 1);
  EXPECT_EQ_INT(pair[0], -1);
  EXPECT_EQ_INT(pair[2], -1);
  EXPECT_EQ_INT(pair[3], 1);
  c[2].bytes = 1000;
  /* another communicator's calls do not pair */
  c[2].key = 8;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 1);
  EXPECT_EQ_INT(pair[0], -1);
  c[2].key = 0;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 1);
  EXPECT_EQ_INT(pair[0], -1);
  c[2].key = 7;
  /* an in-place swap (each receives into the buffer it sends) races */
  c[1].buf = a;
  c[2].buf = x;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 0);
  /* a receive into part of another send's buffer too, only that pair */
  c[1].buf = y;
  c[2].buf = a + 999;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(c, 4, pair), 1);
  EXPECT_EQ_INT(pair[0], -1);
  EXPECT_EQ_INT(pair[3], 1);
  c[2].buf = b;
  /* the second send from 0 to 1 pairs with the second receive, past a
   * call of 0 bytes that matches nothing */
  chorus_plan_p2p d[6] = {{7, 1, 0, 0, 1, 0, b},         {7, 0, 1, 1, 1, 100, a},
                          {7, 0, 1, 1, 1, 200, a + 100}, {7, 1, 0, 0, 1, 100, b + 300},
                          {7, 1, 0, 0, 1, 200, b + 500}, {7, 0, 0, 1, 1, 50, x}};
  EXPECT_EQ_INT(chorus_plan_pair_p2p(d, 6, pair), 2);
  EXPECT_EQ_INT(pair[1], 3);
  EXPECT_EQ_INT(pair[2], 4);
  EXPECT_EQ_INT(pair[0], -1);
  EXPECT_EQ_INT(pair[5], -1); /* to itself: the kernels */
  /* a first send that does not want the copy engine still counts: the
   * second send pairs with the second receive, not the first */
  d[1].want = d[3].want = 0;
  EXPECT_EQ_INT(chorus_plan_pair_p2p(d, 6, pair), 1);
  EXPECT_EQ_INT(pair[1], -1);
  EXPECT_EQ_INT(pair[3], -1);
  EXPECT_EQ_INT(pair[2], 4);
}

/* ---- Send/Recv groups ----------------------------------------------------- */

#define PR 5  /* ranks */
#define PM 24 /* messages */

static void p2p_world(unsigned seed) {
  static sim m;
  unsigned s;
  world_begin(&m, seed, &s);
  const int n = 2 + (int)(rnd(&s) % (PR - 1));
  const int two = rnd(&s) % 2; /* a second stream per rank */
  m.nstreams = n * (1 + two);
  const int nmsg = 1 + (int)(rnd(&s) % PM);
  struct {
    int src, dst, sstream, rstream;
    size_t bytes;
    unsigned char *sbuf, *rbuf, *data, *junk;
  } msg[PM];
  chorus_plan_p2p pc[2 * PM];   /* the pairing's view of the calls */
  chorus_gpu_ce_call c[2 * PM]; /* the program's */
  long pair[2 * PM];
  int nc = 0;
  for (int i = 0; i < nmsg; i++) {
    msg[i].src = (int)(rnd(&s) % (unsigned)n);
    msg[i].dst = (int)(rnd(&s) % (unsigned)n);
    msg[i].bytes = 64 * (rnd(&s) % 4);
    msg[i].sstream = msg[i].src + (two && rnd(&s) % 2 ? n : 0);
    msg[i].rstream = msg[i].dst + (two && rnd(&s) % 2 ? n : 0);
    msg[i].data = pattern(msg[i].bytes, seed * 100u + (unsigned)i);
    msg[i].junk = pattern(msg[i].bytes, ~seed - (unsigned)i);
    msg[i].sbuf = malloc(msg[i].bytes + 1);
    /* now and then a receive into the buffer of an earlier message's send
     * (an in-place shift): the matching must leave both to the kernels */
    if (i && msg[i].bytes && rnd(&s) % 6 == 0 && msg[i - 1].bytes >= msg[i].bytes &&
        msg[i - 1].dst != msg[i].dst)
      msg[i].rbuf = msg[i - 1].sbuf;
    else
      msg[i].rbuf = malloc(msg[i].bytes + 1);
  }
  /* Calls in message order (each pair's order is NCCL's), the pairing's
   * view of them; one call in 8 does not want the copy engine (its rule
   * chose the kernels) but still counts in its pair's order. */
  for (int i = 0; i < nmsg; i++) {
    const int swant = rnd(&s) % 8 != 0, rwant = rnd(&s) % 8 != 0;
    pc[nc] = (chorus_plan_p2p){1, msg[i].src, msg[i].dst, 1, swant, msg[i].bytes, msg[i].sbuf};
    c[nc++] = (chorus_gpu_ce_call){1, msg[i].bytes, msg[i].sbuf, msg[i].sstream};
    pc[nc] = (chorus_plan_p2p){1, msg[i].dst, msg[i].src, 0, rwant, msg[i].bytes, msg[i].rbuf};
    c[nc++] = (chorus_gpu_ce_call){0, msg[i].bytes, msg[i].rbuf, msg[i].rstream};
  }
  chorus_plan_pair_p2p(pc, (size_t)nc, pair);
  for (int i = 0; i < nmsg; i++) {
    const int moved = pair[2 * i] >= 0;
    /* a pair is always one message's two calls, both wanting the copy
     * engine, never a self send or an in-place receive */
    if (moved) EXPECT_EQ_INT(pair[2 * i], 2 * i + 1);
    if (moved) EXPECT(pc[2 * i].want && pc[2 * i + 1].want);
    if (moved) EXPECT(msg[i].src != msg[i].dst && msg[i].bytes > 0);
    for (int j = 0; j < nmsg && moved; j++) EXPECT(msg[i].rbuf != msg[j].sbuf);
  }
  /* Before: the data to send and junk in receive buffers not sent from. */
  for (int i = 0; i < nmsg; i++)
    user_write(&m, msg[i].sstream, msg[i].sbuf, msg[i].data, msg[i].bytes);
  for (int i = 0; i < nmsg; i++) {
    int sent_from = 0;
    for (int j = 0; j < nmsg; j++) sent_from |= msg[i].rbuf == msg[j].sbuf;
    if (!sent_from) user_write(&m, msg[i].rstream, msg[i].rbuf, msg[i].junk, msg[i].bytes);
  }
  chorus_gpu_ce_step steps[3 * PM];
  const size_t nsteps = chorus_gpu_ce_plan_pairs(c, (size_t)nc, pair, steps);
  queue_program(&m, steps, nsteps);
  for (int i = 0; i < nmsg; i++)
    if (pair[2 * i] >= 0) user_check(&m, msg[i].rstream, msg[i].rbuf, msg[i].data, msg[i].bytes);
  /* then the senders reuse their buffers: no copy may still read them */
  for (int i = 0; i < nmsg; i++)
    if (pair[2 * i] >= 0) user_write(&m, msg[i].sstream, msg[i].sbuf, msg[i].junk, msg[i].bytes);
  EXPECT(run(&m));
  for (int i = 0; i < nmsg; i++) {
    int aliased = 0;
    for (int j = 0; j < nmsg; j++) aliased |= msg[i].rbuf == msg[j].sbuf;
    if (!aliased) free(msg[i].rbuf);
    free(msg[i].sbuf);
    free(msg[i].data);
    free(msg[i].junk);
  }
}

static void p2p_worlds(void) {
  for (unsigned seed = 1; seed <= 3000; seed++) p2p_world(seed);
}

/* ---- Broadcast ------------------------------------------------------------ */

static void bcast_world(unsigned seed) {
  static sim m;
  unsigned s;
  const int n = world_of_ranks(&m, seed, &s);
  const size_t bytes = 1 + rnd(&s) % 5000;
  unsigned char *recv[2][CHORUS_KERN_MAX_RANKS], *send = malloc(bytes);
  unsigned char *data = pattern(bytes, seed), *junk = pattern(bytes, ~seed);
  /* two Broadcasts in a row: the first from its root's send buffer (or in
   * place) into recv[0], the second from another root's recv[0] into
   * recv[1]: it may only read what the first delivered there */
  chorus_gpu_ce_bcast b[2];
  for (int k = 0; k < 2; k++) {
    memset(&b[k], 0, sizeof b[k]);
    b[k].nranks = n;
    b[k].root = (int)(rnd(&s) % (unsigned)n);
    b[k].bytes = bytes;
    b[k].chunk = rnd(&s) % 3 == 0 ? 0 : 1 + rnd(&s) % bytes;
    if (b[k].chunk && b[k].chunk < bytes / 256 + 1) b[k].chunk = bytes / 256 + 1; /* queues fit */
    for (int p = 0; p < n; p++) {
      recv[k][p] = malloc(bytes);
      b[k].stream[p] = p;
      b[k].recv[p] = recv[k][p];
    }
  }
  const int in_place = rnd(&s) % 2;
  b[0].send = in_place ? recv[0][b[0].root] : send;
  b[1].send = recv[0][b[1].root];
  if (getenv("CE_DEBUG"))
    fprintf(stderr, "world %u: %d ranks, %zu bytes, roots %d %d, chunks %zu %zu, in place %d\n",
            seed, n, bytes, b[0].root, b[1].root, b[0].chunk, b[1].chunk, in_place);
  user_write(&m, b[0].root, (void *)b[0].send, data, bytes);
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < n; p++)
      if (recv[k][p] != b[0].send) user_write(&m, p, recv[k][p], junk, bytes);
  for (int k = 0; k < 2; k++) {
    const size_t nsteps = chorus_gpu_ce_plan_bcast(&b[k], NULL);
    chorus_gpu_ce_step *steps = calloc(nsteps + 1, sizeof *steps);
    EXPECT_EQ_INT(chorus_gpu_ce_plan_bcast(&b[k], steps), nsteps);
    queue_program(&m, steps, nsteps);
    free(steps);
  }
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < n; p++) user_check(&m, p, recv[k][p], data, bytes);
  /* then each rank reuses its buffers: no copy may still read them */
  user_write(&m, b[0].root, send, junk, bytes);
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < n; p++) user_write(&m, p, recv[k][p], junk, bytes);
  EXPECT(run(&m));
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < n; p++) free(recv[k][p]);
  free(send);
  free(data);
  free(junk);
}

static void bcast_worlds(void) {
  for (unsigned seed = 1; seed <= 3000; seed++) bcast_world(seed);
}

/* How a Broadcast chain is cut: one copy per hop on 2 ranks, chunks on 3+,
 * the root's own copy only out of place. */
static void bcast_shape(void) {
  static char buf[9][1000];
  chorus_gpu_ce_bcast b;
  memset(&b, 0, sizeof b);
  b.nranks = 2;
  b.root = 1;
  b.bytes = 1000;
  b.chunk = 100;
  b.send = buf[8];
  for (int p = 0; p < 8; p++) {
    b.stream[p] = p;
    b.recv[p] = buf[p];
  }
  /* root's copy, a join, one copy, the receiver's join */
  EXPECT_EQ_INT(chorus_gpu_ce_plan_bcast(&b, NULL), 4);
  b.send = buf[1];
  EXPECT_EQ_INT(chorus_gpu_ce_plan_bcast(&b, NULL), 3);
  /* 4 ranks, 10 chunks: a join, 10 x (3 copies + 2 joins), 3 joins back */
  b.nranks = 4;
  EXPECT_EQ_INT(chorus_gpu_ce_plan_bcast(&b, NULL), 3 + 10 * 5 + 1);
  b.nranks = 1; /* in place: nothing to do; out of place: the root's copy */
  b.root = 0;
  b.send = buf[0];
  EXPECT_EQ_INT(chorus_gpu_ce_plan_bcast(&b, NULL), 0);
  b.send = buf[8];
  EXPECT_EQ_INT(chorus_gpu_ce_plan_bcast(&b, NULL), 1);
  b.bytes = 0;
  b.nranks = 4;
  EXPECT_EQ_INT(chorus_gpu_ce_plan_bcast(&b, NULL), 0);
}

/* ---- AllGather and AlltoAll ------------------------------------------------ */

/* Random AllGathers (in place or not) and AlltoAlls, 1 to 8 ranks, blocks
 * of 1 to 600 bytes: each rank's receive buffer ends up as it should, and
 * the ranks reuse both buffers right after. */
static void xchg_world(unsigned seed) {
  static sim m;
  unsigned s;
  const int n = world_of_ranks(&m, seed, &s);
  const size_t block = 1 + rnd(&s) % 600;
  const int a2a = (int)(rnd(&s) % 2), in_place = !a2a && rnd(&s) % 2;
  const int sides = (int)(rnd(&s) % 2); /* a side stream per rank for its own block */
  m.nstreams = n * (1 + sides);
  const size_t sbytes = a2a ? (size_t)n * block : block, rbytes = (size_t)n * block;
  unsigned char *send[CHORUS_KERN_MAX_RANKS], *recv[CHORUS_KERN_MAX_RANKS];
  unsigned char *data[CHORUS_KERN_MAX_RANKS], *want[CHORUS_KERN_MAX_RANKS];
  unsigned char *junk = pattern(rbytes, ~seed);
  chorus_gpu_ce_xchg x;
  memset(&x, 0, sizeof x);
  x.nranks = n;
  x.alltoall = a2a;
  x.block = block;
  for (int p = 0; p < n; p++) {
    recv[p] = malloc(rbytes);
    send[p] = in_place ? recv[p] + (size_t)p * block : malloc(sbytes);
    data[p] = pattern(sbytes, seed * 131u + (unsigned)p);
    x.stream[p] = p;
    x.side[p] = sides ? n + p : -1;
    x.send[p] = send[p];
    x.recv[p] = recv[p];
  }
  for (int r = 0; r < n; r++) { /* block p of rank r's result */
    want[r] = malloc(rbytes);
    for (int p = 0; p < n; p++)
      memcpy(want[r] + (size_t)p * block, data[p] + (a2a ? (size_t)r * block : 0), block);
  }
  for (int p = 0; p < n; p++) {
    user_write(&m, p, recv[p], junk, rbytes);
    user_write(&m, p, send[p], data[p], sbytes);
  }
  const size_t nsteps = chorus_gpu_ce_plan_xchg(&x, NULL);
  chorus_gpu_ce_step *steps = calloc(nsteps + 1, sizeof *steps);
  EXPECT_EQ_INT(chorus_gpu_ce_plan_xchg(&x, steps), nsteps);
  queue_program(&m, steps, nsteps);
  free(steps);
  for (int p = 0; p < n; p++) user_check(&m, p, recv[p], want[p], rbytes);
  for (int p = 0; p < n; p++) { /* then each rank reuses its buffers */
    user_write(&m, p, recv[p], junk, rbytes);
    if (!in_place) user_write(&m, p, send[p], junk, sbytes);
  }
  if (getenv("CE_DEBUG"))
    fprintf(stderr, "world %u: %d ranks, block %zu, %s%s%s\n", seed, n, block,
            a2a ? "AlltoAll" : "AllGather", in_place ? " in place" : "",
            sides ? ", side streams" : "");
  EXPECT(run(&m));
  for (int p = 0; p < n; p++) {
    if (!in_place) free(send[p]);
    free(recv[p]);
    free(data[p]);
    free(want[p]);
  }
  free(junk);
}

static void xchg_worlds(void) {
  for (unsigned seed = 1; seed <= 2000; seed++) xchg_world(seed);
}

/* How many steps: two barriers of 2 (n - 1) joins and n copies per rank,
 * less the own copies in place; two joins more per side stream used. */
static void xchg_shape(void) {
  static char buf[2][8][800];
  chorus_gpu_ce_xchg x;
  memset(&x, 0, sizeof x);
  x.nranks = 4;
  x.block = 100;
  for (int p = 0; p < 8; p++) {
    x.stream[p] = p;
    x.side[p] = -1;
    x.send[p] = buf[0][p];
    x.recv[p] = buf[1][p];
  }
  EXPECT_EQ_INT(chorus_gpu_ce_plan_xchg(&x, NULL), 12 + 16);
  x.alltoall = 1;
  EXPECT_EQ_INT(chorus_gpu_ce_plan_xchg(&x, NULL), 12 + 16);
  for (int p = 0; p < 4; p++) x.side[p] = 4 + p;
  EXPECT_EQ_INT(chorus_gpu_ce_plan_xchg(&x, NULL), 12 + 16 + 8);
  x.side[2] = 2; /* its own stream: none */
  EXPECT_EQ_INT(chorus_gpu_ce_plan_xchg(&x, NULL), 12 + 16 + 6);
  x.alltoall = 0;
  for (int p = 0; p < 4; p++) x.send[p] = buf[1][p] + p * 100; /* in place: no own copy */
  EXPECT_EQ_INT(chorus_gpu_ce_plan_xchg(&x, NULL), 12 + 12);
  x.nranks = 1;
  EXPECT_EQ_INT(chorus_gpu_ce_plan_xchg(&x, NULL), 0);
  x.block = 0;
  x.nranks = 4;
  EXPECT_EQ_INT(chorus_gpu_ce_plan_xchg(&x, NULL), 0);
}

/* ---- what runs at the same time --------------------------------------------- */

/* Whether step a of a program cannot start before step b has finished:
 * b is earlier on a's stream, or earlier on a stream that a wait before
 * a (on its stream, or on one it waited for, ...) waited for. */
static int after(const chorus_gpu_ce_step *st, size_t a, size_t b, unsigned char *seen) {
  if (a == b) return 1;
  if (a < b || seen[a]) return 0;
  seen[a] = 1;
  for (size_t k = a; k-- > 0;) /* the step before a on its stream */
    if (st[k].on == st[a].on) {
      if (after(st, k, b, seen)) return 1;
      break;
    }
  if (st[a].of >= 0) /* a wait: what its stream held when it was queued */
    for (size_t k = a; k-- > 0;)
      if (st[k].on == st[a].of) return after(st, k, b, seen);
  return 0;
}
/* Whether steps a and b cannot run at the same time. */
static int ordered(const chorus_gpu_ce_step *st, size_t n, size_t a, size_t b) {
  unsigned char seen[2][512] = {{0}};
  EXPECT(n <= sizeof seen[0]);
  return after(st, a, b, seen[0]) || after(st, b, a, seen[1]);
}
/* The copy of steps[] into dst; n when none. */
static size_t copy_into(const chorus_gpu_ce_step *st, size_t n, const void *dst) {
  for (size_t k = 0; k < n; k++)
    if (st[k].of < 0 && st[k].dst == dst) return k;
  return n;
}

/* A Broadcast's root copies into its own buffer beside the chain, which
 * never waits for that copy (on 2 and on 4 ranks); an AllGather's or
 * AlltoAll's own block is copied beside the pulls when a side stream is
 * given, after them when not. */
static void overlap(void) {
  static char buf[3][8][800];
  chorus_gpu_ce_step st[512];
  for (int n = 2; n <= 4; n += 2) {
    chorus_gpu_ce_bcast b;
    memset(&b, 0, sizeof b);
    b.nranks = n;
    b.root = 1;
    b.bytes = 800;
    b.chunk = 200;
    b.send = buf[2][0];
    for (int p = 0; p < n; p++) {
      b.stream[p] = p;
      b.recv[p] = buf[0][p];
    }
    const size_t ns = chorus_gpu_ce_plan_bcast(&b, st);
    const size_t own = copy_into(st, ns, buf[0][1]);
    EXPECT(own < ns);
    for (size_t k = 0; k < ns; k++)
      if (st[k].of < 0 && k != own) EXPECT(!ordered(st, ns, k, own));
  }
  chorus_gpu_ce_xchg x;
  memset(&x, 0, sizeof x);
  x.nranks = 4;
  x.alltoall = 1;
  x.block = 100;
  for (int p = 0; p < 4; p++) {
    x.stream[p] = p;
    x.side[p] = 4 + p;
    x.send[p] = buf[0][p];
    x.recv[p] = buf[1][p];
  }
  for (int with = 1; with >= 0; with--) {
    if (!with)
      for (int p = 0; p < 4; p++) x.side[p] = -1;
    const size_t ns = chorus_gpu_ce_plan_xchg(&x, st);
    for (int r = 0; r < 4; r++) {
      const size_t own = copy_into(st, ns, buf[1][r] + r * 100);
      EXPECT(own < ns);
      for (int p = 0; p < 4; p++) {
        const size_t pull = copy_into(st, ns, buf[1][r] + p * 100);
        if (p != r) EXPECT_EQ_INT(ordered(st, ns, pull, own), !with);
      }
    }
  }
}

/* ---- which collectives go ------------------------------------------------ */

/* A communicator as the planner sees it (plan.h): rank r of n GPUs named
 * key, all driven by this process, the GPUs reaching each other, shapes
 * as the GPU settings' defaults give them, and NCCL_ALGO, NCCL_PROTO and
 * CHORUS_TUNE as the environment holds them now. */
static void comm_make(chorus_plan_comm *m, int n, int r, uint64_t key) {
  EXPECT_EQ_INT(plan_comm_gpu(m, n, r, key, 1, 512 << 10, 64, 8 << 10), 0);
}

/* The algorithm the planner chooses for one call of func (count elements
 * of esize bytes, root 0) on m, planned with its group (every rank's call
 * in it), the facts `facts` holding; -1 when planning fails. */
static int algo_of(const chorus_plan_comm *m, int func, size_t count, size_t esize,
                   const void *send, const void *recv, uint32_t facts) {
  return plan_choose_one(m, func, count, esize, send, recv, facts).algo;
}

#define MiB ((size_t)1 << 20)

/* The size rules (the defaults, then CHORUS_TUNE over them): Broadcast by
 * its buffer, AllGather and AlltoAll by the larger one (n blocks); on 2
 * GPUs from 64 MiB, never on 3+ (nor on 1, nor on more than
 * CHORUS_PLAN_MAX_RANKS); no AlltoAll in place, nothing NCCL_ALGO keeps
 * away, nothing else; only where every rank's stream may be joined, and
 * every GPU reaches the others. */
static void coll_rules(void) {
  static char buf[2][64];
  char *snd = buf[0], *rcv = buf[1];
  unsetenv("CHORUS_TUNE");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  chorus_plan_comm m1, m2, m3, m4, m9;
  comm_make(&m1, 1, 0, 1);
  comm_make(&m2, 2, 0, 2);
  comm_make(&m3, 3, 0, 3);
  comm_make(&m4, 4, 0, 4);
  comm_make(&m9, 9, 0, 9);
  const int CE = CHORUS_ALGO_CE;
  /* Broadcast: by its buffer, in place or not */
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 64 * MiB, 1, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 64 * MiB, 1, rcv, rcv, PLAN_FACTS_ALL), CE);
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 16 * MiB, 4, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 64 * MiB - 1, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m3, CHORUS_FUNC_BROADCAST, 1024 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m4, CHORUS_FUNC_BROADCAST, 1024 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  /* AllGather and AlltoAll: n blocks (32 MiB blocks on 2 GPUs are 64 MiB) */
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_ALLGATHER, 32 * MiB, 1, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT(algo_of(&m2, CHORUS_FUNC_ALLGATHER, 32 * MiB - 1, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m2, CHORUS_FUNC_ALLGATHER, 32 * MiB - 16, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_ALLGATHER, 32 * MiB, 1, rcv, rcv, PLAN_FACTS_ALL), CE);
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_ALLTOALL, 32 * MiB, 1, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT(algo_of(&m2, CHORUS_FUNC_ALLTOALL, 32 * MiB - 1, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m2, CHORUS_FUNC_ALLTOALL, 32 * MiB, 1, rcv, rcv, PLAN_FACTS_ALL) !=
         CE); /* in place */
  EXPECT(algo_of(&m4, CHORUS_FUNC_ALLGATHER, 256 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m4, CHORUS_FUNC_ALLTOALL, 256 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m1, CHORUS_FUNC_ALLGATHER, 1024 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m1, CHORUS_FUNC_BROADCAST, 1024 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  /* nothing else */
  EXPECT(algo_of(&m2, CHORUS_FUNC_ALLREDUCE, 1024 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m2, CHORUS_FUNC_REDUCE, 1024 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m2, CHORUS_FUNC_REDUCESCATTER, 512 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  /* a stream that may not be joined (a default stream, one being
   * captured), GPUs that do not reach each other, ranks in other
   * processes: the kernels */
  EXPECT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 64 * MiB, 1, snd, rcv,
                 PLAN_FACTS_ALL & ~CHORUS_FACT_STREAM_OK) != CE);
  m2.staged = 1;
  EXPECT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 64 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  m2.staged = 0;
  m2.one_process = 0;
  EXPECT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 64 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  m2.one_process = 1;
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 64 * MiB, 1, snd, rcv, PLAN_FACTS_ALL), CE);

  /* CHORUS_TUNE turns it on at 3+ GPUs from 4000 bytes of the larger
   * buffer (1000-byte blocks on 4), and Broadcast from 1 KiB; on 2 GPUs
   * the defaults still hold, and more than CHORUS_PLAN_MAX_RANKS never */
  setenv("CHORUS_TUNE", "allgather|alltoall:n=3-:4000-inf:copyengine,broadcast:1K-inf:copyengine",
         1);
  comm_make(&m2, 2, 0, 2);
  comm_make(&m4, 4, 0, 4);
  comm_make(&m9, 9, 0, 9);
  EXPECT_EQ_INT(algo_of(&m4, CHORUS_FUNC_ALLTOALL, 1000, 1, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT(algo_of(&m4, CHORUS_FUNC_ALLTOALL, 999, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT_EQ_INT(algo_of(&m4, CHORUS_FUNC_ALLGATHER, 250, 4, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT(algo_of(&m4, CHORUS_FUNC_ALLTOALL, 1000, 1, rcv, rcv, PLAN_FACTS_ALL) !=
         CE); /* in place */
  EXPECT(algo_of(&m2, CHORUS_FUNC_ALLTOALL, 2000, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT_EQ_INT(algo_of(&m4, CHORUS_FUNC_BROADCAST, 1024, 1, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT(algo_of(&m4, CHORUS_FUNC_BROADCAST, 1023, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 1024, 1, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT(algo_of(&m9, CHORUS_FUNC_ALLTOALL, 1000, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m9, CHORUS_FUNC_BROADCAST, 1 << 20, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m9, CHORUS_FUNC_ALLGATHER, 1 << 20, 1, snd, rcv, PLAN_FACTS_ALL) != CE);

  /* NCCL_ALGO naming a function keeps the copy engine from it, whatever
   * CHORUS_TUNE or the defaults say; the others keep it */
  setenv("NCCL_ALGO", "alltoall:^copyengine;broadcast:chain", 1);
  comm_make(&m2, 2, 0, 2);
  comm_make(&m4, 4, 0, 4);
  EXPECT(algo_of(&m4, CHORUS_FUNC_ALLTOALL, 1000, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT(algo_of(&m2, CHORUS_FUNC_ALLTOALL, 32 * MiB, 1, snd, rcv, PLAN_FACTS_ALL) != CE);
  EXPECT_EQ_INT(algo_of(&m4, CHORUS_FUNC_BROADCAST, 1024, 1, snd, rcv, PLAN_FACTS_ALL),
                CHORUS_ALGO_CHAIN);
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_BROADCAST, 64 * MiB, 1, snd, rcv, PLAN_FACTS_ALL),
                CHORUS_ALGO_CHAIN);
  EXPECT_EQ_INT(algo_of(&m4, CHORUS_FUNC_ALLGATHER, 1000, 1, snd, rcv, PLAN_FACTS_ALL), CE);
  EXPECT_EQ_INT(algo_of(&m2, CHORUS_FUNC_ALLGATHER, 32 * MiB, 1, snd, rcv, PLAN_FACTS_ALL), CE);
  unsetenv("NCCL_ALGO");
  unsetenv("CHORUS_TUNE");
}

/* Send/Recv: from 8 MiB on the copy engine, in matched pairs of a group
 * of one process (rank 0 sends to rank 1: index 0 is rank 0's Send, 1 rank
 * 1's Recv); below, without its other end, or with an end that may not
 * go there, in kernel rounds. */
static void p2p_rules(void) {
  /* The planner reads no buffer, but pairs only copies whose ranges meet
   * no other call's: addresses far apart, each as large as its call. */
  void *const a = (void *)((uintptr_t)1 << 40), *const b = (void *)((uintptr_t)2 << 40);
  unsetenv("CHORUS_TUNE");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  chorus_plan_comm m[2];
  for (int r = 0; r < 2; r++) comm_make(&m[r], 2, r, 5);
  uint32_t have[2] = {PLAN_FACTS_ALL, PLAN_FACTS_ALL};
  const chorus_plan_probe probe = {plan_probe_by_rank, have};
  for (int k = 0; k < 5; k++) {
    /* 0: 8 MiB; 1: a byte less; 2: rank 0 receives from 1 instead (two
     * Recv, no Send); 3: rank 1's stream may not be joined; 4: NCCL_ALGO
     * keeps Send/Recv from it */
    const size_t bytes = k == 1 ? 8 * MiB - 1 : 8 * MiB;
    have[1] = k == 3 ? PLAN_FACTS_ALL & ~CHORUS_FACT_STREAM_OK : PLAN_FACTS_ALL;
    if (k == 4) {
      setenv("NCCL_ALGO", "sendrecv:^copyengine", 1);
      for (int r = 0; r < 2; r++) comm_make(&m[r], 2, r, 5);
    }
    chorus_plan_call c[2] = {{.comm = &m[0],
                              .func = CHORUS_FUNC_SEND,
                              .count = bytes,
                              .esize = 1,
                              .root = 1,
                              .desc = 1,
                              .send = a,
                              .recv = a,
                              .known = CHORUS_FACT_PREMULSUM},
                             {.comm = &m[1],
                              .func = CHORUS_FUNC_RECV,
                              .count = bytes,
                              .esize = 1,
                              .root = 0,
                              .desc = 2,
                              .send = b,
                              .recv = b,
                              .known = CHORUS_FACT_PREMULSUM}};
    if (k == 2) c[0].func = CHORUS_FUNC_RECV;
    chorus_task t[2];
    char err[256] = "";
    EXPECT_EQ_INT(chorus_plan_group(c, 2, &probe, t, err, sizeof err), 0);
    for (size_t i = 0; i < 2; i++) {
      if (k == 0) {
        EXPECT_EQ_INT(t[i].algo, CHORUS_ALGO_CE);
        EXPECT_EQ_INT(t[i].pair, 1 - (int)i);
        EXPECT_EQ_INT(t[i].round, -1);
      } else {
        EXPECT_EQ_INT(t[i].algo, CHORUS_ALGO_DIRECT);
        EXPECT_EQ_INT(t[i].pair, -1);
        EXPECT_EQ_INT(t[i].round, 0);
      }
    }
  }
  unsetenv("NCCL_ALGO");
}

/* The facts of every call but the one whose sendbuff is arg: it may not
 * join streams. */
static uint32_t probe_but(void *arg, const chorus_plan_call *c, uint32_t want) {
  return (c->send == arg ? PLAN_FACTS_ALL & ~CHORUS_FACT_STREAM_OK : PLAN_FACTS_ALL) & want;
}

/* A communicator's Send/Recv pair on the copy engine only if every one of
 * them may: rank 0 sends twice to rank 1 (8 MiB each, the buffers far
 * apart); when the stream of its second Send may not be joined, none of
 * the four goes there, and the kernels' rounds number both ends alike. */
static void p2p_comm_wide(void) {
  void *const buf[4] = {(void *)((uintptr_t)1 << 40), (void *)((uintptr_t)2 << 40),
                        (void *)((uintptr_t)3 << 40), (void *)((uintptr_t)4 << 40)};
  unsetenv("CHORUS_TUNE");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  chorus_plan_comm m[2];
  for (int r = 0; r < 2; r++) comm_make(&m[r], 2, r, 8);
  for (int k = 0; k < 2; k++) {
    /* 0: every stream may be joined; 1: not that of rank 0's second Send */
    const chorus_plan_probe probe = {probe_but, k ? buf[1] : NULL};
    chorus_plan_call c[4];
    for (int i = 0; i < 4; i++) {
      const int r = i / 2; /* calls 0, 1: rank 0's Sends; 2, 3: rank 1's Recvs */
      c[i] = (chorus_plan_call){.comm = &m[r],
                                .func = r ? CHORUS_FUNC_RECV : CHORUS_FUNC_SEND,
                                .count = 8 * MiB,
                                .esize = 1,
                                .root = 1 - r,
                                .desc = (uint64_t)i + 1,
                                .send = buf[i],
                                .recv = buf[i],
                                .known = CHORUS_FACT_PREMULSUM};
    }
    chorus_task t[4];
    char err[256] = "";
    EXPECT_EQ_INT(chorus_plan_group(c, 4, &probe, t, err, sizeof err), 0);
    for (int i = 0; i < 4; i++) {
      EXPECT_EQ_INT(t[i].algo, k ? CHORUS_ALGO_DIRECT : CHORUS_ALGO_CE);
      EXPECT_EQ_INT(t[i].pair, k ? -1 : (i + 2) % 4);
      EXPECT_EQ_INT(t[i].round, k ? i % 2 : -1);
    }
  }
}

/* A collective of a group goes on the copy engine only where every rank's
 * call goes that way: each gets the index of the first, and where one
 * rank's cannot (its stream may not be joined), or is not in the group,
 * they all take the kernels, alike. */
static void coll_group(void) {
  static char buf[4][64];
  unsetenv("CHORUS_TUNE");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  chorus_plan_comm m[2];
  for (int r = 0; r < 2; r++) comm_make(&m[r], 2, r, 6);
  uint32_t have[2] = {PLAN_FACTS_ALL, PLAN_FACTS_ALL};
  const chorus_plan_probe probe = {plan_probe_by_rank, have};
  for (int k = 0; k < 4; k++) {
    /* 0: both; 1: rank 1's stream may not be joined; 2: rank 0's call
     * alone; 3: the calls are described differently (another count, say) */
    have[1] = k == 1 ? PLAN_FACTS_ALL & ~CHORUS_FACT_STREAM_OK : PLAN_FACTS_ALL;
    chorus_plan_call c[2];
    for (int r = 0; r < 2; r++)
      c[r] = (chorus_plan_call){.comm = &m[r],
                                .func = CHORUS_FUNC_BROADCAST,
                                .count = 64 * MiB,
                                .esize = 1,
                                .root = 0,
                                .desc = k == 3 && r ? 77 : 76,
                                .seq = 3,
                                .send = buf[2 * r],
                                .recv = buf[2 * r + 1],
                                .known = CHORUS_FACT_PREMULSUM};
    chorus_task t[2];
    char err[256] = "";
    const size_t n = k == 2 ? 1 : 2;
    EXPECT_EQ_INT(chorus_plan_group(c, n, &probe, t, err, sizeof err), 0);
    for (size_t i = 0; i < n; i++) {
      EXPECT_EQ_INT(t[i].algo, k == 0 ? CHORUS_ALGO_CE : CHORUS_ALGO_CHAIN);
      EXPECT_EQ_INT(t[i].lead, k == 0 ? 0 : -1);
    }
  }
}

/* Which calls go: a collective whose every rank's call is in the group,
 * described alike, one right after another; its calls get the index of
 * the first, and it counts once. */
static void coll_leads(void) {
  enum { N = 6, R = CHORUS_PLAN_MAX_RANKS };
  uint8_t cand[N];
  uint64_t desc[N];
  int nranks[N], match[N * R];
  long lead[N];
  /* Calls 0-1: collective A of 2 ranks; 2: a call of another
   * communicator; 3-5: collective B of 3 ranks. */
  const int of[N] = {0, 0, -1, 1, 1, 1}, rank[N] = {0, 1, 0, 0, 1, 2};
  const int first[2] = {0, 3}, size[2] = {2, 3};
  for (int i = 0; i < N; i++) {
    cand[i] = of[i] >= 0;
    desc[i] = of[i] >= 0 ? 100u + (unsigned)of[i] : 7;
    nranks[i] = of[i] >= 0 ? size[of[i]] : 1;
  }
  /* match as chorus_plan_match_colls gives it: each call of a collective
   * names every rank's call of it */
#define FILL_MATCH()                                                                               \
  do {                                                                                             \
    for (int i = 0; i < N * R; i++) match[i] = -1;                                                 \
    for (int i = 0; i < N; i++)                                                                    \
      for (int j = 0; j < N && of[i] >= 0; j++)                                                    \
        if (of[j] == of[i]) match[i * R + rank[j]] = j;                                            \
  } while (0)
  FILL_MATCH();
  EXPECT_EQ_INT(chorus_plan_ce_leads(cand, desc, nranks, match, N, lead), 2);
  for (int i = 0; i < N; i++) EXPECT_EQ_INT(lead[i], of[i] >= 0 ? first[of[i]] : -1);
  /* a rank's call described differently (another count, say): B stays */
  desc[4] = 999;
  EXPECT_EQ_INT(chorus_plan_ce_leads(cand, desc, nranks, match, N, lead), 1);
  EXPECT_EQ_INT(lead[0], 0);
  EXPECT_EQ_INT(lead[3], -1);
  EXPECT_EQ_INT(lead[5], -1);
  desc[4] = 101;
  /* a rank's call not a candidate (a default stream, say): B stays */
  cand[5] = 0;
  EXPECT_EQ_INT(chorus_plan_ce_leads(cand, desc, nranks, match, N, lead), 1);
  EXPECT_EQ_INT(lead[3], -1);
  cand[5] = 1;
  /* a rank's call in a later group: B stays */
  match[3 * R + 2] = match[4 * R + 2] = -1;
  EXPECT_EQ_INT(chorus_plan_ce_leads(cand, desc, nranks, match, N, lead), 1);
  EXPECT_EQ_INT(lead[4], -1);
  FILL_MATCH();
  /* A's calls with a call of another communicator between them (rank 0's
   * is call 0, rank 1's call 2): A stays, as running both at call 0 would
   * move rank 1's call ahead of call 1 on its GPU */
  for (int i = 0; i < N * R; i++) match[i] = -1;
  memset(cand, 0, sizeof cand);
  cand[0] = cand[2] = 1;
  desc[0] = desc[2] = 100;
  nranks[0] = nranks[2] = 2;
  match[0 * R + 0] = match[2 * R + 0] = 0;
  match[0 * R + 1] = match[2 * R + 1] = 2;
  EXPECT_EQ_INT(chorus_plan_ce_leads(cand, desc, nranks, match, 3, lead), 0);
  EXPECT_EQ_INT(lead[0], -1);
  EXPECT_EQ_INT(lead[2], -1);
  /* the same two calls side by side go */
  match[0 * R + 1] = match[1 * R + 1] = 1;
  match[1 * R + 0] = 0;
  cand[1] = 1;
  desc[1] = 100;
  nranks[1] = 2;
  EXPECT_EQ_INT(chorus_plan_ce_leads(cand, desc, nranks, match, 2, lead), 1);
  EXPECT_EQ_INT(lead[0], 0);
  EXPECT_EQ_INT(lead[1], 0);
#undef FILL_MATCH
}

/* The simulator catches what it is for: a program without the receiver's
 * wait reads junk or races, one that waits in a cycle deadlocks. */
static void sim_can_fail(void) {
  static sim m;
  static char a[64], b2[64], data[64], junk[64];
  memset(data, 7, sizeof data);
  memset(junk, 1, sizeof junk);
  int bad = 0;
  for (unsigned seed = 1; seed <= 50; seed++) {
    memset(&m, 0, sizeof m);
    m.seed = m.id = seed;
    m.quiet = 1;
    m.nstreams = 2;
    user_write(&m, 0, a, data, 64);
    user_write(&m, 1, b2, junk, 64);
    chorus_gpu_ce_step st[1] = {{0, -1, b2, a, 64}}; /* no joins */
    queue_program(&m, st, 1);
    user_check(&m, 1, b2, data, 64);
    bad += !run(&m);
  }
  EXPECT(bad > 0);
  memset(&m, 0, sizeof m);
  m.quiet = 1;
  m.nstreams = 2;
  add(&m, 0, (item){WAIT, 1, 1, NULL, NULL, 0});
  add(&m, 1, (item){WAIT, 0, 1, NULL, NULL, 0});
  EXPECT(!run(&m));
}

int main(void) {
  RUN(ce_pairs);
  RUN(p2p_worlds);
  RUN(bcast_worlds);
  RUN(bcast_shape);
  RUN(xchg_worlds);
  RUN(xchg_shape);
  RUN(overlap);
  RUN(coll_rules);
  RUN(p2p_rules);
  RUN(p2p_comm_wide);
  RUN(coll_group);
  RUN(coll_leads);
  RUN(sim_can_fail);
  return unit_report();
}
