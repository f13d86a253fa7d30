/*
 * node.c - the one-host schedules (oneshot, twoshot) on node memory (transport.h): every rank of
 * the communicator shares this host, so each rank copies its data once into its stage buffer and
 * the others read it there, in place.
 *
 * AllReduce, chunk by chunk (a chunk fills one stage buffer):
 *   oneshot  post our chunk; when every rank has posted, reduce all n stages
 *            into our output. One synchronisation per chunk; n reads of the
 *            chunk per rank, so it suits small sizes.
 *   twoshot  post our chunk; when all have posted, reduce our 1/n share of
 *            all stages into our own stage (nobody else reads that share),
 *            announce it; when all have, copy every rank's share to our
 *            output. Two synchronisations per chunk; each byte is reduced by
 *            exactly one rank, so it suits large sizes.
 * Sources are always reduced in rank order, so every rank ends with the same
 * bits. PreMulSum scalars belong to each rank, so every rank scales its own
 * input as it stages it and the stages are then summed as they are. Stage
 * buffers rotate (chunk g uses buffer g % nbuf), so ranks may run up to
 * nbuf-1 chunks apart; a buffer is rewritten only once nobody reads it.
 *
 * Every chunk's stage carries the description of the call it belongs to;
 * a rank reading a peer's stage compares it with its own call, so mismatched
 * calls are reported instead of mixing data of different calls. A rank that
 * fails raises its `failed` flag (with a reason) in node memory; waiting
 * ranks see it at once. A rank waiting on another records that peer's
 * shared-memory connection as what it waits for, so the executor also checks
 * the peer is alive.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coll/coll.h"
#include "host/copy.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/coro.h"
#include "util/doorbell.h"
#include "util/misc.h"
#include "util/proc.h"

#define D (op->u.node)

enum { POSTED, REDUCED };

static uint64_t *counter(chorus_node_rank *r, int which) {
  return which == POSTED ? r->posted : r->reduced;
}

static char *stage(const chorus_op *op, int rank, uint64_t g);

/* The description slot of chunk g: a ring as deep as the farthest any
 * rank may run ahead (transport.h), so a slot is rewritten only once every
 * rank has finished the chunk it described. */
static unsigned meta_slot(uint64_t g) {
  return (unsigned)(g % CHORUS_NODE_META_SLOTS);
}

/* Rank p failed: report it for this op. */
static ncclResult_t peer_failed(chorus_op *op, int p) {
  char reason[CHORUS_NODE_REASON], me[160];
  memcpy(reason, op->cc->node->rank[p].reason, sizeof reason);
  reason[sizeof reason - 1] = '\0';
  chorus_op_describe(op, me, sizeof me);
  if (!reason[0]) return chorus_error(ncclRemoteError, "%s failed: rank %d failed", me, p);
  if (!op->cc->cause[0]) snprintf(op->cc->cause, sizeof op->cc->cause, "%s", reason);
  return chorus_error(ncclRemoteError, "%s failed: %s", me, reason);
}

/* Waits for rank p's counter to reach target: ncclSuccess, ncclInProgress
 * (p recorded as what we wait for) or the error p reported. For POSTED of a
 * chunk of this call (not for FREE, an earlier chunk's post) it also checks
 * that p's stage holds this call's data. */
enum { FREE = 2 }; /* POSTED, of an earlier chunk: no description check */

static ncclResult_t reached(chorus_op *op, int p, int which, uint64_t target) {
  chorus_node_rank *r = &op->cc->node->rank[p];
  if (which == FREE && r->seen_posted >= target) return ncclSuccess;
  /* What p published before failing is still valid: look at the counter
   * first, and only report p's failure when we need more from it (read
   * again after the flag: p may have published and failed in between). */
  const uint64_t *cnt = counter(r, which == FREE ? POSTED : which);
  uint64_t v = __atomic_load_n(cnt, __ATOMIC_ACQUIRE);
  if (v < target) {
    if (!__atomic_load_n(r->failed, __ATOMIC_ACQUIRE)) {
      op->wait_conn = chorus_cc_conn(op->cc, p, CHORUS_CH_COLL, CHORUS_DIR_RECV);
      op->wait_dir = CHORUS_DIR_RECV;
      return ncclInProgress;
    }
    if ((v = __atomic_load_n(cnt, __ATOMIC_ACQUIRE)) < target) return peer_failed(op, p);
  }
  if (which == FREE) r->seen_posted = v; /* acquired: later waits it covers may skip the load */
  if (which == POSTED) {
    const chorus_msg_meta *m = &r->meta[meta_slot(target - 1)];
    if (m->seq != op->expect.seq || m->count != op->expect.count || m->call != op->expect.call ||
        m->redop != op->expect.redop || m->root != op->expect.root)
      /* A peer that failed mid-call left its last call's description:
       * its failure is the news, not the mismatch. */
      return __atomic_load_n(r->failed, __ATOMIC_ACQUIRE) ? peer_failed(op, p)
                                                          : chorus_meta_mismatch(&op->expect, p, m);
  }
  return ncclSuccess;
}

/* Every other rank's counter reached target. */
static ncclResult_t all_reached(chorus_op *op, int which, uint64_t target) {
  for (int p = 0; p < op->cc->nranks; p++) {
    if (p == op->cc->rank) continue;
    ncclResult_t res = reached(op, p, which, target);
    if (res != ncclSuccess) return res;
  }
  op->ticks++;
  return ncclSuccess;
}

/* Publishes our counter and wakes every peer that may wait on it. Posting
 * also publishes which call the stage buffer now serves. */
static void announce(chorus_op *op, int which, uint64_t value) {
  chorus_node *nd = op->cc->node;
  chorus_node_rank *me = &nd->rank[op->cc->rank];
  if (which == POSTED) me->meta[meta_slot(value - 1)] = op->meta;
  __atomic_store_n(counter(me, which), value, __ATOMIC_RELEASE);
  for (int p = 0; p < nd->nranks; p++)
    if (p != op->cc->rank) chorus_doorbell_ring(nd->rank[p].db);
  op->ticks++;
}

/* Our stage buffer for chunk D.g is free once every rank has posted chunk
 * D.g - nbuf + 1: each rank reads a chunk completely before posting the
 * next, so nobody still reads chunk D.g - nbuf (transport.h). */
static ncclResult_t stage_free(chorus_op *op) {
  uint64_t nbuf = (uint64_t)op->cc->node->nbuf;
  if (D.g + 1 < nbuf) return ncclSuccess;
  return all_reached(op, FREE, D.g - nbuf + 2);
}

