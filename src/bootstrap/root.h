/*
 * root.h - the rendezvous root.
 *
 * A root is a detached thread with a listening socket. Ranks connect, present
 * the secret and their own listening address; once every expected rank has
 * arrived the root sends each of them the table of all addresses and exits.
 * Ranks never have to be started in any order, and a rank that never arrives
 * turns into an error (naming it) on every rank that did, after
 * CHORUS_BOOTSTRAP_TIMEOUT counted from the first arrival.
 *
 * Scalable init (nroots > 1): root k serves a contiguous block of ranks; when
 * its block is complete it forwards the block to root 0, which assembles the
 * full table and returns it to every sub-root.
 */
#ifndef CHORUS_BOOTSTRAP_ROOT_H
#define CHORUS_BOOTSTRAP_ROOT_H

#include <stdint.h>

#include "nccl.h"
#include "util/socket.h"

/* Starts a root listening on bind_addr (port 0: any). *bound receives the
 * address to publish. */
ncclResult_t chorus_root_start(const chorus_sockaddr *bind_addr, const uint64_t secret[2],
                               chorus_sockaddr *bound);

/* The cause of a failure of this process's root with that secret itself
 * (out of memory: ncclSystemError), or ncclSuccess: ranks in the process
 * that hosts their root report its own cause, as for any failure of
 * their process. */
ncclResult_t chorus_root_local_cause(const uint64_t secret[2]);

#endif
