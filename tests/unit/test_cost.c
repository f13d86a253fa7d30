/*
 * test_cost.c - the cost model picks what the measurements say is fastest
 * in the settings they cover, refuses algorithms that do not apply, grows
 * with size, and prices every GPU algorithm the table has.
 */
#include "algo/cost.h"
#include "core/netprobe.h"
#include "algo/rules.h"
#include "unit.h"

/* The cheapest algorithm by the model for func on a call whose larger
 * buffer is `size` bytes, or -1. */
static int pick(int func, size_t size, const chorus_cost_env *e) {
  int best = -1;
  double bt = 0;
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
    double t = chorus_cost_us(func, a, CHORUS_RULE_ANY, size, e);
    if (t >= 0 && (best < 0 || t < bt)) best = a, bt = t;
  }
  return best;
}

static void one_host_own_cores(void) {
  chorus_cost_env e = {CHORUS_BACKEND_HOST, 2, 1, 1, 0, 131072, 0, 0, 0, 0, 0, 0, 0, 0};
  int small = pick(CHORUS_FUNC_ALLREDUCE, 8, &e);
  EXPECT(small == CHORUS_ALGO_ONESHOT || small == CHORUS_ALGO_TWOSHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 16 << 20, &e), CHORUS_ALGO_RING);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, 2 << 20, &e), CHORUS_ALGO_DIRECT);
  /* No node memory: only point-to-point algorithms. */
  e.node = 0;
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 8, &e), CHORUS_ALGO_RD);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &e), CHORUS_ALGO_RING);
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 8, &e) < 0);
  /* Host memory has one protocol. */
  e.node = 1;
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RING, CHORUS_PROTO_LL, 8, &e) < 0);
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RING, CHORUS_PROTO_SIMPLE, 8, &e) > 0);
  /* Recursive doubling is priced by hops on one host too (never cheaper). */
  const double rd = chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RD, CHORUS_RULE_ANY, 8, &e);
  EXPECT(rd > chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 8, &e));
}

/* More ranks with a core each: the algorithms measured fastest at 8 ranks
 * on 16 cores (bench/calibration-2026-12-02-16c.txt, peer reads 1.4-1.9x
 * memcpy's time), where the 2-core fits with the latency grown by the rank
 * count picked algorithms 1.5-4x slower: oneshot's AllReduce at 16-64 KiB
 * (twoshot 2-3.7x faster), zerocopy's Broadcast and AllGather from 256 KiB
 * (the chain or oneshot 3.7-4.2x faster, the ring 1.6x). 2 ranks keep the
 * 2-core fits. */
