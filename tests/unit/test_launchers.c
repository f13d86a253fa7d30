/*
 * test_launchers.c - gpu/launchers runs each GPU's share of a group on
 * that GPU's thread, all at once (no GPU needed: the jobs are host code).
 *
 * - concurrent: 4 jobs each wait (bounded, 5 s) until all 4 have started;
 *   they can only all finish in time if they run at once. Job 0 runs on
 *   the calling thread, the others on 3 distinct other threads, and a
 *   device's job always lands on the same thread across runs.
 * - results: the first failing job in job order is returned; every job
 *   ran exactly once, also over 20000 quick rounds.
 * - sleeping launchers (CHORUS_GPU_LAUNCH_SPIN_US=0) still wake for every
 *   job; threads off (CHORUS_GPU_LAUNCH_THREADS=0) run every job in turn on
 *   the calling thread.
 * - two callers sharing a device at once both complete (one runs that
 *   share itself).
 * - the last release ends the threads; no threads start without a holder.
 */
#include <pthread.h>
#include <stdlib.h>

#include "gpu/launchers.h"
#include "unit.h"
#include "util/clock.h"

typedef struct arg {
  int *arrived; /* shared: jobs started (atomic) */
  int need;     /* wait until this many started (0: none) */
  int fail;     /* return this (ncclResult_t) */
  int runs;     /* times run */
  pthread_t on; /* the thread it ran on */
  int all_in;   /* saw every job start */
} arg;

static ncclResult_t job(void *p) {
  arg *a = p;
  a->runs++;
  a->on = pthread_self();
  if (a->need) {
    __atomic_add_fetch(a->arrived, 1, __ATOMIC_ACQ_REL);
    const int64_t until = chorus_now_ns() + 5000000000LL;
    while (__atomic_load_n(a->arrived, __ATOMIC_ACQUIRE) < a->need && chorus_now_ns() < until) {
    }
    a->all_in = __atomic_load_n(a->arrived, __ATOMIC_ACQUIRE) >= a->need;
  }
  return (ncclResult_t)a->fail;
}

static void setup(chorus_launch_job *jobs, arg *args, int n, int *arrived, int need) {
  for (int i = 0; i < n; i++) {
    args[i] = (arg){arrived, need, 0, 0, 0, 0};
    jobs[i] = (chorus_launch_job){.device = i + 1, .run = job, .arg = &args[i]};
  }
}

static void concurrent(void) {
  chorus_launchers_hold();
  chorus_launch_job jobs[4];
  arg args[4];
  pthread_t first[4];
  for (int round = 0; round < 3; round++) {
    int arrived = 0;
    setup(jobs, args, 4, &arrived, 4);
    EXPECT(chorus_launchers_run(jobs, 4) == ncclSuccess);
    for (int i = 0; i < 4; i++) {
      EXPECT_EQ_INT(args[i].runs, 1);
      EXPECT(args[i].all_in);
      EXPECT(pthread_equal(args[i].on, pthread_self()) == (i == 0));
      for (int j = 1; j < i; j++) EXPECT(!pthread_equal(args[i].on, args[j].on));
      if (round == 0) first[i] = args[i].on;
      if (i > 0) EXPECT(pthread_equal(args[i].on, first[i])); /* the device's own thread */
    }
  }
  EXPECT_EQ_INT(chorus_launchers_running(), 3);
  chorus_launchers_release();
  EXPECT_EQ_INT(chorus_launchers_running(), 0);
}

