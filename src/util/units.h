/*
 * units.h - sizes as people write them: "4096", "512K", "2M", "1G" (binary
 * multiples; "KB", "KiB" and lower case are the same), for settings and
 * rules alike.
 */
#ifndef CHORUS_UTIL_UNITS_H
#define CHORUS_UTIL_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Parses [s, s + len) as a size. Returns 0 with *out, or -1 when it is not
 * one (empty, no digits, an unknown unit, overflow). */
int chorus_size_parse(const char *s, size_t len, uint64_t *out);
/* Writes bytes with the largest unit that divides it ("256K", "3", "1G"). */
void chorus_size_print(uint64_t bytes, char *buf, size_t len);

#endif
