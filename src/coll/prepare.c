/*
 * prepare.c - a host call from the planner's task to its schedule.
 *
 * The planner (plan/plan.h) chooses the algorithm; here each (function,
 * algorithm) pair has its schedule, and the call gets the rest of what it
 * runs with: how its output is stored, its ticket on a connection
 * (point-to-point, in call order), and its description.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "coll/calls.h"
#include "coll/coll.h"
#include "transport/shm/readrate.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/misc.h"
#include "util/param.h"

/* The schedule of each (function, algorithm) pair; NULL: none. */
static const chorus_coll_step table[CHORUS_FUNC_COUNT][CHORUS_ALGO_COUNT] = {
    [CHORUS_FUNC_ALLREDUCE] = {[CHORUS_ALGO_RING] = chorus_allreduce_ring,
                               [CHORUS_ALGO_ONESHOT] = chorus_allreduce_node,
                               [CHORUS_ALGO_TWOSHOT] = chorus_allreduce_node,
                               [CHORUS_ALGO_RD] = chorus_allreduce_rd,
                               [CHORUS_ALGO_TREE] = chorus_allreduce_tree,
                               [CHORUS_ALGO_HIER] = chorus_allreduce_hier,
                               [CHORUS_ALGO_ZEROCOPY] = chorus_coll_peer_reduce,
                               [CHORUS_ALGO_ORDERED] = chorus_ordered},
    [CHORUS_FUNC_REDUCESCATTER] = {[CHORUS_ALGO_ORDERED] = chorus_ordered,
                                   [CHORUS_ALGO_RING] = chorus_reducescatter_ring,
                                   [CHORUS_ALGO_RD] = chorus_reducescatter_rd,
                                   [CHORUS_ALGO_ONESHOT] = chorus_coll_node,
                                   [CHORUS_ALGO_ZEROCOPY] = chorus_coll_peer_reduce},
    [CHORUS_FUNC_REDUCE] = {[CHORUS_ALGO_ORDERED] = chorus_ordered,
                            [CHORUS_ALGO_CHAIN] = chorus_reduce_ring,
                            [CHORUS_ALGO_TREE] = chorus_reduce_binomial,
                            [CHORUS_ALGO_ONESHOT] = chorus_coll_node},
    [CHORUS_FUNC_ALLGATHER] = {[CHORUS_ALGO_RING] = chorus_allgather_ring,
                               [CHORUS_ALGO_RD] = chorus_allgather_rd,
                               [CHORUS_ALGO_ONESHOT] = chorus_coll_node,
                               [CHORUS_ALGO_ZEROCOPY] = chorus_coll_peer_read},
    [CHORUS_FUNC_BROADCAST] = {[CHORUS_ALGO_CHAIN] = chorus_broadcast_ring,
                               [CHORUS_ALGO_TREE] = chorus_broadcast_binomial,
                               [CHORUS_ALGO_ONESHOT] = chorus_coll_node,
                               [CHORUS_ALGO_ZEROCOPY] = chorus_coll_peer_read},
    [CHORUS_FUNC_ALLTOALL] = {[CHORUS_ALGO_DIRECT] = chorus_multi,
                              [CHORUS_ALGO_ONESHOT] = chorus_coll_node,
                              [CHORUS_ALGO_ZEROCOPY] = chorus_coll_peer_read},
    [CHORUS_FUNC_GATHER] = {[CHORUS_ALGO_DIRECT] = chorus_multi,
                            [CHORUS_ALGO_ONESHOT] = chorus_coll_node,
                            [CHORUS_ALGO_ZEROCOPY] = chorus_coll_peer_read},
    [CHORUS_FUNC_SCATTER] = {[CHORUS_ALGO_DIRECT] = chorus_multi,
                             [CHORUS_ALGO_ONESHOT] = chorus_coll_node,
                             [CHORUS_ALGO_ZEROCOPY] = chorus_coll_peer_read},
    [CHORUS_FUNC_SEND] = {[CHORUS_ALGO_DIRECT] = chorus_sendrecv},
    [CHORUS_FUNC_RECV] = {[CHORUS_ALGO_DIRECT] = chorus_sendrecv},
};

chorus_coll_step chorus_coll_schedule(int func, int algo) {
  if (func < 0 || func >= CHORUS_FUNC_COUNT || algo < 0 || algo >= CHORUS_ALGO_COUNT) return NULL;
  return table[func][algo];
}

