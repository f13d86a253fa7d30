/*
 * comm.c - building and freeing communicators (see comm.h).
 *
 * Building runs in this order, each step collective over the new
 * communicator: bootstrap rendezvous; allgather of rank records (host,
 * process, device, buffer sizes); transport choice per peer; each transport's
 * setup; a barrier; each transport's finish (shared-memory names removed);
 * the ring order. Any failure leaves async set to the error and the partial
 * state for chorus_comm_free.
 */
#include "core/comm.h"
#include "core/netprobe.h"
#include "core/stats.h"
#include "core/status.h"
#include "core/profiler.h"
#include "core/tuner.h"
#include "core/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll/exec.h"
#include "coll/lanes.h"
#include "core/config.h"
#include "device/device.h"
#include "gpu/gpu.h"
#include "gpu/ordered.h"
#include "gpu/proxy.h"
#include "transport/plugin/netplug.h"
#include "transport/transport.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/fence.h"
#include "util/clock.h"
#include "util/misc.h"
#include "util/param.h"
#include "util/shm.h"
#include "util/siphash.h"

enum { T_SHM = 0, T_NET = 1 };
/* The communicator's transports: shared memory, and the built-in TCP one
 * unless setup_transports chose a network plugin's. */
static const chorus_transport *const *transports_of(ncclComm_t comm) {
  if (!comm->transports[0]) {
    comm->transports[0] = &chorus_transport_shm;
    comm->transports[1] = &chorus_transport_net;
  }
  return comm->transports;
}

/* The network for ranks on other hosts: a plugin's when one loads (every
 * rank must make the same choice: the settings and libraries may differ
 * between hosts, so the choices are compared), else NULL for the
 * built-in TCP transport. */
static ncclResult_t choose_network(ncclComm_t comm, chorus_net **out) {
  *out = NULL;
  typedef struct choice {
    char name[48];
    int32_t version; /* 0: the built-in network */
  } choice;
  choice *all = chorus_calloc((size_t)comm->nranks, sizeof *all);
  if (!all) return chorus_error(ncclSystemError, "out of memory");
  const uint64_t key[2] = {comm->init.uids[0].secret[0], comm->init.uids[0].secret[1]};
  const uint64_t id = chorus_siphash(key, "network plugin comm id", 22);
  const int tc =
      comm->config.trafficClass == NCCL_CONFIG_UNDEF_INT ? -1 : comm->config.trafficClass;
  ncclResult_t res = chorus_net_open(id, tc, comm->config.netName, out);
  choice *mine = &all[comm->rank];
  snprintf(mine->name, sizeof mine->name, "%s", *out ? chorus_net_name(*out) : "Socket");
  mine->version = *out ? chorus_net_version(*out) : 0;
  /* A rank that failed to open still takes part, so that none waits. */
  ncclResult_t ag = chorus_bootstrap_allgather(comm->bs, all, sizeof *all);
  if (res == ncclSuccess) res = ag;
  for (int r = 0; r < comm->nranks && res == ncclSuccess; r++) {
    const choice *c = &all[r];
    if (strcmp(c->name, mine->name) != 0 || c->version != mine->version)
      res = chorus_error(ncclInvalidUsage,
                         "ranks chose different networks: rank %d uses %s (ABI v%d) but rank %d "
                         "%s (ABI v%d); set NCCL_NET_PLUGIN and NCCL_NET alike on every host, and "
                         "install the same plugin",
                         comm->rank, mine->name, (int)mine->version, r, c->name, (int)c->version);
  }
  if (res != ncclSuccess) {
    chorus_net_close(*out);
    *out = NULL;
  }
  chorus_free(all);
  return res;
}

/* Threads that move this rank's TCP bytes (NCCL_SOCKET_NTHREADS, 0..16
 * as NCCL takes it), or -1 for auto (auto_threads). */
static int socket_threads(int rank) {
  const int64_t v = chorus_param_int(CHORUS_P_SOCKET_NTHREADS);
  if (v == CHORUS_AUTO) return -1;
  const int n = (int)CHORUS_MAX(0, CHORUS_MIN(16, v));
  if (n != v)
    WARN("rank %d: NCCL_SOCKET_NTHREADS=%lld is outside 0..16; using %d", rank, (long long)v, n);
  return n;
}

/* Rank record exchanged at init: topology plus the buffer geometry, which
 * must agree across ranks (the smallest wins). */
typedef struct rank_record {
  chorus_rank_info info;
  uint64_t slot_bytes;
  uint32_t nslots;
  uint32_t nstages;
  uint64_t stage_bytes;
  uint32_t nstreams;
  chorus_status_peer status; /* where its process answers (core/status.h) */
  uint32_t traced;           /* CHORUS_TRACE is set there */
  uint32_t threads_auto;     /* its NCCL_SOCKET_NTHREADS is auto */
  uint32_t nslots_auto;      /* its CHORUS_NSLOTS is auto */
  uint32_t lanes_asked;      /* its CHORUS_HOST_LANES (0: auto) */
} rank_record;

/* Buffer geometry every rank must agree on (the smallest request wins),
 * and this rank's socket threads (its own). */
typedef struct geometry {
  size_t slot_bytes, stage_bytes;
  int nslots, nstages, nstreams;
  int nthreads;
  int threads_on_hint; /* auto: they move what calls that only move bytes hand them */
  int lanes;           /* a host-memory communicator's lanes (host_lanes) */
} geometry;

/* NCCL_SOCKET_NTHREADS=auto gives a host-memory communicator this many
 * threads, each with a socket of its own per peer and channel, where every
 * machine it spans has room for them (chorus_socket_threads_room: CPUs /
 * (2 x ranks there) - 1, the cap net.c applies to any count), and the
 * executor hands them the large messages of calls that only move bytes
 * (coll/exec.c). Threads for every call, measured on 16 cores with every
 * rank a host, 256 KiB-16 MiB against none, at 2 ranks: AlltoAll 2.1-2.7x,
 * Broadcast 2.0-3.1x and AllGather 1.2-1.3x from 1 MiB, but AllReduce
 * 0.7-0.95x and ReduceScatter 0.7-0.9x (a hand-off per message in a
 * reduction's pipeline; threads writing only a reduction's sends measured
 * 1.1-1.2x in one run, 0.7-0.8x in another, threads reading only its
 * messages 0.78-0.88x) and byte moves of 256 KiB 0.6x; three threads
 * gained no more. With the rule, against the build without threads in the
 * same run: AlltoAll 2.2-2.5x and AllGather 1.2-1.3x from 1 MiB, Broadcast
 * 1.8-1.9x from 512 KiB, AllReduce and ReduceScatter 0.9-1.07x (their
 * second socket). A GPU communicator's parts and lanes get none: their
 * threads run beside the kernels' proxies, where 2 x 2 GPUs across hosts
 * measured 0.2-0.7x. */
