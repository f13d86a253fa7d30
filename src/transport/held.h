/*
 * held.h - when the call-board notes that a network transport holds back
 * go (transport.h: CHORUS_CALLS_HELD, advance, stalled). The TCP
 * transport (net/) and the one over network plugins (plugin/) keep their
 * queued notes alike.
 *
 * With one peer across the network a note goes with its call: held, 8-512
 * B rooted calls measured 3-10% slower (2 ranks, loopback and veth)
 * against at most 17% faster from 4 KiB, and on another guest Reduce and
 * Scatter 6-25% slower below 4 KiB against 1.1-1.6x faster from there
 * (bench/results/host_hosts_ab_2026-12-02_held_one_peer.txt). With more,
 * a send per peer and call cost too much (over veth the writer also runs
 * the peer's receive path: with 4 ranks on 2 vCPUs, 16-64 KiB Gather,
 * Scatter, Broadcast and Reduce between namespace hosts 1.5-2.2x slower),
 * so the notes wait until the oldest is CHORUS_CALLS_HELD calls old or a
 * call of this rank stalls, and then go together. No peer waits on a
 * held note: the checks that wait look CHORUS_CALLS_HELD calls back
 * (coll/calls.c).
 */
#ifndef CHORUS_TRANSPORT_HELD_H
#define CHORUS_TRANSPORT_HELD_H

#include <stdint.h>

#include "transport/transport.h"

typedef struct chorus_held {
  uint64_t seq_now; /* the call this rank is at (posted, or advance) */
  int due;          /* a call stalled: everything held goes (stalled) */
} chorus_held;

/* Whether notes whose oldest is call oldest_seq go now, for a rank with
 * npeers peers across the network. */
static inline int chorus_held_go(const chorus_held *h, int npeers, uint64_t oldest_seq) {
  return npeers < 2 || h->due || oldest_seq + CHORUS_CALLS_HELD <= h->seq_now;
}

/* A call of this rank stalled (transport.h: stalled). */
static inline void chorus_held_stall(chorus_held *h, int npeers) {
  if (npeers) h->due = 1;
}

#endif
