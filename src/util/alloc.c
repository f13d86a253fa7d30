/*
 * alloc.c - counted host allocation (see alloc.h).
 *
 * Each block carries a 16-byte header holding its size, so chorus_free can
 * update the byte counter without a lookup table.
 */
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

#define HEADER 16

static int64_t bytes[CHORUS_MEM_KINDS];
static int64_t blocks[CHORUS_MEM_KINDS];
static int64_t fail_countdown[CHORUS_MEM_KINDS]; /* 0: disarmed */

void chorus_alloc_account(chorus_mem_kind kind, int64_t delta) {
  __atomic_add_fetch(&bytes[kind], delta, __ATOMIC_RELAXED);
  __atomic_add_fetch(&blocks[kind], delta > 0 ? 1 : -1, __ATOMIC_RELAXED);
}

int64_t chorus_alloc_bytes(chorus_mem_kind kind) {
  return __atomic_load_n(&bytes[kind], __ATOMIC_RELAXED);
}

int64_t chorus_alloc_blocks(chorus_mem_kind kind) {
  return __atomic_load_n(&blocks[kind], __ATOMIC_RELAXED);
}

void chorus_alloc_fail_after(chorus_mem_kind kind, int64_t n) {
  __atomic_store_n(&fail_countdown[kind], n, __ATOMIC_RELAXED);
}

int chorus_alloc_injected(chorus_mem_kind kind) {
  int64_t c = __atomic_load_n(&fail_countdown[kind], __ATOMIC_RELAXED);
  while (c > 0) {
    if (__atomic_compare_exchange_n(&fail_countdown[kind], &c, c - 1, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return c == 1;
  }
  return 0;
}

void *chorus_malloc(size_t size) {
  if (size > SIZE_MAX - HEADER || chorus_alloc_injected(CHORUS_MEM_HOST)) return NULL;
  unsigned char *p = malloc(size + HEADER);
  if (!p) return NULL;
  memcpy(p, &size, sizeof size);
  chorus_alloc_account(CHORUS_MEM_HOST, (int64_t)size);
  return p + HEADER;
}

void *chorus_calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = chorus_malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

void chorus_free(void *ptr) {
  if (!ptr) return;
  unsigned char *p = (unsigned char *)ptr - HEADER;
  size_t size;
  memcpy(&size, p, sizeof size);
  chorus_alloc_account(CHORUS_MEM_HOST, -(int64_t)size);
  free(p);
}

char *chorus_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = chorus_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}