#define AUTO_THREADS 2

typedef struct machine_rank {
  uint64_t hash;
  const chorus_rank_info *info;
} machine_rank;

static int by_machine(const void *a, const void *b) {
  const uint64_t x = ((const machine_rank *)a)->hash, y = ((const machine_rank *)b)->hash;
  return x < y ? -1 : x > y;
}

/* Whether fits(cpus, ranks) holds for every machine of the records, cpus
 * being what its ranks may run on at once, together (sorted by machine:
 * no pass over pairs of ranks); -1: out of memory. */
static int every_machine(const rank_record *rec, int n, int (*fits)(long cpus, int ranks)) {
  machine_rank *m = chorus_malloc((size_t)n * sizeof *m);
  if (!m) return -1;
  for (int r = 0; r < n; r++) m[r] = (machine_rank){rec[r].info.machine_hash, &rec[r].info};
  qsort(m, (size_t)n, sizeof *m, by_machine);
  int fit = 1;
  for (int i = 0, j; i < n && fit; i = j) {
    chorus_machine_cpus cpus = {0};
    for (j = i; j < n && m[j].hash == m[i].hash; j++) chorus_machine_cpus_add(&cpus, m[j].info);
    fit = fits(chorus_machine_cpus_count(&cpus), cpus.nranks);
  }
  chorus_free(m);
  return fit;
}

static int room_for_auto_threads(long cpus, int ranks) {
  return chorus_socket_threads_room(cpus, ranks) >= AUTO_THREADS;
}

/* Whether every machine of the records has the cores for AUTO_THREADS
 * threads per rank; -1: out of memory. */
static int auto_threads_fit(const rank_record *rec, int n) {
  if (!chorus_param_int(CHORUS_P_SOCKET_THREADS_FIT)) return 1;
  return every_machine(rec, n, room_for_auto_threads);
}

/* CHORUS_HOST_LANES=auto gives a host-memory communicator whose every
 * host holds one rank AUTO_LANES lanes (coll/lanes.h) where every machine
 * has the room chorus_socket_threads_room finds for AUTO_LANES - 1 more
 * threads per rank, else 2 where it has room for one, else none. A lane's
 * thread makes the system calls of its share of a call, which one thread
 * per rank made in turn for the whole call: measured on 16 cores, 2 ranks
 * each a host over loopback, one thread moved 2.3-3.3 GB/s of bus
 * bandwidth in AllReduce from 8 MiB where one TCP stream moves 4.2 and 8
 * streams 26.9. */
#define AUTO_LANES 4

static int room_for_4_lanes(long cpus, int ranks) {
  return chorus_socket_threads_room(cpus, ranks) >= AUTO_LANES - 1;
}

static int room_for_2_lanes(long cpus, int ranks) {
  return chorus_socket_threads_room(cpus, ranks) >= 1;
}

static int lanes_asked(int rank) {
  const int64_t v = chorus_param_int(CHORUS_P_HOST_LANES);
  if (v == CHORUS_AUTO) return 0;
  const int n = (int)CHORUS_CLAMP(v, 1, CHORUS_LANES_MAX);
  if (n != v)
    WARN("rank %d: CHORUS_HOST_LANES=%lld is outside 1..%d; using %d", rank, (long long)v,
         CHORUS_LANES_MAX, n);
  return n;
}

/* The lanes every rank gives the communicator, from the records: the
 * fewest any rank asked for, or where all ask auto, what the machines'
 * cores leave room for; -1: out of memory. */
static int host_lanes(const rank_record *rec, int n) {
  int asked = CHORUS_LANES_MAX + 1;
  for (int r = 0; r < n; r++)
    if (rec[r].lanes_asked) asked = CHORUS_MIN(asked, (int)rec[r].lanes_asked);
  if (asked <= CHORUS_LANES_MAX) return asked;
  if (!chorus_param_int(CHORUS_P_SOCKET_THREADS_FIT)) return AUTO_LANES;
  const int four = every_machine(rec, n, room_for_4_lanes);
  if (four) return four < 0 ? -1 : AUTO_LANES;
  const int two = every_machine(rec, n, room_for_2_lanes);
  return two < 0 ? -1 : two ? 2 : 1;
}

static int live_comms;

ncclResult_t chorus_comm_check(ncclComm_t comm, const char *what) {
  if (!comm) return chorus_error(ncclInvalidArgument, "%s: comm is NULL", what);
  if (__atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE) != CHORUS_COMM_MAGIC)
    return chorus_error(ncclInvalidArgument,
                        "%s: comm %p is not a valid communicator (destroyed, or never created)",
                        what, (void *)comm);
  return ncclSuccess;
}

ncclResult_t chorus_comm_enter_call(ncclComm_t comm, const char *what) {
  CHECK(chorus_comm_check(comm, what));
  /* Counted in calls_in before the abort flag is read, and ncclCommAbort
   * raises the flag before it looks at calls_in (chorus_comm_drained):
   * the two fences of util/fence.h make one of them see the other, so an
   * abort from another thread never frees what a call entering now will
   * use. One writer (the calling thread), so a plain load and store. */
  int *in = &comm->cc.calls_in;
  __atomic_store_n(in, __atomic_load_n(in, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
  chorus_fence_light();
  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_RELAXED) ||
      __atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE) != CHORUS_COMM_MAGIC) {
    chorus_comm_leave_call(comm);
    return chorus_error(ncclInvalidUsage, "%s: the communicator is being aborted", what);
  }
  return ncclSuccess;
}

