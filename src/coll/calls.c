/*
 * calls.c - see calls.h.
 */
#include "coll/calls.h"

#include <stdint.h>
#include <string.h>

#include "util/check.h"

static int board(const chorus_coll_comm *cc) {
  return cc->node != NULL && cc->nranks > 1;
}

int chorus_calls_on_board(const chorus_op *op) {
  return !op->concurrent && board(op->cc);
}

/* An entry is rewritten as a sequence lock: `posted` is set busy, the
 * description written, then `posted` set to the call's; a reader copies
 * the description between two reads of `posted` that agree. */
#define BUSY UINT64_MAX

/* The hash of a call history extended by call m. */
static uint64_t chain(uint64_t h, const chorus_msg_meta *m) {
  const uint64_t words[4] = {m->seq, m->count, (uint64_t)m->call << 32 | m->redop,
                             (uint64_t)(uint32_t)m->root};
  for (int i = 0; i < 4; i++) {
    h = (h ^ words[i]) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h;
}

void chorus_calls_post(const chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  if (!chorus_calls_on_board(op)) return;
  const uint64_t k = op->meta.seq;
  chorus_call_entry *e = &cc->node->rank[cc->rank].calls[k % CHORUS_NODE_CALLS];
  __atomic_store_n(&e->posted, BUSY, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  e->meta = op->meta;
  e->chain = cc->calls_chain = chain(cc->calls_chain, &op->meta);
  /* No doorbell: a rank waits for a post only calls later (calls.h), by
   * when it is there, and naps are short. */
  __atomic_store_n(&e->posted, k + 1, __ATOMIC_RELEASE);
}

/* Peer p's description of call k into *out: 1, or 0 while p has not
 * posted it (or rewrites its entry), -1 when p has moved so far on that
 * the entry holds a later call. */
static int peer_call(const chorus_node_rank *r, uint64_t k, chorus_msg_meta *out,
                     uint64_t *chain_out) {
  const chorus_call_entry *e = &r->calls[k % CHORUS_NODE_CALLS];
  const uint64_t before = __atomic_load_n(&e->posted, __ATOMIC_ACQUIRE);
  if (before == BUSY || before < k + 1) return 0;
  if (before > k + 1) return -1;
  memcpy(out, (const void *)&e->meta, sizeof *out);
  *chain_out = e->chain;
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&e->posted, __ATOMIC_RELAXED) == before ? 1 : -1;
}

ncclResult_t chorus_calls_check(const chorus_coll_comm *cc, const chorus_msg_meta *call, int wait) {
  ncclResult_t res = ncclSuccess;
  for (int p = 0; p < cc->node->nranks; p++) {
    if (p == cc->rank) continue;
    chorus_msg_meta theirs;
    uint64_t h;
    const int got = peer_call(&cc->node->rank[p], call->seq, &theirs, &h);
    if (got == 0 && wait) res = ncclInProgress;
    if (got == 1 && !chorus_meta_equal(&theirs, call))
      return chorus_meta_mismatch(call, p, &theirs);
  }
  return res;
}

/* The first of this rank's calls from..last that peer p posted otherwise,
 * reported; ncclSuccess when none is left on both boards to tell (the
 * histories differ before). */
static ncclResult_t first_difference(const chorus_coll_comm *cc, int p, uint64_t from,
                                     uint64_t last) {
  const chorus_node_rank *me = &cc->node->rank[cc->rank];
  for (uint64_t k = from; k <= last; k++) {
    const chorus_msg_meta mine = me->calls[k % CHORUS_NODE_CALLS].meta;
    chorus_msg_meta theirs;
    uint64_t h;
    if (peer_call(&cc->node->rank[p], k, &theirs, &h) == 1 && !chorus_meta_equal(&theirs, &mine))
      return chorus_meta_mismatch(&mine, p, &theirs);
  }
  return chorus_error(ncclInvalidUsage,
                      "mismatched calls across ranks: rank %d's collectives up to #%llu differ "
                      "from this rank's (an earlier call differed). Every rank must issue the "
                      "same collectives, with the same count, type, op and root, in the same order",
                      p, (unsigned long long)last);
}

ncclResult_t chorus_calls_catch_up(chorus_coll_comm *cc, uint64_t upto, int wait) {
  if (!cc->unchecked || cc->unchecked_from >= upto) return ncclSuccess;
  /* The chains of call upto - 1 cover every call before it. */
  const uint64_t last = upto - 1;
  const uint64_t mine = cc->node->rank[cc->rank].calls[last % CHORUS_NODE_CALLS].chain;
  ncclResult_t res = ncclSuccess;
  for (int p = 0; p < cc->node->nranks; p++) {
    if (p == cc->rank) continue;
    chorus_msg_meta theirs;
    uint64_t h;
    const int got = peer_call(&cc->node->rank[p], last, &theirs, &h);
    if (got == 0) res = ncclInProgress;
    if (got == 1 && h != mine) return first_difference(cc, p, cc->unchecked_from, last);
  }
  if (res == ncclInProgress) return wait ? res : ncclSuccess;
  cc->unchecked = 0;
  return ncclSuccess;
}

ncclResult_t chorus_calls_end(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  const uint64_t k = op->expect.seq;
  if (cc->unchecked && k - cc->unchecked_from >= CHORUS_CALLS_LAG) {
    const ncclResult_t res = chorus_calls_catch_up(cc, k, 1);
    if (res != ncclSuccess) return res;
  }
  if (chorus_func_rooted(op->func) && !cc->unchecked) {
    cc->unchecked = 1;
    cc->unchecked_from = k;
  }
  return ncclSuccess;
}
