/*
 * test_gpu_p2p.c - the rounds that GPU communicators run a group's
 * Send/Recv calls in pair every send with the receive NCCL pairs it with.
 *
 * The kernel moves a transfer only when both ends have it in the same
 * launch with the same size (otherwise it waits until the deadline). Here
 * random groups are made for 1 to 5 ranks (several messages per pair, of
 * mixed sizes, zero-byte and self sends among them, each rank's calls in a
 * random order that keeps the order per pair), every rank's rounds are
 * computed, and the rounds are replayed on host memory: for every transfer
 * the other end must hold the matching one in the same round, and every
 * receive buffer must end up with the bytes of the send NCCL matches it
 * with (the k-th send from p to q with the k-th receive of q from p). The
 * round of each call and its protocol are the planner's (plan/plan.h,
 * chorus_plan_group); each round is replayed as its two launches (LL lines
 * up to the size the LL slots carry, FIFO chunks above), each end's
 * transfer in the same launch as the other end's.
 *
 * On odd seeds one process drives every rank with all calls in one group,
 * CHORUS_TUNE sends Send/Recv from a size on to the copy engine, and the
 * pairs the planner gives it are moved first and left out of the rounds:
 * the bytes still arrive only if those pair alike. On even seeds every
 * rank is a process of its own, planned alone, and nothing goes there.
 *
 * Also: how an LL transfer is cut into parts (one CTA each; both ends cut
 * from the size alone) covers it exactly and fits the slots sized from the
 * largest LL transfer, and which rounds count as overlapping (receive
 * buffers meeting send buffers, where the LL launch's CTAs must all read
 * before any writes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "plan_comm.h"
#include "unit.h"

#define MAXN   5
#define MAXMSG 24

typedef struct msg {
  int src, dst;
  size_t bytes;
  unsigned char *sbuf, *rbuf;
} msg;

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 16) & 0x7fff;
}

static size_t ce_pairs_seen; /* over all worlds */

/* A communicator as the planner sees it (plan.h): rank r of n GPUs named
 * key, all driven by this process or each by its own, LL Send/Recv up to
 * ll_max bytes, and NCCL_ALGO, NCCL_PROTO and CHORUS_TUNE as the
 * environment holds them now. */
static void comm_make(chorus_plan_comm *m, int n, int r, uint64_t key, int one_process,
                      size_t ll_max) {
  EXPECT_EQ_INT(plan_comm_gpu(m, n, r, key, one_process, ll_max, 64, 8 << 10), 0);
}

/* The probe: every stream may be joined, every GPU reaches every buffer. */
static uint32_t probe_all(void *arg, const chorus_plan_call *c, uint32_t want) {
  (void)arg;
  (void)c;
  return want;
}

