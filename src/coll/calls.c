/*
 * calls.c - see calls.h.
 */
#include "coll/calls.h"

#include <stdint.h>
#include <string.h>

#include "util/check.h"

static int board(const chorus_coll_comm *cc) {
  return cc->mine != NULL && cc->nranks > 1;
}

int chorus_calls_on_board(const chorus_op *op) {
  return !op->concurrent && board(op->cc);
}

/* Which calls are posted (calls.h): every one where a post is a store. */
static int posted(const chorus_coll_comm *cc, int func) {
  return cc->node != NULL || chorus_func_rooted(func);
}

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

void chorus_calls_post(const chorus_op *op, const chorus_msg_meta *m) {
  chorus_coll_comm *cc = op->cc;
  if (!chorus_calls_on_board(op)) return;
  if (!posted(cc, op->func)) {
    for (int t = 0; t < cc->ntransports; t++)
      if (cc->transports[t]->advance) cc->transports[t]->advance(cc->tstates[t], m->seq);
    return;
  }
  const uint64_t k = m->seq;
  chorus_call_entry *e = &cc->mine[k % CHORUS_NODE_CALLS];
  e->posted = k + 1;
  e->chain = cc->calls_chain = chain(cc->calls_chain, m);
  e->meta = *m;
  for (int t = 0; t < cc->ntransports; t++) cc->transports[t]->post_call(cc->tstates[t], e);
}

/* The board of peer p: the calls it posted, or NULL (this rank's own
 * connection to itself has none). */
static chorus_conn *board_of(const chorus_coll_comm *cc, int p) {
  chorus_conn *c = chorus_cc_conn(cc, p, CHORUS_CH_COLL, CHORUS_DIR_RECV);
  return c && c->heard ? c : NULL;
}

/* A board's description of call k into *out (transport.h's sequence
 * lock): 1, or 0 while it holds no post of k (not yet, or never:
 * calls.h), -1 when its owner has moved so far on that the entry holds a
 * later call. */
static int board_call(const chorus_call_entry *calls, uint64_t k, chorus_msg_meta *out,
                      uint64_t *chain_out) {
  return chorus_call_entry_read(&calls[k % CHORUS_NODE_CALLS], k, out, chain_out);
}

ncclResult_t chorus_calls_check(const chorus_coll_comm *cc, const chorus_msg_meta *call,
                                chorus_conn **failed) {
  *failed = NULL;
  for (int p = 0; p < cc->nranks; p++) {
    chorus_conn *c = board_of(cc, p);
    if (!c) continue;
    /* What a peer posted before it failed still counts: a mismatch is
     * the root cause. */
    if (c->ops->hear(c) != ncclSuccess && !*failed) *failed = c;
    chorus_msg_meta theirs;
    uint64_t h;
    if (board_call(c->heard, call->seq, &theirs, &h) == 1 && !chorus_meta_equal(&theirs, call))
      return chorus_meta_mismatch(call, p, &theirs);
  }
  return *failed ? ncclRemoteError : ncclSuccess;
}

/* The first of this rank's posted calls from..last that peer p posted
 * otherwise, reported; when none is left on both boards to tell (the
 * histories differ before, or in calls only one of them posted), a
 * mismatch without the calls. */
static ncclResult_t first_difference(const chorus_coll_comm *cc, int p, uint64_t from,
                                     uint64_t last) {
  const chorus_conn *c = board_of(cc, p);
  for (uint64_t k = from; k <= last; k++) {
    const chorus_call_entry *mine = &cc->mine[k % CHORUS_NODE_CALLS];
    if (mine->posted != k + 1) continue;
    chorus_msg_meta theirs;
    uint64_t h;
    if (board_call(c->heard, k, &theirs, &h) == 1 && !chorus_meta_equal(&theirs, &mine->meta))
      return chorus_meta_mismatch(&mine->meta, p, &theirs);
  }
  return chorus_error(ncclInvalidUsage,
                      "mismatched calls across ranks: rank %d's collectives up to #%llu differ "
                      "from this rank's (an earlier call differed). Every rank must issue the "
                      "same collectives, with the same count, type, op and root, in the same order",
                      p, (unsigned long long)last);
}

/* Compares the unchecked calls before upto; *waiting: the board of a
 * peer that has not posted the last of them yet, or NULL. The posted calls
 * from upto to before `now` stay unchecked. */
static ncclResult_t catch_up(chorus_coll_comm *cc, uint64_t upto, uint64_t now,
                             chorus_conn **waiting) {
  *waiting = NULL;
  if (!cc->unchecked || cc->unchecked_from >= upto) return ncclSuccess;
  /* The last call before upto that this rank posted: its hash covers
   * every posted call before it (unchecked_from was posted). */
  uint64_t last = upto - 1;
  while (last > cc->unchecked_from && cc->mine[last % CHORUS_NODE_CALLS].posted != last + 1) last--;
  const uint64_t mine = cc->mine[last % CHORUS_NODE_CALLS].chain;
  for (int p = 0; p < cc->nranks; p++) {
    chorus_conn *c = board_of(cc, p);
    if (!c) continue;
    (void)c->ops->hear(c); /* a failure shows where the op waits */
    chorus_msg_meta theirs;
    uint64_t h;
    const int got = board_call(c->heard, last, &theirs, &h);
    if (got == 0 && !*waiting) *waiting = c;
    if (got == 1 && h != mine) return first_difference(cc, p, cc->unchecked_from, last);
  }
  if (*waiting) return ncclSuccess;
  cc->unchecked = 0;
  for (uint64_t k = upto; k < now && !cc->unchecked; k++)
    if (cc->mine[k % CHORUS_NODE_CALLS].posted == k + 1) {
      cc->unchecked = 1;
      cc->unchecked_from = k;
    }
  return ncclSuccess;
}

ncclResult_t chorus_calls_catch_up(chorus_coll_comm *cc, uint64_t upto) {
  chorus_conn *waiting;
  return catch_up(cc, upto, upto, &waiting);
}

ncclResult_t chorus_calls_end(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  const uint64_t k = op->expect.seq;
  if (cc->unchecked && k - cc->unchecked_from >= CHORUS_CALLS_LAG) {
    chorus_conn *waiting;
    /* Not the last CHORUS_CALLS_HELD calls: a peer may hold their entries
     * back (transport.h), and a wait for them would last until it stalls. */
    const ncclResult_t res = catch_up(cc, k - CHORUS_CALLS_HELD, k, &waiting);
    if (res != ncclSuccess) return res;
    if (waiting) {
      op->wait_conn = waiting;
      op->wait_dir = CHORUS_DIR_RECV;
      return ncclInProgress;
    }
  }
  if (chorus_func_rooted(op->func) && !cc->unchecked) {
    cc->unchecked = 1;
    cc->unchecked_from = k;
  }
  return ncclSuccess;
}
