/*
 * ring.h - the arithmetic of ring schedules, with no data movement.
 *
 * A ring all-reduce over n ranks processes the buffer in rounds. Each round
 * covers up to n * seg_max elements, cut into n segments (one per ring
 * position) of equal size rounded up to `align` elements; the last round
 * shrinks its segments so that the remainder is spread evenly (trailing
 * segments may be empty). Every rank computes the same partition, so message
 * sizes agree without being sent.
 *
 * In reduce-scatter step k (0..n-1), position p sends segment rs_seg(p, k)
 * (k = 0: its own input; later: the partial sum it just received and
 * extended) and, for k >= 1, receives rs_seg(p, k). After step n-1 it holds
 * the full reduction of segment rs_seg(p, n-1) = p + 1. In all-gather step
 * k (1..n-1) it receives ag_seg(p, k) and forwards it unless k == n-1.
 */
#ifndef CHORUS_ALGO_RING_H
#define CHORUS_ALGO_RING_H

#include <stddef.h>

typedef struct chorus_ring_plan {
  size_t count;
  int nranks;
  size_t seg_max; /* elements per segment, a multiple of align */
  size_t align;
  size_t nrounds;
} chorus_ring_plan;

/* seg_max_elems: most elements one message may carry (slot capacity). */
void chorus_ring_plan_init(chorus_ring_plan *p, size_t count, int nranks, size_t seg_max_elems,
                           size_t align_elems);
/* Offset and length (elements) of segment seg of round `round`. */
void chorus_ring_segment(const chorus_ring_plan *p, size_t round, int seg, size_t *off,
                         size_t *len);

static inline int chorus_ring_rs_seg(int pos, int step, int n) {
  return ((pos - step) % n + n) % n;
}
static inline int chorus_ring_ag_seg(int pos, int step, int n) {
  return ((pos + 1 - step) % n + n) % n;
}

#endif