static char *stage(const chorus_op *op, int rank, uint64_t g) {
  chorus_node *nd = op->cc->node;
  return nd->rank[rank].stage + (size_t)(g % (uint64_t)nd->nbuf) * nd->chunk;
}

/* Elements of chunk c, and of rank p's share of it (twoshot). */
static size_t chunk_len(const chorus_op *op, size_t *off) {
  *off = D.c * D.chunk_elems;
  return CHORUS_MIN(D.chunk_elems, op->count - *off);
}

static size_t share(const chorus_op *op, size_t len, int p, size_t *soff) {
  size_t align = CHORUS_MAX((size_t)1, 64 / op->esize);
  size_t per = CHORUS_ALIGN_UP(CHORUS_DIV_UP(len, (size_t)op->cc->nranks), align);
  size_t start = CHORUS_MIN((size_t)p * per, len);
  *soff = start;
  return CHORUS_MIN(per, len - start);
}

/* Where rank p's data at byte offset `at` of chunk g is read from: p's
 * stage, or for this rank its own input (`mine`, at the same offset) when
 * the stage holds an exact copy of it. Reading our own stage back while the
 * peers read it measured several times slower than reading our input. */
static const void *source(const chorus_op *op, int p, uint64_t g, size_t at, const char *mine) {
  if (p == op->cc->rank && mine && op->red.kind != CHORUS_RED_PREMULSUM) return mine;
  return stage(op, p, g) + at;
}

/* Reduces the stages of every rank at byte offset `at` into dst (already
 * scaled when staged, so no scaling here; SUMPOSTDIV divides here). `mine`
 * is our input at that offset (or NULL); `flags` adds CHORUS_RED_NT. */
static void reduce_stages(chorus_op *op, void *dst, uint64_t g, size_t at, size_t len,
                          const char *mine, unsigned flags) {
  const void *src[CHORUS_REDUCE_MAX_SRCS];
  int n = op->cc->nranks;
  for (int p = 0; p < n; p++) src[p] = source(op, p, g, at, mine);
  chorus_reduce(&op->red, dst, src, n, len, 0, CHORUS_RED_FINALIZE | flags);
}

static unsigned nt_flag(const chorus_op *op) {
  return op->nt ? CHORUS_RED_NT : 0;
}

static void count_staged(chorus_op *op, size_t bytes) {
  chorus_node *nd = op->cc->node; /* one writer; the state dump reads */
  __atomic_store_n(&nd->staged_bytes, __atomic_load_n(&nd->staged_bytes, __ATOMIC_RELAXED) + bytes,
                   __ATOMIC_RELAXED);
}

/* Copies len elements of our input into our stage, applying our PreMulSum
 * scalar when the call reduces. The stores are the kind the stage tuner
 * picks (host/copy.h). */
static void stage_copy(chorus_op *op, void *dst, const void *src, size_t len) {
  chorus_store_tuner *t = &op->cc->stage_tuner;
  count_staged(op, len * op->esize);
  if (op->red.kind != CHORUS_RED_PREMULSUM) {
    chorus_copy_tuned(t, dst, src, len * op->esize);
    return;
  }
  const void *s1[1] = {src};
  size_t bytes = len * op->esize;
  int st = chorus_store_pick(t, bytes);
  int64_t t0 = chorus_now_ns();
  chorus_reduce(&op->red, dst, s1, 1, len, 1u, st ? CHORUS_RED_NT : 0);
  chorus_store_learn(t, st, bytes, chorus_now_ns() - t0);
}

/* reduce_stages into our own stage (which the peers read next), with the
 * stores the reduce tuner picks. */
static void reduce_to_stage(chorus_op *op, uint64_t g, size_t at, size_t len, const char *mine) {
  chorus_store_tuner *t = &op->cc->reduce_tuner;
  size_t bytes = len * op->esize;
  count_staged(op, bytes);
  int st = chorus_store_pick(t, bytes);
  int64_t t0 = chorus_now_ns();
  reduce_stages(op, stage(op, op->cc->rank, g) + at, g, at, len, mine, st ? CHORUS_RED_NT : 0);
  chorus_store_learn(t, st, bytes, chorus_now_ns() - t0);
}

/*
 * Small calls (oneshot) on fast lines (transport.h): each rank that has
 * data for the others writes it and the call's description into its
 * lines of the chunk's set, flag last in each line, and a rank waits on
 * the lines of those it reads from alone: one line transfer per peer for
 * up to 24 bytes, where the stage path has the peer's counter, then its
 * description and its data. `posted` and the description slot still
 * move, so the other schedules' counters stay right and a peer in
 * another call meets a mismatch.
 *
 * Set g % CHORUS_FAST_SETS of a rank is rewritten at chunk g once every
 * rank has posted chunk g - CHORUS_FAST_SETS + 1 (so finished reading
 * chunk g - CHORUS_FAST_SETS), asked of the cached counters (reached):
 * a rank that waits for nobody in a call (a Broadcast's root, a Gather's
 * other ranks) runs ahead that many calls and reads a peer's counter
 * about once per set, as Open MPI's eager sends run ahead. AllReduce
 * reads everyone's lines each call, so it asks only when its last call
 * was not the fast AllReduce of the chunk before (which showed every
 * peer had posted it).
 *
 * What a rank writes is the head of its input: its block (AllGather,
 * Gather, Reduce, AllReduce, a Broadcast's root) or all n blocks
 * (AlltoAll, ReduceScatter, a Scatter's root).
 */
#define FAST_ASK 64

/* Bytes of the input a rank writes to its lines for op (0: none). */
static size_t fast_bytes(const chorus_op *op, int rank) {
  return chorus_func_shared_elems(op->func, op->count, rank, op->root, op->cc->nranks) * op->esize;
}

/* The ranks whose lines this rank reads, as a bit mask. */
static unsigned fast_sources(const chorus_op *op) {
  const int n = op->cc->nranks, me = op->cc->rank;
  const unsigned others = ((1u << n) - 1) & ~(1u << me);
  switch (op->func) {
  case CHORUS_FUNC_BROADCAST:
  case CHORUS_FUNC_SCATTER:
    return me == op->root ? 0 : 1u << op->root;
  case CHORUS_FUNC_GATHER:
  case CHORUS_FUNC_REDUCE:
    return me == op->root ? others : 0;
  default:
    return others;
  }
}

static int fast_nlines(size_t bytes) {
  return bytes <= CHORUS_FAST_HEAD
             ? 1
             : 1 + (int)CHORUS_DIV_UP(bytes - CHORUS_FAST_HEAD, (size_t)CHORUS_FAST_BODY);
}

