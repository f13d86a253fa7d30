/*
 * init.c - ncclGetUniqueId and the communicator constructors.
 *
 * Every constructor validates its arguments, allocates the communicator (so
 * *comm is valid at once, even for nonblocking or grouped calls) and then
 * builds it: inline when blocking and outside a group, on a thread
 * otherwise (see group.h).
 */
#include <string.h>

#include "bootstrap/uid.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/group.h"
#include "device/device.h"
#include "util/alloc.h"
#include "util/check.h"

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId *uniqueId) {
  if (!uniqueId) return chorus_error(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  chorus_uid uid;
  CHECK(chorus_uid_create(&uid));
  chorus_uid_pack(&uid, uniqueId);
  return ncclSuccess;
}

static void *build_job(void *arg) {
  return (void *)(intptr_t)chorus_comm_build(arg);
}

/* Common tail of every constructor: comm is allocated with its ids. */
static ncclResult_t start_build(ncclComm_t comm) {
  chorus_job *job = chorus_calloc(1, sizeof *job);
  if (!job) return chorus_error(ncclSystemError, "out of memory");
  job->fn = build_job;
  job->arg = comm;
  job->owner = comm;
  job->blocking = comm->config.blocking;
  if (chorus_group_depth() > 0) {
    chorus_group_add_job(job);
    return ncclSuccess;
  }
  return chorus_job_run_now(job);
}

static ncclResult_t init_checked(ncclComm_t *out, int nranks, const ncclUniqueId *ids, int nids,
                                 int rank, ncclConfig_t *config, const char *what) {
  if (!out) return chorus_error(ncclInvalidArgument, "%s: comm (output pointer) is NULL", what);
  *out = NULL;
  if (nranks < 1)
    return chorus_error(ncclInvalidArgument, "%s: nranks = %d must be at least 1", what, nranks);
  if (rank < 0 || rank >= nranks)
    return chorus_error(ncclInvalidArgument, "%s: rank = %d is outside 0..%d", what, rank,
                        nranks - 1);
  ncclConfig_t cfg;
  CHECK(chorus_config_parse(config, NULL, &cfg, what));
  chorus_uid *uids = chorus_calloc((size_t)nids, sizeof *uids);
  if (!uids) {
    chorus_config_free(&cfg);
    return chorus_error(ncclSystemError, "out of memory");
  }
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < nids && res == ncclSuccess; i++)
    res = chorus_uid_unpack(&ids[i], &uids[i], what);
  ncclComm_t comm = NULL;
  if (res == ncclSuccess) res = chorus_comm_alloc(&comm, nranks, rank, &cfg);
  chorus_config_free(&cfg);
  if (res != ncclSuccess) {
    chorus_free(uids);
    return res;
  }
  comm->init.uids = uids;
  comm->init.nuids = nids;
  *out = comm;
  return start_build(comm);
}

static ncclResult_t init_common(ncclComm_t *out, int nranks, const ncclUniqueId *ids, int nids,
                                int rank, ncclConfig_t *config, const char *what) {
  ncclResult_t res = init_checked(out, nranks, ids, nids, rank, config, what);
  if (res != ncclSuccess && res != ncclInProgress) chorus_group_record_error(res);
  return res;
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *comm, int nranks, ncclUniqueId commId,
         int rank, ncclConfig_t *config) {
  return init_common(comm, nranks, &commId, 1, rank, config, "ncclCommInitRankConfig");
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId commId,
         int rank) {
  return init_common(comm, nranks, &commId, 1, rank, NULL, "ncclCommInitRank");
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t *newcomm, int nranks, int myrank,
         int nId, ncclUniqueId *commIds, ncclConfig_t *config) {
  if (!commIds)
    return chorus_error(ncclInvalidArgument, "ncclCommInitRankScalable: commIds is NULL");
  if (nId < 1 || nId > nranks)
    return chorus_error(ncclInvalidArgument,
                        "ncclCommInitRankScalable: nId = %d must be between 1 and nranks (%d)", nId,
                        nranks);
  return init_common(newcomm, nranks, commIds, nId, myrank, config, "ncclCommInitRankScalable");
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comms, int ndev, const int *devlist) {
  if (!comms) return chorus_error(ncclInvalidArgument, "ncclCommInitAll: comm array is NULL");
  if (ndev < 1)
    return chorus_error(ncclInvalidArgument, "ncclCommInitAll: ndev = %d must be at least 1", ndev);
  if (devlist) {
    int ndevices = chorus_dev_count();
    for (int i = 0; i < ndev; i++)
      if (devlist[i] < 0 || (ndevices > 0 && devlist[i] >= ndevices))
        return chorus_error(ncclInvalidArgument,
                            "ncclCommInitAll: devlist[%d] = %d is not a device of this process", i,
                            devlist[i]);
  }
  ncclUniqueId id;
  CHECK(pncclGetUniqueId(&id));
  CHECK(pncclGroupStart());
  ncclResult_t res = ncclSuccess;
  /* Rank i binds to devlist[i] (or device i), as in NCCL; the caller's
   * current device is restored afterwards. */
  int saved = chorus_dev_current();
  for (int i = 0; i < ndev; i++) {
    if (saved >= 0 && chorus_dev_use(devlist ? devlist[i] : i) != 0) {
      res = chorus_error(ncclInvalidArgument, "ncclCommInitAll: cannot use GPU %d: %s",
                         devlist ? devlist[i] : i, chorus_dev_error());
      break;
    }
    res = pncclCommInitRank(&comms[i], ndev, id, i);
    if (res != ncclSuccess) break;
  }
  if (saved >= 0) chorus_dev_use(saved);
  ncclResult_t eres = pncclGroupEnd();
  return res != ncclSuccess ? res : eres;
}
