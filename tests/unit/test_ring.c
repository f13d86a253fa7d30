/*
 * test_ring.c - the ring partition covers every element exactly once, in
 * order, within slot capacity, for many rank counts and sizes; the step
 * tables send and receive the segments the schedule expects.
 */
#include <stdlib.h>

#include "algo/ring.h"
#include "unit.h"

static void partition_covers_everything(void) {
  static const size_t counts[] = {0, 1, 2, 7, 63, 64, 65, 1000, 4097, 65536, 100003};
  static const size_t segs[] = {1, 3, 64, 1000};
  for (int n = 1; n <= 9; n++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
      for (size_t s = 0; s < sizeof segs / sizeof segs[0]; s++)
        for (size_t align = 1; align <= 16; align *= 4) {
          chorus_ring_plan p;
          chorus_ring_plan_init(&p, counts[c], n, segs[s], align);
          size_t next = 0;
          for (size_t r = 0; r < p.nrounds; r++)
            for (int g = 0; g < n; g++) {
              size_t off, len;
              chorus_ring_segment(&p, r, g, &off, &len);
              EXPECT(len <= p.seg_max);
              if (len) EXPECT_EQ_INT(off, next);
              next += len;
            }
          EXPECT_EQ_INT(next, counts[c]);
        }
}

static void steps_match_neighbours(void) {
  /* What position p receives at step k must be what p-1 sent at step k-1
   * (reduce-scatter) / forwarded (all-gather). */
  for (int n = 2; n <= 9; n++)
    for (int p = 0; p < n; p++) {
      int prev = (p + n - 1) % n;
      for (int k = 1; k < n; k++) {
        EXPECT_EQ_INT(chorus_ring_rs_seg(p, k, n), chorus_ring_rs_seg(prev, k - 1, n));
        if (k >= 2) EXPECT_EQ_INT(chorus_ring_ag_seg(p, k, n), chorus_ring_ag_seg(prev, k - 1, n));
      }
      /* After reduce-scatter, p owns segment p+1, which its successor
       * receives first in the all-gather. */
      EXPECT_EQ_INT(chorus_ring_rs_seg(p, n - 1, n), (p + 1) % n);
      EXPECT_EQ_INT(chorus_ring_ag_seg((p + 1) % n, 1, n), (p + 1) % n);
    }
}

int main(void) {
  RUN(partition_covers_everything);
  RUN(steps_match_neighbours);
  return unit_report();
}
