/*
 * affinity.c - see affinity.h.
 */
#include "util/affinity.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

int chorus_affinity_spread(int place, int ranks, int job_cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (place < 0 || sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  const int n = CPU_COUNT(&set);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 2 || ranks <= n || (online > 0 && n < online && n != job_cpus)) return -1;
  int k = place % n, cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
    if (CPU_ISSET(c, &set) && k-- == 0) cpu = c;
  if (cpu < 0) return -1;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
}

void chorus_cpuset_self(chorus_cpuset *s) {
  memset(s, 0, sizeof *s);
  cpu_set_t set;
  CPU_ZERO(&set);
  const int known = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (int c = 0; c < CHORUS_CPUSET_WORDS * 64 && c < CPU_SETSIZE; c++)
    if (known ? CPU_ISSET(c, &set) : c < online) s->bits[c / 64] |= (uint64_t)1 << (c % 64);
}

void chorus_cpuset_add(chorus_cpuset *to, const chorus_cpuset *more) {
  for (int i = 0; i < CHORUS_CPUSET_WORDS; i++) to->bits[i] |= more->bits[i];
}

int chorus_cpuset_count(const chorus_cpuset *s) {
  int n = 0;
  for (int i = 0; i < CHORUS_CPUSET_WORDS; i++) n += __builtin_popcountll(s->bits[i]);
  return n > 0 ? n : 1;
}