static void one_host_many_cores(void) {
  chorus_cost_env e = {.backend = CHORUS_BACKEND_HOST,
                       .nranks = 8,
                       .nhosts = 1,
                       .node = 1,
                       .max_msg = 131072,
                       .peer_read = 1,
                       .read_slowdown = 1.6};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 16 << 10, &e), CHORUS_ALGO_TWOSHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 64 << 10, &e), CHORUS_ALGO_TWOSHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &e), CHORUS_ALGO_RING);
  for (uint64_t s = 256 << 10; s <= (4u << 20); s *= 4) {
    /* Broadcast's chain and oneshot measured within 15% of each other. */
    const int bc = pick(CHORUS_FUNC_BROADCAST, s, &e);
    EXPECT(bc == CHORUS_ALGO_CHAIN || bc == CHORUS_ALGO_ONESHOT);
    EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLGATHER, s, &e), CHORUS_ALGO_RING);
    EXPECT_EQ_INT(pick(CHORUS_FUNC_REDUCESCATTER, s, &e), CHORUS_ALGO_RING);
    EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLTOALL, s, &e), CHORUS_ALGO_DIRECT);
  }
  /* Gather from 4 MiB: zerocopy, the others writing their blocks into
   * the root's output at once, 2.1-6.3x faster than oneshot and direct
   * (bench/calibration-2026-12-02-16c-gather.txt); below, one of those. */
  for (uint64_t s = 4 << 20; s <= (64u << 20); s *= 4)
    EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, s, &e), CHORUS_ALGO_ZEROCOPY);
  EXPECT(pick(CHORUS_FUNC_GATHER, 256 << 10, &e) != CHORUS_ALGO_ZEROCOPY);
  /* 2 ranks: the 2-core fits (zerocopy's Broadcast at 1 MiB measured 2x
   * faster than the chain there); 3 to 8 ranks along one curve from the
   * 16-core fit at 2 ranks to the one at 8, so monotone in the rank count. */
  chorus_cost_env two = e;
  two.nranks = 2;
  EXPECT_EQ_INT(pick(CHORUS_FUNC_BROADCAST, 1 << 20, &two), CHORUS_ALGO_ZEROCOPY);
  for (int f = 1; f < CHORUS_FUNC_COUNT; f++)
    for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
      if (chorus_func_p2p(f)) continue;
      int up = 0, down = 0;
      double last = -1;
      for (int n = 3; n <= 8; n++) {
        chorus_cost_env w = e;
        w.nranks = n;
        const double t = chorus_cost_us(f, a, CHORUS_RULE_ANY, 4 << 20, &w);
        if (t <= 0) break;
        if (last > 0) up |= t > last * 1.001, down |= t < last * 0.999;
        last = t;
      }
      EXPECT(!(up && down));
    }
}

static void one_host_oversubscribed(void) {
  chorus_cost_env e = {CHORUS_BACKEND_HOST, 4, 1, 1, 1, 131072, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 8, &e), CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &e), CHORUS_ALGO_TWOSHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLGATHER, 4 << 20, &e), CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_REDUCE, 8, &e), CHORUS_ALGO_CHAIN);
  /* With peer reads as cheap as the calibration machine's, 4 ranks'
   * AlltoAll goes direct (large blocks read by reference) from 256 KiB to
   * 4 MiB, where it measured 1.17-1.39x faster than zerocopy, but not at
   * 64 KiB, where its 16 KiB blocks are slower than oneshot
   * (bench/calibration-2026-12-01-alltoall.txt). */
  e.peer_read = 1;
  e.read_slowdown = 1.6;
  for (int s = 256 << 10; s <= 4 << 20; s *= 4)
    EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLTOALL, (uint64_t)s, &e), CHORUS_ALGO_DIRECT);
  EXPECT(pick(CHORUS_FUNC_ALLTOALL, 64 << 10, &e) != CHORUS_ALGO_DIRECT);
}

/* Rooted calls that fit the fast lines, ranks outnumbering the cores: the
 * ranks that wait for nobody run calls ahead, so oneshot's small calls
 * cost a fraction of the yields the fits count (0.64-0.85 us at 4 ranks,
 * against 2.0-2.7 for chain and direct on the AMD guest). What the most
 * writing rank writes decides: a Gather's others write a block, the
 * others' roots all they hold. */
