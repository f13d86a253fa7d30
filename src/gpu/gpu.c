/*
 * gpu.c - see gpu.h.
 *
 * Window of one rank (device memory, zeroed at init):
 *   [0, 256)          LL per-block epoch counters (CHORUS_KERN_MAX_BLOCKS x 4 B)
 *   [256, 512)        zero-copy epochs, one per CTA (x 4 B)
 *   [512, 544)        init-time test words, one per writing rank
 *   [1024, 3072)      LL ack words: [block][source rank] x 4 B
 *   [4096, 8192)      pipeline totals: sent [channel][dst], taken [channel][src]
 *   [8192, 139264)    pipeline counters, one per 128-byte line: head
 *                     [channel][src], then done [channel][dst]
 *   [139264, 141312)  Send/Recv LL epochs: send [dst][part], recv [src][part]
 *                     x 4 B (CHORUS_KERN_P2P_PARTS parts per peer)
 *   [141312, 142336)  Send/Recv LL acks: [dst][part] x 4 B (dst writes)
 *   [142336, 142468)  Send/Recv LL barrier across CTAs: generation, arrivals [part]
 *   [143360, 143616)  failures other ranks found: [src] x 32 B (src writes)
 *   [196608, 212992)  LL call headers: [parity 2][source rank 8][block 64] x 16 B
 *   [212992, 229376)  zero-copy barrier lines: [CTA 64][source rank 8] x 32 B
 *   [262144, ...)     LL slots: [parity 2][source rank n][ll_lines] x 16 B
 *   then Send/Recv LL slots: [source rank n][parity 2][part p2p_ll_parts]
 *                     [1 + p2p_ll_lines] x 16 B
 *   then (64 KiB aligned) pipeline FIFOs: [channel][src] x fifo_bytes
 * Peers write only the slots, FIFOs, counters and test words indexed by
 * their own rank; the owner alone reads them and alone touches its epochs
 * and totals.
 * Where windows live and how peers reach them: gpu/window.h.
 */
#include "gpu/gpu.h"

#include "gpu/gpu_impl.h"
#include "gpu/launchers.h"
#include "gpu/window.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "algo/algos.h"
#include "device/device.h"
#include "device/kernels.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/log.h"
#include "util/misc.h"
#include "util/param.h"
#include "util/watch.h"

#define EPOCHS_OFF  0
#define DIRECT_EP   256
#define TEST_OFF    512
#define ACK_OFF     1024
#define CNT_OFF     4096
#define CTL_OFF     8192
#define P2P_EP_OFF  139264
#define P2P_ACK_OFF 141312
#define P2P_BAR_OFF 142336
#define FAIL_OFF    143360
#define HDR_OFF     196608 /* LL call headers: [2][8][64] lines */
#define DIRECT_OFF  212992 /* zero-copy barriers: [64][8] x 32 B */
#define LL_OFF      262144
/* Host-mapped control words: abort, status, status peer, peer-gone bits
 * (4 B each), then at 16 the status details (3 x 8 B). */
#define CTL_BYTES       64
#define PEER_GONE_OFF   12
#define STATUS_INFO_OFF 16
/* Staged windows are host memory: fewer pipeline channels keep them small
 * (a FIFO per channel and peer). */
#define STAGED_CHANNELS 16
#define P2P_WORDS       (CHORUS_KERN_MAX_RANKS * CHORUS_KERN_P2P_PARTS * 4)
_Static_assert(TEST_OFF + 4 * CHORUS_KERN_MAX_RANKS <= ACK_OFF &&
                   CTL_OFF + 2 * CHORUS_KERN_MAX_CHANNELS * CHORUS_KERN_MAX_RANKS *
                                 CHORUS_KERN_CTL_STRIDE <=
                       P2P_EP_OFF &&
                   P2P_EP_OFF + 2 * P2P_WORDS <= P2P_ACK_OFF &&
                   P2P_ACK_OFF + P2P_WORDS <= P2P_BAR_OFF &&
                   P2P_BAR_OFF + 4 * (1 + CHORUS_KERN_P2P_PARTS) <= FAIL_OFF &&
                   FAIL_OFF + 32 * CHORUS_KERN_MAX_RANKS <= HDR_OFF,
               "window words overlap");
