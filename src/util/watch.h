/*
 * watch.h - notices when other processes of this host exit.
 *
 * A GPU kernel waiting for a peer cannot see that the peer's process is
 * gone: it would wait until its deadline (CHORUS_OP_TIMEOUT). Each GPU
 * communicator therefore registers the processes of its peers here, with
 * the host-mapped word its kernels watch: one thread per process (started
 * with the first entry, ended with the last) looks every
 * CHORUS_WATCH_PERIOD_MS whether each pid still exists, and when one is gone
 * records which rank it was and sets that rank's bit in the word, so the
 * kernels waiting for that rank (and only those) stop at once and the
 * communicator's error can name it.
 */
#ifndef CHORUS_UTIL_WATCH_H
#define CHORUS_UTIL_WATCH_H

#include <stdint.h>

#include "nccl.h"

#define CHORUS_WATCH_MAX       8
#define CHORUS_WATCH_PERIOD_MS 100

typedef struct chorus_watch chorus_watch;

/* Watches n (at most CHORUS_WATCH_MAX) processes, pids[i] being rank
 * ranks[i] (0..31); sets bit ranks[i] of *mask when it is gone. */
ncclResult_t chorus_watch_add(const int32_t *pids, const int *ranks, int n, volatile uint32_t *mask,
                              chorus_watch **out);

/* Stops watching and frees w (NULL: nothing). The mask is not touched
 * afterwards. */
void chorus_watch_remove(chorus_watch *w);

/* The first rank whose process was found gone (its pid in *pid), or -1. */
int chorus_watch_dead(const chorus_watch *w, int32_t *pid);

#endif
