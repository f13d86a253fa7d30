/*
 * cost.c - see cost.h.
 *
 * One host. Each fit is t = a * (n / n_cal) + the sum over size bands of
 * (bytes of S in the band) / bw_band, with S the size the perf tools report
 * (the whole buffer for AllReduce, Broadcast, Reduce; n blocks for
 * AllGather, ReduceScatter, AlltoAll, Gather, Scatter), a in microseconds,
 * bandwidths in bytes per microsecond, n_cal = 2 with a core per rank and 4
 * when ranks outnumber cores. The bands follow the memory the data lives
 * in (L2, L3, past L3, DRAM), so the modelled time is continuous and grows
 * with size. bench/fit.py fitted the values to bench/calibration-*.txt:
 * every function with peer reads (all but Reduce) to the 2026-11-28 runs
 * but AlltoAll, refitted to the 2026-12-01 run (its direct path had become
 * 1.8x faster since), Reduce to the 2026-11-21 run; each function's
 * algorithms come from one run, as the machine's speed differs between
 * runs. Gather's zerocopy, whose other ranks write their blocks into the
 * root's output rather than the root reading them one by one, keeps its
 * 2026-11-28 curves with each band's bandwidth grown by what the writes
 * gained over the reads in one run on the AMD guest
 * (bench/calibration-2026-12-02-gather-writes.txt): 2 ranks 1.8x, 1.8x
 * and 3.0x in the L3, past-L3 and DRAM bands, 4 ranks 2.0x and 2.5x past
 * L3 and in DRAM (their L3 band kept: 1.01x at 256 KiB). More than 2
 * ranks with a core each (only a machine of more cores than the 2 of those
 * runs has them) are priced from fits at 2 and 8 ranks on a 16-core
 * machine (each fit's two and eight, below).
 */
#include "algo/cost.h"

#include <math.h>

#include "algo/func.h"
#include "algo/rules.h"
#include "util/misc.h"

#define NBANDS 4
static const double band_top[NBANDS - 1] = {65536.0, 1048576.0, 8388608.0};

typedef struct curve {
  double a;          /* microseconds at n_cal ranks */
  double bw[NBANDS]; /* bytes per microsecond within each band */
} curve;

/* own and over come from the 2-core machine. More than 2 ranks with a
 * core each, which it cannot have, are priced by two and eight: each
 * algorithm fitted at 2 and at 8 ranks on one 16-core machine
 * (bench/calibration-2026-12-02-16c.txt, bench/fit.py --wide). The growth
 * from 2 to 8 differs by algorithm far more than the rank count alone
 * says: oneshot's AllReduce, each rank reducing every peer's whole buffer,
 * took 6.5x its 2-rank time at 8 ranks where twoshot took 1.5-1.7x;
 * zerocopy's Broadcast and AllGather, every rank reading the same source's
 * pages through process_vm_readv, 2.5-13x where the chain took 1.2-1.3x;
 * zerocopy's Gather, the others writing their blocks at once, 0.2-0.9x
 * its 2-rank time from 4 MiB (bench/calibration-2026-12-02-16c-gather.txt,
 * which Gather's three algorithms' two and eight come from). */
typedef struct fit {
  int func;
  int algo;
  curve own;   /* a core per rank (n_cal = 2) */
  curve over;  /* ranks outnumber cores (n_cal = 4) */
  curve two;   /* 16 cores, 2 ranks */
  curve eight; /* 16 cores, 8 ranks */
} fit;

