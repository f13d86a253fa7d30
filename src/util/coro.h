/*
 * coro.h - resumable functions for collective schedules.
 *
 * A schedule is written as straight-line code that waits for resources
 * (a free send slot, a received message). Each wait that cannot be satisfied
 * yet returns ncclInProgress to the executor, which calls the function again
 * later; execution resumes at the same wait. This lets one thread drive many
 * operations at once (several ranks of one process in a group, matched sends
 * and receives) without threads or callbacks.
 *
 *   ncclResult_t step(struct my_op *op) {
 *     CORO_BEGIN(op->co);
 *     for (op->i = 0; op->i < op->n; op->i++) {
 *       CORO_AWAIT(op->co, ready(op));       // returns ncclInProgress until ready
 *       work(op);
 *     }
 *     CORO_END(op->co);                      // returns ncclSuccess
 *   }
 *
 * Rules: local variables do not survive a wait (keep state in the op);
 * no CORO_AWAIT inside a nested switch. `co` is an int initialised to 0.
 */
#ifndef CHORUS_UTIL_CORO_H
#define CHORUS_UTIL_CORO_H

#include "nccl.h"

#define CORO_BEGIN(co)                                                                             \
  switch (co) {                                                                                    \
  case 0:

#define CORO_AWAIT(co, cond)                                                                       \
  do {                                                                                             \
    (co) = __LINE__;                                                                               \
    __attribute__((fallthrough));                                                                  \
  case __LINE__:                                                                                   \
    if (!(cond)) return ncclInProgress;                                                            \
  } while (0)

/* Like CORO_AWAIT, but `expr` yields an ncclResult_t: ncclInProgress waits,
 * an error is returned, ncclSuccess continues. */
#define CORO_AWAIT_RES(co, res, expr)                                                              \
  do {                                                                                             \
    (co) = __LINE__;                                                                               \
    __attribute__((fallthrough));                                                                  \
  case __LINE__:                                                                                   \
    (res) = (expr);                                                                                \
    if ((res) != ncclSuccess) return (res);                                                        \
  } while (0)

#define CORO_END(co)                                                                               \
  (co) = -1;                                                                                       \
  __attribute__((fallthrough));                                                                    \
  case -1:                                                                                         \
    break;                                                                                         \
    }                                                                                              \
    return ncclSuccess

#endif
