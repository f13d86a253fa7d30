/*
 * bootstrap.h - a rank's side of the bootstrap: rendezvous, then an
 * out-of-band network among the ranks for the rest of initialisation.
 *
 * chorus_bootstrap_init meets the root (see root.h), learns every rank's
 * listening address, and links the ranks in a ring of TCP connections. On top
 * of that it offers:
 *   - allgather and barrier over the ring (used while building a communicator,
 *     never on the data path);
 *   - tagged point-to-point messages (used by split/shrink);
 *   - a connection service: transports open their own sockets to a peer
 *     through it, so every connection is authenticated by the job's secret
 *     and matched to (peer, kind, tag) whatever order they arrive in.
 * Every wait has a deadline (CHORUS_BOOTSTRAP_TIMEOUT) and watches an abort
 * flag, so a missing rank is an error naming it and ncclCommAbort can stop an
 * init in progress.
 *
 * Not thread-safe: one thread uses a bootstrap at a time (the thread that
 * initialises or operates on the communicator).
 */
#ifndef CHORUS_BOOTSTRAP_BOOTSTRAP_H
#define CHORUS_BOOTSTRAP_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/hello.h"
#include "bootstrap/uid.h"
#include "nccl.h"

typedef struct chorus_bootstrap {
  int rank, nranks;
  uint64_t secret[2];
  int listen_fd;
  chorus_sockaddr listen_addr;
  chorus_sockaddr *addrs; /* every rank's listener */
  int next_fd, prev_fd;   /* the ring; -1 when nranks == 1 */
  /* The challenges the ring's links answered ([0] to next, [1] from
   * prev), when linked: a failure word on them needs no fresh one. */
  uint8_t ring_nonce[2][CHORUS_NONCE_BYTES];
  int ring_linked;
  chorus_acceptor acc;
  chorus_arrival *unexpected; /* arrived, not yet claimed */
  int nunexpected, cap_unexpected;
  int64_t timeout_ns;
  const int *abort_flag;         /* may be NULL */
  char cause[CHORUS_FAIL_BYTES]; /* a neighbour's init failed: its first cause (PEER_FAIL) */
} chorus_bootstrap;

/* Joins the rendezvous of `uids` (nids of them; ncclCommInitRankScalable
 * passes several). On failure *out is NULL and the error is recorded. */
ncclResult_t chorus_bootstrap_init(chorus_bootstrap **out, const chorus_uid *uids, int nids,
                                   int nranks, int rank, const int *abort_flag);
void chorus_bootstrap_destroy(chorus_bootstrap *bs);
/* A rank that fails before it reached the rendezvous (or before it began
 * the bootstrap at all) tells its root, best effort and within 1 s, with
 * the reason recorded as this thread's last error: the root then fails
 * the rendezvous for every rank at once, naming this one, instead of
 * waiting for it until the bootstrap timeout. */
void chorus_bootstrap_give_up(const chorus_uid *uids, int nids, int nranks, int rank);
/* The communicator's init failed: shuts the ring down now (peers blocked
 * on it see the end at once), then tells both ring neighbours the first
 * cause (a neighbour's, when one came, else this thread's last error),
 * best effort and briefly, before the slower cleanup: a rank that sees
 * the ring end waits a moment for that word, fails with it, and passes
 * it on, so every rank names the rank that failed first, not the
 * neighbour that told it. Destroy still frees bs. */
void chorus_bootstrap_fail(chorus_bootstrap *bs);

/* This rank's init failed in a way that a peer's earlier failure may
 * explain (a peer's shared memory gone before this rank mapped it): waits
 * briefly for a neighbour's word of the first cause. ncclRemoteError with
 * that cause recorded as this thread's error, or ncclInProgress when no
 * word came (the caller reports its own error). */
ncclResult_t chorus_bootstrap_hear_failure(chorus_bootstrap *bs);

/* data holds nranks blocks of `size` bytes; this rank's block is filled in;
 * on return all are. */
ncclResult_t chorus_bootstrap_allgather(chorus_bootstrap *bs, void *data, size_t size);
ncclResult_t chorus_bootstrap_barrier(chorus_bootstrap *bs);

/* One message to/from a peer, matched by tag. */
ncclResult_t chorus_bootstrap_send(chorus_bootstrap *bs, int peer, uint64_t tag, const void *data,
                                   size_t size);
ncclResult_t chorus_bootstrap_recv(chorus_bootstrap *bs, int peer, uint64_t tag, void *data,
                                   size_t size);

/* Connection service for transports: the connecting side and the accepting
 * side name the same (kind = CHORUS_HELLO_PEER_DATA, tag). *fd is a
 * non-blocking socket owned by the caller. */
ncclResult_t chorus_bootstrap_connect(chorus_bootstrap *bs, int peer, uint64_t tag, int *fd);
ncclResult_t chorus_bootstrap_accept(chorus_bootstrap *bs, int peer, uint64_t tag, int *fd);

#endif
