/*
 * coll_api.c - see coll_api.h.
 *
 * Each call is described (the extent of each buffer this rank touches,
 * the in-place layout NCCL defines for the function), and
 * check_and_enqueue validates it before any data moves; errors name the
 * argument.
 */
#include <stdint.h>
#include <string.h>

#include "algo/algos.h"
#include "core/coll_api.h"
#include "core/comm.h"
#include "core/enqueue.h"
#include "core/group.h"
#include "core/profiler.h"
#include "core/redop.h"
#include "core/stats.h"
#include "device/device.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/misc.h"

typedef struct call {
  const char *name;
  int func;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t dtype;
  int has_op;
  ncclRedOp_t op;
  int root; /* root or peer; -1 none */
  /* Filled by describe(): elements of each buffer this rank touches (0 =
   * unused here) and where sendbuff is when the call is in place, as an
   * element offset from recvbuff (SIZE_MAX: only distinct buffers). */
  size_t send_elems, recv_elems, inplace_off;
  int send_is_recv_offset; /* 1: in place means send == recv + off; 0: recv == send + off */
  void *stream;            /* the caller's cudaStream_t (GPU communicators) */
} call;

/* The extents and in-place form of the call, from the function table. */
static void describe(call *c, int rank, int n) {
  const chorus_func_info *f = chorus_func_get(c->func);
  const size_t k = c->count;
  c->send_elems = chorus_func_send_elems(c->func, k, rank, c->root, n);
  c->recv_elems = chorus_func_recv_elems(c->func, k, rank, c->root, n);
  c->inplace_off = 0;
  c->send_is_recv_offset = 1;
  switch (f ? f->inplace : CHORUS_INPLACE_NONE) {
  case CHORUS_INPLACE_SEND_AT_RANK:
    c->inplace_off = k * (size_t)rank;
    break;
  case CHORUS_INPLACE_RECV_AT_RANK:
    c->inplace_off = k * (size_t)rank;
    c->send_is_recv_offset = 0;
    break;
  case CHORUS_INPLACE_SEND_AT_ROOT:
    c->inplace_off = k * (size_t)c->root;
    break;
  case CHORUS_INPLACE_RECV_AT_ROOT:
    c->inplace_off = k * (size_t)c->root;
    c->send_is_recv_offset = 0;
    break;
  default:
    break;
  }
}

static ncclResult_t check_buffers(const call *c, size_t esize, int n) {
  size_t bytes; /* no division: two of them cost a small call 5% */
  if (__builtin_mul_overflow(c->count, esize, &bytes) ||
      __builtin_mul_overflow(bytes, (size_t)n, &bytes))
    return chorus_error(ncclInvalidArgument, "%s: count = %zu overflows the address space", c->name,
                        c->count);
  if (c->send_elems && !c->send)
    return chorus_error(ncclInvalidArgument, "%s: sendbuff is NULL (count = %zu)", c->name,
                        c->count);
  if (c->recv_elems && !c->recv)
    return chorus_error(ncclInvalidArgument, "%s: recvbuff is NULL (count = %zu)", c->name,
                        c->count);
  if (!c->send_elems || !c->recv_elems) return ncclSuccess;
  uintptr_t s = (uintptr_t)c->send, r = (uintptr_t)c->recv;
  size_t sb = c->send_elems * esize, rb = c->recv_elems * esize;
  uintptr_t off = (uintptr_t)(c->inplace_off * esize);
  int inplace = c->send_is_recv_offset ? s == r + off : r == s + off;
  if (inplace) return ncclSuccess;
  if (s < r + rb && r < s + sb)
    return chorus_error(ncclInvalidArgument,
                        "%s: sendbuff [%p, +%zu) and recvbuff [%p, +%zu) overlap but are not the "
                        "in-place layout of this call",
                        c->name, c->send, sb, c->recv, rb);
  return ncclSuccess;
}

/* Zeroes an op through the C library's memset: inlined, its size makes
 * a `rep stos`, whose start-up cost a small host call 3% on AMD EPYC
 * (the library stores vectors). */
static void zero_op(chorus_op *op) {
  void *(*volatile set)(void *, int, size_t) = memset;
  set(op, 0, sizeof *op);
}