void chorus_comm_leave_call(ncclComm_t comm) {
  int *in = &comm->cc.calls_in;
  __atomic_store_n(in, __atomic_load_n(in, __ATOMIC_RELAXED) - 1, __ATOMIC_RELEASE);
}

int chorus_comm_drained(ncclComm_t comm) {
  chorus_fence_heavy(); /* pairs with chorus_comm_enter_call's light fence */
  return __atomic_load_n(&comm->cc.busy, __ATOMIC_ACQUIRE) == 0 &&
         __atomic_load_n(&comm->cc.calls_in, __ATOMIC_ACQUIRE) == 0;
}

chorus_log_ctx chorus_comm_enter(ncclComm_t comm) {
  return chorus_log_ctx_set(
      (chorus_log_ctx){comm->rank, comm->nranks, comm->last_error, sizeof comm->last_error});
}

int chorus_comm_pick_device(void) {
  if (chorus_param_int(CHORUS_P_HOST_COMM)) return -1;
  return chorus_dev_current();
}

ncclResult_t chorus_comm_alloc(ncclComm_t *out, int nranks, int rank, const ncclConfig_t *cfg) {
  /* Outside the allocation counters: its memory outlives it (bury), and
   * whatever it owns is counted. */
  ncclComm_t c = calloc(1, sizeof *c);
  if (!c) return chorus_error(ncclSystemError, "out of memory allocating a communicator");
  chorus_fence_init(); /* before any call can enter (chorus_comm_enter_call) */
  c->magic = CHORUS_COMM_MAGIC;
  c->rank = rank;
  c->nranks = nranks;
  c->async = ncclInProgress;
  c->state = CHORUS_COMM_INIT;
  /* Decided at the init call, on the caller's thread: the build may run
   * on another. */
  c->device = chorus_comm_pick_device();
  ncclResult_t res = chorus_config_copy(&c->config, cfg);
  if (res != ncclSuccess) {
    free(c);
    return res;
  }
  chorus_progress_init(&c->progress);
  chorus_bufcache_init(&c->cc.bufs);
  __atomic_add_fetch(&live_comms, 1, __ATOMIC_RELAXED);
  *out = c;
  return ncclSuccess;
}

/* The build runs on the device it was bound to (a background thread starts
 * without one). */
static ncclResult_t choose_device(ncclComm_t comm) {
  if (comm->device >= 0 && chorus_dev_use(comm->device) != 0)
    return chorus_error(ncclUnhandledCudaError, "selecting GPU %d: %s", comm->device,
                        chorus_dev_error());
  return ncclSuccess;
}

size_t chorus_comm_slot_bytes(int *nslots) {
  int64_t ns = chorus_param_int(CHORUS_P_NSLOTS);
  if (ns == CHORUS_AUTO) ns = 8;
  int64_t buff = chorus_param_int(CHORUS_P_BUFFSIZE);
  if (ns < 2) ns = 2;
  if (ns > 64) ns = 64;
  int64_t sb = buff / ns;
  if (sb < 4096) sb = 4096;
  if (nslots) *nslots = (int)ns;
  return (size_t)(sb / 64 * 64);
}

/* Every rank of a host keeps a FIFO per (sender of its host, channel) in
 * shared memory, allocated whole at init (so a full /dev/shm fails the
 * init, not a later write): L ranks on a host take 2 L^2 FIFOs. Past a
 * few dozen ranks per host the FIFOs shrink (smaller slots, as many) so
 * that a host's take at most SHM_FIFO_BUDGET: 256 ranks of one host would
 * otherwise take 128 GiB at the default NCCL_BUFFSIZE. The bound uses the
 * most ranks any host holds, so every rank computes the same geometry. */
#define SHM_FIFO_BUDGET (4ull << 30)

static void cap_fifos(ncclComm_t comm, geometry *geo) {
  uint64_t lmax = 1;
  for (int h = 0; h < comm->topo.nhosts; h++)
    lmax = CHORUS_MAX(lmax, (uint64_t)comm->topo.nlocal_of_host[h]);
  const uint64_t fifo_max = SHM_FIFO_BUDGET / (CHORUS_NCHANNELS * lmax * lmax);
  const uint64_t fifo = (uint64_t)geo->slot_bytes * (uint64_t)geo->nslots;
  if (fifo <= fifo_max) return;
  const size_t was = geo->slot_bytes;
  geo->slot_bytes = (size_t)CHORUS_MAX(4096ull, fifo_max / (uint64_t)geo->nslots / 64 * 64);
  if (comm->rank == 0)
    INFO(CHORUS_INIT | CHORUS_SHM,
         "%llu ranks on a host: slots of %zu bytes, not %zu, so that the host's FIFOs take at most "
         "%llu MiB of shared memory",
         (unsigned long long)lmax, geo->slot_bytes, was, SHM_FIFO_BUDGET >> 20);
}

/* Where every rank of a host-memory communicator is a host of its own,
 * every connection is a TCP stream, and each message costs its header and
 * system calls: the FIFO is cut into fewer slots, the same bytes in larger
 * messages: 2, or 2 per stream where there are several (socket threads),
 * so that every stream still has a message in flight. Measured
 * over loopback on 2 vCPUs, 2 slots of 512 KiB against 8 of 128 KiB, 256
 * KiB-64 MiB, 2 ranks: AllReduce 1.15-1.4x, ReduceScatter 1.15-1.3x,
 * Broadcast 1.2-1.3x, AllGather and AlltoAll 1.03-1.23x from 1 MiB. 4
 * ranks sharing the 2 vCPUs, 64 KiB-16 MiB, every collective: 1.0-1.29x
 * over loopback, 1.02-1.29x between network-namespace hosts over veth
 * (streams started with reno, 128 KiB unsent at most; before those,
 * AlltoAll over loopback measured 0.6-1.2x there). On 16 cores, 2 ranks
 * with 2 socket threads each (2 streams): 4 slots of 256 KiB against 8 of
 * 128 KiB 1.0-1.26x for AllReduce and AllGather, about level for the
 * others, where 2 slots of 512 KiB had left Broadcast at 512 KiB-2 MiB
 * and AlltoAll at 1 MiB 0.6-0.9x. Where a host holds several ranks,
 * shared-memory FIFOs keep their depth (every
 * connection of a communicator has one slot size: trees and rings cut
 * calls by it). All ranks decide alike, from the agreed geometry, the
 * records and the topology. */
