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
 * So each rank also posts the description of its calls, in call order, on
 * a board its peers read (no message of its own, no wait): in shared
 * memory for the peers on its host, where a post is a store, and as a
 * note, on a socket beside the data's, to the peers over the network
 * (transport.h: post_call, heard). With node memory (every rank on one
 * host) every collective is posted; otherwise only the calls of rooted
 * functions (Broadcast, Reduce, Gather, Scatter): the other functions
 * need every rank's data to reach every rank, so a rank whose call
 * differs either sends a peer a message of the wrong call, which that
 * peer reports, or starves one, which then waits and compares its call
 * with the notes. Either way a peer that fails passes its first cause on
 * to every rank it reaches.
 *
 * While a call waits, and when it fails, a rank compares the descriptions
 * its peers posted for that call with its own: calls that wait on each
 * other because they differ are an error at once, on every rank, naming
 * both. A call of a rooted function, where a rank may not hear from some
 * peers, is compared later, in a batch: CHORUS_CALLS_LAG calls on, up
 * to the call CHORUS_CALLS_HELD calls back (a transport may hold entries
 * that young back: transport.h), waiting then for peers not there yet, so
 * a root runs ahead of the slowest rank by at most that many calls; or as
 * soon as a later call waits long or fails. Each entry also carries a hash of its owner's
 * posted calls so far, so a batch reads one entry per peer; only a
 * difference is looked for call by call. A rank that needed nothing from
 * the one that differs thus reports the mismatch at most CHORUS_CALLS_LAG
 * calls later (sooner when a peer's failure reaches it); its own results
 * were what its call asked for.
 */
#ifndef CHORUS_COLL_CALLS_H
#define CHORUS_COLL_CALLS_H

#include "coll/op.h"

/* Calls a rank may end before every peer's description of an earlier
 * rooted call is compared (below CHORUS_NODE_CALLS, the board's depth). */
#define CHORUS_CALLS_LAG 64

/* Whether op is checked on the board: a collective of a communicator of
 * several ranks with a board (cc->mine). */
int chorus_calls_on_board(const chorus_op *op);

/* Posts op's description m (what chorus_op_stamp returned, and stored
 * in op->meta) where the board takes it (above); nothing when op is not
 * on the board. From the stamp's value, not op->meta: wide loads of the
 * narrow stores just made there stall store forwarding. */
void chorus_calls_post(const chorus_op *op, const chorus_msg_meta *m);

/* Compares call (a description of this rank's) with what cc's other
 * ranks posted for the same call: ncclInvalidUsage (logged, naming both
 * calls) when one differs; ncclRemoteError, with *failed set to its
 * connection, when a peer reported a failure; else ncclSuccess. */
ncclResult_t chorus_calls_check(const chorus_coll_comm *cc, const chorus_msg_meta *call,
                                chorus_conn **failed);

/* Collective op's schedule ended: the board's checks of this and of
 * earlier unchecked calls (above). ncclInProgress while it must wait for
 * a peer's post (op->wait_conn names that peer's connection);
 * ncclInvalidUsage on a mismatch. */
ncclResult_t chorus_calls_end(chorus_op *op);

/* Compares the unchecked calls before upto with every peer's, through
 * the hashes of the last of them; ncclSuccess also while a peer has not
 * posted it yet (compared later). */
ncclResult_t chorus_calls_catch_up(chorus_coll_comm *cc, uint64_t upto);

#endif
