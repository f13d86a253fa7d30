/*
 * launchers.c - see launchers.h.
 *
 * Handing a job over: the caller claims the launcher (owned 0 -> 1; a
 * launcher another caller owns is not waited for), stores the job with
 * release, rings the doorbell (a fence and a load when the launcher is
 * awake), runs its own share, then waits for the job's `done` (acquire)
 * and gives the claim back. The launcher stores `job` back to NULL before
 * `done`, so the next owner's store comes after it.
 */
#include "gpu/launchers.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "device/device.h"
#include "util/clock.h"
#include "util/doorbell.h"
#include "util/log.h"
#include "util/param.h"

typedef struct launcher {
  int device;
  int started;            /* a thread runs (atomic; changed under lock) */
  int stop;               /* atomic: end the thread once idle */
  int owned;              /* atomic: a caller has claimed it */
  chorus_launch_job *job; /* atomic: the job handed over, NULL when idle */
  int64_t spin_ns;        /* polls this long after a job before sleeping */
  chorus_doorbell bell;   /* wakes it from sleep */
  pthread_t thread;
} launcher;

static launcher pool[CHORUS_LAUNCHERS_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int holders; /* under lock */
static int running; /* atomic: threads started and not yet joined */

int chorus_launchers_enabled(void) {
  return chorus_param_int(CHORUS_P_GPU_LAUNCH_THREADS) != 0;
}

static void *launcher_main(void *arg) {
  launcher *l = arg;
  (void)chorus_dev_use(l->device); /* a failure shows in the job's own launches */
  int64_t idle_since = chorus_now_ns();
  for (;;) {
    chorus_launch_job *j = __atomic_load_n(&l->job, __ATOMIC_ACQUIRE);
    if (j) {
      j->res = j->run(j->arg);
      __atomic_store_n(&l->job, NULL, __ATOMIC_RELAXED);
      __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
      idle_since = chorus_now_ns();
      continue;
    }
    if (__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) break;
    if (chorus_now_ns() - idle_since < l->spin_ns) {
      chorus_cpu_relax();
      continue;
    }
    const uint32_t seen = chorus_doorbell_prepare(&l->bell);
    if (__atomic_load_n(&l->job, __ATOMIC_SEQ_CST) || __atomic_load_n(&l->stop, __ATOMIC_SEQ_CST)) {
      chorus_doorbell_cancel(&l->bell);
      continue;
    }
    chorus_doorbell_sleep(&l->bell, seen, 1000000000); /* spurious wake-ups are fine */
  }
  return NULL;
}

/* The device's launcher, started if need be and claimed; NULL when there
 * is none to be had (the caller runs the job itself). */
static launcher *claim(int device) {
  if (device < 0 || device >= CHORUS_LAUNCHERS_MAX) return NULL;
  launcher *l = &pool[device];
  if (!__atomic_load_n(&l->started, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&lock);
    int ok = __atomic_load_n(&l->started, __ATOMIC_RELAXED);
    if (!ok && holders > 0) {
      l->device = device;
      l->stop = 0;
      l->job = NULL;
      l->spin_ns = chorus_param_int(CHORUS_P_GPU_LAUNCH_SPIN_US) * 1000;
      ok = pthread_create(&l->thread, NULL, launcher_main, l) == 0;
      if (ok) {
        __atomic_store_n(&l->started, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&running, 1, __ATOMIC_RELAXED);
      } else {
        WARN("could not start the launcher thread of GPU %d; its kernels are launched by the "
             "calling thread",
             device);
      }
    }
    pthread_mutex_unlock(&lock);
    if (!ok) return NULL;
  }
  int free_ = 0;
  if (!__atomic_compare_exchange_n(&l->owned, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return NULL;
  return l;
}

static void wait_done(const chorus_launch_job *j) {
  for (unsigned spins = 0; !__atomic_load_n(&j->done, __ATOMIC_ACQUIRE); spins++) {
    if (spins < 4096)
      chorus_cpu_relax();
    else
      sched_yield(); /* a launch that blocks (its stream's queue is full) */
  }
}

ncclResult_t chorus_launchers_run(chorus_launch_job *jobs, int njobs) {
  launcher *by[CHORUS_LAUNCHERS_MAX] = {NULL};
  const int threads = njobs > 1 && njobs <= CHORUS_LAUNCHERS_MAX && chorus_launchers_enabled();
  for (int i = 1; i < njobs && threads; i++) {
    jobs[i].done = 0;
    if (!(by[i] = claim(jobs[i].device))) continue;
    __atomic_store_n(&by[i]->job, &jobs[i], __ATOMIC_SEQ_CST);
    chorus_doorbell_ring(&by[i]->bell);
  }
  for (int i = 0; i < njobs; i++)
    if (!by[i]) jobs[i].res = jobs[i].run(jobs[i].arg);
  for (int i = 1; i < njobs; i++)
    if (by[i]) {
      wait_done(&jobs[i]);
      __atomic_store_n(&by[i]->owned, 0, __ATOMIC_RELEASE);
    }
  for (int i = 0; i < njobs; i++)
    if (jobs[i].res != ncclSuccess) return jobs[i].res;
  return ncclSuccess;
}

void chorus_launchers_hold(void) {
  pthread_mutex_lock(&lock);
  holders++;
  pthread_mutex_unlock(&lock);
}

void chorus_launchers_release(void) {
  pthread_mutex_lock(&lock);
  if (--holders == 0)
    for (int d = 0; d < CHORUS_LAUNCHERS_MAX; d++) {
      launcher *l = &pool[d];
      if (!__atomic_load_n(&l->started, __ATOMIC_RELAXED)) continue;
      __atomic_store_n(&l->stop, 1, __ATOMIC_SEQ_CST);
      chorus_doorbell_ring(&l->bell);
      pthread_join(l->thread, NULL); /* it finishes a job in hand first */
      __atomic_store_n(&l->started, 0, __ATOMIC_RELEASE);
      __atomic_sub_fetch(&running, 1, __ATOMIC_RELAXED);
    }
  pthread_mutex_unlock(&lock);
}

int chorus_launchers_running(void) {
  return __atomic_load_n(&running, __ATOMIC_RELAXED);
}
