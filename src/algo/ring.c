/*
 * ring.c - see ring.h.
 */
#include "algo/ring.h"

#include "util/misc.h"

void chorus_ring_plan_init(chorus_ring_plan *p, size_t count, int nranks, size_t seg_max_elems,
                           size_t align_elems) {
  if (align_elems == 0) align_elems = 1;
  if (seg_max_elems < align_elems) seg_max_elems = align_elems;
  p->count = count;
  p->nranks = nranks;
  p->align = align_elems;
  p->seg_max = seg_max_elems / align_elems * align_elems;
  size_t per_round = p->seg_max * (size_t)nranks;
  p->nrounds = CHORUS_DIV_UP(count, per_round);
}

void chorus_ring_segment(const chorus_ring_plan *p, size_t round, int seg, size_t *off,
                         size_t *len) {
  size_t per_round = p->seg_max * (size_t)p->nranks;
  size_t base = round * per_round;
  size_t rem = p->count > base ? p->count - base : 0;
  if (rem > per_round) rem = per_round;
  size_t per = CHORUS_ALIGN_UP(CHORUS_DIV_UP(rem, (size_t)p->nranks), p->align);
  if (per > p->seg_max) per = p->seg_max;
  size_t start = (size_t)seg * per;
  *off = base + (start < rem ? start : rem);
  *len = start < rem ? CHORUS_MIN(per, rem - start) : 0;
}
