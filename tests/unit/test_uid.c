/*
 * test_uid.c - unique ids: packing round-trips, garbage is rejected,
 * NCCL_COMM_ID gives every process the same id (keyed by the job's key),
 * and address parsing.
 */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/uid.h"
#include "unit.h"

static void pack_roundtrip_and_garbage(void) {
  chorus_uid u, v;
  memset(&u, 0, sizeof u);
  u.tag = CHORUS_UID_TAG;
  u.version = CHORUS_UID_VERSION;
  u.secret[0] = 1, u.secret[1] = 2;
  char err[128];
  REQUIRE(chorus_sock_parse("127.0.0.1:1234", &u.root, err, sizeof err) == ncclSuccess);
  ncclUniqueId id;
  chorus_uid_pack(&u, &id);
  EXPECT(chorus_uid_unpack(&id, &v, "test") == ncclSuccess);
  EXPECT(memcmp(&u, &v, sizeof u) == 0);
  memset(&id, 0x5a, sizeof id);
  EXPECT(chorus_uid_unpack(&id, &v, "test") == ncclInvalidArgument);
  memset(&id, 0, sizeof id);
  EXPECT(chorus_uid_unpack(&id, &v, "test") == ncclInvalidArgument);
}

static void comm_id_is_deterministic(void) {
  setenv("NCCL_COMM_ID", "127.0.0.1:45678", 1);
  chorus_uid a, b;
  REQUIRE(chorus_uid_create(&a) == ncclSuccess);
  REQUIRE(chorus_uid_create(&b) == ncclSuccess);
  EXPECT(memcmp(&a, &b, sizeof a) == 0);
  EXPECT(a.flags & CHORUS_UID_FIXED_ROOT);
  EXPECT_EQ_INT(chorus_sock_port(&a.root), 45678);
  /* The job's key enters the secret: the same key, the same secret;
   * another key (another job at the same address), another secret. */
  setenv("CHORUS_JOB_KEY", "job-one", 1);
  chorus_uid k1, k1b, k2;
  REQUIRE(chorus_uid_create(&k1) == ncclSuccess);
  REQUIRE(chorus_uid_create(&k1b) == ncclSuccess);
  setenv("CHORUS_JOB_KEY", "job-two", 1);
  REQUIRE(chorus_uid_create(&k2) == ncclSuccess);
  EXPECT(memcmp(k1.secret, k1b.secret, sizeof k1.secret) == 0);
  EXPECT(memcmp(k1.secret, k2.secret, sizeof k1.secret) != 0);
  EXPECT(memcmp(k1.secret, a.secret, sizeof k1.secret) != 0);
  unsetenv("CHORUS_JOB_KEY");
  /* A launcher's job id serves when there is no key. */
  setenv("SLURM_JOB_ID", "4242", 1);
  chorus_uid s1;
  REQUIRE(chorus_uid_create(&s1) == ncclSuccess);
  EXPECT(memcmp(s1.secret, a.secret, sizeof s1.secret) != 0);
  unsetenv("SLURM_JOB_ID");
  setenv("NCCL_COMM_ID", "no-port", 1);
  EXPECT(chorus_uid_create(&a) == ncclInvalidArgument);
  unsetenv("NCCL_COMM_ID");
}

static void address_parsing(void) {
  chorus_sockaddr a;
  char err[128], s[CHORUS_ADDR_STRLEN];
  EXPECT(chorus_sock_parse("[::1]:80", &a, err, sizeof err) == ncclSuccess);
  EXPECT_STREQ(chorus_sock_str(&a, s, sizeof s), "[::1]:80");
  EXPECT(chorus_sock_parse("localhost:99", &a, err, sizeof err) == ncclSuccess);
  EXPECT_EQ_INT(chorus_sock_port(&a), 99);
  EXPECT(chorus_sock_parse("1.2.3.4:70000", &a, err, sizeof err) == ncclInvalidArgument);
  EXPECT(chorus_sock_parse("1.2.3.4", &a, err, sizeof err) == ncclInvalidArgument);
  EXPECT(chorus_sock_parse("[::1", &a, err, sizeof err) == ncclInvalidArgument);
}

int main(void) {
  RUN(pack_roundtrip_and_garbage);
  RUN(comm_id_is_deterministic);
  RUN(address_parsing);
  return unit_report();
}
