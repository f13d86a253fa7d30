/*
 * doorbell.h - wake a waiting rank, across threads or processes.
 *
 * Each rank owns one doorbell, placed in memory its peers can reach (its
 * shared-memory segment). A peer that makes progress possible for the owner
 * (posts data, frees a slot) rings it; the owner, after spinning without
 * progress, sleeps on it.
 *
 * Protocol (no lost wake-ups):
 *   owner:  v = chorus_doorbell_read(db); announce sleeping; re-check all
 *           conditions; if none is met, chorus_doorbell_sleep(db, v, ...).
 *   peer:   publish the change (release store), then chorus_doorbell_ring(db).
 * ring() increments seq (seq_cst) and calls futex_wake only when the owner
 * announced it sleeps, so the common case costs one atomic increment. If the
 * ring lands between the owner's read and its sleep, seq != v and the futex
 * wait returns at once.
 *
 * The futex is not FUTEX_PRIVATE: the word may live in a shared mapping.
 */
#ifndef CHORUS_UTIL_DOORBELL_H
#define CHORUS_UTIL_DOORBELL_H

#include <stdint.h>

typedef struct chorus_doorbell {
  uint32_t seq;      /* bumped by every ring (writers: peers; reader: owner) */
  uint32_t sleeping; /* 1 while the owner may be in futex wait (writer: owner) */
} chorus_doorbell;

static inline uint32_t chorus_doorbell_read(chorus_doorbell *db) {
  return __atomic_load_n(&db->seq, __ATOMIC_SEQ_CST);
}

void chorus_doorbell_ring(chorus_doorbell *db);

/* Sleeps while seq == seen, at most timeout_ns; spurious returns are fine.
 * Sets and clears the sleeping flag around the wait. */
void chorus_doorbell_sleep(chorus_doorbell *db, uint32_t seen, int64_t timeout_ns);

/* Processor pause for spin loops. */
static inline void chorus_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