static void fast_rooted(void) {
  chorus_cost_env e = {CHORUS_BACKEND_HOST, 4, 1, 1, 1, 131072, 0, 0, 1, 0, 0, 1.6, 0, 416};
  const int rooted[] = {CHORUS_FUNC_BROADCAST, CHORUS_FUNC_REDUCE, CHORUS_FUNC_SCATTER,
                        CHORUS_FUNC_GATHER};
  for (int k = 0; k < 4; k++) {
    EXPECT_EQ_INT(pick(rooted[k], 8, &e), CHORUS_ALGO_ONESHOT);
    EXPECT_EQ_INT(pick(rooted[k], 416, &e), CHORUS_ALGO_ONESHOT);
    const double at8 = chorus_cost_us(rooted[k], CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 8, &e);
    EXPECT(at8 > 0 && at8 < 1.0);
    /* Past the lines the stage path's fit prices it again. */
    const double past = rooted[k] == CHORUS_FUNC_GATHER ? 4 * 416 + 4 : 417;
    EXPECT(chorus_cost_us(rooted[k], CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, (uint64_t)past, &e) >
           2.0);
  }
  EXPECT(chorus_cost_us(CHORUS_FUNC_GATHER, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 4 * 416, &e) <
         1.0);
  /* Not for the calls every rank waits in, nor without the lines, nor
   * where every rank has a core (the fits hold there). */
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLGATHER, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 8, &e) > 2.0);
  chorus_cost_env none = e, own = e;
  none.fast_max = 0;
  EXPECT_EQ_INT(pick(CHORUS_FUNC_REDUCE, 8, &none), CHORUS_ALGO_CHAIN);
  own.nranks = 2;
  own.oversubscribed = 0;
  chorus_cost_env own_none = own;
  own_none.fast_max = 0;
  EXPECT(chorus_cost_us(CHORUS_FUNC_BROADCAST, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 8, &own) ==
         chorus_cost_us(CHORUS_FUNC_BROADCAST, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 8, &own_none));
}

/* Peer reads (zerocopy): one copy per byte wins from 64 KiB on two ranks,
 * and the reductions from a few MiB (bench/calibration-2026-11-28.txt);
 * small calls stay staged; without
 * peer reads it has no price. */
static void one_host_peer_reads(void) {
  chorus_cost_env e = {CHORUS_BACKEND_HOST, 2, 1, 1, 0, 131072, 0, 0, 1, 0, 0, 0, 0, 0};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_BROADCAST, 1 << 20, &e), CHORUS_ALGO_ZEROCOPY);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLGATHER, 1 << 20, &e), CHORUS_ALGO_ZEROCOPY);
  /* AlltoAll's direct reads large messages by reference too: one copy per
   * byte either way, within 7% (bench/calibration-2026-12-01-alltoall.txt). */
  const int a2a = pick(CHORUS_FUNC_ALLTOALL, 1 << 20, &e);
  EXPECT(a2a == CHORUS_ALGO_ZEROCOPY || a2a == CHORUS_ALGO_DIRECT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_SCATTER, 1 << 20, &e), CHORUS_ALGO_ZEROCOPY);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_BROADCAST, 1024, &e), CHORUS_ALGO_ONESHOT);
  /* The reductions: each rank's share straight from the peers' inputs. */
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 4 << 20, &e), CHORUS_ALGO_ZEROCOPY);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 8, &e), CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_REDUCESCATTER, 1 << 20, &e), CHORUS_ALGO_ZEROCOPY);
  EXPECT(chorus_cost_us(CHORUS_FUNC_REDUCE, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 1 << 20, &e) <
         0);
  e.peer_read = 0;
  EXPECT(chorus_cost_us(CHORUS_FUNC_BROADCAST, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 1 << 20, &e) <
         0);
}

/* Reads between processes priced by the machine's own ratio to memcpy
 * (readrate.h): at the calibration machine's (1.6) the picks above; on a
 * guest whose memcpy ran 4.2x its peer reads (measured), the algorithms
 * through stages, as measured there (ring 2.7x faster than zerocopy for
 * AllReduce at 2-8 MiB, oneshot 1.3-2x faster than direct and zerocopy
 * for AlltoAll, Gather, Scatter); a machine with cheap reads keeps them,
 * and far-off ratios are clamped (the fit's error). */
