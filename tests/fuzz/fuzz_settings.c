/*
 * fuzz_settings.c - the text of settings, as environment variables and
 * config files give it, through their parsers. The first input byte picks
 * the parser, the rest is the text:
 *   0  any variable's value (chorus_param_parse; the next byte picks it)
 *   1  NCCL_ALGO, then a newline, then NCCL_PROTO
 *   2  CHORUS_TUNE (property: every rule accepted formats to text that
 *      parses back to the same rule)
 *   3  NCCL_SOCKET_IFNAME, a newline, an interface name
 *   4  NCCL_COMM_ID's <host>:<port> (split only: never resolved)
 *   5  a line of NCCL_CONF_FILE (property: a name without '=', '#' or
 *      surrounding blanks)
 */
#include <ctype.h>

#include "algo/algos.h"
#include "algo/rules.h"
#include "fuzz.h"
#include "util/param.h"
#include "util/socket.h"

FUZZ_QUIET_INIT

static void tune(const char *text) {
  chorus_rule rules[CHORUS_RULES_MAX];
  size_t n = 0;
  char err[256];
  if (chorus_rules_parse(text, rules, CHORUS_RULES_MAX, &n, err, sizeof err) != 0) return;
  FUZZ_REQUIRE(n <= CHORUS_RULES_MAX);
  for (size_t i = 0; i < n; i++) {
    char once[256], twice[256];
    chorus_rule_format(&rules[i], once, sizeof once);
    chorus_rule back;
    size_t m = 0;
    FUZZ_REQUIRE(chorus_rules_parse(once, &back, 1, &m, err, sizeof err) == 0 && m == 1);
    chorus_rule_format(&back, twice, sizeof twice);
    FUZZ_REQUIRE(strcmp(once, twice) == 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const int which = data[0] % 6;
  char text[2048];
  fuzz_text(data + 1, size - 1, text, sizeof text);
  char err[256];
  char *nl = strchr(text, '\n');
  switch (which) {
  case 0: {
    if (!text[0]) return 0;
    const chorus_param_desc *d =
        chorus_param_desc_get((chorus_param_id)((unsigned char)text[0] % CHORUS_P_COUNT));
    int64_t v;
    (void)chorus_param_parse(d, text + 1, &v);
    break;
  }
  case 1: {
    if (nl) *nl = '\0';
    chorus_algo_filter f;
    (void)chorus_algo_filter_parse(&f, text, nl ? nl + 1 : NULL, err, sizeof err);
    break;
  }
  case 2:
    tune(text);
    break;
  case 3:
    if (!nl || nl == text) return 0;
    *nl = '\0';
    (void)chorus_sock_ifname_allowed(text, nl + 1);
    break;
  case 4: {
    char host[CHORUS_HOST_MAX];
    int port = -1;
    if (chorus_sock_split(text, host, &port, err, sizeof err) == ncclSuccess) {
      FUZZ_REQUIRE(port >= 0 && port <= 65535);
      FUZZ_REQUIRE(strlen(host) < CHORUS_HOST_MAX);
    }
    break;
  }
  default: {
    const char *name, *value;
    if (chorus_param_conf_line(text, &name, &value) == 0) {
      FUZZ_REQUIRE(*name && !strchr(name, '=') && !strchr(name, '#') && !strchr(value, '#'));
      FUZZ_REQUIRE(!isspace((unsigned char)name[0]) &&
                   !isspace((unsigned char)name[strlen(name) - 1]));
    }
    break;
  }
  }
  return 0;
}
