/*
 * test_colls.c - the correctness matrix for every collective on host memory:
 * collective x data type x operator (reductions: the five built-ins plus
 * PreMulSum with a host and a "device" scalar) x count (0, 1, 37 (small
 * calls on fast lines, coll/node.c, their blocks across line boundaries),
 * a prime, a size that spans pipeline rounds) x in place / out of place x
 * root (first and last), against the independent reference in
 * harness/ref.c.
 *
 * bcast_big: Broadcast of 64 KiB-16 MiB (and a few bytes more) in place
 * and not, from the first and the last rank, every byte checked and the
 * bytes after the output untouched: sizes where a root in place writes
 * part of its readers' outputs itself (coll/node.c, root_lead).
 *
 * big_mix: rounds of AllGather, AllReduce, AlltoAll, ReduceScatter,
 * Broadcast and a ring of Send/Recv, each of 600 KiB per rank, on one
 * communicator, every element checked: calls that only move bytes and
 * calls that reduce, in turn (with NCCL_SOCKET_NTHREADS=auto the socket
 * threads take the first kind's messages and the rank's thread moves the
 * second's, core/comm.c).
 *
 * usage: test_colls COLLECTIVE threads|procs NRANKS
 *        test_colls COLLECTIVE env     (one rank: RANK, WORLD_SIZE and
 *                                       NCCL_COMM_ID from the environment)
 *   COLLECTIVE: allreduce broadcast bcast reduce allgather reducescatter
 *               alltoall gather scatter, or all; or bcast_big, big_mix,
 *               small_run, big_cut
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "ref.h"
#include "spawn.h"

typedef enum { AR, BCAST, BCAST_INPLACE, REDUCE, AG, RS, A2A, GATHER, SCATTER, NCOLLS } coll_t;

static const char *const names[NCOLLS] = {"allreduce", "broadcast", "bcast",
                                          "reduce",    "allgather", "reducescatter",
                                          "alltoall",  "gather",    "scatter"};

static int is_reduction(coll_t c) {
  return c == AR || c == REDUCE || c == RS;
}
static int is_rooted(coll_t c) {
  return c == BCAST || c == BCAST_INPLACE || c == REDUCE || c == GATHER || c == SCATTER;
}

static const size_t counts[] = {0, 1, 37, 1031, 12007};
#define NOPS 7 /* sum prod max min avg premul(host) premul(device) */

/* Elements in the send and receive buffers of rank r. */
static void sizes(coll_t c, size_t n, int nranks, size_t *send, size_t *recv) {
  size_t all = n * (size_t)nranks;
  switch (c) {
  case AG:
    *send = n, *recv = all;
    break;
  case RS:
    *send = all, *recv = n;
    break;
  case A2A:
    *send = all, *recv = all;
    break;
  case GATHER:
    *send = n, *recv = all;
    break;
  case SCATTER:
    *send = all, *recv = n;
    break;
  default:
    *send = n, *recv = n;
    break;
  }
}

static ncclResult_t call(coll_t c, const void *s, void *r, size_t n, ncclDataType_t t,
                         ncclRedOp_t op, int root, ncclComm_t comm) {
  switch (c) {
  case AR:
    return ncclAllReduce(s, r, n, t, op, comm, NULL);
  case BCAST:
    return ncclBroadcast(s, r, n, t, root, comm, NULL);
  case BCAST_INPLACE:
    return ncclBcast(r, n, t, root, comm, NULL);
  case REDUCE:
    return ncclReduce(s, r, n, t, op, root, comm, NULL);
  case AG:
    return ncclAllGather(s, r, n, t, comm, NULL);
  case RS:
    return ncclReduceScatter(s, r, n, t, op, comm, NULL);
  case A2A:
    return ncclAlltoAll(s, r, n, t, comm, NULL);
  case GATHER:
    return ncclGather(s, r, n, t, root, comm, NULL);
  case SCATTER:
    return ncclScatter(s, r, n, t, root, comm, NULL);
  default:
    return ncclInternalError;
  }
}

