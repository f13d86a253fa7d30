/*
 * fuzz.h - what every libFuzzer harness here shares.
 *
 * Each harness feeds one parser bytes it did not choose and checks what
 * the parser promises: no crash, no leak, no read out of bounds (the
 * build adds ASan and UBSan), and, where a parser has one, a property of
 * its result (a round trip, an invariant of the parts it returns). A
 * parser that rejects its input is doing its job; the WARN lines its
 * rejections print are silenced.
 */
#ifndef CHORUS_FUZZ_H
#define CHORUS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A NUL-terminated copy of data[0..size) in buf (cap bytes), cut short. */
static inline char *fuzz_text(const uint8_t *data, size_t size, char *buf, size_t cap) {
  const size_t n = size < cap - 1 ? size : cap - 1;
  memcpy(buf, data, n);
  buf[n] = '\0';
  return buf;
}

/* Stops the run, naming the broken property (libFuzzer keeps the input). */
#define FUZZ_REQUIRE(cond)                                                                         \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz: %s:%d: property failed: %s\n", __FILE__, __LINE__, #cond);            \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Quiet: rejected inputs are the point, not news. */
#define FUZZ_QUIET_INIT                                                                            \
  int LLVMFuzzerInitialize(int *argc, char ***argv) {                                              \
    (void)argc;                                                                                    \
    (void)argv;                                                                                    \
    setenv("NCCL_DEBUG", "NONE", 1);                                                               \
    return 0;                                                                                      \
  }

#endif
