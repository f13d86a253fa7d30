/*
 * fuzz_netplug.c - what a network plugin reports about its devices, in
 * every version's layout, through the loader's check
 * (chorus_net_props_adapt). A plugin is code we did not write: whatever
 * its getProperties fills in, the loader must reject it with a reason or
 * give the transport values it can use. Input: a byte picking the ABI
 * version (6-11, or any small number), a byte of flags and a raw length,
 * then the structure's bytes; the string pointers are NULL or point at
 * text taken from the input.
 * Properties of an accepted device: host memory taken, 1..8 buffers per
 * receive, a positive speed, a finite latency, a largest message within
 * 1 TiB (1 GiB for versions 6-8), NUL-terminated names.
 */
#include <math.h>

#include "fuzz.h"
#include "transport/plugin/ext_net.h"
#include "transport/plugin/netplug.h"

FUZZ_QUIET_INIT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  const int version = data[0] >= 240 ? data[0] - 240 : 6 + data[0] % 6;
  const uint8_t flags = data[1];
  union {
    ncclNetProperties_v11_t v11;
    unsigned char bytes[128];
  } raw;
  memset(&raw, 0, sizeof raw);
  const size_t body = size - 2 < sizeof raw ? size - 2 : sizeof raw;
  memcpy(raw.bytes, data + 2, body);
  char name[80], pci[80];
  fuzz_text(data + 2 + body, size - 2 - body, name, sizeof name);
  snprintf(pci, sizeof pci, "%s", name[0] ? name + 1 : "");
  char *const pname = flags & 1 ? name : NULL, *const ppci = flags & 2 ? pci : NULL;
  memcpy(raw.bytes, &pname, sizeof pname); /* name and pciPath lead every version */
  memcpy(raw.bytes + sizeof pname, &ppci, sizeof ppci);
  const size_t len = flags & 4 ? (size_t)(flags >> 3) * 4 : sizeof raw;
  chorus_net_props p;
  char err[256];
  if (chorus_net_props_adapt(version, &raw, len, &p, err, sizeof err) != 0) {
    FUZZ_REQUIRE(memchr(err, '\0', sizeof err) != NULL && err[0]);
    return 0;
  }
  FUZZ_REQUIRE(version >= 6 && version <= 11);
  FUZZ_REQUIRE(p.ptr_support & NCCL_PTR_HOST);
  FUZZ_REQUIRE(p.max_recvs >= 1 && p.max_recvs <= CHORUS_NET_MAX_RECVS);
  FUZZ_REQUIRE(p.max_comms >= 1 && p.speed_mbps > 0 && p.max_multi_request >= 1);
  FUZZ_REQUIRE(isfinite(p.latency_us) && p.latency_us >= 0);
  FUZZ_REQUIRE(p.max_p2p_bytes >= 1 && p.max_p2p_bytes <= ((size_t)1 << 40));
  FUZZ_REQUIRE(version > 8 || p.max_p2p_bytes <= ((size_t)1 << 30));
  FUZZ_REQUIRE(memchr(p.name, '\0', sizeof p.name) && memchr(p.pci_path, '\0', sizeof p.pci_path));
  return 0;
}
