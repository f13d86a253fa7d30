/*
 * test_copy.c - chorus_copy (host/copy.h): plain and non-temporal copies give
 * the source bytes exactly, at every alignment of source and destination
 * and across the head, the 64-byte body and the tail, and write nothing
 * outside the destination; the store tuner measures both kinds, then keeps
 * the cheaper, tries the other now and then, and is not fooled by one
 * preempted write.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/copy.h"
#include "unit.h"

#define GUARD 128

static void test_alignments(void) {
  static const size_t lens[] = {0, 1, 15, 63, 64, 65, 127, 4095, 4096, 4097, 70001};
  size_t max = 70001 + 2 * GUARD + 64;
  unsigned char *src = malloc(max), *dst = malloc(max), *want = malloc(max);
  REQUIRE(src && dst && want);
  for (size_t i = 0; i < max; i++) src[i] = (unsigned char)(i * 131u + 7u);
  int bad = 0;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (size_t so = 0; so < 64; so += 7)
      for (size_t dofs = 0; dofs < 64; dofs += 5)
        for (int nt = 0; nt < 2; nt++) {
          size_t len = lens[li];
          memset(dst, 0xA5, max);
          memcpy(want, dst, max);
          memcpy(want + GUARD + dofs, src + so, len);
          chorus_copy(dst + GUARD + dofs, src + so, len, nt);
          if (memcmp(dst, want, max) != 0 && bad++ < 5)
            fprintf(stderr, "  copy len=%zu src+%zu dst+%zu nt=%d differs\n", len, so, dofs, nt);
        }
  EXPECT(bad == 0);
  free(src), free(dst), free(want);
}

/* The body alone (no fence), then one fence: the same bytes. */
static void test_nofence_blocks(void) {
  size_t n = 1 << 20, blk = 8192;
  unsigned char *src = malloc(n), *dst = calloc(1, n);
  REQUIRE(src && dst);
  for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(i ^ (i >> 8));
  for (size_t o = 0; o < n; o += blk) chorus_copy_nt_nofence(dst + o, src + o, blk);
  chorus_copy_fence();
  EXPECT(memcmp(dst, src, n) == 0);
  free(src), free(dst);
}

static void test_tuner(void) {
  const size_t big = 1 << 20;
  chorus_store_tuner t;
  /* Forced: always the forced kind, nothing learned. */
  chorus_store_tuner_init(&t, 1);
  EXPECT_EQ_INT(chorus_store_pick(&t, big), 1);
  chorus_store_learn(&t, 1, big, 1000);
  EXPECT(t.ns_per_kib[1] == 0);
  /* Adaptive: small writes stay normal and teach nothing. */
  chorus_store_tuner_init(&t, -1);
  EXPECT_EQ_INT(chorus_store_pick(&t, CHORUS_TUNED_MIN_BYTES - 1), 0);
  chorus_store_learn(&t, 0, CHORUS_TUNED_MIN_BYTES - 1, 1000);
  EXPECT(t.ns_per_kib[0] == 0);
  /* Each kind is measured once: normal first, then streaming. */
  EXPECT_EQ_INT(chorus_store_pick(&t, big), 0);
  chorus_store_learn(&t, 0, big, 100000); /* 97.7 ns/KiB */
  EXPECT_EQ_INT(chorus_store_pick(&t, big), 1);
  chorus_store_learn(&t, 1, big, 50000); /* streaming is cheaper */
  /* Then the cheaper kind, except every 16th pick explores the other. */
  int streams = 0;
  for (int i = 0; i < 32; i++) streams += chorus_store_pick(&t, big);
  EXPECT_EQ_INT(streams, 30);
  /* One write cut by preemption (1000x slower) moves the average at most
   * fourfold, so streaming stays the choice after it. */
  double before = t.ns_per_kib[1];
  chorus_store_learn(&t, 1, big, 50000000);
  EXPECT(t.ns_per_kib[1] <= 0.75 * before + 0.25 * 4 * before + 1e-9);
  EXPECT(t.ns_per_kib[1] < t.ns_per_kib[0]);
  /* When streaming really gets slower, the choice moves back. */
  for (int i = 0; i < 8; i++) chorus_store_learn(&t, 1, big, 400000);
  int normals = 0;
  for (int i = 0; i < 32; i++) normals += chorus_store_pick(&t, big) == 0;
  EXPECT_EQ_INT(normals, 30);
}

int main(void) {
  RUN(test_alignments);
  RUN(test_nofence_blocks);
  RUN(test_tuner);
  return unit_report();
}