_Static_assert(CNT_OFF + 2 * CHORUS_KERN_MAX_CHANNELS * CHORUS_KERN_MAX_RANKS * 4 <= CTL_OFF,
               "pipeline totals overlap the counters");
_Static_assert(CTL_OFF + 2 * CHORUS_KERN_MAX_CHANNELS * CHORUS_KERN_MAX_RANKS *
                             CHORUS_KERN_CTL_STRIDE <=
                   LL_OFF,
               "pipeline counters overlap the LL slots");
_Static_assert(
    CTL_OFF + 2 * CHORUS_KERN_MAX_CHANNELS * CHORUS_KERN_MAX_RANKS * CHORUS_KERN_CTL_STRIDE <=
            HDR_OFF &&
        HDR_OFF + 2 * CHORUS_KERN_MAX_RANKS * CHORUS_KERN_MAX_BLOCKS * CHORUS_KERN_LINE <= LL_OFF,
    "LL call headers overlap");
_Static_assert(DIRECT_EP + 4 * CHORUS_KERN_MAX_BLOCKS <= TEST_OFF &&
                   HDR_OFF +
                           2 * CHORUS_KERN_MAX_RANKS * CHORUS_KERN_MAX_BLOCKS * CHORUS_KERN_LINE <=
                       DIRECT_OFF &&
                   DIRECT_OFF + 32 * CHORUS_KERN_MAX_RANKS * CHORUS_KERN_MAX_BLOCKS <= LL_OFF,
               "zero-copy words overlap");

/* The setting that holds on nranks ranks: `pair` on 2 where it is set
 * above 0 ("0: the same"), else `id`. */
static chorus_param_id pair_or(chorus_param_id id, chorus_param_id pair, int nranks) {
  return nranks == 2 && chorus_param_int(pair) > 0 ? pair : id;
}

/* A step size setting: whole 4 KiB pages, 4 KiB to 16 MiB. */
static uint32_t step_param(chorus_param_id id) {
  return (uint32_t)CHORUS_CLAMP(chorus_param_int(id), 4096, 1 << 24) / 4096 * 4096;
}

/* NCCL_ALGO and NCCL_PROTO, as masks of what they exclude per function. */
static void tune_filters(chorus_gpu_tune *t) {
  const char *algo = chorus_param_str(CHORUS_P_ALGO), *proto = chorus_param_str(CHORUS_P_PROTO);
  for (int f = 0; f < CHORUS_FUNC_COUNT; f++) {
    int named = 0;
    t->algo_deny[f] = ~chorus_algo_allowed_ex(algo, f, &named);
    t->algo_named[f] = (uint8_t)named;
    t->proto_deny[f] = ~chorus_proto_allowed_ex(proto, f, NULL);
    /* A list that leaves neither LL nor Simple (say "LL128") does not
     * apply: Chorus has no other protocol. */
    const uint32_t usable = (1u << CHORUS_PROTO_LL) | (1u << CHORUS_PROTO_SIMPLE);
    if ((t->proto_deny[f] & usable) == usable) {
      if (f == CHORUS_FUNC_ALLREDUCE)
        INFO(CHORUS_TUNING | CHORUS_ENV,
             "NCCL_PROTO=%s allows neither LL nor Simple, the protocols of Chorus's GPU kernels; "
             "ignoring it",
             proto);
      t->proto_deny[f] = 0;
    }
  }
}

