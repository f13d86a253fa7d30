/*
 * direct.c - zero-copy collectives on GPU communicators (gpu.h; the kernel:
 * device/direct.cu): when a call may run that way, and where every rank's
 * buffers are, as this rank's GPU reaches them.
 *
 * Two ways to know the peers' buffers:
 *   one process: all ranks' calls in one group (ncclCommInitAll and
 *     nccl-tests' -g, say). The group holds every rank's pointers, and
 *     cudaMalloc or cuMem memory mapped for every GPU (ncclMemAlloc's) is
 *     reachable from them all; other memory (pools, host) is not used;
 *   one process per rank: windows registered with NCCL_WIN_COLL_SYMMETRIC.
 *     Registering one hands its cuMem allocation to every rank (a POSIX
 *     descriptor over a Unix socket, util/fdpass) and maps theirs; a call
 *     whose buffers lie in windows at the same offsets on every rank (the
 *     kernel checks the offsets before it touches anything) then reaches
 *     the peers' buffers as their window plus that offset.
 * Every rank decides alike: from the call and the settings, and from what
 * all ranks share (the group's calls; a window every rank mapped).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "gpu/gpu.h"
#include "gpu/gpu_impl.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/misc.h"
#include "util/param.h"

void chorus_gpu_direct_read(chorus_gpu_direct_cfg *cfg) {
  cfg->on = chorus_param_int(CHORUS_P_GPU_DIRECT) != 0;
  cfg->min_bytes = (size_t)CHORUS_MAX(0, chorus_param_int(CHORUS_P_GPU_DIRECT_BYTES));
  cfg->max_bytes = (size_t)CHORUS_MAX(0, chorus_param_int(CHORUS_P_GPU_DIRECT_MAX));
  cfg->agrs_max = (size_t)CHORUS_MAX(0, chorus_param_int(CHORUS_P_GPU_DIRECT_AGRS_MAX));
  cfg->channels = (uint32_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_DIRECT_CHANNELS), 1,
                                         CHORUS_KERN_MAX_BLOCKS);
  cfg->cta_bytes =
      (size_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_DIRECT_CTA_BYTES), 4096, (int64_t)1 << 30);
}

int chorus_gpu_direct_shape(const chorus_gpu_direct_cfg *cfg, const chorus_gpu_tune *tune,
                            int nranks, const chorus_op *op, chorus_kern_direct *d) {
  memset(d, 0, sizeof *d);
  if (!cfg->on || nranks < 2 || nranks > CHORUS_KERN_MAX_RANKS || op->count == 0) return 0;
  int kind;
  switch (op->func) {
  case CHORUS_FUNC_ALLREDUCE:
    kind = CHORUS_DIRECT_ALLREDUCE;
    break;
  case CHORUS_FUNC_ALLGATHER:
    kind = CHORUS_DIRECT_ALLGATHER;
    break;
  case CHORUS_FUNC_REDUCESCATTER:
    kind = CHORUS_DIRECT_REDUCESCATTER;
    break;
  default:
    return 0;
  }
  /* PreMulSum scales each rank's input by that rank's own scalar, which a
   * rank reading its peers' inputs does not have; NCCL_ALGO naming the
   * function asks for the algorithms it names. */
  if (op->red.kind == CHORUS_RED_PREMULSUM || tune->algo_named[op->func]) return 0;
  const size_t bytes = op->count * op->esize;
  const size_t whole = kind == CHORUS_DIRECT_ALLREDUCE ? bytes : bytes * (size_t)nranks;
  /* Upper limits, where the rings were faster: AllReduce's (it writes into
   * the peers' buffers while it reads from them); AllGather's and
   * ReduceScatter's on 3+ GPUs alone (each rank reads or writes n-1 peers
   * at once there; on 2xH100 zero-copy was faster at every size). */
  const size_t max = kind == CHORUS_DIRECT_ALLREDUCE ? cfg->max_bytes
                     : nranks > 2                    ? cfg->agrs_max
                                                     : 0;
  if (whole < cfg->min_bytes || (max && whole > max)) return 0;
  /* Blocks of whole 16-byte units, so that every rank's starts aligned. */
  size_t per_rank = bytes;
  if (kind == CHORUS_DIRECT_ALLREDUCE) {
    d->block = ((bytes + (size_t)nranks - 1) / (size_t)nranks + 15) / 16 * 16;
    per_rank = d->block;
  } else if (bytes % 16) {
    return 0;
  }
  size_t grid = (per_rank + cfg->cta_bytes - 1) / cfg->cta_bytes;
  d->grid = (uint32_t)CHORUS_CLAMP(grid, 1, cfg->channels);
  d->kind = kind;
  d->bytes = bytes;
  d->desc = chorus_gpu_call_desc(op);
  return kind;
}

