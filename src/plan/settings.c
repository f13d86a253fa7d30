/*
 * settings.c - the choice's settings of a communicator (plan.h): NCCL_ALGO,
 * NCCL_PROTO and CHORUS_TUNE, read once at init as NCCL reads its
 * variables, so that a bad one fails the init naming the word.
 */
#include "plan/plan.h"
#include "util/param.h"

int chorus_plan_comm_settings(chorus_plan_comm *c, char *err, size_t errlen) {
  if (chorus_algo_filter_parse(&c->filter, chorus_param_str(CHORUS_P_ALGO),
                               chorus_param_str(CHORUS_P_PROTO), err, errlen) != 0)
    return -1;
  if (chorus_rules_parse(chorus_param_str(CHORUS_P_TUNE), c->user, CHORUS_RULES_MAX, &c->nuser, err,
                         errlen) != 0)
    return -1;
  c->defaults = chorus_rules_default(c->env.backend, &c->ndefaults);
  return 0;
}

void chorus_plan_unbind_foreign(chorus_plan_comm *c) {
  const uint32_t all = (1u << CHORUS_ALGO_COUNT) - 1;
  for (int f = 1; f < CHORUS_FUNC_COUNT; f++) {
    if (!c->filter.algo_named[f]) continue;
    int here = 0;
    for (int a = 0; a < CHORUS_ALGO_COUNT; a++)
      here |= (c->filter.algos[f] & (1u << a)) && chorus_algo_runs(a, c->env.backend, f) &&
              !chorus_plan_hosts_misfit(c, a);
    if (here) continue;
    c->filter.algos[f] = all;
    c->filter.algo_named[f] = 0;
  }
}
