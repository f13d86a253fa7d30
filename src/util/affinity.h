/*
 * affinity.h - spreading a machine's ranks over its CPUs where they
 * outnumber them.
 *
 * With more ranks than CPUs the scheduler may leave three ranks on one CPU
 * and one on the other (2 vCPUs, 4 processes) for a run's whole life; a
 * call that needs every rank then waits for three turns on the crowded
 * CPU a step: a 4-rank AllReduce of 8-128 B took 4.8-5.1 us so placed and
 * 2.5 us with two ranks a CPU (taskset, either pairing), the two modes
 * turning up at random from run to run. Bound by its place among the
 * machine's ranks, every CPU holds as many ranks, give or take one.
 */
#ifndef CHORUS_UTIL_AFFINITY_H
#define CHORUS_UTIL_AFFINITY_H

#include <stdint.h>

/* A set of CPUs (as cpu_set_t holds them, up to 1024), sent between ranks
 * in their records, so plain words. */
#define CHORUS_CPUSET_WORDS 16
typedef struct chorus_cpuset {
  uint64_t bits[CHORUS_CPUSET_WORDS];
} chorus_cpuset;

/* The CPUs the calling thread may run on: what a launcher, taskset or a
 * container's cpuset left it, which may be fewer than the machine has
 * online (then ranks that would each have a core on the machine can
 * crowd the few they are given). Every online CPU where the system does
 * not say. */
void chorus_cpuset_self(chorus_cpuset *s);
/* Adds the CPUs of `more` to `to`. */
void chorus_cpuset_add(chorus_cpuset *to, const chorus_cpuset *more);
/* How many CPUs s holds (at least 1). */
int chorus_cpuset_count(const chorus_cpuset *s);

/* The CPUs' worth of time the calling process's CPU quota allows at once
 * (a container's CPU limit: cgroup v2 cpu.max, v1 cpu.cfs_quota_us over
 * cpu.cfs_period_us), rounded down, at least 1: the least over its cgroup
 * and those above it. 0 where no quota limits it. Ranks that spin past
 * it are throttled for the rest of each period (100 ms by default). */
int chorus_cpu_quota(void);

/* Binds the calling thread (and the threads it starts later) to the
 * (place % n)-th of the n CPUs it may run on, where `ranks` outnumber
 * them. Leaves it alone where they do not, where n is 1, or where
 * something bound it to fewer CPUs than both the machine has online and
 * the machine's ranks may run on together (job_cpus: a launcher that
 * bound ranks one by one, the user, or this function for another
 * communicator); a set every rank shares (taskset on the whole job, a
 * container's cpuset) it spreads them over. Returns the CPU it bound to,
 * or -1. */
int chorus_affinity_spread(int place, int ranks, int job_cpus);

#endif
