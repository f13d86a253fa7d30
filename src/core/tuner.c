/*
 * tuner.c - see tuner.h.
 */
#include "core/tuner.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algo/func.h"
#include "core/comm.h"
#include "core/tuner_abi.h"
#include "util/alloc.h"
#include "util/dl.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"
#include "util/siphash.h"

struct chorus_tuner_state {
  void *ctx;
  int rank;
  int warned; /* a failed query said once */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int version, tried;
static const void *table;
static const char *table_name;
static char lib_path[4096];

/* The network plugin's library, where it carries a tuner table (NCCL
 * looks there too): the first of NCCL_NET_PLUGIN's names that opens, or
 * libnccl-net.so. NULL: none. */
static void *from_net_plugin(void) {
  const char *list = chorus_param_str(CHORUS_P_NET_PLUGIN);
  if (list && !strcasecmp(list, "none")) return NULL;
  char names[1024];
  snprintf(names, sizeof names, "%s", list && *list ? list : "libnccl-net.so");
  char *save = NULL;
  for (char *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    char why[256];
    void *h =
        chorus_dl_open_named("libnccl-net-", name, lib_path, sizeof lib_path, why, sizeof why);
    if (h) return h;
  }
  return NULL;
}

/* Loads the library (under lock): 0, or -1 (none, or passed over: said). */
static int load(void) {
  if (table) return 0;
  if (tried) return -1;
  tried = 1;
  const char *want = chorus_param_str(CHORUS_P_TUNER_PLUGIN);
  if (want && !strcasecmp(want, "none")) return -1;
  char why[512] = "";
  void *h = chorus_dl_open_named("libnccl-tuner-", want && *want ? want : "libnccl-tuner.so",
                                 lib_path, sizeof lib_path, why, sizeof why);
  if (!h && want && *want) WARN("NCCL_TUNER_PLUGIN=%s: cannot load it (%s)", want, why);
  const void *t = h ? chorus_dl_newest(h, "ncclTunerPlugin_v", 5, 2, &version) : NULL;
  if (h && !t) {
    WARN("tuner plugin %s: it exports no ncclTunerPlugin_v5 .. _v2 table; not used", lib_path);
    dlclose(h);
    return -1;
  }
  if (!h && (h = from_net_plugin()) != NULL &&
      !(t = chorus_dl_newest(h, "ncclTunerPlugin_v", 5, 2, &version))) {
    dlclose(h);
    h = NULL;
  }
  if (!h) {
    INFO(CHORUS_INIT | CHORUS_TUNING, "no tuner plugin");
    return -1;
  }
  /* Every version's table has one shape: a name and three functions. */
  const tuner_v5 *any = t;
  if (!any->name || !any->init || !any->get_coll_info || !any->finalize) {
    WARN("tuner plugin %s: its ncclTunerPlugin_v%d table lacks a function or name; not used",
         lib_path, version);
    dlclose(h);
    return -1;
  }
  table = t;
  table_name = any->name;
  INFO(CHORUS_INIT | CHORUS_TUNING, "tuner plugin %s (%s, ncclTunerPlugin_v%d)", lib_path,
       table_name, version);
  return 0;
}

/* The planner's hook (plan.h, chorus_plan_tuner). */
static int reprice(void *arg, int nccl_func, uint64_t bytes,
                   float cost[CHORUS_TUNER_ALGOS][CHORUS_TUNER_PROTOS], int *nchannels) {
  struct chorus_tuner_state *s = arg;
  ncclResult_t res;
  *nchannels = 0;
  if (version == 2) {
    /* It names its choice: that cell then costs nothing, where it runs. */
    int algo = -1, proto = -1;
    res = ((const tuner_v2 *)table)
              ->get_coll_info(s->ctx, nccl_func, (size_t)bytes, 0, 0, 1, &algo, &proto, nchannels);
    if (res == ncclSuccess && algo >= 0 && algo < CHORUS_TUNER_ALGOS && proto >= 0 &&
        proto < CHORUS_TUNER_PROTOS && cost[algo][proto] >= 0)
      cost[algo][proto] = 0;
  } else {
    float **t = (float **)(void *)cost; /* as NCCL hands it over */
    if (version == 3)
      res = ((const tuner_v3 *)table)
                ->get_coll_info(s->ctx, nccl_func, (size_t)bytes, 1, t, CHORUS_TUNER_ALGOS,
                                CHORUS_TUNER_PROTOS, nchannels);
    else /* 4 and 5: one signature; no buffer is registered for the tuner's sake */
      res = ((const tuner_v4 *)table)
                ->get_coll_info(s->ctx, nccl_func, (size_t)bytes, 1, t, CHORUS_TUNER_ALGOS,
                                CHORUS_TUNER_PROTOS, 0, nchannels);
  }
  if (res == ncclSuccess) return 0;
  if (!s->warned) {
    s->warned = 1;
    WARN("tuner plugin %s: getCollInfo returned %d for function %d of %llu bytes on rank %d; "
         "Chorus chooses for itself where it fails",
         table_name, (int)res, nccl_func, (unsigned long long)bytes, s->rank);
  }
  return -1;
}

/* A context of the loaded plugin for a communicator of nranks on nhosts,
 * min_local..max_local ranks a host, known as comm_id: *out, or NULL with
 * the plugin's error. */
static ncclResult_t make_state(int rank, int nranks, int nhosts, int min_local, int max_local,
                               uint64_t comm_id, struct chorus_tuner_state **out) {
  *out = NULL;
  struct chorus_tuner_state *s = chorus_calloc(1, sizeof *s);
  if (!s) return chorus_error(ncclSystemError, "out of memory for the tuner plugin's state");
  s->rank = rank;
  ncclResult_t res;
  if (version == 5) {
    tuner_nvl_domains_v5 nvl = {nhosts, min_local, max_local};
    /* Chorus's cost model is its own: the constants go over zeroed, and
     * what the plugin writes there is not read. */
    tuner_constants_v5 constants;
    memset(&constants, 0, sizeof constants);
    res = ((const tuner_v5 *)table)
              ->init(&s->ctx, comm_id, (size_t)nranks, (size_t)nhosts, chorus_log_plugin, &nvl,
                     &constants);
  } else {
    res =
        ((const tuner_v2 *)table)->init((size_t)nranks, (size_t)nhosts, chorus_log_plugin, &s->ctx);
  }
  if (res != ncclSuccess) {
    chorus_free(s);
    return chorus_error(res, "tuner plugin %s (%s): init returned %d on rank %d", table_name,
                        lib_path, (int)res, rank);
  }
  *out = s;
  return ncclSuccess;
}

static int loaded(void) {
  pthread_mutex_lock(&lock);
  const int ok = load() == 0;
  pthread_mutex_unlock(&lock);
  return ok;
}

static void hook(chorus_plan_comm *plan, struct chorus_tuner_state *s) {
  plan->tuner.reprice = s ? reprice : NULL;
  plan->tuner.arg = s;
}

static void give_back(struct chorus_tuner_state *s) {
  /* destroy (v2-v4) and finalize (v5) hold the same place in the table */
  (void)((const tuner_v5 *)table)->finalize(s->ctx);
  chorus_free(s);
}

ncclResult_t chorus_tuner_open(ncclComm_t comm) {
  if (comm->is_part || !loaded()) return ncclSuccess;
  const chorus_topo *topo = &comm->topo;
  int lo = comm->nranks, hi = 0;
  for (int h = 0; h < topo->nhosts; h++) {
    const int k = topo->nlocal_of_host ? topo->nlocal_of_host[h] : comm->nranks;
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
  }
  const uint64_t key[2] = {comm->init.uids[0].secret[0], comm->init.uids[0].secret[1]};
  CHECK(make_state(comm->rank, comm->nranks, topo->nhosts, lo, hi,
                   chorus_siphash(key, "tuner comm id", 13), &comm->tuner));
  hook(&comm->cc.plan, comm->tuner);
  return ncclSuccess;
}

void *chorus_tuner_attach(chorus_plan_comm *plan, int nranks, int nhosts) {
  struct chorus_tuner_state *s = NULL;
  if (!loaded()) return NULL;
  const int per = nranks / nhosts;
  if (make_state(0, nranks, nhosts, per, nranks - per * (nhosts - 1), 1, &s) != ncclSuccess)
    return NULL;
  hook(plan, s);
  return s;
}

const char *chorus_tuner_name(void) {
  return table ? table_name : NULL;
}

void chorus_tuner_detach(chorus_plan_comm *plan, void *state) {
  if (!state) return;
  hook(plan, NULL);
  give_back(state);
}

void chorus_tuner_close(ncclComm_t comm) {
  if (!comm->tuner) return;
  hook(&comm->cc.plan, NULL);
  give_back(comm->tuner);
  comm->tuner = NULL;
  /* The library stays loaded, as the profiler's does: its code may still
   * run on a thread of its own. */
}