size_t chorus_gpu_direct_match(const uint64_t *key, const uint64_t *seq, const int *rank,
                               const int *nranks, const uint8_t *cand, size_t n, int *match) {
  size_t full = 0;
  for (size_t i = 0; i < n * CHORUS_KERN_MAX_RANKS; i++) match[i] = -1;
  for (size_t i = 0; i < n; i++) {
    if (!cand[i] || nranks[i] < 2 || nranks[i] > CHORUS_KERN_MAX_RANKS) continue;
    int found = 0;
    for (size_t j = 0; j < n; j++) {
      const int p = rank[j];
      if (!cand[j] || key[j] != key[i] || seq[j] != seq[i] || nranks[j] != nranks[i] || p < 0 ||
          p >= nranks[i] || match[i * CHORUS_KERN_MAX_RANKS + (size_t)p] >= 0)
        continue;
      match[i * CHORUS_KERN_MAX_RANKS + (size_t)p] = (int)j;
      found++;
    }
    full += found == nranks[i];
  }
  return full;
}

/* Whether memory at p is 16-byte aligned. */
static int aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

/* Whose buffers a kind touches on other ranks: AllReduce reads every
 * rank's input and writes every rank's output, AllGather only writes the
 * outputs, ReduceScatter only reads the inputs. */
static int peers_send(int kind) {
  return kind != CHORUS_DIRECT_ALLGATHER;
}
static int peers_recv(int kind) {
  return kind != CHORUS_DIRECT_REDUCESCATTER;
}

/* Whether op may be matched with other ranks' calls of its group (a
 * collective on a communicator of this process's GPUs alone). */
static int group_candidate(const chorus_op *op) {
  const chorus_gpu *g = op->cc->gpu;
  return !chorus_gpu_is_p2p(op) && g->all_local && !g->staged;
}

int chorus_gpu_group_match(chorus_op **ops, size_t n, const uint8_t *cand, int *match) {
  uint64_t *key = chorus_calloc(n, sizeof *key), *seq = chorus_calloc(n, sizeof *seq);
  int *rank = chorus_calloc(n, sizeof *rank), *nr = chorus_calloc(n, sizeof *nr);
  int res = -1;
  if (key && seq && rank && nr) {
    for (size_t i = 0; i < n; i++) {
      const chorus_gpu *g = ops[i]->cc->gpu;
      key[i] = g->key;
      rank[i] = g->rank;
      nr[i] = g->nranks;
      /* The call's number among its communicator's collectives (chorus_gpu
       * _enqueue counts them): the ones before this group, then this
       * group's before it. */
      seq[i] = g->coll_seq;
      for (size_t j = 0; j < i; j++) seq[i] += ops[j]->cc->gpu == g && !chorus_gpu_is_p2p(ops[j]);
    }
    chorus_gpu_direct_match(key, seq, rank, nr, cand, n, match);
    res = 0;
  } else {
    for (size_t i = 0; i < n * CHORUS_KERN_MAX_RANKS; i++) match[i] = -1;
  }
  chorus_free(key);
  chorus_free(seq);
  chorus_free(rank);
  chorus_free(nr);
  return res;
}