static void few_slots_between_hosts(ncclComm_t comm, geometry *geo) {
  if (comm->nranks < 2 || comm->topo.nhosts != comm->nranks) return;
  const int ns = geo->nstreams > 1 ? 2 * geo->nstreams : 2;
  if (ns >= geo->nslots) return;
  const size_t fifo = geo->slot_bytes * (size_t)geo->nslots;
  geo->slot_bytes = CHORUS_MAX((size_t)4096, fifo / (size_t)ns / 64 * 64);
  geo->nslots = ns;
}

static ncclResult_t exchange_records(ncclComm_t comm, geometry *geo) {
  rank_record *rec = chorus_calloc((size_t)comm->nranks, sizeof *rec);
  chorus_rank_info *info = chorus_calloc((size_t)comm->nranks, sizeof *info);
  if (!rec || !info) {
    chorus_free(rec);
    chorus_free(info);
    return chorus_error(ncclSystemError, "out of memory exchanging rank records");
  }
  int ns;
  const int64_t sb = (int64_t)chorus_comm_slot_bytes(&ns);
  int64_t stage = chorus_param_int(CHORUS_P_NODE_CHUNK), /* off: 0, no node memory */
      nstage = chorus_param_int(CHORUS_P_NODE_NBUF);
  stage = stage / 4096 * 4096;
  if (nstage < 2) nstage = 2;
  if (nstage > 16) nstage = 16;
  chorus_topo_self(&rec[comm->rank].info, comm->rank, comm->device);
  chorus_rank_info *mine = &rec[comm->rank].info;
  if (comm->device >= 0 && chorus_dev_bus_id(comm->device, mine->bus_id, sizeof mine->bus_id) != 0)
    mine->bus_id[0] = '\0';
  rec[comm->rank].slot_bytes = (uint64_t)sb;
  rec[comm->rank].nslots = (uint32_t)ns;
  rec[comm->rank].stage_bytes = (uint64_t)stage;
  rec[comm->rank].nstages = (uint32_t)nstage;
  /* NCCL's meaning: threads x sockets per thread streams per peer (and
   * channel), agreed; how many threads move them is each rank's own. */
  const int64_t nsock = CHORUS_MAX(1, chorus_param_int(CHORUS_P_NSOCKS_PERTHREAD));
  const int asked = socket_threads(comm->rank);
  const int on_hint = asked < 0 && comm->device < 0 && !comm->is_part;
  const int want = asked >= 0 ? asked : on_hint ? AUTO_THREADS : 0;
  /* A GPU communicator's lanes across hosts (its parts) are each moved by
   * a thread of their own already: threads asked for give them sockets,
   * not pumps. Pumps in every lane too (NCCL_SOCKET_NTHREADS=2, 2 hosts x
   * 1 GPU on one 16-core machine: 4 lanes x 2 pumps per rank, each pump
   * spinning after it moves bytes) made large calls 2-2.9x slower. */
  const int nthreads = comm->is_part ? 0 : want;
  rec[comm->rank].nstreams = (uint32_t)CHORUS_MIN(16, CHORUS_MAX(1, want) * CHORUS_MIN(16, nsock));
  rec[comm->rank].threads_auto = asked < 0;
  rec[comm->rank].nslots_auto = chorus_param_int(CHORUS_P_NSLOTS) == CHORUS_AUTO;
  rec[comm->rank].lanes_asked = (uint32_t)lanes_asked(comm->rank);
  chorus_status_listen(comm, &comm->bs->listen_addr, &rec[comm->rank].status);
  const char *trace = chorus_param_str(CHORUS_P_TRACE);
  rec[comm->rank].traced = trace && *trace;
  ncclResult_t res = chorus_bootstrap_allgather(comm->bs, rec, sizeof *rec);
  if (res == ncclSuccess && comm->status_held &&
      !(comm->status_peers = chorus_malloc((size_t)comm->nranks * sizeof *comm->status_peers)))
    res = chorus_error(ncclSystemError, "out of memory exchanging rank records");
  if (res != ncclSuccess) {
    chorus_free(rec);
    chorus_free(info);
    return res;
  }
  *geo = (geometry){rec[0].slot_bytes,
                    rec[0].stage_bytes,
                    (int)rec[0].nslots,
                    (int)rec[0].nstages,
                    (int)rec[0].nstreams,
                    nthreads,
                    on_hint,
                    1};
  int traced = 0, any_auto = 0, slots_auto = 1;
  for (int r = 0; r < comm->nranks; r++) {
    traced += rec[r].traced != 0;
    any_auto |= rec[r].threads_auto != 0;
    slots_auto &= rec[r].nslots_auto != 0;
    info[r] = rec[r].info;
    if (comm->status_peers) comm->status_peers[r] = rec[r].status;
    geo->slot_bytes = CHORUS_MIN(geo->slot_bytes, rec[r].slot_bytes);
    geo->stage_bytes = CHORUS_MIN(geo->stage_bytes, rec[r].stage_bytes);
    geo->nslots = CHORUS_MIN(geo->nslots, (int)rec[r].nslots);
    geo->nstages = CHORUS_MIN(geo->nstages, (int)rec[r].nstages);
    geo->nstreams = CHORUS_MIN(geo->nstreams, (int)rec[r].nstreams);
  }
  /* Every rank decides the next two alike from the records; a rank out of
   * memory for them fails its init rather than differ. */
  const int threads_fit = any_auto ? auto_threads_fit(rec, comm->nranks) : 1;
  /* Fewer, larger slots (below) only for host-memory communicators and
   * their lanes (not a GPU communicator's parts). */
  const int few_slots = slots_auto && comm->device < 0 && (!comm->is_part || comm->is_lane);
  const int lanes = comm->device < 0 && !comm->is_part ? host_lanes(rec, comm->nranks) : 1;
  chorus_free(rec);
  if (threads_fit < 0 || lanes < 0) {
    chorus_free(info);
    return chorus_error(ncclSystemError, "out of memory comparing the machines' cores");
  }
  /* Auto and short of cores somewhere: no threads, a socket per thread
   * asked for as without them. */
  if (!threads_fit) {
    geo->nstreams = CHORUS_MIN(geo->nstreams, (int)CHORUS_MIN(16, nsock));
    if (on_hint) geo->nthreads = 0;
  }
  /* Traces are merged by offsets measured against rank 0, together. */
  comm->traced_by_all = traced == comm->nranks;
  if (traced && traced < comm->nranks && comm->rank == 0)
    WARN("CHORUS_TRACE is set on %d of %d ranks: no rank traces (set it on all)", traced,
         comm->nranks);
  CHECK(chorus_topo_build(&comm->topo, info, comm->nranks, comm->rank));
  /* Lanes where every host holds one rank. */
  if (lanes > 1 && comm->topo.nhosts == comm->nranks && comm->nranks > 1) geo->lanes = lanes;
  if (few_slots) few_slots_between_hosts(comm, geo);
  cap_fifos(comm, geo);
  return ncclSuccess;
}

