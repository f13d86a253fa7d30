/*
 * test_allreduce.c - ncclAllReduce on host memory: every data type and
 * operator (built-ins, PreMulSum with a host-immediate and a "device"
 * scalar), in place and out of place, counts 0, 1, a prime, and a size that
 * spans several pipeline rounds, checked against an independent reference.
 *
 * usage: test_allreduce threads|procs NRANKS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "ref.h"
#include "spawn.h"

#define NOPS 7 /* sum prod max min avg premul(host) premul(device) */

static const size_t counts[] = {0, 1, 1031, 65537};

static int run_one(ncclComm_t comm, int rank, int nranks, ncclDataType_t t, int opi, size_t count,
                   int inplace, unsigned char *send, unsigned char *recv) {
  size_t es = ref_type_size(t);
  int refop = opi <= 4 ? opi : 5;
  double scalar = opi == 4 ? 1.0 / nranks : 2.0;
  for (size_t i = 0; i < count; i++) {
    if (ref_is_float(t))
      ref_set(t, send, i, ref_input(t, refop, rank, i));
    else
      ref_set_u64(t, send, i, (uint64_t)(int64_t)ref_input(t, refop, rank, i));
  }
  memset(recv, 0xa5, count * es);
  ncclRedOp_t op = (ncclRedOp_t)opi;
  unsigned char scalar_buf[8];
  if (opi >= 5) {
    if (ref_is_float(t))
      ref_set(t, scalar_buf, 0, ref_premul_scalar(rank));
    else
      ref_set_u64(t, scalar_buf, 0, (uint64_t)ref_premul_scalar(rank));
    ncclResult_t r = ncclRedOpCreatePreMulSum(
        &op, scalar_buf, t, opi == 5 ? ncclScalarHostImmediate : ncclScalarDevice, comm);
    if (r != ncclSuccess) {
      harness_log(rank, "ncclRedOpCreatePreMulSum failed: %s", ncclGetErrorString(r));
      return 1;
    }
  }
  void *out = inplace ? (void *)send : (void *)recv;
  ncclResult_t r = ncclAllReduce(send, out, count, t, op, comm, NULL);
  if (opi >= 5) ncclRedOpDestroy(op, comm);
  if (r != ncclSuccess) {
    harness_log(rank, "ncclAllReduce(%s, op %d, count %zu) failed: %s / %s", ref_type_name(t), opi,
                count, ncclGetErrorString(r), ncclGetLastError(comm));
    return 1;
  }
  char what[96];
  snprintf(what, sizeof what, "rank %d %s op %d count %zu %s", rank, ref_type_name(t), opi, count,
           inplace ? "in-place" : "out-of-place");
  return ref_check(t, refop, nranks, out, count, scalar, what) ? 1 : 0;
}

static int allreduce_all(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  if (r != ncclSuccess) {
    harness_log(rank, "ncclCommInitRank failed: %s", ncclGetErrorString(r));
    return 1;
  }
  size_t maxc = counts[sizeof counts / sizeof counts[0] - 1];
  unsigned char *send = malloc(maxc * 8 + 8), *recv = malloc(maxc * 8 + 8);
  int failures = 0;
  for (int t = 0; t < ncclNumTypes; t++)
    for (int opi = 0; opi < NOPS; opi++)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (int inplace = 0; inplace < 2; inplace++)
          failures +=
              run_one(comm, rank, nranks, (ncclDataType_t)t, opi, counts[c], inplace, send, recv);
  free(send);
  free(recv);
  r = ncclCommDestroy(comm);
  if (r != ncclSuccess) failures++;
  if (failures) harness_log(rank, "%d failing cases", failures);
  return failures ? 1 : 0;
}

static const harness_case cases[] = {{"allreduce_all", allreduce_all}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  if (argc != 3) {
    fprintf(stderr, "usage: %s threads|procs NRANKS\n", argv[0]);
    return 2;
  }
  harness_mode mode = strcmp(argv[1], "procs") == 0 ? HARNESS_PROCS : HARNESS_THREADS;
  int n = atoi(argv[2]);
  int failed = harness_spawn(mode, n, "allreduce_all", "", 240);
  printf("allreduce %s x%d: %s\n", argv[1], n, failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
