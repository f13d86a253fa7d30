/*
 * gpu.c - see gpu.h: a GPU communicator's set-up (settings, arena layout,
 * mapping), its status words, and its collectives' launches.
 *
 * Set-up, in order: the ranks compare the settings they must share
 * (agree.c); each reads the structural settings (settings.h) and lays out
 * its arena from them (layout.h, pure); then the arenas are made and
 * mapped (arena.h) and the planner learns the communicator's shape.
 */
#include "gpu/gpu.h"

#include "gpu/gpu_impl.h"
#include "gpu/launchers.h"
#include "gpu/layout.h"
#include "gpu/settings.h"
#include "gpu/arena.h"

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

/* Host-mapped control words: abort, status, status peer, peer-gone bits
 * (4 B each), then at 16 the status details (3 x 8 B). */
#define CTL_BYTES       64
#define PEER_GONE_OFF   12
#define STATUS_INFO_OFF 16

/* What the planner needs of this communicator (plan.h). */
static void plan_shape(const chorus_gpu *g, const chorus_gpu_settings *st, chorus_plan_comm *p) {
  chorus_gpu_settings_plan(st, p);
  p->rank = g->rank;
  p->key = g->key;
  p->one_process = g->all_local;
  p->staged = g->staged;
}

/* The kernels' view of the arenas: the layout's offsets and the settings. */
static void kernel_comm(chorus_gpu *g, const chorus_gpu_settings *st,
                        const chorus_gpu_arena_layout *a) {
  chorus_kern_comm *kc = &g->kc;
  kc->rank = g->rank;
  kc->nranks = g->nranks;
  kc->ll_lines = st->ll_bytes / 8;
  kc->ll_cta_lines = st->ll_cta_lines;
  kc->ll_blocks = st->ll_blocks;
  kc->pdl = st->pdl;
  kc->ll_off = (uint32_t)a->ll_slots;
  kc->hdr_off = (uint32_t)a->ll_headers;
  kc->ack_off = (uint32_t)a->acks;
  kc->cnt_off = (uint32_t)a->totals;
  kc->ctl_off = (uint32_t)a->counters;
  kc->channels = st->channels;
  kc->chunk_bytes = st->chunk_bytes;
  kc->fifo_bytes = st->fifo_bytes;
  kc->wide_from = st->wide_from;
  kc->big_from = st->big_from;
  kc->ring_channels = st->ring_channels;
  kc->ring_chunk = st->ring_chunk;
  kc->twoshot_channels = st->twoshot_channels;
  kc->twoshot_chunk = st->twoshot_chunk;
  kc->p2p_ep_off = (uint32_t)a->p2p_epochs;
  kc->p2p_ack_off = (uint32_t)a->p2p_acks;
  kc->p2p_ll_off = a->p2p_slots;
  kc->p2p_bar_off = (uint32_t)a->p2p_barrier;
  kc->p2p_ll_parts = st->p2p_ll_parts;
  kc->p2p_ll_lines = st->p2p_ll_lines;
  kc->fail_off = (uint32_t)a->failures;
  kc->board_off = (uint32_t)a->board;
  kc->p2p_pull = st->p2p_pull;
  kc->p2p_slots = st->p2p_slots;
  kc->zc_off = (uint32_t)a->zc_lines;
  kc->zc_ep_off = (uint32_t)a->zc_epochs;
  kc->pipe_off = a->fifos;
  const int64_t tmo = chorus_param_int(CHORUS_P_OP_TIMEOUT); /* off: 0, none */
  kc->timeout_ns = tmo > 0 ? (uint64_t)tmo * 1000000000ull : 0;
}

static void log_layout(const chorus_gpu *g, const chorus_gpu_arena_layout *a) {
  if (!chorus_log_on(CHORUS_LOG_INFO, CHORUS_INIT)) return;
  char line[1024];
  size_t o = 0;
  for (int i = 0; i < a->regions.n && o < sizeof line - 64; i++) {
    const chorus_layout_region *r = &a->regions.region[i];
    o += (size_t)snprintf(line + o, sizeof line - o, "%s%s %zu+%zu", i ? ", " : "", r->name, r->off,
                          r->bytes);
  }
  INFO(CHORUS_INIT, "rank %d: arena of %zu bytes: %s", g->rank, a->bytes, line);
}