static const fit fits[] = {
    {CHORUS_FUNC_ALLGATHER,
     CHORUS_ALGO_ONESHOT,
     {0.410, {14795, 11198, 8927, 7309}},
     {4.070, {8240, 6456, 4042, 4300}},
     {2.380, {9988, 12708, 7832, 7177}},
     {3.122, {7663, 6227, 5860, 5744}}},
    {CHORUS_FUNC_ALLGATHER,
     CHORUS_ALGO_RING,
     {1.262, {10617, 11309, 8554, 6611}},
     {4.625, {8022, 4634, 3369, 2386}},
     {3.060, {9871, 9870, 7321, 5813}},
     {5.998, {5116, 8530, 6520, 4409}}},
    {CHORUS_FUNC_ALLGATHER,
     CHORUS_ALGO_ZEROCOPY,
     {2.241, {31244, 20457, 11261, 8015}},
     {10.993, {11361, 5869, 5063, 2866}},
     {2.774, {30560, 17832, 9508, 6444}},
     {19.496, {11590, 4714, 3802, 3404}}},
    {CHORUS_FUNC_ALLREDUCE,
     CHORUS_ALGO_ONESHOT,
     {0.567, {6602, 6923, 5426, 4054}},
     {3.207, {4830, 1799, 1633, 1215}},
     {3.293, {9325, 6116, 5392, 3661}},
     {5.275, {1010, 1048, 750, 809}}},
    {CHORUS_FUNC_ALLREDUCE,
     CHORUS_ALGO_RING,
     {1.263, {7049, 8075, 5546, 4297}},
     {9.017, {3558, 2554, 2130, 1438}},
     {5.255, {16301, 6536, 5866, 3894}},
     {9.479, {3126, 3833, 2714, 2282}}},
    {CHORUS_FUNC_ALLREDUCE,
     CHORUS_ALGO_ZEROCOPY,
     {3.711, {7243, 7835, 6610, 4177}},
     {16.615, {2090, 2689, 2567, 1343}},
     {7.860, {8668, 6519, 7355, 3784}},
     {37.618, {4511, 2289, 2605, 1801}}},
    {CHORUS_FUNC_ALLREDUCE,
     CHORUS_ALGO_TWOSHOT,
     {1.108, {6367, 5554, 5041, 3965}},
     {5.298, {4570, 3044, 2233, 1497}},
     {4.231, {9584, 5530, 4813, 3618}},
     {7.591, {4908, 3159, 3022, 2962}}},
    {CHORUS_FUNC_ALLTOALL,
     CHORUS_ALGO_DIRECT,
     {0.802, {15944, 43338, 12215, 8687}},
     {3.5, {7486, 9437, 5949, 3253}},
     {3.219, {41909, 19021, 10665, 6669}},
     {10.528, {11858, 10461, 9088, 4939}}},
    {CHORUS_FUNC_ALLTOALL,
     CHORUS_ALGO_ONESHOT,
     {0.416, {11772, 14192, 8137, 7878}},
     {2.171, {6663, 4974, 3868, 3169}},
     {2.251, {10060, 9758, 7069, 6041}},
     {4.153, {4048, 3961, 3853, 3115}}},
    {CHORUS_FUNC_ALLTOALL,
     CHORUS_ALGO_ZEROCOPY,
     {1.291, {46258, 31446, 12389, 9113}},
     {8.987, {22955, 7733, 5905, 3660}},
     {2.563, {20060, 19315, 9815, 6976}},
     {16.700, {12701, 6112, 7213, 4957}}},
    {CHORUS_FUNC_BROADCAST,
     CHORUS_ALGO_CHAIN,
     {0.794, {9329, 11687, 6756, 5042}},
     {2.839, {4047, 4868, 3551, 1800}},
     {1.183, {8681, 9981, 8035, 5091}},
     {3.191, {3940, 7981, 6009, 4742}}},
    {CHORUS_FUNC_BROADCAST,
     CHORUS_ALGO_ONESHOT,
     {0.676, {11448, 10923, 7162, 6302}},
     {3.595, {6356, 5643, 4160, 3801}},
     {0.675, {7895, 9334, 6556, 5739}},
     {1.536, {5741, 5729, 4281, 4509}}},
    {CHORUS_FUNC_BROADCAST,
     CHORUS_ALGO_ZEROCOPY,
     {1.768, {25259, 16828, 10819, 7843}},
     {7.462, {12795, 7298, 5643, 2909}},
     {1.966, {24293, 18446, 10075, 6516}},
     {3.987, {1381, 1264, 2092, 4973}}},
    {CHORUS_FUNC_GATHER,
     CHORUS_ALGO_DIRECT,
     {0.772, {24571, 15917, 12978, 9258}},
     {1.667, {29946, 14582, 9945, 12173}},
     {0.897, {18342, 18510, 9919, 6556}},
     {2.670, {17427, 12702, 9231, 5895}}},
    {CHORUS_FUNC_GATHER,
     CHORUS_ALGO_ONESHOT,
     {0.667, {17638, 14756, 9141, 8143}},
     {3.013, {19215, 12770, 7962, 8524}},
     {0.322, {11477, 10976, 6632, 8320}},
     {0.894, {11100, 12506, 9240, 9195}}},
    {CHORUS_FUNC_GATHER,
     CHORUS_ALGO_ZEROCOPY,
     {1.482, {34252, 41231, 22412, 22802}},
     {7.368, {52257, 15412, 22443, 17935}},
     {1.564, {30590, 38053, 16255, 13956}},
     {9.957, {490132, 10577, 44515, 73314}}},
    {CHORUS_FUNC_REDUCE,
     CHORUS_ALGO_CHAIN,
     {0.435, {8052, 38229, 24909, 6974}},
     {1.589, {4833, 13061, 4928, 3973}},
     {1.896, {11428, 14083, 7873, 5606}},
     {2.671, {4981, 8994, 6673, 5127}}},
    {CHORUS_FUNC_REDUCE,
     CHORUS_ALGO_ONESHOT,
     {0.268, {7253, 8176, 8752, 4154}},
     {8.956, {3226, 4361, 3458, 2990}},
     {3.100, {6605, 6295, 4936, 3770}},
     {4.451, {4077, 4262, 3541, 2993}}},
    {CHORUS_FUNC_REDUCESCATTER,
     CHORUS_ALGO_ONESHOT,
     {0.534, {18712, 12209, 8765, 7505}},
     {3.708, {5384, 5317, 4094, 2852}},
     {1.098, {10230, 14327, 8547, 6303}},
     {4.988, {6203, 5771, 5448, 4169}}},
    {CHORUS_FUNC_REDUCESCATTER,
     CHORUS_ALGO_RING,
     {0.711, {13715, 11269, 10768, 7305}},
     {4.887, {7506, 6770, 3992, 3012}},
     {2.061, {9994, 12855, 8535, 6208}},
     {5.064, {7707, 9244, 6760, 5164}}},
    {CHORUS_FUNC_REDUCESCATTER,
     CHORUS_ALGO_ZEROCOPY,
     {2.577, {23468, 15764, 11388, 7177}},
     {11.980, {7388, 4931, 5436, 3299}},
     {4.110, {81754, 19624, 11532, 7236}},
     {19.474, {9022, 5047, 7105, 4456}}},
    {CHORUS_FUNC_SCATTER,
     CHORUS_ALGO_DIRECT,
     {0.973, {29160, 14677, 12651, 7858}},
     {2.374, {16623, 13660, 11289, 8655}},
     {0.530, {14125, 59711, 19437, 15364}},
     {3.539, {9747, 11625, 60271, 83502}}},
    {CHORUS_FUNC_SCATTER,
     CHORUS_ALGO_ONESHOT,
     {0.585, {19774, 20454, 11713, 9510}},
     {2.993, {31894, 12999, 10926, 7855}},
     {0.532, {12242, 20100, 10309, 9456}},
     {2.268, {8798, 13639, 8842, 10494}}},
    {CHORUS_FUNC_SCATTER,
     CHORUS_ALGO_ZEROCOPY,
     {1.858, {62267, 41703, 19468, 14101}},
     {7.849, {86535, 39247, 18489, 15127}},
     {1.149, {19965, 39611, 18427, 14958}},
     {8.468, {23661, 13632, 42592, 87613}}},
};

