/*
 * device_api.c - the host entry points of NCCL's device API (nccl_device.h).
 *
 * Device communicators and their barriers are not implemented yet: each call
 * says so and returns ncclInvalidUsage. The team queries are plain arithmetic
 * on a communicator and are answered. On host communicators each rank is
 * its own load/store-accessible (LSA) team: no rank maps another's memory.
 */
#include "core/api.h"
#include "core/comm.h"
#include "util/check.h"

/* nccl_device/core.h's ncclTeam: {nRanks, rank, stride}. */
typedef struct chorus_team {
  int nRanks, rank, stride;
} chorus_team;

static ncclResult_t not_yet(const char *what) {
  return chorus_error(ncclInvalidUsage,
                      "%s: NCCL's device API is not implemented yet in Chorus (host-memory "
                      "communicators have no device side)",
                      what);
}

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const void *reqs, void *outDevComm) {
  return not_yet("ncclDevCommCreate");
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const void *devComm) {
  return not_yet("ncclDevCommDestroy");
}

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, chorus_team team, int nBarriers,
         void *outHandle, void *outReq) {
  return not_yet("ncclLsaBarrierCreateRequirement");
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, chorus_team team,
         int nBarriers, void *outHandle, void *outReq) {
  return not_yet("ncclGinBarrierCreateRequirement");
}

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, void *outHandle,
         void *outReq) {
  return not_yet("ncclLLA2ACreateRequirement");
}

NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  not_yet("ncclLLA2ACalcSlots");
  return 0;
}

static chorus_team team_of(ncclComm_t comm, int lsa, const char *what) {
  chorus_team t = {0, 0, 1};
  if (chorus_comm_check(comm, what) != ncclSuccess) return t;
  if (lsa) {
    t.nRanks = 1;
    t.rank = 0;
  } else {
    t.nRanks = comm->nranks;
    t.rank = comm->rank;
  }
  return t;
}

NCCL_API(chorus_team, ncclTeamWorld, ncclComm_t comm) {
  return team_of(comm, 0, "ncclTeamWorld");
}

NCCL_API(chorus_team, ncclTeamLsa, ncclComm_t comm) {
  return team_of(comm, 1, "ncclTeamLsa");
}

/* Rail team: ranks with the same LSA index, one per LSA team; with
 * single-rank LSA teams that is the world. */
NCCL_API(chorus_team, ncclTeamRail, ncclComm_t comm) {
  return team_of(comm, 0, "ncclTeamRail");
}

NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, chorus_team team, int rank) {
  if (chorus_comm_check(comm, "ncclTeamRankToWorld") != ncclSuccess) return -1;
  return comm->rank + (rank - team.rank) * team.stride;
}

NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, chorus_team team, int rank) {
  if (chorus_comm_check(comm, "ncclTeamRankToLsa") != ncclSuccess) return -1;
  return (rank - team.rank) * team.stride; /* LSA rank of self is 0 */
}
