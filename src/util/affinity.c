/*
 * affinity.c - see affinity.h.
 */
#include "util/affinity.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The first line of path as a string; 0 where it cannot be read. */
static int read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  const int ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  return ok;
}

/* CPUs of a quota of `quota` us per `period` us, rounded down, at least 1;
 * 0 for no quota. */
static int quota_cpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  const long long n = quota / period;
  return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}

/* The least quota over cgroup dir under root and those above it (v2:
 * cpu.max; v1: cpu.cfs_quota_us, cpu.cfs_period_us); 0 where none. */
static int least_quota(const char *root, const char *dir, int v2) {
  char path[PATH_MAX], at[PATH_MAX], line[128];
  snprintf(at, sizeof at, "%s", dir);
  int least = 0;
  for (;;) {
    const size_t l = strlen(at);
    const char *sep = l && at[l - 1] == '/' ? "" : "/";
    long long q = 0, p = 0;
    if (v2) {
      snprintf(path, sizeof path, "%s%s%scpu.max", root, at, sep);
      char word[32];
      if (read_line(path, line, sizeof line) && sscanf(line, "%31s %lld", word, &p) == 2 &&
          strcmp(word, "max") != 0)
        q = atoll(word);
    } else {
      snprintf(path, sizeof path, "%s%s%scpu.cfs_quota_us", root, at, sep);
      if (read_line(path, line, sizeof line)) q = atoll(line);
      snprintf(path, sizeof path, "%s%s%scpu.cfs_period_us", root, at, sep);
      if (read_line(path, line, sizeof line)) p = atoll(line);
    }
    const int n = quota_cpus(q, p);
    if (n && (!least || n < least)) least = n;
    char *slash = strrchr(at, '/');
    if (!slash || (slash == at && at[1] == '\0')) break;
    if (slash == at)
      at[1] = '\0';
    else
      *slash = '\0';
  }
  return least;
}

/* Whether the comma-separated controllers name "cpu". */
static int names_cpu(const char *controllers) {
  for (const char *c = controllers; c && *c;) {
    const char *e = strchr(c, ',');
    const size_t n = e ? (size_t)(e - c) : strlen(c);
    if (n == 3 && strncmp(c, "cpu", 3) == 0) return 1;
    c = e ? e + 1 : NULL;
  }
  return 0;
}

int chorus_cpu_quota(void) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return 0;
  static const char *const v1_roots[] = {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct",
                                         "/sys/fs/cgroup/cpuacct,cpu"};
  static const char *const v2_roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
  char line[PATH_MAX + 64];
  int least = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2 || c2[1] != '/') continue;
    *c1 = *c2 = '\0';
    const int v2 = strcmp(line, "0") == 0 && c1[1] == '\0';
    if (!v2 && !names_cpu(c1 + 1)) continue;
    const char *const *roots = v2 ? v2_roots : v1_roots;
    for (int i = 0; i < (v2 ? 2 : 3); i++) {
      const int n = least_quota(roots[i], c2 + 1, v2);
      if (n && (!least || n < least)) least = n;
    }
  }
  fclose(f);
  return least;
}