static void one_world(unsigned seed) {
  unsigned s = seed;
  const int n = 1 + (int)(rnd(&s) % MAXN);
  const int nmsg = (int)(rnd(&s) % MAXMSG);
  msg m[MAXMSG];
  /* Messages in global order: the per-pair order is the order here. Self
   * messages need their send and receive in the same round: the k-th of
   * each, which this order gives. */
  for (int i = 0; i < nmsg; i++) {
    m[i].src = (int)(rnd(&s) % (unsigned)n);
    m[i].dst = rnd(&s) % 4 == 0 ? m[i].src : (int)(rnd(&s) % (unsigned)n);
    m[i].bytes = rnd(&s) % 5 == 0 ? 0 : 1 + rnd(&s) % 300;
    /* odd seeds (copy-engine pairs): few sizes, so that a pair's size alone
     * seldom tells its messages apart */
    if (seed % 2) m[i].bytes = 64 * (rnd(&s) % 3);
    m[i].sbuf = malloc(m[i].bytes + 1);
    m[i].rbuf = calloc(1, m[i].bytes + 1);
    for (size_t b = 0; b < m[i].bytes; b++) m[i].sbuf[b] = (unsigned char)(rnd(&s) + i);
  }
  /* Each rank's calls: its sends and receives, shuffled, then put back in
   * global order per peer and direction (NCCL pairs in that order). */
  chorus_op ops[MAXN][2 * MAXMSG];
  chorus_op *ptr[MAXN][2 * MAXMSG];
  int nops[MAXN] = {0};
  for (int r = 0; r < n; r++) {
    int idx[2 * MAXMSG], k = 0;
    for (int i = 0; i < nmsg; i++) {
      if (m[i].src == r) idx[k++] = 2 * i;
      if (m[i].dst == r) idx[k++] = 2 * i + 1;
    }
    /* A random interleaving that keeps each (peer, direction)'s order:
     * repeatedly take the first remaining call of a random kind. */
    int used[2 * MAXMSG] = {0};
    for (int t = 0; t < k; t++) {
      int pick = -1;
      for (int tries = 0; tries < 8 && pick < 0; tries++) {
        int c = idx[rnd(&s) % (unsigned)k];
        int i = c / 2, dir = c % 2, peer = dir ? m[i].src : m[i].dst;
        if (used[c]) continue;
        /* the first unused call with the same peer and direction */
        for (int u = 0; u < k; u++) {
          int cu = idx[u], iu = cu / 2, du = cu % 2, pu = du ? m[iu].src : m[iu].dst;
          if (!used[cu] && du == dir && pu == peer) {
            pick = u;
            break;
          }
        }
      }
      if (pick < 0)
        for (int u = 0; u < k && pick < 0; u++)
          if (!used[idx[u]]) pick = u;
      const int c = idx[pick], i = c / 2, dir = c % 2;
      used[c] = 1;
      chorus_op *op = &ops[r][nops[r]];
      memset(op, 0, sizeof *op);
      op->func = dir ? CHORUS_FUNC_RECV : CHORUS_FUNC_SEND;
      op->root = dir ? m[i].src : m[i].dst;
      op->count = m[i].bytes;
      op->esize = 1;
      op->sendbuff = m[i].sbuf;
      op->recvbuff = m[i].rbuf;
      ptr[r][nops[r]] = op;
      nops[r]++;
    }
  }
  /* The planner's view: a communicator per rank. On odd seeds one process
   * drives every rank and plans all calls in one group, as the group
   * executor does; from 1 + seed % 100 bytes their rule (CHORUS_TUNE)
   * chooses the copy engine, which takes the pairs it can match. On even
   * seeds each rank plans its own calls, with the same CHORUS_TUNE, and no
   * call may go to the copy engine. The LL slots carry none, 150 bytes, or
   * all (by seed % 3). */
  const int one = seed % 2;
  const size_t min_ce = 1 + seed % 100;
  const size_t ll_bytes = seed % 3 == 0 ? 0 : seed % 3 == 1 ? 150 : CHORUS_GPU_P2P_LL_MAX;
  char tune[64];
  snprintf(tune, sizeof tune, "sendrecv:%zu-inf:copyengine", min_ce);
  setenv("CHORUS_TUNE", tune, 1);
  chorus_plan_comm comm[MAXN];
  for (int r = 0; r < n; r++) comm_make(&comm[r], n, r, 0x5000u + seed, one, ll_bytes);
  unsetenv("CHORUS_TUNE");
  enum { MAXC = MAXN * 2 * MAXMSG };
  chorus_plan_call calls[MAXC];
  chorus_task tasks[MAXC];
  int at_rank[MAXC], at_call[MAXC], start[MAXN];
  size_t nc = 0;
  for (int r = 0; r < n; r++) {
    start[r] = (int)nc;
    for (int j = 0; j < nops[r]; j++) {
      chorus_op *op = ptr[r][j];
      calls[nc] = (chorus_plan_call){.comm = &comm[r],
                                     .func = op->func,
                                     .count = op->count,
                                     .esize = op->esize,
                                     .root = op->root,
                                     .desc = (uint64_t)op->func << 32 | op->count,
                                     .send = op->sendbuff,
                                     .recv = op->recvbuff,
                                     .known = CHORUS_FACT_PREMULSUM,
                                     .user = op};
      at_rank[nc] = r;
      at_call[nc++] = j;
    }
  }
  const chorus_plan_probe probe = {probe_all, NULL};
  char err[256];
  if (one) {
    EXPECT_EQ_INT(chorus_plan_group(calls, nc, &probe, tasks, err, sizeof err), 0);
  } else {
    for (int r = 0; r < n; r++)
      EXPECT_EQ_INT(chorus_plan_group(calls + start[r], (size_t)nops[r], &probe, tasks + start[r],
                                      err, sizeof err),
                    0);
  }
  /* The copy-engine pairs: both ends of each are the two calls of one
   * message (a Send of rank a to b and b's Recv from a, of one size, from
   * the rule's size on), so the bytes arrive right only if they pair as
   * NCCL does; they move first. */
  size_t seen = 0, ce_calls = 0;
  for (size_t i = 0; i < nc; i++) {
    const chorus_plan_call *ci = &calls[i];
    const size_t bytes = ci->count * ci->esize;
    if (tasks[i].algo != CHORUS_ALGO_CE) {
      /* the kernels: in a round, LL up to the size the slots carry */
      EXPECT_EQ_INT(tasks[i].algo, CHORUS_ALGO_DIRECT);
      EXPECT_EQ_INT(tasks[i].pair, -1);
      if (bytes) EXPECT(tasks[i].round >= 0 && tasks[i].round < nops[at_rank[i]]);
      if (bytes) EXPECT_EQ_INT(tasks[i].proto == CHORUS_PROTO_LL, bytes <= ll_bytes);
      continue;
    }
    ce_calls++;
    EXPECT(one);
    EXPECT_EQ_INT(tasks[i].round, -1);
    const long j = tasks[i].pair;
    EXPECT(j >= 0 && (size_t)j < nc);
    if (j < 0 || (size_t)j >= nc) continue;
    const chorus_plan_call *cj = &calls[j];
    EXPECT_EQ_INT(tasks[j].algo, CHORUS_ALGO_CE);
    EXPECT_EQ_INT(tasks[j].pair, (long)i);
    EXPECT(ci->func != cj->func && ci->root == cj->comm->rank && cj->root == ci->comm->rank);
    EXPECT(ci->comm->rank != ci->root && ci->count == cj->count);
    EXPECT(bytes >= min_ce);
    if (ci->func == CHORUS_FUNC_SEND) {
      memcpy((void *)cj->recv, ci->send, bytes);
      seen++;
    }
  }
  EXPECT_EQ_INT(2 * seen, ce_calls);
  ce_pairs_seen += seen;
  /* what is left goes to the rounds */
  const chorus_task *tptr[MAXN][2 * MAXMSG];
  int left[MAXN] = {0};
  for (size_t i = 0; i < nc; i++) {
    if (tasks[i].algo == CHORUS_ALGO_CE) continue;
    const int r = at_rank[i];
    tptr[r][left[r]] = &tasks[i];
    ptr[r][left[r]++] = ptr[r][at_call[i]];
  }
  for (int r = 0; r < n; r++) nops[r] = left[r];
  chorus_kern_p2p *ll[MAXN], *fifo[MAXN];
  int nrounds[MAXN];
  for (int r = 0; r < n; r++) {
    ll[r] = calloc((size_t)nops[r] + 1, sizeof *ll[r]);
    fifo[r] = calloc((size_t)nops[r] + 1, sizeof *fifo[r]);
    nrounds[r] =
        chorus_gpu_p2p_rounds(r, ptr[r], tptr[r], nops[r], ll[r], fifo[r], err, sizeof err);
    EXPECT(nrounds[r] >= 0);
    if (nrounds[r] < 0) fprintf(stderr, "seed %u: %s\n", seed, err);
    /* every transfer whole in the launch of its round and protocol, in
     * none of the other kind; as many rounds as the last one used */
    int last = -1;
    for (int j = 0; j < nops[r]; j++) {
      const chorus_op *op = ptr[r][j];
      const size_t bytes = op->count * op->esize;
      const int k = tptr[r][j]->round, p = op->root;
      if (!bytes || k < 0 || k >= nops[r]) continue;
      last = k > last ? k : last;
      const int is_ll = tptr[r][j]->proto == CHORUS_PROTO_LL;
      const chorus_kern_p2p *in = is_ll ? &ll[r][k] : &fifo[r][k];
      const chorus_kern_p2p *out = is_ll ? &fifo[r][k] : &ll[r][k];
      if (op->func == CHORUS_FUNC_SEND) {
        EXPECT(in->send[p] == op->sendbuff && in->sbytes[p] == bytes && out->sbytes[p] == 0);
      } else {
        EXPECT(in->recv[p] == op->recvbuff && in->rbytes[p] == bytes && out->rbytes[p] == 0);
      }
    }
    if (nrounds[r] >= 0) EXPECT_EQ_INT(nrounds[r], last + 1);
  }
  /* Replay: round k of every rank as its LL and FIFO launches, each
   * launch's transfers against the other end's same launch. */
  int maxr = 0;
  for (int r = 0; r < n; r++) maxr = nrounds[r] > maxr ? nrounds[r] : maxr;
  for (int k = 0; k < maxr; k++) {
    static const chorus_kern_p2p none;
    const chorus_kern_p2p *part[MAXN][2];
    for (int r = 0; r < n; r++) {
      part[r][0] = k < nrounds[r] ? &ll[r][k] : &none;
      part[r][1] = k < nrounds[r] ? &fifo[r][k] : &none;
    }
    for (int b = 0; b < 2; b++)
      for (int r = 0; r < n; r++)
        for (int p = 0; p < n; p++) {
          const chorus_kern_p2p *mine = part[r][b], *theirs = part[p][b];
          EXPECT_EQ_INT(mine->sbytes[p], theirs->rbytes[r]);
          if (b == 0) EXPECT(mine->sbytes[p] <= ll_bytes);
          if (mine->sbytes[p] && mine->sbytes[p] == theirs->rbytes[r])
            memcpy(theirs->recv[r], mine->send[p], mine->sbytes[p]);
        }
  }
  for (int i = 0; i < nmsg; i++) EXPECT(memcmp(m[i].sbuf, m[i].rbuf, m[i].bytes) == 0);
  for (int r = 0; r < n; r++) {
    free(ll[r]);
    free(fifo[r]);
  }
  for (int i = 0; i < nmsg; i++) {
    free(m[i].sbuf);
    free(m[i].rbuf);
  }
}