static ncclResult_t check_and_enqueue_inner(ncclComm_t comm, call *c) {
  CHECK(chorus_comm_usable(comm, c->name));
  if ((int)c->dtype < 0 || (int)c->dtype >= ncclNumTypes)
    return chorus_error(ncclInvalidArgument,
                        "%s: datatype = %d is not a valid ncclDataType_t (0..%d)", c->name,
                        (int)c->dtype, ncclNumTypes - 1);
  int n = comm->nranks;
  if (chorus_func_rooted(c->func) && (c->root < 0 || c->root >= n))
    return chorus_error(ncclInvalidArgument, "%s: root = %d is outside 0..%d", c->name, c->root,
                        n - 1);
  if (chorus_func_p2p(c->func) && (c->root < 0 || c->root >= n))
    return chorus_error(ncclInvalidArgument, "%s: peer = %d is outside 0..%d", c->name, c->root,
                        n - 1);
  /* In a group, built where the group keeps it (no copy). */
  chorus_op local, *slot = chorus_group_depth() > 0 ? chorus_group_slot() : NULL;
  chorus_op *const op = slot ? slot : &local;
  zero_op(op);
  op->nccl_op = 0;
  if (c->has_op)
    CHECK(chorus_redop_resolve(comm, c->op, c->dtype, &op->red, &op->nccl_op, c->name));
  size_t esize = chorus_type_size(c->dtype);
  describe(c, comm->rank, n);
  CHECK(check_buffers(c, esize, n));
  op->func = c->func;
  op->sendbuff = c->send;
  op->recvbuff = c->recv;
  op->count = c->count;
  op->dtype = c->dtype;
  op->esize = esize;
  op->root = chorus_func_rooted(c->func) || chorus_func_p2p(c->func) ? c->root : -1;
  op->red.dtype = c->dtype;
  op->cuda_stream = c->stream;
  chorus_call_desc d = {0, c->count, c->func, c->dtype, c->has_op ? op->nccl_op : -1, op->root};
  op->app_index = chorus_progress_issue(&comm->progress, &d, chorus_func_p2p(c->func));
  if (comm->cc.tracing) op->t_enq = chorus_now_ns();
  chorus_prof_issue(comm, op, chorus_group_depth());
  if (!comm->stats) return chorus_enqueue(comm, op);
  /* Host calls outside a group run before chorus_enqueue returns. A call
   * captured into a CUDA graph runs at each replay: core/trace.c counts
   * it then. */
  const int timed = comm->device < 0 && chorus_group_depth() == 0;
  const int captured = comm->device >= 0 && chorus_dev_stream_capturing(c->stream) == 1;
  const int64_t t0 = timed ? chorus_now_ns() : 0;
  ncclResult_t res = chorus_enqueue(comm, op);
  if (res == ncclSuccess && !captured)
    chorus_stats_count(comm->stats, c->func, chorus_func_size(c->func, c->count, esize, n),
                       timed ? chorus_now_ns() - t0 : -1);
  return res;
}

static ncclResult_t check_and_enqueue(ncclComm_t comm, call *c) {
  chorus_log_ctx old = comm && __atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE) == CHORUS_COMM_MAGIC
                           ? chorus_comm_enter(comm)
                           : chorus_log_ctx_get();
  ncclResult_t res = chorus_comm_enter_call(comm, c->name);
  if (res == ncclSuccess) {
    res = check_and_enqueue_inner(comm, c);
    if (res != ncclSuccess) chorus_stats_error(comm->stats);
    chorus_comm_leave_call(comm);
  }
  if (res != ncclSuccess) chorus_group_record_error(res);
  chorus_log_ctx_set(old);
  return res;
}

ncclResult_t chorus_enqueue_call(ncclComm_t comm, const char *name, int func, const void *send,
                                 void *recv, size_t count, ncclDataType_t dtype, int has_op,
                                 ncclRedOp_t op, int root, cudaStream_t stream) {
  call c = {.name = name,
            .func = func,
            .send = send,
            .recv = recv,
            .count = count,
            .dtype = dtype,
            .has_op = has_op,
            .op = op,
            .root = root,
            .stream = (void *)stream};
  return check_and_enqueue(comm, &c);
}
