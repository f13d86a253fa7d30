/*
 * ce_plan.c - the copy-engine programs (ce.h), pure: which Send/Recv pair
 * up and which collectives go, and the steps that move pairs, Broadcasts,
 * AllGathers and AlltoAlls.
 */
#include <stdint.h>

#include "gpu/ce.h"
#include "util/misc.h"

/* The index of the k-th (from 0) call of c[] that is a `send` of rank
 * `rank` with peer `peer` in communicator `key`, moving bytes; -1 if none. */
static long kth(const chorus_gpu_ce_call *c, size_t n, uint64_t key, int rank, int peer, int send,
                size_t k) {
  for (size_t i = 0; i < n; i++)
    if (c[i].key == key && c[i].rank == rank && c[i].peer == peer && c[i].send == send &&
        c[i].bytes && k-- == 0)
      return (long)i;
  return -1;
}

size_t chorus_gpu_ce_match(const chorus_gpu_ce_call *c, size_t n, size_t min_bytes, long *pair) {
  size_t pairs = 0;
  for (size_t i = 0; i < n; i++) pair[i] = -1;
  if (!min_bytes) return 0;
  for (size_t i = 0; i < n; i++) {
    const chorus_gpu_ce_call *s = &c[i];
    if (!s->send || !s->key || !s->bytes || s->peer == s->rank) continue;
    /* This Send's number among its rank's sends to that peer (calls of 0
     * bytes match nothing, as in the kernels' rounds), and the receive of
     * the same number there. */
    size_t k = 0;
    for (size_t j = 0; j < i; j++)
      k += c[j].key == s->key && c[j].rank == s->rank && c[j].peer == s->peer && c[j].send &&
           c[j].bytes;
    const long r = kth(c, n, s->key, s->peer, s->rank, 0, k);
    if (r < 0 || c[r].bytes != s->bytes || s->bytes < min_bytes) continue;
    /* Copies run at once, in no order among themselves: a destination that
     * another transfer reads, or a source that another writes, is left to
     * the kernels (an in-place ring shift, say). */
    int clash = 0;
    for (size_t j = 0; j < n && !clash; j++)
      clash = c[j].send ? chorus_ranges_meet(c[r].buf, c[r].bytes, c[j].buf, c[j].bytes)
                        : chorus_ranges_meet(s->buf, s->bytes, c[j].buf, c[j].bytes);
    if (clash) continue;
    pair[i] = r;
    pair[r] = (long)i;
    pairs++;
  }
  return pairs;
}

size_t chorus_gpu_ce_plan_pairs(const chorus_gpu_ce_call *c, size_t n, const long *pair,
                                chorus_gpu_ce_step *out) {
  size_t k = 0;
  for (int phase = 0; phase < 3; phase++)
    for (size_t i = 0; i < n; i++) {
      if (pair[i] < 0 || !c[i].send) continue;
      const chorus_gpu_ce_call *s = &c[i], *r = &c[pair[i]];
      if (phase == 0)
        out[k++] = (chorus_gpu_ce_step){s->stream, r->stream, NULL, NULL, 0};
      else if (phase == 1)
        out[k++] = (chorus_gpu_ce_step){s->stream, -1, (void *)r->buf, s->buf, s->bytes};
      else
        out[k++] = (chorus_gpu_ce_step){r->stream, s->stream, NULL, NULL, 0};
    }
  return k;
}

/* Appends a step (out NULL: counts it). */
static void put(chorus_gpu_ce_step *out, size_t *k, int on, int of, void *dst, const void *src,
                size_t bytes) {
  if (out) out[*k] = (chorus_gpu_ce_step){on, of, dst, src, bytes};
  (*k)++;
}

size_t chorus_gpu_ce_plan_bcast(const chorus_gpu_ce_bcast *b, chorus_gpu_ce_step *out) {
  const int n = b->nranks;
  size_t k = 0;
  if (n < 1 || !b->bytes) return 0;
  int order[CHORUS_KERN_MAX_RANKS]; /* the chain: root first */
  for (int h = 0; h < n; h++) order[h] = (b->root + h) % n;
  const int root = order[0];
  /* Each hop's copies run on the receiver's stream (the copy engine pulls
   * as fast as it pushes). The first receiver waits for the root's stream
   * as it is before the root's own copy is queued there, so that the two
   * copies run at the same time (2xH200, 1 GiB: waiting after it cost the
   * whole local copy, 3228 us against 2724 in place). */
  if (n > 1) put(out, &k, b->stream[order[1]], b->stream[root], NULL, NULL, 0);
  if (b->recv[root] != b->send) put(out, &k, b->stream[root], -1, b->recv[root], b->send, b->bytes);
  const size_t chunk = n > 2 && b->chunk ? b->chunk : b->bytes;
  for (size_t off = 0; off < b->bytes; off += chunk) {
    const size_t len = b->bytes - off < chunk ? b->bytes - off : chunk;
    for (int h = 0; h + 1 < n; h++) {
      const int from = order[h], to = order[h + 1];
      /* a hop's copy of a chunk after the previous hop's copy of it (the
       * last step on the sender's stream so far) */
      if (h > 0) put(out, &k, b->stream[to], b->stream[from], NULL, NULL, 0);
      const char *src = h == 0 ? (const char *)b->send : (const char *)b->recv[from];
      put(out, &k, b->stream[to], -1, (char *)b->recv[to] + off, src + off, len);
    }
  }
  /* A sender's stream goes on once its buffer has been read. */
  for (int h = 0; h + 1 < n; h++)
    put(out, &k, b->stream[order[h]], b->stream[order[h + 1]], NULL, NULL, 0);
  return k;
}

