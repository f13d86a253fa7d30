/*
 * unit.h - minimal assertions for unit tests.
 *
 * A unit test is one executable; main() runs its cases with RUN(case) and
 * returns unit_report(). A failed EXPECT prints file:line and the values and
 * marks the test failed without stopping it; REQUIRE stops the current case.
 */
#ifndef CHORUS_TEST_UNIT_H
#define CHORUS_TEST_UNIT_H

#include <stdio.h>
#include <string.h>

static int unit_failures;
static int unit_checks;

#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    unit_checks++;                                                                                 \
    if (!(cond)) {                                                                                 \
      unit_failures++;                                                                             \
      fprintf(stderr, "%s:%d: EXPECT(%s) failed\n", __FILE__, __LINE__, #cond);                    \
    }                                                                                              \
  } while (0)

#define EXPECT_EQ_INT(a, b)                                                                        \
  do {                                                                                             \
    long long ua_ = (long long)(a), ub_ = (long long)(b);                                          \
    unit_checks++;                                                                                 \
    if (ua_ != ub_) {                                                                              \
      unit_failures++;                                                                             \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, ua_,   \
              ub_);                                                                                \
    }                                                                                              \
  } while (0)

#define EXPECT_STREQ(a, b)                                                                         \
  do {                                                                                             \
    const char *sa_ = (a), *sb_ = (b);                                                             \
    unit_checks++;                                                                                 \
    if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                                                   \
      unit_failures++;                                                                             \
      fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, sa_ ? sa_ : "(null)",       \
              sb_ ? sb_ : "(null)");                                                               \
    }                                                                                              \
  } while (0)

#define REQUIRE(cond)                                                                              \
  do {                                                                                             \
    unit_checks++;                                                                                 \
    if (!(cond)) {                                                                                 \
      unit_failures++;                                                                             \
      fprintf(stderr, "%s:%d: REQUIRE(%s) failed\n", __FILE__, __LINE__, #cond);                   \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

#define RUN(fn)                                                                                    \
  do {                                                                                             \
    int before_ = unit_failures;                                                                   \
    fn();                                                                                          \
    fprintf(stderr, "%s %s\n", unit_failures == before_ ? "ok  " : "FAIL", #fn);                   \
  } while (0)

static inline int unit_report(void) {
  fprintf(stderr, "%d checks, %d failed\n", unit_checks, unit_failures);
  return unit_failures ? 1 : 0;
}

#endif
