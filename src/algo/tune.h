/*
 * tune.h - the cost model that picks an algorithm per call.
 *
 * time(algorithm, bytes) = latency + bytes / bandwidth, with the latency and
 * bandwidth terms per algorithm and setting (one host or several, ranks
 * oversubscribing the cores or not) taken from measurements on the test
 * machine (docs/PERFORMANCE.md records them). Pure arithmetic: no transport
 * or communicator in sight, so it is unit-tested on its own.
 */
#ifndef CHORUS_ALGO_TUNE_H
#define CHORUS_ALGO_TUNE_H

#include <stddef.h>

#include "algo/algos.h"

typedef struct chorus_tune_env {
  int nranks;
  int nhosts;
  int node;           /* node memory available (all ranks on one host, shm on) */
  int oversubscribed; /* more ranks on this host than cores */
} chorus_tune_env;

/* Modelled microseconds of func with algo on `bytes` (the call's buffer
 * size: count * element size), or a negative value when algo does not apply
 * to func in this setting. */
double chorus_tune_time_us(int func, chorus_algo algo, size_t bytes, const chorus_tune_env *env);

#endif