/* Whether op runs on fast lines: sets D.fast to the lines each rank it
 * reads from wrote (0: not) and D.from to those ranks, once per call so
 * that the polls of fast_wait compute nothing. */
static void fast_plan(chorus_op *op) {
  const size_t block = op->count * op->esize;
  D.fast = 0;
  if (op->algo != CHORUS_ALGO_ONESHOT || block == 0 || op->red.kind == CHORUS_RED_PREMULSUM ||
      op->cc->nranks > CHORUS_FAST_RANKS)
    return;
  /* The most any rank writes, so that every rank decides the same: every
   * rank that writes writes as much. */
  const int root = op->root >= 0 ? op->root : 0;
  const size_t bytes =
      CHORUS_MAX(fast_bytes(op, root), fast_bytes(op, (root + 1) % op->cc->nranks));
  if (bytes == 0 || bytes > op->cc->plan.env.fast_max) return;
  D.fast = fast_nlines(bytes);
  D.from = fast_sources(op);
}

static chorus_fast_line *fast_lines(const chorus_op *op, int p, uint64_t g) {
  return op->cc->node->rank[p].fast + (g % CHORUS_FAST_SETS) * CHORUS_FAST_LINES;
}

/* Writes the first `bytes` of our input into our lines of chunk g. */
static void fast_write(chorus_op *op, uint64_t g, size_t bytes) {
  chorus_fast_line *l = fast_lines(op, op->cc->rank, g);
  const char *src = op->sendbuff;
  size_t at = CHORUS_MIN(bytes, (size_t)CHORUS_FAST_HEAD);
  l[0].u.head.meta = op->meta;
  memcpy(l[0].u.head.data, src, at);
  __atomic_store_n(&l[0].flag, g + 1, __ATOMIC_RELEASE);
  for (int i = 1; at < bytes; i++, at += CHORUS_FAST_BODY) {
    memcpy(l[i].u.data, src + at, CHORUS_MIN(bytes - at, (size_t)CHORUS_FAST_BODY));
    __atomic_store_n(&l[i].flag, g + 1, __ATOMIC_RELEASE);
  }
  count_staged(op, bytes);
}

/* Copies bytes [off, off + len) of what lines l hold into dst. */
static void fast_read(const chorus_fast_line *l, size_t off, char *dst, size_t len) {
  while (len) {
    const char *from;
    size_t room;
    if (off < CHORUS_FAST_HEAD) {
      from = l[0].u.head.data + off;
      room = CHORUS_FAST_HEAD - off;
    } else {
      const size_t i = (off - CHORUS_FAST_HEAD) / CHORUS_FAST_BODY,
                   at = (off - CHORUS_FAST_HEAD) % CHORUS_FAST_BODY;
      from = l[1 + i].u.data + at;
      room = CHORUS_FAST_BODY - at;
    }
    const size_t k = CHORUS_MIN(room, len);
    memcpy(dst, from, k);
    dst += k;
    off += k;
    len -= k;
  }
}

/* Rank p's lines of chunk g (the first nl) are there, for this call:
 * ncclSuccess, ncclInProgress (p recorded as what we wait for), or the
 * mismatch or failure that p's lines or counter show. */
static inline ncclResult_t fast_peer(chorus_op *op, int p, uint64_t g, int nl) {
  const chorus_fast_line *l = fast_lines(op, p, g);
  int ready = 1;
  for (int i = 0; i < nl && ready; i++)
    ready = __atomic_load_n(&l[i].flag, __ATOMIC_ACQUIRE) == g + 1;
  if (!ready) {
    /* Not yet, or p posted chunk g in another call (a mismatch), or
     * failed: its counter says which. Asked every FAST_ASK polls only:
     * the counter's line is the one p writes next. */
    ncclResult_t res = ++D.c % FAST_ASK ? ncclInProgress : reached(op, p, POSTED, g + 1);
    if (res != ncclSuccess && res != ncclInProgress) return res;
    op->wait_conn = chorus_cc_conn(op->cc, p, CHORUS_CH_COLL, CHORUS_DIR_RECV);
    op->wait_dir = CHORUS_DIR_RECV;
    return ncclInProgress;
  }
  chorus_msg_meta m = l[0].u.head.meta;
  return chorus_meta_equal(&m, &op->expect) ? ncclSuccess
                                            : chorus_meta_mismatch(&op->expect, p, &m);
}

/* The lines of chunk g of every rank in D.from are there, for this call. */
static ncclResult_t fast_wait(chorus_op *op, uint64_t g) {
  const int n = op->cc->nranks, nl = D.fast;
  const unsigned from = D.from;
  for (int p = 0; p < n; p++) {
    if (!((from >> p) & 1)) continue;
    const ncclResult_t res = fast_peer(op, p, g, nl);
    if (res != ncclSuccess) return res;
  }
  op->ticks++;
  return ncclSuccess;
}

/* Reduces, in rank order, block `blk` of every rank (ours from our
 * input, the others' from their lines of chunk g) into dst. */
static void fast_reduce(chorus_op *op, uint64_t g, int blk, void *dst) {
  const int n = op->cc->nranks, me = op->cc->rank;
  const size_t bytes = op->count * op->esize, off = (size_t)blk * bytes;
  const void *src[CHORUS_FAST_RANKS];
  char(*copies)[CHORUS_FAST_MAX] = op->cc->node->fast_copy;
  for (int p = 0; p < n; p++) {
    const chorus_fast_line *l = fast_lines(op, p, g);
    if (p == me) {
      src[p] = (const char *)op->sendbuff + off;
    } else if (off + bytes <= CHORUS_FAST_HEAD) {
      src[p] = l[0].u.head.data + off;
    } else {
      fast_read(l, off, copies[p], bytes);
      src[p] = copies[p];
    }
  }
  chorus_reduce(&op->red, dst, src, n, op->count, 0, CHORUS_RED_FINALIZE);
}