/* The last-level cache counted at most for calls that only move bytes. A
 * virtual machine reports its host's whole L3, of which a guest of a few
 * vCPUs gets a share: a 2-vCPU Intel guest reports 480 MiB, yet its
 * calls fell off a cliff from 64 MiB (a 2-rank AllGather 2.9 ms at 32
 * MiB, 8.4 at 64), and streaming stores from 32 MiB ran AllGather,
 * Broadcast, AlltoAll and Scatter 1.07-1.34x faster at 32-128 MiB on 2
 * ranks and 1.08-1.22x at 16-32 MiB on 4. On a 16-core host (300 MiB
 * reported) 2-rank AllGather gained 1.10-1.24x, the rest moved within
 * that run's noise (bench/results/host_ab_2026-12-01_nt_cap.txt).
 * Reductions gained nothing sure and keep the whole cache. */
#define NT_MOVE_LLC_MAX (128L << 20)

/* Outputs of at least this many bytes per rank are written with streaming
 * stores: by default once the outputs of all ranks on this host would fill
 * half the last-level cache (host/copy.h), counted as at most llc_max. */
static size_t nt_threshold(const chorus_coll_comm *cc, long llc_max) {
  int64_t v = chorus_param_int(CHORUS_P_NT_STORE_BYTES);
  if (v != CHORUS_AUTO) return (size_t)v;
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (llc <= 0) llc = 32L << 20;
  llc = CHORUS_MIN(llc, llc_max);
  int local = cc->topo->nlocal > 0 ? cc->topo->nlocal : 1;
  return (size_t)llc / (2u * (size_t)local);
}

void chorus_coll_setup(chorus_coll_comm *cc) {
  chorus_cost_env *e = &cc->plan.env;
  const long cpus = cc->topo->machine_cpus;
  e->nranks = cc->nranks;
  e->nhosts = cc->topo->nhosts;
  e->node = cc->node != NULL && cc->nranks <= CHORUS_REDUCE_MAX_SRCS;
  e->oversubscribed = cpus > 0 && cc->topo->nlocal > cpus;
  e->peer_read = e->node && cc->node->peer_read;
  e->read_slowdown = e->peer_read ? cc->node->read_slowdown : 0;
  e->reads_dear = e->read_slowdown > CHORUS_READ_DEAR;
  e->fast_max = e->node ? chorus_fast_max(cc->nranks, e->oversubscribed) : 0;
  /* Ranks per host where every host holds as many (algorithm hier). */
  e->nlocal = chorus_topo_uneven_host(cc->topo) < 0 ? cc->topo->nlocal : 0;
  /* The smallest slot of any connection bounds a single message. */
  e->max_msg = 0;
  for (int p = 0; p < cc->nranks; p++) {
    chorus_conn *c = chorus_cc_conn(cc, p, CHORUS_CH_COLL, CHORUS_DIR_SEND);
    if (c && (e->max_msg == 0 || c->slot_bytes < e->max_msg)) e->max_msg = c->slot_bytes;
  }
  cc->plan.rank = cc->rank;
  cc->nt_bytes = nt_threshold(cc, LONG_MAX);
  cc->nt_move_bytes = nt_threshold(cc, NT_MOVE_LLC_MAX);
  const int64_t nt = chorus_param_int(CHORUS_P_NT_STORES);
  const int force = nt == CHORUS_AUTO ? -1 : nt != 0;
  chorus_store_tuner_init(&cc->stage_tuner, force);
  chorus_store_tuner_init(&cc->reduce_tuner, force);
  chorus_store_tuner_init(&cc->slot_tuner, force);
  for (int f = 0; f < CHORUS_FUNC_COUNT; f++)
    for (int k = 0; k < CHORUS_COLL_MEMO; k++) cc->last[f][k].algo = -1;
}

/* The algorithm for op: calls repeat their sizes, so the last choices per
 * function are kept. */
