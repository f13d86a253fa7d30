/*
 * shm.h - POSIX shared-memory segments.
 *
 * A segment is created by one rank with mode 0600 under a fresh random name,
 * sized, and backed by reserved pages (posix_fallocate), so a full /dev/shm
 * fails here with a clear message instead of a SIGBUS on first touch. Peers
 * open it by name. The creator unlinks the name once every peer has mapped it;
 * the memory then lives exactly as long as some process maps it, so nothing
 * outlives the job even when a rank is killed.
 */
#ifndef CHORUS_UTIL_SHM_H
#define CHORUS_UTIL_SHM_H

#include <stddef.h>

#include "nccl.h"

#define CHORUS_SHM_NAME_MAX 64

typedef struct chorus_shm {
  char name[CHORUS_SHM_NAME_MAX]; /* "/chorus-..." ; empty once unlinked */
  void *base;                     /* NULL when not mapped */
  size_t size;
  int owner; /* 1 if this process created it */
} chorus_shm;

/* Creates and maps a zero-filled segment of size bytes. On failure err holds
 * the reason (including free space in /dev/shm when that is the cause). */
ncclResult_t chorus_shm_create(chorus_shm *shm, const char *tag, size_t size, char *err,
                               size_t errlen);
/* Maps an existing segment by name. */
ncclResult_t chorus_shm_open(chorus_shm *shm, const char *name, size_t size, char *err,
                             size_t errlen);
/* Removes the name (idempotent; only the owner does it). */
void chorus_shm_unlink(chorus_shm *shm);
/* Unmaps, and unlinks if still named and owned. Safe on a zeroed struct. */
void chorus_shm_close(chorus_shm *shm);

/* Removes the names of segments whose creator has died before it could
 * remove them (a rank killed during init). Names carry the creator's pid
 * and pid namespace; only names of our namespace are judged. Returns how
 * many were removed. */
int chorus_shm_sweep_stale(void);
/* How many segments process pid (of this PID namespace) has in /dev/shm. */
int chorus_shm_count_of(int pid);

#endif
