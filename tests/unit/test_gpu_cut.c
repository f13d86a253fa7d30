/*
 * test_gpu_cut.c - a staged call across hosts cut into lanes and pieces
 * (gpu/cut.h) computes the call: the copies to and from the staging that
 * cut.h queues, and the call of each share on the staging at the offsets
 * cut.h gives, replayed on host memory for every rank, leave each rank's
 * output what the collective computed directly on the user's buffers
 * gives. AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll,
 * Gather and Scatter (their block sides laid share by share); 1 to 4
 * ranks, counts that do and do not divide, 1 to 4 lanes, 1 to 64 pieces,
 * 4- and 8-byte elements; every byte is copied once each way, and no
 * copy reaches past its buffers (guards). The same with each side staged
 * in two slots of chorus_cut_slot_elems, piece j in slot j % 2 at its
 * chorus_cut_piece_span (as gpu/proxy.c stages calls in pieces), the
 * copies ordered as the stream orders them: piece j + 1's input in before
 * the host runs piece j, after piece j - 1's output came back. And how
 * many pieces a call moves in.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/func.h"
#include "gpu/cut.h"
#include "unit.h"

#define MAXN       4
#define GUARD      64
#define GUARD_BYTE 0xa5

/* A buffer of n elements of es bytes with guard bytes after it. */
static char *buffer(size_t n, size_t es) {
  char *p = malloc(n * es + GUARD);
  if (!p) abort();
  memset(p, 0, n * es);
  memset(p + n * es, GUARD_BYTE, GUARD);
  return p;
}

static int guard_intact(const char *p, size_t n, size_t es) {
  for (size_t i = 0; i < GUARD; i++)
    if ((unsigned char)p[n * es + i] != GUARD_BYTE) return 0;
  return 1;
}