/* Whether the communicator can run on GPUs at all. */
static ncclResult_t check_shape(const chorus_topo *topo, int nranks) {
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
  return ncclSuccess;
}

/* Settings that ranks read differently would make them cut FIFOs and
 * choose algorithms differently: every rank fails instead. */
ncclResult_t chorus_gpu_agree_all(chorus_bootstrap *bs, int rank, int nranks) {
  chorus_gpu_agree *all = chorus_calloc((size_t)nranks, sizeof *all);
  if (!all) return chorus_error(ncclSystemError, "out of memory setting up a GPU communicator");
  chorus_gpu_agree_read(&all[rank]);
  ncclResult_t res = chorus_bootstrap_allgather(bs, all, sizeof *all);
  char why[256];
  if (res == ncclSuccess && chorus_gpu_agree_check(all, nranks, why, sizeof why) >= 0)
    res = chorus_error(ncclInvalidUsage, "rank %d: GPU communicator setup: %s", rank, why);
  chorus_free(all);
  return res;
}

/* The peers in other processes, watched (util/watch.h): when one exits,
 * its bit rises in the peer-gone word and the kernels waiting for it stop
 * at once instead of at their deadline. */
static ncclResult_t watch_peers(chorus_gpu *g, const chorus_gpu_arena_rec *rec, int nranks) {
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

/* The communicator's CTA cap: the least maxCTAs any rank asked for (0:
 * none asked), so that every rank cuts its launches alike. */
static ncclResult_t agree_cta_cap(chorus_bootstrap *bs, int rank, int nranks, int mine, int *cap) {
  int *all = chorus_calloc((size_t)nranks, sizeof *all);
  if (!all) return chorus_error(ncclSystemError, "out of memory agreeing on maxCTAs");
  all[rank] = mine > 0 ? mine : 0;
  ncclResult_t res = chorus_bootstrap_allgather(bs, all, sizeof *all);
  *cap = 0;
  for (int r = 0; r < nranks && res == ncclSuccess; r++)
    if (all[r] > 0 && (*cap == 0 || all[r] < *cap)) *cap = all[r];
  if (res == ncclSuccess && *cap && *cap != all[rank])
    INFO(CHORUS_INIT, "rank %d: maxCTAs %d, the least any rank asked for (this rank: %d)", rank,
         *cap, all[rank]);
  chorus_free(all);
  return res;
}

ncclResult_t chorus_gpu_setup(chorus_gpu **out, chorus_bootstrap *bs, const chorus_topo *topo,
                              int rank, int nranks, int device, int max_ctas,
                              chorus_plan_comm *plan) {
  *out = NULL;
  CHECK(check_shape(topo, nranks));
  if (chorus_dev_use(device) != 0) return chorus_gpu_cuda_error("selecting the communicator's GPU");
  chorus_gpu *g = chorus_calloc(1, sizeof *g);
  chorus_gpu_arena_rec *rec = chorus_calloc((size_t)nranks, sizeof *rec);
  ncclResult_t res = ncclSuccess;
  if (!g || !rec) {
    res = chorus_error(ncclSystemError, "out of memory setting up a GPU communicator");
    goto fail;
  }
  g->rank = rank;
  g->nranks = nranks;
  g->device = device;
  CHECK_GOTO(chorus_gpu_agree_all(bs, rank, nranks), res, fail);
  CHECK_GOTO(chorus_gpu_arenas_need_staging(bs, rank, nranks, device, &g->staged), res, fail);
  int cap = 0;
  CHECK_GOTO(agree_cta_cap(bs, rank, nranks, max_ctas, &cap), res, fail);
  chorus_gpu_settings st;
  chorus_gpu_settings_read(&st, nranks, g->staged, cap);
  if (cap)
    INFO(CHORUS_INIT,
         "rank %d: at most %d CTAs a launch (maxCTAs): %u channels, %u LL blocks, %u zero-copy "
         "CTAs, twice the channels %s; FIFOs of %u KiB, ring steps of %u KiB",
         rank, cap, st.channels, st.ll_blocks, st.zc_channels,
         st.big_from ? "from big_from" : "never", st.fifo_bytes >> 10, st.ring_chunk >> 10);
  chorus_gpu_arena_layout lay;
  chorus_gpu_arena_layout_make(&st, nranks, &lay);
  kernel_comm(g, &st, &lay);
  g->ll_bytes = st.ll_bytes;
  g->p2p_ll_bytes = st.p2p_ll_bytes;
  g->ce_chunk = st.ce_chunk;
  chorus_gpu_p2p_descs(&g->p2p_send_desc, &g->p2p_recv_desc);

  /* The arenas: made, described to every rank, mapped, checked. */
  chorus_gpu_arena_rec *me = &rec[rank];
  CHECK_GOTO(chorus_gpu_arenas_create(&g->arenas, rank, nranks, device, lay.bytes, g->staged,
                                      st.cumem, me),
             res, fail);
  if (chorus_dev_host_alloc(CTL_BYTES, &g->ctl_host, &g->ctl_dev) != 0) {
    res = chorus_gpu_cuda_error("allocating host-mapped control words");
    goto fail;
  }
  g->kc.epochs = (uint32_t *)((char *)g->arenas.own + lay.epochs);
  g->kc.abort = (volatile int32_t *)g->ctl_dev;
  g->kc.status = (int32_t *)g->ctl_dev + 1;
  g->kc.status_peer = (int32_t *)g->ctl_dev + 2;
  g->kc.status_info = (uint64_t *)((char *)g->ctl_dev + STATUS_INFO_OFF);
  g->kc.peer_gone = (volatile uint32_t *)((char *)g->ctl_dev + PEER_GONE_OFF);
  CHECK_GOTO(chorus_bootstrap_allgather(bs, rec, sizeof *rec), res, fail);
  /* Refused as NCCL refuses it: ranks of a host wait on each other's
   * kernels, which one GPU runs in turns between processes. Tests of
   * multi-GPU layouts may still run on fewer GPUs, slowly, with
   * CHORUS_SHARE_GPU. */
  const int share_ok = chorus_param_int(CHORUS_P_SHARE_GPU) != 0;
  for (int p = 0; p < nranks && !share_ok; p++)
    if (p != rank && chorus_topo_same_host(topo, p, rank) && !strcmp(rec[p].bus_id, me->bus_id)) {
      res = chorus_error(ncclInvalidUsage,
                         "ranks %d and %d both use GPU %s; each rank of a GPU communicator needs "
                         "its own GPU",
                         p < rank ? p : rank, p < rank ? rank : p, me->bus_id);
      goto fail;
    }
  CHECK_GOTO(chorus_gpu_arenas_map(&g->arenas, rec, topo, lay.test), res, fail);
  for (int p = 0; p < nranks; p++) {
    g->kc.arena[p] = g->arenas.base[p];
    g->devices[p] = rec[p].device;
  }
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
  if (!g->all_remote) chorus_gpu_arenas_share(&g->arenas, g->key | 1);
  CHECK_GOTO(chorus_bootstrap_barrier(bs), res, fail);
  chorus_gpu_arenas_settled(&g->arenas); /* every peer has mapped every arena */
  CHECK_GOTO(watch_peers(g, rec, nranks), res, fail);
  plan_shape(g, &st, plan);
  char big[80] = "";
  if (g->kc.big_from)
    snprintf(big, sizeof big, " (and as many of half that for copies from %llu bytes per rank)",
             (unsigned long long)g->kc.big_from);
  INFO(CHORUS_INIT,
       "rank %d GPU %d (%s): arena %zu bytes of %s, LL %zu bytes per peer, %u channels x %u FIFO "
       "bytes per peer%s, exchange steps of %u bytes",
       rank, device, me->bus_id, g->arenas.own_bytes, chorus_gpu_arenas_kind(&g->arenas),
       g->ll_bytes, g->kc.channels, g->kc.fifo_bytes, big, g->kc.chunk_bytes);
  log_layout(g, &lay);
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
  chorus_gpu_arenas_free(&g->arenas);
  chorus_dev_host_free(g->ctl_host);
  chorus_free(g);
}

void chorus_gpu_abort(chorus_gpu *g) {
  if (g && g->ctl_host) __atomic_store_n((int32_t *)g->ctl_host, 1, __ATOMIC_RELEASE);
}

/* A kernel failure as the control words say it: `why` is the failure
 * itself, `who` the rank that saw it and `peer` the rank it is about; a
 * failure another rank wrote here (CHORUS_KERN_PEER_FAILED) carries its
 * own why and peer. 0 when there is none (one word read). */
typedef struct gpu_failure {
  int32_t status;
  int why, who, peer;
  uint64_t info[2];
} gpu_failure;

static int read_failure(const chorus_gpu *g, gpu_failure *f) {
  const volatile int32_t *ctl = g->ctl_host;
  f->status = ctl[1];
  if (f->status == CHORUS_KERN_OK) return 0;
  const volatile uint64_t *info =
      (const volatile uint64_t *)((const char *)g->ctl_host + STATUS_INFO_OFF);
  const int forwarded = f->status == CHORUS_KERN_PEER_FAILED;
  f->why = forwarded ? (int)(info[2] >> 32) : f->status;
  f->who = forwarded ? ctl[2] : g->rank;
  f->peer = forwarded ? (int)(uint32_t)info[2] : ctl[2];
  f->info[0] = info[0];
  f->info[1] = info[1];
  return 1;
}

void chorus_gpu_tell_aborted(chorus_gpu *g) {
  if (!g || !g->arenas.base[g->rank]) return;
  /* This rank's failure words in each peer's arena (kern_util.cuh,
   * fail_words: why, its peer, two infos), the reason last: the peer's
   * waiting kernels stop with it as they do with a mismatch another rank
   * found. A rank aborting because its kernel failed passes that first
   * cause on (rank V exited, say), so that the peers name V, not the
   * messenger. */
  uint32_t words[8] = {CHORUS_KERN_ABORTED, (uint32_t)g->rank};
  gpu_failure f;
  if (read_failure(g, &f) && f.status != CHORUS_KERN_ABORTED) {
    words[0] = (uint32_t)f.why;
    words[1] = (uint32_t)f.peer;
    memcpy(&words[2], &f.info[0], 8);
    memcpy(&words[4], &f.info[1], 8);
  }
  chorus_dev_use(g->device);
  for (int p = 0; p < g->nranks; p++) {
    if (p == g->rank || !g->arenas.base[p]) continue;
    char *at = (char *)g->arenas.base[p] + g->kc.fail_off + (size_t)g->rank * 32;
    if (chorus_dev_put(at + 4, &words[1], sizeof words - 4) != 0 ||
        chorus_dev_put(at, &words[0], 4) != 0)
      INFO(CHORUS_INIT, "rank %d: could not tell rank %d's GPU of the abort (%s)", g->rank, p,
           chorus_dev_error());
  }
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
  gpu_failure f;
  if (!g || !read_failure(g, &f)) return ncclSuccess;
  const int forwarded = f.status == CHORUS_KERN_PEER_FAILED;
  char words[512];
  const ncclResult_t code = status_words(g, f.why, f.who, forwarded ? -1 : g->device, f.peer,
                                         f.info[0], f.info[1], words, sizeof words);
  if (__atomic_exchange_n(&g->reported, 1, __ATOMIC_ACQ_REL)) return code;
  if (f.status == CHORUS_KERN_ABORTED) return chorus_error(code, "%s", words);
  if (forwarded && f.why == CHORUS_KERN_ABORTED)
    return chorus_error(ncclRemoteError,
                        "rank %d (GPU %d): rank %d called ncclCommAbort while a GPU kernel here "
                        "waited for it; the communicator cannot be used any more (ncclCommAbort "
                        "it)",
                        g->rank, g->device, f.who);
  if (forwarded)
    return chorus_error(
        code,
        "rank %d (GPU %d): a GPU kernel stopped because rank %d's kernel failed first: "
        "%s; the communicator cannot be used any more (ncclCommAbort it)",
        g->rank, g->device, f.who, words);
  return chorus_error(code, "%s; the communicator cannot be used any more (ncclCommAbort it)",
                      words);
}

/* ---- bytes per peer ------------------------------------------------------------------ */

void chorus_gpu_moved(chorus_gpu *g, int p, uint64_t sent, uint64_t got) {
  if (p == g->rank || p < 0 || p >= g->nranks) return;
  __atomic_add_fetch(&g->peer_sent[p], sent, __ATOMIC_RELAXED);
  __atomic_add_fetch(&g->peer_got[p], got, __ATOMIC_RELAXED);
}

/* Block i of `block` bytes each within `total` (the last ones short or empty). */
static uint64_t block_of(size_t i, size_t block, size_t total) {
  const size_t at = i * block;
  return at >= total ? 0 : CHORUS_MIN(block, total - at);
}

/* What exchange x moves: a ring or chain to the next rank and from the
 * one before; a two-shot's blocks to their reducers and the reduced block
 * back; else a block to each rank sent to and from each taken from. */
static void count_exchange(chorus_gpu *g, const chorus_kern_xchg *x) {
  const int n = g->nranks, me = g->rank;
  if (x->ring) {
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    uint64_t out = 0, in = 0;
    if (chorus_kern_ring_is_chain(x->ring)) {
      const int s = chorus_kern_ring_first(x->ring, me, n, x->root);
      out = s < n - 1 ? x->bytes : 0;
      in = s > 0 ? x->bytes : 0;
    } else {
      out = in = (uint64_t)x->bytes * (uint64_t)(chorus_kern_ring_steps(x->ring, n) - 1);
    }
    chorus_gpu_moved(g, next, out, 0);
    chorus_gpu_moved(g, prev, 0, in);
    return;
  }
  for (int p = 0; p < n; p++) {
    if (x->twoshot) {
      const uint64_t theirs = block_of((size_t)p, x->bytes, x->total),
                     mine = block_of((size_t)me, x->bytes, x->total);
      chorus_gpu_moved(g, p, theirs + mine, mine + theirs);
    } else {
      chorus_gpu_moved(g, p, (x->send_to >> p & 1) ? x->bytes : 0,
                       (x->recv_from >> p & 1) ? x->bytes : 0);
    }
  }
}

/* Zero-copy: an AllReduce reads its block from every peer and writes the
 * result back to each (and the peers the same with theirs); AllGather
 * and ReduceScatter a block each way per peer. */
static void count_zc(chorus_gpu *g, const chorus_kern_zc *d) {
  for (int p = 0; p < g->nranks; p++) {
    if (d->kind != CHORUS_KERN_ZC_ALLREDUCE) {
      chorus_gpu_moved(g, p, d->bytes, d->bytes);
      continue;
    }
    const uint64_t theirs = block_of((size_t)p, d->block, d->bytes),
                   mine = block_of((size_t)g->rank, d->block, d->bytes);
    chorus_gpu_moved(g, p, theirs + mine, mine + theirs);
  }
}

static void count_p2p(chorus_gpu *g, const chorus_kern_p2p *x) {
  for (int p = 0; p < g->nranks; p++) chorus_gpu_moved(g, p, x->sbytes[p], x->rbytes[p]);
}

void chorus_gpu_peer_bytes(const chorus_gpu *g, int peer, uint64_t *sent, uint64_t *got) {
  *sent =
      peer >= 0 && peer < g->nranks ? __atomic_load_n(&g->peer_sent[peer], __ATOMIC_RELAXED) : 0;
  *got = peer >= 0 && peer < g->nranks ? __atomic_load_n(&g->peer_got[peer], __ATOMIC_RELAXED) : 0;
}

int chorus_gpu_direct(const chorus_gpu *g) {
  return !g->staged;
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
  count_exchange(g, whole);
  return ncclSuccess;
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

/* Whether round p moves anything. */
static int p2p_any(const chorus_kern_p2p *p, int nranks) {
  for (int q = 0; q < nranks; q++)
    if (p->sbytes[q] || p->rbytes[q]) return 1;
  return 0;
}

ncclResult_t chorus_gpu_sendrecv(chorus_gpu *g, const chorus_kern_p2p *ll,
                                 const chorus_kern_p2p *fifo, void *stream) {
  CHECK(chorus_gpu_async_error(g));
  /* LL first: it waits only for other ranks' LL launches of this round. */
  if (p2p_any(ll, g->nranks)) {
    chorus_kern_p2p x = *ll;
    x.overlap = (uint32_t)chorus_gpu_p2p_overlap(&x, g->rank, g->nranks);
    if (chorus_kern_sendrecv_ll(&g->kc, &x, stream) != 0)
      return chorus_gpu_cuda_error("ncclSend/ncclRecv (LL)");
    count_p2p(g, &x);
  }
  if (p2p_any(fifo, g->nranks)) {
    chorus_kern_p2p x = *fifo;
    x.send_desc = g->p2p_send_desc;
    x.recv_desc = g->p2p_recv_desc;
    if (chorus_kern_sendrecv(&g->kc, &x, stream) != 0)
      return chorus_gpu_cuda_error("ncclSend/ncclRecv");
    count_p2p(g, &x);
  }
  return ncclSuccess;
}

void chorus_gpu_kern_red(const chorus_red *r, chorus_kern_red *red) {
  memset(red, 0, sizeof *red);
  red->kind = (int)r->kind;
  red->dtype = r->dtype;
  memcpy(red->scalar, r->scalar, sizeof red->scalar);
  red->scalar_dev = r->scalar_dev;
  red->divisor = r->divisor;
}

ncclResult_t chorus_gpu_enqueue(chorus_gpu *g, chorus_op *op, const chorus_task *t,
                                const chorus_kern_zc *zc) {
  ncclResult_t async = chorus_gpu_async_error(g);
  if (async != ncclSuccess) return async;
  chorus_kern_red red;
  chorus_gpu_kern_red(&op->red, &red);
  if (t->algo == CHORUS_ALGO_ZEROCOPY) {
    chorus_kern_zc d;
    if (zc)
      d = *zc;
    else if (!chorus_gpu_zc_from_windows(g, op, t, &d))
      return chorus_error(ncclInternalError,
                          "rank %d: nccl%s was planned zero-copy but its buffers are not in "
                          "symmetric windows",
                          g->rank, chorus_func_name(op->func));
    if (!g->zc_told) { /* once per communicator: that it happens, and how */
      g->zc_told = 1;
      INFO(CHORUS_COLL | CHORUS_TUNING,
           "rank %d: nccl%s of %zu bytes runs zero-copy (%s), %u CTAs; later calls too where "
           "the rules say so (NCCL_ALGO=^zerocopy: never)",
           g->rank, chorus_func_name(op->func), d.bytes,
           zc ? "all ranks' buffers in one process" : "symmetric windows", d.grid);
    }
    if (chorus_kern_zc_run(&g->kc, &red, &d, op->cuda_stream) != 0) {
      char what[80];
      snprintf(what, sizeof what, "nccl%s (zero-copy)", chorus_func_name(op->func));
      return chorus_gpu_cuda_error(what);
    }
    count_zc(g, &d);
    return ncclSuccess;
  }
  chorus_kern_xchg steps[CHORUS_GPU_MAX_STEPS];
  const int nsteps = chorus_gpu_lower(g->rank, g->nranks, op, t, steps);
  if (nsteps <= 0)
    return chorus_error(ncclInternalError, "nccl%s has no GPU exchange for algorithm %s",
                        chorus_func_name(op->func), chorus_algo_name(t->algo));
  if (op->count == 0) return ncclSuccess;
  for (int i = 0; i < nsteps; i++) CHECK(run_exchange(g, &red, &steps[i], op));
  return ncclSuccess;
}
