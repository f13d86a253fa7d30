/*
 * stats.h - live statistics per communicator (CHORUS_STATS_INTERVAL).
 *
 * Each communicator counts its calls, bytes and errors per function and
 * size class, and the time of the calls that run alone (a call in a group
 * shares its time with the group's others): host calls timed as they run,
 * GPU calls by timing events around their launch, read back by
 * core/trace.c's reader thread; calls captured into CUDA graphs count at
 * each replay, timed by the GPU's timestamps. Every CHORUS_STATS_INTERVAL seconds a
 * thread of the process appends one JSON line per live communicator to CHORUS_STATS_FILE and
 * rewrites the Prometheus text file beside it (the same path, ".prom" in place of ".jsonl"); a
 * communicator that ends writes its last line then. Off (the default), nothing is counted.
 */
#ifndef CHORUS_CORE_STATS_H
#define CHORUS_CORE_STATS_H

#include <stdint.h>

#include "nccl.h"

/* Size classes: up to 1 KiB, 64 KiB, 1 MiB, 16 MiB, 256 MiB, above. */
#define CHORUS_STATS_SIZES 6

typedef struct chorus_stats_cell {
  uint64_t calls, bytes;
  uint64_t timed, ns; /* calls whose time was taken, and their time */
} chorus_stats_cell;

typedef struct chorus_stats chorus_stats;

/* Starts counting comm (ready, on every rank) when statistics are on. */
void chorus_stats_register(ncclComm_t comm);
/* Writes comm's last line and stops counting it; nothing when it was not
 * counted. */
void chorus_stats_unregister(ncclComm_t comm);
/* One call of func moving `bytes`, which took ns (< 0: not taken). */
void chorus_stats_count(chorus_stats *st, int func, uint64_t bytes, int64_t ns);
/* The time of a call counted without one: a GPU call alone in its launch,
 * timed by events around it (core/trace.c). */
void chorus_stats_time(chorus_stats *st, int func, uint64_t bytes, int64_t ns);
/* One call that returned an error. */
void chorus_stats_error(chorus_stats *st);

#endif
