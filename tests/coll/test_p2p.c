/*
 * test_p2p.c - ncclSend/ncclRecv on host memory: grouped ring shifts and
 * all-pairs exchanges (any matched set completes), several messages to the
 * same peer in one group (delivered in call order), sends to self, zero
 * counts, point-to-point mixed with a collective in one group, ungrouped
 * pairs, and a count mismatch that is reported rather than corrupting data,
 * small and large (between processes, large messages go by reference), and
 * a ring shift in place (one buffer sent and received in a group).
 *
 * usage: test_p2p threads|procs NRANKS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "ref.h"
#include "spawn.h"

#define CHECKR(call)                                                                               \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      harness_log(rank, "line %d: %s -> %s (%s)", __LINE__, #call, ncclGetErrorString(r_),         \
                  ncclGetLastError(NULL));                                                         \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Input sequence of rank r for "message tag": distinct per (sender, tag). */
static int tagged(int r, int tag) {
  return r * 97 + tag * 7919;
}

/* Each rank sends to the next and receives from the previous one in a
 * group. In place, one buffer does both: it must end with the previous
 * rank's data, whatever arrives while the send still reads it. */
static int ring_shift(ncclComm_t comm, int rank, int n, ncclDataType_t t, size_t count,
                      int in_place) {
  size_t es = ref_type_size(t);
  unsigned char *s = malloc(count * es + 1), *r = in_place ? s : malloc(count * es + 1);
  ref_fill(t, 0, tagged(rank, 1), s, 0, count);
  CHECKR(ncclGroupStart());
  CHECKR(ncclSend(s, count, t, (rank + 1) % n, comm, NULL));
  CHECKR(ncclRecv(r, count, t, (rank + n - 1) % n, comm, NULL));
  CHECKR(ncclGroupEnd());
  size_t bad = ref_check_copy(t, 0, tagged((rank + n - 1) % n, 1), r, 0, count,
                              in_place ? "ring shift in place" : "ring shift");
  if (!in_place) free(r);
  free(s);
  return bad != 0;
}

/* Every rank sends a different block to every rank (itself included) and
 * receives one from each; two messages per pair, in order. */
static int all_pairs(ncclComm_t comm, int rank, int n, size_t count) {
  ncclDataType_t t = ncclInt32;
  size_t es = 4;
  unsigned char *s = malloc(2 * (size_t)n * count * es + 1),
                *r = malloc(2 * (size_t)n * count * es + 1);
  for (int p = 0; p < n; p++)
    for (int m = 0; m < 2; m++)
      ref_fill(t, 0, tagged(rank, p * 2 + m), s + (size_t)(2 * p + m) * count * es, 0, count);
  CHECKR(ncclGroupStart());
  for (int m = 0; m < 2; m++)
    for (int k = 0; k < n; k++) {
      int p = (rank + k) % n; /* different orders on different ranks */
      CHECKR(ncclSend(s + (size_t)(2 * p + m) * count * es, count, t, p, comm, NULL));
      CHECKR(ncclRecv(r + (size_t)(2 * p + m) * count * es, count, t, p, comm, NULL));
    }
  CHECKR(ncclGroupEnd());
  size_t bad = 0;
  for (int p = 0; p < n; p++)
    for (int m = 0; m < 2; m++)
      bad += ref_check_copy(t, 0, tagged(p, rank * 2 + m), r + (size_t)(2 * p + m) * count * es, 0,
                            count, "all pairs");
  free(s);
  free(r);
  return bad != 0;
}

static int mixed_with_collective(ncclComm_t comm, int rank, int n) {
  float a[64], b[64], c[64];
  for (int i = 0; i < 64; i++) a[i] = (float)rank, c[i] = 1;
  CHECKR(ncclGroupStart());
  CHECKR(ncclSend(a, 64, ncclFloat, (rank + 1) % n, comm, NULL));
  CHECKR(ncclAllReduce(c, c, 64, ncclFloat, ncclSum, comm, NULL));
  CHECKR(ncclRecv(b, 64, ncclFloat, (rank + n - 1) % n, comm, NULL));
  CHECKR(ncclGroupEnd());
  for (int i = 0; i < 64; i++)
    if (b[i] != (float)((rank + n - 1) % n) || c[i] != (float)n) return 1;
  return 0;
}

