/*
 * bench_common.h - what mpi_bench.c and gloo_bench.cc (the reference
 * programs of bench/compare.py) share: the size syntax of the command line
 * and the input pattern whose sums are exact. Plain C, also valid C++.
 */
#ifndef CHORUS_BENCH_COMMON_H
#define CHORUS_BENCH_COMMON_H

#include <stddef.h>
#include <stdlib.h>

/* "8", "64K", "256M", "1G" -> bytes; 0 on error. */
static inline size_t bench_parse_size(const char *s) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (!end || end == s || v < 0) return 0;
  switch (*end) {
  case 'k':
  case 'K':
    v *= 1024;
    break;
  case 'm':
  case 'M':
    v *= 1024 * 1024;
    break;
  case 'g':
  case 'G':
    v *= 1024.0 * 1024 * 1024;
    break;
  case '\0':
    break;
  default:
    return 0;
  }
  return (size_t)v;
}

/* Input element i of rank r: a small integer, so sums over ranks are exact. */
static inline float bench_pattern(int r, size_t i) {
  return (float)((i * 7 + (size_t)r * 13 + 1) % 101);
}

static inline float bench_sum_over_ranks(int n, size_t i) {
  float s = 0;
  for (int r = 0; r < n; r++) s += bench_pattern(r, i);
  return s;
}

#endif