/* c's time for `size` bytes, its latency scaled by a_scale and its bytes'
 * time by t_scale. */
static double curve_us(const curve *c, double a_scale, double t_scale, double size) {
  double t = 0, lo = 0;
  for (int b = 0; b < NBANDS && size > lo; b++) {
    double hi = b < NBANDS - 1 ? band_top[b] : size;
    double in = (size < hi ? size : hi) - lo;
    t += in / c->bw[b];
    lo = hi;
  }
  return c->a * a_scale + t * t_scale;
}

/* Reads between processes (process_vm_readv) took this many times
 * memcpy's time at 1 MiB on the machine of the calibration runs
 * (bench/cma_probe.c there, 2026-11-28: 16 against 26 GB/s). */
#define CAL_READ_SLOWDOWN 1.6

/* The bytes of zerocopy, and of direct (large messages between processes
 * go by reference, read by the receiver, as in the calibration), cost what
 * this machine's reads between processes cost against its memcpy,
 * relative to the calibration machine's (the other algorithms copy
 * through stages with memcpy): within 1/4..8 of the fit. Where reads cost
 * over two copies (reads_dear), direct copies through the slots instead
 * and zerocopy is priced above the copies: see one_host. */
static double read_scale(const chorus_cost_env *e) {
  if (e->read_slowdown <= 0) return 1;
  const double s = e->read_slowdown / CAL_READ_SLOWDOWN;
  return s < 0.25 ? 0.25 : s > 8 ? 8 : s;
}

