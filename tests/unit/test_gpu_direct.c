/*
 * test_gpu_direct.c - when GPU collectives run zero-copy (the planner,
 * plan/plan.h, under the default rules and the settings), their kernel's
 * shape (gpu/direct.c), and which calls of a group run together.
 *
 * The zero-copy kernel pairs CTA b of every rank with CTA b of the others
 * and cuts every rank's block from the sizes alone, so every rank must
 * pick the same shape for the same call; a group's call on one rank must
 * be matched with the same call of every other rank (the k-th collective
 * of the communicator on each), or the kernels would wait for each other
 * across different calls.
 *
 * Matching: random groups of calls from up to three communicators of 1-5
 * ranks (some calls not candidates, some ranks absent, some calls left to
 * a later group), each rank's calls in order per communicator but
 * interleaved at random with the others'; every call is labelled with its
 * communicator and number in advance, and a match must pair exactly the
 * calls of equal label, one per rank, with every rank present. Choice:
 * the default size ranges per function and GPU count, NCCL_ALGO over them,
 * what never goes zero-copy (PreMulSum, other functions, 1 or more than
 * CHORUS_PLAN_MAX_RANKS GPUs, blocks or buffers off 16 bytes, GPUs that do
 * not reach each other). Shapes: blocks of whole 16-byte units that cover
 * the buffer, CTAs in range. Groups: zero-copy only where every rank's
 * call is there, alike, and the GPUs reach the buffers the kernel touches
 * on other ranks; otherwise every rank's call falls back alike.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "plan_comm.h"
#include "unit.h"

#define MAXOPS 40
#define R      CHORUS_PLAN_MAX_RANKS

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 16) & 0x7fff;
}

static void one_group(unsigned seed) {
  unsigned s = seed;
  const int ncomms = 1 + (int)(rnd(&s) % 3);
  int nranks[3], ncalls[3];
  for (int c = 0; c < ncomms; c++) {
    nranks[c] = 1 + (int)(rnd(&s) % 5);
    ncalls[c] = (int)(rnd(&s) % 4);
  }
  /* Each (communicator, rank) present or not, its calls 0..ncalls-1 (all
   * candidates, or the rank's k-th one left out as a non-candidate). */
  uint64_t key[MAXOPS], seq[MAXOPS];
  int rank[MAXOPS], nr[MAXOPS], comm_of[MAXOPS], place[MAXOPS];
  uint8_t cand[MAXOPS];
  int n = 0;
  int next[3][5] = {{0}}, present[3][5];
  for (int c = 0; c < ncomms; c++)
    for (int r = 0; r < nranks[c]; r++) present[c][r] = rnd(&s) % 6 != 0;
  for (int guard = 0; guard < 1000 && n < MAXOPS; guard++) {
    const int c = (int)(rnd(&s) % (unsigned)ncomms), r = (int)(rnd(&s) % (unsigned)nranks[c]);
    if (!present[c][r] || next[c][r] >= ncalls[c]) continue;
    if (rnd(&s) % 8 == 0) { /* this call is in another group */
      next[c][r]++;
      continue;
    }
    key[n] = 0x1000u + (uint64_t)c;
    seq[n] = 100 + (uint64_t)next[c][r];
    rank[n] = r;
    nr[n] = nranks[c];
    comm_of[n] = c;
    place[n] = next[c][r]++;
    cand[n] = 1;
    n++;
  }
  /* Non-candidates (Send/Recv, say) sprinkled in: never matched, and
   * they shift no one's count. */
  for (int k = rnd(&s) % 3; k > 0 && n < MAXOPS; k--) {
    key[n] = 0x1000u;
    seq[n] = 100;
    rank[n] = 0;
    nr[n] = nranks[0];
    comm_of[n] = -1;
    place[n] = -1;
    cand[n] = 0;
    n++;
  }
  int match[MAXOPS * R];
  const size_t full = chorus_plan_match_colls(key, seq, rank, nr, cand, (size_t)n, match);
  size_t want_full = 0;
  for (int i = 0; i < n; i++) {
    if (!cand[i]) {
      for (int p = 0; p < R; p++) EXPECT(match[i * R + p] == -1);
      continue;
    }
    const int c = comm_of[i];
    int all = nranks[c] >= 2;
    for (int p = 0; p < R; p++) {
      const int j = match[i * R + p];
      /* the independent answer: the call of rank p with the same label */
      int want = -1;
      for (int k = 0; k < n && p < nranks[c] && nranks[c] >= 2; k++)
        if (cand[k] && comm_of[k] == c && rank[k] == p && place[k] == place[i]) want = k;
      EXPECT_EQ_INT(j, want);
      if (p < nranks[c] && want < 0) all = 0;
    }
    want_full += (size_t)all;
  }
  EXPECT(full == want_full);
}