void chorus_gpu_direct_group(chorus_op **ops, size_t n, chorus_kern_direct *dir) {
  memset(dir, 0, n * sizeof *dir);
  /* Groups of thousands of calls are not worth the quadratic matching. */
  if (n < 2 || n > 1024) return;
  size_t any = 0;
  for (size_t i = 0; i < n; i++) {
    const chorus_gpu *g = ops[i]->cc->gpu;
    if (group_candidate(ops[i]) &&
        chorus_gpu_direct_shape(&g->direct, &g->tune, g->nranks, ops[i], &dir[i]))
      any++;
  }
  if (!any) return;
  uint8_t *cand = chorus_calloc(n, 1);
  int *match = chorus_calloc(n * CHORUS_KERN_MAX_RANKS, sizeof *match);
  if (cand && match) {
    for (size_t i = 0; i < n; i++) cand[i] = (uint8_t)group_candidate(ops[i]);
    if (chorus_gpu_group_match(ops, n, cand, match) != 0) any = 0;
  } else {
    any = 0;
  }
  if (!any) memset(dir, 0, n * sizeof *dir);
  for (size_t i = 0; i < n && any; i++) {
    chorus_kern_direct *d = &dir[i];
    if (!d->kind) continue;
    const int np = ops[i]->cc->gpu->nranks, me = ops[i]->cc->gpu->rank;
    int devices[CHORUS_KERN_MAX_RANKS], ok = 1;
    for (int p = 0; p < np && ok; p++) {
      const int j = match[i * CHORUS_KERN_MAX_RANKS + (size_t)p];
      /* every rank's part of the same call, zero-copy on its side too */
      ok = j >= 0 && dir[j].kind == d->kind && dir[j].desc == d->desc;
      if (ok) devices[p] = chorus_gpu_device(ops[j]->cc->gpu);
    }
    for (int p = 0; p < np && ok; p++) {
      const chorus_op *o = ops[match[i * CHORUS_KERN_MAX_RANKS + (size_t)p]];
      const int need_send = peers_send(d->kind) || p == me;
      const int need_recv = peers_recv(d->kind) || p == me;
      /* buffers of other ranks must be reachable from every GPU; all aligned */
      if (need_send)
        ok = aligned16(o->sendbuff) &&
             (p == me || chorus_dev_reachable(o->sendbuff, devices, np) == 1);
      if (ok && need_recv)
        ok = aligned16(o->recvbuff) &&
             (p == me || chorus_dev_reachable(o->recvbuff, devices, np) == 1);
      d->send[p] = o->sendbuff;
      d->recv[p] = o->recvbuff;
    }
    if (!ok) memset(d, 0, sizeof *d);
  }
  /* A call goes zero-copy only where all its partners do (each decided the
   * same from the same facts, but a reachability answer may differ from
   * GPU to GPU: make sure). */
  for (int changed = 1; changed && any;) {
    changed = 0;
    for (size_t i = 0; i < n; i++) {
      if (!dir[i].kind) continue;
      for (int p = 0; p < ops[i]->cc->gpu->nranks; p++) {
        const int j = match[i * CHORUS_KERN_MAX_RANKS + (size_t)p];
        if (j < 0 || !dir[j].kind) {
          memset(&dir[i], 0, sizeof dir[i]);
          changed = 1;
          break;
        }
      }
    }
  }
  chorus_free(cand);
  chorus_free(match);
}

/* ---- windows ------------------------------------------------------------ */

struct chorus_gpu_window {
  char *buff; /* this rank's */
  size_t size;
  int symmetric;
  int usable;                        /* every rank reaches every rank's: zero-copy may use it */
  size_t min_size;                   /* the smallest rank's */
  char *peer[CHORUS_KERN_MAX_RANKS]; /* each rank's buffer as this GPU reaches it */
  void *imported[CHORUS_KERN_MAX_RANKS];
  size_t imported_bytes[CHORUS_KERN_MAX_RANKS];
  struct chorus_gpu_window *next;
};

/* What each rank tells the others of its window. */
typedef struct win_rec {
  int32_t pid;
  int32_t ok;                   /* exported (first round), then mapped every peer's (second) */
  uint64_t block_bytes, offset; /* the allocation's size, the window's place in it */
  uint64_t size;                /* second round: the window's size */
  char name[CHORUS_FDPASS_NAME];
} win_rec;