/* f on n > 2 ranks that have a core each, its bytes' time scaled by
 * t_scale: the 16-core fits interpolated geometrically in log2(n),
 * two^(1-k) * eight^k with k = log2(n/2)/2, so the 8-rank fit at 8 and
 * the geometric mean at 4 (which picked the fastest or within 3.3% of it
 * on average over the 4-rank table of the same run, which the fits did
 * not see, where the 2-core fits with the latency grown by n/2 lost
 * 20%). */
static double wide_us(const fit *f, double size, int n, double t_scale) {
  const double k = log2(n / 2.0) / 2;
  return pow(curve_us(&f->two, 1, t_scale, size), 1 - k) *
         pow(curve_us(&f->eight, 1, t_scale, size), k);
}

/* The fit of func with algo for `size` bytes, its bytes' time scaled by
 * the reads for the algorithms that read between processes; -1 when
 * there is none. */
static double fitted(int func, int algo, double size, const chorus_cost_env *e) {
  const double t_scale =
      algo == CHORUS_ALGO_ZEROCOPY || algo == CHORUS_ALGO_DIRECT ? read_scale(e) : 1;
  for (size_t i = 0; i < sizeof fits / sizeof fits[0]; i++) {
    const fit *f = &fits[i];
    if (f->func != func || f->algo != algo) continue;
    if (e->oversubscribed) return curve_us(&f->over, e->nranks / 4.0, t_scale, size);
    if (e->nranks > 2) return wide_us(f, size, e->nranks, t_scale);
    return curve_us(&f->own, e->nranks / 2.0, t_scale, size);
  }
  return -1;
}

/* Oneshot's fit, the yardstick of the dear-read prices below; -1 without
 * node memory. */
static double oneshot_fit(int func, double size, const chorus_cost_env *e) {
  return e->node ? fitted(func, CHORUS_ALGO_ONESHOT, size, e) : -1;
}

/* Where reads are dear, direct's messages go through the slots (shm.c):
 * the two copies oneshot makes through node memory, in a FIFO per peer
 * instead. Priced as oneshot times the ratio measured on such a machine
 * (bench/calibration-2026-11-30-amd.txt, 2 and 4 ranks, 64 KiB-16 MiB):
 * blocks of two slots or more stream through the peers' FIFOs, Gather in
 * 0.61-0.90 of oneshot's time (median 0.77), Scatter 0.79-1.01 (0.93),
 * AlltoAll 0.89-1.09 (0.98); a smaller block waits whole in a slot,
 * 1.02-2.7x (more than oneshot at every such size). */
static double direct_through_slots(int func, double size, const chorus_cost_env *e) {
  const double one = oneshot_fit(func, size, e);
  if (one < 0 || e->nranks < 2) return -1;
  const double slot = e->max_msg ? (double)e->max_msg : 131072.0;
  if (size / e->nranks < 2 * slot) return 1.5 * one;
  return one * (func == CHORUS_FUNC_GATHER ? 0.77 : func == CHORUS_FUNC_SCATTER ? 0.93 : 0.98);
}

/* Where reads cost more than two copies, zerocopy's read per byte costs
 * read_slowdown / 2 times the bytes of oneshot's two copies: priced at
 * least that, it is never the cheapest, yet keeps a price (NCCL_ALGO may
 * ask for it). On the AMD guest (reads 3-4.6x memcpy) it measured 1.5-3x
 * slower than the best of the others for every collective it runs on 2
 * and 4 ranks, 64 KiB-16 MiB, while its fit, scaled by the reads alone,
 * priced 4-rank Scatter at 1 MiB below oneshot (chosen there: 42 us
 * against 27). */
