/*
 * ordered.c - see ordered.h.
 */
#include "gpu/ordered.h"

#include <string.h>

#include "algo/func.h"
#include "device/device.h"
#include "device/kernels.h"
#include "gpu/arena.h"
#include "gpu/gpu.h"
#include "gpu/scratch.h"
#include "util/alloc.h"
#include "util/check.h"

#define ALIGN 256

struct chorus_gpu_ordered {
  int device;
  unsigned max_blocks; /* the rank's maxCTAs (0: none): the additions are its own */
  chorus_gpu_scratch scratch;
  void *event;  /* recorded after the last eager call's additions */
  void *stream; /* the stream it was recorded on (NULL: never recorded) */
};

ncclResult_t chorus_gpu_ordered_new(chorus_gpu_ordered **out, int device, int max_ctas) {
  chorus_gpu_ordered *o = chorus_calloc(1, sizeof *o);
  if (!o) return chorus_error(ncclSystemError, "out of memory for reproducible reductions");
  o->device = device;
  o->max_blocks = max_ctas > 0 ? (unsigned)max_ctas : 0;
  if (chorus_dev_use(device) != 0 || chorus_dev_event_new(&o->event) != 0) {
    chorus_free(o);
    return chorus_gpu_cuda_error("making an event for reproducible reductions");
  }
  *out = o;
  return ncclSuccess;
}

void chorus_gpu_ordered_free(chorus_gpu_ordered *o) {
  if (!o) return;
  chorus_dev_use(o->device);
  chorus_gpu_scratch_free(&o->scratch);
  chorus_dev_event_free(o->event);
  chorus_free(o);
}

static size_t up(size_t v) {
  return (v + ALIGN - 1) / ALIGN * ALIGN;
}

/* Is op a reduction this file turns into its gathering? */
static int turns(const chorus_op *op) {
  return op->cc->gpu_ordered && !op->u.gpu_ordered.func && chorus_func_reduces(op->func) &&
         op->count > 0;
}

/* Does the root's (or every) rank gather contributions here? */
static int gathers(const chorus_op *op) {
  return op->func != CHORUS_FUNC_REDUCE || op->cc->rank == op->root;
}

/* Bytes of this rank's contribution: its input. */
static size_t mine_bytes(const chorus_op *op) {
  const size_t blocks = op->func == CHORUS_FUNC_REDUCESCATTER ? (size_t)op->cc->nranks : 1;
  return blocks * op->count * op->esize;
}

/* Scratch for every contribution (none on a Reduce's other ranks). */
static size_t all_bytes(const chorus_op *op) {
  return gathers(op) ? up((size_t)op->cc->nranks * op->count * op->esize) : 0;
}

/* Scratch op needs: every contribution, then a PreMulSum's scaled input. */
static size_t need(const chorus_op *op) {
  return all_bytes(op) + (op->red.kind == CHORUS_RED_PREMULSUM ? up(mine_bytes(op)) : 0);
}

static int gathering_func(int func) {
  return func == CHORUS_FUNC_ALLREDUCE       ? CHORUS_FUNC_ALLGATHER
         : func == CHORUS_FUNC_REDUCESCATTER ? CHORUS_FUNC_ALLTOALL
                                             : CHORUS_FUNC_GATHER;
}

/* Turns op, given its scratch at s. */
static ncclResult_t turn(chorus_op *op, char *s) {
  op->u.gpu_ordered.func = op->func;
  op->u.gpu_ordered.sendbuff = op->sendbuff;
  op->u.gpu_ordered.recvbuff = op->recvbuff;
  op->u.gpu_ordered.red = op->red;
  op->u.gpu_ordered.all = gathers(op) ? s : NULL;
  const void *send = op->sendbuff;
  if (op->red.kind == CHORUS_RED_PREMULSUM) { /* this rank's scalar, on its own input */
    char *scaled = s + all_bytes(op);
    chorus_kern_red kred;
    chorus_gpu_kern_red(&op->red, &kred);
    if (chorus_kern_premul(&kred, scaled, op->sendbuff, mine_bytes(op) / op->esize,
                           op->cc->gpu_ordered->max_blocks, op->cuda_stream) != 0)
      return chorus_gpu_cuda_error("scaling a PreMulSum's input");
    send = scaled;
  }
  op->func = gathering_func(op->func);
  op->sendbuff = send;
  op->recvbuff = op->u.gpu_ordered.all;
  op->red.kind = CHORUS_RED_SUM;
  op->red.scalar_dev = NULL;
  return ncclSuccess;
}