static void peer_reads_by_machine(void) {
  chorus_cost_env e = {CHORUS_BACKEND_HOST, 2, 1, 1, 0, 131072, 0, 0, 1, 0, 0, 1.6, 0, 0};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 4 << 20, &e), CHORUS_ALGO_ZEROCOPY);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLGATHER, 1 << 20, &e), CHORUS_ALGO_ZEROCOPY);
  const double at_cal =
      chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 4 << 20, &e);
  e.read_slowdown = 0; /* not measured: the fit as it is */
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 4 << 20,
                        &e) == at_cal);
  e.read_slowdown = 4.2;
  for (int s = 1; s <= 32; s *= 2)
    EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, (uint64_t)s << 20, &e), CHORUS_ALGO_RING);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLTOALL, 4 << 20, &e), CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, 4 << 20, &e), CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_SCATTER, 4 << 20, &e), CHORUS_ALGO_ONESHOT);
  EXPECT(pick(CHORUS_FUNC_ALLGATHER, 1 << 20, &e) != CHORUS_ALGO_ZEROCOPY);
  /* Only the bytes' time scales: small calls price as before. */
  const double small =
      chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 8, &e);
  e.read_slowdown = 1.6;
  EXPECT(small -
             chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 8, &e) <
         0.01);
  e.read_slowdown = 0.8; /* reads half memcpy's price, relative: more zerocopy */
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &e), CHORUS_ALGO_ZEROCOPY);
  /* Clamped at 8x the fit's price. */
  e.read_slowdown = 1.6 * 8;
  const double at8 =
      chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 64 << 20, &e);
  e.read_slowdown = 1000;
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 64 << 20,
                        &e) == at8);
  /* Reads dearer than two copies (readrate.h): zerocopy keeps a price (a
   * rule or NCCL_ALGO may ask for it) but is never the cheapest, for any
   * function or size, as its reads cost read_slowdown / 2 times oneshot's
   * copies; the copies keep their prices. 4-rank Scatter at 1 MiB on the
   * AMD guest had been zerocopy (42 us, oneshot 27). */
  chorus_cost_env four = {CHORUS_BACKEND_HOST, 4, 1, 1, 1, 131072, 0, 0, 1, 0, 0, 3.6, 0, 0};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_SCATTER, 1 << 20, &four), CHORUS_ALGO_ZEROCOPY);
  const double oneshot =
      chorus_cost_us(CHORUS_FUNC_SCATTER, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 1 << 20, &four);
  four.reads_dear = 1;
  EXPECT(chorus_cost_us(CHORUS_FUNC_SCATTER, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 1 << 20,
                        &four) == oneshot);
  /* There direct's messages go through the slots: cheaper than oneshot
   * where a rank's block spans two slots or more (4 ranks: from 1 MiB; 2
   * ranks: from 512 KiB), dearer below (bench/calibration-2026-11-30-amd.txt). */
  const int rooted[] = {CHORUS_FUNC_SCATTER, CHORUS_FUNC_GATHER, CHORUS_FUNC_ALLTOALL};
  for (int k = 0; k < 3; k++) {
    EXPECT_EQ_INT(pick(rooted[k], 1 << 20, &four), CHORUS_ALGO_DIRECT);
    EXPECT_EQ_INT(pick(rooted[k], 16 << 20, &four), CHORUS_ALGO_DIRECT);
    EXPECT_EQ_INT(pick(rooted[k], 512 << 10, &four), CHORUS_ALGO_ONESHOT);
    EXPECT_EQ_INT(pick(rooted[k], 64 << 10, &four), CHORUS_ALGO_ONESHOT);
  }
  chorus_cost_env two = four;
  two.nranks = 2;
  two.oversubscribed = 0;
  EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, 512 << 10, &two), CHORUS_ALGO_DIRECT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, 256 << 10, &two), CHORUS_ALGO_ONESHOT);
  /* Larger slots (max_msg) move the threshold with them. */
  two.max_msg = 1 << 20;
  EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, 2 << 20, &two), CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, 4 << 20, &two), CHORUS_ALGO_DIRECT);
  for (int f = 1; f < CHORUS_FUNC_COUNT; f++)
    for (uint64_t s = 8; s <= (64u << 20); s *= 16)
      for (int k = 0; k < 2; k++) {
        const chorus_cost_env *d = k ? &two : &four;
        const double zc = chorus_cost_us(f, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, s, d),
                     one = chorus_cost_us(f, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, s, d);
        if (one > 0 && zc >= 0) EXPECT(zc > one);
        EXPECT(pick(f, s, d) != CHORUS_ALGO_ZEROCOPY);
      }
  /* Just over the threshold the floor (read_slowdown / 2 x oneshot) still
   * leaves zerocopy above oneshot. */
  four.read_slowdown = 2.01;
  EXPECT(
      chorus_cost_us(CHORUS_FUNC_SCATTER, CHORUS_ALGO_ZEROCOPY, CHORUS_RULE_ANY, 1 << 20, &four) >
      chorus_cost_us(CHORUS_FUNC_SCATTER, CHORUS_ALGO_ONESHOT, CHORUS_RULE_ANY, 1 << 20, &four));
  /* A Gather's others write their blocks at once, each on a core of its
   * own: past 2 ranks its floor is oneshot's root's copies shared by the
   * writers, so 8 ranks on 16 cores with reads at 2.07x memcpy take it from
   * 4 MiB (2.3-6.6x faster than the slots there), while every other
   * function still keeps off zerocopy. */
  chorus_cost_env wide = four;
  wide.nranks = 8;
  wide.oversubscribed = 0;
  wide.read_slowdown = 2.07;
  EXPECT_EQ_INT(pick(CHORUS_FUNC_GATHER, 16 << 20, &wide), CHORUS_ALGO_ZEROCOPY);
  EXPECT(pick(CHORUS_FUNC_GATHER, 64 << 10, &wide) != CHORUS_ALGO_ZEROCOPY);
  for (int f = 1; f < CHORUS_FUNC_COUNT; f++)
    for (uint64_t s = 8; s <= (64u << 20); s *= 16)
      if (f != CHORUS_FUNC_GATHER) EXPECT(pick(f, s, &wide) != CHORUS_ALGO_ZEROCOPY);
}

