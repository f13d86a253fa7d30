/*
 * calls.c - see calls.h.
 */
#include "coll/calls.h"

#include <string.h>

#include "util/check.h"

static int board(const chorus_coll_comm *cc) {
  return cc->node != NULL && cc->nranks > 1;
}

int chorus_calls_on_board(const chorus_op *op) {
  return !op->concurrent && board(op->cc);
}

void chorus_calls_post(const chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  if (!chorus_calls_on_board(op)) return;
  chorus_node_rank *me = &cc->node->rank[cc->rank];
  const uint64_t k = op->meta.seq;
  me->calls[k % CHORUS_NODE_CALLS] = op->meta;
  /* No doorbell: a rank waits for a post only one call later (calls.h),
   * by when it is there, and naps are short. */
  __atomic_store_n(me->ncalls, k + 1, __ATOMIC_RELEASE);
}

ncclResult_t chorus_calls_check(const chorus_coll_comm *cc, const chorus_msg_meta *call, int wait) {
  const uint64_t k = call->seq;
  ncclResult_t res = ncclSuccess;
  for (int p = 0; p < cc->node->nranks; p++) {
    if (p == cc->rank) continue;
    const chorus_node_rank *r = &cc->node->rank[p];
    const uint64_t n = __atomic_load_n(r->ncalls, __ATOMIC_ACQUIRE);
    if (n <= k) { /* p has not come to this call yet */
      if (wait) res = ncclInProgress;
      continue;
    }
    if (n - k > CHORUS_NODE_CALLS) continue; /* p is so far ahead that the entry is gone */
    chorus_msg_meta theirs;
    memcpy(&theirs, &r->calls[k % CHORUS_NODE_CALLS], sizeof theirs);
    /* Read again: an entry p overwrote while it was copied is not p's call k. */
    if (__atomic_load_n(r->ncalls, __ATOMIC_ACQUIRE) - k > CHORUS_NODE_CALLS) continue;
    if (!chorus_meta_equal(&theirs, call)) return chorus_meta_mismatch(call, p, &theirs);
  }
  return res;
}

ncclResult_t chorus_calls_catch_up(chorus_coll_comm *cc, uint64_t upto, int wait) {
  const chorus_node_rank *me = &cc->node->rank[cc->rank];
  while (cc->unchecked && cc->unchecked_from < upto) {
    const chorus_msg_meta mine = me->calls[cc->unchecked_from % CHORUS_NODE_CALLS];
    const ncclResult_t res = chorus_calls_check(cc, &mine, 1);
    if (res == ncclInProgress) return wait ? res : ncclSuccess;
    if (res != ncclSuccess) return res;
    if (++cc->unchecked_from == upto) cc->unchecked = 0;
  }
  return ncclSuccess;
}

ncclResult_t chorus_calls_end(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  const uint64_t k = op->expect.seq;
  if (cc->unchecked) {
    const ncclResult_t res =
        chorus_calls_catch_up(cc, k, k - cc->unchecked_from >= CHORUS_CALLS_LAG);
    if (res != ncclSuccess) return res;
  }
  if (!chorus_func_rooted(op->func)) return ncclSuccess;
  const ncclResult_t res = chorus_calls_check(cc, &op->expect, 1);
  if (res == ncclInProgress && !cc->unchecked) {
    cc->unchecked = 1;
    cc->unchecked_from = k;
  }
  return res == ncclInProgress ? ncclSuccess : res;
}