static void results(void) {
  chorus_launchers_hold();
  chorus_launch_job jobs[3];
  arg args[3];
  int arrived = 0;
  setup(jobs, args, 3, &arrived, 0);
  args[1].fail = ncclUnhandledCudaError;
  args[2].fail = ncclInvalidUsage;
  EXPECT(chorus_launchers_run(jobs, 3) == ncclUnhandledCudaError);
  setup(jobs, args, 3, &arrived, 0);
  args[2].fail = ncclInvalidUsage;
  EXPECT(chorus_launchers_run(jobs, 3) == ncclInvalidUsage);
  setup(jobs, args, 3, &arrived, 0);
  int ok = 0;
  for (int r = 0; r < 20000; r++) ok += chorus_launchers_run(jobs, 3) == ncclSuccess;
  EXPECT_EQ_INT(ok, 20000);
  for (int i = 0; i < 3; i++) EXPECT_EQ_INT(args[i].runs, 20000);
  chorus_launchers_release();
}

static void sleeping(void) {
  setenv("CHORUS_GPU_LAUNCH_SPIN_US", "0", 1);
  chorus_launchers_hold();
  chorus_launch_job jobs[2];
  arg args[2];
  int arrived = 0;
  setup(jobs, args, 2, &arrived, 0);
  int ok = 0;
  for (int r = 0; r < 200; r++) {
    ok += chorus_launchers_run(jobs, 2) == ncclSuccess;
    if (r % 50 == 0) { /* let the launcher fall asleep */
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
  }
  EXPECT_EQ_INT(ok, 200);
  EXPECT_EQ_INT(args[1].runs, 200);
  EXPECT(!pthread_equal(args[1].on, pthread_self()));
  chorus_launchers_release();
  unsetenv("CHORUS_GPU_LAUNCH_SPIN_US");
}

static void threads_off(void) {
  setenv("CHORUS_GPU_LAUNCH_THREADS", "0", 1);
  chorus_launchers_hold();
  chorus_launch_job jobs[3];
  arg args[3];
  int arrived = 0;
  setup(jobs, args, 3, &arrived, 0);
  EXPECT(chorus_launchers_run(jobs, 3) == ncclSuccess);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ_INT(args[i].runs, 1);
    EXPECT(pthread_equal(args[i].on, pthread_self()));
  }
  EXPECT_EQ_INT(chorus_launchers_running(), 0);
  chorus_launchers_release();
  unsetenv("CHORUS_GPU_LAUNCH_THREADS");
}

/* Two callers, each with jobs on devices 1 and 2 (job 0 on the caller). */
typedef struct caller {
  int rounds, ok;
  arg args[2];
} caller;

static void *call_many(void *p) {
  caller *c = p;
  int arrived = 0;
  chorus_launch_job jobs[2];
  for (int r = 0; r < c->rounds; r++) {
    for (int i = 0; i < 2; i++)
      jobs[i] = (chorus_launch_job){.device = i + 1, .run = job, .arg = &c->args[i]};
    c->args[0].arrived = c->args[1].arrived = &arrived;
    if (chorus_launchers_run(jobs, 2) == ncclSuccess) c->ok++;
  }
  return NULL;
}

static void shared_device(void) {
  chorus_launchers_hold();
  caller c[2];
  memset(c, 0, sizeof c);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    c[i].rounds = 5000;
    REQUIRE(pthread_create(&t[i], NULL, call_many, &c[i]) == 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ_INT(c[i].ok, 5000);
    EXPECT_EQ_INT(c[i].args[0].runs, 5000);
    EXPECT_EQ_INT(c[i].args[1].runs, 5000);
  }
  chorus_launchers_release();
  EXPECT_EQ_INT(chorus_launchers_running(), 0);
}

static void no_holder(void) {
  chorus_launch_job jobs[2];
  arg args[2];
  int arrived = 0;
  setup(jobs, args, 2, &arrived, 0);
  EXPECT(chorus_launchers_run(jobs, 2) == ncclSuccess);
  EXPECT(pthread_equal(args[1].on, pthread_self())); /* no communicator: no thread */
  EXPECT_EQ_INT(chorus_launchers_running(), 0);
}

int main(void) {
  RUN(concurrent);
  RUN(results);
  RUN(sleeping);
  RUN(threads_off);
  RUN(shared_device);
  RUN(no_holder);
  return unit_report();
}