static int p2p_all(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  int fails = 0;
  static const size_t counts[] = {0, 1, 1031, 70001};
  for (int t = 0; t < ncclNumTypes; t++)
    for (size_t k = 0; k < 4; k++)
      fails += ring_shift(comm, rank, nranks, (ncclDataType_t)t, counts[k], 0);
  static const size_t inplace[] = {1024, 70000, 600000}; /* 4 KiB to 2.4 MB: past a FIFO */
  for (size_t k = 0; k < 3 && nranks > 1; k++)
    fails += ring_shift(comm, rank, nranks, ncclInt32, inplace[k], 1);
  fails += all_pairs(comm, rank, nranks, 1);
  fails += all_pairs(comm, rank, nranks, 5000);
  fails += all_pairs(comm, rank, nranks, 40000); /* 160 KB: read by the peer where it can */
  fails += all_pairs(comm, rank, nranks, 10000); /* 40 KB: by reference too (xfer.h) */
  fails += mixed_with_collective(comm, rank, nranks);
  /* Ungrouped: even ranks send then receive, odd ranks receive then send. */
  if (nranks % 2 == 0) {
    int peer = rank ^ 1, x = rank, y = -1;
    if (rank % 2 == 0) {
      CHECKR(ncclSend(&x, 1, ncclInt, peer, comm, NULL));
      CHECKR(ncclRecv(&y, 1, ncclInt, peer, comm, NULL));
    } else {
      CHECKR(ncclRecv(&y, 1, ncclInt, peer, comm, NULL));
      CHECKR(ncclSend(&x, 1, ncclInt, peer, comm, NULL));
    }
    fails += y != peer;
  }
  if (fails) harness_log(rank, "%d p2p checks failed", fails);
  CHECKR(ncclCommDestroy(comm));
  return fails ? 1 : 0;
}

/* Rank 0 sends 100 ints, rank 1 expects 200 (param "big": 100000 and
 * 200000, messages the receiver reads from the sender's memory where it
 * can): an error naming the peer. */
static int count_mismatch(int rank, int nranks, ncclUniqueId id, const char *param) {
  const size_t count = strcmp(param, "big") == 0 ? 100000 : 100;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  int *buf = calloc(2 * count + 1, sizeof *buf);
  ncclResult_t r = ncclSuccess;
  /* Big: each in a group with a one-int message the other way, as
   * exchanges are made (a Send in a group that receives may go by
   * reference). */
  const int big = count > 100, peer = 1 - rank;
  if (big && rank < 2) CHECKR(ncclGroupStart());
  if (rank == 0) r = ncclSend(buf, count, ncclInt, 1, comm, NULL);
  if (rank == 1) r = ncclRecv(buf, 2 * count, ncclInt, 0, comm, NULL);
  if (big && rank < 2) {
    if (rank == 0) (void)ncclRecv(buf + 2 * count, 1, ncclInt, peer, comm, NULL);
    if (rank == 1) (void)ncclSend(buf + 2 * count, 1, ncclInt, peer, comm, NULL);
    r = ncclGroupEnd();
  }
  free(buf);
  const char *msg = ncclGetLastError(comm);
  harness_log(rank, "%s: %s", ncclGetErrorString(r), msg);
  int ok = rank > 1 || (rank == 1 && r == ncclInvalidUsage && strstr(msg, "rank 0")) ||
           (rank == 0 && (r == ncclSuccess || r == ncclRemoteError));
  ncclCommAbort(comm);
  return ok ? 0 : 1;
}

static const harness_case cases[] = {
    {"p2p_all", p2p_all}, {"count_mismatch", count_mismatch}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  if (argc != 3) return 2;
  harness_mode mode = strcmp(argv[1], "procs") == 0 ? HARNESS_PROCS : HARNESS_THREADS;
  int n = atoi(argv[2]);
  int failed = harness_spawn(mode, n, "p2p_all", "", 240);
  if (n >= 2) failed += harness_spawn(mode, 2, "count_mismatch", "", 60);
  if (n >= 2) failed += harness_spawn(mode, 2, "count_mismatch", "big", 60);
  printf("p2p %s x%d: %s\n", argv[1], n, failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