/* Our output of chunk g from the lines, as stage_out does from stages. */
static void fast_out(chorus_op *op, uint64_t g) {
  const int n = op->cc->nranks, me = op->cc->rank, root = op->root;
  const size_t b = op->count * op->esize;
  const char *in = op->sendbuff;
  char *out = op->recvbuff;
  switch (op->func) {
  case CHORUS_FUNC_REDUCESCATTER:
    fast_reduce(op, g, me, out);
    break;
  case CHORUS_FUNC_REDUCE:
    if (me == root) fast_reduce(op, g, 0, out);
    break;
  case CHORUS_FUNC_BROADCAST:
    if (me != root)
      fast_read(fast_lines(op, root, g), 0, out, b);
    else if (in != out)
      memcpy(out, in, b);
    break;
  case CHORUS_FUNC_SCATTER:
    if (me != root)
      fast_read(fast_lines(op, root, g), (size_t)me * b, out, b);
    else if (out != in + (size_t)root * b)
      memcpy(out, in + (size_t)root * b, b);
    break;
  case CHORUS_FUNC_GATHER:
    if (me != root) break;
    __attribute__((fallthrough));
  case CHORUS_FUNC_ALLGATHER:
    for (int p = 0; p < n; p++)
      if (p != me)
        fast_read(fast_lines(op, p, g), 0, out + (size_t)p * b, b);
      else if (in != out + (size_t)me * b)
        memcpy(out + (size_t)me * b, in, b);
    break;
  case CHORUS_FUNC_ALLTOALL:
    for (int p = 0; p < n; p++)
      if (p != me)
        fast_read(fast_lines(op, p, g), (size_t)me * b, out + (size_t)p * b, b);
      else if (in != out)
        memcpy(out + (size_t)me * b, in + (size_t)me * b, b);
    break;
  default:
    break;
  }
}

static ncclResult_t coll_fast(chorus_op *op) {
  chorus_node *nd = op->cc->node;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  D.g = nd->next_chunk;
  D.c = 0;
  if (D.g + 2 > CHORUS_FAST_SETS)
    CORO_AWAIT_RES(op->co, res, all_reached(op, FREE, D.g + 2 - CHORUS_FAST_SETS));
  {
    const size_t mine = fast_bytes(op, op->cc->rank);
    if (mine) fast_write(op, D.g, mine);
  }
  announce(op, POSTED, D.g + 1);
  CORO_AWAIT_RES(op->co, res, fast_wait(op, D.g));
  fast_out(op, D.g);
  nd->last_fast = 0;
  nd->next_chunk += 1;
  CORO_END(op->co);
}

/* AllReduce's own wait and reduction: its calls are the most frequent
 * small ones, and these forms (every peer's whole block, the head copied
 * at a constant size) measured 5-10% faster in its polling loop than
 * coll_fast's general ones (fast_wait's rank mask alone: 3-7% at 16-128
 * B). */
static ncclResult_t allreduce_wait(chorus_op *op, uint64_t g) {
  const int n = op->cc->nranks, nl = D.fast;
  for (int p = 0; p < n; p++) {
    if (p == op->cc->rank) continue;
    const ncclResult_t res = fast_peer(op, p, g, nl);
    if (res != ncclSuccess) return res;
  }
  op->ticks++;
  return ncclSuccess;
}

static void allreduce_reduce(chorus_op *op, uint64_t g) {
  const int n = op->cc->nranks, me = op->cc->rank;
  const size_t bytes = op->count * op->esize;
  const void *src[CHORUS_FAST_RANKS];
  char(*copies)[CHORUS_FAST_MAX] = op->cc->node->fast_copy;
  for (int p = 0; p < n; p++) {
    const chorus_fast_line *l = fast_lines(op, p, g);
    if (p == me) {
      src[p] = op->sendbuff;
    } else if (bytes <= CHORUS_FAST_HEAD) {
      src[p] = l[0].u.head.data;
    } else {
      memcpy(copies[p], l[0].u.head.data, CHORUS_FAST_HEAD);
      for (size_t at = CHORUS_FAST_HEAD, i = 1; at < bytes; i++, at += CHORUS_FAST_BODY)
        memcpy(copies[p] + at, l[i].u.data, CHORUS_MIN(bytes - at, (size_t)CHORUS_FAST_BODY));
      src[p] = copies[p];
    }
  }
  chorus_reduce(&op->red, op->recvbuff, src, n, op->count, 0, CHORUS_RED_FINALIZE);
}

static ncclResult_t allreduce_fast(chorus_op *op) {
  chorus_node *nd = op->cc->node;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  D.g = nd->next_chunk;
  D.c = 0;
  if (nd->last_fast != D.g && D.g > 0) CORO_AWAIT_RES(op->co, res, all_reached(op, FREE, D.g));
  fast_write(op, D.g, op->count * op->esize);
  announce(op, POSTED, D.g + 1);
  CORO_AWAIT_RES(op->co, res, allreduce_wait(op, D.g));
  allreduce_reduce(op, D.g);
  nd->last_fast = D.g + 1;
  nd->next_chunk += 1;
  CORO_END(op->co);
}

ncclResult_t chorus_allreduce_node(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  chorus_node *nd = cc->node;
  int n = cc->nranks, me = cc->rank;
  size_t off, len, soff, slen;
  ncclResult_t res;
  if (!op->co) fast_plan(op);
  if (D.fast) return allreduce_fast(op);
  CORO_BEGIN(op->co);
  D.chunk_elems = nd->chunk / op->esize;
  D.nchunks = CHORUS_DIV_UP(op->count, D.chunk_elems);
  for (D.c = 0; D.c < D.nchunks; D.c++) {
    D.g = nd->next_chunk + D.c;
    CORO_AWAIT_RES(op->co, res, stage_free(op));
    len = chunk_len(op, &off);
    stage_copy(op, stage(op, me, D.g), (const char *)op->sendbuff + off * op->esize, len);
    announce(op, POSTED, D.g + 1);
    CORO_AWAIT_RES(op->co, res, all_reached(op, POSTED, D.g + 1));
    len = chunk_len(op, &off);
    if (op->algo == CHORUS_ALGO_ONESHOT) {
      reduce_stages(op, (char *)op->recvbuff + off * op->esize, D.g, 0, len,
                    (const char *)op->sendbuff + off * op->esize, nt_flag(op));
    } else {
      slen = share(op, len, me, &soff);
      reduce_to_stage(op, D.g, soff * op->esize, slen,
                      (const char *)op->sendbuff + (off + soff) * op->esize);
      announce(op, REDUCED, D.g + 1);
      /* Our share goes out while it is still in our cache and before the
       * peers pull it away. */
      chorus_copy((char *)op->recvbuff + (off + soff) * op->esize,
                  stage(op, me, D.g) + soff * op->esize, slen * op->esize, op->nt);
      CORO_AWAIT_RES(op->co, res, all_reached(op, REDUCED, D.g + 1));
      len = chunk_len(op, &off);
      for (int p = 0; p < n; p++) {
        if (p == me) continue;
        slen = share(op, len, p, &soff);
        chorus_copy((char *)op->recvbuff + (off + soff) * op->esize,
                    stage(op, p, D.g) + soff * op->esize, slen * op->esize, op->nt);
      }
    }
  }
  nd->next_chunk += D.nchunks;
  CORO_END(op->co);
}

