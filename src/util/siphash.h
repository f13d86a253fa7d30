/*
 * siphash.h - SipHash-2-4 (Aumasson and Bernstein): a keyed 64-bit hash
 * that nobody without the key can compute or invert. The bootstrap uses it
 * to prove knowledge of the job's secret without sending it (hello.h).
 */
#ifndef CHORUS_UTIL_SIPHASH_H
#define CHORUS_UTIL_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* key[0] and key[1] are the key's bytes 0-7 and 8-15, little-endian. */
uint64_t chorus_siphash(const uint64_t key[2], const void *msg, size_t len);

#endif
