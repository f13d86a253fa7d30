/*
 * fence.h - asymmetric fences: a cheap one on a hot path, a costly one on
 * a rare path, that together order what a full fence on each side would.
 *
 * The pattern (Dekker's, split unevenly): the hot side stores its flag,
 * chorus_fence_light(), loads the other's; the rare side stores its flag,
 * chorus_fence_heavy(), loads the hot side's. One of the two sees the
 * other's store. The heavy fence makes every running thread of this
 * process execute a full barrier (Linux membarrier, private expedited);
 * the light one then only has to keep the compiler from moving the load
 * above the store. Where the kernel has no such membarrier, both are full
 * fences (chorus_fence_init decides, before any hot side runs).
 *
 * chorus_fence_global is the heavy fence across processes: every running
 * thread of every process that registered (chorus_fence_init does)
 * executes a full barrier (membarrier, global expedited). A process whose
 * threads take the light side against another process's heavy one must be
 * registered (chorus_fence_global_target) and the other able to issue it
 * (chorus_fence_global_issuer).
 */
#ifndef CHORUS_UTIL_FENCE_H
#define CHORUS_UTIL_FENCE_H

/* ThreadSanitizer models no fences (GCC refuses them under it) nor
 * membarrier: its builds order both sides by read-modify-writes of one
 * shared word, which it does model, and which order as fences do. */
#if defined(__SANITIZE_THREAD__)
#define CHORUS_FENCE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHORUS_FENCE_TSAN 1
#endif
#endif
#ifdef CHORUS_FENCE_TSAN
extern int chorus_fence_word;
#define CHORUS_FENCE_FULL() ((void)__atomic_fetch_add(&chorus_fence_word, 0, __ATOMIC_SEQ_CST))
#else
#define CHORUS_FENCE_FULL() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

/* 1 when the heavy fence is a full fence only (no membarrier, or a
 * ThreadSanitizer build): the light one must then fence too. Set once by
 * chorus_fence_init. */
extern int chorus_fence_full;

/* Registers this process for the heavy fence; idempotent, thread safe. */
void chorus_fence_init(void);

static inline void chorus_fence_light(void) {
  if (__builtin_expect(chorus_fence_full, 0))
    CHORUS_FENCE_FULL();
  else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void chorus_fence_heavy(void);

/* This process is registered for global heavy fences / can issue them. */
extern int chorus_fence_global_target, chorus_fence_global_issuer;
/* The heavy fence across registered processes (a full fence when this
 * process cannot issue it: callers check chorus_fence_global_issuer
 * first, as a full fence alone orders nothing against a light side). */
void chorus_fence_global(void);

#endif