/*
 * The other collectives on node memory, one staging round per chunk
 * ("oneshot"). Chunks cut the per-rank block (count elements) so that what a
 * rank stages for one chunk fits one stage buffer:
 *   AllGather      stage our chunk; copy every rank's into its output block.
 *   ReduceScatter  stage our chunk of all n blocks; reduce block `rank` of
 *                  every stage straight into our output.
 *   AlltoAll       stage our chunk of all n blocks; copy block `rank` of every
 *                  stage into the output block of its sender.
 *   Broadcast      the root stages; the others copy.
 *   Reduce         all stage; each reduces its share into its own stage; the
 *                  root copies the shares out.
 *   Gather         all stage; the root copies. Scatter: the root stages all
 *                  blocks; each copies its own.
 */

/* Elements per chunk given how many blocks of it one stage holds. */
static size_t chunk_elems_for(const chorus_op *op, int blocks) {
  size_t e = op->cc->node->chunk / ((size_t)blocks * op->esize);
  size_t align = CHORUS_MAX((size_t)1, 64 / op->esize);
  return e > align ? e / align * align : CHORUS_MAX(e, (size_t)1);
}

static int stages_blocks(int func, int n) {
  return func == CHORUS_FUNC_REDUCESCATTER || func == CHORUS_FUNC_ALLTOALL ||
                 func == CHORUS_FUNC_SCATTER
             ? n
             : 1;
}

/* Does this rank put data into its stage for this function? */
static int posts(const chorus_op *op) {
  if (op->func == CHORUS_FUNC_BROADCAST || op->func == CHORUS_FUNC_SCATTER)
    return op->cc->rank == op->root;
  return 1;
}

/* Copies our part of chunk c into the stage. */
static void stage_in(chorus_op *op, size_t off, size_t len) {
  int n = op->cc->nranks, blocks = stages_blocks(op->func, n);
  char *dst = stage(op, op->cc->rank, D.g);
  size_t es = op->esize;
  /* Only reductions carry a PreMulSum operator; copies stay copies. */
  if (blocks == 1) {
    stage_copy(op, dst, (const char *)op->sendbuff + off * es, len);
    return;
  }
  /* Our own block stays in our input (source()), unless PreMulSum must
   * scale it on the way. */
  for (int b = 0; b < n; b++)
    if (b != op->cc->rank || op->red.kind == CHORUS_RED_PREMULSUM)
      stage_copy(op, dst + (size_t)b * D.chunk_elems * es,
                 (const char *)op->sendbuff + ((size_t)b * op->count + off) * es, len);
}

/* A Reduce small enough that the root reduces every stage itself: one
 * synchronisation instead of two (shares, then their copy-out), and the
 * other rank waits for no one. On 2 ranks (2 vCPUs) it ran 2.0-2.6x as
 * fast up to 8 KiB and level at 16 KiB; on 4 ranks sharing 2 vCPUs the
 * root's one reduction of 4 stages measured slower from 8 KiB, and the
 * smaller sizes level, so it stays on 2. */
#define REDUCE_AT_ROOT_MAX (8 * 1024)
static int reduce_at_root(const chorus_op *op) {
  return op->func == CHORUS_FUNC_REDUCE && op->cc->nranks == 2 &&
         op->count * op->esize <= REDUCE_AT_ROOT_MAX;
}

/* Reads what this rank needs from the stages for chunk c. Reduce's share
 * step runs here for every rank; the root's copy-out runs after REDUCED. */
static void stage_out(chorus_op *op, size_t off, size_t len) {
  chorus_coll_comm *cc = op->cc;
  int n = cc->nranks, me = cc->rank, st = op->nt;
  size_t es = op->esize, bytes = len * es;
  char *out = op->recvbuff;
  const char *in = op->sendbuff;
  const void *src[CHORUS_REDUCE_MAX_SRCS];
  /* Block b of the output, and our input's block b, at this chunk. */
#define OUT(b) (out + ((size_t)(b)*op->count + off) * es)
#define IN(b)  (in + ((size_t)(b)*op->count + off) * es)
  /* Rank p's block `b` of this chunk in its stage. */
#define STAGED(p, b) (stage(op, p, D.g) + (size_t)(b)*D.chunk_elems * es)
  switch (op->func) {
  case CHORUS_FUNC_GATHER: /* AllGather's copy-out, at the root only */
    if (me != op->root) break;
    __attribute__((fallthrough));
  case CHORUS_FUNC_ALLGATHER:
    for (int p = 0; p < n; p++)
      if (p != me)
        chorus_copy(OUT(p), STAGED(p, 0), bytes, st);
      else if (in != OUT(me) - off * es)
        chorus_copy(OUT(me), IN(0), bytes, st);
    break;
  case CHORUS_FUNC_REDUCESCATTER:
    for (int p = 0; p < n; p++)
      src[p] = source(op, p, D.g, (size_t)me * D.chunk_elems * es, IN(me));
    chorus_reduce(&op->red, out + off * es, src, n, len, 0, CHORUS_RED_FINALIZE | nt_flag(op));
    break;
  case CHORUS_FUNC_ALLTOALL:
    for (int p = 0; p < n; p++)
      if (p != me)
        chorus_copy(OUT(p), STAGED(p, me), bytes, st);
      else if (in != out)
        chorus_copy(OUT(me), IN(me), bytes, st);
    break;
  case CHORUS_FUNC_BROADCAST:
    if (me != op->root)
      chorus_copy(OUT(0), STAGED(op->root, 0), bytes, st);
    else if (in != out)
      chorus_copy(OUT(0), IN(0), bytes, st);
    break;
  case CHORUS_FUNC_SCATTER:
    if (me != op->root)
      chorus_copy(OUT(0), STAGED(op->root, me), bytes, st);
    else if (out != IN(me) - off * es)
      chorus_copy(OUT(0), IN(me), bytes, st);
    break;
  case CHORUS_FUNC_REDUCE: {
    if (reduce_at_root(op)) { /* the root alone, from every stage */
      if (me == op->root)
        reduce_stages(op, out + off * es, D.g, 0, len, in + off * es, nt_flag(op));
      break;
    }
    size_t soff, slen = share(op, len, me, &soff);
    reduce_to_stage(op, D.g, soff * es, slen, in + (off + soff) * es);
    break;
  }
  default:
    break;
  }
#undef OUT
#undef IN
#undef STAGED
}