/* Ring order: ranks grouped by host (hosts in order of their first rank),
 * so a ring crosses the network once per host. */
static ncclResult_t build_ring(ncclComm_t comm) {
  /* One allocation: ring[pos] = rank, then ring_pos[rank] = pos. */
  comm->ring = chorus_malloc(2 * (size_t)comm->nranks * sizeof(int));
  if (!comm->ring) return chorus_error(ncclSystemError, "out of memory");
  int *pos_of = comm->ring + comm->nranks;
  int pos = 0;
  for (int h = 0; h < comm->topo.nhosts; h++)
    for (int r = 0; r < comm->nranks; r++)
      if (comm->topo.host_of[r] == h) {
        pos_of[r] = pos;
        comm->ring[pos++] = r;
      }
  return ncclSuccess;
}

static ncclResult_t setup_transports(ncclComm_t comm, const geometry *geo) {
  int n = comm->nranks;
  int *peers[2] = {chorus_malloc((size_t)n * sizeof(int)), chorus_malloc((size_t)n * sizeof(int))};
  int npeers[2] = {0, 0};
  chorus_conn **conns = NULL;
  ncclResult_t res = ncclSuccess;
  if (!peers[0] || !peers[1]) {
    res = chorus_error(ncclSystemError, "out of memory");
    goto out;
  }
  int shm_ok = !chorus_param_int(CHORUS_P_SHM_DISABLE);
  for (int p = 0; p < n; p++) {
    int shm = p == comm->rank || (shm_ok && chorus_topo_same_host(&comm->topo, p, comm->rank));
    peers[shm ? T_SHM : T_NET][npeers[shm ? T_SHM : T_NET]++] = p;
  }
  chorus_transport_ctx ctx = {comm->bs,        &comm->topo,   comm->rank,           n,
                              geo->slot_bytes, geo->nslots,   geo->stage_bytes,     geo->nstages,
                              geo->nstreams,   geo->nthreads, geo->threads_on_hint, NULL};
  const chorus_transport *const *transports = transports_of(comm);
  /* Every rank has peers over the network, or none has (the split is
   * symmetric): all choose one together, or none does. */
  chorus_net *plugin = NULL;
  if (npeers[T_NET] > 0) CHECK_GOTO(choose_network(comm, &plugin), res, out);
  if (plugin) {
    comm->transports[T_NET] = &chorus_transport_pnet;
    ctx.net = plugin; /* its setup takes it over */
  }
  /* Allocated before the last barrier: past it, peers may be in their
   * first call already, and a failure here would reach them only as
   * this rank's exit. */
  conns = chorus_calloc((size_t)n * CHORUS_NCHANNELS * 2, sizeof *conns);
  if (!conns) {
    res = chorus_error(ncclSystemError, "out of memory");
    goto out;
  }
  for (int t = 0; t < 2; t++)
    CHECK_GOTO(transports[t]->setup(&ctx, peers[t], npeers[t], &comm->tstate[t]), res, out);
  CHECK_GOTO(chorus_bootstrap_barrier(comm->bs), res, out);
  for (int t = 0; t < 2; t++) CHECK_GOTO(transports[t]->finish(comm->tstate[t]), res, out);
  comm->conns = conns;
  conns = NULL;
  for (int p = 0; p < n; p++)
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      for (int d = 0; d < 2; d++)
        for (int t = 0; t < 2; t++) {
          chorus_conn *c = transports[t]->conn(comm->tstate[t], p, ch, d);
          if (c) comm->conns[((size_t)p * CHORUS_NCHANNELS + (size_t)ch) * 2 + (size_t)d] = c;
        }
  const char *part = !comm->is_part ? "" : comm->device >= 0 ? " (host-local part)" : " (lane)";
  INFO(CHORUS_INIT, "rank %d%s: %d peer(s) over SHM, %d over NET, %d slots of %zu bytes",
       comm->rank, part, npeers[T_SHM], npeers[T_NET], geo->nslots, geo->slot_bytes);
out:
  chorus_free(conns);
  chorus_free(peers[0]);
  chorus_free(peers[1]);
  return res;
}

/* Whether the ranks on this rank's machine (its CPUs, hosts or not)
 * outnumber the CPUs they may run on. */
static int machine_crowded(const chorus_topo *t) {
  return t->nmachine > t->machine_cpus;
}

/* How long a waiting rank polls. Sleeping is the last resort: in a virtual
 * machine an idle vCPU takes tens to hundreds of microseconds to wake, so
 * with a core each we poll for a millisecond. When ranks outnumber cores,
 * polling steals the time of the rank we wait for, so we yield at once:
 * ranks on this machine's cores, whether or not NCCL_HOSTID or network
 * namespaces make them other hosts. */
static int64_t default_spin_ns(const chorus_topo *t) {
  int64_t us = chorus_param_int(CHORUS_P_SPIN_US);
  if (us != CHORUS_AUTO) return us * 1000;
  return machine_crowded(t) ? 0 : 1000000;
}