void chorus_gpu_tune_read(chorus_gpu_tune *t, int nranks, uint32_t channels, size_t ll_lines,
                          uint32_t ll_cta_lines) {
  memset(t, 0, sizeof *t);
  /* Blocks below 256 KiB per peer go in LL lines (4xH200, 4 processes:
   * AllGather, ReduceScatter, AlltoAll, Gather and Scatter of 128-512 KiB
   * took 8.5-12.8 us in the pipeline from 16 KiB, 5.0-8.9 in LL; on 2 GPUs
   * LL measured faster up to 128 KiB). */
  t->pipe_bytes = (size_t)CHORUS_MAX(
      0, chorus_param_int(nranks > 2 ? CHORUS_P_GPU_PIPE_BYTES : CHORUS_P_GPU_PIPE_BYTES_PAIR));
  /* The two-shot's FIFO kernel needs two channels (its gathering half uses
   * the upper half of them). On 2 GPUs it runs only in LL lines: there it
   * moves what a one-shot moves, and FIFO steps measured slower (2 MiB:
   * 22.4 against 19.0 us, 4xH200). */
  const int64_t twoshot =
      chorus_param_int(nranks > 2 ? CHORUS_P_GPU_TWOSHOT_BYTES : CHORUS_P_GPU_TWOSHOT_BYTES_PAIR);
  t->twoshot_ll_bytes = (size_t)CHORUS_MAX(0, chorus_param_int(CHORUS_P_GPU_TWOSHOT_LL_BYTES));
  t->twoshot_bytes = twoshot < 0 ? SIZE_MAX : (size_t)twoshot;
  t->twoshot_max = nranks > 2 ? SIZE_MAX : t->twoshot_ll_bytes;
  t->fifo_twoshot = channels >= 2;
  t->ll_lines = ll_lines;
  t->ll_cta_lines = ll_cta_lines;
  /* Chains for Broadcast and Reduce from 256 KiB on 3+ GPUs (below, the
   * root's fan-out: a chain's three hops cost 7.5-9 us against 5-6). On 2
   * GPUs a chain is the fan-out's one hop in the ring kernel's larger
   * steps. */
  const int64_t chain =
      chorus_param_int(nranks > 2 ? CHORUS_P_GPU_CHAIN_BYTES : CHORUS_P_GPU_CHAIN_BYTES_PAIR);
  t->chain_bytes = chain < 0 ? SIZE_MAX : (size_t)chain;
  const int64_t ring = chorus_param_int(CHORUS_P_GPU_RING_BYTES);
  t->ring_bytes = ring > 0 ? (size_t)ring : SIZE_MAX; /* 0: never */
  /* Send/Recv in LL lines up to CHORUS_GPU_P2P_LL_BYTES (the slots are
   * sized from it), unless NCCL_PROTO excludes LL for sendrecv. */
  t->p2p_ll_bytes =
      (size_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_P2P_LL_BYTES), 0, CHORUS_GPU_P2P_LL_MAX);
  t->p2p_ce_bytes = (size_t)CHORUS_MAX(0, chorus_param_int(CHORUS_P_GPU_P2P_CE_BYTES));
  t->bcast_ce_bytes =
      (size_t)CHORUS_MAX(0, chorus_param_int(nranks > 2 ? CHORUS_P_GPU_BCAST_CE_BYTES
                                                        : CHORUS_P_GPU_BCAST_CE_BYTES_PAIR));
  t->bcast_ce_chunk = (size_t)CHORUS_MAX(1 << 20, chorus_param_int(CHORUS_P_GPU_BCAST_CE_CHUNK));
  t->xchg_ce_bytes =
      (size_t)CHORUS_MAX(0, chorus_param_int(nranks > 2 ? CHORUS_P_GPU_XCHG_CE_BYTES
                                                        : CHORUS_P_GPU_XCHG_CE_BYTES_PAIR));
  tune_filters(t);
  if (t->proto_deny[CHORUS_FUNC_SEND] & (1u << CHORUS_PROTO_LL)) t->p2p_ll_bytes = 0;
}

/* The peers in other processes, watched (util/watch.h): when one exits,
 * its bit rises in the peer-gone word and the kernels waiting for it stop
 * at once instead of at their deadline. */
static ncclResult_t watch_peers(chorus_gpu *g, const chorus_gpu_win_rec *rec, int nranks) {
  int32_t pids[CHORUS_KERN_MAX_RANKS];
  int ranks[CHORUS_KERN_MAX_RANKS], n = 0;
  const int32_t me = (int32_t)getpid();
  for (int p = 0; p < nranks; p++)
    if (p != g->rank && rec[p].pid != me) {
      pids[n] = rec[p].pid;
      ranks[n++] = p;
    }
  if (n == 0) return ncclSuccess;
  return chorus_watch_add(pids, ranks, n,
                          (volatile uint32_t *)((char *)g->ctl_host + PEER_GONE_OFF), &g->watch);
}

