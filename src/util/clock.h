/*
 * clock.h - monotonic time and deadlines.
 *
 * A deadline is an absolute CLOCK_MONOTONIC time in nanoseconds;
 * CHORUS_NO_DEADLINE never expires.
 */
#ifndef CHORUS_UTIL_CLOCK_H
#define CHORUS_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

#define CHORUS_NO_DEADLINE INT64_MAX

static inline int64_t chorus_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The same clock, read coarsely (to a few ms) for a few ns: for times
 * that are only ever shown or compared in seconds. */
static inline int64_t chorus_coarse_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Deadline `sec` seconds from now; sec <= 0 means none. */
static inline int64_t chorus_deadline_in_s(int64_t sec) {
  return sec > 0 ? chorus_now_ns() + sec * 1000000000 : CHORUS_NO_DEADLINE;
}

/* Milliseconds left (>= 0), capped at cap_ms, for poll()-style timeouts. */
static inline int chorus_ms_left(int64_t deadline, int cap_ms) {
  if (deadline == CHORUS_NO_DEADLINE) return cap_ms;
  int64_t left = (deadline - chorus_now_ns()) / 1000000;
  if (left < 0) return 0;
  return left > cap_ms ? cap_ms : (int)left;
}

/* The CLOCK_REALTIME time `ms` from now: what pthread_cond_timedwait
 * takes (condition variables here keep their default clock). */
static inline struct timespec chorus_realtime_in_ms(int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  return ts;
}

static inline int chorus_expired(int64_t deadline) {
  return deadline != CHORUS_NO_DEADLINE && chorus_now_ns() >= deadline;
}

#endif