/* This rank's place among its machine's ranks + 1 where they outnumber
 * its CPUs, for host-memory communicators (coll/op.h, spread); else 0. */
static int spread_place(const ncclComm_t comm) {
  const chorus_topo *t = &comm->topo;
  if (comm->device >= 0 || comm->is_part || !chorus_param_int(CHORUS_P_SPREAD_RANKS) ||
      !machine_crowded(t))
    return 0;
  int place = 0;
  const uint64_t mine = t->info[comm->rank].machine_hash;
  for (int r = 0; r < comm->rank; r++) place += t->info[r].machine_hash == mine;
  return place + 1;
}

static void fill_coll_comm(ncclComm_t comm) {
  chorus_coll_comm *cc = &comm->cc;
  cc->rank = comm->rank;
  cc->nranks = comm->nranks;
  cc->conns = comm->conns;
  cc->transports = transports_of(comm);
  cc->tstates = comm->tstate;
  cc->ntransports = 2;
  cc->doorbell = chorus_transport_shm.doorbell(comm->tstate[T_SHM]);
  cc->node = chorus_transport_shm.node(comm->tstate[T_SHM]);
  cc->abort_flag = &comm->abort_flag;
  cc->timeout_ns = chorus_param_int(CHORUS_P_OP_TIMEOUT) * 1000000000ll;
  cc->spin_ns = default_spin_ns(&comm->topo);
  cc->yield_ns = CHORUS_MAX((int64_t)0, chorus_param_int(CHORUS_P_YIELD_US)) * 1000;
  cc->spread = spread_place(comm);
  INFO(CHORUS_INIT, "rank %d: %d rank(s) on this machine may run on %d CPU(s)%s", comm->rank,
       comm->topo.nmachine, comm->topo.machine_cpus,
       machine_crowded(&comm->topo) ? ": they outnumber them, so a waiting rank yields at once"
                                    : ": a core each");
  cc->reproducible = chorus_param_int(CHORUS_P_REPRODUCIBLE) != 0;
  cc->ring = comm->ring;
  cc->ring_pos = comm->ring + comm->nranks;
  cc->topo = &comm->topo;
  cc->failed = ncclSuccess;
  cc->progress = comm->is_part ? NULL : &comm->progress;
  cc->log_ctx =
      (chorus_log_ctx){comm->rank, comm->nranks, comm->last_error, sizeof comm->last_error};
}

/* Fault injection for the campaign (scripts/campaign.py, class alloc):
 * armed once per process, at its first init, so that it lands somewhere
 * in that init or the calls after it. */
static void arm_faults_once(void) {
  static int armed;
  if (__atomic_exchange_n(&armed, 1, __ATOMIC_RELAXED)) return;
  static const struct {
    chorus_param_id id;
    int kind; /* chorus_mem_kind; -1: device memory, armed in the device layer */
    const char *what;
  } faults[] = {{CHORUS_P_FAULT_ALLOC, CHORUS_MEM_HOST, "host allocation"},
                {CHORUS_P_FAULT_SHM, CHORUS_MEM_SHM, "shared-memory segment"},
                {CHORUS_P_FAULT_DEVICE, -1, "device allocation"}};
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    const int64_t n = chorus_param_int(faults[i].id);
    if (n <= 0 || n == CHORUS_UNSET) continue;
    WARN("%s=%lld: %s %lld from now will fail (fault injection)",
         chorus_param_desc_get(faults[i].id)->name, (long long)n, faults[i].what, (long long)n);
    if (faults[i].kind < 0)
      chorus_dev_fail_after(n);
    else
      chorus_alloc_fail_after((chorus_mem_kind)faults[i].kind, n);
  }
}

static void print_version_once(void) {
  static int printed;
  if (__atomic_exchange_n(&printed, 1, __ATOMIC_RELAXED)) return;
  chorus_param_env_report();
  /* Like NCCL, the banner needs NCCL_DEBUG to be set; we differ only in
   * printing WARN lines when it is not. */
  if (chorus_param_raw(CHORUS_P_DEBUG) && chorus_log_on(CHORUS_LOG_VERSION, CHORUS_ALL))
    chorus_log(CHORUS_LOG_VERSION, CHORUS_ALL, __FILE__, __LINE__,
               "NCCL version %d.%d.%d+chorus.%s (%s)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, "0.1.0",
               chorus_dev_built() ? "CUDA build: GPU and host memory" : "host memory only");
}

/* What the planner needs before the first call: its settings (a bad one
 * fails the init, naming it) and the host's cost-model inputs; the GPU
 * side adds its shape in chorus_gpu_setup. */
static ncclResult_t plan_setup(ncclComm_t comm) {
  chorus_coll_comm *cc = &comm->cc;
  /* Calls of GPU communicators across hosts run as host calls on staged
   * buffers (gpu/proxy.h), so the host's planner chooses for them. */
  cc->plan.env.backend =
      comm->device >= 0 && comm->topo.nhosts == 1 ? CHORUS_BACKEND_GPU : CHORUS_BACKEND_HOST;
  chorus_coll_setup(cc);
  char err[256];
  if (chorus_plan_comm_settings(&cc->plan, err, sizeof err) != 0)
    return chorus_error(ncclInvalidUsage, "rank %d: %s", comm->rank, err);
  if (comm->device >= 0 && comm->topo.nhosts > 1) chorus_plan_unbind_foreign(&cc->plan);
  if (comm->device < 0 && chorus_param_str(CHORUS_P_PROTO) && comm->rank == 0)
    INFO(CHORUS_TUNING | CHORUS_ENV,
         "NCCL_PROTO=%s: host communicators have one protocol (Simple); it does not apply",
         chorus_param_str(CHORUS_P_PROTO));
  return ncclSuccess;
}

/* A build that failed leaves no names in /dev/shm, whether or not the
 * program destroys the communicator: this rank's segment is unlinked now
 * (shm finish() does only that; its memory stays mapped until destroy),
 * and segments of peers that died in the build are swept. */
