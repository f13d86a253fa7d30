/*
 * ordered.h - reductions in rank order on GPU communicators
 * (CHORUS_REPRODUCIBLE=1), as coll/ordered.c does them on host memory.
 *
 * A reducing call runs on its stream as three steps: a PreMulSum's input
 * scaled by its owner's scalar into device scratch; the gathering
 * collective (AllReduce: an AllGather, ReduceScatter: an AlltoAll of its
 * blocks, Reduce: a Gather to the root) into device scratch, planned and
 * launched like any collective; one kernel adding the contributions in
 * rank order into the caller's buffer (device/kernels.h). Gathering moves
 * bytes only, so neither its algorithm nor the communicator's shape (GPUs
 * of one process, processes, hosts) can change a bit of the result.
 *
 * Scratch (scratch.h): eager calls share one buffer per communicator, each
 * call's additions ending before a later call's gathering starts on any
 * stream; a call captured into a CUDA graph gets its own.
 */
#ifndef CHORUS_GPU_ORDERED_H
#define CHORUS_GPU_ORDERED_H

#include <stddef.h>

#include "coll/op.h"
#include "nccl.h"

typedef struct chorus_gpu_ordered chorus_gpu_ordered;

/* The state of a reproducible GPU communicator on `device`; its kernels
 * take at most max_ctas CTAs where that is not 0 (the rank's maxCTAs). */
ncclResult_t chorus_gpu_ordered_new(chorus_gpu_ordered **out, int device, int max_ctas);
/* Frees its scratch (after the device went idle). NULL is fine. */
void chorus_gpu_ordered_free(chorus_gpu_ordered *o);

/* Turns each reducing call of ops[0, n) whose communicator has this state
 * into its gathering call (queuing a PreMulSum's scaling), before the
 * calls are planned. On failure the calls already turned stay so until
 * chorus_gpu_ordered_end. */
ncclResult_t chorus_gpu_ordered_begin(chorus_op **ops, size_t n);
/* After the calls were launched (launched != 0): queues each turned
 * call's additions. Either way gives every turned call back the shape the
 * caller gave it. */
ncclResult_t chorus_gpu_ordered_end(chorus_op **ops, size_t n, int launched);

/* The function the caller called: a turned call's own, not its
 * gathering's (the kernels compare calls across ranks by it). */
static inline int chorus_gpu_ordered_func(const chorus_op *op) {
  return op->u.gpu_ordered.func ? op->u.gpu_ordered.func : op->func;
}

#endif
