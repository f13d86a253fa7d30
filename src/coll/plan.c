/*
 * plan.c - choosing a schedule for a call.
 *
 * Each function lists its algorithms in order of preference; the first one
 * NCCL_ALGO allows wins (a filter that excludes everything is reported, not
 * ignored) and TRACE logs name what ran. Point-to-point calls take their
 * ticket on the connection here, in call order.
 */
#include "coll/coll.h"
#include "util/check.h"
#include "util/param.h"

#include <stdio.h>

typedef struct {
  int func;
  chorus_algo algo;
  ncclResult_t (*step)(chorus_op *);
} entry;

static const entry table[] = {
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RING, chorus_allreduce_ring},
    {CHORUS_FUNC_ALLGATHER, CHORUS_ALGO_RING, chorus_allgather_ring},
    {CHORUS_FUNC_REDUCESCATTER, CHORUS_ALGO_RING, chorus_reducescatter_ring},
    {CHORUS_FUNC_BROADCAST, CHORUS_ALGO_RING, chorus_broadcast_ring},
    {CHORUS_FUNC_REDUCE, CHORUS_ALGO_RING, chorus_reduce_ring},
    {CHORUS_FUNC_ALLTOALL, CHORUS_ALGO_DIRECT, chorus_multi},
    {CHORUS_FUNC_GATHER, CHORUS_ALGO_DIRECT, chorus_multi},
    {CHORUS_FUNC_SCATTER, CHORUS_ALGO_DIRECT, chorus_multi},
    {CHORUS_FUNC_SEND, CHORUS_ALGO_DIRECT, chorus_sendrecv},
    {CHORUS_FUNC_RECV, CHORUS_ALGO_DIRECT, chorus_sendrecv},
};

ncclResult_t chorus_coll_plan(chorus_op *op) {
  const char *spec = chorus_param_str(CHORUS_P_ALGO);
  uint32_t allowed = chorus_algo_allowed(spec, op->func);
  int implemented = 0;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (table[i].func != op->func) continue;
    implemented = 1;
    if (!(allowed & (1u << table[i].algo))) continue;
    op->algo = table[i].algo;
    op->step = table[i].step;
    op->co = 0;
    op->concurrent = op->func == CHORUS_FUNC_SEND || op->func == CHORUS_FUNC_RECV;
    if (op->concurrent) chorus_p2p_take_ticket(op);
    chorus_op_stamp(op);
    TRACE(CHORUS_COLL, "%s count %zu: algorithm %s", chorus_func_name(op->func), op->count,
          chorus_algo_get(op->algo)->name);
    return ncclSuccess;
  }
  if (!implemented)
    return chorus_error(ncclInvalidUsage, "%s is not implemented yet on host communicators",
                        chorus_func_name(op->func));
  char avail[128] = "";
  for (size_t i = 0, o = 0; i < sizeof table / sizeof table[0] && o < sizeof avail - 16; i++)
    if (table[i].func == op->func)
      o += (size_t)snprintf(avail + o, sizeof avail - o, "%s%s", o ? ", " : "",
                            chorus_algo_get(table[i].algo)->name);
  return chorus_error(ncclInvalidUsage,
                      "NCCL_ALGO=\"%s\" allows no algorithm Chorus has for %s (available: %s)",
                      spec ? spec : "", chorus_func_name(op->func), avail);
}
