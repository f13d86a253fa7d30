/*
 * calls.h - the call board: every rank checks every other rank's call.
 *
 * A collective's messages carry its description (chorus_msg_meta), so a
 * rank that receives data of another call notices. But a rank need not
 * hear from every other: a Broadcast's root receives nothing, a Reduce's
 * non-roots only send, a Gather's ranks talk to the root alone. A rank
 * whose call differs from its peers' could then return success, or every
 * rank could wait for data that a differing call never sends.
 *
 * Where every rank of a communicator shares node memory, each rank also
 * posts the description of each collective, in call order, on a board in
 * its node memory as it issues the call (no message, no wait). While a
 * call waits, and when it fails, a rank compares the descriptions its
 * peers posted for that call with its own: calls that wait on each other
 * because they differ are an error at once, on every rank, naming both.
 * A call of a rooted function (Broadcast, Reduce, Gather, Scatter), where
 * a rank may not hear from some peers, is compared later, in a batch:
 * CHORUS_CALLS_LAG calls on (waiting then for peers not there yet, so a
 * root runs ahead of the slowest rank by at most that many calls), or as
 * soon as a later call waits long or fails. Each entry also carries a
 * hash of its owner's whole call history, so a batch reads one entry per
 * peer; only a difference is looked for call by call. A rank that needed
 * nothing from the one that differs thus reports the mismatch at most
 * CHORUS_CALLS_LAG calls later; its own results were what its call
 * asked for. The other functions hear from every rank, directly or
 * around a ring whose every hop compares, and only post.
 * (Across hosts, where there is no node memory, messages' descriptions
 * remain the only check.)
 */
#ifndef CHORUS_COLL_CALLS_H
#define CHORUS_COLL_CALLS_H

#include "coll/op.h"

/* Calls a rank may end before every peer's description of an earlier
 * rooted call is compared (below CHORUS_NODE_CALLS, the board's depth). */
#define CHORUS_CALLS_LAG 64

/* Whether op is checked on the board: a collective of a communicator of
 * several ranks in node memory. */
int chorus_calls_on_board(const chorus_op *op);

/* Posts op's description (chorus_op_stamp filled op->meta); nothing when
 * op is not on the board. */
void chorus_calls_post(const chorus_op *op);

/* Compares call (a description of this rank's) with what cc's other
 * ranks posted for the same call: ncclInvalidUsage (logged, naming both
 * calls) when one differs; with wait, ncclInProgress while a peer has not
 * posted it yet (the others compared); else ncclSuccess. For
 * communicators with a board only. */
ncclResult_t chorus_calls_check(const chorus_coll_comm *cc, const chorus_msg_meta *call, int wait);

/* Collective op's schedule ended: the board's checks of this and of
 * earlier unchecked calls (above). ncclInProgress while it must wait for
 * a peer's post; ncclInvalidUsage on a mismatch. */
ncclResult_t chorus_calls_end(chorus_op *op);

/* Compares the unchecked calls before upto with every peer's, through
 * the hashes of call upto - 1; with wait, ncclInProgress while a peer has
 * not posted it, else ncclSuccess (compared later). */
ncclResult_t chorus_calls_catch_up(chorus_coll_comm *cc, uint64_t upto, int wait);

#endif
