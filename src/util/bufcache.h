/*
 * bufcache.h - a few large host buffers kept between calls, so that a
 * call needing one does not map (and fault in, page by page) fresh memory
 * each time. malloc gives blocks from 32 MiB (glibc's largest mmap
 * threshold) as fresh mappings; faulting one in cost about as much as the
 * call's own copies (an in-place AlltoAll of 64 MiB on 2 ranks across
 * hosts: 40 ms against 20 with the buffer kept).
 *
 * Blocks under CHORUS_BUFCACHE_MIN come from chorus_malloc and go back to
 * it; larger ones are kept, up to CHORUS_BUFCACHE_SLOTS, the smallest
 * given up for a larger one, until chorus_bufcache_free. Thread-safe.
 */
#ifndef CHORUS_UTIL_BUFCACHE_H
#define CHORUS_UTIL_BUFCACHE_H

#include <pthread.h>
#include <stddef.h>

#define CHORUS_BUFCACHE_SLOTS 2
#define CHORUS_BUFCACHE_MIN   ((size_t)1 << 20)

typedef struct chorus_bufcache {
  pthread_mutex_t lock;
  void *buf[CHORUS_BUFCACHE_SLOTS]; /* kept, not lent (NULL: an empty slot) */
  size_t bytes[CHORUS_BUFCACHE_SLOTS];
} chorus_bufcache;

void chorus_bufcache_init(chorus_bufcache *c);
/* A buffer of at least `bytes` (0 counts as 1), or NULL when out of
 * memory; *got says how large it is, for chorus_bufcache_put. */
void *chorus_bufcache_get(chorus_bufcache *c, size_t bytes, size_t *got);
/* Gives back p (NULL: nothing), of size `bytes` as _get said. */
void chorus_bufcache_put(chorus_bufcache *c, void *p, size_t bytes);
/* Frees what is kept; nothing may be lent. */
void chorus_bufcache_free(chorus_bufcache *c);

#endif
