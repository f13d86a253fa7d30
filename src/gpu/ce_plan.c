/*
 * ce_plan.c - the copy-engine programs (ce.h), pure: the steps that move
 * Send/Recv pairs, Broadcasts, AllGathers and AlltoAlls (which calls go is
 * the planner's: plan/group.c).
 */
#include <stdint.h>

#include "gpu/ce.h"
#include "util/misc.h"

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
