/*
 * copy.h - copies into user buffers.
 *
 * A collective over a buffer bigger than the caches writes output that
 * nobody reads again soon. Normal stores first read every destination line
 * into the cache (a third memory stream) and then evict it; streaming
 * (non-temporal) stores write whole lines straight to memory. On the 2-core
 * machine of docs/PERFORMANCE.md a 64 MiB copy runs at 8 GB/s with memcpy
 * and 15 GB/s with non-temporal stores. Schedules use them only for what they write
 * into the caller's output of a large call (op->nt); stage buffers and
 * slots are reused at once and stay cached.
 */
#ifndef CHORUS_HOST_COPY_H
#define CHORUS_HOST_COPY_H

#include <stddef.h>
#include <stdint.h>

/* memcpy, with non-temporal stores when `nt` is set and the CPU has them.
 * Returns after the stores are ordered before any later store (a flag
 * published after it is seen after the data). Regions must not overlap. */
void chorus_copy(void *dst, const void *src, size_t bytes, int nt);

/* The non-temporal part alone, without the closing fence: for callers that
 * copy many blocks and fence once (chorus_copy_fence). */
void chorus_copy_nt_nofence(void *dst, const void *src, size_t bytes);
void chorus_copy_fence(void);

/*
 * Writes into memory that another core reads next (stage buffers, FIFO
 * slots) pick their stores by measurement. Normal stores leave the data in
 * our cache, where the reader fetches it fastest; but each line must first
 * be taken from the reader, who still holds it from the last round. On the
 * test VM that step is sometimes ten times slower (for minutes at a time, as
 * the host moves its virtual CPUs), and non-temporal stores, which skip it,
 * then win by far. A tuner keeps the measured cost of both kinds and uses
 * the cheaper, trying the other now and then. The choice is local to the
 * writer: readers see the same bytes either way.
 */
typedef struct chorus_store_tuner {
  double ns_per_kib[2]; /* moving average per kind (0: normal, 1: non-temporal); 0 = unmeasured */
  uint32_t calls;
  int force; /* -1: measure; 0 or 1: always that kind (CHORUS_NT_STORES) */
} chorus_store_tuner;

/* Writes smaller than this always use normal stores and are not timed. */
#define CHORUS_TUNED_MIN_BYTES 16384

void chorus_store_tuner_init(chorus_store_tuner *t, int force);
/* The kind of store for a write of `bytes` now: 0 normal, 1 non-temporal. */
int chorus_store_pick(chorus_store_tuner *t, size_t bytes);
/* A write of `bytes` with kind `nt` took `ns`. */
void chorus_store_learn(chorus_store_tuner *t, int nt, size_t bytes, int64_t ns);
/* chorus_copy with the kind the tuner picks, timed for it. */
void chorus_copy_tuned(chorus_store_tuner *t, void *dst, const void *src, size_t bytes);

#endif
