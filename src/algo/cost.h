/*
 * cost.h - modelled time of a call per algorithm and protocol, for both
 * backends.
 *
 * Host memory: time = latency + size over bandwidth, the bandwidth
 * depending on where the data sits (in L2, in L3, past L3, DRAM), so the
 * modelled time is continuous and grows with size. On one host the
 * constants of every (function, algorithm) pair were fitted to
 * measurements on the 2-core test machine, separately for ranks that have
 * a core each (calibrated at 2 ranks) and for ranks that outnumber the
 * cores (calibrated at 4; latency scales with the rank count from there);
 * more than 2 ranks with a core each are priced between fits at 2 and 8
 * ranks on a 16-core machine, geometrically in log2 of the rank count.
 * bench/calibrate.py measures, bench/fit.py fits. Across hosts the model
 * counts network hops, priced by the figures measured at init
 * (core/netprobe.h) or set by CHORUS_NET; AllReduce in steps (hier) is a
 * host's ring priced as above around hops across hosts of a 1/L share.
 * The host planner picks by these costs.
 *
 * GPUs: latency plus the bytes that cross one rank's links over the link
 * rate of the protocol, with constants read off the side-by-side runs of
 * docs/PERFORMANCE.md (4xH100). Rough: on one host the GPU planner
 * chooses by its measured rules (rules.h) and uses this only where a
 * user's filters leave those nothing, and for ncclGroupSimulateEnd.
 * Across hosts it chooses by this: `staged` is the copies to and from
 * pinned host memory around the whole call run on host memory by every
 * rank (priced as above, hops at the network's figures); `hier` is the
 * host's kernels on its GPUs around a host call per place with one rank
 * of each host, each block cut across the lanes, and copies of one place's
 * share (AllReduce, Broadcast, Reduce: a share of the buffer; AllGather,
 * ReduceScatter: a block per host).
 *
 * Pure arithmetic, unit-tested on its own.
 */
#ifndef CHORUS_ALGO_COST_H
#define CHORUS_ALGO_COST_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algos.h"

/* Across hosts, unless the environment says (probed or set): one TCP hop
 * on loopback-class links (measured over veth in network namespaces), in
 * us, and its bandwidth in bytes per us. */
#define CHORUS_NET_HOP_US 25.0
#define CHORUS_NET_BW     1000.0
/* GPUs across hosts: hier's step across hosts of `bytes` goes on as many
 * lanes as carry 512 KiB each, up to `most` (at least one): below, the
 * hand-off costs more than the parallel streams save. gpu/proxy.c cuts
 * by it and the model prices by it. */
static inline int chorus_hier_lanes(size_t bytes, int most) {
  size_t k = bytes / (512u << 10);
  if (most >= 0 && k > (size_t)most) k = (size_t)most;
  return k > 1 ? (int)k : 1;
}

typedef struct chorus_cost_env {
  int backend; /* chorus_backend */
  int nranks;
  int nhosts;
  int node;           /* host: node memory (every rank on this host, shared memory on) */
  int oversubscribed; /* host: more ranks on this host than cores */
  size_t max_msg;     /* host: largest single message (slot size) */
  /* Across hosts: one network hop's latency (us) and bandwidth (bytes per
   * us), probed at init or set by CHORUS_NET (core/netprobe.h); 0: the
   * model's own figures. */
  double net_us, net_bw;
  int peer_read; /* host: ranks read each other's memory (algorithm zerocopy) */
  /* GPUs across hosts: ranks per host where every host holds as many
   * (else 0), and the lanes `hier` cuts a block across (0: one). */
  int nlocal, lanes;
  /* Host: how many times slower reads between processes are than memcpy
   * on this machine (transport/shm/readrate.h); 0: none cross processes.
   * reads_dear: over CHORUS_READ_DEAR there, where a read costs more than
   * two copies: zerocopy dearer than oneshot (direct's sends keep to the
   * slots). */
  double read_slowdown;
  int reads_dear;
  /* Host: the most bytes a rank writes to its fast lines in oneshot's
   * small calls (transport.h, chorus_fast_max; coll/node.c goes by it); 0:
   * none. */
  size_t fast_max;
} chorus_cost_env;

/* Modelled microseconds of func with algo in proto (CHORUS_RULE_ANY: the
 * algorithm's fastest) on a call whose larger buffer is `size` bytes
 * (chorus_func_size), or a negative value when the model has no price for
 * it. */
double chorus_cost_us(int func, int algo, int proto, uint64_t size, const chorus_cost_env *e);

#endif
