/*
 * uid.h - what a Chorus ncclUniqueId holds.
 *
 * The 128 opaque bytes carry the rendezvous root's address and a random
 * 128-bit secret. Every connection a rank makes (to the root or to a peer)
 * starts with the secret, so strays and stale jobs are turned away. With
 * NCCL_COMM_ID the address is fixed and the secret is derived from it, so all
 * ranks compute the same id on their own; rank 0 then starts the root.
 */
#ifndef CHORUS_BOOTSTRAP_UID_H
#define CHORUS_BOOTSTRAP_UID_H

#include <stdint.h>

#include "nccl.h"
#include "util/socket.h"

#define CHORUS_UID_TAG        0x524f4843u /* "CHOR" */
#define CHORUS_UID_VERSION    1u
#define CHORUS_UID_FIXED_ROOT 0x1u /* NCCL_COMM_ID: rank 0 hosts the root */

typedef struct chorus_uid {
  uint32_t tag;
  uint32_t version;
  uint64_t secret[2];
  chorus_sockaddr root;
  uint32_t flags;
} chorus_uid;

_Static_assert(sizeof(chorus_uid) <= NCCL_UNIQUE_ID_BYTES, "uid must fit in ncclUniqueId");

void chorus_uid_pack(const chorus_uid *uid, ncclUniqueId *out);
/* Fails with ncclInvalidArgument (and a WARN naming `what`) if the bytes are
 * not a Chorus id (uninitialised memory, an id from another library). */
ncclResult_t chorus_uid_unpack(const ncclUniqueId *in, chorus_uid *uid, const char *what);

/* Creates a fresh id: starts a root listener in this process (or, with
 * NCCL_COMM_ID, only encodes that address). */
ncclResult_t chorus_uid_create(chorus_uid *uid);
/* Always a fresh root with a random secret, ignoring NCCL_COMM_ID (for
 * communicators derived from another: split, shrink). The root listens on
 * `near`'s address (port ignored) when given, else on the interface chosen
 * as for ncclGetUniqueId. */
ncclResult_t chorus_uid_create_private(chorus_uid *uid, const chorus_sockaddr *near);

#endif
