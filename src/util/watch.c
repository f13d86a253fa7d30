/*
 * watch.c - see watch.h.
 */
#include "util/watch.h"

#include <pthread.h>
#include <stdint.h>

#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/proc.h"

struct chorus_watch {
  int32_t pids[CHORUS_WATCH_MAX];
  int ranks[CHORUS_WATCH_MAX];
  int n;
  volatile uint32_t *mask;
  int dead;           /* index into pids of the first gone, or -1 (atomic) */
  chorus_watch *next; /* the list, under lock */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static chorus_watch *entries;
static pthread_t thread;
static int running;    /* a thread watches entries */
static unsigned epoch; /* a thread runs while the epoch it started in lasts */

static void *watch_main(void *arg) {
  const unsigned mine = (unsigned)(uintptr_t)arg;
  pthread_mutex_lock(&lock);
  while (entries && epoch == mine) {
    for (chorus_watch *w = entries; w; w = w->next) {
      for (int i = 0; i < w->n; i++)
        if (!(*w->mask >> w->ranks[i] & 1u) && chorus_proc_exited(w->pids[i])) {
          if (__atomic_load_n(&w->dead, __ATOMIC_ACQUIRE) < 0)
            __atomic_store_n(&w->dead, i, __ATOMIC_RELEASE);
          __atomic_fetch_or(w->mask, 1u << w->ranks[i], __ATOMIC_RELEASE);
        }
    }
    const struct timespec until = chorus_realtime_in_ms(CHORUS_WATCH_PERIOD_MS);
    pthread_cond_timedwait(&wake, &lock, &until);
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

ncclResult_t chorus_watch_add(const int32_t *pids, const int *ranks, int n, volatile uint32_t *mask,
                              chorus_watch **out) {
  *out = NULL;
  if (n < 0 || n > CHORUS_WATCH_MAX || !mask)
    return chorus_error(ncclInternalError, "chorus_watch_add: %d processes (at most %d)", n,
                        CHORUS_WATCH_MAX);
  for (int i = 0; i < n; i++)
    if (ranks[i] < 0 || ranks[i] > 31)
      return chorus_error(ncclInternalError, "chorus_watch_add: rank %d (0..31)", ranks[i]);
  chorus_watch *w = chorus_calloc(1, sizeof *w);
  if (!w) return chorus_error(ncclSystemError, "out of memory watching peer processes");
  for (int i = 0; i < n; i++) {
    w->pids[i] = pids[i];
    w->ranks[i] = ranks[i];
  }
  w->n = n;
  w->mask = mask;
  w->dead = -1;
  pthread_mutex_lock(&lock);
  w->next = entries;
  entries = w;
  if (!running) {
    if (pthread_create(&thread, NULL, watch_main, (void *)(uintptr_t)epoch) != 0) {
      entries = w->next;
      pthread_mutex_unlock(&lock);
      chorus_free(w);
      return chorus_error(ncclSystemError, "starting the thread that watches peer processes");
    }
    running = 1;
  }
  pthread_mutex_unlock(&lock);
  *out = w;
  return ncclSuccess;
}

void chorus_watch_remove(chorus_watch *w) {
  if (!w) return;
  pthread_mutex_lock(&lock);
  for (chorus_watch **link = &entries; *link; link = &(*link)->next)
    if (*link == w) {
      *link = w->next;
      break;
    }
  /* The last entry ends the thread (a later entry starts another). */
  const int last = running && !entries;
  const pthread_t t = thread;
  if (last) {
    running = 0;
    epoch++;
  }
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  if (last) pthread_join(t, NULL);
  chorus_free(w);
}

int chorus_watch_dead(const chorus_watch *w, int32_t *pid) {
  const int i = w ? __atomic_load_n(&w->dead, __ATOMIC_ACQUIRE) : -1;
  if (i < 0) return -1;
  if (pid) *pid = w->pids[i];
  return w->ranks[i];
}
