/*
 * test_watch.c - util/watch notices exited processes.
 *
 * A child process that waits (bounded) is watched as "rank 3" beside this
 * process as "rank 1": nothing is raised while both live; once the child is
 * killed rank 3's bit (alone) rises within a few periods, whether the child
 * was reaped or is still a zombie, and the watch names rank 3 and its pid. A second entry, added
 * after the first was removed (the thread ends with its last entry and a new one starts), works the
 * same. The child is killed by pid if a check fails first.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "util/clock.h"
#include "util/watch.h"

/* Waits up to ms for *flag to rise; returns the milliseconds it took, or
 * -1. */
static int wait_flag(volatile uint32_t *flag, int ms) {
  int64_t t0 = chorus_now_ns();
  while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
    if (chorus_now_ns() - t0 > (int64_t)ms * 1000000) return -1;
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  return (int)((chorus_now_ns() - t0) / 1000000);
}

static void one_death(int reap_first) {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    sleep(30); /* killed long before */
    _exit(0);
  }
  volatile uint32_t flag = 0;
  int32_t pids[2] = {(int32_t)getpid(), (int32_t)child};
  int ranks[2] = {1, 3};
  chorus_watch *w = NULL;
  EXPECT(chorus_watch_add(pids, ranks, 2, &flag, &w) == ncclSuccess);
  EXPECT(wait_flag(&flag, 5 * CHORUS_WATCH_PERIOD_MS) < 0); /* both alive */
  EXPECT_EQ_INT(chorus_watch_dead(w, NULL), -1);
  kill(child, SIGKILL);
  if (reap_first) waitpid(child, NULL, 0);
  int took = wait_flag(&flag, 20 * CHORUS_WATCH_PERIOD_MS); /* else: a zombie */
  if (!reap_first) waitpid(child, NULL, 0);
  EXPECT(took >= 0);
  int32_t pid = 0;
  EXPECT_EQ_INT(chorus_watch_dead(w, &pid), 3);
  EXPECT_EQ_INT(pid, (int)child);
  EXPECT_EQ_INT(flag, 1u << 3); /* rank 3's bit alone */
  chorus_watch_remove(w);
}

static void reaped(void) {
  one_death(1);
}
static void zombie(void) {
  one_death(0);
}

static void bad_args(void) {
  volatile uint32_t flag = 0;
  int32_t pids[CHORUS_WATCH_MAX + 1] = {0};
  int ranks[CHORUS_WATCH_MAX + 1] = {0};
  chorus_watch *w = (chorus_watch *)&flag;
  EXPECT(chorus_watch_add(pids, ranks, CHORUS_WATCH_MAX + 1, &flag, &w) == ncclInternalError);
  EXPECT(w == NULL);
  int32_t pid = 1;
  int rank = 32;
  EXPECT(chorus_watch_add(&pid, &rank, 1, &flag, &w) == ncclInternalError);
  chorus_watch_remove(NULL);
  EXPECT_EQ_INT(chorus_watch_dead(NULL, NULL), -1);
}

int main(void) {
  RUN(reaped);
  RUN(zombie); /* also a fresh thread after the first ended */
  RUN(bad_args);
  return unit_report();
}