static int64_t get(const char *p, size_t i, size_t es) {
  if (es == 4) {
    int32_t v;
    memcpy(&v, p + i * 4, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, p + i * 8, 8);
  return v;
}

static void put(char *p, size_t i, size_t es, int64_t v) {
  if (es == 4) {
    const int32_t w = (int32_t)v;
    memcpy(p + i * 4, &w, 4);
  } else {
    memcpy(p + i * 8, &v, 8);
  }
}

/* cut.h's copier on host memory; arg counts the bytes copied. */
static int host_rows(void *arg, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                     size_t width, size_t rows) {
  *(size_t *)arg += width * rows;
  for (size_t r = 0; r < rows; r++)
    memcpy((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, width);
  return 0;
}

/* The call of `len` elements of one share across the ranks, on the
 * staging at element offsets soff and roff (as the host path runs it). */
static void run_share(int func, int n, int root, size_t es, char **ss, char **sr, size_t soff,
                      size_t roff, size_t len) {
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < len; i++) switch (func) {
      case CHORUS_FUNC_ALLREDUCE: {
        int64_t v = 0;
        for (int b = 0; b < n; b++) v += get(ss[b], soff + i, es);
        put(sr[r], roff + i, es, v);
        break;
      }
      case CHORUS_FUNC_ALLGATHER:
        for (int b = 0; b < n; b++)
          put(sr[r], roff + (size_t)b * len + i, es, get(ss[b], soff + i, es));
        break;
      case CHORUS_FUNC_REDUCESCATTER: {
        int64_t v = 0;
        for (int b = 0; b < n; b++) v += get(ss[b], soff + (size_t)r * len + i, es);
        put(sr[r], roff + i, es, v);
        break;
      }
      case CHORUS_FUNC_BROADCAST:
        put(sr[r], roff + i, es, get(ss[root], soff + i, es));
        break;
      case CHORUS_FUNC_REDUCE:
        if (r == root) {
          int64_t v = 0;
          for (int b = 0; b < n; b++) v += get(ss[b], soff + i, es);
          put(sr[r], roff + i, es, v);
        }
        break;
      case CHORUS_FUNC_ALLTOALL: /* block b of r's output: block r of b's input */
        for (int b = 0; b < n; b++)
          put(sr[r], roff + (size_t)b * len + i, es, get(ss[b], soff + (size_t)r * len + i, es));
        break;
      case CHORUS_FUNC_GATHER:
        if (r == root)
          for (int b = 0; b < n; b++)
            put(sr[r], roff + (size_t)b * len + i, es, get(ss[b], soff + i, es));
        break;
      case CHORUS_FUNC_SCATTER:
        put(sr[r], roff + i, es, get(ss[root], soff + (size_t)r * len + i, es));
        break;
      }
}

/* The collective on the user's buffers directly: rank r's output. */
static int64_t expect_at(int func, int n, int root, size_t count, size_t es, char **us, int r,
                         size_t i) {
  int64_t v = 0;
  switch (func) {
  case CHORUS_FUNC_ALLREDUCE:
  case CHORUS_FUNC_REDUCE:
    for (int b = 0; b < n; b++) v += get(us[b], i, es);
    return v;
  case CHORUS_FUNC_ALLGATHER:
  case CHORUS_FUNC_GATHER:
    return get(us[i / count], i % count, es);
  case CHORUS_FUNC_ALLTOALL:
    return get(us[i / count], (size_t)r * count + i % count, es);
  case CHORUS_FUNC_SCATTER:
    return get(us[root], (size_t)r * count + i, es);
  case CHORUS_FUNC_REDUCESCATTER:
    for (int b = 0; b < n; b++) v += get(us[b], (size_t)r * count + i, es);
    return v;
  default: /* Broadcast */
    return get(us[root], i, es);
  }
}

/* Where piece j's staging of a side begins, as the piece's shares
 * address it: the whole staging (slot 0) or, in slots, slot j % 2 less
 * the piece's offset in the whole (an address that may lie before the
 * slot, as gpu/proxy.c computes it). */
static char *piece_base(const chorus_cut *c, int recv, int j, char *stage, size_t slot) {
  if (!slot) return stage;
  size_t off, len;
  chorus_cut_piece_span(c, recv, j, &off, &len);
  return (char *)((uintptr_t)stage + (size_t)(j % 2) * slot * c->esize - off * c->esize);
}

/* Every rank's copies of piece j's shares of one side: into the staging
 * (send side) or back (recv); the bytes moved added to moved[]. */
static void move_piece(const chorus_cut *c, int recv, int j, int n, char **user, char **stage,
                       size_t slot, const size_t *elems, size_t *moved) {
  for (int r = 0; r < n; r++)
    chorus_cut_copies(c, recv, elems[r], j * c->lanes, (j + 1) * c->lanes, user[r],
                      piece_base(c, recv, j, stage[r], slot), !recv, host_rows, &moved[r]);
}

/* One call cut into lanes x pieces, replayed, each side staged whole or
 * (slots) in two slots; 0 when every rank's output is right and every
 * guard intact. */
static int replay(int func, int n, size_t count, size_t es, int lanes, int pieces, int slots) {
  const int root = n - 1;
  const chorus_cut c = {func, count, es, n, lanes, pieces};
  char *us[MAXN], *ur[MAXN], *ss[MAXN], *sr[MAXN];
  size_t ns[MAXN], nr[MAXN];
  /* slot elements per side (0: staged whole) */
  const size_t slot_s = slots ? chorus_cut_slot_elems(&c, 0) : 0,
               slot_r = slots ? chorus_cut_slot_elems(&c, 1) : 0;
  for (int r = 0; r < n; r++) {
    ns[r] = chorus_func_send_elems(func, count, r, root, n);
    nr[r] = chorus_func_recv_elems(func, count, r, root, n);
    us[r] = buffer(ns[r], es);
    ur[r] = buffer(nr[r], es);
    ss[r] = buffer(slots ? 2 * slot_s : ns[r], es);
    sr[r] = buffer(slots ? 2 * slot_r : nr[r], es);
    for (size_t i = 0; i < ns[r]; i++)
      put(us[r], i, es, (int64_t)(r + 1) * 1000003 + (int64_t)i * 7);
  }
  const int cut = lanes * pieces;
  size_t moved_in[MAXN] = {0}, moved_out[MAXN] = {0};
  /* In the stream's order: piece j + 1's input goes in (after piece
   * j - 1's output came back) before the host runs piece j. */
  move_piece(&c, 0, 0, n, us, ss, slot_s, ns, moved_in);
  for (int j = 0; j < pieces; j++) {
    if (j > 0) move_piece(&c, 1, j - 1, n, ur, sr, slot_r, nr, moved_out);
    if (j + 1 < pieces) move_piece(&c, 0, j + 1, n, us, ss, slot_s, ns, moved_in);
    char *ps[MAXN], *pr[MAXN];
    for (int r = 0; r < n; r++) {
      ps[r] = piece_base(&c, 0, j, ss[r], slot_s);
      pr[r] = piece_base(&c, 1, j, sr[r], slot_r);
    }
    for (int k = 0; k < lanes; k++) {
      size_t first, len, soff, roff;
      chorus_cut_share(count, j * lanes + k, cut, &first, &len);
      chorus_cut_offsets(&c, first, &soff, &roff);
      run_share(func, n, root, es, ps, pr, soff, roff, len);
    }
  }
  move_piece(&c, 1, pieces - 1, n, ur, sr, slot_r, nr, moved_out);
  int bad = 0;
  for (int r = 0; r < n; r++) {
    for (size_t i = 0; i < nr[r] && !bad; i++)
      if (get(ur[r], i, es) != expect_at(func, n, root, count, es, us, r, i)) {
        fprintf(stderr,
                "func %d, %d ranks, count %zu, %zu-byte elements, %d lanes x %d pieces%s: rank "
                "%d element %zu is %lld, want %lld\n",
                func, n, count, es, lanes, pieces, slots ? " in slots" : "", r, i,
                (long long)get(ur[r], i, es),
                (long long)expect_at(func, n, root, count, es, us, r, i));
        bad = 1;
      }
    /* Each byte moves once each way: a piece copies its own range only. */
    if (moved_in[r] != ns[r] * es || moved_out[r] != nr[r] * es) {
      fprintf(stderr,
              "func %d, %d ranks, count %zu, %d lanes x %d pieces: rank %d copied %zu bytes in "
              "and %zu out, want %zu and %zu\n",
              func, n, count, lanes, pieces, r, moved_in[r], moved_out[r], ns[r] * es, nr[r] * es);
      bad = 1;
    }
    if (!guard_intact(us[r], ns[r], es) || !guard_intact(ur[r], nr[r], es) ||
        !guard_intact(ss[r], slots ? 2 * slot_s : ns[r], es) ||
        !guard_intact(sr[r], slots ? 2 * slot_r : nr[r], es)) {
      fprintf(stderr,
              "func %d, %d ranks, count %zu, %d lanes x %d pieces%s: a copy ran past rank %d's "
              "buffers\n",
              func, n, count, lanes, pieces, slots ? " in slots" : "", r);
      bad = 1;
    }
  }
  for (int r = 0; r < n; r++) {
    free(us[r]);
    free(ur[r]);
    free(ss[r]);
    free(sr[r]);
  }
  return bad;
}

static void every_cut_computes_the_call(void) {
  static const int funcs[] = {CHORUS_FUNC_ALLREDUCE,     CHORUS_FUNC_ALLGATHER,
                              CHORUS_FUNC_REDUCESCATTER, CHORUS_FUNC_BROADCAST,
                              CHORUS_FUNC_REDUCE,        CHORUS_FUNC_ALLTOALL,
                              CHORUS_FUNC_GATHER,        CHORUS_FUNC_SCATTER};
  static const size_t counts[] = {1, 2, 3, 5, 17, 64, 1001};
  /* Piece counts: the small ones, and those next to where shares of the
   * counts above run out or divide evenly (to CHORUS_CUT_MAX_PIECES). */
  static const int piece_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 21, 31, 32, 33, 63, 64};
  int runs = 0, wrong = 0;
  for (size_t f = 0; f < sizeof funcs / sizeof funcs[0]; f++)
    for (int n = 1; n <= MAXN; n++)
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
        for (size_t es = 4; es <= 8; es += 4)
          for (int lanes = 1; lanes <= 4; lanes++)
            for (size_t pi = 0; pi < sizeof piece_counts / sizeof piece_counts[0]; pi++)
              for (int slots = 0; slots <= (piece_counts[pi] > 1); slots++) {
                const int pieces = piece_counts[pi];
                if ((size_t)(lanes * pieces) > counts[ci]) continue; /* no empty shares */
                runs++;
                wrong += replay(funcs[f], n, counts[ci], es, lanes, pieces, slots);
              }
  EXPECT(runs > 15000);
  EXPECT_EQ_INT(wrong, 0);
}