ncclResult_t chorus_gpu_setup(chorus_gpu **out, chorus_bootstrap *bs, const chorus_topo *topo,
                              int rank, int nranks, int device) {
  *out = NULL;
  if (nranks > CHORUS_KERN_MAX_RANKS)
    return chorus_error(ncclInvalidUsage,
                        "GPU communicators of more than %d ranks are not implemented yet in "
                        "Chorus (this one has %d); set CHORUS_HOST_COMM=1 for host memory",
                        CHORUS_KERN_MAX_RANKS, nranks);
  if (topo->nhosts > 1)
    return chorus_error(ncclInvalidUsage,
                        "GPU communicators across hosts are not implemented yet in Chorus (this "
                        "one spans %d hosts); set CHORUS_HOST_COMM=1 for host memory",
                        topo->nhosts);
  if (chorus_dev_use(device) != 0) return chorus_gpu_cuda_error("selecting the communicator's GPU");
  chorus_gpu *g = chorus_calloc(1, sizeof *g);
  chorus_gpu_win_rec *rec = chorus_calloc((size_t)nranks, sizeof *rec);
  ncclResult_t res = ncclSuccess;
  if (!g || !rec) {
    res = chorus_error(ncclSystemError, "out of memory setting up a GPU communicator");
    goto fail;
  }
  g->rank = rank;
  g->nranks = nranks;
  g->device = device;
  /* Settings that ranks read differently would make them cut FIFOs and
   * pick algorithms differently: every rank fails here instead. */
  chorus_gpu_agree *agree = chorus_calloc((size_t)nranks, sizeof *agree);
  if (!agree) {
    res = chorus_error(ncclSystemError, "out of memory setting up a GPU communicator");
    goto fail;
  }
  chorus_gpu_agree_read(&agree[rank]);
  res = chorus_bootstrap_allgather(bs, agree, sizeof *agree);
  char why[256];
  if (res == ncclSuccess && chorus_gpu_agree_check(agree, nranks, why, sizeof why) >= 0)
    res = chorus_error(ncclInvalidUsage, "rank %d: GPU communicator setup: %s", rank, why);
  chorus_free(agree);
  if (res != ncclSuccess) goto fail;
  int staged = 0; /* windows in pinned shared host memory */
  CHECK_GOTO(chorus_gpu_wins_need_staging(bs, rank, nranks, device, &staged), res, fail);
  int64_t ll = chorus_param_int(CHORUS_P_GPU_LL_BYTES);
  if (ll < 4096) ll = 4096;
  g->ll_bytes = (size_t)ll / 8 * 8;
  g->kc.rank = rank;
  g->kc.nranks = nranks;
  g->kc.ll_lines = g->ll_bytes / 8;
  g->kc.ll_off = LL_OFF;
  g->kc.hdr_off = HDR_OFF;
  g->kc.ll_cta_lines =
      (uint32_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_LL_CTA_LINES), 32, 65536) / 32 * 32;
  g->kc.ack_off = ACK_OFF;
  g->kc.cnt_off = CNT_OFF;
  g->kc.ctl_off = CTL_OFF;
  g->kc.channels =
      (uint32_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_CHANNELS), 1, CHORUS_KERN_MAX_CHANNELS);
  if (staged && g->kc.channels > STAGED_CHANNELS) g->kc.channels = STAGED_CHANNELS;
  g->kc.chunk_bytes =
      step_param(pair_or(CHORUS_P_GPU_CHUNK_BYTES, CHORUS_P_GPU_CHUNK_BYTES_PAIR, nranks));
  /* At least two wide chunks per FIFO, and half a FIFO whole pages. */
  const int64_t fifo =
      chorus_param_int(pair_or(CHORUS_P_GPU_FIFO_BYTES, CHORUS_P_GPU_FIFO_BYTES_PAIR, nranks));
  g->kc.fifo_bytes =
      (uint32_t)CHORUS_CLAMP(fifo, 2 * (int64_t)g->kc.chunk_bytes, 1 << 28) / 8192 * 8192;
  /* Rings use the pipeline's FIFOs, so no more channels than it has. */
  g->kc.ring_channels =
      (uint32_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_RING_CHANNELS), 1, g->kc.channels);
  g->kc.ring_chunk = step_param(CHORUS_P_GPU_RING_CHUNK_BYTES);
  g->kc.twoshot_channels = (uint32_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_TWOSHOT_CHANNELS),
                                                  1, CHORUS_KERN_MAX_CHANNELS / 2);
  g->kc.twoshot_chunk = step_param(CHORUS_P_GPU_TWOSHOT_CHUNK_BYTES);
  chorus_gpu_tune_read(&g->tune, nranks, g->kc.channels, g->kc.ll_lines, g->kc.ll_cta_lines);
  g->kc.p2p_ep_off = P2P_EP_OFF;
  g->kc.p2p_ack_off = P2P_ACK_OFF;
  g->kc.p2p_ll_off = LL_OFF + 2 * (size_t)nranks * g->kc.ll_lines * CHORUS_KERN_LINE;
  g->kc.p2p_bar_off = P2P_BAR_OFF;
  g->kc.fail_off = FAIL_OFF;
  g->kc.pipe_fence = chorus_param_int(CHORUS_P_GPU_PIPE_FENCE) != 0;
  g->kc.p2p_pull = chorus_param_int(CHORUS_P_GPU_P2P_PULL) != 0;
  g->kc.p2p_slots = (uint32_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_P2P_SLOTS), 2, 16);
  g->kc.direct_off = DIRECT_OFF;
  g->kc.direct_ep_off = DIRECT_EP;
  g->staged = staged;
  chorus_gpu_direct_read(&g->direct);
  chorus_gpu_p2p_descs(&g->p2p_send_desc, &g->p2p_recv_desc);
  {
    size_t part;
    g->kc.p2p_ll_parts = chorus_kern_p2p_parts(g->tune.p2p_ll_bytes, CHORUS_KERN_P2P_PARTS, &part);
    g->kc.p2p_ll_lines =
        (uint32_t)(chorus_kern_p2p_part_cap(g->tune.p2p_ll_bytes, CHORUS_KERN_P2P_PARTS) / 8);
  }
  size_t ll_end = g->kc.p2p_ll_off + (size_t)nranks * 2 * g->kc.p2p_ll_parts *
                                         (1 + (size_t)g->kc.p2p_ll_lines) * CHORUS_KERN_LINE;
  g->kc.pipe_off = (ll_end + 65535) / 65536 * 65536;
  size_t wbytes = g->kc.pipe_off + (size_t)g->kc.channels * (size_t)nranks * g->kc.fifo_bytes;
  chorus_gpu_win_rec *me = &rec[rank];
  CHECK_GOTO(chorus_gpu_wins_create(&g->wins, rank, nranks, device, wbytes, staged,
                                    chorus_param_int(CHORUS_P_GPU_CUMEM) != 0, me),
             res, fail);
  if (chorus_dev_host_alloc(CTL_BYTES, &g->ctl_host, &g->ctl_dev) != 0) {
    res = chorus_gpu_cuda_error("allocating host-mapped control words");
    goto fail;
  }
  g->kc.epochs = (uint32_t *)((char *)g->wins.own + EPOCHS_OFF);
  g->kc.abort = (volatile int32_t *)g->ctl_dev;
  g->kc.status = (int32_t *)g->ctl_dev + 1;
  g->kc.status_peer = (int32_t *)g->ctl_dev + 2;
  g->kc.status_info = (uint64_t *)((char *)g->ctl_dev + STATUS_INFO_OFF);
  g->kc.peer_gone = (volatile uint32_t *)((char *)g->ctl_dev + PEER_GONE_OFF);
  int64_t tmo = chorus_param_int(CHORUS_P_OP_TIMEOUT);
  g->kc.timeout_ns = tmo > 0 ? (uint64_t)tmo * 1000000000ull : 0;

  CHECK_GOTO(chorus_bootstrap_allgather(bs, rec, sizeof *rec), res, fail);
  for (int p = 0; p < nranks; p++)
    if (p != rank && chorus_topo_same_host(topo, p, rank) && !strcmp(rec[p].bus_id, me->bus_id)) {
      res = chorus_error(ncclInvalidUsage,
                         "ranks %d and %d both use GPU %s; each rank of a GPU communicator needs "
                         "its own GPU",
                         p < rank ? p : rank, p < rank ? rank : p, me->bus_id);
      goto fail;
    }
  CHECK_GOTO(chorus_gpu_wins_map(&g->wins, rec, topo, TEST_OFF), res, fail);
  for (int p = 0; p < nranks; p++) g->kc.win[p] = g->wins.base[p];
  /* Who shares a process with whom (zero-copy needs all or none), and a
   * name for the communicator that its ranks in this process share. */
  g->all_local = g->all_remote = 1;
  for (int p = 0; p < nranks; p++)
    for (int q = p + 1; q < nranks; q++) {
      if (chorus_topo_same_proc(topo, p, q))
        g->all_remote = 0;
      else
        g->all_local = 0;
    }
  g->key = (uint64_t)(uint32_t)rec[0].pid << 32 ^ rec[0].addr;
  CHECK_GOTO(chorus_bootstrap_barrier(bs), res, fail);
  chorus_gpu_wins_settled(&g->wins); /* every peer has mapped every window */
  CHECK_GOTO(watch_peers(g, rec, nranks), res, fail);
  INFO(CHORUS_INIT,
       "rank %d GPU %d (%s): window %zu bytes of %s, LL %zu bytes per peer, pipeline %u channels "
       "x %u FIFO bytes per peer, steps of %u bytes with every peer",
       rank, device, me->bus_id, g->wins.own_bytes, chorus_gpu_wins_kind(&g->wins), g->ll_bytes,
       g->kc.channels, g->kc.fifo_bytes, g->kc.chunk_bytes);
  chorus_free(rec);
  chorus_launchers_hold();
  g->holds_launchers = 1;
  *out = g;
  return ncclSuccess;
