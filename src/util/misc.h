/*
 * misc.h - hashing, random bytes and small helpers.
 */
#ifndef CHORUS_UTIL_MISC_H
#define CHORUS_UTIL_MISC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "nccl.h"

/* 64-bit FNV-1a, then a final mix; deterministic across processes and hosts. */
uint64_t chorus_hash64(const void *data, size_t len, uint64_t seed);

/* Fills buf from the kernel's random source. */
ncclResult_t chorus_random_bytes(void *buf, size_t len);

/* A random value fixed for the life of this process (identifies it among
 * processes that may share a pid across namespaces). */
uint64_t chorus_process_token(void);

/* Bytes per element of an ncclDataType_t, 0 for an invalid type. */
size_t chorus_type_size(int datatype);
/* "float", "half", ... as nccl-tests print them; "?" for invalid. */
const char *chorus_type_name(int datatype);
/* "sum", "max", ... for an ncclRedOp_t's kind (ncclSum..ncclAvg, then
 * "premulsum" for a created operator); "?" otherwise. */
const char *chorus_redop_name(int op);

/* Whether [a, a + an) and [b, b + bn) share a byte (empty ranges share
 * none). */
static inline int chorus_ranges_meet(const void *a, size_t an, const void *b, size_t bn) {
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an && bn && x < y + bn && y < x + an;
}

/* Whether the len bytes at w spell word, ignoring case (settings' words). */
static inline int chorus_word_is(const char *w, size_t len, const char *word) {
  return strlen(word) == len && strncasecmp(w, word, len) == 0;
}

#define CHORUS_MIN(a, b)        ((a) < (b) ? (a) : (b))
#define CHORUS_MAX(a, b)        ((a) > (b) ? (a) : (b))
#define CHORUS_CLAMP(v, lo, hi) CHORUS_MIN(CHORUS_MAX(v, lo), hi)
#define CHORUS_DIV_UP(a, b)     (((a) + (b)-1) / (b))
#define CHORUS_ALIGN_UP(a, b)   (CHORUS_DIV_UP(a, b) * (b))

#endif