static void random_groups(void) {
  /* the settings are the tests' own */
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  for (unsigned seed = 1; seed <= 2000; seed++) one_world(seed);
  EXPECT(ce_pairs_seen > 1000); /* the copy-engine pairing was exercised */
}

/* Rank 0 alone: two sends to itself and one receive of a different size.
 * The planner puts the first send and the receive in round 0, the second
 * send in round 1, which has no receive. */
static void self_mismatch(void) {
  char a[16], b[16];
  chorus_op ops[3];
  memset(ops, 0, sizeof ops);
  for (int i = 0; i < 3; i++) ops[i].esize = 4, ops[i].root = 0;
  ops[0].func = CHORUS_FUNC_SEND, ops[0].count = 4, ops[0].sendbuff = a;
  ops[1].func = CHORUS_FUNC_RECV, ops[1].count = 4, ops[1].recvbuff = b;
  ops[2].func = CHORUS_FUNC_SEND, ops[2].count = 2, ops[2].sendbuff = a;
  chorus_op *ptr[3] = {&ops[0], &ops[1], &ops[2]};
  unsetenv("CHORUS_TUNE");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  chorus_plan_comm m;
  comm_make(&m, 1, 0, 0x99, 0, 512 << 10);
  chorus_plan_call c[3];
  for (int i = 0; i < 3; i++)
    c[i] = (chorus_plan_call){.comm = &m,
                              .func = ops[i].func,
                              .count = ops[i].count,
                              .esize = ops[i].esize,
                              .root = 0,
                              .desc = (uint64_t)i,
                              .send = ops[i].sendbuff,
                              .recv = ops[i].recvbuff,
                              .known = CHORUS_FACT_PREMULSUM,
                              .user = &ops[i]};
  chorus_task t[3];
  char err[256] = "";
  EXPECT_EQ_INT(chorus_plan_group(c, 3, NULL, t, err, sizeof err), 0);
  EXPECT_EQ_INT(t[0].round, 0);
  EXPECT_EQ_INT(t[1].round, 0);
  EXPECT_EQ_INT(t[2].round, 1);
  const chorus_task *tp[3] = {&t[0], &t[1], &t[2]};
  chorus_kern_p2p ll[3], fifo[3];
  memset(ll, 0, sizeof ll);
  memset(fifo, 0, sizeof fifo);
  EXPECT_EQ_INT(chorus_gpu_p2p_rounds(0, ptr, tp, 2, ll, fifo, err, sizeof err), 1);
  EXPECT_EQ_INT(ll[0].sbytes[0] + fifo[0].sbytes[0], 16);
  EXPECT_EQ_INT(ll[0].rbytes[0] + fifo[0].rbytes[0], 16);
  memset(ll, 0, sizeof ll);
  memset(fifo, 0, sizeof fifo);
  EXPECT_EQ_INT(chorus_gpu_p2p_rounds(0, ptr, tp, 3, ll, fifo, err, sizeof err), -1);
  EXPECT(strstr(err, "ncclSend of 8 bytes but ncclRecv of 0 bytes") != NULL);
}