static void window_unmap(chorus_gpu_window *w) {
  for (int p = 0; p < CHORUS_KERN_MAX_RANKS; p++)
    if (w->imported[p]) {
      chorus_dev_vmm_free(w->imported[p], w->imported_bytes[p]);
      w->imported[p] = NULL;
    }
}

/* Hands this rank's allocation to every rank and maps theirs (every rank in
 * its own process). Sets w->usable only where all ranks mapped all. */
static ncclResult_t window_share(chorus_gpu *g, chorus_bootstrap *bs, chorus_gpu_window *w,
                                 void *block, size_t block_bytes) {
  const int n = g->nranks, me = g->rank;
  win_rec *rec = chorus_calloc((size_t)n, sizeof *rec);
  if (!rec) return chorus_error(ncclSystemError, "ncclCommWindowRegister: out of memory");
  chorus_fdpass fp;
  memset(&fp, 0, sizeof fp);
  int fd = -1, listening = 0;
  char err[256];
  ncclResult_t res = ncclSuccess;
  win_rec *mine = &rec[me];
  mine->pid = (int32_t)getpid();
  mine->block_bytes = block_bytes;
  mine->offset = (uint64_t)((char *)w->buff - (char *)block);
  mine->ok = aligned16(w->buff) && chorus_dev_vmm_export(block, &fd) == 0 &&
             chorus_fdpass_listen(&fp, err, sizeof err) == ncclSuccess;
  listening = mine->ok;
  if (mine->ok) snprintf(mine->name, sizeof mine->name, "%s", fp.name);
  CHECK_GOTO(chorus_bootstrap_allgather(bs, rec, sizeof *rec), res, out);
  int all = 1;
  for (int p = 0; p < n; p++) all = all && rec[p].ok;
  int mapped = 0;
  if (all) {
    chorus_fdpass_peer peers[CHORUS_KERN_MAX_RANKS];
    int rank_of[CHORUS_KERN_MAX_RANKS], fds[CHORUS_KERN_MAX_RANKS], np = 0;
    for (int p = 0; p < n; p++)
      if (p != me) {
        peers[np] = (chorus_fdpass_peer){rec[p].name, rec[p].pid, p, 1, 1};
        rank_of[np++] = p;
      }
    const int64_t tmo = chorus_param_int(CHORUS_P_OP_TIMEOUT);
    res = chorus_fdpass_exchange(&fp, fd, me, peers, np, fds,
                                 chorus_deadline_in_s(tmo > 0 ? tmo : 120), err, sizeof err);
    if (res != ncclSuccess) {
      res =
          chorus_error(res, "rank %d: ncclCommWindowRegister: handing out the window: %s", me, err);
      goto out;
    }
    mapped = 1;
    for (int i = 0; i < np; i++) {
      const int p = rank_of[i];
      void *ptr = NULL;
      if (mapped && fds[i] >= 0 && chorus_dev_vmm_import(fds[i], rec[p].block_bytes, &ptr) == 0) {
        w->imported[p] = ptr;
        w->imported_bytes[p] = rec[p].block_bytes;
        w->peer[p] = (char *)ptr + rec[p].offset;
      } else {
        if (mapped)
          INFO(CHORUS_INIT,
               "rank %d: the window of rank %d cannot be mapped here (%s); its collectives are "
               "staged",
               me, p, fds[i] >= 0 ? chorus_dev_error() : "no descriptor");
        mapped = 0;
      }
      if (fds[i] >= 0) close(fds[i]);
    }
  }
  /* Second round: did every rank map every window? */
  memset(rec, 0, (size_t)n * sizeof *rec);
  rec[me].ok = mapped;
  rec[me].size = w->size;
  CHECK_GOTO(chorus_bootstrap_allgather(bs, rec, sizeof *rec), res, out);
  w->usable = 1;
  w->min_size = w->size;
  for (int p = 0; p < n; p++) {
    w->usable = w->usable && rec[p].ok;
    if (rec[p].size < w->min_size) w->min_size = rec[p].size;
  }
  w->peer[me] = w->buff;
  if (!w->usable) window_unmap(w);
out:
  if (listening) chorus_fdpass_close(&fp);
  if (fd >= 0) close(fd);
  chorus_free(rec);
  return res;
}

