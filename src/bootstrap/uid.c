/*
 * uid.c - creating, packing and checking unique ids (see uid.h).
 */
#include "bootstrap/uid.h"

#include <stdio.h>
#include <stdlib.h>
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

/* A value every rank of the job sees alike and a stranger on the network
 * does not: CHORUS_JOB_KEY, else the launcher's job id. NULL: none. */
static const char *job_key(char *buf, size_t len) {
  const char *k = chorus_param_str(CHORUS_P_JOB_KEY);
  if (k && *k) return k;
  const char *slurm = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
  if (slurm && *slurm) {
    snprintf(buf, len, "slurm:%s.%s", slurm, step ? step : "");
    return buf;
  }
  static const char *const ids[] = {"TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE",
                                    "OMPI_MCA_ess_base_jobid"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    const char *v = getenv(ids[i]);
    if (v && *v && strcmp(v, "none") != 0) {
      snprintf(buf, len, "%s:%s", ids[i], v);
      return buf;
    }
  }
  return NULL;
}

/* With NCCL_COMM_ID all ranks derive the same secret, so they agree
 * without talking: from the address and the job's key. Without a key, the
 * address alone keeps other jobs' strays out but not a stranger who knows
 * it, which is worth one WARN per process. */
static void fixed_secret(const char *text, uint64_t secret[2]) {
  char buf[512], keybuf[256];
  const char *key = job_key(keybuf, sizeof keybuf);
  if (!key) {
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
      WARN("NCCL_COMM_ID=%s with no job key: any process that can reach that address can join "
           "the rendezvous. Set CHORUS_JOB_KEY to a secret all ranks share (Slurm, torchrun, "
           "Open MPI and chorusrun jobs get one from the launcher)",
           text);
  }
  const int n = snprintf(buf, sizeof buf, "%s\n%s", text, key ? key : "");
  const size_t len = n < 0 ? 0 : CHORUS_MIN((size_t)n, sizeof buf - 1);
  secret[0] = chorus_hash64(buf, len, 0x6368727573ull);
  secret[1] = chorus_hash64(buf, len, 0x636f6d6d6964ull);
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
