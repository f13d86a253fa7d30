/*
 * test_stress.c - hundreds of back-to-back collectives of every kind, with
 * roots and sizes changing from call to call and no synchronisation or
 * checking in between, so fast ranks run ahead of slow ones as far as the
 * library lets them. Every result is kept and checked at the end against
 * values computed from the iteration number.
 *
 * usage: test_stress threads|procs NRANKS [ITERATIONS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "spawn.h"

enum {
  K_BCAST,
  K_REDUCE,
  K_ALLREDUCE,
  K_ALLGATHER,
  K_RS,
  K_A2A,
  K_GATHER,
  K_SCATTER,
  K_SENDRECV,
  K_NUM
};

/* Rank r's value for element j of iteration i. */
static int32_t val(int i, int r, int j) {
  return (int32_t)(i * 131 + r * 17 + j * 3 + 1);
}

typedef struct {
  int kind, root;
  size_t count;
  int32_t *in, *out;
} step;

static size_t count_of(int i) {
  return (size_t)(1 + (i * 7) % 61) * ((i % 11 == 0) ? 500 : 1);
}

static int stress(int rank, int n, ncclUniqueId id, const char *param) {
  int iters = atoi(param);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 1;
  step *s = calloc((size_t)iters, sizeof *s);
  int failures = 0;
  for (int i = 0; i < iters; i++) {
    step *st = &s[i];
    st->kind = i % K_NUM;
    st->root = (i / K_NUM) % n;
    st->count = count_of(i);
    size_t all = st->count * (size_t)n;
    st->in = malloc(all * sizeof(int32_t));
    st->out = calloc(all, sizeof(int32_t));
    for (size_t j = 0; j < all; j++) st->in[j] = val(i, rank, (int)j);
    ncclResult_t r;
    size_t c = st->count;
    switch (st->kind) {
    case K_BCAST:
      r = ncclBroadcast(st->in, st->out, c, ncclInt32, st->root, comm, NULL);
      break;
    case K_REDUCE:
      r = ncclReduce(st->in, st->out, c, ncclInt32, ncclSum, st->root, comm, NULL);
      break;
    case K_ALLREDUCE:
      r = ncclAllReduce(st->in, st->out, c, ncclInt32, ncclMax, comm, NULL);
      break;
    case K_ALLGATHER:
      r = ncclAllGather(st->in, st->out, c, ncclInt32, comm, NULL);
      break;
    case K_RS:
      r = ncclReduceScatter(st->in, st->out, c, ncclInt32, ncclSum, comm, NULL);
      break;
    case K_A2A:
      r = ncclAlltoAll(st->in, st->out, c, ncclInt32, comm, NULL);
      break;
    case K_GATHER:
      r = ncclGather(st->in, st->out, c, ncclInt32, st->root, comm, NULL);
      break;
    case K_SCATTER:
      r = ncclScatter(st->in, st->out, c, ncclInt32, st->root, comm, NULL);
      break;
    default:
      ncclGroupStart();
      ncclSend(st->in, c, ncclInt32, (rank + 1) % n, comm, NULL);
      ncclRecv(st->out, c, ncclInt32, (rank + n - 1) % n, comm, NULL);
      r = ncclGroupEnd();
      break;
    }
    if (r != ncclSuccess) {
      harness_log(rank, "iteration %d kind %d: %s", i, st->kind, ncclGetLastError(comm));
      failures++;
      break;
    }
  }
  for (int i = 0; i < iters && !failures; i++) {
    step *st = &s[i];
    size_t c = st->count;
    for (size_t j = 0; j < c * (size_t)n; j++) {
      int64_t want = 0;
      int check = 1, q = (int)(j / c);
      size_t k = j % c;
      switch (st->kind) {
      case K_BCAST:
        check = j < c;
        want = val(i, st->root, (int)j);
        break;
      case K_REDUCE:
        check = j < c && rank == st->root;
        for (int p = 0; p < n; p++) want += val(i, p, (int)j);
        break;
      case K_ALLREDUCE:
        check = j < c;
        want = val(i, n - 1, (int)j);
        break;
      case K_ALLGATHER:
        want = val(i, q, (int)k);
        break;
      case K_RS:
        check = j < c;
        for (int p = 0; p < n; p++) want += val(i, p, (int)((size_t)rank * c + j));
        break;
      case K_A2A:
        want = val(i, q, (int)((size_t)rank * c + k));
        break;
      case K_GATHER:
        check = rank == st->root;
        want = val(i, q, (int)k);
        break;
      case K_SCATTER:
        check = j < c;
        want = val(i, st->root, (int)((size_t)rank * c + j));
        break;
      default:
        check = j < c;
        want = val(i, (rank + n - 1) % n, (int)j);
        break;
      }
      if (check && st->out[j] != (int32_t)want) {
        if (failures++ < 5)
          harness_log(rank, "iteration %d kind %d root %d element %zu: %d, expected %lld", i,
                      st->kind, st->root, j, st->out[j], (long long)want);
      }
    }
  }
  for (int i = 0; i < iters; i++) free(s[i].in), free(s[i].out);
  free(s);
  if (ncclCommDestroy(comm) != ncclSuccess) failures++;
  return failures ? 1 : 0;
}

static const harness_case cases[] = {{"stress", stress}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  if (argc < 3) return 2;
  harness_mode mode = strcmp(argv[1], "procs") == 0 ? HARNESS_PROCS : HARNESS_THREADS;
  int n = atoi(argv[2]);
  const char *iters = argc > 3 ? argv[3] : "400";
  int failed = harness_spawn(mode, n, "stress", iters, 240);
  printf("stress %s x%d (%s iterations): %s\n", argv[1], n, iters, failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