static void random_groups(void) {
  for (unsigned seed = 1; seed <= 3000; seed++) one_group(seed);
}

/* A communicator as the planner sees it (plan.h): rank r of n GPUs named
 * key, all driven by this process, the GPUs reaching each other, at most
 * 32 CTAs of at least 64 KiB of a rank's block for zero-copy, and
 * NCCL_ALGO, NCCL_PROTO and CHORUS_TUNE as the environment holds them
 * now. */
static void comm_make(chorus_plan_comm *m, int n, int r, uint64_t key) {
  EXPECT_EQ_INT(plan_comm_gpu(m, n, r, key, 1, 512 << 10, 32, 1 << 16), 0);
}

#define MiB ((size_t)1 << 20)

static _Alignas(16) char bufs[2][64];

/* The planner's task for one call of func (count elements of esize bytes,
 * the buffers given; NULL: 16-byte aligned ones) on m, planned with its
 * group, the facts `facts` holding (PreMulSum among them, or not). */
static chorus_task choose(const chorus_plan_comm *m, int func, size_t count, size_t esize,
                          uint32_t facts, const void *send, const void *recv) {
  return plan_choose_one(m, func, count, esize, send ? send : bufs[0], recv ? recv : bufs[1],
                         facts);
}

/* Whether one call of func goes zero-copy, with every fact but PreMulSum. */
static int zc(const chorus_plan_comm *m, int func, size_t count, size_t esize) {
  return choose(m, func, count, esize, PLAN_FACTS_ALL, NULL, NULL).algo == CHORUS_ALGO_ZEROCOPY;
}

/* The kernel's arguments for a call as task t chose it. */
static int shape(const chorus_task *t, int func, int n, size_t count, size_t esize,
                 chorus_kern_zc *d) {
  chorus_op op;
  memset(&op, 0, sizeof op);
  op.func = func;
  op.sendbuff = bufs[0];
  op.recvbuff = bufs[1];
  op.count = count;
  op.esize = esize;
  op.dtype = esize == 8 ? ncclFloat64 : esize == 2 ? ncclFloat16 : ncclFloat32;
  op.red.kind = CHORUS_RED_SUM;
  return chorus_gpu_zc_shape(&op, t, n, d);
}

/* Random calls on 2-8 GPUs: zero-copy exactly where the default rules
 * say (AllReduce of 1-16 MiB; AllGather and ReduceScatter from 1 MiB of
 * the larger buffer, up to 64 MiB on 3+ GPUs, in blocks of whole 16-byte
 * units; an AllGather on 2 GPUs from 64 MiB goes on the copy engine,
 * whose rule comes first), and then blocks that cover the buffer and CTAs
 * in range. */
