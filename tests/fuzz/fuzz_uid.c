/*
 * fuzz_uid.c - ncclUniqueId bytes from the user (uninitialised memory, an
 * id of another library, a corrupted broadcast) through
 * chorus_uid_unpack. Property: an id it accepts packs and unpacks to the
 * same id.
 */
#include "bootstrap/uid.h"
#include "fuzz.h"

FUZZ_QUIET_INIT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  memcpy(&id, data, size < sizeof id ? size : sizeof id);
  chorus_uid uid;
  if (chorus_uid_unpack(&id, &uid, "fuzz") != ncclSuccess) return 0;
  ncclUniqueId again;
  chorus_uid_pack(&uid, &again);
  chorus_uid back;
  FUZZ_REQUIRE(chorus_uid_unpack(&again, &back, "fuzz") == ncclSuccess);
  FUZZ_REQUIRE(back.tag == uid.tag && back.version == uid.version && back.flags == uid.flags);
  FUZZ_REQUIRE(memcmp(back.secret, uid.secret, sizeof uid.secret) == 0);
  FUZZ_REQUIRE(memcmp(&back.root, &uid.root, sizeof uid.root) == 0);
  return 0;
}
