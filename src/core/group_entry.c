/*
 * group_entry.c - ncclGroupStart, ncclGroupEnd and ncclGroupSimulateEnd
 * (group.h). In a file of their own, as coll_entry.c's: the build keeps
 * files that define entry points out of link-time optimisation, and the
 * group's work stays in.
 */
#include "core/api.h"
#include "core/group.h"

NCCL_API(ncclResult_t, ncclGroupStart, void) {
  return chorus_group_start();
}

NCCL_API(ncclResult_t, ncclGroupEnd, void) {
  return chorus_group_end();
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t *simInfo) {
  return chorus_group_simulate_end(simInfo);
}
