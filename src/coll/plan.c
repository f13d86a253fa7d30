/*
 * plan.c - choosing a schedule for a call.
 *
 * For now each function has one algorithm; the choice still goes through
 * NCCL_ALGO so a filter that excludes everything is reported rather than
 * ignored, and the log names what ran.
 */
#include "coll/coll.h"
#include "util/check.h"
#include "util/param.h"

typedef struct {
  int func;
  chorus_algo algo;
  ncclResult_t (*step)(chorus_op *);
} entry;

static const entry table[] = {
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RING, chorus_allreduce_ring},
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
    chorus_op_stamp(op, CHORUS_CH_COLL);
    TRACE(CHORUS_COLL, "%s count %zu: algorithm %s", chorus_func_name(op->func), op->count,
          chorus_algo_get(op->algo)->name);
    return ncclSuccess;
  }
  if (!implemented)
    return chorus_error(ncclInvalidUsage, "%s is not implemented yet on host communicators",
                        chorus_func_name(op->func));
  return chorus_error(ncclInvalidUsage,
                      "NCCL_ALGO=\"%s\" allows no algorithm Chorus has for %s (available: ring)",
                      spec ? spec : "", chorus_func_name(op->func));
}