static void across_hosts(void) {
  chorus_cost_env e = {CHORUS_BACKEND_HOST, 8, 2, 0, 0, 131072, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 8, &e), CHORUS_ALGO_RD);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 64 << 20, &e), CHORUS_ALGO_RING);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLTOALL, 64 << 20, &e), CHORUS_ALGO_DIRECT);
  /* RD needs the buffer in one message. */
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RD, CHORUS_RULE_ANY, 1 << 20, &e) < 0);
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_TWOSHOT, CHORUS_RULE_ANY, 8, &e) < 0);
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLTOALL, CHORUS_ALGO_RING, CHORUS_RULE_ANY, 8, &e) < 0);
  /* Hosts of as many ranks, two or more (nlocal), AllReduce in steps
   * (hier): a ring in each host around a 1/L share across; it crosses the
   * network once per host, so from mid sizes it beats the ring of all
   * ranks; without the hosts' shape it has no price, nor for other
   * functions. */
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_HIER, CHORUS_RULE_ANY, 1 << 20, &e) < 0);
  e.nlocal = 4;
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &e), CHORUS_ALGO_HIER);
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_HIER, CHORUS_RULE_ANY, 64 << 20, &e) <
         chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_RING, CHORUS_RULE_ANY, 64 << 20, &e));
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLGATHER, CHORUS_ALGO_HIER, CHORUS_RULE_ANY, 1 << 20, &e) < 0);
  e.nlocal = 1;
  EXPECT(chorus_cost_us(CHORUS_FUNC_ALLREDUCE, CHORUS_ALGO_HIER, CHORUS_RULE_ANY, 1 << 20, &e) < 0);
}

/* Across hosts the hops are priced by the network's figures: a slow,
 * distant link makes every algorithm dearer, and widens the lead of
 * recursive doubling's log2(n) exchanges over the ring's 2(n-1) hops;
 * CHORUS_NET's text parses into them. */
