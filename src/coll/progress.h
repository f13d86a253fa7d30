/*
 * progress.h - what a communicator's calls are doing, for the stuck report
 * and the state dump (core/status.h).
 *
 * The thread that issues a call records it here (its description, its
 * number among the communicator's collectives, when); the executor records
 * when a host call stalls and on whom it waits, and when calls end. The
 * status thread reads it, for this rank's own report and to answer its
 * peers', while the calls go on. The calls' path takes no lock: a few
 * atomic stores per call.
 *
 * Collectives are numbered from 0 in the order the application issued
 * them on the communicator, the numbers every rank agrees on (a call's
 * internal sequence number also counts helper calls). Point-to-point
 * calls are counted apart.
 */
#ifndef CHORUS_COLL_PROGRESS_H
#define CHORUS_COLL_PROGRESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* One call as the application issued it. */
typedef struct chorus_call_desc {
  uint64_t index; /* collectives: number on the communicator; point-to-point: the ticket */
  uint64_t count;
  int32_t func, dtype, redop, root; /* root or peer: -1 none; redop: NCCL value or -1 */
} chorus_call_desc;

/* Collectives remembered with their issue times. */
#define CHORUS_PROGRESS_RECENT 16

/* A remembered call: a sequence lock as the call board's entries
 * (transport.h): `seq` is its index + 1 once written, UINT64_MAX while
 * its (single) writer rewrites it. */
typedef struct chorus_progress_slot {
  uint64_t seq;
  chorus_call_desc d;
  int64_t ns; /* issued at (CLOCK_MONOTONIC, coarse) */
} chorus_progress_slot;

typedef struct chorus_progress {
  /* Written by the thread that issues calls (one at a time, as NCCL
   * requires of a communicator) without a lock. */
  uint64_t issued, p2p_issued;                         /* atomic */
  chorus_progress_slot recent[CHORUS_PROGRESS_RECENT]; /* collective k at k % RECENT */
  chorus_progress_slot last_p2p;
  uint64_t ended, p2p_ended; /* atomic: ended (completed, or handed to a GPU) */
  /* GPU communicators: an event recorded after a launch (at most one a
   * millisecond), so the status thread learns what the GPU finished
   * (core/status.c); the last launch, followed or not. */
  void *gpu_event;     /* made by the launching thread on first use */
  uint64_t gpu_follow; /* atomic: 1 + the collective it follows; 0: none yet */
  int64_t gpu_since;   /* atomic: when it was last recorded (coarse clock) */
  uint64_t gpu_done;   /* atomic: collectives the GPU is known to have finished */
  uint64_t gpu_tail;   /* atomic: 1 + the last collective launched */
  int64_t gpu_tail_ns; /* atomic: when (coarse clock) */
  /* The executor's view of a stalled call, under lock (stall_since 0:
   * none): written a few times a second while a call stalls. */
  pthread_mutex_t lock;
  int64_t stall_since; /* CLOCK_MONOTONIC, when it last moved */
  uint64_t stall_id;   /* bumped per stall: one report per stall */
  chorus_call_desc stall_call;
  int stall_p2p; /* stall_call is a point-to-point call */
  int stall_gpu; /* 1: the GPU has not finished it; 2: not seen to (no event followed it) */
  int wait_peer, wait_dir; /* -1: unknown; CHORUS_DIR_* */
} chorus_progress;

void chorus_progress_init(chorus_progress *p);
void chorus_progress_destroy(chorus_progress *p);

/* The application issued call d (d->index is filled in: the next number
 * of its kind); returns that number. */
uint64_t chorus_progress_issue(chorus_progress *p, chorus_call_desc *d, int p2p);
/* n collectives and m point-to-point calls ended. */
void chorus_progress_end(chorus_progress *p, uint64_t n, uint64_t m);
/* The executor's call d (p2p: point-to-point) has made no progress since
 * `since`, waiting on peer in direction dir (-1: unknown); gpu: a GPU
 * has not finished it since then. */
void chorus_progress_stall(chorus_progress *p, const chorus_call_desc *d, int p2p, int gpu,
                           int64_t since, int peer, int dir);
/* It moved again, or ended. */
void chorus_progress_unstall(chorus_progress *p);

/* A copy of everything, for a reader: each remembered call whole (its
 * `seq` says which call it is, 0 when it was being rewritten). */
typedef struct chorus_progress_view {
  uint64_t issued, ended, p2p_issued, p2p_ended;
  chorus_progress_slot recent[CHORUS_PROGRESS_RECENT];
  chorus_progress_slot last_p2p;
  int64_t stall_since;
  uint64_t stall_id;
  chorus_call_desc stall_call;
  int stall_p2p, stall_gpu, wait_peer, wait_dir;
  uint64_t gpu_done;
} chorus_progress_view;

void chorus_progress_read(chorus_progress *p, chorus_progress_view *out);

/* Collective k from a view: 1 (into *d, issued at *ns), or 0 when the
 * view no longer (or not yet) remembers it. */
int chorus_progress_recent(const chorus_progress_view *v, uint64_t k, chorus_call_desc *d,
                           int64_t *ns);

/* "AllReduce(count=1024, float, sum) #5", "Send(count=8, int8, peer=3) #0". */
void chorus_call_desc_str(const chorus_call_desc *d, char *buf, size_t size);

#endif