static double zerocopy_dear(int func, double size, const chorus_cost_env *e) {
  const double zc = fitted(func, CHORUS_ALGO_ZEROCOPY, size, e), one = oneshot_fit(func, size, e);
  if (zc < 0 || one < 0) return zc;
  double floor = one * e->read_slowdown / 2;
  /* A Gather's n - 1 writers, a core each, copy at once what oneshot's
   * root copies out alone (16 cores, reads at 2.07x memcpy: 4 and 8 ranks
   * 2-12x faster than the slots from 4 MiB). */
  if (func == CHORUS_FUNC_GATHER && !e->oversubscribed && e->nranks > 2) floor /= e->nranks - 1;
  return zc > floor ? zc : floor;
}

/* Rooted calls on fast lines where ranks outnumber the cores: the ranks
 * that wait for nobody (a Broadcast's or Scatter's root, a Gather's or
 * Reduce's others) run up to a set of lines per call ahead (transport.h),
 * so a rank yields its core about once per 64 calls, where the fits (from
 * 64 KiB, the stage path: a buffer or two ahead) count a yield or more
 * per call. Measured on the AMD guest, 4 ranks: 0.64-0.87 us a call for
 * the four at 16-256 B, 0.80-1.22 at 1 KiB (a rank's lines hold up to
 * 1816 B), against 2.0-2.4 us at 16-256 B on 8 sets of 8 lines, chain's
 * Broadcast and Reduce 2.1-2.5 up to 1 KiB, direct's Gather and Scatter
 * 2.0-2.7. Priced as a latency (at 4 ranks) and the bytes the most
 * writing rank writes at a line rate. -1: not such a call. */
#define FAST_ROOTED_OVER_US 0.7
#define FAST_LINES_BW       2500.0 /* bytes per us */

static double fast_rooted(int func, double size, const chorus_cost_env *e) {
  if (!e->oversubscribed || !e->fast_max || e->nranks < 2 || !chorus_func_rooted(func)) return -1;
  const int n = e->nranks;
  const double blocks = (double)chorus_func_size(func, 1, 1, n); /* in the larger buffer */
  const size_t block = (size_t)((size + blocks - 1) / blocks);   /* rounded up */
  /* the most any rank writes to its lines: the root's, or another's */
  const double written = (double)CHORUS_MAX(chorus_func_shared_elems(func, block, 0, 0, n),
                                            chorus_func_shared_elems(func, block, 1, 0, n));
  if (written <= 0 || written > (double)e->fast_max) return -1;
  return FAST_ROOTED_OVER_US * (n / 4.0) + written / FAST_LINES_BW;
}

static double one_host(int func, int algo, double size, const chorus_cost_env *e) {
  if ((algo == CHORUS_ALGO_ONESHOT || algo == CHORUS_ALGO_TWOSHOT) && !e->node) return -1;
  if (algo == CHORUS_ALGO_ONESHOT) {
    const double fast = fast_rooted(func, size, e);
    if (fast >= 0) return fast;
  }
  if (algo == CHORUS_ALGO_ZEROCOPY && !e->peer_read) return -1;
  if (algo == CHORUS_ALGO_ZEROCOPY && e->reads_dear) return zerocopy_dear(func, size, e);
  if (algo == CHORUS_ALGO_DIRECT && e->reads_dear) return direct_through_slots(func, size, e);
  return fitted(func, algo, size, e);
}

static int log2_floor(int n) {
  int k = 0;
  while ((1 << (k + 1)) <= n) k++;
  return k;
}

/* Point-to-point hops (several hosts, or no node memory): they dominate.
 * bytes: one rank's buffer (count x element size). */
