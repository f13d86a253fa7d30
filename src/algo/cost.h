/*
 * tune.h - the cost model that picks an algorithm per call.
 *
 * time(algorithm, bytes) = latency + size over bandwidth, where the
 * bandwidth depends on where the data sits: each algorithm has one
 * bandwidth per size band (in L2, in L3, past L3, DRAM), so the modelled
 * time is continuous and grows with size. On one host the constants of
 * every (function, algorithm) pair were fitted to measurements on the
 * 2-core test machine, separately for ranks that have a core each
 * (calibrated at 2 ranks) and for ranks that outnumber the cores
 * (calibrated at 4); latency scales with the rank count from there. Across
 * hosts the model counts network hops. bench/calibrate.py measured,
 * bench/fit.py fitted; bench/calibration-*.txt keeps both outputs and
 * docs/PERFORMANCE.md the method. Pure arithmetic, unit-tested on its own.
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
  size_t max_msg;     /* largest single message (slot size) */
} chorus_tune_env;

/* Modelled microseconds of func with algo on `bytes` (the call's count times
 * the element size), or a negative value when algo does not apply to func
 * in this setting. */
double chorus_tune_time_us(int func, chorus_algo algo, size_t bytes, const chorus_tune_env *env);

#endif