fail:
  chorus_free(rec);
  chorus_gpu_free(g);
  return res;
}

void chorus_gpu_free(chorus_gpu *g) {
  if (!g) return;
  chorus_gpu_windows_free(g);
  chorus_watch_remove(g->watch); /* before the word it raises goes */
  if (g->holds_launchers) chorus_launchers_release();
  chorus_dev_use(g->device);
  chorus_dev_stream_free(g->side_stream);
  chorus_gpu_wins_free(&g->wins);
  chorus_dev_host_free(g->ctl_host);
  chorus_free(g);
}

void chorus_gpu_abort(chorus_gpu *g) {
  if (g && g->ctl_host) __atomic_store_n((int32_t *)g->ctl_host, 1, __ATOMIC_RELEASE);
}

/* What kernel status `why` means, in words (into buf), and its result
 * code: `who` (on GPU `device`, -1 when not known here) saw it about rank
 * `peer`; info as status_info. */
static ncclResult_t status_words(const chorus_gpu *g, int why, int who, int device, int peer,
                                 uint64_t info0, uint64_t info1, char *buf, size_t len) {
  char at[48] = "";
  if (device >= 0) snprintf(at, sizeof at, " (GPU %d)", device);
  switch (why) {
  case CHORUS_KERN_CALL_MISMATCH: {
    char theirs[160], mine[160];
    chorus_gpu_call_describe(info0, theirs, sizeof theirs);
    chorus_gpu_call_describe(info1, mine, sizeof mine);
    snprintf(buf, len,
             "mismatched calls across ranks: rank %d%s called %s but rank %d called %s. Every "
             "rank must issue the same collectives, with the same count, type, op and root, in "
             "the same order",
             who, at, mine, peer, theirs);
    return ncclInvalidUsage;
  }
  case CHORUS_KERN_SEND_OFFSET:
  case CHORUS_KERN_RECV_OFFSET:
    snprintf(buf, len,
             "zero-copy collective through symmetric windows: rank %d%s's %s buffer is at offset "
             "%llu of its window but rank %d's at offset %llu. Windows registered with "
             "NCCL_WIN_COLL_SYMMETRIC promise that every rank passes buffers at the same offsets "
             "of them",
             who, at, why == CHORUS_KERN_SEND_OFFSET ? "send" : "receive",
             (unsigned long long)info1, peer, (unsigned long long)info0);
    return ncclInvalidUsage;
  case CHORUS_KERN_MISMATCH:
    snprintf(buf, len,
             "mismatched point-to-point calls: rank %d's ncclRecv from rank %d expected %llu bytes "
             "but rank %d's matching ncclSend sent %llu%s. A send and its receive must have the "
             "same count and type, and sends to one peer are matched in call order",
             who, peer, (unsigned long long)info1, peer, (unsigned long long)info0, at);
    return ncclInvalidUsage;
  case CHORUS_KERN_PEER_EXITED: {
    int32_t pid = 0;
    const int first = chorus_watch_dead(g->watch, &pid);
    snprintf(buf, len,
             "rank %d%s: rank %d exited while a GPU kernel waited for it (first to exit: rank %d, "
             "pid %d on this host)",
             who, at, peer, first, (int)pid);
    return ncclRemoteError;
  }
  case CHORUS_KERN_ABORTED:
    snprintf(buf, len,
             "rank %d: a GPU kernel stopped waiting for rank %d because the communicator was "
             "aborted",
             who, peer);
    return ncclRemoteError;
  default:
    if (peer < 0) /* a barrier among the blocks of one launch (the LL Send/Recv's) */
      snprintf(buf, len,
               "rank %d%s: the blocks of a GPU Send/Recv kernel waited more than "
               "CHORUS_OP_TIMEOUT seconds for each other (were they not all scheduled? other "
               "kernels may hold the GPU's SMs)",
               who, at);
    else
      snprintf(buf, len,
               "rank %d%s: a GPU kernel waited more than CHORUS_OP_TIMEOUT seconds for rank %d, "
               "which never sent its data (it died, or called a different collective)",
               who, at, peer);
    return ncclRemoteError;
  }
}

