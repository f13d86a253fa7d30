/*
 * func.c - the function table (func.h).
 */
#include "algo/func.h"

#include "util/misc.h"

#define N CHORUS_FUNC_N
#define A CHORUS_BUF_ALL
#define R CHORUS_BUF_ROOT
#define X CHORUS_BUF_NONE

/* name, key, rooted, p2p, reduces, send and recv blocks, where, in place */
static const chorus_func_info funcs[CHORUS_FUNC_COUNT] = {
    [CHORUS_FUNC_ALLREDUCE] = {"AllReduce", "allreduce", 0, 0, 1, 1, 1, A, A, CHORUS_INPLACE_SAME},
    [CHORUS_FUNC_BROADCAST] = {"Broadcast", "broadcast", 1, 0, 0, 1, 1, R, A, CHORUS_INPLACE_SAME},
    [CHORUS_FUNC_REDUCE] = {"Reduce", "reduce", 1, 0, 1, 1, 1, A, R, CHORUS_INPLACE_SAME},
    [CHORUS_FUNC_ALLGATHER] = {"AllGather", "allgather", 0, 0, 0, 1, N, A, A,
                               CHORUS_INPLACE_SEND_AT_RANK},
    [CHORUS_FUNC_REDUCESCATTER] = {"ReduceScatter", "reducescatter", 0, 0, 1, N, 1, A, A,
                                   CHORUS_INPLACE_RECV_AT_RANK},
    [CHORUS_FUNC_ALLTOALL] = {"AlltoAll", "alltoall", 0, 0, 0, N, N, A, A, CHORUS_INPLACE_SAME},
    [CHORUS_FUNC_GATHER] = {"Gather", "gather", 1, 0, 0, 1, N, A, R, CHORUS_INPLACE_SEND_AT_ROOT},
    [CHORUS_FUNC_SCATTER] = {"Scatter", "scatter", 1, 0, 0, N, 1, R, A,
                             CHORUS_INPLACE_RECV_AT_ROOT},
    [CHORUS_FUNC_SEND] = {"Send", "sendrecv", 0, 1, 0, 1, 0, A, X, CHORUS_INPLACE_NONE},
    [CHORUS_FUNC_RECV] = {"Recv", "sendrecv", 0, 1, 0, 0, 1, X, A, CHORUS_INPLACE_NONE},
};

const chorus_func_info *chorus_func_get(int func) {
  return func > 0 && func < CHORUS_FUNC_COUNT ? &funcs[func] : 0;
}

const char *chorus_func_name(int func) {
  const chorus_func_info *f = chorus_func_get(func);
  return f ? f->name : "?";
}

int chorus_func_rooted(int func) {
  const chorus_func_info *f = chorus_func_get(func);
  return f && f->rooted;
}

int chorus_func_nccl_code(int func) {
  switch (func) {
  case CHORUS_FUNC_BROADCAST:
    return 0;
  case CHORUS_FUNC_REDUCE:
    return 1;
  case CHORUS_FUNC_ALLGATHER:
    return 2;
  case CHORUS_FUNC_REDUCESCATTER:
    return 3;
  case CHORUS_FUNC_ALLREDUCE:
    return 4;
  case CHORUS_FUNC_SEND:
    return 6;
  case CHORUS_FUNC_RECV:
    return 7;
  default:
    return 5;
  }
}

int chorus_func_p2p(int func) {
  const chorus_func_info *f = chorus_func_get(func);
  return f && f->p2p;
}

int chorus_func_reduces(int func) {
  const chorus_func_info *f = chorus_func_get(func);
  return f && f->reduces;
}

int chorus_func_by_key(const char *key, size_t len) {
  for (int f = 1; f < CHORUS_FUNC_RECV; f++)
    if (chorus_word_is(key, len, funcs[f].key)) return f;
  return 0;
}

static size_t elems(int blocks, int where, size_t count, int rank, int root, int n) {
  if (where == X || (where == R && rank != root)) return 0;
  return blocks == N ? count * (size_t)n : count * (size_t)blocks;
}

size_t chorus_func_send_elems(int func, size_t count, int rank, int root, int n) {
  const chorus_func_info *f = chorus_func_get(func);
  return f ? elems(f->send_blocks, f->send_where, count, rank, root, n) : 0;
}

size_t chorus_func_recv_elems(int func, size_t count, int rank, int root, int n) {
  const chorus_func_info *f = chorus_func_get(func);
  return f ? elems(f->recv_blocks, f->recv_where, count, rank, root, n) : 0;
}

size_t chorus_func_shared_elems(int func, size_t count, int rank, int root, int n) {
  const chorus_func_info *f = chorus_func_get(func);
  if (!f || (f->recv_where == R && rank == root)) return 0;
  return elems(f->send_blocks, f->send_where, count, rank, root, n);
}

size_t chorus_func_size(int func, size_t count, size_t esize, int n) {
  const chorus_func_info *f = chorus_func_get(func);
  const int blocks = f && (f->send_blocks == N || f->recv_blocks == N);
  return count * esize * (blocks ? (size_t)n : 1);
}

double chorus_func_bus_factor(int func, int n) {
  if (n < 1) return 0;
  switch (func) {
  case CHORUS_FUNC_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case CHORUS_FUNC_BROADCAST:
  case CHORUS_FUNC_REDUCE:
  case CHORUS_FUNC_SEND:
  case CHORUS_FUNC_RECV:
    return 1.0;
  default:
    return (double)(n - 1) / n;
  }
}

size_t chorus_func_out_bytes(int func, size_t count, size_t esize, int n) {
  const chorus_func_info *f = chorus_func_get(func);
  return count * esize * (f && f->recv_blocks == N ? (size_t)n : 1);
}
