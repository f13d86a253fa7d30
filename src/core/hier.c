/*
 * hier.c - the two communicators inside a GPU communicator across hosts
 * (comm.h, part_local and part_cross): its ranks on this host, a GPU
 * communicator of one host whose calls are kernels over NVLink, and the
 * ranks at this rank's place on every host, a host-memory communicator
 * over the network. gpu/proxy.c composes hierarchical calls from them.
 *
 * Built at init, after the communicator's own connections, when every
 * host holds the same number of ranks; otherwise every call is staged
 * whole. With one rank per host there is no local part: the cross parts
 * alone (all the ranks, in order) carry a call's lanes, each lane its own
 * connections and thread. Each part's first rank makes a unique id, one
 * allgather over the parent's bootstrap spreads them, and every rank
 * builds its local part, then its cross parts, like any communicator.
 *
 * A host-memory communicator whose every host holds one rank has lanes
 * instead (coll/lanes.h): parts of all its ranks in order, lanes 1..n-1,
 * lane 0 being the communicator itself.
 */
#include <stdio.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "device/device.h"
#include "gpu/gpu.h"
#include "gpu/proxy.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/log.h"
#include "util/misc.h"
#include "util/param.h"

typedef struct part_ids {
  chorus_uid local, cross[CHORUS_LANES_MAX];
} part_ids;

/* Builds one part: nranks ranks, this one `rank`, on `device` (-1: host
 * memory), from the id of its first rank; a lane of a host-memory
 * communicator where `lane`. */
static ncclResult_t build_part(ncclComm_t parent, int nranks, int rank, int device,
                               const chorus_uid *uid, const char *name, int lane, ncclComm_t *out) {
  *out = NULL;
  ncclComm_t c;
  /* Failing before the part's rendezvous, a rank tells its root, which
   * fails it for every rank naming this one (the others wait there, not
   * on the parent's bootstrap). */
  ncclResult_t res = chorus_comm_alloc(&c, nranks, rank, &parent->config);
  if (res != ncclSuccess) {
    chorus_bootstrap_give_up(uid, 1, nranks, rank);
    return res;
  }
  c->device = device;
  c->is_part = 1;
  c->is_lane = lane;
  c->config.blocking = 1;
  c->init.uids = chorus_malloc(sizeof *uid);
  if (!c->init.uids) {
    chorus_comm_free(c);
    res = chorus_error(ncclSystemError, "out of memory building a communicator's %s part", name);
    chorus_bootstrap_give_up(uid, 1, nranks, rank);
    return res;
  }
  c->init.uids[0] = *uid;
  c->init.nuids = 1;
  chorus_comm_inherit_net(c, parent);
  res = chorus_comm_build(c);
  if (res != ncclSuccess) {
    /* The part's own words name the rank that failed (its bootstrap
     * passes the first cause on), which the parent's peers must see. */
    char why[sizeof c->last_error];
    snprintf(why, sizeof why, "%s", c->last_error);
    chorus_comm_free(c);
    return chorus_error(res, "rank %d: building its %s part (%d ranks) failed: %s", parent->rank,
                        name, nranks, why);
  }
  *out = c;
  return ncclSuccess;
}