/* Whose posts a rank must wait for: everyone, only the root, or nobody. */
static ncclResult_t wait_posted(chorus_op *op, uint64_t target) {
  if (op->func == CHORUS_FUNC_BROADCAST || op->func == CHORUS_FUNC_SCATTER) {
    if (op->cc->rank == op->root) return ncclSuccess;
    return reached(op, op->root, POSTED, target);
  }
  if ((op->func == CHORUS_FUNC_GATHER || reduce_at_root(op)) && op->cc->rank != op->root)
    return ncclSuccess;
  return all_reached(op, POSTED, target);
}

ncclResult_t chorus_coll_node(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  chorus_node *nd = cc->node;
  size_t off, len;
  ncclResult_t res;
  if (!op->co) fast_plan(op);
  if (D.fast) return coll_fast(op);
  CORO_BEGIN(op->co);
  D.chunk_elems = chunk_elems_for(op, stages_blocks(op->func, cc->nranks));
  D.nchunks = CHORUS_DIV_UP(op->count, D.chunk_elems);
  for (D.c = 0; D.c < D.nchunks; D.c++) {
    D.g = nd->next_chunk + D.c;
    /* Every rank moves `posted` (with or without data) so that counters
     * stay equal across ranks; the buffer's call description moves with it,
     * so even a rank that stages nothing waits until the buffer is free. */
    CORO_AWAIT_RES(op->co, res, stage_free(op));
    len = chunk_len(op, &off);
    if (posts(op)) stage_in(op, off, len);
    announce(op, POSTED, D.g + 1);
    CORO_AWAIT_RES(op->co, res, wait_posted(op, D.g + 1));
    len = chunk_len(op, &off);
    stage_out(op, off, len);
    if (op->func == CHORUS_FUNC_REDUCE && !reduce_at_root(op)) {
      announce(op, REDUCED, D.g + 1);
      if (cc->rank == op->root) {
        CORO_AWAIT_RES(op->co, res, all_reached(op, REDUCED, D.g + 1));
        len = chunk_len(op, &off);
        for (int p = 0; p < cc->nranks; p++) {
          size_t soff, slen = share(op, len, p, &soff);
          chorus_copy((char *)op->recvbuff + (off + soff) * op->esize,
                      stage(op, p, D.g) + soff * op->esize, slen * op->esize, op->nt);
        }
      }
    }
  }
  nd->next_chunk += D.nchunks;
  CORO_END(op->co);
}

/*
 * Peer reads (algorithm zerocopy on host memory; chorus_node.peer_read):
 * AllGather, AlltoAll, Broadcast, Gather and Scatter in one copy per byte.
 * Each rank publishes the address of its input with its post; each reads
 * what it needs straight from the peers' inputs into its output (memcpy
 * from a rank of this process, process_vm_readv from another), then says
 * so (REDUCED); a rank whose input others read returns only once they all
 * have. A Gather runs the other way: its root publishes its output and
 * every other rank writes its block there (process_vm_writev), so the
 * n - 1 blocks move at once on as many cores rather than one after
 * another on the root's, which returns once all have written. A
 * Broadcast's root in place, idle otherwise, writes the leading
 * 1/n of every reader's output itself (process_vm_writev) while the
 * readers copy the rest (root_lead): its readers publish their outputs,
 * and return once the root says it is done (REDUCED). No stage holds
 * data: `posted` still moves, one chunk per call, so the counters stay
 * equal across ranks. An AlltoAll in place reads from a copy of its input
 * (its output overwrites blocks the peers still read).
 */

/* Ranks that are threads of one process hand each other their inputs
 * through counters in node memory, which each maps at its own address:
 * ThreadSanitizer cannot see that order, so it is told, on the input's
 * address (the same for both). */
#if defined(__SANITIZE_THREAD__)
#define CHORUS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHORUS_TSAN 1
#endif
#endif
#ifdef CHORUS_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#endif

static void tsan_order(const void *addr, int acquire) {
#ifdef CHORUS_TSAN
  if (acquire)
    __tsan_acquire((void *)(uintptr_t)addr);
  else
    __tsan_release((void *)(uintptr_t)addr);
#else
  (void)addr, (void)acquire;
#endif
}

/* A rank that failed returns while its buffers may still be read, and
 * they are then the application's again: a copy from rank p is good only
 * if p had not failed once it was made. */
static ncclResult_t unless_failed(chorus_op *op, int p) {
  return __atomic_load_n(op->cc->node->rank[p].failed, __ATOMIC_ACQUIRE) ? peer_failed(op, p)
                                                                         : ncclSuccess;
}

/* Copies bytes between local memory and address remote of rank p: into
 * p's memory when `write`, else out of it. */
static ncclResult_t peer_copy(chorus_op *op, int p, void *local, uint64_t remote, size_t bytes,
                              int write) {
  const chorus_node_rank *r = &op->cc->node->rank[p];
  if (r->same_process) {
    void *theirs = (void *)(uintptr_t)remote;
    chorus_copy(write ? theirs : local, write ? local : theirs, bytes, op->nt);
    return unless_failed(op, p);
  }
  const int err = write ? chorus_proc_write(r->pid, remote, local, bytes)
                        : chorus_proc_read(r->pid, local, remote, bytes);
  if (err) {
    CHECK(unless_failed(op, p));
    char me[160];
    chorus_op_describe(op, me, sizeof me);
    return chorus_error(err == ESRCH ? ncclRemoteError : ncclSystemError,
                        "%s failed: %s rank %d's buffer (pid %d) with process_vm_%s: %s", me,
                        write ? "writing" : "reading", p, (int)r->pid, write ? "writev" : "readv",
                        strerror(err));
  }
  return unless_failed(op, p);
}

static ncclResult_t read_peer(chorus_op *op, int p, void *dst, uint64_t src, size_t bytes) {
  return peer_copy(op, p, dst, src, bytes, 0);
}

/* The leading bytes of each reader's output that a Broadcast's root
 * writes itself while the readers copy the rest. In place the root has
 * nothing else to copy, so with a core per rank the n ranks share the
 * copying, 1/n of the buffer per reader each (2 ranks: twice the rate of
 * the readers alone). None out of place (the root copies its own output
 * then), with more ranks than cores, or below 64 KiB (two more waits). */
static size_t root_lead(const chorus_op *op, size_t bytes) {
  const int n = op->cc->nranks;
  if (op->func != CHORUS_FUNC_BROADCAST || op->cc->rank != op->root ||
      op->sendbuff != op->recvbuff || bytes < ((size_t)64 << 10) || n < 2 ||
      op->cc->plan.env.oversubscribed)
    return 0;
  return bytes / (size_t)n / 64 * 64;
}