/* Verifies rank `me`'s result. Inputs: rank q's send buffer holds its input
 * sequence from index 0. */
static size_t verify(coll_t c, ncclDataType_t t, int refop, int me, int n, int root, size_t cnt,
                     const void *out, double scalar, const char *what) {
  size_t es = ref_type_size(t), bad = 0;
  switch (c) {
  case AR:
    return ref_check(t, refop, n, out, cnt, scalar, what);
  case REDUCE:
    return me == root ? ref_check(t, refop, n, out, cnt, scalar, what) : 0;
  case RS:
    return ref_check_at(t, refop, n, out, (size_t)me * cnt, cnt, scalar, what);
  case BCAST:
  case BCAST_INPLACE:
    return ref_check_copy(t, 0, root, out, 0, cnt, what);
  case AG:
    for (int q = 0; q < n; q++)
      bad += ref_check_copy(t, 0, q, (const char *)out + (size_t)q * cnt * es, 0, cnt, what);
    return bad;
  case A2A:
    for (int q = 0; q < n; q++)
      bad += ref_check_copy(t, 0, q, (const char *)out + (size_t)q * cnt * es, (size_t)me * cnt,
                            cnt, what);
    return bad;
  case GATHER:
    if (me != root) return 0;
    for (int q = 0; q < n; q++)
      bad += ref_check_copy(t, 0, q, (const char *)out + (size_t)q * cnt * es, 0, cnt, what);
    return bad;
  case SCATTER:
    return ref_check_copy(t, 0, root, out, (size_t)me * cnt, cnt, what);
  default:
    return 1;
  }
}

static int run_case(ncclComm_t comm, coll_t c, ncclDataType_t t, int opi, size_t cnt, int inplace,
                    int root, int me, int n, unsigned char *sendbuf, unsigned char *recvbuf) {
  size_t es = ref_type_size(t), ns, nr;
  sizes(c, cnt, n, &ns, &nr);
  int refop = !is_reduction(c) ? 0 : opi <= 4 ? opi : 5;
  double scalar = opi == 4 ? 1.0 / n : 2.0;
  memset(recvbuf, 0xa5, nr * es + 8);
  /* Where the call reads and writes: NCCL's in-place layouts. */
  void *out = recvbuf;
  const void *in = sendbuf;
  if (inplace) {
    switch (c) {
    case AG:
      in = recvbuf + (size_t)me * cnt * es;
      break;
    case RS:
      out = sendbuf + (size_t)me * cnt * es;
      in = sendbuf;
      break;
    case GATHER:
      in = recvbuf + (size_t)root * cnt * es;
      break;
    case SCATTER:
      out = sendbuf + (size_t)root * cnt * es;
      break; /* root only */
    default:
      out = sendbuf, in = sendbuf;
      break;
    }
    if (c == SCATTER && me != root) out = recvbuf;
    if (c == GATHER && me != root) in = sendbuf;
  }
  if (c == BCAST_INPLACE) out = sendbuf, in = sendbuf;
  /* Inputs: this rank's input sequence in the send role buffer. */
  ref_fill(t, refop, me, (void *)in, 0, ns);
  if (c == RS && inplace) out = sendbuf + (size_t)me * cnt * es;
  ncclRedOp_t op = (ncclRedOp_t)(is_reduction(c) ? opi : 0);
  unsigned char sc[8];
  if (is_reduction(c) && opi >= 5) {
    if (ref_is_float(t))
      ref_set(t, sc, 0, ref_premul_scalar(me));
    else
      ref_set_u64(t, sc, 0, (uint64_t)ref_premul_scalar(me));
    if (ncclRedOpCreatePreMulSum(&op, sc, t, opi == 5 ? ncclScalarHostImmediate : ncclScalarDevice,
                                 comm) != ncclSuccess)
      return 1;
  }
  /* Rooted calls: non-roots pass buffers NCCL says are unused as NULL. */
  const void *sarg = in;
  void *rarg = out;
  if (c == REDUCE && me != root && !inplace) rarg = NULL;
  if (c == SCATTER && me != root) sarg = NULL;
  if (c == GATHER && me != root) rarg = NULL;
  ncclResult_t r = call(c, sarg, rarg, cnt, t, op, root, comm);
  if (is_reduction(c) && opi >= 5) ncclRedOpDestroy(op, comm);
  char what[128];
  snprintf(what, sizeof what, "rank %d %s %s op %d count %zu root %d %s", me, names[c],
           ref_type_name(t), opi, cnt, root, inplace ? "in place" : "out of place");
  if (r != ncclSuccess) {
    harness_log(me, "%s: %s (%s)", what, ncclGetErrorString(r), ncclGetLastError(comm));
    return 1;
  }
  return verify(c, t, refop, me, n, root, cnt, out, scalar, what) ? 1 : 0;
}

