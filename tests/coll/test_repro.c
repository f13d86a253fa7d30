/*
 * test_repro.c - CHORUS_REPRODUCIBLE=1: reductions add the ranks' values
 * in rank order, ((x0 + x1) + x2) + ..., whatever carries them.
 *
 *   test_repro same|differ threads|procs NRANKS
 *
 * Inputs span 40 binary orders of magnitude, so sums depend on their
 * order (checked: the sum in reverse rank order differs somewhere). Each
 * rank computes the reference itself, in that order, in C float and
 * double arithmetic, and compares bits with AllReduce (every rank),
 * ReduceScatter (its block) and Reduce (the root) of float and double
 * sums, float ncclAvg and a float PreMulSum with a scalar of each rank's
 * own, at 1, 1000 and 200000 elements (many slots, many pieces).
 * "same" requires every result to equal the reference bit for bit;
 * "differ" (run without CHORUS_REPRODUCIBLE, through a ring) requires
 * some result not to, which shows the comparison can fail.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mix.h"
#include "nccl.h"
#include "spawn.h"

/* Rank r's value at element i (alike in float and double). */
static double input(int r, size_t i) {
  const uint64_t h = mix((uint64_t)r * 0x9e3779b97f4a7c15ull + i + 1);
  const double mant = (double)((int)(h % 2001) - 1000) / 7.0;
  return ldexp(mant, (int)((h >> 20) % 41) - 20);
}

static float scalar_of(int r) {
  return 1.0f + (float)r / 3.0f;
}

enum { SUM, AVG, PREMUL, NKINDS };

/* Rank r's contribution as the library sees it (scaled by the owner for
 * PreMulSum and ncclAvg, which is a PreMulSum by 1/n on floats). */
static float contrib_f(int kind, int r, int n, size_t i) {
  const float x = (float)input(r, i);
  if (kind == PREMUL) return x * scalar_of(r);
  if (kind == AVG) return x * (float)(1.0 / n);
  return x;
}

/* Element i of the reduction, ranks added in order (or reversed). */
static float ref_f(int kind, int n, size_t i, int reversed) {
  float acc = contrib_f(kind, reversed ? n - 1 : 0, n, i);
  for (int k = 1; k < n; k++) acc = acc + contrib_f(kind, reversed ? n - 1 - k : k, n, i);
  return acc;
}

static double ref_d(int n, size_t i) {
  double acc = input(0, i);
  for (int r = 1; r < n; r++) acc = acc + input(r, i);
  return acc;
}

enum { F_AR, F_RS, F_REDUCE, NFUNCS };
static const char *const fname[NFUNCS] = {"AllReduce", "ReduceScatter", "Reduce"};

/* One call; returns the number of elements whose bits differ from the
 * reference, or -1 when the call failed. */
static long one(ncclComm_t comm, int rank, int n, int f, int dbl, int kind, size_t count) {
  const size_t es = dbl ? sizeof(double) : sizeof(float);
  const size_t in_elems = f == F_RS ? count * (size_t)n : count;
  const int root = n - 1;
  char *send = malloc(in_elems * es), *recv = malloc(count * es);
  if (!send || !recv) {
    free(send);
    free(recv);
    return -1;
  }
  for (size_t i = 0; i < in_elems; i++) {
    if (dbl)
      ((double *)send)[i] = input(rank, i);
    else
      ((float *)send)[i] = (float)input(rank, i);
  }
  ncclRedOp_t op = kind == AVG ? ncclAvg : ncclSum;
  /* (A created operator may be any value from ncclNumOps up: no sentinel.) */
  int have_op = 1;
  if (kind == PREMUL) {
    float s = scalar_of(rank);
    have_op = ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, comm) ==
              ncclSuccess;
  }
  const ncclDataType_t t = dbl ? ncclFloat64 : ncclFloat32;
  ncclResult_t res = !have_op    ? ncclInternalError
                     : f == F_AR ? ncclAllReduce(send, recv, count, t, op, comm, NULL)
                     : f == F_RS ? ncclReduceScatter(send, recv, count, t, op, comm, NULL)
                                 : ncclReduce(send, recv, count, t, op, root, comm, NULL);
  if (kind == PREMUL && have_op) ncclRedOpDestroy(op, comm);
  long bad = res == ncclSuccess ? 0 : -1;
  const int checks = res == ncclSuccess && (f != F_REDUCE || rank == root);
  for (size_t j = 0; checks && j < count; j++) {
    const size_t i = f == F_RS ? (size_t)rank * count + j : j;
    if (dbl) {
      const double want = ref_d(n, i);
      bad += memcmp(&((double *)recv)[j], &want, sizeof want) != 0;
    } else {
      const float want = ref_f(kind, n, i, 0);
      bad += memcmp(&((float *)recv)[j], &want, sizeof want) != 0;
    }
  }
  free(send);
  free(recv);
  return bad;
}

static int repro(int rank, int nranks, ncclUniqueId id, const char *param) {
  const int same = strcmp(param, "same") == 0;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  static const size_t counts[] = {1, 1000, 200000};
  int failures = 0;
  long differing = 0;
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (int f = 0; f < NFUNCS; f++)
      for (int v = 0; v < 4; v++) { /* float sum, avg, premul; double sum */
        const int dbl = v == 3, kind = dbl ? SUM : v;
        const long bad = one(comm, rank, nranks, f, dbl, kind, counts[c]);
        if (bad < 0) {
          harness_log(rank, "%s of %zu failed", fname[f], counts[c]);
          failures++;
          continue;
        }
        differing += bad;
        if (same && bad)
          harness_log(rank, "%s %s%s of %zu: %ld element(s) differ from the ranks added in order",
                      fname[f], dbl ? "double " : "float ",
                      kind == SUM   ? "sum"
                      : kind == AVG ? "avg"
                                    : "premulsum",
                      counts[c], bad);
        if (same) failures += bad != 0;
      }
  /* The inputs make the order matter (else equality would prove little). */
  if (nranks >= 3) {
    int order_matters = 0;
    for (size_t i = 0; i < 200000 && !order_matters; i++)
      order_matters = ref_f(SUM, nranks, i, 0) != ref_f(SUM, nranks, i, 1);
    if (!order_matters) {
      harness_log(rank, "the inputs' sums do not depend on the order");
      failures++;
    }
  }
  if (!same) { /* some rank's results must differ */
    int64_t total = differing;
    if (ncclAllReduce(&total, &total, 1, ncclInt64, ncclSum, comm, NULL) != ncclSuccess) failures++;
    if (total == 0) {
      harness_log(rank, "every result equals the ranks added in order, without the setting");
      failures++;
    }
  }
  if (ncclCommDestroy(comm) != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

static const harness_case cases[] = {{"repro", repro}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  if (argc != 4 || (strcmp(argv[1], "same") && strcmp(argv[1], "differ"))) {
    fprintf(stderr, "usage: %s same|differ threads|procs NRANKS\n", argv[0]);
    return 2;
  }
  const harness_mode mode = strcmp(argv[2], "procs") == 0 ? HARNESS_PROCS : HARNESS_THREADS;
  return harness_spawn(mode, atoi(argv[3]), "repro", argv[1], 240) == 0 ? 0 : 1;
}
