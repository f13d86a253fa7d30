/*
 * units.c - see units.h.
 */
#include "util/units.h"

#include <ctype.h>
#include <stdio.h>
#include <strings.h>

int chorus_size_parse(const char *s, size_t len, uint64_t *out) {
  while (len && isspace((unsigned char)*s)) s++, len--;
  while (len && isspace((unsigned char)s[len - 1])) len--;
  size_t i = 0;
  uint64_t v = 0;
  for (; i < len && isdigit((unsigned char)s[i]); i++) {
    const uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (i == 0) return -1;
  int shift = 0;
  if (i < len) {
    switch (toupper((unsigned char)s[i])) {
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    case 'T':
      shift = 40;
      break;
    default:
      return -1;
    }
    i++;
    const size_t rest = len - i;
    /* "K", "KB", "KiB" */
    if (!(rest == 0 || (rest == 1 && toupper((unsigned char)s[i]) == 'B') ||
          (rest == 2 && strncasecmp(s + i, "iB", 2) == 0)))
      return -1;
  }
  if (shift && v > (UINT64_MAX >> shift)) return -1;
  *out = v << shift;
  return 0;
}

void chorus_size_print(uint64_t bytes, char *buf, size_t len) {
  static const char units[] = "KMGT";
  int u = -1;
  while (u < 3 && bytes && bytes % 1024 == 0) bytes /= 1024, u++;
  if (u < 0)
    snprintf(buf, len, "%llu", (unsigned long long)bytes);
  else
    snprintf(buf, len, "%llu%c", (unsigned long long)bytes, units[u]);
}
