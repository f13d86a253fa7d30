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
