/*
 * regwin.c - windows registered on GPU communicators
 * (ncclCommWindowRegister; gpu.h, regwin.h).
 *
 * Where every rank has its own process, registering is collective: the
 * ncclMemAlloc (cuMem) allocation behind a window is handed to every rank
 * as a POSIX descriptor over a Unix socket (util/fdpass) and mapped there,
 * so that a symmetric window (NCCL_WIN_COLL_SYMMETRIC) gives every GPU
 * every rank's buffer at the same offset: what zero-copy collectives
 * across processes need (zerocopy.c). Elsewhere a window is only recorded.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "gpu/gpu.h"
#include "gpu/gpu_impl.h"
#include "gpu/regwin.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/param.h"

/* Whether memory at p is 16-byte aligned. */
static int aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

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
const chorus_gpu_window *chorus_gpu_window_find(const chorus_gpu *g, const void *p, size_t len,
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
