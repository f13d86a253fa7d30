/*
 * test_algos.c - the NCCL_ALGO filter.
 */
#include "algo/algos.h"
#include "unit.h"

static void filter_forms(void) {
  uint32_t ring = 1u << CHORUS_ALGO_RING, all = (1u << CHORUS_ALGO_COUNT) - 1;
  EXPECT_EQ_INT(chorus_algo_allowed(NULL, CHORUS_FUNC_ALLREDUCE), all);
  EXPECT_EQ_INT(chorus_algo_allowed("", CHORUS_FUNC_ALLREDUCE), all);
  EXPECT_EQ_INT(chorus_algo_allowed("ring", CHORUS_FUNC_ALLREDUCE), ring);
  EXPECT_EQ_INT(chorus_algo_allowed("RING,tree", CHORUS_FUNC_ALLREDUCE), ring);
  EXPECT_EQ_INT(chorus_algo_allowed("^ring", CHORUS_FUNC_ALLREDUCE), all & ~ring);
  EXPECT_EQ_INT(chorus_algo_allowed("allreduce:^ring", CHORUS_FUNC_ALLREDUCE), all & ~ring);
  EXPECT_EQ_INT(chorus_algo_allowed("allreduce:^ring", CHORUS_FUNC_ALLGATHER), all);
  EXPECT_EQ_INT(chorus_algo_allowed("allgather:ring;allreduce:^ring", CHORUS_FUNC_ALLREDUCE),
                all & ~ring);
  EXPECT_EQ_INT(chorus_algo_allowed("nvls", CHORUS_FUNC_ALLREDUCE), 0);
  EXPECT_STREQ(chorus_func_name(CHORUS_FUNC_ALLREDUCE), "AllReduce");
  EXPECT_STREQ(chorus_algo_get(CHORUS_ALGO_RING)->name, "ring");
}

int main(void) {
  RUN(filter_forms);
  return unit_report();
}