static ncclResult_t choose(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  const int f = op->func;
  const size_t bytes = op->count * op->esize;
  if (cc->reproducible && chorus_func_reduces(f)) {
    op->algo = CHORUS_ALGO_ORDERED; /* not a choice for speed: no rule or cost applies */
    return ncclSuccess;
  }
  const int premul = op->red.kind == CHORUS_RED_PREMULSUM;
  /* A tuner plugin is asked every call, as NCCL asks it. */
  const int memo = !cc->plan.tuner.reprice;
  for (int k = 0; k < CHORUS_COLL_MEMO && memo; k++)
    if (cc->last[f][k].algo >= 0 && cc->last[f][k].bytes == bytes &&
        cc->last[f][k].premul == premul) {
      op->algo = cc->last[f][k].algo;
      return ncclSuccess;
    }
  chorus_plan_call c = {&cc->plan,
                        f,
                        op->count,
                        op->esize,
                        op->root,
                        0,
                        0,
                        op->sendbuff,
                        op->recvbuff,
                        premul ? CHORUS_FACT_PREMULSUM : 0,
                        CHORUS_FACT_PREMULSUM,
                        op};
  chorus_task t;
  char err[256];
  if (chorus_plan_choose(&c, NULL, 0, 0, &t, NULL, err, sizeof err) != 0)
    return chorus_error(ncclInvalidUsage, "rank %d: %s", cc->rank, err);
  INFO(CHORUS_TUNING, "%s of %zu bytes: algorithm %s", chorus_func_name(f), bytes,
       chorus_algo_name(t.algo));
  op->algo = t.algo;
  if (!memo) return ncclSuccess;
  const int k = cc->last_next[f];
  cc->last_next[f] = (uint8_t)((k + 1) % CHORUS_COLL_MEMO);
  cc->last[f][k].bytes = bytes;
  cc->last[f][k].premul = premul;
  cc->last[f][k].algo = t.algo;
  return ncclSuccess;
}

/* The algorithm for a share of a call cut across lanes whose blocks are
 * rows of the whole call's (chorus_op.pitch): the ring or the direct
 * transfers, which take the rows where they lie; recursive doubling
 * sends runs of blocks as one message. The same on every rank: the cut
 * is. */
static int pitched_algo(const chorus_op *op) {
  switch (op->func) {
  case CHORUS_FUNC_ALLGATHER:
  case CHORUS_FUNC_REDUCESCATTER:
    return CHORUS_ALGO_RING;
  case CHORUS_FUNC_ALLTOALL:
  case CHORUS_FUNC_GATHER:
  case CHORUS_FUNC_SCATTER:
    return CHORUS_ALGO_DIRECT;
  default:
    return op->algo;
  }
}

ncclResult_t chorus_coll_prepare(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  CHECK(choose(op));
  if (op->pitch && op->pitch != op->count) op->algo = pitched_algo(op);
  op->step = chorus_coll_schedule(op->func, op->algo);
  if (!op->step)
    return chorus_error(ncclInternalError, "%s has no host schedule for algorithm %s",
                        chorus_func_name(op->func), chorus_algo_name(op->algo));
  op->co = 0;
  op->moved = 0;
  op->nt = chorus_func_out_bytes(op->func, op->count, op->esize, cc->nranks) >=
           (chorus_func_reduces(op->func) ? cc->nt_bytes : cc->nt_move_bytes);
  op->concurrent = chorus_func_p2p(op->func);
  op->by_ref = !op->concurrent; /* Sends: chorus_p2p_snapshot decides */
  if (op->concurrent) chorus_p2p_take_ticket(op);
  const chorus_msg_meta m = chorus_op_stamp(op);
  chorus_calls_post(op, &m);
  /* Its gathering call next, in call order on every rank. */
  return op->algo == CHORUS_ALGO_ORDERED ? chorus_ordered_prepare(op) : ncclSuccess;
}

void chorus_coll_release(chorus_op *op) {
  /* An ordered op's gathering call holds its own scratch until it ends;
   * one that failed or never ran to its end still does. */
  if (op->algo == CHORUS_ALGO_ORDERED && op->scratch) chorus_op_scratch_drop(op->u.ordered.child);
  chorus_op_scratch_drop(op);
}

void *chorus_op_scratch(chorus_op *op, size_t bytes) {
  op->scratch = chorus_bufcache_get(&op->cc->bufs, bytes, &op->scratch_bytes);
  return op->scratch;
}

void chorus_op_scratch_drop(chorus_op *op) {
  chorus_bufcache_put(&op->cc->bufs, op->scratch, op->scratch_bytes);
  op->scratch = NULL;
  op->scratch_bytes = 0;
}

void chorus_coll_peers_blocks(const chorus_op *op, char *dst) {
  const size_t blk = op->count * op->esize, me = (size_t)op->cc->rank;
  const size_t n = (size_t)op->cc->nranks, pitch = chorus_op_pitch(op) * op->esize;
  const char *src = op->sendbuff;
  if (pitch != blk) { /* a share's rows */
    for (size_t p = 0; p < n; p++)
      if (p != me) memcpy(dst + p * blk, src + p * pitch, blk);
    return;
  }
  memcpy(dst, src, me * blk);
  memcpy(dst + (me + 1) * blk, src + (me + 1) * blk, (n - me - 1) * blk);
}

void chorus_coll_own_input(chorus_op *op, void *dst, size_t count, unsigned flags) {
  const void *src[1] = {op->sendbuff};
  chorus_reduce(&op->red, dst, src, 1, count, 1u, flags);
}