ncclResult_t chorus_comm_build_parts(ncclComm_t comm) {
  const chorus_topo *t = &comm->topo;
  const int L = t->nlocal, H = t->nhosts, me = comm->rank;
  /* Ranks that read the shared settings differently would compose calls
   * differently (the rules, NCCL_ALGO, the lanes). */
  CHECK(chorus_gpu_agree_all(comm->bs, me, comm->nranks));
  const int uneven = chorus_topo_uneven_host(t);
  if (uneven >= 0) {
    INFO(CHORUS_INIT,
         "rank %d: hosts hold different numbers of ranks (%d here, %d on host %d): every call "
         "is staged whole through host memory",
         me, L, t->nlocal_of_host[uneven], uneven);
    return ncclSuccess;
  }
  const int li = t->local_index[me], hi = t->host_of[me];
  /* The cross part: the ranks of local index li, in rank order; its first
   * one makes its id, as the host's first rank makes the local part's. */
  int cross_rank = 0, cross_first = -1;
  for (int r = 0; r < comm->nranks; r++)
    if (t->local_index[r] == li) {
      if (cross_first < 0) cross_first = r;
      if (r < me) cross_rank++;
    }
  part_ids *ids = chorus_calloc((size_t)comm->nranks, sizeof *ids);
  if (!ids) return chorus_error(ncclSystemError, "out of memory building a communicator's parts");
  ncclResult_t res = ncclSuccess;
  if (L > 1 && t->local_ranks[0] == me)
    CHECK_GOTO(chorus_uid_create_private(&ids[me].local, &comm->bs->listen_addr), res, out);
  const int64_t lanes = chorus_param_int(CHORUS_P_GPU_HIER_LANES);
  const int nlanes = (int)CHORUS_CLAMP(lanes, 1, CHORUS_LANES_MAX);
  for (int k = 0; k < nlanes && cross_first == me; k++)
    CHECK_GOTO(chorus_uid_create_private(&ids[me].cross[k], &comm->bs->listen_addr), res, out);
  CHECK_GOTO(chorus_bootstrap_allgather(comm->bs, ids, sizeof *ids), res, out);
  if (L > 1)
    CHECK_GOTO(build_part(comm, L, li, comm->device, &ids[t->local_ranks[0]].local, "host-local", 0,
                          &comm->part_local),
               res, out);
  for (int k = 0; k < nlanes; k++) {
    CHECK_GOTO(build_part(comm, H, cross_rank, -1, &ids[cross_first].cross[k], "cross-host", 0,
                          &comm->part_cross[k]),
               res, out);
    comm->nlanes = k + 1;
  }
  if (chorus_dev_use(comm->device) != 0)
    res = chorus_error(ncclUnhandledCudaError, "selecting GPU %d: %s", comm->device,
                       chorus_dev_error());
  INFO(CHORUS_INIT, "rank %d: host %d of %d, place %d of %d there: parts built (%d lanes across)",
       me, hi, H, li, L, nlanes);
out:
  chorus_free(ids);
  return res;
}

ncclResult_t chorus_comm_build_lanes(ncclComm_t comm, int nlanes) {
  /* One id per lane, made by rank 0 (the allgather hands every rank all
   * of them: the bootstrap has no broadcast). */
  chorus_uid(*ids)[CHORUS_LANES_MAX] = chorus_calloc((size_t)comm->nranks, sizeof *ids);
  if (!ids) return chorus_error(ncclSystemError, "out of memory building a communicator's lanes");
  ncclResult_t res = ncclSuccess;
  for (int k = 1; k < nlanes && comm->rank == 0; k++)
    CHECK_GOTO(chorus_uid_create_private(&ids[0][k], &comm->bs->listen_addr), res, out);
  CHECK_GOTO(chorus_bootstrap_allgather(comm->bs, ids, sizeof *ids), res, out);
  comm->part_cross[0] = NULL; /* lane 0: the communicator itself */
  for (int k = 1; k < nlanes; k++) {
    CHECK_GOTO(
        build_part(comm, comm->nranks, comm->rank, -1, &ids[0][k], "lane", 1, &comm->part_cross[k]),
        res, out);
    comm->nlanes = k + 1;
  }
  INFO(CHORUS_INIT, "rank %d: %d lanes for large calls across hosts", comm->rank, nlanes);
out:
  chorus_free(ids);
  return res;
}

void chorus_comm_free_parts(ncclComm_t comm) {
  if (comm->part_local) chorus_comm_free(comm->part_local);
  comm->part_local = NULL;
  for (int k = 0; k < comm->nlanes; k++)
    if (comm->part_cross[k]) chorus_comm_free(comm->part_cross[k]);
  comm->nlanes = 0;
}
