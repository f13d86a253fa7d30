/*
 * test_tune.c - the cost model picks what the measurements say is fastest
 * in the settings they cover, refuses algorithms that do not apply, and
 * grows with size.
 */
#include "algo/tune.h"
#include "unit.h"

static chorus_algo pick(int func, size_t bytes, const chorus_tune_env *e) {
  chorus_algo best = CHORUS_ALGO_COUNT;
  double bt = 0;
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
    double t = chorus_tune_time_us(func, (chorus_algo)a, bytes, e);
    if (t >= 0 && (best == CHORUS_ALGO_COUNT || t < bt)) best = (chorus_algo)a, bt = t;
  }
  return best;
}

static void one_host_own_cores(void) {
  chorus_tune_env e = {2, 1, 1, 0, 131072};
  chorus_algo small = pick(CHORUS_FUNC_ALLREDUCE, 8, &e);
  EXPECT(small == CHORUS_ALGO_ONESHOT || small == CHORUS_ALGO_TWOSHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &e), CHORUS_ALGO_RING);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, 1 << 20, &e), CHORUS_ALGO_DIRECT);
  /* No node memory: only point-to-point algorithms. */
  e.node = 0;
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 8, &e), CHORUS_ALGO_RD);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &e), CHORUS_ALGO_RING);
  EXPECT(chorus_tune_time_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ONESHOT, 8, &e) < 0);
}

static void one_host_oversubscribed(void) {
  chorus_tune_env e = {4, 1, 1, 1, 131072};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 8, &e), CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &e), CHORUS_ALGO_TWOSHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLGATHER, 1 << 20, &e), CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_REDUCE, 8, &e), CHORUS_ALGO_RING);
}

static void across_hosts(void) {
  chorus_tune_env e = {8, 2, 0, 0, 131072};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 8, &e), CHORUS_ALGO_RD);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 64 << 20, &e), CHORUS_ALGO_RING);
  /* RD needs the buffer in one message. */
  EXPECT(chorus_tune_time_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RD, 1 << 20, &e) < 0);
  EXPECT(chorus_tune_time_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_TWOSHOT, 8, &e) < 0);
}

static void monotone_in_size(void) {
  chorus_tune_env e = {4, 1, 1, 1, 131072};
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++)
    for (int f = 1; f < CHORUS_FUNC_COUNT; f++) {
      double prev = -1;
      for (size_t b = 8; b <= (64u << 20); b *= 8) {
        double t = chorus_tune_time_us(f, (chorus_algo)a, b, &e);
        if (t < 0) break;
        EXPECT(t >= prev);
        prev = t;
      }
    }
  chorus_tune_env one = {1, 1, 1, 0, 131072};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &one), CHORUS_ALGO_RING);
}

int main(void) {
  RUN(one_host_own_cores);
  RUN(one_host_oversubscribed);
  RUN(across_hosts);
  RUN(monotone_in_size);
  return unit_report();
}