/* Whose buffers this rank copies from or into (reading = 1), or who
 * copies from or into this rank's (reading = 0): ALL every peer, else the
 * one rank (the root), or NONE. In a rooted call the others copy, the
 * root being the one whose buffer they all use. */
enum { ALL = -1, NONE = -2 };
static int readers(const chorus_op *op, int reading) {
  const int me = op->cc->rank;
  if (op->func != CHORUS_FUNC_BROADCAST && op->func != CHORUS_FUNC_SCATTER &&
      op->func != CHORUS_FUNC_GATHER)
    return ALL;
  if (me == op->root) return reading ? NONE : ALL;
  return reading ? op->root : NONE;
}

/* Waits until each rank of readers(op, reading) moved its counter to
 * D.g + 1. */
static ncclResult_t those_reached(chorus_op *op, int reading, int which) {
  const int r = readers(op, reading);
  if (r == NONE) return ncclSuccess;
  return r == ALL ? all_reached(op, which, D.g + 1) : reached(op, r, which, D.g + 1);
}

/* Rank p's block of this call in our output, and the offset of the block
 * we take in p's input; bytes: one block. */
static void place(const chorus_op *op, int p, size_t bytes, char **out, size_t *in_off) {
  const int me = op->cc->rank;
  switch (op->func) {
  case CHORUS_FUNC_ALLGATHER:
  case CHORUS_FUNC_GATHER:
    *out = (char *)op->recvbuff + (size_t)p * bytes, *in_off = 0;
    break;
  case CHORUS_FUNC_ALLTOALL:
    *out = (char *)op->recvbuff + (size_t)p * bytes, *in_off = (size_t)me * bytes;
    break;
  case CHORUS_FUNC_SCATTER:
    *out = op->recvbuff, *in_off = (size_t)me * bytes;
    break;
  default: /* Broadcast */
    *out = op->recvbuff, *in_off = 0;
    break;
  }
}

ncclResult_t chorus_coll_peer_read(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  chorus_node *nd = cc->node;
  const int n = cc->nranks, me = cc->rank;
  const size_t bytes = op->count * op->esize;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  D.g = nd->next_chunk;
  CORO_AWAIT_RES(op->co, res, stage_free(op)); /* our address slot */
  {
    const void *in = op->sendbuff;
    if (op->func == CHORUS_FUNC_ALLTOALL && op->sendbuff == op->recvbuff && bytes) {
      /* The peers read their blocks from a copy, laid out as the input;
       * this rank's own block stays where it is. */
      if (!chorus_op_scratch(op, (size_t)n * bytes))
        return chorus_error(ncclSystemError, "out of memory for an AlltoAll in place");
      chorus_coll_peers_blocks(op, op->scratch);
      in = op->scratch;
    }
    const uint64_t slot = D.g % (uint64_t)nd->nbuf;
    /* A Broadcast's reader publishes its output (no one reads its input),
     * where the root may write; a Gather's root its output, where the
     * others write. */
    const int out = (op->func == CHORUS_FUNC_BROADCAST && me != op->root) ||
                    (op->func == CHORUS_FUNC_GATHER && me == op->root);
    nd->rank[me].addr[slot] = (uint64_t)(uintptr_t)(out ? op->recvbuff : in);
    nd->rank[me].lead[slot] = root_lead(op, bytes);
    tsan_order(out ? op->recvbuff : in, 0);
  }
  announce(op, POSTED, D.g + 1);
  CORO_AWAIT_RES(op->co, res, those_reached(op, 1, POSTED)); /* whose inputs we read */
  {
    const int from = readers(op, 1);
    const uint64_t slot = D.g % (uint64_t)nd->nbuf;
    if (op->func == CHORUS_FUNC_GATHER && from >= 0) { /* our block into the root's output */
      const uint64_t at = nd->rank[from].addr[slot];
      tsan_order((const void *)(uintptr_t)at, 1);
      CHECK(
          peer_copy(op, from, (void *)(uintptr_t)op->sendbuff, at + (size_t)me * bytes, bytes, 1));
      tsan_order((const void *)(uintptr_t)at, 0);
    }
    for (int p = 0; p < n && from != NONE && op->func != CHORUS_FUNC_GATHER; p++) {
      char *out;
      size_t in_off;
      if (from >= 0 && p != from) continue;
      place(op, p, bytes, &out, &in_off);
      if (p == me) continue;
      const uint64_t at = nd->rank[p].addr[slot];
      /* What a Broadcast's root writes itself, it leaves out. */
      const size_t lead = op->func == CHORUS_FUNC_BROADCAST ? nd->rank[p].lead[slot] : 0;
      tsan_order((const void *)(uintptr_t)at, 1);
      CHECK(read_peer(op, p, out + lead, at + in_off + lead, bytes - lead));
      tsan_order((const void *)(uintptr_t)at, 0);
    }
    /* Our own block, where our output holds one: everywhere but at the
     * ranks of a rooted call that are not its root. */
    const int rooted = op->func == CHORUS_FUNC_BROADCAST || op->func == CHORUS_FUNC_SCATTER ||
                       op->func == CHORUS_FUNC_GATHER;
    if (!rooted || me == op->root) {
      char *out;
      size_t in_off;
      place(op, me, bytes, &out, &in_off);
      const char *own = op->sendbuff; /* not the copy: its own block is not in it */
      if (out != own + in_off && bytes) chorus_copy(out, own + in_off, bytes, op->nt);
    }
  }
  if (nd->rank[me].lead[D.g % (uint64_t)nd->nbuf]) {               /* a Broadcast's root helps */
    CORO_AWAIT_RES(op->co, res, all_reached(op, POSTED, D.g + 1)); /* the readers' outputs */
    const uint64_t slot = D.g % (uint64_t)nd->nbuf;
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      const uint64_t at = nd->rank[p].addr[slot];
      tsan_order((const void *)(uintptr_t)at, 1); /* the reader is done with it */
      CHECK(peer_copy(op, p, (void *)(uintptr_t)op->sendbuff, at, nd->rank[me].lead[slot], 1));
      tsan_order((const void *)(uintptr_t)at, 0);
    }
  }
  announce(op, REDUCED, D.g + 1);                             /* done with the peers' inputs */
  CORO_AWAIT_RES(op->co, res, those_reached(op, 0, REDUCED)); /* those who read ours */
  if (op->func == CHORUS_FUNC_BROADCAST && me != op->root &&
      nd->rank[op->root].lead[D.g % (uint64_t)nd->nbuf]) /* the root's writes into ours */
    CORO_AWAIT_RES(op->co, res, reached(op, op->root, REDUCED, D.g + 1));
  tsan_order((const void *)(uintptr_t)nd->rank[me].addr[D.g % (uint64_t)nd->nbuf], 1);
  nd->next_chunk += 1;
  CORO_END(op->co);
}

