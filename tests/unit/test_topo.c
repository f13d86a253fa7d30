/*
 * test_topo.c - topo/topo.c: hosts from the ranks' records.
 *
 * Hosts are numbered by their first rank and each rank gets its index
 * among its host's ranks, checked against a direct quadratic count on
 * random layouts (up to 4096 ranks, interleaved hosts); ranks on one
 * machine are counted whatever their hosts; and the words that name a
 * lost peer's host list its ranks as ranges.
 */
#include <sched.h>
#include <string.h>

#include "topo/topo.h"
#include "unit.h"
#include "util/alloc.h"

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Hosts of nranks ranks: host hash of rank r from `hosts` values. */
static void one_layout(int nranks, int hosts, uint64_t seed) {
  chorus_rank_info *info = chorus_calloc((size_t)nranks, sizeof *info);
  REQUIRE(info);
  uint64_t s = seed;
  for (int r = 0; r < nranks; r++) {
    info[r].host_hash = 0x1000 + next(&s) % (uint64_t)hosts * 0x10000000000ull;
    info[r].rank = r;
  }
  chorus_topo t;
  REQUIRE(chorus_topo_build(&t, info, nranks, nranks / 2) == ncclSuccess);
  int nhosts = 0;
  for (int r = 0; r < nranks; r++) {
    int first = r, idx = 0;
    for (int q = 0; q < r; q++)
      if (info[q].host_hash == info[r].host_hash) {
        if (first == r) first = q;
        idx++;
      }
    if (first == r) {
      EXPECT_EQ_INT(t.host_of[r], nhosts);
      nhosts++;
    } else {
      EXPECT_EQ_INT(t.host_of[r], t.host_of[first]);
    }
    EXPECT_EQ_INT(t.local_index[r], idx);
  }
  EXPECT_EQ_INT(t.nhosts, nhosts);
  chorus_topo_free(&t);
}

static void layouts(void) {
  one_layout(1, 1, 7);
  one_layout(8, 2, 11);
  one_layout(256, 16, 13);
  one_layout(4096, 64, 17);
  one_layout(4096, 4096, 19);
}

static void host_words(void) {
  const int n = 6;
  chorus_rank_info *info = chorus_calloc(n, sizeof *info);
  REQUIRE(info);
  const uint64_t hash[6] = {1, 1, 2, 2, 1, 3};
  static const char *const name[4] = {"", "a", "node-b", "c"};
  for (int r = 0; r < n; r++) {
    info[r].host_hash = hash[r];
    strcpy(info[r].hostname, name[hash[r]]);
  }
  chorus_topo t;
  REQUIRE(chorus_topo_build(&t, info, n, 0) == ncclSuccess);
  char buf[96];
  chorus_topo_host_words(&t, 3, buf, sizeof buf);
  EXPECT_STREQ(buf, "host 1 (node-b, ranks 2-3)");
  chorus_topo_host_words(&t, 0, buf, sizeof buf);
  EXPECT_STREQ(buf, "host 0 (a, ranks 0-1, 4)");
  chorus_topo_host_words(&t, 5, buf, sizeof buf);
  EXPECT_STREQ(buf, "host 2 (c, rank 5)");
  chorus_topo_host_words(&t, 0, buf, 12); /* cut short */
  EXPECT(strlen(buf) == 11 && !strcmp(buf + 8, "..."));
  chorus_topo_host_words(&t, 9, buf, sizeof buf); /* no such rank */
  EXPECT_STREQ(buf, "");
  chorus_topo_free(&t);
}

/* Ranks made hosts of their own (NCCL_HOSTID, namespaces) still share the
 * machine's cores: nmachine counts them by machine, not by host, and
 * machine_cpus the CPUs they may run on together (each rank's affinity
 * added up; another machine's not). */
static void machine(void) {
  const int n = 5;
  chorus_rank_info *info = chorus_calloc(n, sizeof *info);
  REQUIRE(info);
  const uint64_t host[5] = {1, 2, 3, 4, 5}, mach[5] = {7, 7, 7, 8, 7};
  const int cpu[5] = {0, 1, 1, 2, 70};
  for (int r = 0; r < n; r++) {
    info[r].host_hash = host[r];
    info[r].machine_hash = mach[r];
    info[r].cpus.bits[cpu[r] / 64] |= (uint64_t)1 << (cpu[r] % 64);
  }
  info[3].cpus.bits[0] |= 0xf0; /* machine 8's: not counted */
  chorus_rank_info base[5];
  memcpy(base, info, sizeof base);
  chorus_topo t;
  REQUIRE(chorus_topo_build(&t, info, n, 0) == ncclSuccess);
  EXPECT_EQ_INT(t.nhosts, 5);
  EXPECT_EQ_INT(t.nlocal, 1);
  EXPECT_EQ_INT(t.nmachine, 4);
  EXPECT_EQ_INT(t.machine_cpus, 3);
  chorus_topo_free(&t);
  /* A CPU quota every rank of the machine has (a container's limit) caps
   * it; one rank without a quota lifts the cap; another machine's quota
   * does not count. */
  const int quota[2][5] = {{2, 2, 1, 1, 2}, {2, 0, 2, 1, 2}}, want[2] = {2, 3};
  for (int k = 0; k < 2; k++) {
    chorus_rank_info *again = chorus_calloc(n, sizeof *again);
    REQUIRE(again);
    for (int r = 0; r < n; r++) again[r] = base[r], again[r].quota_cpus = quota[k][r];
    REQUIRE(chorus_topo_build(&t, again, n, 0) == ncclSuccess);
    EXPECT_EQ_INT(t.machine_cpus, want[k]);
    chorus_topo_free(&t);
  }
  /* This thread's own: what the system says it may run on. */
  chorus_cpuset mine;
  chorus_cpuset_self(&mine);
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  EXPECT_EQ_INT(chorus_cpuset_count(&mine), CPU_COUNT(&set));
  for (int c = 0; c < 64 * CHORUS_CPUSET_WORDS; c++)
    EXPECT_EQ_INT(!!(mine.bits[c / 64] >> (c % 64) & 1), !!CPU_ISSET(c, &set));
}

int main(void) {
  RUN(layouts);
  RUN(machine);
  RUN(host_words);
  return unit_report();
}