/* Runs the matrix of one collective on comm; returns the failing cases. */
static int matrix_of(ncclComm_t comm, coll_t c, int rank, int nranks, unsigned char *s,
                     unsigned char *r) {
  int failures = 0, calls = 0;
  int nops = is_reduction(c) ? NOPS : 1;
  int roots[2] = {0, nranks - 1};
  int nroots = is_rooted(c) ? (nranks > 1 ? 2 : 1) : 1;
  for (int t = 0; t < ncclNumTypes; t++)
    for (int opi = 0; opi < nops; opi++)
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int inplace = 0; inplace < 2; inplace++)
          for (int ri = 0; ri < nroots; ri++) {
            /* The big count on a subset of types keeps the run short. */
            if (k == 3 && t != ncclFloat && t != ncclInt8 && t != ncclBfloat16) continue;
            if (c == BCAST_INPLACE && inplace == 0) continue;
            failures += run_case(comm, c, (ncclDataType_t)t, opi, counts[k], inplace,
                                 is_rooted(c) ? roots[ri] : -1, rank, nranks, s, r);
            calls++;
          }
  if (failures) harness_log(rank, "%s: %d of %d cases failed", names[c], failures, calls);
  return failures;
}

/* param: one collective's name, or "all". */
static int matrix(int rank, int nranks, ncclUniqueId id, const char *param) {
  int all = strcmp(param, "all") == 0;
  coll_t only = NCOLLS;
  for (int i = 0; i < NCOLLS; i++)
    if (strcmp(param, names[i]) == 0) only = (coll_t)i;
  if (!all && only == NCOLLS) return 1;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  size_t maxc = counts[sizeof counts / sizeof counts[0] - 1] * (size_t)nranks;
  unsigned char *s = malloc(maxc * 8 + 64), *r = malloc(maxc * 8 + 64);
  int failures = 0;
  for (int c = 0; c < NCOLLS; c++)
    if (all || c == (int)only) failures += matrix_of(comm, (coll_t)c, rank, nranks, s, r);
  free(s);
  free(r);
  if (ncclCommDestroy(comm) != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

static unsigned char big_byte(int root, size_t i) {
  return (unsigned char)(root * 37 + i * 7 + (i >> 12));
}

static int bcast_big(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  static const size_t sizes_b[] = {64u << 10, (64u << 10) + 4, (1u << 20) + 12, (16u << 20) + 20};
  const size_t most = sizes_b[3], guard = 256;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  unsigned char *s = malloc(most + guard), *r = malloc(most + guard);
  int failures = 0;
  for (size_t k = 0; k < sizeof sizes_b / sizeof sizes_b[0] && s && r; k++)
    for (int inplace = 0; inplace < 2; inplace++)
      for (int root = 0; root<nranks; root += nranks> 1 ? nranks - 1 : 1) {
        const size_t n = sizes_b[k];
        unsigned char *out = inplace ? s : r;
        memset(s, 0xa5, most + guard);
        memset(r, 0x5a, most + guard);
        if (rank == root)
          for (size_t i = 0; i < n; i++) s[i] = big_byte(root, i);
        cudaStream_t st = NULL;
        if (ncclBroadcast(s, out, n, ncclUint8, root, comm, st) != ncclSuccess) {
          harness_log(rank, "broadcast of %zu bytes from %d failed", n, root);
          failures++;
          continue;
        }
        size_t bad = 0, first = n;
        for (size_t i = 0; i < n; i++)
          if (out[i] != big_byte(root, i)) bad++, first = first < i ? first : i;
        const unsigned char fill = inplace ? 0xa5 : 0x5a;
        size_t past = 0;
        for (size_t i = n; i < n + guard; i++) past += out[i] != fill;
        if (bad || past) {
          harness_log(rank,
                      "broadcast of %zu bytes from %d %s: %zu wrong (first at %zu), %zu "
                      "past the end written",
                      n, root, inplace ? "in place" : "out of place", bad, first, past);
          failures++;
        }
      }
  free(s);
  free(r);
  if (ncclCommDestroy(comm) != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

/* big_mix's value of element i of rank r's block j (small: sums of up to
 * 8 ranks stay exact in int32). */
static int32_t mix_val(int round, int r, int j, size_t i) {
  return (int32_t)((round * 131 + r * 17 + j * 5 + (int)(i % 1009)) % 4099);
}

static int mix_check(int rank, const char *what, int round, const int32_t *got, size_t n,
                     int32_t (*want)(int, int, int, int, size_t), int nranks) {
  for (size_t i = 0; i < n; i++) {
    const int32_t w = want(round, rank, nranks, 0, i);
    if (got[i] != w) {
      harness_log(rank, "big_mix round %d %s: element %zu is %d, not %d", round, what, i,
                  (int)got[i], (int)w);
      return 1;
    }
  }
  return 0;
}

#define MIX_N ((size_t)600 * 1024 / 4) /* elements per rank's block */

/* Wanted outputs, element i of the whole output (a = round, me, n). */
static int32_t want_ag(int round, int me, int n, int unused, size_t i) {
  (void)me, (void)n, (void)unused;
  return mix_val(round, (int)(i / MIX_N), 0, i % MIX_N);
}
static int32_t want_sum(int round, int me, int n, int unused, size_t i) {
  (void)unused;
  int32_t s = 0; /* AllReduce (me = -1) or this rank's block of ReduceScatter */
  for (int r = 0; r < n; r++) s += mix_val(round, r, me < 0 ? 0 : me, i);
  return s;
}
static int32_t want_a2a(int round, int me, int n, int unused, size_t i) {
  (void)n, (void)unused; /* block j of the output: rank j's block me */
  return mix_val(round, (int)(i / MIX_N), me, i % MIX_N);
}
static int32_t want_bcast(int round, int me, int n, int unused, size_t i) {
  (void)me, (void)unused; /* from the last rank */
  return mix_val(round, n - 1, 7, i);
}
static int32_t want_ring(int round, int me, int n, int unused, size_t i) {
  (void)unused;
  return mix_val(round, (me + n - 1) % n, 9, i);
}

static int big_mix(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  const size_t all = MIX_N * (size_t)nranks;
  int32_t *s = malloc(all * sizeof *s), *r = malloc(all * sizeof *r);
  int failures = !s || !r;
  cudaStream_t st = NULL;
  for (int round = 0; round < 3 && !failures; round++) {
    for (size_t i = 0; i < MIX_N; i++) s[i] = mix_val(round, rank, 0, i);
    failures += ncclAllGather(s, r, MIX_N, ncclInt32, comm, st) != ncclSuccess ||
                mix_check(rank, "allgather", round, r, all, want_ag, nranks);
    failures += ncclAllReduce(s, r, MIX_N, ncclInt32, ncclSum, comm, st) != ncclSuccess;
    for (size_t i = 0; i < MIX_N && !failures; i++)
      if (r[i] != want_sum(round, -1, nranks, 0, i)) {
        harness_log(rank, "big_mix round %d allreduce: element %zu is %d", round, i, (int)r[i]);
        failures++;
      }
    for (int j = 0; j < nranks; j++)
      for (size_t i = 0; i < MIX_N; i++) s[(size_t)j * MIX_N + i] = mix_val(round, rank, j, i);
    failures += ncclAlltoAll(s, r, MIX_N, ncclInt32, comm, st) != ncclSuccess ||
                mix_check(rank, "alltoall", round, r, all, want_a2a, nranks);
    failures += ncclReduceScatter(s, r, MIX_N, ncclInt32, ncclSum, comm, st) != ncclSuccess;
    for (size_t i = 0; i < MIX_N && !failures; i++)
      if (r[i] != want_sum(round, rank, nranks, 0, i)) {
        harness_log(rank, "big_mix round %d reducescatter: element %zu is %d", round, i, (int)r[i]);
        failures++;
      }
    for (size_t i = 0; i < MIX_N; i++) s[i] = mix_val(round, nranks - 1, 7, i);
    failures += ncclBroadcast(s, r, MIX_N, ncclInt32, nranks - 1, comm, st) != ncclSuccess ||
                mix_check(rank, "broadcast", round, r, MIX_N, want_bcast, nranks);
    for (size_t i = 0; i < MIX_N; i++) s[i] = mix_val(round, rank, 9, i);
    failures +=
        ncclGroupStart() != ncclSuccess ||
        ncclSend(s, MIX_N, ncclInt32, (rank + 1) % nranks, comm, st) != ncclSuccess ||
        ncclRecv(r, MIX_N, ncclInt32, (rank + nranks - 1) % nranks, comm, st) != ncclSuccess ||
        ncclGroupEnd() != ncclSuccess;
    if (!failures) failures += mix_check(rank, "send/recv", round, r, MIX_N, want_ring, nranks);
  }
  free(s);
  free(r);
  if (ncclCommDestroy(comm) != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

/* small_run: rounds of one small call after another (coll/node.c's fast
 * lines), the ranks that wait for nobody running ahead: every fifth round
 * the ranks that read sleep first, so the others post several rounds
 * before their sets are read, and a set rewritten too early shows as a
 * wrong element. Every element of every round is checked. */
#define RUN_ROUNDS 60
static int small_run(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  static const size_t ns[] = {3, 13, 37};
  static const coll_t kinds[] = {BCAST, SCATTER, GATHER, REDUCE, AG, A2A, RS};
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  const size_t most = 37 * (size_t)nranks;
  int32_t *s = malloc(most * sizeof *s), *r = malloc(most * sizeof *r);
  int failures = !s || !r;
  const int root = nranks - 1;
  cudaStream_t st = NULL;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] && !failures; k++)
    for (size_t z = 0; z < sizeof ns / sizeof ns[0] && !failures; z++)
      for (int round = 0; round < RUN_ROUNDS && !failures; round++) {
        const coll_t c = kinds[k];
        const size_t n = ns[z];
        const int reads = c == BCAST || c == SCATTER   ? rank != root
                          : c == GATHER || c == REDUCE ? rank == root
                                                       : 1;
        if (reads && round % 5 == 4) {
          struct timespec ts = {0, 300000};
          nanosleep(&ts, NULL);
        }
        for (int j = 0; j < nranks; j++)
          for (size_t i = 0; i < n; i++) s[(size_t)j * n + i] = mix_val(round, rank, j, i);
        memset(r, 0xee, most * sizeof *r);
        ncclResult_t res;
        switch (c) {
        case BCAST:
          res = ncclBroadcast(s, r, n, ncclInt32, root, comm, st);
          break;
        case SCATTER:
          res = ncclScatter(s, r, n, ncclInt32, root, comm, st);
          break;
        case GATHER:
          res = ncclGather(s, r, n, ncclInt32, root, comm, st);
          break;
        case REDUCE:
          res = ncclReduce(s, r, n, ncclInt32, ncclSum, root, comm, st);
          break;
        case AG:
          res = ncclAllGather(s, r, n, ncclInt32, comm, st);
          break;
        case A2A:
          res = ncclAlltoAll(s, r, n, ncclInt32, comm, st);
          break;
        default:
          res = ncclReduceScatter(s, r, n, ncclInt32, ncclSum, comm, st);
          break;
        }
        if (res != ncclSuccess) {
          harness_log(rank, "small_run %s of %zu, round %d: %s", names[c], n, round,
                      ncclGetErrorString(res));
          failures++;
          break;
        }
        if (!reads) continue;
        const size_t outn = c == GATHER || c == AG || c == A2A ? n * (size_t)nranks : n;
        for (size_t e = 0; e < outn && !failures; e++) {
          const size_t blk = e / n, i = e % n;
          int32_t want = 0;
          if (c == BCAST) want = mix_val(round, root, 0, i);
          if (c == SCATTER) want = mix_val(round, root, rank, i);
          if (c == GATHER || c == AG) want = mix_val(round, (int)blk, 0, i);
          if (c == A2A) want = mix_val(round, (int)blk, rank, i);
          for (int p = 0; p < nranks && (c == REDUCE || c == RS); p++)
            want += mix_val(round, p, c == RS ? rank : 0, i);
          if (r[e] != want) {
            harness_log(rank, "small_run %s of %zu, round %d: element %zu is %d, not %d", names[c],
                        n, round, e, (int)r[e], (int)want);
            failures++;
          }
        }
      }
  free(s);
  free(r);
  if (ncclCommDestroy(comm) != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

/* big_cut: AllReduce (float sum, int32 max), Broadcast and Reduce (from
 * the first and the last rank) and a ring shift of Sends and Recvs, of
 * 1-8 MiB and odd counts, in place and not, every element against the
 * reference and the elements after the output untouched: with every rank
 * a host and CHORUS_HOST_LANES, calls cut across lanes into shares of
 * unequal lengths (core/enqueue.c). */
#define CUT_GUARD 64
static int cut_guard_intact(int rank, const char *what, const unsigned char *out, size_t bytes) {
  for (size_t i = 0; i < CUT_GUARD; i++)
    if (out[bytes + i] != 0x5a) {
      harness_log(rank, "%s: byte %zu past the output was written", what, i);
      return 0;
    }
  return 1;
}

static int big_cut(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  static const size_t counts_c[] = {(256u << 10) + 3, (768u << 10) + 5, (2u << 20) + 7};
  static const struct {
    ncclDataType_t t;
    int op; /* ref.h's: 0 sum, 2 max */
  } kinds[] = {{ncclFloat32, 0}, {ncclInt32, 2}};
  const size_t most = counts_c[2] * 4 + CUT_GUARD;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  unsigned char *s = malloc(most), *r = malloc(most);
  int failures = !s || !r;
  for (size_t c = 0; c < 3 && !failures; c++)
    for (int k = 0; k < 2 && !failures; k++)
      for (int f = 0; f < 4 && !failures; f++)
        for (int inplace = 0; inplace < 2 && !failures; inplace++) {
          const ncclDataType_t t = kinds[k].t;
          const size_t n = counts_c[c], bytes = n * ref_type_size(t);
          const int root = (f + inplace) % 2 ? nranks - 1 : 0, op = kinds[k].op;
          const ncclRedOp_t nop = op == 0 ? ncclSum : ncclMax;
          const int prev = (rank + nranks - 1) % nranks;
          memset(s, 0x5a, most);
          memset(r, 0x5a, most);
          ref_fill(t, op, rank, s, 0, n);
          unsigned char *out = inplace ? s : r;
          char what[96];
          ncclResult_t res;
          if (f == 0) {
            snprintf(what, sizeof what, "allreduce %s %zu", ref_type_name(t), n);
            res = ncclAllReduce(s, out, n, t, nop, comm, NULL);
          } else if (f == 1) {
            snprintf(what, sizeof what, "broadcast %s %zu from %d", ref_type_name(t), n, root);
            res = ncclBroadcast(s, out, n, t, root, comm, NULL);
          } else if (f == 2) {
            snprintf(what, sizeof what, "reduce %s %zu to %d", ref_type_name(t), n, root);
            res = ncclReduce(s, out, n, t, nop, root, comm, NULL);
          } else {
            /* A ring shift of two messages to the same peer in one group,
             * a third and the rest (cut across different lanes). */
            const size_t n1 = n / 3, off = n1 * ref_type_size(t);
            snprintf(what, sizeof what, "send/recv %s %zu + %zu%s", ref_type_name(t), n1, n - n1,
                     inplace ? " in place" : "");
            res = ncclGroupStart();
            if (res == ncclSuccess) res = ncclSend(s, n1, t, (rank + 1) % nranks, comm, NULL);
            if (res == ncclSuccess)
              res = ncclSend(s + off, n - n1, t, (rank + 1) % nranks, comm, NULL);
            if (res == ncclSuccess) res = ncclRecv(out, n1, t, prev, comm, NULL);
            if (res == ncclSuccess) res = ncclRecv(out + off, n - n1, t, prev, comm, NULL);
            const ncclResult_t end = ncclGroupEnd();
            if (res == ncclSuccess) res = end;
          }
          if (res != ncclSuccess) {
            harness_log(rank, "%s: %s", what, ncclGetErrorString(res));
            failures++;
            continue;
          }
          if (f == 1 || f == 3)
            failures += ref_check_copy(t, op, f == 1 ? root : prev, out, 0, n, what) != 0;
          else if (f == 0 || rank == root)
            failures += ref_check(t, op, nranks, out, n, 2.0, what) != 0;
          if (f == 0 || f == 3 || rank == root || inplace)
            failures += !cut_guard_intact(rank, what, out, bytes);
        }
  free(s);
  free(r);
  if (ncclCommDestroy(comm) != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

/* big_blocks: AllGather, ReduceScatter (float sum, int32 max), AlltoAll,
 * Gather and Scatter (roots the first and the last rank) of 1.5-14 MiB
 * and odd counts, in place and not, every element of every block against
 * the reference and the bytes after the output untouched: cut across
 * lanes, each share a range of rows of every block (chorus_op.pitch). */
static int big_blocks(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  static const coll_t funcs[] = {AG, RS, A2A, GATHER, SCATTER};
  static const size_t counts_c[] = {(128u << 10) + 3, (384u << 10) + 5};
  static const struct {
    ncclDataType_t t;
    int op; /* ref.h's: 0 sum, 2 max */
  } kinds[] = {{ncclFloat32, 0}, {ncclInt32, 2}};
  const size_t N = (size_t)nranks, most = counts_c[1] * 4 * N + CUT_GUARD;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  unsigned char *s = malloc(most), *r = malloc(most);
  int failures = !s || !r;
  for (size_t c = 0; c < 2 && !failures; c++)
    for (int k = 0; k < 2 && !failures; k++)
      for (int fi = 0; fi < 5 && !failures; fi++)
        for (int inplace = 0; inplace < 2 && !failures; inplace++) {
          const coll_t f = funcs[fi];
          const ncclDataType_t t = kinds[k].t;
          const int op = kinds[k].op, root = (fi + inplace + k) % 2 ? nranks - 1 : 0;
          const ncclRedOp_t nop = op == 0 ? ncclSum : ncclMax;
          const size_t n = counts_c[c], es = ref_type_size(t), me = (size_t)rank;
          /* Every call's larger buffer holds N blocks of n: its input
           * sequence (rank r's elements from 0), or the blocks each rank
           * sends (rank r's elements r*n.. for AllGather and Gather). */
          memset(s, 0x5a, most);
          memset(r, 0x5a, most);
          const int gathers = f == AG || f == GATHER;
          if (gathers)
            ref_fill(t, op, rank, inplace ? r + me * n * es : s, me * n, n);
          else
            ref_fill(t, op, rank, s, 0, n * N);
          const void *in = gathers && inplace ? r + me * n * es : s;
          void *out = !inplace ? r : f == A2A ? s : gathers ? r : s + me * n * es;
          if (f == SCATTER && inplace && rank != root) out = r;
          char what[96];
          snprintf(what, sizeof what, "%s %s %zu%s root %d", names[f], ref_type_name(t), n,
                   inplace ? " in place" : "", root);
          ncclResult_t res;
          if (f == AG)
            res = ncclAllGather(in, out, n, t, comm, NULL);
          else if (f == RS)
            res = ncclReduceScatter(in, out, n, t, nop, comm, NULL);
          else if (f == A2A)
            res = ncclAlltoAll(in, out, n, t, comm, NULL);
          else if (f == GATHER)
            res = ncclGather(in, out, n, t, root, comm, NULL);
          else
            res = ncclScatter(in, out, n, t, root, comm, NULL);
          if (res != ncclSuccess) {
            harness_log(rank, "%s: %s", what, ncclGetErrorString(res));
            failures++;
            continue;
          }
          const unsigned char *o = out;
          size_t outn = n; /* elements written */
          if (f == AG || f == A2A || (f == GATHER && rank == root)) {
            outn = n * N;
            for (size_t p = 0; p < N; p++)
              failures += ref_check_copy(t, op, (int)p, o + p * n * es, f == A2A ? me * n : p * n,
                                         n, what) != 0;
          } else if (f == RS) {
            failures += ref_check_at(t, op, nranks, o, me * n, n, 1.0, what) != 0;
          } else if (f == SCATTER) {
            failures += ref_check_copy(t, op, root, o, me * n, n, what) != 0;
          } else {
            outn = 0; /* a Gather's sender writes nothing */
          }
          /* The bytes after the output, or, in place, after the whole
           * buffer the output lies in. */
          const unsigned char *gbuf = r;
          size_t gend = outn * es;
          if (inplace && (f == A2A || f == RS || (f == SCATTER && rank == root)))
            gbuf = s, gend = n * N * es;
          else if (inplace && f != SCATTER)
            gend = n * N * es;
          failures += !cut_guard_intact(rank, what, gbuf, gend);
        }
  free(s);
  free(r);
  if (ncclCommDestroy(comm) != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

static const harness_case cases[] = {{"matrix", matrix},
                                     {"big_cut", big_cut},
                                     {"big_blocks", big_blocks},
                                     {"bcast_big", bcast_big},
                                     {"big_mix", big_mix},
                                     {"small_run", small_run},
                                     {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  if (argc == 3 && strcmp(argv[2], "env") == 0) {
    /* One rank of a job started elsewhere (tests/net/two_hosts.sh). */
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    ncclUniqueId id;
    if (!r || !w || !getenv("NCCL_COMM_ID") || ncclGetUniqueId(&id) != ncclSuccess) {
      fprintf(stderr, "env mode needs RANK, WORLD_SIZE and NCCL_COMM_ID\n");
      return 2;
    }
    int rc = matrix(atoi(r), atoi(w), id, argv[1]);
    printf("%s rank %s of %s: %s\n", argv[1], r, w, rc ? "FAILED" : "PASS");
    return rc;
  }
  if (argc != 4) {
    fprintf(stderr, "usage: %s COLLECTIVE threads|procs NRANKS\n", argv[0]);
    return 2;
  }
  harness_mode mode = strcmp(argv[2], "procs") == 0 ? HARNESS_PROCS : HARNESS_THREADS;
  int n = atoi(argv[3]);
  const char *body = strcmp(argv[1], "bcast_big") == 0 || strcmp(argv[1], "big_mix") == 0 ||
                             strcmp(argv[1], "small_run") == 0 || strcmp(argv[1], "big_cut") == 0 ||
                             strcmp(argv[1], "big_blocks") == 0
                         ? argv[1]
                         : "matrix";
  int failed = harness_spawn(mode, n, body, argv[1], 240);
  printf("%s %s x%d: %s\n", argv[1], argv[2], n, failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
