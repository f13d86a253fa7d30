/*
 * prims.c - see prims.h.
 */
#include "coll/prims.h"

#include <stdio.h>
#include <string.h>

#include "coll/steps.h"
#include "util/check.h"
#include "util/misc.h"

void chorus_meta_describe(const chorus_msg_meta *m, char *buf, size_t size) {
  int func = (int)(m->call & 0xff), dtype = (int)((m->call >> 8) & 0xff);
  int n = snprintf(buf, size, "%s(count=%llu, %s", chorus_func_name(func),
                   (unsigned long long)m->count, chorus_type_name(dtype));
  if (n < 0 || (size_t)n >= size) return;
  if (chorus_func_reduces(func))
    n += snprintf(buf + n, size - (size_t)n, ", %s", chorus_redop_name((int)m->redop));
  if (n < 0 || (size_t)n >= size) return;
  if (m->root >= 0) n += snprintf(buf + n, size - (size_t)n, ", root=%d", m->root);
  if (n < 0 || (size_t)n >= size) return;
  snprintf(buf + n, size - (size_t)n, ") #%llu", (unsigned long long)m->seq);
}

void chorus_op_describe(const chorus_op *op, char *buf, size_t size) {
  if (!op->concurrent) {
    chorus_meta_describe(&op->meta, buf, size);
    return;
  }
  snprintf(buf, size, "%s(count=%llu, %s, peer=%d) #%llu", chorus_func_name(op->func),
           (unsigned long long)chorus_op_whole_count(op), chorus_type_name(op->dtype), op->root,
           (unsigned long long)op->ticket);
}

chorus_msg_meta chorus_op_stamp(chorus_op *op) {
  /* Built in a local and stored whole: the copy into expect then reads
   * registers, not the narrower stores just made (a forwarding stall). */
  chorus_msg_meta m = {.count = chorus_op_whole_count(op), .redop = (uint32_t)op->nccl_op};
  if (op->concurrent) {
    /* Point-to-point: the k-th message stream between two ranks in one
     * direction; the sender's description is what both sides compare. */
    m.seq = op->ticket;
    m.call = (uint32_t)CHORUS_FUNC_SEND | (uint32_t)op->dtype << 8;
    m.root = op->func == CHORUS_FUNC_SEND ? op->cc->rank : op->root;
  } else {
    m.seq = op->cc->seq++;
    m.call = (uint32_t)op->func | (uint32_t)op->dtype << 8 | (uint32_t)op->algo << 16;
    m.root = op->root;
  }
  op->meta = m;
  op->expect = m;
  return m;
}

ncclResult_t chorus_meta_mismatch(const chorus_msg_meta *mine, int peer,
                                  const chorus_msg_meta *theirs) {
  char a[160], b[160];
  chorus_meta_describe(mine, a, sizeof a);
  chorus_meta_describe(theirs, b, sizeof b);
  return chorus_error(ncclInvalidUsage,
                      "mismatched calls across ranks: this rank called %s but rank %d called %s. "
                      "Every rank must issue the same collectives, with the same count, type, op "
                      "and root, in the same order",
                      a, peer, b);
}

ncclResult_t chorus_prim_conn_error(chorus_op *op, chorus_conn *c, ncclResult_t res) {
  char me[160];
  if (c->relayed && !op->cc->cause[0]) snprintf(op->cc->cause, sizeof op->cc->cause, "%s", c->err);
  chorus_op_describe(op, me, sizeof me);
  return chorus_error(res, "%s failed: %s (%s transport)", me, c->err, c->transport);
}

/* One owner thread counts; the state dump reads. */
static void count_bytes(chorus_conn *c, size_t n) {
  __atomic_store_n(&c->bytes_moved, __atomic_load_n(&c->bytes_moved, __ATOMIC_RELAXED) + n,
                   __ATOMIC_RELAXED);
}

/* A message posted: counted, and reported to a watching profiler. */
static ncclResult_t posted(chorus_op *op, chorus_conn *c, size_t bytes) {
  count_bytes(c, bytes);
  op->ticks++;
  if (chorus_steps_watch(op, c)) chorus_steps_posted(op, c, bytes);
  return ncclSuccess;
}

/* The outcome of a non-blocking transport call: on ncclInProgress the op
 * records what it waits for; errors are reported for the op. */
static ncclResult_t outcome(chorus_op *op, chorus_conn *c, int dir, ncclResult_t res) {
  if (res == ncclInProgress) {
    op->wait_conn = c;
    op->wait_dir = dir;
    return res;
  }
  return res == ncclSuccess ? res : chorus_prim_conn_error(op, c, res);
}

static ncclResult_t received(chorus_op *op, chorus_conn *c, size_t bytes, const chorus_msg_meta *m);

ncclResult_t chorus_prim_recv(chorus_op *op, chorus_conn *c, const void **buf, size_t *bytes) {
  chorus_msg_meta m;
  const ncclResult_t got = c->ops->recv_slot(c, buf, bytes, &m);
  if (chorus_steps_watch(op, c)) chorus_steps_recv_ask(op, c, got, got == ncclSuccess ? *bytes : 0);
  ncclResult_t res = outcome(op, c, CHORUS_DIR_RECV, got);
  if (res != ncclSuccess) return res;
  return received(op, c, *bytes, &m);
}