/* Two slots hold what pieces need at once: a slot is the largest piece's
 * span, and the pieces' spans tile the side in order. */
static void slots_fit_the_pieces(void) {
  const chorus_cut ag = {CHORUS_FUNC_ALLGATHER, 1001, 4, 3, 4, 8};
  /* 1001 elements in 32 shares: the first 9 of 32, the rest of 31; the
   * first piece's 4 shares, 128 elements, the most; x 3 ranks on the
   * side laid share by share. */
  EXPECT_EQ_INT((int)chorus_cut_slot_elems(&ag, 0), 128);
  EXPECT_EQ_INT((int)chorus_cut_slot_elems(&ag, 1), 3 * 128);
  static const int funcs[] = {CHORUS_FUNC_ALLREDUCE,     CHORUS_FUNC_ALLGATHER,
                              CHORUS_FUNC_REDUCESCATTER, CHORUS_FUNC_ALLTOALL,
                              CHORUS_FUNC_GATHER,        CHORUS_FUNC_SCATTER};
  for (size_t f = 0; f < sizeof funcs / sizeof funcs[0]; f++)
    for (int pieces = 2; pieces <= CHORUS_CUT_MAX_PIECES; pieces += 7)
      for (int recv = 0; recv < 2; recv++) {
        const chorus_cut c = {funcs[f], 4099, 8, 4, 3, pieces};
        size_t next = 0, most = 0;
        for (int j = 0; j < pieces; j++) {
          size_t off, len;
          chorus_cut_piece_span(&c, recv, j, &off, &len);
          EXPECT(off == next && len > 0);
          next = off + len;
          if (len > most) most = len;
        }
        const size_t h = chorus_cut_laid(&c, recv) ? 4 : 1;
        EXPECT(next == h * 4099);
        EXPECT(most == chorus_cut_slot_elems(&c, recv));
      }
}

