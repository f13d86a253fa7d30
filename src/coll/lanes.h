/*
 * lanes.h - shares of cut calls run at once, each on a communicator of
 * its own (a lane: its own connections and thread), so that one call
 * across the network is moved by several threads and sockets instead of
 * the caller's thread alone.
 *
 * Lane 0 is the caller's: it runs its share however it runs calls, between
 * chorus_lanes_begin and chorus_lanes_end. Lanes 1..n-1 each have a thread
 * that runs its list of calls (filled through chorus_lanes_clear and
 * chorus_lanes_push while no run is under way) as one group on its
 * communicator. Every rank cuts a call the same way, so lane k's share
 * meets its peers' lane k shares.
 */
#ifndef CHORUS_COLL_LANES_H
#define CHORUS_COLL_LANES_H

#include "coll/op.h"

#define CHORUS_LANES_MAX 8

typedef struct chorus_lanes chorus_lanes;

/* Threads for lanes 1..n-1 (n <= CHORUS_LANES_MAX), lane k's calls on
 * cc[k]; their log lines carry *log_ctx, or where NULL their own
 * communicator's (so that a lane stopped after lane 0 failed does not
 * overwrite the first cause in lane 0's last error). */
ncclResult_t chorus_lanes_start(chorus_lanes **out, chorus_coll_comm *const *cc, int n,
                                const chorus_log_ctx *log_ctx);
/* Ends the threads (between runs) and frees; NULL is fine. */
void chorus_lanes_free(chorus_lanes *ln);
/* How many lanes: the n it was started with. */
int chorus_lanes_count(const chorus_lanes *ln);
/* Lane k's communicator (0: the one given as cc[0]). */
chorus_coll_comm *chorus_lanes_comm(const chorus_lanes *ln, int k);
/* Lane k's list (1 <= k < n), emptied, with room for `room` calls. */
ncclResult_t chorus_lanes_clear(chorus_lanes *ln, int k, int room);
/* Appends a call to lane k's list (within the room asked for). */
void chorus_lanes_push(chorus_lanes *ln, int k, const chorus_op *op);
/* Starts lanes 1..n-1 on their lists. */
void chorus_lanes_begin(chorus_lanes *ln, int n);
/* After lane 0's share ended with `mine`: where it failed, stops the
 * others (their peers may wait for shares that never come, as where a
 * peer cut the call differently), then waits for lanes 1..n-1. Returns
 * the first failure, lane 0's before the others'. */
ncclResult_t chorus_lanes_end(chorus_lanes *ln, int n, ncclResult_t mine);
/* Runs ops[0, n), all on one communicator, as one group: prepared,
 * executed to the end and released. */
ncclResult_t chorus_lanes_run_calls(chorus_op *ops, int n);

#endif
