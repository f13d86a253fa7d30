/*
 * doorbell.c - futex-backed wake-ups (see doorbell.h).
 */
#include "util/doorbell.h"

#include "util/fence.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The sleeper announces itself, then looks at the work; the ringer
 * publishes work, then looks for a sleeper: a store-load pattern on each
 * side, which needs a full fence between the two. ThreadSanitizer models
 * no fences (GCC refuses them under it), so its builds use read-modify-
 * writes of `sleeping` on both sides instead, which order the same way. */
#if defined(__SANITIZE_THREAD__)
#define ANNOUNCE(db) __atomic_exchange_n(&(db)->sleeping, 1, __ATOMIC_SEQ_CST)
#define SLEEPER(db)  __atomic_fetch_add(&(db)->sleeping, 0, __ATOMIC_SEQ_CST)
#else
#define ANNOUNCE(db)                                                                               \
  (__atomic_store_n(&(db)->sleeping, 1, __ATOMIC_SEQ_CST), __atomic_thread_fence(__ATOMIC_SEQ_CST))
#define SLEEPER(db) (ring_fence(db), __atomic_load_n(&(db)->sleeping, __ATOMIC_RELAXED))
/* The ringer's side of the store-load ordering: none beyond the
 * compiler's where the owner fences for both (see doorbell.h). */
static inline void ring_fence(const chorus_doorbell *db) {
  if (__atomic_load_n(&db->fences, __ATOMIC_RELAXED) &&
      __atomic_load_n(&chorus_fence_global_target, __ATOMIC_RELAXED))
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#endif

void chorus_doorbell_init_fenced(chorus_doorbell *db) {
  chorus_fence_init();
#if defined(__SANITIZE_THREAD__)
  (void)db; /* its rings keep their read-modify-writes */
#else
  __atomic_store_n(&db->fences, (uint32_t)chorus_fence_global_issuer, __ATOMIC_RELEASE);
#endif
}

uint32_t chorus_doorbell_prepare(chorus_doorbell *db) {
  ANNOUNCE(db);
  if (__atomic_load_n(&db->fences, __ATOMIC_RELAXED)) chorus_fence_global();
  return __atomic_load_n(&db->seq, __ATOMIC_SEQ_CST);
}

void chorus_doorbell_cancel(chorus_doorbell *db) {
  __atomic_store_n(&db->sleeping, 0, __ATOMIC_RELAXED);
}

void chorus_doorbell_ring(chorus_doorbell *db) {
  if (SLEEPER(db)) {
    __atomic_add_fetch(&db->seq, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &db->seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
  }
}

void chorus_doorbell_sleep(chorus_doorbell *db, uint32_t seen, int64_t timeout_ns) {
  if (timeout_ns > 0) {
    struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
    syscall(SYS_futex, &db->seq, FUTEX_WAIT, seen, &ts, NULL, 0);
  }
  __atomic_store_n(&db->sleeping, 0, __ATOMIC_RELAXED);
}