static double hops(int func, int algo, double bytes, const chorus_cost_env *e) {
  int n = e->nranks;
  const double perhop = e->net_us > 0 ? e->net_us : CHORUS_NET_HOP_US;
  const double bw = e->net_bw > 0 ? e->net_bw : CHORUS_NET_BW;
  switch (algo) {
  case CHORUS_ALGO_RING:
    if (func == CHORUS_FUNC_ALLREDUCE)
      return 2.0 * (n - 1) * perhop + 2.0 * (n - 1) / n * bytes / bw;
    return (n - 1) * (perhop + bytes / bw);
  case CHORUS_ALGO_CHAIN:
    return (n - 1) * perhop + bytes / bw;
  case CHORUS_ALGO_RD: {
    if (bytes > (double)e->max_msg) return -1;
    const int k = log2_floor(n), extra = n > 1 << k;
    /* The first 2 rem ranks add a hand-up and a hand-back: AllGather a
     * block up and all n back, ReduceScatter all n up and a block back.
     * ReduceScatter's first exchange carries half the buffer, and its
     * folds hold the next exchange back: 1.5x the bytes' time (on 16
     * cores, 8 ranks: faster than the ring to 16 KiB blocks, 0.66x it at
     * 128 KiB). */
    if (func == CHORUS_FUNC_ALLGATHER || func == CHORUS_FUNC_REDUCESCATTER) {
      const double per_byte = func == CHORUS_FUNC_REDUCESCATTER ? 1.5 / bw : 1.0 / bw;
      return (k + 2 * extra) * perhop + ((n - 1) + extra * (n + 1)) * bytes * per_byte;
    }
    return (k + 2 * extra) * (perhop + bytes / bw);
  }
  case CHORUS_ALGO_TREE: {
    if (func == CHORUS_FUNC_BROADCAST || func == CHORUS_FUNC_REDUCE) {
      /* A binomial tree of depth ceil(log2(n)), the whole buffer a level. */
      const int d = log2_floor(n) + (n > 1 << log2_floor(n));
      return d * (perhop + bytes / bw);
    }
    /* Up then down a tree of depth d, a half of the buffer on each tree:
     * an inner node takes in two halves; the first piece fills the pipe. */
    const int d = log2_floor(n);
    const double piece = bytes / 2 < (double)e->max_msg ? bytes / 2 : (double)e->max_msg;
    return 2.0 * d * (perhop + piece / bw) + 2.0 * bytes / bw;
  }
  case CHORUS_ALGO_DIRECT:
    return perhop + (n - 1) * bytes / bw;
  default:
    return -1;
  }
}

/* hier (coll/hier.c): a ring in each host of L ranks (shared memory:
 * priced as one host's ring AllReduce, which moves what its ReduceScatter
 * and AllGather move), around a ring AllReduce of a 1/L share among the
 * H ranks of a place across hosts. */
static double host_hier(int func, double size, const chorus_cost_env *e) {
  const int L = e->nlocal, H = e->nhosts;
  if (L < 2 || H < 2) return -1;
  const chorus_cost_env in = {.backend = CHORUS_BACKEND_HOST,
                              .nranks = L,
                              .nhosts = 1,
                              .node = 1,
                              .oversubscribed = e->oversubscribed,
                              .max_msg = e->max_msg};
  const chorus_cost_env across = {.backend = CHORUS_BACKEND_HOST,
                                  .nranks = H,
                                  .nhosts = H,
                                  .max_msg = e->max_msg,
                                  .net_us = e->net_us,
                                  .net_bw = e->net_bw};
  const double local = one_host(func, CHORUS_ALGO_RING, size, &in);
  const double cross = hops(func, CHORUS_ALGO_RING, size / L, &across);
  return local < 0 || cross < 0 ? -1 : local + cross;
}

static double host_us(int func, int algo, uint64_t size, const chorus_cost_env *e) {
  if (!chorus_algo_runs(algo, CHORUS_BACKEND_HOST, func)) return -1;
  if (algo == CHORUS_ALGO_HIER) return host_hier(func, (double)size, e);
  if (algo == CHORUS_ALGO_ORDERED) return -1; /* never for speed: CHORUS_REPRODUCIBLE takes it */
  if (chorus_func_p2p(func)) return 1.0;
  if (e->nranks <= 1)
    return algo == CHORUS_ALGO_RING || algo == CHORUS_ALGO_CHAIN || algo == CHORUS_ALGO_DIRECT ? 0.1
                                                                                               : -1;
  const double bytes = (double)size / (double)chorus_func_size(func, 1, 1, e->nranks);
  /* Without node memory (several hosts, or shared memory turned off) the
   * point-to-point hop dominates: price hops. Recursive doubling and the
   * trees are priced that way on one host too, where they never win. */
  if (e->nhosts > 1 || !e->node || algo == CHORUS_ALGO_RD || algo == CHORUS_ALGO_TREE)
    return hops(func, algo, bytes, e);
  return one_host(func, algo, (double)size, e);
}

/* ---- GPUs ------------------------------------------------------------------ */