static void network_figures(void) {
  chorus_cost_env near = {CHORUS_BACKEND_HOST, 8, 2, 0, 0, 131072, 0, 0, 0, 0, 0, 0, 0, 0};
  chorus_cost_env far = near;
  far.net_us = 2000; /* 2 ms one way */
  far.net_bw = 125;  /* 1 Gbit/s */
  const int AR = CHORUS_FUNC_ALLREDUCE;
  const uint64_t mid = 96 << 10;
  const double ring_near = chorus_cost_us(AR, CHORUS_ALGO_RING, CHORUS_RULE_ANY, mid, &near);
  const double rd_near = chorus_cost_us(AR, CHORUS_ALGO_RD, CHORUS_RULE_ANY, mid, &near);
  const double ring_far = chorus_cost_us(AR, CHORUS_ALGO_RING, CHORUS_RULE_ANY, mid, &far);
  const double rd_far = chorus_cost_us(AR, CHORUS_ALGO_RD, CHORUS_RULE_ANY, mid, &far);
  EXPECT(ring_far > 10 * ring_near && rd_far > 10 * rd_near);
  EXPECT(rd_far / ring_far < rd_near / ring_near);
  /* AllGather and ReduceScatter: log2(n) exchanges carry the same bytes
   * as the ring's n-1 hops, so recursive doubling while a block fits a
   * slot; a rank count that is no power of two pays a hand-up and a
   * hand-back of the whole buffer. */
  const int blocky[2] = {CHORUS_FUNC_ALLGATHER, CHORUS_FUNC_REDUCESCATTER};
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ_INT(pick(blocky[i], 8 * (16 << 10), &near), CHORUS_ALGO_RD);
    EXPECT_EQ_INT(pick(blocky[i], 8 * (1 << 20), &near), CHORUS_ALGO_RING);
    chorus_cost_env odd = near;
    odd.nranks = 7;
    const double rd7 = chorus_cost_us(blocky[i], CHORUS_ALGO_RD, CHORUS_RULE_ANY, 7 << 10, &odd);
    const double rd8 = chorus_cost_us(blocky[i], CHORUS_ALGO_RD, CHORUS_RULE_ANY, 8 << 10, &near);
    EXPECT(rd7 > rd8);
  }
  /* Broadcast and Reduce: a binomial tree's log2(n) levels while the
   * hops' latency dominates, the pipelined chain once bytes do. */
  const int rooted[2] = {CHORUS_FUNC_BROADCAST, CHORUS_FUNC_REDUCE};
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ_INT(pick(rooted[i], 8 << 10, &near), CHORUS_ALGO_TREE);
    EXPECT_EQ_INT(pick(rooted[i], 1 << 20, &near), CHORUS_ALGO_CHAIN);
  }
  double us = 0, bw = 0;
  EXPECT_EQ_INT(chorus_netprobe_parse("25,1.5", &us, &bw), 0);
  EXPECT(us == 25 && bw == 1500);
  EXPECT_EQ_INT(chorus_netprobe_parse("25", &us, &bw), -1);
  EXPECT_EQ_INT(chorus_netprobe_parse("25,", &us, &bw), -1);
  EXPECT_EQ_INT(chorus_netprobe_parse("0,1", &us, &bw), -1);
  EXPECT_EQ_INT(chorus_netprobe_parse("25,1.5x", &us, &bw), -1);
}

