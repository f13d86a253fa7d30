/*
 * doorbell.h - wake a waiting rank, across threads or processes.
 *
 * Each rank owns one doorbell, placed in memory its peers can reach (its
 * shared-memory segment). A peer that makes progress possible for the owner
 * (posts data, frees a slot) rings it; the owner, once polling and yielding
 * found nothing, sleeps on it.
 *
 * Protocol (no lost wake-ups, and no atomic read-modify-write for peers in
 * the common case where the owner is awake):
 *   owner:  chorus_doorbell_prepare(db) announces it is about to sleep and
 *           returns seq; it then re-checks every condition; if none holds it
 *           calls chorus_doorbell_sleep(db, seq, ...), else
 *           chorus_doorbell_cancel(db).
 *   peer:   publish the change (release store), then chorus_doorbell_ring.
 * ring() issues a full fence and reads `sleeping`: the fence pairs with the
 * owner's (store sleeping; full fence; re-check), so either the owner's
 * re-check sees the change or the peer sees `sleeping` and bumps seq and
 * calls futex_wake. A bump that lands between prepare and the futex wait
 * makes the wait return at once (the futex compares seq).
 *
 * The futex is not FUTEX_PRIVATE: the word may live in a shared mapping.
 *
 * A doorbell whose owner sets `fences` (chorus_doorbell_init_fenced)
 * moves the cost of that store-load ordering to the sleeper: prepare
 * issues a heavy fence across processes (util/fence.h), and ring, in a
 * process registered for it, only keeps the compiler from reordering.
 * Ringing is on every small call's path; preparing precedes a sleep.
 */
#ifndef CHORUS_UTIL_DOORBELL_H
#define CHORUS_UTIL_DOORBELL_H

#include <stdint.h>

typedef struct chorus_doorbell {
  uint32_t seq;      /* bumped by rings that find the owner asleep */
  uint32_t sleeping; /* 1 from prepare until the owner is awake again (writer: owner) */
  uint32_t fences;   /* the owner's prepare fences for its ringers; set before any ring */
} chorus_doorbell;

/* Owner, before any peer can ring: take the fenced form where this
 * process can issue the heavy fence. */
void chorus_doorbell_init_fenced(chorus_doorbell *db);

/* Owner: about to sleep; returns the value to pass to sleep. */
uint32_t chorus_doorbell_prepare(chorus_doorbell *db);
/* Owner: found work after prepare after all. */
void chorus_doorbell_cancel(chorus_doorbell *db);
/* Owner: sleeps while seq == seen, at most timeout_ns (spurious returns are
 * fine); clears `sleeping`. */
void chorus_doorbell_sleep(chorus_doorbell *db, uint32_t seen, int64_t timeout_ns);

/* Peer: after publishing a change the owner may wait for. */
void chorus_doorbell_ring(chorus_doorbell *db);

/* Processor pause for spin loops. */
static inline void chorus_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