/* Bytes that leave one rank (the busiest) for a call of `size` bytes. */
static double gpu_traffic(int func, int algo, double size, int n) {
  const double share = (n - 1.0) / n;
  switch (func) {
  case CHORUS_FUNC_ALLREDUCE:
    return algo == CHORUS_ALGO_ONESHOT ? (n - 1.0) * size : 2.0 * share * size;
  case CHORUS_FUNC_BROADCAST:
  case CHORUS_FUNC_REDUCE:
    return algo == CHORUS_ALGO_ONESHOT ? (n - 1.0) * size : size;
  case CHORUS_FUNC_SEND:
  case CHORUS_FUNC_RECV:
    return size;
  default: /* blocked functions: n - 1 of n blocks */
    return share * size;
  }
}

/* Latency (us) and link rate (bytes/us) per algorithm and protocol, from
 * the 4xH100 runs: LL lines carry 8 of every 16 bytes; the SM copies of
 * FIFO chunks reach about 340 GB/s, the copy engine about 380. */
static double across_us(int func, int algo, double size, const chorus_cost_env *e);

static double gpu_us(int func, int algo, int proto, uint64_t size, const chorus_cost_env *e) {
  if (!chorus_algo_runs(algo, CHORUS_BACKEND_GPU, func)) return -1;
  if (e->nhosts > 1) return across_us(func, algo, (double)size, e);
  if (algo == CHORUS_ALGO_HIER || algo == CHORUS_ALGO_STAGED) return -1;
  const chorus_algo_info *a = chorus_algo_get(algo);
  if (proto == CHORUS_RULE_ANY)
    proto = (a->on[CHORUS_BACKEND_GPU].protos & CHORUS_PROTO_BIT(CHORUS_PROTO_LL)) &&
                    size <= (256u << 10)
                ? CHORUS_PROTO_LL
                : CHORUS_PROTO_SIMPLE;
  if (!(a->on[CHORUS_BACKEND_GPU].protos & CHORUS_PROTO_BIT(proto))) return -1;
  const int n = e->nranks > 1 ? e->nranks : 1;
  double lat, rate;
  switch (algo) {
  case CHORUS_ALGO_CE:
    lat = 20.0, rate = 380e3;
    break;
  case CHORUS_ALGO_ZEROCOPY:
    lat = 12.0, rate = 330e3;
    break;
  case CHORUS_ALGO_RING:
  case CHORUS_ALGO_CHAIN:
    lat = 14.0 + 2.0 * n, rate = 345e3;
    break;
  default: /* oneshot, twoshot, direct */
    lat = proto == CHORUS_PROTO_LL ? 7.0 : 12.0;
    rate = proto == CHORUS_PROTO_LL ? 120e3 : 320e3;
    if (algo == CHORUS_ALGO_TWOSHOT) lat += 2.0;
    break;
  }
  return lat + gpu_traffic(func, algo, (double)size, n) / rate;
}

/* ---- GPUs across hosts ---------------------------------------------------- */

/* A copy between a GPU and pinned host memory (a kernel's or the copy
 * engine's, and the wait for it), and the hand-offs between the caller's
 * stream and the progress thread that runs the host call (gpu/proxy.c):
 * 4xH200, 2 hosts x 2 GPUs over loopback, where a staged 8-byte AllReduce
 * took 25-31 us of which the host call's two hops took about 19. */
#define COPY_US    4.0
#define COPY_BW    25e3
#define HANDOFF_US 6.0
#define LANE_US    5.0 /* waking the threads of a block's other lanes */
#define HIER_US    3.0 /* hier's device scratch and events between its steps */

static double copy_us(double bytes) {
  return COPY_US + bytes / COPY_BW;
}

/* The host call that carries a GPU call across hosts: func on `size` bytes
 * (its larger buffer) among nranks ranks, at the host planner's cheapest,
 * every hop priced as a network hop. */
static double host_call_us(int func, double size, int nranks, const chorus_cost_env *e) {
  if (nranks < 2) return 0;
  const chorus_cost_env h = {.backend = CHORUS_BACKEND_HOST,
                             .nranks = nranks,
                             .nhosts = e->nhosts,
                             .max_msg = e->max_msg ? e->max_msg : 128u << 10,
                             .net_us = e->net_us,
                             .net_bw = e->net_bw};
  if (chorus_func_p2p(func))
    return (e->net_us > 0 ? e->net_us : CHORUS_NET_HOP_US) +
           size / (e->net_bw > 0 ? e->net_bw : CHORUS_NET_BW);
  double best = -1;
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
    const double us = host_us(func, a, (uint64_t)size, &h);
    if (us >= 0 && (best < 0 || us < best)) best = us;
  }
  return best;
}