static void shapes(void) {
  unsetenv("CHORUS_TUNE");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  chorus_plan_comm m[R + 1];
  for (int n = 2; n <= R; n++) comm_make(&m[n], n, 0, (uint64_t)n);
  chorus_kern_zc d;
  unsigned s = 7;
  int seen[3] = {0, 0, 0};
  for (int k = 0; k < 20000; k++) {
    const int n = 2 + (int)(rnd(&s) % 7);
    const size_t esize = (size_t)1 << (rnd(&s) % 4);
    const size_t count = (size_t)rnd(&s) * (1 + rnd(&s) % 512) + rnd(&s) % 17;
    const size_t bytes = count * esize, size = bytes * (size_t)n;
    const chorus_plan_comm *c = &m[n];
    chorus_task t = choose(c, CHORUS_FUNC_ALLREDUCE, count, esize, PLAN_FACTS_ALL, NULL, NULL);
    const int ar = t.algo == CHORUS_ALGO_ZEROCOPY;
    EXPECT_EQ_INT(ar, bytes >= MiB && bytes <= 16 * MiB);
    seen[0] += ar;
    if (ar) {
      EXPECT_EQ_INT(shape(&t, CHORUS_FUNC_ALLREDUCE, n, count, esize, &d),
                    CHORUS_KERN_ZC_ALLREDUCE);
      EXPECT_EQ_INT(d.kind, CHORUS_KERN_ZC_ALLREDUCE);
      EXPECT(d.block % 16 == 0);
      EXPECT(d.block * (size_t)n >= bytes);                       /* the blocks cover the buffer */
      EXPECT(d.block * (size_t)(n - 1) < bytes + 16 * (size_t)n); /* and none is idle */
      EXPECT(d.grid >= 1 && d.grid <= c->zc_channels);
      EXPECT(d.bytes == bytes);
    }
    const int blocks = size >= MiB && bytes % 16 == 0 && (n == 2 || size <= 64 * MiB);
    t = choose(c, CHORUS_FUNC_ALLGATHER, count, esize, PLAN_FACTS_ALL, NULL, NULL);
    const int ag_ce = n == 2 && size >= 64 * MiB;
    EXPECT_EQ_INT(t.algo == CHORUS_ALGO_CE, ag_ce);
    EXPECT_EQ_INT(t.algo == CHORUS_ALGO_ZEROCOPY, blocks && !ag_ce);
    seen[1] += t.algo == CHORUS_ALGO_ZEROCOPY;
    if (t.algo == CHORUS_ALGO_ZEROCOPY) {
      EXPECT_EQ_INT(shape(&t, CHORUS_FUNC_ALLGATHER, n, count, esize, &d),
                    CHORUS_KERN_ZC_ALLGATHER);
      EXPECT(d.grid >= 1 && d.grid <= c->zc_channels);
      EXPECT(d.bytes == bytes);
    }
    t = choose(c, CHORUS_FUNC_REDUCESCATTER, count, esize, PLAN_FACTS_ALL, NULL, NULL);
    EXPECT_EQ_INT(t.algo == CHORUS_ALGO_ZEROCOPY, blocks);
    seen[2] += t.algo == CHORUS_ALGO_ZEROCOPY;
    if (t.algo == CHORUS_ALGO_ZEROCOPY) {
      EXPECT_EQ_INT(shape(&t, CHORUS_FUNC_REDUCESCATTER, n, count, esize, &d),
                    CHORUS_KERN_ZC_REDUCESCATTER);
      EXPECT(d.grid >= 1 && d.grid <= c->zc_channels);
      EXPECT(d.bytes == bytes);
    }
  }
  /* the random calls reached every case */
  EXPECT(seen[0] > 100 && seen[1] > 100 && seen[2] > 100);
  /* CTAs grow with the block up to the most allowed */
  chorus_task t = choose(&m[2], CHORUS_FUNC_ALLREDUCE, 4 * MiB, 4, PLAN_FACTS_ALL, NULL, NULL);
  EXPECT_EQ_INT(t.algo, CHORUS_ALGO_ZEROCOPY);
  EXPECT(shape(&t, CHORUS_FUNC_ALLREDUCE, 2, 4 * MiB, 4, &d));
  EXPECT_EQ_INT((int)d.grid, 32); /* 8 MiB blocks: 128 CTAs of 64 KiB, at most 32 */
  t = choose(&m[2], CHORUS_FUNC_ALLREDUCE, (size_t)1 << 18, 4, PLAN_FACTS_ALL, NULL, NULL);
  EXPECT_EQ_INT(t.algo, CHORUS_ALGO_ZEROCOPY);
  EXPECT(shape(&t, CHORUS_FUNC_ALLREDUCE, 2, (size_t)1 << 18, 4, &d));
  EXPECT_EQ_INT((int)d.grid, 8); /* 512 KiB blocks of 64 KiB per CTA */
  t = choose(&m[4], CHORUS_FUNC_ALLGATHER, (size_t)1 << 16, 4, PLAN_FACTS_ALL, NULL, NULL);
  EXPECT_EQ_INT(t.algo, CHORUS_ALGO_ZEROCOPY);
  EXPECT(shape(&t, CHORUS_FUNC_ALLGATHER, 4, (size_t)1 << 16, 4, &d));
  EXPECT_EQ_INT((int)d.grid, 4); /* 256 KiB blocks */
}