static void forget_names(ncclComm_t comm) {
  if (comm->tstate[T_SHM]) (void)chorus_transport_shm.finish(comm->tstate[T_SHM]);
  (void)chorus_shm_sweep_stale();
  /* A peer killed in the build closes its sockets (which is how this rank
   * failed) before it is a zombie, and only then can its segments be
   * swept: wait for that a little. Live peers remove their own as they
   * fail too. */
  const chorus_topo *t = &comm->topo;
  if (!t->info || !t->host_of) return;
  const int64_t dl = chorus_now_ns() + 500ll * 1000000;
  for (;;) {
    int left = 0;
    for (int p = 0; p < t->nranks; p++)
      if (p != comm->rank && t->host_of[p] == t->host_of[comm->rank] && t->info[p].pid > 0)
        left += chorus_shm_count_of(t->info[p].pid);
    if (!left || chorus_expired(dl)) return;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
    (void)chorus_shm_sweep_stale();
  }
}

ncclResult_t chorus_comm_build(ncclComm_t comm) {
  chorus_log_ctx old = chorus_comm_enter(comm);
  print_version_once();
  arm_faults_once();
  int64_t t0 = chorus_now_ns();
  /* What the build allocates (process-wide counters: other threads' builds
   * at the same moment count too), for the memory a communicator holds. */
  const long long host0 = chorus_alloc_bytes(CHORUS_MEM_HOST),
                  shm0 = chorus_alloc_bytes(CHORUS_MEM_SHM);
  ncclResult_t res;
  geometry geo = {0, 0, 0, 0, 0, 0, 0, 1};
  res = choose_device(comm);
  if (res != ncclSuccess) {
    chorus_bootstrap_give_up(comm->init.uids, comm->init.nuids, comm->nranks, comm->rank);
    goto out;
  }
  CHECK_GOTO(chorus_bootstrap_init(&comm->bs, comm->init.uids, comm->init.nuids, comm->nranks,
                                   comm->rank, &comm->abort_flag),
             res, out);
  CHECK_GOTO(exchange_records(comm, &geo), res, out);
  CHECK_GOTO(build_ring(comm), res, out);
  CHECK_GOTO(setup_transports(comm, &geo), res, out);
  /* From here a peer may be in its first call (no barrier follows): a
   * failure reaches it through what this fills in (out: below). */
  fill_coll_comm(comm);
  if (comm->nranks > 1 &&
      !(comm->cc.mine = chorus_calloc(CHORUS_NODE_CALLS, sizeof(chorus_call_entry)))) {
    res = chorus_error(ncclSystemError, "out of memory");
    goto out;
  }
  CHECK_GOTO(plan_setup(comm), res, out);
  if (comm->topo.nhosts > 1) {
    chorus_cost_env *e = &comm->cc.plan.env;
    if (comm->init.net_us > 0) {
      e->net_us = comm->init.net_us;
      e->net_bw = comm->init.net_bw;
    } else {
      CHECK_GOTO(chorus_netprobe_run(comm, &e->net_us, &e->net_bw), res, out);
    }
  }
  if (geo.lanes > 1) {
    CHECK_GOTO(chorus_comm_build_lanes(comm, geo.lanes), res, out);
    chorus_coll_comm *lane_cc[CHORUS_LANES_MAX] = {&comm->cc};
    for (int k = 1; k < comm->nlanes; k++) lane_cc[k] = &comm->part_cross[k]->cc;
    CHECK_GOTO(chorus_lanes_start(&comm->cc.lanes, lane_cc, comm->nlanes, NULL), res, out);
    comm->cc.lanes_streams = geo.nstreams;
  }
  const int max_ctas = comm->config.maxCTAs > 0 ? comm->config.maxCTAs : 0; /* unset: 0 */
  if (comm->device >= 0 && comm->topo.nhosts > 1) {
    CHECK_GOTO(chorus_proxy_setup(&comm->cc.proxy, &comm->cc, comm->device), res, out);
    CHECK_GOTO(chorus_comm_build_parts(comm), res, out);
    if (comm->nlanes > 0) {
      chorus_coll_comm *cross[CHORUS_LANES_MAX];
      for (int k = 0; k < comm->nlanes; k++) cross[k] = &comm->part_cross[k]->cc;
      ncclComm_t local = comm->part_local; /* none with one rank per host */
      CHECK_GOTO(chorus_proxy_set_parts(comm->cc.proxy, local ? local->cc.gpu : NULL,
                                        local ? &local->cc : NULL, cross, comm->nlanes),
                 res, out);
    }
  } else if (comm->device >= 0)
    CHECK_GOTO(chorus_gpu_setup(&comm->cc.gpu, comm->bs, &comm->topo, comm->rank, comm->nranks,
                                comm->device, max_ctas, &comm->cc.plan),
               res, out);
  if (comm->device >= 0 && comm->cc.reproducible && !comm->is_part)
    CHECK_GOTO(chorus_gpu_ordered_new(&comm->cc.gpu_ordered, comm->device, max_ctas), res, out);
  if (!comm->is_part) chorus_stats_register(comm);  /* counted from its first call */
  chorus_status_register(comm, comm->status_peers); /* takes them */
  comm->status_peers = NULL;
  chorus_prof_open(comm); /* before the trace: it times GPU calls for the plugin too */
  CHECK_GOTO(chorus_tuner_open(comm), res, out);
  CHECK_GOTO(chorus_trace_open(comm), res, out);
  __atomic_store_n(&comm->state, CHORUS_COMM_READY, __ATOMIC_RELEASE);
  INFO(CHORUS_INIT,
       "comm %p rank %d nranks %d on %d host(s) ready in %.1f ms (%s); the process holds %.1f "
       "KiB more host memory and %.1f KiB more shared memory (with ranks built alongside)%s",
       (void *)comm, comm->rank, comm->nranks, comm->topo.nhosts, (chorus_now_ns() - t0) / 1e6,
       comm->config.commName ? comm->config.commName : "unnamed",
       (double)(chorus_alloc_bytes(CHORUS_MEM_HOST) - host0) / 1024,
       (double)(chorus_alloc_bytes(CHORUS_MEM_SHM) - shm0) / 1024,
       comm->device >= 0 ? " (device arenas: the GPU lines above)" : "");
out:
  if (res != ncclSuccess) {
    /* Peers already in their first call wait in node memory or on their
     * connections, not on the bootstrap: they read the first cause there
     * (a neighbour's word, else this rank's error), whichever rank's exit
     * they would otherwise see first. */
    if (comm->cc.conns)
      chorus_exec_fail_comm(&comm->cc, ncclRemoteError,
                            comm->bs && comm->bs->cause[0] ? comm->bs->cause
                                                           : chorus_last_error(NULL));
    chorus_bootstrap_fail(comm->bs); /* the peers learn at once, not after the sweep */
    forget_names(comm);
  }
  chorus_free(comm->init.uids);
  comm->init.uids = NULL;
  __atomic_store_n(&comm->async, res, __ATOMIC_RELEASE);
  chorus_log_ctx_set(old);
  return res;
}

