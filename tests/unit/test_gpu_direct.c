/*
 * test_gpu_direct.c - when GPU collectives run zero-copy (gpu/direct.c),
 * and which calls of a group run together.
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
 * calls of equal label, one per rank, with every rank present. Shapes: blocks of whole 16-byte
 * units that cover the buffer, CTAs in range, the thresholds and exclusions honoured.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "unit.h"

#define MAXOPS 40
#define R      CHORUS_KERN_MAX_RANKS

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
  const size_t full = chorus_gpu_direct_match(key, seq, rank, nr, cand, (size_t)n, match);
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

static chorus_gpu_direct_cfg cfg_default(void) {
  chorus_gpu_direct_cfg c;
  memset(&c, 0, sizeof c);
  c.on = 1;
  c.min_bytes = 1 << 18;
  c.max_bytes = 0;
  c.channels = 32;
  c.cta_bytes = 1 << 16;
  return c;
}

static int shape(const chorus_gpu_direct_cfg *c, const chorus_gpu_tune *t, int func, int n,
                 size_t count, size_t esize, int redkind, chorus_kern_direct *d) {
  static char buf[16];
  chorus_op op;
  memset(&op, 0, sizeof op);
  op.func = func;
  op.sendbuff = op.recvbuff = buf;
  op.count = count;
  op.esize = esize;
  op.dtype = esize == 8 ? ncclFloat64 : esize == 2 ? ncclFloat16 : ncclFloat32;
  op.red.kind = (chorus_red_kind)redkind;
  return chorus_gpu_direct_shape(c, t, n, &op, d);
}

static void shapes(void) {
  chorus_gpu_tune t;
  memset(&t, 0, sizeof t);
  chorus_gpu_direct_cfg c = cfg_default();
  chorus_kern_direct d;
  unsigned s = 7;
  for (int k = 0; k < 20000; k++) {
    const int n = 2 + (int)(rnd(&s) % 7);
    const size_t esize = (size_t)1 << (rnd(&s) % 4);
    const size_t count = (size_t)rnd(&s) * (1 + rnd(&s) % 512) + rnd(&s) % 17;
    const size_t bytes = count * esize;
    if (shape(&c, &t, CHORUS_FUNC_ALLREDUCE, n, count, esize, CHORUS_RED_SUM, &d)) {
      EXPECT(bytes >= c.min_bytes);
      EXPECT_EQ_INT(d.kind, CHORUS_DIRECT_ALLREDUCE);
      EXPECT(d.block % 16 == 0);
      EXPECT(d.block * (size_t)n >= bytes);                       /* the blocks cover the buffer */
      EXPECT(d.block * (size_t)(n - 1) < bytes + 16 * (size_t)n); /* and none is idle */
      EXPECT(d.grid >= 1 && d.grid <= c.channels);
      EXPECT(d.bytes == bytes);
    } else {
      EXPECT(bytes < c.min_bytes);
    }
    const int ag = shape(&c, &t, CHORUS_FUNC_ALLGATHER, n, count, esize, 0, &d);
    EXPECT_EQ_INT(ag != 0, bytes * (size_t)n >= c.min_bytes && bytes % 16 == 0);
    const int rs = shape(&c, &t, CHORUS_FUNC_REDUCESCATTER, n, count, esize, CHORUS_RED_MAX, &d);
    EXPECT_EQ_INT(rs != 0, bytes * (size_t)n >= c.min_bytes && bytes % 16 == 0);
    if (rs) EXPECT(d.grid >= 1 && d.grid <= c.channels);
  }
  /* what never goes zero-copy */
  const size_t big = 1 << 20;
  EXPECT(!shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 4, big, 4, CHORUS_RED_PREMULSUM, &d));
  EXPECT(!shape(&c, &t, CHORUS_FUNC_BROADCAST, 4, big, 4, 0, &d));
  EXPECT(!shape(&c, &t, CHORUS_FUNC_SEND, 2, big, 4, 0, &d));
  EXPECT(!shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 1, big, 4, CHORUS_RED_SUM, &d));
  EXPECT(!shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 9, big, 4, CHORUS_RED_SUM, &d));
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 4, big, 4, CHORUS_RED_SUMPOSTDIV, &d));
  t.algo_named[CHORUS_FUNC_ALLREDUCE] = 1; /* NCCL_ALGO=allreduce:... */
  EXPECT(!shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 4, big, 4, CHORUS_RED_SUM, &d));
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLGATHER, 4, big, 4, 0, &d));
  t.algo_named[CHORUS_FUNC_ALLREDUCE] = 0;
  c.max_bytes = big * 4 - 1;
  EXPECT(!shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 4, big, 4, CHORUS_RED_SUM, &d));
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 4, big / 2, 4, CHORUS_RED_SUM, &d));
  /* AllReduce's upper limit is its own */
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLGATHER, 4, big, 4, 0, &d));
  EXPECT(shape(&c, &t, CHORUS_FUNC_REDUCESCATTER, 4, big, 4, CHORUS_RED_SUM, &d));
  /* AllGather's and ReduceScatter's holds on 3+ ranks alone, on the larger
   * buffer (n times the AllGather's count) */
  c.agrs_max = big * 4 * 3;
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLGATHER, 3, big, 4, 0, &d));
  EXPECT(!shape(&c, &t, CHORUS_FUNC_ALLGATHER, 4, big, 4, 0, &d));
  EXPECT(!shape(&c, &t, CHORUS_FUNC_REDUCESCATTER, 4, big, 4, CHORUS_RED_SUM, &d));
  EXPECT(shape(&c, &t, CHORUS_FUNC_REDUCESCATTER, 2, big * 8, 4, CHORUS_RED_SUM, &d));
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLGATHER, 2, big * 8, 4, 0, &d));
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 4, big / 2, 4, CHORUS_RED_SUM, &d));
  c.on = 0;
  EXPECT(!shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 4, big / 2, 4, CHORUS_RED_SUM, &d));
  /* CTAs grow with the block up to the most allowed */
  c = cfg_default();
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 2, (size_t)1 << 30, 4, CHORUS_RED_SUM, &d));
  EXPECT_EQ_INT((int)d.grid, 32);
  EXPECT(shape(&c, &t, CHORUS_FUNC_ALLREDUCE, 2, (size_t)1 << 16, 4, CHORUS_RED_SUM, &d));
  EXPECT_EQ_INT((int)d.grid, 2); /* 128 KiB blocks of 64 KiB per CTA */
}

int main(void) {
  RUN(random_groups);
  RUN(shapes);
  return unit_report();
}
