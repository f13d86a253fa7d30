/*
 * split.c - ncclCommSplit and ncclCommShrink: new communicators from an
 * existing one, agreed over the parent's bootstrap network.
 *
 * Split: every parent rank contributes (color, key) to an allgather; the
 * members of each color, ordered by (key, parent rank), form a child. The
 * child's rank 0 creates a fresh unique id, a second allgather spreads it,
 * and the members build the child like any communicator.
 * Shrink: only survivors call, so no allgather over the parent is possible;
 * the first survivor creates the id and sends it to each other survivor.
 */
#include <stdio.h>
#include <string.h>

#include "coll/exec.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/group.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"

typedef struct split_job {
  ncclComm_t parent;
  ncclComm_t child; /* NULL for NCCL_SPLIT_NOCOLOR */
  int color, key;
} split_job;

typedef struct color_key {
  int32_t color, key;
} color_key;

/* Parent rank order of this color's members, sorted by (key, rank). */
static int members(const color_key *ck, int n, int color, int *out) {
  int m = 0;
  for (int r = 0; r < n; r++)
    if (ck[r].color == color) out[m++] = r;
  for (int i = 1; i < m; i++) { /* insertion sort: stable, so ties keep rank order */
    int v = out[i], j = i - 1;
    while (j >= 0 && ck[out[j]].key > ck[v].key) out[j + 1] = out[j], j--;
    out[j + 1] = v;
  }
  return m;
}

static ncclResult_t do_split(split_job *j) {
  ncclComm_t parent = j->parent;
  int n = parent->nranks, me = parent->rank;
  ncclResult_t res;
  color_key *ck = chorus_calloc((size_t)n, sizeof *ck);
  chorus_uid *ids = chorus_calloc((size_t)n, sizeof *ids);
  int *mem = chorus_calloc((size_t)n, sizeof *mem);
  if (!ck || !ids || !mem) {
    res = chorus_error(ncclSystemError, "ncclCommSplit: out of memory");
    goto out;
  }
  ck[me] = (color_key){j->color, j->key};
  CHECK_GOTO(chorus_bootstrap_allgather(parent->bs, ck, sizeof *ck), res, out);
  int m = j->child ? members(ck, n, j->color, mem) : 0;
  if (j->child && mem[0] == me)
    CHECK_GOTO(chorus_uid_create_private(&ids[me], &parent->bs->listen_addr), res, out);
  CHECK_GOTO(chorus_bootstrap_allgather(parent->bs, ids, sizeof *ids), res, out);
  parent->ctl_seq++;
  if (!j->child) goto out;
  int newrank = 0;
  while (mem[newrank] != me) newrank++;
  j->child->rank = newrank;
  j->child->nranks = m;
  j->child->init.uids = chorus_malloc(sizeof(chorus_uid));
  if (!j->child->init.uids) {
    res = chorus_error(ncclSystemError, "ncclCommSplit: out of memory");
    goto out;
  }
  j->child->init.uids[0] = ids[mem[0]];
  j->child->init.nuids = 1;
  chorus_comm_inherit_net(j->child, parent);
  INFO(CHORUS_INIT, "ncclCommSplit: parent rank %d color %d key %d -> rank %d of %d", me, j->color,
       j->key, newrank, m);
  res = chorus_comm_build(j->child);
out:
  if (res != ncclSuccess && j->child) __atomic_store_n(&j->child->async, res, __ATOMIC_RELEASE);
  chorus_free(ck);
  chorus_free(ids);
  chorus_free(mem);
  return res;
}

static void *split_thread(void *arg) {
  split_job *j = arg;
  ncclComm_t parent = j->parent;
  chorus_log_ctx old = chorus_comm_enter(parent);
  ncclResult_t res = do_split(j);
  chorus_log_ctx_set(old);
  __atomic_sub_fetch(&parent->cc.busy, 1, __ATOMIC_ACQ_REL);
  chorus_free(j);
  return (void *)(intptr_t)res;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
         ncclConfig_t *config) {
  const char *what = "ncclCommSplit";
  CHECK(chorus_comm_check(comm, what));
  chorus_log_ctx old = chorus_comm_enter(comm);
  ncclResult_t res = ncclSuccess;
  ncclConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  split_job *j = NULL;
  chorus_job *job = NULL;
  if (!newcomm) {
    res = chorus_error(ncclInvalidArgument, "%s: newcomm (output pointer) is NULL", what);
    goto fail;
  }
  *newcomm = NULL;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    res = chorus_error(ncclInvalidArgument,
                       "%s: color = %d must be >= 0 or NCCL_SPLIT_NOCOLOR (-1)", what, color);
    goto fail;
  }
  CHECK_GOTO(chorus_comm_usable(comm, what), res, fail);
  CHECK_GOTO(chorus_config_parse(config, &comm->config, &cfg, what), res, fail);
  j = chorus_calloc(1, sizeof *j);
  job = chorus_calloc(1, sizeof *job);
  if (!j || !job) {
    res = chorus_error(ncclSystemError, "%s: out of memory", what);
    goto fail;
  }
  *j = (split_job){comm, NULL, color, key};
  if (color != NCCL_SPLIT_NOCOLOR) {
    CHECK_GOTO(chorus_comm_alloc(&j->child, 1, 0, &cfg), res, fail);
    j->child->device = comm->device; /* children stay on the parent's device */
  }
  *job = (chorus_job){split_thread, j, j->child, cfg.blocking, 0, 0, NULL};
  chorus_config_free(&cfg);
  *newcomm = j->child;
  __atomic_add_fetch(&comm->cc.busy, 1, __ATOMIC_ACQ_REL);
  chorus_log_ctx_set(old);
  if (chorus_group_depth() > 0) {
    chorus_group_add_job(job);
    return ncclSuccess;
  }
  return chorus_job_run_now(job);