static void *build_thread(void *arg) {
  chorus_comm_build(arg);
  return NULL;
}

ncclResult_t chorus_comm_build_async(ncclComm_t comm) {
  if (pthread_create(&comm->job_thread, NULL, build_thread, comm) != 0)
    return chorus_error(ncclSystemError, "cannot start the init thread");
  comm->has_job_thread = 1;
  return ncclInProgress;
}

void chorus_comm_join(ncclComm_t comm) {
  if (comm->has_job_thread) {
    pthread_join(comm->job_thread, NULL);
    comm->has_job_thread = 0;
  }
}

/* A freed communicator's memory is kept, its magic cleared, until
 * GRAVES later ones have gone: a call on it (destroyed twice, used after
 * ncclCommDestroy) then reads memory that is still this library's and
 * finds it invalid, instead of reading freed memory. */
#define GRAVES 64
static ncclComm_t graves[GRAVES];
static unsigned next_grave;
static pthread_mutex_t graves_lock = PTHREAD_MUTEX_INITIALIZER;

static void bury(ncclComm_t comm) {
  __atomic_store_n(&comm->magic, 0, __ATOMIC_RELEASE);
  pthread_mutex_lock(&graves_lock);
  ncclComm_t old = graves[next_grave];
  graves[next_grave] = comm;
  next_grave = (next_grave + 1) % GRAVES;
  pthread_mutex_unlock(&graves_lock);
  free(old);
}

void chorus_comm_inherit_net(ncclComm_t child, const struct ncclComm *parent) {
  child->init.net_us = parent->cc.plan.env.net_us;
  child->init.net_bw = parent->cc.plan.env.net_bw;
}

void chorus_comm_free(ncclComm_t comm) {
  chorus_comm_join(comm);
  chorus_trace_close(comm); /* its GPU events, while the device side stands */
  chorus_tuner_close(comm);
  chorus_status_unregister(comm); /* no more answers about it */
  chorus_free(comm->status_peers);
  chorus_stats_unregister(comm); /* its last line, while its topology stands */
  chorus_comm_regs_free(comm);   /* windows' mappings, before the GPU side goes */
  chorus_gpu_free(comm->cc.gpu);
  comm->cc.gpu = NULL;
  chorus_proxy_free(comm->cc.proxy); /* its thread, before the connections and parts go */
  comm->cc.proxy = NULL;
  chorus_gpu_ordered_free(comm->cc.gpu_ordered);
  comm->cc.gpu_ordered = NULL;
  chorus_lanes_free(comm->cc.lanes); /* their threads, before their parts go */
  comm->cc.lanes = NULL;
  /* After the trace (its last GPU times go to the plugin) and the helper
   * threads (their last events too); before the parts it hooks. */
  chorus_prof_close(comm);
  chorus_comm_free_parts(comm);
  for (int t = 1; t >= 0; t--) {
    transports_of(comm)[t]->destroy(comm->tstate[t]);
    comm->tstate[t] = NULL;
  }
  chorus_bootstrap_destroy(comm->bs);
  chorus_topo_free(&comm->topo);
  chorus_free(comm->conns);
  chorus_free(comm->cc.mine);
  chorus_free(comm->ring);
  chorus_free(comm->init.uids);
  chorus_free(comm->user_ops);
  chorus_config_free(&comm->config);
  chorus_progress_destroy(&comm->progress);
  chorus_bufcache_free(&comm->cc.bufs);
  (void)chorus_shm_sweep_stale(); /* peers that died before unlinking theirs */
  bury(comm);
  if (__atomic_sub_fetch(&live_comms, 1, __ATOMIC_RELAXED) == 0 &&
      chorus_param_int(CHORUS_P_LEAK_CHECK)) {
    for (int k = 0; k < CHORUS_MEM_KINDS; k++)
      if (chorus_alloc_blocks((chorus_mem_kind)k) > 0)
        WARN("leak check: %lld block(s), %lld bytes of kind %d still held after the last "
             "communicator was destroyed",
             (long long)chorus_alloc_blocks((chorus_mem_kind)k),
             (long long)chorus_alloc_bytes((chorus_mem_kind)k), k);
  }
}

ncclResult_t chorus_comm_usable(ncclComm_t comm, const char *what) {
  int state = __atomic_load_n(&comm->state, __ATOMIC_ACQUIRE);
  ncclResult_t async = __atomic_load_n(&comm->async, __ATOMIC_ACQUIRE);
  if (state == CHORUS_COMM_INIT && async == ncclInProgress)
    return chorus_error(ncclInvalidUsage,
                        "%s: the communicator is still initializing; poll ncclCommGetAsyncError "
                        "until it returns ncclSuccess",
                        what);
  if (async != ncclSuccess)
    return chorus_error(async,
                        "%s: the communicator failed earlier (%s) and must be aborted or "
                        "destroyed",
                        what, ncclGetErrorString(async));
  if (comm->cc.failed != ncclSuccess)
    return chorus_error(comm->cc.failed,
                        "%s: a previous call on this communicator failed; abort it "
                        "(ncclCommAbort) and create a new one",
                        what);
  if (state == CHORUS_COMM_FINALIZED)
    return chorus_error(ncclInvalidUsage, "%s: the communicator was finalized", what);
  if (state == CHORUS_COMM_REVOKED)
    return chorus_error(ncclInvalidUsage, "%s: the communicator was revoked", what);
  return ncclSuccess;
}