ncclResult_t chorus_gpu_async_error(chorus_gpu *g) {
  if (!g) return ncclSuccess;
  volatile int32_t *ctl = g->ctl_host;
  const int32_t st = ctl[1];
  if (st == CHORUS_KERN_OK) return ncclSuccess;
  const int peer = ctl[2];
  const volatile uint64_t *info =
      (const volatile uint64_t *)((char *)g->ctl_host + STATUS_INFO_OFF);
  /* A failure another rank wrote here: its words, its code. */
  const int why = st == CHORUS_KERN_PEER_FAILED ? (int)(info[2] >> 32) : st;
  char words[512];
  const ncclResult_t code =
      st == CHORUS_KERN_PEER_FAILED
          ? status_words(g, why, peer, -1, (int)(uint32_t)info[2], info[0], info[1], words,
                         sizeof words)
          : status_words(g, st, g->rank, g->device, peer, info[0], info[1], words, sizeof words);
  if (__atomic_exchange_n(&g->reported, 1, __ATOMIC_ACQ_REL)) return code;
  if (st == CHORUS_KERN_ABORTED) return chorus_error(code, "%s", words);
  if (st == CHORUS_KERN_PEER_FAILED)
    return chorus_error(
        code,
        "rank %d (GPU %d): a GPU kernel stopped because rank %d's kernel failed first: "
        "%s; the communicator cannot be used any more (ncclCommAbort it)",
        g->rank, g->device, peer, words);
  return chorus_error(code, "%s; the communicator cannot be used any more (ncclCommAbort it)",
                      words);
}