/* Every LL size up to ll_bytes, cut as chorus_kern_p2p_parts cuts it:
 * the parts cover it exactly, in order, each a multiple of 16 bytes and no
 * larger than the slot (chorus_kern_p2p_part_cap), never more parts than
 * the slots made for ll_bytes, and about 4 KiB each until there are
 * CHORUS_KERN_P2P_PARTS. */
static void parts_cover(void) {
  static const size_t lls[] = {16, 100, 4096, 4097, 16384, 65544, 131072, 262144, 1 << 20};
  for (size_t i = 0; i < sizeof lls / sizeof lls[0]; i++) {
    const size_t ll = lls[i], cap = chorus_kern_p2p_part_cap(ll, CHORUS_KERN_P2P_PARTS);
    size_t part;
    const uint32_t slots = chorus_kern_p2p_parts(ll, CHORUS_KERN_P2P_PARTS, &part);
    EXPECT(cap % 16 == 0 && cap >= 16);
    for (size_t n = 1; n <= ll; n += n < 9000 ? 1 : 997) {
      const uint32_t np = chorus_kern_p2p_parts(n, CHORUS_KERN_P2P_PARTS, &part);
      const size_t want = (n + CHORUS_KERN_P2P_PART_MIN - 1) / CHORUS_KERN_P2P_PART_MIN;
      const int ok = np >= 1 && np <= slots && part % 16 == 0 && part <= cap &&
                     (np - 1) * part < n && n <= np * part &&
                     np == (want < CHORUS_KERN_P2P_PARTS ? want : CHORUS_KERN_P2P_PARTS);
      EXPECT(ok);
      if (!ok) {
        fprintf(stderr, "ll %zu n %zu: %u parts of %zu (cap %zu, slots %u)\n", ll, n, np, part, cap,
                slots);
        break;
      }
    }
  }
  size_t part = 1;
  EXPECT_EQ_INT(chorus_kern_p2p_parts(0, CHORUS_KERN_P2P_PARTS, &part), 0);
  EXPECT_EQ_INT(part, 0);
}