static void pieces_follow_the_size(void) {
  const size_t M = 1 << 20;
  /* AllReduce of 16 MiB in 4 MiB pieces: 4; AllGather's and
   * ReduceScatter's size is the whole of the larger side (2 x 16 MiB: 8;
   * 3 x 4 MiB: 3); 1 GiB: 64, the most. */
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_ALLREDUCE, 4 * M, 4, 2, 1, 4 * M), 4);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_ALLGATHER, 4 * M, 4, 2, 4, 4 * M), 8);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_ALLREDUCE, 256 * M, 4, 2, 4, 4 * M), 64);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_REDUCESCATTER, M, 4, 3, 2, 4 * M), 3);
  /* Under two pieces: halves from 2 MiB (AllGather's 2 x 1 MiB too), whole
   * below; off, or a function not cut element by element: whole. */
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_ALLREDUCE, 2 * M - 1, 4, 2, 1, 4 * M), 2);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_BROADCAST, 2 * M, 1, 2, 1, 4 * M), 2);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_ALLGATHER, M / 4, 4, 2, 4, 4 * M), 2);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_ALLREDUCE, 2 * M - 1, 1, 2, 1, 4 * M), 1);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_REDUCE, M / 2 - 1, 4, 2, 1, 4 * M), 1);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_ALLREDUCE, 64 * M, 4, 2, 1, 0), 1);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_SEND, 64 * M, 4, 2, 1, 4 * M), 1);
  /* AlltoAll's, Gather's and Scatter's size is their block side's: 3 x 4
   * MiB in 4 MiB pieces, 3; 2 x 512 KiB, halves. */
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_ALLTOALL, M, 4, 3, 1, 4 * M), 3);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_GATHER, M, 4, 3, 2, 4 * M), 3);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_SCATTER, M / 8, 4, 2, 1, 4 * M), 1);
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_SCATTER, M / 4, 4, 2, 1, 4 * M), 2);
  /* Never a share without elements: at most count / lanes pieces. */
  EXPECT_EQ_INT(chorus_cut_pieces(CHORUS_FUNC_BROADCAST, 12, 1 << 20, 2, 4, 4 * M), 3);
  for (size_t count = 1; count < 4096; count = count * 3 + 1)
    for (int lanes = 1; lanes <= 8; lanes++) {
      const int p = chorus_cut_pieces(CHORUS_FUNC_REDUCE, count, 8, 4, lanes, 1024);
      EXPECT(p >= 1 && p <= CHORUS_CUT_MAX_PIECES);
      EXPECT(p == 1 || (size_t)(p * lanes) <= count);
    }
}

int main(void) {
  RUN(every_cut_computes_the_call);
  RUN(slots_fit_the_pieces);
  RUN(pieces_follow_the_size);
  return unit_report();
}