/* Runs one exchange, the same way on every rank: rings and chains in the
 * ring kernel, two-shot AllReduce in its kernel, large blocks in one pipelined launch, the rest as
 * LL launches of pieces that fit the slots. */
static ncclResult_t run_exchange(chorus_gpu *g, const chorus_kern_red *red,
                                 const chorus_kern_xchg *whole, const chorus_op *op) {
  int err = 0;
  if (whole->ring) {
    err = chorus_kern_ring(&g->kc, red, whole, op->cuda_stream);
  } else if (whole->twoshot) {
    err = whole->ll ? chorus_kern_exchange(&g->kc, red, whole, op->cuda_stream)
                    : chorus_kern_twoshot(&g->kc, red, whole, op->cuda_stream);
  } else if (!whole->ll) {
    err = chorus_kern_pipe(&g->kc, red, whole, op->cuda_stream);
  } else {
    for (size_t off = 0; off < whole->bytes && !err; off += g->ll_bytes) {
      chorus_kern_xchg x;
      chorus_gpu_piece(whole, g->nranks, off, g->ll_bytes, &x);
      err = chorus_kern_exchange(&g->kc, red, &x, op->cuda_stream);
    }
  }
  if (err) {
    char what[64];
    snprintf(what, sizeof what, "nccl%s", chorus_func_name(op->func));
    return chorus_gpu_cuda_error(what);
  }
  return ncclSuccess;
}

ncclResult_t chorus_gpu_enqueue_elsewhere(chorus_gpu *g) {
  g->coll_seq++; /* every rank counts every call */
  return chorus_gpu_async_error(g);
}

