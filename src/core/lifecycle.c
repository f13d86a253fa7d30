/*
 * lifecycle.c - finalize, destroy, abort, revoke, and the queries.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "coll/exec.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/group.h"
#include "gpu/gpu.h"
#include "gpu/proxy.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  CHECK(chorus_comm_check(comm, "ncclCommFinalize"));
  chorus_log_ctx old = chorus_comm_enter(comm);
  ncclResult_t res = ncclSuccess;
  int state = __atomic_load_n(&comm->state, __ATOMIC_ACQUIRE);
  if (state == CHORUS_COMM_INIT)
    res = chorus_error(ncclInvalidUsage, "ncclCommFinalize: the communicator is not initialized "
                                         "(poll ncclCommGetAsyncError first)");
  else if (state == CHORUS_COMM_REVOKED)
    res = chorus_error(ncclInvalidUsage, "ncclCommFinalize: the communicator was revoked; "
                                         "destroy or abort it instead");
  else
    /* Host calls complete before they return, so nothing is outstanding. */
    __atomic_store_n(&comm->state, CHORUS_COMM_FINALIZED, __ATOMIC_RELEASE);
  chorus_log_ctx_set(old);
  return res;
}

/* Whether comm may go now: not while an open group builds it or another
 * thread's open group holds calls on it; this thread's open group's calls
 * on it are dropped (that group then fails). */
static ncclResult_t leave_groups(ncclComm_t comm, const char *what) {
  if (chorus_group_builds(comm))
    return chorus_error(ncclInvalidUsage,
                        "%s: the communicator is created by the open group; call ncclGroupEnd "
                        "first",
                        what);
  const size_t dropped = chorus_group_drop(comm);
  if (dropped) /* the group's failure; ncclGetLastError says why after ncclGroupEnd */
    (void)chorus_error(ncclInvalidUsage,
                       "%s inside a group: its %zu queued call(s) on this communicator are "
                       "dropped, and ncclGroupEnd returns ncclInvalidUsage",
                       what, dropped);
  const int elsewhere = __atomic_load_n(&comm->cc.queued, __ATOMIC_ACQUIRE);
  if (elsewhere > 0)
    return chorus_error(ncclInvalidUsage,
                        "%s: calls on this communicator wait in another thread's open group "
                        "(%d such group(s)); end it first",
                        what, elsewhere);
  return ncclSuccess;
}

/* Waits (bounded) until no call runs on comm in another thread. */
static void drain(ncclComm_t comm) {
  int64_t dl = chorus_now_ns() + 10ll * 1000000000;
  while (!chorus_comm_drained(comm) && !chorus_expired(dl)) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (!comm) return ncclSuccess; /* NCCL accepts NULL here */
  CHECK(chorus_comm_check(comm, "ncclCommDestroy"));
  CHECK(leave_groups(comm, "ncclCommDestroy"));
  /* Destroying a communicator still being built gives up on it. */
  if (__atomic_load_n(&comm->async, __ATOMIC_ACQUIRE) == ncclInProgress)
    __atomic_store_n(&comm->abort_flag, 1, __ATOMIC_RELEASE);
  else
    chorus_proxy_settle(comm->cc.proxy);
  chorus_gpu_abort(comm->cc.gpu);
  chorus_proxy_abort(comm->cc.proxy);
  chorus_comm_join(comm);
  drain(comm);
  chorus_comm_free(comm);
  return ncclSuccess;
}

/* A communicator and its parts across hosts (hier.c), which stop with
 * it: the number of them in out[]. */
static int with_parts(ncclComm_t comm, ncclComm_t out[1 + 1 + CHORUS_LANES_MAX]) {
  int n = 0;
  out[n++] = comm;
  if (comm->part_local) out[n++] = comm->part_local;
  for (int k = 0; k < comm->nlanes; k++)
    if (comm->part_cross[k]) out[n++] = comm->part_cross[k];
  return n;
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  CHECK(chorus_comm_check(comm, "ncclCommAbort"));
  CHECK(leave_groups(comm, "ncclCommAbort"));
  chorus_log_ctx old = chorus_comm_enter(comm);
  ncclComm_t all[1 + 1 + CHORUS_LANES_MAX];
  const int n = with_parts(comm, all);
  /* First every wait ends (any thread may be in one)... */
  for (int i = 0; i < n; i++) {
    __atomic_store_n(&all[i]->abort_flag, 1, __ATOMIC_SEQ_CST); /* see chorus_comm_enter_call */
    chorus_gpu_abort(all[i]->cc.gpu);
    chorus_proxy_abort(all[i]->cc.proxy);
  }
  chorus_comm_join(comm);
  drain(comm);
  /* ...then, the calls drained, the peers learn why. */
  char why[64];
  snprintf(why, sizeof why, "rank %d called ncclCommAbort", comm->rank);
  for (int i = n - 1; i >= 0; i--) {
    chorus_gpu_tell_aborted(all[i]->cc.gpu);
    if (all[i]->conns) chorus_exec_fail_comm(&all[i]->cc, ncclRemoteError, why);
  }
  INFO(CHORUS_INIT, "comm %p rank %d aborted", (void *)comm, comm->rank);
  chorus_log_ctx_set(old);
  chorus_comm_free(comm);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  CHECK(chorus_comm_check(comm, "ncclCommRevoke"));
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return chorus_error(ncclInvalidArgument,
                        "ncclCommRevoke: revokeFlags = %d must be NCCL_REVOKE_DEFAULT (0)",
                        revokeFlags);
  int state = __atomic_load_n(&comm->state, __ATOMIC_ACQUIRE);
  if (state == CHORUS_COMM_INIT)
    return chorus_error(ncclInvalidUsage, "ncclCommRevoke: the communicator is not initialized");
  __atomic_store_n(&comm->state, CHORUS_COMM_REVOKED, __ATOMIC_RELEASE);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t *asyncError) {
  CHECK(chorus_comm_check(comm, "ncclCommGetAsyncError"));
  if (!asyncError)
    return chorus_error(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  ncclResult_t r = __atomic_load_n(&comm->async, __ATOMIC_ACQUIRE);
  if (r == ncclSuccess && comm->cc.failed != ncclSuccess) r = comm->cc.failed;
  if (r == ncclSuccess && (comm->cc.gpu || comm->cc.proxy)) {
    r = comm->cc.gpu ? chorus_gpu_async_error(comm->cc.gpu)
                     : chorus_proxy_async_error(comm->cc.proxy);
    if (r != ncclSuccess) __atomic_store_n(&comm->cc.failed, r, __ATOMIC_RELEASE);
  }
  *asyncError = r;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int *count) {
  CHECK(chorus_comm_check(comm, "ncclCommCount"));
  if (!count) return chorus_error(ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = comm->nranks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int *rank) {
  CHECK(chorus_comm_check(comm, "ncclCommUserRank"));
  if (!rank) return chorus_error(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int *device) {
  CHECK(chorus_comm_check(comm, "ncclCommCuDevice"));
  if (!device) return chorus_error(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->device; /* -1 for host-memory communicators */
  return ncclSuccess;
}