/* The edges of the ranges, what never goes zero-copy, and NCCL_ALGO. */
static void rules(void) {
  unsetenv("CHORUS_TUNE");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  chorus_plan_comm m1, m2, m3, m4, m8, m9;
  comm_make(&m1, 1, 0, 1);
  comm_make(&m2, 2, 0, 2);
  comm_make(&m3, 3, 0, 3);
  comm_make(&m4, 4, 0, 4);
  comm_make(&m8, 8, 0, 8);
  comm_make(&m9, 9, 0, 9);
  const int AR = CHORUS_FUNC_ALLREDUCE, AG = CHORUS_FUNC_ALLGATHER, RS = CHORUS_FUNC_REDUCESCATTER;
  const size_t big = MiB; /* floats: 4 MiB */
  /* AllReduce: 1-16 MiB, any element count */
  EXPECT(!zc(&m4, AR, MiB - 16, 1));
  EXPECT(zc(&m4, AR, MiB, 1));
  EXPECT(zc(&m4, AR, MiB + 1, 1)); /* not 16-byte units: AllReduce's blocks are its own */
  EXPECT(zc(&m4, AR, 16 * MiB, 1));
  EXPECT(!zc(&m4, AR, 16 * MiB + 16, 1));
  EXPECT(zc(&m8, AR, big, 4));
  /* AllGather and ReduceScatter: from 1 MiB of the larger buffer (n
   * blocks), in 16-byte units; up to 64 MiB on 3+ GPUs, where AllReduce's
   * upper limit is not theirs */
  EXPECT(zc(&m4, AG, MiB / 4, 1));
  EXPECT(!zc(&m4, AG, MiB / 4 - 16, 1));
  EXPECT(zc(&m4, RS, MiB / 4, 1));
  EXPECT(!zc(&m4, RS, MiB / 4 - 16, 1));
  EXPECT(!zc(&m4, AG, big + 4, 1)); /* blocks not of 16-byte units */
  EXPECT(!zc(&m4, RS, big + 4, 1));
  EXPECT(zc(&m4, AG, 2 * big, 4)); /* 32 MiB */
  EXPECT(zc(&m4, RS, 2 * big, 4));
  EXPECT(zc(&m3, AG, 4 * big, 4)); /* 48 MiB */
  EXPECT(zc(&m4, AG, 4 * big, 4)); /* 64 MiB */
  EXPECT(!zc(&m4, AG, 4 * big + 4, 4));
  EXPECT(!zc(&m4, RS, 4 * big + 4, 4));
  EXPECT(zc(&m2, RS, 16 * big, 4)); /* 2 GPUs: no upper limit (128 MiB) */
  /* 2 GPUs, 64 MiB and more: an AllGather goes on the copy engine where
   * the streams may be joined, else zero-copy */
  EXPECT_EQ_INT(choose(&m2, AG, 8 * big, 4, PLAN_FACTS_ALL, NULL, NULL).algo, CHORUS_ALGO_CE);
  EXPECT_EQ_INT(
      choose(&m2, AG, 8 * big, 4, PLAN_FACTS_ALL & ~CHORUS_FACT_STREAM_OK, NULL, NULL).algo,
      CHORUS_ALGO_ZEROCOPY);
  /* what never goes zero-copy: PreMulSum (each rank's own scalar), other
   * functions, one GPU, more than CHORUS_PLAN_MAX_RANKS, buffers off 16
   * bytes, GPUs that do not reach each other */
  EXPECT(choose(&m4, AR, big, 4, PLAN_FACTS_ALL | CHORUS_FACT_PREMULSUM, NULL, NULL).algo !=
         CHORUS_ALGO_ZEROCOPY);
  EXPECT(zc(&m4, AR, big, 4)); /* the same without PreMulSum (SumPostDiv, say) */
  EXPECT(!zc(&m4, CHORUS_FUNC_BROADCAST, big, 4));
  EXPECT(!zc(&m4, CHORUS_FUNC_REDUCE, big, 4));
  EXPECT(!zc(&m4, CHORUS_FUNC_ALLTOALL, big, 4));
  EXPECT(!zc(&m2, CHORUS_FUNC_SEND, big, 4));
  EXPECT(!zc(&m1, AR, big, 4));
  EXPECT(!zc(&m9, AR, big, 4));
  EXPECT(!zc(&m9, AG, big, 4));
  EXPECT(choose(&m4, AR, big, 4, PLAN_FACTS_ALL, bufs[0] + 8, NULL).algo != CHORUS_ALGO_ZEROCOPY);
  EXPECT(choose(&m4, AR, big, 4, PLAN_FACTS_ALL, NULL, bufs[1] + 8).algo != CHORUS_ALGO_ZEROCOPY);
  EXPECT(choose(&m4, AG, big, 4, PLAN_FACTS_ALL, NULL, bufs[1] + 16).algo == CHORUS_ALGO_ZEROCOPY);
  m4.staged = 1;
  EXPECT(!zc(&m4, AR, big, 4));
  m4.staged = 0;
  /* ranks in processes of their own: only through symmetric windows */
  m4.one_process = 0;
  EXPECT(!zc(&m4, AR, big, 4));
  EXPECT(choose(&m4, AR, big, 4, PLAN_FACTS_ALL | CHORUS_FACT_SYM_WINDOWS, NULL, NULL).algo ==
         CHORUS_ALGO_ZEROCOPY);
  m4.one_process = 1;
  /* NCCL_ALGO: naming AllReduce without zero-copy keeps it away from
   * AllReduce alone; a plain list without it, from every function */
  setenv("NCCL_ALGO", "allreduce:ring", 1);
  comm_make(&m4, 4, 0, 4);
  EXPECT_EQ_INT(choose(&m4, AR, big, 4, PLAN_FACTS_ALL, NULL, NULL).algo, CHORUS_ALGO_RING);
  EXPECT(zc(&m4, AG, big, 4));
  EXPECT(zc(&m4, RS, big, 4));
  setenv("NCCL_ALGO", "allreduce:^zerocopy", 1);
  comm_make(&m4, 4, 0, 4);
  EXPECT(!zc(&m4, AR, big, 4));
  EXPECT(zc(&m4, AG, big, 4));
  setenv("NCCL_ALGO", "^zerocopy", 1);
  comm_make(&m4, 4, 0, 4);
  EXPECT(!zc(&m4, AR, big, 4));
  EXPECT(!zc(&m4, AG, big, 4));
  EXPECT(!zc(&m4, RS, big, 4));
  unsetenv("NCCL_ALGO");
  comm_make(&m4, 4, 0, 4);
  EXPECT(zc(&m4, AR, big, 4));
}