int chorus_gpu_rank(const chorus_gpu *g) {
  return g->rank;
}
int chorus_gpu_nranks(const chorus_gpu *g) {
  return g->nranks;
}
int chorus_gpu_device(const chorus_gpu *g) {
  return g->device;
}

ncclResult_t chorus_gpu_sendrecv(chorus_gpu *g, const chorus_kern_p2p *round, void *stream) {
  CHECK(chorus_gpu_async_error(g));
  chorus_kern_p2p ll, fifo;
  const int parts = chorus_gpu_p2p_split(round, g->nranks, g->tune.p2p_ll_bytes, &ll, &fifo);
  /* LL first: it waits only for other ranks' LL launches of this round. */
  if (parts & 1) {
    ll.overlap = (uint32_t)chorus_gpu_p2p_overlap(&ll, g->rank, g->nranks);
    if (chorus_kern_sendrecv_ll(&g->kc, &ll, stream) != 0)
      return chorus_gpu_cuda_error("ncclSend/ncclRecv (LL)");
  }
  if (parts & 2) {
    fifo.send_desc = g->p2p_send_desc;
    fifo.recv_desc = g->p2p_recv_desc;
    if (chorus_kern_sendrecv(&g->kc, &fifo, stream) != 0)
      return chorus_gpu_cuda_error("ncclSend/ncclRecv");
  }
  return ncclSuccess;
}

/* The reduction of op as the kernels take it. */
static void kern_red_of(const chorus_op *op, chorus_kern_red *red) {
  memset(red, 0, sizeof *red);
  red->kind = (int)op->red.kind;
  red->dtype = op->red.dtype;
  memcpy(red->scalar, op->red.scalar, sizeof red->scalar);
  red->scalar_dev = op->red.scalar_dev;
  red->divisor = op->red.divisor;
}

ncclResult_t chorus_gpu_enqueue(chorus_gpu *g, chorus_op *op, const chorus_kern_direct *dir) {
  g->coll_seq++; /* before anything can fail: every rank counts every call */
  ncclResult_t async = chorus_gpu_async_error(g);
  if (async != ncclSuccess) return async;
  chorus_kern_red red;
  kern_red_of(op, &red);
  chorus_kern_direct d;
  if (chorus_gpu_direct_pick(g, op, dir, &d)) {
    if (!g->direct_told) { /* once per communicator: that it happens, and how */
      g->direct_told = 1;
      INFO(CHORUS_COLL | CHORUS_TUNING,
           "rank %d: nccl%s of %zu bytes runs zero-copy (%s), %u CTAs; later calls too where "
           "they can (CHORUS_GPU_DIRECT=0: never)",
           g->rank, chorus_func_name(op->func), d.bytes,
           dir && dir->kind ? "all ranks' buffers in one process" : "symmetric windows", d.grid);
    }
    if (chorus_kern_direct_run(&g->kc, &red, &d, op->cuda_stream) != 0) {
      char what[80];
      snprintf(what, sizeof what, "nccl%s (zero-copy)", chorus_func_name(op->func));
      return chorus_gpu_cuda_error(what);
    }
    return ncclSuccess;
  }
  chorus_kern_xchg steps[CHORUS_GPU_MAX_STEPS];
  int nsteps = chorus_gpu_plan(g->rank, g->nranks, &g->tune, op, steps);
  if (nsteps == 0)
    return chorus_error(ncclInternalError, "nccl%s has no GPU schedule",
                        chorus_func_name(op->func));
  if (nsteps < 0) {
    const char *algo = chorus_param_str(CHORUS_P_ALGO), *proto = chorus_param_str(CHORUS_P_PROTO);
    return chorus_error(ncclInvalidUsage,
                        "rank %d: NCCL_ALGO=\"%s\" with NCCL_PROTO=\"%s\" allows no GPU schedule "
                        "of nccl%s for %zu bytes on %d GPUs (Chorus has oneshot for every "
                        "collective, ring for AllReduce, AllGather, ReduceScatter, Broadcast and "
                        "Reduce, twoshot for AllReduce; ring needs Simple)",
                        g->rank, algo ? algo : "", proto ? proto : "", chorus_func_name(op->func),
                        op->count * op->esize, g->nranks);
  }
  if (op->count == 0) return ncclSuccess;
  for (int i = 0; i < nsteps; i++) CHECK(run_exchange(g, &red, &steps[i], op));
  return ncclSuccess;
}