ncclResult_t chorus_gpu_window_add(chorus_gpu *g, chorus_bootstrap *bs, void *buff, size_t size,
                                   void *block, size_t block_bytes, int symmetric,
                                   chorus_gpu_window **out) {
  *out = NULL;
  chorus_gpu_window *w = chorus_calloc(1, sizeof *w);
  if (!w) return chorus_error(ncclSystemError, "ncclCommWindowRegister: out of memory");
  w->buff = buff;
  w->size = size;
  w->symmetric = symmetric;
  if (g->all_remote && !g->staged && g->nranks > 1) {
    chorus_dev_use(g->device);
    ncclResult_t res = window_share(g, bs, w, block, block_bytes);
    if (res != ncclSuccess) {
      window_unmap(w);
      chorus_free(w);
      return res;
    }
  }
  w->next = g->windows;
  g->windows = w;
  *out = w;
  return ncclSuccess;
}

void chorus_gpu_window_remove(chorus_gpu *g, chorus_gpu_window *w) {
  for (chorus_gpu_window **at = &g->windows; *at; at = &(*at)->next)
    if (*at == w) {
      *at = w->next;
      chorus_dev_use(g->device);
      window_unmap(w);
      chorus_free(w);
      return;
    }
}

void chorus_gpu_windows_free(chorus_gpu *g) {
  while (g->windows) chorus_gpu_window_remove(g, g->windows);
}

/* The usable symmetric window holding [p, p + len) at an offset every
 * rank's window has room for; NULL if none. */
static const chorus_gpu_window *window_of(const chorus_gpu *g, const void *p, size_t len,
                                          size_t *off) {
  for (const chorus_gpu_window *w = g->windows; w; w = w->next) {
    if (!w->usable || !w->symmetric) continue;
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)w->buff;
    if (a < b || a - b > w->min_size || len > w->min_size - (a - b)) continue;
    *off = (size_t)(a - b);
    return w;
  }
  return NULL;
}

/* Fills d's buffers from the windows holding op's, where all are in ones
 * every rank mapped; 0 (d cleared) otherwise. */
static int direct_from_windows(const chorus_gpu *g, const chorus_op *op, chorus_kern_direct *d) {
  if (!g->all_remote || !g->windows || g->staged) return 0;
  if (!chorus_gpu_direct_shape(&g->direct, &g->tune, g->nranks, op, d)) return 0;
  const int n = g->nranks, me = g->rank;
  const size_t whole = d->kind == CHORUS_DIRECT_ALLREDUCE ? d->bytes : d->bytes * (size_t)n;
  const size_t send_len = d->kind == CHORUS_DIRECT_ALLGATHER ? d->bytes : whole;
  const size_t recv_len = d->kind == CHORUS_DIRECT_REDUCESCATTER ? d->bytes : whole;
  /* The buffers peers reach must lie in windows; this rank's own are used
   * as they are. */
  const chorus_gpu_window *ws = NULL, *wr = NULL;
  size_t soff = 0, roff = 0;
  if (peers_send(d->kind) && !(ws = window_of(g, op->sendbuff, send_len, &soff))) goto none;
  if (peers_recv(d->kind) && !(wr = window_of(g, op->recvbuff, recv_len, &roff))) goto none;
  if (!aligned16(op->sendbuff) || !aligned16(op->recvbuff) || soff % 16 || roff % 16) goto none;
  for (int p = 0; p < n; p++) {
    d->send[p] = ws ? ws->peer[p] + soff : NULL;
    d->recv[p] = wr ? wr->peer[p] + roff : NULL;
  }
  d->send[me] = op->sendbuff;
  d->recv[me] = op->recvbuff;
  d->soff = ws ? soff : 0;
  d->roff = wr ? roff : 0;
  return d->kind;
none:
  memset(d, 0, sizeof *d);
  return 0;
}

int chorus_gpu_direct_pick(const chorus_gpu *g, const chorus_op *op,
                           const chorus_kern_direct *given, chorus_kern_direct *d) {
  if (given && given->kind) {
    *d = *given;
    return d->kind;
  }
  return direct_from_windows(g, op, d);
}
