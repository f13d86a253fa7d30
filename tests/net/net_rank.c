/*
 * net_rank.c - one rank of a multi-host test. Rank and size come from RANK
 * and WORLD_SIZE, the rendezvous from NCCL_COMM_ID (rank 0 hosts it). Runs
 * all-reduces of every type and operator, in and out of place, at sizes
 * that span several pipeline rounds, against the independent reference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "ref.h"
#include "spawn.h"

int main(void) {
  int rank, nranks;
  ncclComm_t comm;
  const int joined = harness_join_env("net_rank", &rank, &nranks, &comm);
  if (joined != 0) return joined;
  static const size_t counts[] = {1, 1031, 200003};
  size_t maxc = 200003;
  unsigned char *send = malloc(maxc * 8), *recv = malloc(maxc * 8);
  int failures = 0, calls = 0;
  for (int t = 0; t < ncclNumTypes; t++)
    for (int op = 0; op <= 4; op++)
      for (size_t c = 0; c < 3; c++)
        for (int inplace = 0; inplace < 2; inplace++) {
          ncclDataType_t dt = (ncclDataType_t)t;
          size_t n = counts[c];
          if (n > 5000 && t != ncclFloat && t != ncclInt8) continue; /* keep it quick */
          for (size_t i = 0; i < n; i++) {
            if (ref_is_float(dt))
              ref_set(dt, send, i, ref_input(dt, op, rank, i));
            else
              ref_set_u64(dt, send, i, (uint64_t)(int64_t)ref_input(dt, op, rank, i));
          }
          void *out = inplace ? (void *)send : (void *)recv;
          ncclResult_t r = ncclAllReduce(send, out, n, dt, (ncclRedOp_t)op, comm, NULL);
          calls++;
          if (r != ncclSuccess) {
            fprintf(stderr, "rank %d: %s\n", rank, ncclGetLastError(comm));
            return 1;
          }
          char what[64];
          snprintf(what, sizeof what, "rank %d type %d op %d count %zu", rank, t, op, n);
          failures += ref_check(dt, op, nranks, out, n, 1.0 / nranks, what) != 0;
        }
  free(send);
  free(recv);
  ncclCommDestroy(comm);
  printf("net_rank %d/%d: %d calls, %s\n", rank, nranks, calls, failures ? "FAILED" : "PASS");
  return failures ? 1 : 0;
}