/* Turns the calls ops[i, n) of ops[i]'s communicator. */
static ncclResult_t turn_comm(chorus_op **ops, size_t i, size_t n) {
  chorus_coll_comm *cc = ops[i]->cc;
  chorus_gpu_ordered *o = cc->gpu_ordered;
  size_t total = 0;
  int captured = 0;
  for (size_t j = i; j < n; j++)
    if (ops[j]->cc == cc && turns(ops[j])) {
      total += need(ops[j]);
      if (!captured && chorus_dev_stream_capturing(ops[j]->cuda_stream) == 1) captured = 1;
    }
  if (chorus_dev_use(o->device) != 0) return chorus_gpu_cuda_error("selecting the GPU");
  char *s = NULL;
  if (total)
    CHECK(chorus_gpu_scratch_get(&o->scratch, total, captured, o->stream ? o->event : NULL,
                                 "reproducible reductions", &s));
  for (size_t j = i; j < n; j++) {
    chorus_op *op = ops[j];
    if (op->cc != cc || !turns(op)) continue;
    /* A later call on another stream waits for the last one's additions
     * before gathering into the scratch they read. */
    if (!captured && o->stream && o->stream != op->cuda_stream &&
        chorus_dev_stream_wait_event(op->cuda_stream, o->event) != 0)
      return chorus_gpu_cuda_error("ordering reproducible reductions on two streams");
    const size_t b = need(op);
    CHECK(turn(op, s));
    s += b;
  }
  return ncclSuccess;
}

ncclResult_t chorus_gpu_ordered_begin(chorus_op **ops, size_t n) {
  size_t first = 0;
  while (first < n && !turns(ops[first])) first++;
  if (first == n) return ncclSuccess; /* the usual case: not a device call asked */
  const int saved = chorus_dev_current();
  ncclResult_t res = ncclSuccess;
  for (size_t i = first; i < n && res == ncclSuccess; i++)
    if (turns(ops[i])) res = turn_comm(ops, i, n);
  if (saved >= 0) chorus_dev_use(saved);
  return res;
}

/* Queues op's additions. */
static ncclResult_t add(chorus_op *op) {
  if (!op->u.gpu_ordered.all) return ncclSuccess;
  chorus_kern_red kred;
  chorus_gpu_kern_red(&op->u.gpu_ordered.red, &kred);
  if (chorus_dev_use(op->cc->gpu_ordered->device) != 0 ||
      chorus_kern_ordered_add(&kred, op->u.gpu_ordered.recvbuff, op->u.gpu_ordered.all, op->count,
                              op->cc->nranks, op->count, op->cc->gpu_ordered->max_blocks,
                              op->cuda_stream) != 0)
    return chorus_gpu_cuda_error("adding a reduction's contributions in rank order");
  return ncclSuccess;
}

/* After the eager calls of o's communicator among ops[i, n) queued their
 * additions: the event follows them all, on the last one's stream. */
static ncclResult_t follow(chorus_op **ops, size_t i, size_t n) {
  chorus_gpu_ordered *o = ops[i]->cc->gpu_ordered;
  void *last = NULL;
  for (size_t j = i; j < n; j++)
    if (ops[j]->cc == ops[i]->cc && ops[j]->u.gpu_ordered.func) last = ops[j]->cuda_stream;
  if (!last || chorus_dev_stream_capturing(last) == 1) return ncclSuccess;
  for (size_t j = i; j < n; j++)
    if (ops[j]->cc == ops[i]->cc && ops[j]->u.gpu_ordered.func && ops[j]->cuda_stream != last &&
        chorus_dev_stream_wait(last, ops[j]->cuda_stream) != 0)
      return chorus_gpu_cuda_error("ordering reproducible reductions on two streams");
  if (chorus_dev_event_record(o->event, last) != 0)
    return chorus_gpu_cuda_error("recording the end of reproducible reductions");
  o->stream = last;
  return ncclSuccess;
}

/* Gives op its own shape back. */
static void unturn(chorus_op *op) {
  op->func = op->u.gpu_ordered.func;
  op->sendbuff = op->u.gpu_ordered.sendbuff;
  op->recvbuff = op->u.gpu_ordered.recvbuff;
  op->red = op->u.gpu_ordered.red;
  memset(&op->u.gpu_ordered, 0, sizeof op->u.gpu_ordered);
}

ncclResult_t chorus_gpu_ordered_end(chorus_op **ops, size_t n, int launched) {
  size_t turned = 0;
  for (size_t i = 0; i < n; i++) turned += ops[i]->u.gpu_ordered.func != 0;
  if (!turned) return ncclSuccess;
  const int saved = chorus_dev_current();
  ncclResult_t res = ncclSuccess;
  for (size_t i = 0; i < n && launched && res == ncclSuccess; i++)
    if (ops[i]->u.gpu_ordered.func) res = add(ops[i]);
  for (size_t i = 0; i < n && launched && res == ncclSuccess; i++) {
    int first = ops[i]->u.gpu_ordered.func != 0; /* of its communicator's turned calls */
    for (size_t j = 0; j < i && first; j++)
      first = !(ops[j]->cc == ops[i]->cc && ops[j]->u.gpu_ordered.func);
    if (first) res = follow(ops, i, n);
  }
  for (size_t i = 0; i < n; i++)
    if (ops[i]->u.gpu_ordered.func) unturn(ops[i]);
  if (saved >= 0) chorus_dev_use(saved);
  return res;
}
