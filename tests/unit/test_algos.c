/*
 * test_algos.c - the NCCL_ALGO and NCCL_PROTO filters.
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

static void proto_forms(void) {
  const uint32_t ll = 1u << CHORUS_PROTO_LL, ll128 = 1u << CHORUS_PROTO_LL128,
                 simple = 1u << CHORUS_PROTO_SIMPLE, all = ll | ll128 | simple;
  int named = -1;
  EXPECT_EQ_INT(chorus_proto_allowed_ex(NULL, CHORUS_FUNC_ALLREDUCE, &named), all);
  EXPECT_EQ_INT(named, 0);
  EXPECT_EQ_INT(chorus_proto_allowed_ex("Simple", CHORUS_FUNC_BROADCAST, NULL), simple);
  EXPECT_EQ_INT(chorus_proto_allowed_ex("ll, simple", CHORUS_FUNC_BROADCAST, NULL), ll | simple);
  EXPECT_EQ_INT(chorus_proto_allowed_ex("^LL128", CHORUS_FUNC_BROADCAST, NULL), ll | simple);
  EXPECT_EQ_INT(
      chorus_proto_allowed_ex("allreduce:LL;allgather:Simple", CHORUS_FUNC_ALLGATHER, &named),
      simple);
  EXPECT_EQ_INT(named, 1);
  EXPECT_EQ_INT(chorus_proto_allowed_ex("allreduce:LL", CHORUS_FUNC_REDUCE, &named), all);
  EXPECT_EQ_INT(named, 0);
  EXPECT_EQ_INT(chorus_proto_allowed_ex("LL256", CHORUS_FUNC_REDUCE, NULL), 0);
}

int main(void) {
  RUN(filter_forms);
  RUN(proto_forms);
  return unit_report();
}
