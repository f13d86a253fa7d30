/*
 * test_bufcache.c - util/bufcache keeps large buffers between uses.
 *
 * Checked against the allocator's own counters (util/alloc.h): a small
 * buffer is not kept; a large one given back comes out again for any
 * size it holds (the smallest that fits), a larger request maps a new
 * one, a third large buffer evicts the smallest kept, and _free gives
 * every byte back.
 */
#include <string.h>

#include "unit.h"
#include "util/alloc.h"
#include "util/bufcache.h"

#define MIB ((size_t)1 << 20)

static int64_t held(void) {
  return chorus_alloc_bytes(CHORUS_MEM_HOST);
}

static void small_not_kept(void) {
  chorus_bufcache c;
  chorus_bufcache_init(&c);
  const int64_t base = held();
  size_t got = 0;
  void *p = chorus_bufcache_get(&c, 4096, &got);
  REQUIRE(p);
  EXPECT(got == 4096);
  chorus_bufcache_put(&c, p, got);
  EXPECT(held() == base); /* gone back at once */
  void *z = chorus_bufcache_get(&c, 0, &got);
  REQUIRE(z);
  EXPECT(got == 1);
  chorus_bufcache_put(&c, z, got);
  chorus_bufcache_free(&c);
  EXPECT(held() == base);
}

static void large_kept_and_reused(void) {
  chorus_bufcache c;
  chorus_bufcache_init(&c);
  const int64_t base = held();
  size_t got = 0, got2 = 0;
  char *p = chorus_bufcache_get(&c, 8 * MIB, &got);
  REQUIRE(p);
  EXPECT(got == 8 * MIB);
  memset(p, 0x5a, got); /* all of it is usable */
  chorus_bufcache_put(&c, p, got);
  EXPECT(held() > base + (int64_t)(8 * MIB) - 1);    /* kept */
  char *q = chorus_bufcache_get(&c, 2 * MIB, &got2); /* fits in the kept one */
  EXPECT(q == p);
  EXPECT(got2 == 8 * MIB);
  char *r = chorus_bufcache_get(&c, 16 * MIB, &got); /* nothing kept: a new one */
  REQUIRE(r);
  EXPECT(r != p);
  EXPECT(got == 16 * MIB);
  chorus_bufcache_put(&c, q, got2);
  chorus_bufcache_put(&c, r, got);
  /* Both kept; a request takes the smallest that fits. */
  char *s = chorus_bufcache_get(&c, 3 * MIB, &got);
  EXPECT(s == p);
  EXPECT(got == 8 * MIB);
  chorus_bufcache_put(&c, s, got);
  chorus_bufcache_free(&c);
  EXPECT(held() == base);
}

static int64_t blocks(void) {
  return chorus_alloc_blocks(CHORUS_MEM_HOST);
}

static void third_evicts_smallest(void) {
  chorus_bufcache c;
  chorus_bufcache_init(&c);
  const int64_t base = blocks();
  size_t g1, g2, g3, g;
  void *a = chorus_bufcache_get(&c, 2 * MIB, &g1);
  void *b = chorus_bufcache_get(&c, 4 * MIB, &g2);
  void *d = chorus_bufcache_get(&c, 6 * MIB, &g3);
  REQUIRE(a && b && d);
  chorus_bufcache_put(&c, a, g1);
  chorus_bufcache_put(&c, b, g2);
  chorus_bufcache_put(&c, d, g3); /* evicts a, the smallest */
  EXPECT(blocks() == base + 2);
  void *x = chorus_bufcache_get(&c, 1 * MIB, &g);
  EXPECT(x == b); /* the smallest kept now */
  void *y = chorus_bufcache_get(&c, 1 * MIB, &g3);
  EXPECT(y == d);
  EXPECT(blocks() == base + 2); /* both lent, none new */
  chorus_bufcache_put(&c, x, g);
  chorus_bufcache_put(&c, y, g3);
  void *e = chorus_bufcache_get(&c, 7 * MIB, &g1); /* neither fits: a new one */
  REQUIRE(e);
  EXPECT(blocks() == base + 3);
  chorus_bufcache_put(&c, e, g1); /* evicts b (4 MiB) */
  EXPECT(blocks() == base + 2);
  void *f = chorus_bufcache_get(&c, 5 * MIB, &g2);
  EXPECT(f == d);
  chorus_bufcache_put(&c, f, g2);
  /* One smaller than every kept block is dropped, not kept. */
  void *h = chorus_bufcache_get(&c, 2 * MIB, &g); /* the 6 MiB one */
  EXPECT(h == d);
  void *k = chorus_bufcache_get(&c, 2 * MIB, &g2); /* the 7 MiB one */
  EXPECT(k == e);
  void *m = chorus_bufcache_get(&c, 2 * MIB, &g3); /* none left: new */
  REQUIRE(m);
  chorus_bufcache_put(&c, h, g);
  chorus_bufcache_put(&c, k, g2);
  chorus_bufcache_put(&c, m, g3);
  EXPECT(blocks() == base + 2);
  void *n = chorus_bufcache_get(&c, 6 * MIB, &g);
  EXPECT(n == d);
  chorus_bufcache_put(&c, n, g);
  chorus_bufcache_free(&c);
  EXPECT(blocks() == base);
}

int main(void) {
  RUN(small_not_kept);
  RUN(large_kept_and_reused);
  RUN(third_evicts_smallest);
  return unit_report();
}
