/*
 * fuzz_config.c - an ncclConfig_t as a program may pass it (fields of any
 * value, an older or garbled size and version, strings of any bytes)
 * through chorus_config_parse. Property: a config it accepts comes back
 * whole (this library's size, magic and version) and frees cleanly.
 */
#include <stddef.h>

#include "core/config.h"
#include "fuzz.h"

FUZZ_QUIET_INIT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ncclConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  const size_t n = size < sizeof cfg ? size : sizeof cfg;
  memcpy(&cfg, data, n);
  /* The string fields point at text from the rest of the input (or are
   * NULL); what a program passes is readable memory. */
  char text[2][64];
  const uint8_t *rest = data + n;
  size_t left = size - n;
  for (int i = 0; i < 2; i++) {
    const size_t k = left < 32 ? left : 32;
    fuzz_text(rest, k, text[i], sizeof text[i]);
    rest += k;
    left -= k;
  }
  cfg.netName = (cfg.splitShare & 1) ? text[0] : NULL;
  cfg.commName = (cfg.splitShare & 2) ? text[1] : NULL;
  /* Half the inputs keep the fields but are otherwise well formed. */
  if (size && (data[0] & 1)) {
    cfg.size = sizeof cfg;
    cfg.magic = 0xcafebeef;
  }
  if (cfg.size > sizeof cfg) cfg.size = sizeof cfg;
  ncclConfig_t out;
  if (chorus_config_parse(&cfg, NULL, &out, "fuzz") != ncclSuccess) return 0;
  FUZZ_REQUIRE(out.size == sizeof out && out.magic == 0xcafebeef);
  FUZZ_REQUIRE(out.version == NCCL_VERSION_CODE);
  chorus_config_free(&out);
  return 0;
}