/* Every stream of x waits for what every other holds so far: rank 0's
 * waits for the others', theirs for rank 0's (2 (n - 1) joins where each
 * waiting for each would take n (n - 1)). */
static void barrier(const chorus_gpu_ce_xchg *x, chorus_gpu_ce_step *out, size_t *k) {
  for (int p = 1; p < x->nranks; p++) put(out, k, x->stream[0], x->stream[p], NULL, NULL, 0);
  for (int p = 1; p < x->nranks; p++) put(out, k, x->stream[p], x->stream[0], NULL, NULL, 0);
}

/* Where rank r's block p comes from (rank p's send buffer: all of it for
 * an AllGather, its block r for an AlltoAll) and goes to. */
static const char *block_src(const chorus_gpu_ce_xchg *x, int r, int p) {
  return (const char *)x->send[p] + (x->alltoall ? (size_t)r * x->block : 0);
}
static char *block_dst(const chorus_gpu_ce_xchg *x, int r, int p) {
  return (char *)x->recv[r] + (size_t)p * x->block;
}

size_t chorus_gpu_ce_plan_xchg(const chorus_gpu_ce_xchg *x, chorus_gpu_ce_step *out) {
  const int n = x->nranks;
  size_t k = 0;
  if (n < 1 || !x->block) return 0;
  barrier(x, out, &k); /* the inputs are ready */
  for (int r = 0; r < n; r++) {
    /* The own block (none in place) on the side stream, if any, at the
     * same time as the pulls; the rank's stream waits for it after them. */
    const int side =
        block_src(x, r, r) != block_dst(x, r, r) && x->side[r] >= 0 && x->side[r] != x->stream[r];
    if (side) put(out, &k, x->side[r], x->stream[r], NULL, NULL, 0);
    for (int d = 0; d < n; d++) {
      const int p = (r + d) % n;
      const char *src = block_src(x, r, p);
      char *dst = block_dst(x, r, p);
      if (dst != src)
        put(out, &k, d == 0 && side ? x->side[r] : x->stream[r], -1, dst, src, x->block);
    }
    if (side) put(out, &k, x->stream[r], x->side[r], NULL, NULL, 0);
  }
  barrier(x, out, &k); /* the inputs have been read */
  return k;
}

/* ---- which collectives -------------------------------------------------- */

size_t chorus_gpu_ce_coll_min(const chorus_gpu_tune *t, int func, int nranks) {
  if (nranks < 2) return 0;
  switch (func) {
  case CHORUS_FUNC_BROADCAST:
    return t->bcast_ce_bytes;
  case CHORUS_FUNC_ALLGATHER:
  case CHORUS_FUNC_ALLTOALL:
    return t->xchg_ce_bytes;
  default:
    return 0;
  }
}

int chorus_gpu_ce_coll_fits(const chorus_gpu_tune *t, int func, int nranks, size_t bytes,
                            int in_place) {
  const size_t min = chorus_gpu_ce_coll_min(t, func, nranks);
  const size_t larger = func == CHORUS_FUNC_BROADCAST ? bytes : bytes * (size_t)nranks;
  return min && larger >= min && nranks <= CHORUS_KERN_MAX_RANKS && !t->algo_named[func] &&
         !(func == CHORUS_FUNC_ALLTOALL && in_place);
}

size_t chorus_gpu_ce_coll_leads(const uint8_t *cand, const uint64_t *desc, const int *nranks,
                                const int *match, size_t n, long *lead) {
  size_t calls = 0;
  for (size_t i = 0; i < n; i++) {
    lead[i] = -1;
    if (!cand[i] || nranks[i] < 1 || nranks[i] > CHORUS_KERN_MAX_RANKS) continue;
    long lo = (long)n, hi = -1;
    int ok = 1;
    for (int p = 0; p < nranks[i] && ok; p++) {
      const int j = match[i * CHORUS_KERN_MAX_RANKS + (size_t)p];
      ok = j >= 0 && (size_t)j < n && cand[j] && desc[j] == desc[i];
      if (ok && j < lo) lo = j;
      if (ok && j > hi) hi = j;
    }
    if (!ok || hi - lo + 1 != nranks[i]) continue;
    lead[i] = lo;
    calls += (long)i == lo;
  }
  return calls;
}
