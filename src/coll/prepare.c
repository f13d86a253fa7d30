/*
 * plan.c - choosing a schedule for a call.
 *
 * Each function lists the algorithms it has. The candidates NCCL_ALGO allows
 * and the cost model (algo/tune.h) says apply are priced, and the cheapest
 * runs; TRACE logs name it, and a filter that leaves nothing is reported.
 * Point-to-point calls take their ticket on the connection here, in call
 * order.
 */
#include <stdio.h>
#include <unistd.h>

#include "algo/tune.h"
#include "coll/coll.h"
#include "util/check.h"
#include "util/misc.h"
#include "util/param.h"

typedef struct {
  int func;
  chorus_algo algo;
  ncclResult_t (*step)(chorus_op *);
} entry;

static const entry table[] = {
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RING, chorus_allreduce_ring},
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ONESHOT, chorus_allreduce_direct},
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_TWOSHOT, chorus_allreduce_direct},
    {CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RD, chorus_allreduce_rd},
    {CHORUS_FUNC_ALLGATHER, CHORUS_ALGO_RING, chorus_allgather_ring},
    {CHORUS_FUNC_ALLGATHER, CHORUS_ALGO_ONESHOT, chorus_coll_direct},
    {CHORUS_FUNC_REDUCESCATTER, CHORUS_ALGO_RING, chorus_reducescatter_ring},
    {CHORUS_FUNC_REDUCESCATTER, CHORUS_ALGO_ONESHOT, chorus_coll_direct},
    {CHORUS_FUNC_BROADCAST, CHORUS_ALGO_RING, chorus_broadcast_ring},
    {CHORUS_FUNC_BROADCAST, CHORUS_ALGO_ONESHOT, chorus_coll_direct},
    {CHORUS_FUNC_REDUCE, CHORUS_ALGO_RING, chorus_reduce_ring},
    {CHORUS_FUNC_REDUCE, CHORUS_ALGO_ONESHOT, chorus_coll_direct},
    {CHORUS_FUNC_ALLTOALL, CHORUS_ALGO_DIRECT, chorus_multi},
    {CHORUS_FUNC_ALLTOALL, CHORUS_ALGO_ONESHOT, chorus_coll_direct},
    {CHORUS_FUNC_GATHER, CHORUS_ALGO_DIRECT, chorus_multi},
    {CHORUS_FUNC_GATHER, CHORUS_ALGO_ONESHOT, chorus_coll_direct},
    {CHORUS_FUNC_SCATTER, CHORUS_ALGO_DIRECT, chorus_multi},
    {CHORUS_FUNC_SCATTER, CHORUS_ALGO_ONESHOT, chorus_coll_direct},
    {CHORUS_FUNC_SEND, CHORUS_ALGO_DIRECT, chorus_sendrecv},
    {CHORUS_FUNC_RECV, CHORUS_ALGO_DIRECT, chorus_sendrecv},
};
#define NENTRIES (sizeof table / sizeof table[0])

/* Outputs of at least this many bytes per rank are written with streaming
 * stores: by default once the outputs of all ranks on this host would fill
 * half the last-level cache (host/copy.h). */
static size_t stream_threshold(const chorus_coll_comm *cc) {
  int64_t v = chorus_param_int(CHORUS_P_STREAM_BYTES);
  if (v >= 0) return (size_t)v;
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (llc <= 0) llc = 32L << 20;
  int local = cc->topo->nlocal > 0 ? cc->topo->nlocal : 1;
  return (size_t)llc / (2u * (size_t)local);
}

/* Bytes of output one rank writes in this call. */
static size_t output_bytes(const chorus_op *op) {
  size_t b = op->count * op->esize;
  if (op->func == CHORUS_FUNC_ALLGATHER || op->func == CHORUS_FUNC_ALLTOALL ||
      op->func == CHORUS_FUNC_GATHER)
    b *= (size_t)op->cc->nranks;
  return b;
}

/* What planning needs to know about a communicator; computed at the first
 * call: cost model inputs and the NCCL_ALGO filter of every function. */
