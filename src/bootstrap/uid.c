/*
 * uid.c - creating, packing and checking unique ids (see uid.h).
 */
#include "bootstrap/uid.h"

#include <string.h>

#include "bootstrap/root.h"
#include "util/check.h"
#include "util/misc.h"
#include "util/param.h"

void chorus_uid_pack(const chorus_uid *uid, ncclUniqueId *out) {
  memset(out, 0, sizeof *out);
  memcpy(out->internal, uid, sizeof *uid);
}

ncclResult_t chorus_uid_unpack(const ncclUniqueId *in, chorus_uid *uid, const char *what) {
  memcpy(uid, in->internal, sizeof *uid);
  if (uid->tag != CHORUS_UID_TAG || uid->version != CHORUS_UID_VERSION ||
      (uid->root.sa.sa_family != AF_INET && uid->root.sa.sa_family != AF_INET6))
    return chorus_error(ncclInvalidArgument,
                        "%s: the ncclUniqueId was not made by ncclGetUniqueId of this library "
                        "(uninitialised, corrupted in transit, or from another NCCL)",
                        what);
  return ncclSuccess;
}

/* With NCCL_COMM_ID all ranks derive the same secret from the address, so
 * they agree without talking; it still keeps other jobs' strays out. */
static void fixed_secret(const char *text, uint64_t secret[2]) {
  secret[0] = chorus_hash64(text, strlen(text), 0x6368727573ull);
  secret[1] = chorus_hash64(text, strlen(text), 0x636f6d6d6964ull);
}

ncclResult_t chorus_uid_create(chorus_uid *uid) {
  memset(uid, 0, sizeof *uid);
  uid->tag = CHORUS_UID_TAG;
  uid->version = CHORUS_UID_VERSION;
  char err[256];
  const char *fixed = chorus_param_str(CHORUS_P_COMM_ID);
  if (fixed && *fixed) {
    ncclResult_t res = chorus_sock_parse(fixed, &uid->root, err, sizeof err);
    if (res != ncclSuccess) return chorus_error(res, "NCCL_COMM_ID: %s", err);
    fixed_secret(fixed, uid->secret);
    uid->flags = CHORUS_UID_FIXED_ROOT;
    return ncclSuccess;
  }
  return chorus_uid_create_private(uid, NULL);
}

ncclResult_t chorus_uid_create_private(chorus_uid *uid, const chorus_sockaddr *near) {
  memset(uid, 0, sizeof *uid);
  uid->tag = CHORUS_UID_TAG;
  uid->version = CHORUS_UID_VERSION;
  char err[256];
  CHECK(chorus_random_bytes(uid->secret, sizeof uid->secret));
  chorus_sockaddr local;
  if (near) {
    local = *near;
    chorus_sock_set_port(&local, 0);
  } else {
    char ifname[IF_NAMESIZE];
    ncclResult_t res = chorus_sock_pick_local(&local, ifname, err, sizeof err);
    if (res != ncclSuccess) return chorus_error(res, "ncclGetUniqueId: %s", err);
  }
  return chorus_root_start(&local, uid->secret, &uid->root);
}