/*
 * Reductions by peer reads (zerocopy: AllReduce, ReduceScatter). Each
 * rank reduces its share (AllReduce: 1/n of the buffer; ReduceScatter: its
 * block) of every rank's input straight into its output, in rank order,
 * reading a peer that is a thread of this process in place and copying one
 * that is another process piece by piece (process_vm_readv) into a scratch
 * that stays in cache; then, for AllReduce, it copies every peer's
 * finished share out of that peer's output. The call takes two chunk
 * numbers: at g its address slot holds its input and output, posted(g+1)
 * says they are there and reduced(g+1) that its share is finished; posted
 * (g+2) that it read all it needed from the peers, so a rank returns (and
 * its buffers are the application's again) once every peer posted g+2.
 */
#define PEER_PIECE (64u << 10) /* bytes of one peer read: a few fit in L2 */

/* Reduces len elements at byte offset `at` of every rank's input into dst. */
static ncclResult_t reduce_from_peers(chorus_op *op, char *dst, size_t at, size_t len) {
  const chorus_node *nd = op->cc->node;
  const int n = op->cc->nranks, me = op->cc->rank;
  const uint64_t slot = D.g % (uint64_t)nd->nbuf;
  const size_t es = op->esize, step = PEER_PIECE / es;
  for (size_t done = 0; done < len; done += step) {
    const size_t k = CHORUS_MIN(step, len - done), off = at + done * es;
    const void *src[CHORUS_REDUCE_MAX_SRCS];
    char *tmp = op->scratch;
    for (int p = 0; p < n; p++) {
      const uint64_t a = nd->rank[p].addr[slot] + off;
      if (p == me) {
        src[p] = (const char *)op->sendbuff + off;
      } else if (nd->rank[p].same_process) {
        src[p] = (const void *)(uintptr_t)a;
      } else {
        CHECK(read_peer(op, p, tmp, a, k * es));
        src[p] = tmp;
        tmp += PEER_PIECE;
      }
    }
    chorus_reduce(&op->red, dst + done * es, src, n, k, 0, CHORUS_RED_FINALIZE | nt_flag(op));
  }
  for (int p = 0; p < n; p++) /* read in place */
    if (p != me && nd->rank[p].same_process) CHECK(unless_failed(op, p));
  return ncclSuccess;
}

/* Reads a peer's finished share into our output. Past the cache, a peer
 * in another process is read piece by piece into the scratch and streamed
 * out from there: process_vm_readv's own stores would read every output
 * line in before writing it. */
static ncclResult_t read_share(chorus_op *op, int p, char *dst, uint64_t src, size_t bytes) {
  if (!op->nt || op->cc->node->rank[p].same_process) return read_peer(op, p, dst, src, bytes);
  for (size_t done = 0; done < bytes; done += PEER_PIECE) {
    const size_t k = CHORUS_MIN((size_t)PEER_PIECE, bytes - done);
    CHECK(read_peer(op, p, op->scratch, src + done, k));
    chorus_copy(dst + done, op->scratch, k, 1);
  }
  return ncclSuccess;
}

/* TSan: every peer's input (phase 1) or output (phase 2) as read now. */
static void tsan_peers(const chorus_op *op, int out, int acquire) {
  const chorus_node *nd = op->cc->node;
  const uint64_t slot = D.g % (uint64_t)nd->nbuf;
  for (int p = 0; p < op->cc->nranks; p++)
    if (p != op->cc->rank)
      tsan_order((const void *)(uintptr_t)(out ? nd->rank[p].addr_out : nd->rank[p].addr)[slot],
                 acquire);
}

ncclResult_t chorus_coll_peer_reduce(chorus_op *op) {
  chorus_coll_comm *cc = op->cc;
  chorus_node *nd = cc->node;
  const int n = cc->nranks, me = cc->rank;
  const size_t es = op->esize;
  const int allreduce = op->func == CHORUS_FUNC_ALLREDUCE;
  size_t soff, slen;
  ncclResult_t res;
  CORO_BEGIN(op->co);
  D.g = nd->next_chunk;
  CORO_AWAIT_RES(op->co, res, stage_free(op)); /* our address slot */
  {
    int remote = 0;
    for (int p = 0; p < n; p++) remote += p != me && !nd->rank[p].same_process;
    if (remote && op->count && !chorus_op_scratch(op, (size_t)remote * PEER_PIECE))
      return chorus_error(ncclSystemError, "out of memory for a peer-read reduction's pieces");
    const uint64_t slot = D.g % (uint64_t)nd->nbuf;
    nd->rank[me].addr[slot] = (uint64_t)(uintptr_t)op->sendbuff;
    nd->rank[me].addr_out[slot] = (uint64_t)(uintptr_t)op->recvbuff;
    tsan_order(op->sendbuff, 0);
  }
  announce(op, POSTED, D.g + 1);
  CORO_AWAIT_RES(op->co, res, all_reached(op, POSTED, D.g + 1));
  tsan_peers(op, 0, 1);
  if (allreduce) {
    slen = share(op, op->count, me, &soff);
    CHECK(reduce_from_peers(op, (char *)op->recvbuff + soff * es, soff * es, slen));
  } else {
    CHECK(reduce_from_peers(op, op->recvbuff, (size_t)me * op->count * es, op->count));
  }
  tsan_peers(op, 0, 0);
  tsan_order(op->recvbuff, 0);
  announce(op, REDUCED, D.g + 1);
  if (allreduce) {
    CORO_AWAIT_RES(op->co, res, all_reached(op, REDUCED, D.g + 1));
    /* In place, our output's peer shares are our input's, which the peers
     * read until they said reduced. */
    tsan_order(op->sendbuff, 1);
    tsan_peers(op, 1, 1);
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      slen = share(op, op->count, p, &soff);
      const uint64_t at = nd->rank[p].addr_out[D.g % (uint64_t)nd->nbuf] + soff * es;
      CHECK(read_share(op, p, (char *)op->recvbuff + soff * es, at, slen * es));
    }
    tsan_peers(op, 1, 0);
  }
  D.g += 1;
  CORO_AWAIT_RES(op->co, res, stage_free(op));
  announce(op, POSTED, D.g + 1); /* done reading the peers' buffers */
  CORO_AWAIT_RES(op->co, res, all_reached(op, POSTED, D.g + 1));
  tsan_order(op->sendbuff, 1);
  tsan_order(op->recvbuff, 1);
  nd->next_chunk += 2;
  CORO_END(op->co);
}