static void overlap(void) {
  char a[64], b[64];
  chorus_kern_p2p p;
  memset(&p, 0, sizeof p);
  p.send[1] = a, p.sbytes[1] = 32; /* rank 0 sends a[0, 32) to 1 */
  p.recv[2] = b, p.rbytes[2] = 32; /* and receives b[0, 32) from 2 */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 3), 0);
  p.recv[2] = a + 31; /* the receive's first byte is the send's last */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 3), 1);
  p.recv[2] = a + 32; /* adjacent, not overlapping */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 3), 0);
  p.recv[2] = a; /* an in-place ring shift */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 3), 1);
  p.rbytes[2] = 0; /* nothing received from 2 */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 3), 0);
  memset(&p, 0, sizeof p);
  p.send[0] = p.recv[0] = a, p.sbytes[0] = p.rbytes[0] = 16; /* own copy in place: none */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 2), 0);
  p.recv[0] = a + 8; /* own copy shifted within one buffer */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 2), 1);
  p.recv[0] = b;
  p.send[1] = b + 12, p.sbytes[1] = 4; /* a send to 1 from the own receive buffer */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 2), 1);
  p.send[1] = p.recv[1] = a + 32, p.sbytes[1] = p.rbytes[1] = 32; /* in place with peer 1 */
  EXPECT_EQ_INT(chorus_gpu_p2p_overlap(&p, 0, 2), 1);
}

/* The FIFO call headers' descriptions read as the calls they stand for. */
static void descs(void) {
  uint64_t send, recv;
  chorus_gpu_p2p_descs(&send, &recv);
  EXPECT(send != recv && send >> 15 == 0 && recv >> 15 == 0);
  char d[160];
  chorus_gpu_call_describe(send | (uint64_t)4096 << 15, d, sizeof d);
  EXPECT_STREQ(d, "Send(count=4096, int8)");
  chorus_gpu_call_describe(recv | (uint64_t)1 << 40 << 15, d, sizeof d);
  EXPECT_STREQ(d, "Recv(count=1099511627776, int8)");
}

int main(void) {
  RUN(random_groups);
  RUN(parts_cover);
  RUN(overlap);
  RUN(descs);
  RUN(self_mismatch);
  return unit_report();
}