static void monotone_in_size(void) {
  chorus_cost_env envs[] = {{CHORUS_BACKEND_HOST, 4, 1, 1, 1, 131072, 0, 0, 0, 0, 0, 0, 0, 416},
                            {CHORUS_BACKEND_HOST, 3, 1, 1, 0, 131072, 0, 0, 0, 0, 0, 0, 0, 0},
                            {CHORUS_BACKEND_HOST, 8, 2, 0, 0, 131072, 2000, 12.5, 0, 0, 0, 0, 0, 0},
                            {CHORUS_BACKEND_GPU, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                            {CHORUS_BACKEND_GPU, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                            {CHORUS_BACKEND_GPU, 4, 2, 0, 0, 131072, 9.5, 3500, 0, 2, 4, 0, 0, 0},
                            {CHORUS_BACKEND_GPU, 8, 2, 0, 0, 131072, 0, 0, 0, 4, 1, 0, 0, 0}};
  for (size_t k = 0; k < sizeof envs / sizeof envs[0]; k++)
    for (int a = 0; a < CHORUS_ALGO_COUNT; a++)
      for (int f = 1; f < CHORUS_FUNC_COUNT; f++)
        for (int p = 0; p < CHORUS_PROTO_COUNT; p++) {
          double prev = -1;
          for (size_t b = 8; b <= (64u << 20); b *= 8) {
            double t = chorus_cost_us(f, a, p, b, &envs[k]);
            if (t < 0) break;
            EXPECT(t >= prev);
            prev = t;
          }
        }
  chorus_cost_env one = {CHORUS_BACKEND_HOST, 1, 1, 1, 0, 131072, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ_INT(pick(CHORUS_FUNC_ALLREDUCE, 1 << 20, &one), CHORUS_ALGO_RING);
  EXPECT_EQ_INT(pick(CHORUS_FUNC_BROADCAST, 1 << 20, &one), CHORUS_ALGO_CHAIN);
}

/* Every GPU algorithm the table runs on one host has a price in each of
 * its protocols, and none outside them (those across hosts are priced
 * only across hosts: gpu_across_hosts); small calls are latency, large
 * ones bandwidth (LL dearer per byte than Simple). */
static void gpu_prices(void) {
  chorus_cost_env e = {CHORUS_BACKEND_GPU, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++)
    for (int f = 1; f < CHORUS_FUNC_COUNT; f++)
      for (int p = 0; p < CHORUS_PROTO_COUNT; p++) {
        const chorus_algo_info *info = chorus_algo_get(a);
        const int runs = (info->on[CHORUS_BACKEND_GPU].funcs & chorus_func_bit(f)) &&
                         (info->on[CHORUS_BACKEND_GPU].protos & CHORUS_PROTO_BIT(p)) &&
                         !(info->on[CHORUS_BACKEND_GPU].needs & CHORUS_NEED_HOSTS);
        EXPECT_EQ_INT(chorus_cost_us(f, a, p, 1 << 20, &e) > 0, runs);
      }
  const int AR = CHORUS_FUNC_ALLREDUCE;
  EXPECT(chorus_cost_us(AR, CHORUS_ALGO_ONESHOT, CHORUS_PROTO_LL, 8, &e) <
         chorus_cost_us(AR, CHORUS_ALGO_RING, CHORUS_PROTO_SIMPLE, 8, &e));
  EXPECT(chorus_cost_us(AR, CHORUS_ALGO_RING, CHORUS_PROTO_SIMPLE, 1 << 30, &e) <
         chorus_cost_us(AR, CHORUS_ALGO_ONESHOT, CHORUS_PROTO_SIMPLE, 1 << 30, &e));
  EXPECT(chorus_cost_us(AR, CHORUS_ALGO_ONESHOT, CHORUS_PROTO_SIMPLE, 1 << 30, &e) <
         chorus_cost_us(AR, CHORUS_ALGO_ONESHOT, CHORUS_PROTO_LL, 1 << 30, &e));
}

/* The smallest power of two from 8 B where hier prices below staged for
 * func (0: nowhere up to 1 GiB). */
static uint64_t hier_from(int func, const chorus_cost_env *e) {
  for (uint64_t b = 8; b <= (1ull << 30); b *= 2)
    if (chorus_cost_us(func, CHORUS_ALGO_HIER, CHORUS_PROTO_SIMPLE, b, e) <
        chorus_cost_us(func, CHORUS_ALGO_STAGED, CHORUS_PROTO_SIMPLE, b, e))
      return b;
  return 0;
}

/* GPUs across hosts: only hier and staged have a price (hier for the
 * functions it cuts), staged's fewer steps win small calls and hier's
 * single crossing per host large ones, the crossover moves down as the
 * network slows and up as it speeds, and lanes make hier cheaper. Over
 * loopback's probed figures on 2 hosts x 2 GPUs it sits near 64 KiB for
 * AllReduce, where the runs of docs/PERFORMANCE.md put it. */
static void gpu_across_hosts(void) {
  const int AR = CHORUS_FUNC_ALLREDUCE, AG = CHORUS_FUNC_ALLGATHER, RS = CHORUS_FUNC_REDUCESCATTER;
  chorus_cost_env e = {CHORUS_BACKEND_GPU, 4, 2, 0, 0, 131072, 9.5, 3500, 0, 2, 4, 0, 0, 0};
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++)
    for (int f = 1; f < CHORUS_FUNC_COUNT; f++) {
      const int hier =
          f == AR || f == AG || f == RS || f == CHORUS_FUNC_BROADCAST || f == CHORUS_FUNC_REDUCE;
      const int priced = a == CHORUS_ALGO_STAGED || (a == CHORUS_ALGO_HIER && hier);
      EXPECT_EQ_INT(chorus_cost_us(f, a, CHORUS_PROTO_SIMPLE, 1 << 20, &e) > 0, priced);
    }
  const uint64_t loop = hier_from(AR, &e);
  EXPECT(loop >= (16u << 10) && loop <= (128u << 10));
  EXPECT(hier_from(AG, &e) > 0 && hier_from(RS, &e) > 0);
  for (uint64_t b = 256u << 10; b <= (1ull << 30); b *= 4)
    for (int f = AR; f >= 0; f = f == AR ? AG : f == AG ? RS : -1)
      EXPECT(chorus_cost_us(f, CHORUS_ALGO_HIER, CHORUS_PROTO_SIMPLE, b, &e) <
             chorus_cost_us(f, CHORUS_ALGO_STAGED, CHORUS_PROTO_SIMPLE, b, &e));
  EXPECT(chorus_cost_us(AR, CHORUS_ALGO_STAGED, CHORUS_PROTO_SIMPLE, 8, &e) <
         chorus_cost_us(AR, CHORUS_ALGO_HIER, CHORUS_PROTO_SIMPLE, 8, &e));
  chorus_cost_env slow = e, fast = e, one_lane = e;
  slow.net_us = 100, slow.net_bw = 500;
  fast.net_us = 2, fast.net_bw = 40e3;
  EXPECT(hier_from(AR, &slow) < loop);
  EXPECT(hier_from(AR, &fast) > loop);
  one_lane.lanes = 1;
  EXPECT(chorus_cost_us(AR, CHORUS_ALGO_HIER, CHORUS_PROTO_SIMPLE, 64u << 20, &e) <
         chorus_cost_us(AR, CHORUS_ALGO_HIER, CHORUS_PROTO_SIMPLE, 64u << 20, &one_lane));
  /* Hosts of different sizes: hier cannot cut the call. */
  chorus_cost_env uneven = e;
  uneven.nlocal = 0;
  EXPECT(chorus_cost_us(AR, CHORUS_ALGO_HIER, CHORUS_PROTO_SIMPLE, 1 << 20, &uneven) < 0);
}

int main(void) {
  RUN(one_host_own_cores);
  RUN(one_host_many_cores);
  RUN(one_host_oversubscribed);
  RUN(fast_rooted);
  RUN(one_host_peer_reads);
  RUN(peer_reads_by_machine);
  RUN(across_hosts);
  RUN(network_figures);
  RUN(monotone_in_size);
  RUN(gpu_prices);
  RUN(gpu_across_hosts);
  return unit_report();
}
