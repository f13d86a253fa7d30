/*
 * coll_api.h - a collective or point-to-point call as an entry point
 * received it, checked and enqueued.
 *
 * Validates everything an application can get wrong before any data
 * moves (the communicator, datatype, operator, root or peer, counts that
 * overflow, NULL buffers, buffers that overlap other than in the
 * function's in-place form), naming the argument, then runs the call or
 * adds it to the thread's group. `name` is the entry point's, for
 * messages; `has_op` says whether `op` means anything; `root` is the root
 * or peer (-1: none).
 */
#ifndef CHORUS_CORE_COLL_API_H
#define CHORUS_CORE_COLL_API_H

#include <stddef.h>

#include "nccl.h"

ncclResult_t chorus_enqueue_call(ncclComm_t comm, const char *name, int func, const void *send,
                                 void *recv, size_t count, ncclDataType_t dtype, int has_op,
                                 ncclRedOp_t op, int root, cudaStream_t stream);

#endif
