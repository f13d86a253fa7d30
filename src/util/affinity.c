/*
 * affinity.c - see affinity.h.
 */
#include "util/affinity.h"

#include <sched.h>
#include <unistd.h>

int chorus_affinity_spread(int place, int ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (place < 0 || sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  const int n = CPU_COUNT(&set);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1 || ranks <= n || (online > 0 && n < online)) return -1;
  int k = place % n, cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
    if (CPU_ISSET(c, &set) && k-- == 0) cpu = c;
  if (cpu < 0) return -1;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
}