ncclResult_t chorus_prim_recv_read(chorus_op *op, chorus_conn *c, void *dst, size_t room,
                                   const void **buf, size_t *bytes, int *read) {
  chorus_msg_meta m;
  const ncclResult_t got = c->ops->recv_read(c, dst, room, &op->expect, buf, bytes, &m, read);
  if (chorus_steps_watch(op, c)) chorus_steps_recv_ask(op, c, got, got == ncclSuccess ? *bytes : 0);
  ncclResult_t res = outcome(op, c, CHORUS_DIR_RECV, got);
  if (res != ncclSuccess) return res;
  return received(op, c, *bytes, &m);
}

/* A message taken: counted, and checked to belong to op's call. */
static ncclResult_t received(chorus_op *op, chorus_conn *c, size_t bytes,
                             const chorus_msg_meta *m) {
  count_bytes(c, bytes);
  if (!chorus_meta_equal(m, &op->expect)) {
    if (!op->concurrent) return chorus_meta_mismatch(&op->expect, c->peer, m);
    char mine[160], theirs[160];
    chorus_meta_describe(&op->expect, mine, sizeof mine);
    chorus_meta_describe(m, theirs, sizeof theirs);
    return chorus_error(ncclInvalidUsage,
                        "mismatched point-to-point calls: this rank's Recv expected rank %d's "
                        "%s but rank %d sent %s. A send and its receive must have the same "
                        "count and type, and sends to one peer are matched in call order",
                        c->peer, mine, c->peer, theirs);
  }
  op->ticks++;
  return ncclSuccess;
}

ncclResult_t chorus_prim_release(chorus_op *op, chorus_conn *c) {
  ncclResult_t res = c->ops->recv_release(c);
  if (res != ncclSuccess) return chorus_prim_conn_error(op, c, res);
  if (chorus_steps_watch(op, c)) chorus_steps_released(op, c);
  return ncclSuccess;
}

ncclResult_t chorus_prim_send_slot(chorus_op *op, chorus_conn *c, void **buf, size_t *cap) {
  const ncclResult_t got = c->ops->send_slot(c, buf, cap);
  if (chorus_steps_watch(op, c)) chorus_steps_send_ask(op, c, got);
  return outcome(op, c, CHORUS_DIR_SEND, got);
}

ncclResult_t chorus_prim_post(chorus_op *op, chorus_conn *c, size_t bytes) {
  ncclResult_t res = c->ops->send_post(c, bytes, &op->meta);
  if (res != ncclSuccess && res != ncclInProgress) return chorus_prim_conn_error(op, c, res);
  return posted(op, c, bytes);
}

ncclResult_t chorus_prim_flush(chorus_op *op, chorus_conn *c) {
  const ncclResult_t got = c->ops->send_flush(c);
  if (got == ncclSuccess && chorus_steps_watch(op, c)) chorus_steps_flushed(op, c);
  return outcome(op, c, CHORUS_DIR_SEND, got);
}

ncclResult_t chorus_prim_dev_move(chorus_op *op, chorus_conn *c, void *buf, size_t bytes) {
  const int dir = op->func == CHORUS_FUNC_SEND ? CHORUS_DIR_SEND : CHORUS_DIR_RECV;
  const ncclResult_t res = outcome(op, c, dir, c->ops->dev_move(c, buf, bytes));
  if (res == ncclSuccess) count_bytes(c, bytes);
  return res;
}

ncclResult_t chorus_prim_post_from(chorus_op *op, chorus_conn *c, void *slot, const void *src,
                                   size_t bytes) {
  if (!c->ops->send_post_ref) {
    memcpy(slot, src, bytes);
    return chorus_prim_post(op, c, bytes);
  }
  ncclResult_t res = c->ops->send_post_ref(c, src, bytes, &op->meta);
  if (res != ncclSuccess && res != ncclInProgress) return chorus_prim_conn_error(op, c, res);
  return posted(op, c, bytes);
}

ncclResult_t chorus_prim_post_read(chorus_op *op, chorus_conn *c, const void *src, size_t bytes) {
  ncclResult_t res = c->ops->send_post_read(c, src, bytes, &op->meta);
  if (res != ncclSuccess && res != ncclInProgress) return chorus_prim_conn_error(op, c, res);
  return posted(op, c, bytes);
}

ncclResult_t chorus_prim_recv_placed(chorus_op *op, chorus_conn *c, chorus_place_fn place,
                                     const void *ctx, uint64_t total, uint64_t *placed,
                                     uint64_t taken, const void **buf, size_t *bytes) {
  while (c->ops->recv_expect && *placed < total && *placed - taken <= UINT32_MAX) {
    size_t n;
    char *dst = place(ctx, *placed, &n);
    if (dst && !c->ops->recv_expect(c, (unsigned)(*placed - taken), dst, n, &op->expect)) break;
    (*placed)++;
  }
  return chorus_prim_recv(op, c, buf, bytes);
}

ncclResult_t chorus_prim_size_error(chorus_op *op, chorus_conn *c, size_t got, size_t want) {
  char me[160];
  chorus_op_describe(op, me, sizeof me);
  return chorus_error(ncclInvalidUsage,
                      "%s: rank %d sent %zu bytes where %zu were expected (counts or types "
                      "differ between the ranks, or they use different NCCL_BUFFSIZE or "
                      "CHORUS_NSLOTS)",
                      me, c->peer, got, want);
}
