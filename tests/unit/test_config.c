/*
 * test_config.c - ncclConfig_t is read as NCCL reads it: the magic is
 * checked, fields are validated, structs from older headers (smaller, lower
 * version) and newer ones (larger) both work, and NCCL_COMM_BLOCKING
 * overrides. Observable effect used: blocking = 0 makes init return
 * ncclInProgress.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "unit.h"

/* Creates a 1-rank communicator with a raw config image; returns the init
 * result and waits for completion before destroying. */
static ncclResult_t init_with(const void *config) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return ncclInternalError;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, (ncclConfig_t *)config);
  if (comm) {
    ncclResult_t a = ncclInProgress;
    for (int i = 0; i < 10000 && a == ncclInProgress; i++) {
      ncclCommGetAsyncError(comm, &a);
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    if (a != ncclSuccess) r = ncclInternalError;
    ncclCommDestroy(comm);
  }
  return r;
}

static void basic(void) {
  EXPECT(init_with(NULL) == ncclSuccess);
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT(init_with(&c) == ncclSuccess);
  c.blocking = 0;
  EXPECT(init_with(&c) == ncclInProgress);
  c.blocking = 2;
  EXPECT(init_with(&c) == ncclInvalidArgument);
  ncclConfig_t bad;
  memset(&bad, 0, sizeof bad);
  EXPECT(init_with(&bad) == ncclInvalidArgument); /* no magic */
  ncclConfig_t d = NCCL_CONFIG_INITIALIZER;
  d.CTAPolicy = 7;
  EXPECT(init_with(&d) == ncclInvalidArgument);
  ncclConfig_t e = NCCL_CONFIG_INITIALIZER;
  e.minCTAs = 0;
  EXPECT(init_with(&e) == ncclInvalidArgument);
  ncclConfig_t f = NCCL_CONFIG_INITIALIZER;
  f.commName = "named";
  f.netName = "Socket";
  EXPECT(init_with(&f) == ncclSuccess);
}

static void older_and_newer_headers(void) {
  /* A 2.17 caller: the struct ends before splitShare. */
  unsigned char img[128];
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  c.size = offsetof(ncclConfig_t, splitShare);
  c.version = 21700;
  memset(img, 0x7f, sizeof img); /* bytes beyond the caller's struct are garbage */
  memcpy(img, &c, c.size);
  EXPECT(init_with(img) == ncclInProgress);
  /* A 2.13-era version number: blocking did not exist, so it is ignored. */
  c.version = 21300;
  memcpy(img, &c, c.size);
  EXPECT(init_with(img) == ncclSuccess);
  /* A 2.30 caller: 96 bytes, unknown trailing fields. */
  ncclConfig_t n = NCCL_CONFIG_INITIALIZER;
  n.blocking = 0;
  n.size = 96;
  n.version = 23000;
  memset(img, 0, sizeof img);
  memcpy(img, &n, sizeof n);
  memset(img + sizeof n, 0x11, 96 - sizeof n);
  EXPECT(init_with(img) == ncclInProgress);
}

static void env_overrides(void) {
  setenv("NCCL_COMM_BLOCKING", "0", 1);
  EXPECT(init_with(NULL) == ncclInProgress);
  unsetenv("NCCL_COMM_BLOCKING");
  EXPECT(init_with(NULL) == ncclSuccess);
}

/* A size that ends inside a field (here half of netName) leaves that
 * field unset: never half the caller's pointer (fuzz_config found it). */
static void size_cuts_a_field(void) {
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  memset((char *)&user + offsetof(ncclConfig_t, netName), 0x5a, sizeof user.netName);
  user.size = offsetof(ncclConfig_t, netName) + 4;
  EXPECT(init_with(&user) == ncclSuccess);
}

int main(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  RUN(basic);
  RUN(older_and_newer_headers);
  RUN(env_overrides);
  RUN(size_cuts_a_field);
  return unit_report();
}
