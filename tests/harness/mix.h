/*
 * mix.h - the tests' seeded random numbers: one step of splitmix64, so
 * that a trial's seed alone decides everything it draws and a failing
 * trial can be run again. Header only, for programs that link nothing
 * of the harness (they use the library as a user would).
 */
#ifndef CHORUS_TEST_MIX_H
#define CHORUS_TEST_MIX_H

#include <stdint.h>

static inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

#endif