/* Zero-copy through a group of one process: every rank's call of the
 * collective in the group, described alike, and every GPU reaching the
 * buffers the kernel touches on other ranks (AllReduce: inputs and
 * outputs; AllGather: outputs; ReduceScatter: inputs). Each call then
 * names every rank's (peer_call); otherwise every rank's call falls back
 * to the same algorithm. The calls are in a mixed rank order. */
static void group(void) {
  unsetenv("CHORUS_TUNE");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  enum { N = 4 };
  static const int order[N] = {2, 0, 3, 1}; /* call i is rank order[i]'s */
  static _Alignas(16) char buf[N][2][64];
  chorus_plan_comm m[N];
  for (int r = 0; r < N; r++) comm_make(&m[r], N, r, 0x77);
  struct {
    int func;
    uint32_t lack;  /* facts rank 2 lacks */
    int ncalls;     /* calls in the group (the first ones) */
    int other_desc; /* rank 3's call described differently */
    int premulsum;  /* every rank's call a PreMulSum */
    int want;       /* zero-copy */
  } cases[] = {
      {CHORUS_FUNC_ALLREDUCE, 0, N, 0, 0, 1},
      {CHORUS_FUNC_ALLREDUCE, CHORUS_FACT_SEND_REACH, N, 0, 0, 0},
      {CHORUS_FUNC_ALLREDUCE, CHORUS_FACT_RECV_REACH, N, 0, 0, 0},
      {CHORUS_FUNC_ALLREDUCE, 0, N - 1, 0, 0, 0},
      {CHORUS_FUNC_ALLREDUCE, 0, N, 1, 0, 0},
      {CHORUS_FUNC_ALLREDUCE, 0, N, 0, 1, 0},
      {CHORUS_FUNC_ALLGATHER, 0, N, 0, 0, 1},
      {CHORUS_FUNC_ALLGATHER, CHORUS_FACT_SEND_REACH, N, 0, 0, 1},
      {CHORUS_FUNC_ALLGATHER, CHORUS_FACT_RECV_REACH, N, 0, 0, 0},
      {CHORUS_FUNC_REDUCESCATTER, CHORUS_FACT_RECV_REACH, N, 0, 0, 1},
      {CHORUS_FUNC_REDUCESCATTER, CHORUS_FACT_SEND_REACH, N, 0, 0, 0},
      {CHORUS_FUNC_REDUCESCATTER, 0, N - 2, 0, 0, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const int before = unit_failures;
    uint32_t have[N];
    for (int r = 0; r < N; r++) have[r] = PLAN_FACTS_ALL & ~(r == 2 ? cases[k].lack : 0u);
    const chorus_plan_probe probe = {plan_probe_by_rank, have};
    chorus_plan_call c[N];
    chorus_task t[N];
    const size_t count = MiB; /* floats: a 4 MiB AllReduce, 1 MiB blocks */
    for (int i = 0; i < N; i++) {
      const int r = order[i];
      const uint32_t pms = cases[k].premulsum ? CHORUS_FACT_PREMULSUM : 0;
      c[i] = (chorus_plan_call){.comm = &m[r],
                                .func = cases[k].func,
                                .count = count,
                                .esize = 4,
                                .root = -1,
                                .desc = cases[k].other_desc && r == 3 ? 0x901 : 0x900,
                                .seq = 12,
                                .send = buf[r][0],
                                .recv = buf[r][1],
                                .facts = pms,
                                .known = CHORUS_FACT_PREMULSUM};
    }
    char err[256] = "";
    const size_t n = (size_t)cases[k].ncalls;
    EXPECT_EQ_INT(chorus_plan_group(c, n, &probe, t, err, sizeof err), 0);
    for (size_t i = 0; i < n; i++) {
      EXPECT_EQ_INT(t[i].algo == CHORUS_ALGO_ZEROCOPY, cases[k].want);
      EXPECT_EQ_INT(t[i].algo, t[0].algo); /* every rank alike */
      for (int p = 0; p < R; p++) {
        int want = -1;
        for (int j = 0; j < N && cases[k].want && p < N; j++)
          if (order[j] == p) want = j;
        EXPECT_EQ_INT(t[i].peer_call[p], want);
      }
    }
    if (unit_failures != before) fprintf(stderr, "group case %zu\n", k);
  }
}

int main(void) {
  RUN(random_groups);
  RUN(shapes);
  RUN(rules);
  RUN(group);
  return unit_report();
}