static void plan_setup(chorus_coll_comm *cc) {
  if (cc->tune_ready) return;
  chorus_tune_env *e = &cc->tune;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  e->nranks = cc->nranks;
  e->nhosts = cc->topo->nhosts;
  e->node = cc->node != NULL && cc->nranks <= CHORUS_REDUCE_MAX_SRCS;
  e->oversubscribed = cpus > 0 && cc->topo->nlocal > cpus;
  /* The smallest slot of any connection bounds a single message. */
  e->max_msg = 0;
  for (int p = 0; p < cc->nranks; p++) {
    chorus_conn *c = chorus_cc_conn(cc, p, CHORUS_CH_COLL, CHORUS_DIR_SEND);
    if (c && (e->max_msg == 0 || c->slot_bytes < e->max_msg)) e->max_msg = c->slot_bytes;
  }
  cc->stream_bytes = stream_threshold(cc);
  int force = (int)chorus_param_int(CHORUS_P_SHARED_STREAM);
  force = force < 0 ? -1 : force > 0;
  chorus_store_tuner_init(&cc->stage_tuner, force);
  chorus_store_tuner_init(&cc->reduce_tuner, force);
  chorus_store_tuner_init(&cc->slot_tuner, force);
  const char *spec = chorus_param_str(CHORUS_P_ALGO);
  const char *proto = chorus_param_str(CHORUS_P_PROTO);
  if (proto && *proto)
    INFO(CHORUS_TUNING | CHORUS_ENV,
         "NCCL_PROTO=%s: host communicators have one protocol; use NCCL_ALGO to choose", proto);
  for (int f = 0; f < CHORUS_FUNC_COUNT; f++) {
    int named = 0;
    /* One rank: every schedule reduces to a local copy; no filter applies.
     * NCCL_ALGO names collective algorithms only, never point-to-point. */
    int p2p = f == CHORUS_FUNC_SEND || f == CHORUS_FUNC_RECV;
    cc->algo_allowed[f] = cc->nranks == 1 || p2p ? ~0u : chorus_algo_allowed_ex(spec, f, &named);
    cc->algo_named[f] = (uint8_t)named;
    cc->last_entry[f] = -1;
  }
  cc->tune_ready = 1;
}

static ncclResult_t none_allowed(const chorus_op *op) {
  const char *spec = chorus_param_str(CHORUS_P_ALGO);
  char avail[128] = "";
  for (size_t i = 0, o = 0; i < NENTRIES && o < sizeof avail - 16; i++)
    if (table[i].func == op->func)
      o += (size_t)snprintf(avail + o, sizeof avail - o, "%s%s", o ? ", " : "",
                            chorus_algo_get(table[i].algo)->name);
  return chorus_error(ncclInvalidUsage,
                      "NCCL_ALGO=\"%s\" allows no algorithm Chorus can use for %s here "
                      "(it has: %s)",
                      spec ? spec : "", chorus_func_name(op->func), avail);
}

/* The cheapest allowed entry for func on bytes, or -1. */
static int cheapest(const chorus_coll_comm *cc, int func, size_t bytes, uint32_t allowed,
                    double *best_t) {
  int best = -1;
  for (size_t i = 0; i < NENTRIES; i++) {
    if (table[i].func != func || !(allowed & (1u << table[i].algo))) continue;
    double t = chorus_tune_time_us(func, table[i].algo, bytes, &cc->tune);
    if (t >= 0 && (best < 0 || t < *best_t)) best = (int)i, *best_t = t;
  }
  return best;
}

static int choose(chorus_coll_comm *cc, int func, size_t bytes) {
  double t = 0;
  int best = cheapest(cc, func, bytes, cc->algo_allowed[func], &t);
  if (best < 0 && !cc->algo_named[func] && cc->algo_allowed[func] != ~0u) {
    /* A global NCCL_ALGO (say "ring") that names nothing this function has
     * does not apply to it, as in NCCL; only a list naming the function
     * itself is binding. */
    INFO(CHORUS_TUNING, "NCCL_ALGO names no algorithm of %s; using the default choice",
         chorus_func_name(func));
    best = cheapest(cc, func, bytes, ~0u, &t);
  }
  if (best >= 0)
    INFO(CHORUS_TUNING, "%s of %zu bytes: algorithm %s (model %.1f us)", chorus_func_name(func),
         bytes, chorus_algo_get(table[best].algo)->name, t);
  return best;
}

ncclResult_t chorus_coll_plan(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  plan_setup(cc);
  size_t bytes = op->count * op->esize;
  int f = op->func, e;
  /* Calls repeat their sizes: remember the last choice per function. */
  if (cc->last_entry[f] >= 0 && cc->last_bytes[f] == bytes) {
    e = cc->last_entry[f];
  } else {
    e = choose(cc, f, bytes);
    if (e < 0) return none_allowed(op);
    cc->last_entry[f] = e;
    cc->last_bytes[f] = bytes;
  }
  op->algo = table[e].algo;
  op->step = table[e].step;
  op->co = 0;
  op->stream = output_bytes(op) >= cc->stream_bytes;
  op->concurrent = f == CHORUS_FUNC_SEND || f == CHORUS_FUNC_RECV;
  if (op->concurrent) chorus_p2p_take_ticket(op);
  chorus_op_stamp(op);
  return ncclSuccess;
}
