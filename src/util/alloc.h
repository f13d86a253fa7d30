/*
 * alloc.h - every allocation the library makes goes through here.
 *
 * Host memory comes from chorus_malloc/chorus_calloc/chorus_free, which keep
 * byte and block counters. Other kinds (shared-memory segments, pinned and
 * device memory) are allocated by their own modules, which report them with
 * chorus_alloc_account so the totals cover everything. Tests read the
 * counters to prove nothing leaks and arm chorus_alloc_fail_after to make a
 * chosen allocation fail (host memory here; shared memory in util/shm.c;
 * device memory has its own in the device layer).
 */
#ifndef CHORUS_UTIL_ALLOC_H
#define CHORUS_UTIL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  CHORUS_MEM_HOST = 0,
  CHORUS_MEM_SHM,
  CHORUS_MEM_PINNED,
  CHORUS_MEM_DEVICE,
  CHORUS_MEM_KINDS
} chorus_mem_kind;

/* NULL on failure (or when a fault is injected); memory is 16-byte aligned. */
void *chorus_malloc(size_t size);
/* Zeroed; NULL on failure or overflow of n*size. */
void *chorus_calloc(size_t n, size_t size);
/* Accepts NULL. */
void chorus_free(void *ptr);
/* strdup through the counters. */
char *chorus_strdup(const char *s);

/* Records bytes of another kind allocated (delta > 0) or freed (delta < 0). */
void chorus_alloc_account(chorus_mem_kind kind, int64_t delta);

/* Bytes and blocks currently held, per kind. */
int64_t chorus_alloc_bytes(chorus_mem_kind kind);
int64_t chorus_alloc_blocks(chorus_mem_kind kind);

/* Makes the n-th allocation of kind from now fail (n >= 1; 0 disarms):
 * chorus_malloc/calloc return NULL, chorus_shm_create fails as if
 * /dev/shm refused it. */
void chorus_alloc_fail_after(chorus_mem_kind kind, int64_t n);
/* For allocators of kind: whether this allocation is the one to fail. */
int chorus_alloc_injected(chorus_mem_kind kind);

#endif