/* The host's kernels on its L GPUs (hier's steps in the host): a ring
 * where one runs the function, else a one-shot exchange. */
static double in_host_us(int func, double size, int L) {
  if (L < 2) return 0;
  const chorus_cost_env g = {.backend = CHORUS_BACKEND_GPU, .nranks = L, .nhosts = 1};
  const double ring = gpu_us(func, CHORUS_ALGO_RING, CHORUS_PROTO_SIMPLE, (uint64_t)size, &g);
  return ring >= 0 ? ring
                   : gpu_us(func, CHORUS_ALGO_ONESHOT, CHORUS_PROTO_SIMPLE, (uint64_t)size, &g);
}

static double across_us(int func, int algo, double size, const chorus_cost_env *e) {
  const int n = e->nranks, H = e->nhosts;
  const double block = size / (double)chorus_func_size(func, 1, 1, n); /* a rank's unit */
  if (algo == CHORUS_ALGO_STAGED) {
    double in = size, out = size;
    if (func == CHORUS_FUNC_ALLGATHER || func == CHORUS_FUNC_GATHER) in = block;
    if (func == CHORUS_FUNC_REDUCESCATTER || func == CHORUS_FUNC_SCATTER) out = block;
    const double host = host_call_us(func, size, n, e);
    return host < 0 ? -1 : copy_us(in) + host + copy_us(out) + HANDOFF_US;
  }
  const int whole =
      func == CHORUS_FUNC_ALLREDUCE || func == CHORUS_FUNC_BROADCAST || func == CHORUS_FUNC_REDUCE;
  if (algo != CHORUS_ALGO_HIER || e->nlocal < 1 || H < 2 ||
      (!whole && func != CHORUS_FUNC_ALLGATHER && func != CHORUS_FUNC_REDUCESCATTER))
    return -1;
  const int L = e->nlocal;
  /* A place's bytes in host memory (the step across hosts carries them). */
  const double mine = whole ? size / L : block * H;
  const int lanes = chorus_hier_lanes((size_t)mine, e->lanes);
  const double cross = host_call_us(func, mine / lanes, H, e);
  if (cross < 0) return -1;
  const double across = cross + (lanes > 1 ? LANE_US : 0) + HANDOFF_US + HIER_US;
  switch (func) {
  case CHORUS_FUNC_ALLREDUCE: /* ReduceScatter, AllReduce of a share per place, AllGather */
    return in_host_us(CHORUS_FUNC_REDUCESCATTER, size, L) + 2.0 * copy_us(mine) + across +
           in_host_us(CHORUS_FUNC_ALLGATHER, size, L);
  case CHORUS_FUNC_BROADCAST: /* the root's host scatters, a share per place across, AllGather */
    return in_host_us(CHORUS_FUNC_SCATTER, size, L) + 2.0 * copy_us(mine) + across +
           in_host_us(CHORUS_FUNC_ALLGATHER, size, L);
  case CHORUS_FUNC_REDUCE: /* ReduceScatter, a share per place across, the root's host gathers */
    return in_host_us(CHORUS_FUNC_REDUCESCATTER, size, L) + 2.0 * copy_us(mine) + across +
           in_host_us(CHORUS_FUNC_GATHER, size, L);
  case CHORUS_FUNC_ALLGATHER: /* across the hosts per place, then in the host */
    return copy_us(block) + across + copy_us(mine) + in_host_us(func, size, L);
  case CHORUS_FUNC_REDUCESCATTER: /* in the host, then across the hosts per place */
    return in_host_us(func, size, L) + copy_us(mine) + across + copy_us(block);
  default:
    return -1;
  }
}

double chorus_cost_us(int func, int algo, int proto, uint64_t size, const chorus_cost_env *e) {
  if (e->backend == CHORUS_BACKEND_GPU) return gpu_us(func, algo, proto, size, e);
  if (proto != CHORUS_RULE_ANY && proto != CHORUS_PROTO_SIMPLE) return -1;
  return host_us(func, algo, size, e);
}
