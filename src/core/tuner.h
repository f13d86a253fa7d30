/*
 * tuner.h - NCCL's tuner plugins: a library that reprices NCCL's choice of
 * algorithm and protocol per call.
 *
 * The process loads one, as NCCL does: NCCL_TUNER_PLUGIN names it (a path,
 * or NAME for libnccl-tuner-NAME.so; "none": no tuner), else
 * libnccl-tuner.so where it can be found, else the network plugin's
 * library (NCCL_NET_PLUGIN's, or libnccl-net.so), which may carry one; the
 * newest table it exports of ncclTunerPlugin_v5 .. _v2 is used
 * (tuner_abi.h). Every communicator but a part of another gets the
 * plugin's context at init and gives it back at destroy; a plugin whose
 * init fails fails the communicator's, naming it, as in NCCL. Its query
 * sits in the planner where the defaults choose (plan/plan.h,
 * chorus_plan_tuner), for AllReduce, AllGather, ReduceScatter, Broadcast
 * and Reduce on both backends; a query that fails leaves Chorus's choice,
 * with a WARN once per communicator.
 */
#ifndef CHORUS_CORE_TUNER_H
#define CHORUS_CORE_TUNER_H

#include "nccl.h"
#include "plan/plan.h"

/* At init, once the planner's settings are read (comm->cc.plan). */
ncclResult_t chorus_tuner_open(ncclComm_t comm);
/* At destroy. */
void chorus_tuner_close(ncclComm_t comm);

/* The plugin's say in plan, a communicator of nranks on nhosts that is
 * only described (chorus_info's explanations): its context, or NULL where
 * no plugin is loaded or its init failed (said). */
void *chorus_tuner_attach(chorus_plan_comm *plan, int nranks, int nhosts);
void chorus_tuner_detach(chorus_plan_comm *plan, void *state);
/* The loaded plugin's name, or NULL. */
const char *chorus_tuner_name(void);

#endif