fail:
  chorus_group_record_error(res);
  if (j && j->child) chorus_comm_free(j->child);
  if (newcomm) *newcomm = NULL;
  chorus_free(j);
  chorus_free(job);
  chorus_config_free(&cfg);
  chorus_log_ctx_set(old);
  return res;
}

static ncclResult_t shrink_check(ncclComm_t comm, const int *excl, int nexcl, int flags,
                                 uint8_t *out) {
  const char *what = "ncclCommShrink";
  if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT)
    return chorus_error(ncclInvalidArgument,
                        "%s: shrinkFlags = %d is not NCCL_SHRINK_DEFAULT or "
                        "NCCL_SHRINK_ABORT",
                        what, flags);
  if (nexcl < 0 || nexcl >= comm->nranks || (nexcl > 0 && !excl))
    return chorus_error(ncclInvalidArgument,
                        "%s: excludeRanksCount = %d (list %p) must be in 0..%d", what, nexcl,
                        (const void *)excl, comm->nranks - 1);
  for (int i = 0; i < nexcl; i++) {
    int r = excl[i];
    if (r < 0 || r >= comm->nranks)
      return chorus_error(ncclInvalidArgument, "%s: excludeRanksList[%d] = %d is not a rank", what,
                          i, r);
    if (out[r]) return chorus_error(ncclInvalidArgument, "%s: rank %d is listed twice", what, r);
    out[r] = 1;
  }
  if (out[comm->rank])
    return chorus_error(ncclInvalidArgument,
                        "%s: this rank (%d) is in excludeRanksList; excluded ranks must not call",
                        what, comm->rank);
  return ncclSuccess;
}

#define SHRINK_TAG (1ull << 62)

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int *excludeRanksList,
         int excludeRanksCount, ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
  const char *what = "ncclCommShrink";
  CHECK(chorus_comm_check(comm, what));
  if (!newcomm) return chorus_error(ncclInvalidArgument, "%s: newcomm is NULL", what);
  *newcomm = NULL;
  chorus_log_ctx old = chorus_comm_enter(comm);
  ncclResult_t res;
  ncclComm_t child = NULL;
  ncclConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  uint8_t *gone = chorus_calloc((size_t)comm->nranks, 1);
  chorus_uid *uid = chorus_calloc(1, sizeof *uid);
  if (!gone || !uid) {
    res = chorus_error(ncclSystemError, "%s: out of memory", what);
    goto out;
  }
  CHECK_GOTO(shrink_check(comm, excludeRanksList, excludeRanksCount, shrinkFlags, gone), res, out);
  if (shrinkFlags == NCCL_SHRINK_ABORT) {
    /* Stop whatever still runs on the parent, then keep its bootstrap usable. */
    __atomic_store_n(&comm->abort_flag, 1, __ATOMIC_RELEASE);
    int64_t dl = chorus_now_ns() + 10ll * 1000000000;
    while (!chorus_comm_drained(comm) && !chorus_expired(dl)) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    if (comm->conns) {
      char why[64];
      snprintf(why, sizeof why, "rank %d shrank the communicator", comm->rank);
      chorus_exec_fail_comm(&comm->cc, ncclRemoteError, why);
    }
    __atomic_store_n(&comm->abort_flag, 0, __ATOMIC_RELEASE);
  }
  CHECK_GOTO(chorus_config_parse(config, &comm->config, &cfg, what), res, out);
  int leader = 0, newrank = 0, m = 0;
  while (gone[leader]) leader++;
  for (int r = 0; r < comm->nranks; r++) {
    if (gone[r]) continue;
    if (r == comm->rank) newrank = m;
    m++;
  }
  uint64_t tag = SHRINK_TAG | comm->ctl_seq++;
  if (comm->rank == leader) {
    CHECK_GOTO(chorus_uid_create_private(uid, &comm->bs->listen_addr), res, out);
    for (int r = 0; r < comm->nranks; r++)
      if (!gone[r] && r != leader)
        CHECK_GOTO(chorus_bootstrap_send(comm->bs, r, tag, uid, sizeof *uid), res, out);
  } else {
    CHECK_GOTO(chorus_bootstrap_recv(comm->bs, leader, tag, uid, sizeof *uid), res, out);
  }
  CHECK_GOTO(chorus_comm_alloc(&child, m, newrank, &cfg), res, out);
  child->device = comm->device;
  child->init.uids = uid;
  child->init.nuids = 1;
  chorus_comm_inherit_net(child, comm);
  uid = NULL;
  *newcomm = child;
  INFO(CHORUS_INIT, "ncclCommShrink: rank %d -> rank %d of %d", comm->rank, newrank, m);
  /* Shrink is a blocking call here even for nonblocking configs: the
   * survivors are all inside it, so building now cannot wait on anyone. */
  res = chorus_comm_build(child);
out:
  chorus_free(gone);
  chorus_free(uid);
  chorus_config_free(&cfg);
  chorus_log_ctx_set(old);
  return res;
}
