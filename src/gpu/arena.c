/*
 * arena.c - see arena.h.
 */
#include "gpu/arena.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/param.h"

ncclResult_t chorus_gpu_cuda_error(const char *what) {
  return chorus_error(ncclUnhandledCudaError, "%s: %s", what, chorus_dev_error());
}

/* The PCI bus id of device, or "device N" where it cannot be had. */
static void bus_id_of(int device, char out[32]) {
  if (chorus_dev_bus_id(device, out, 32) != 0) snprintf(out, 32, "device %d", device);
}

/* Failing to map rank p's arena (kind: "", "cuMem "). */
static ncclResult_t map_error(const char *kind, int p, const chorus_gpu_arena_rec *r) {
  char what[128];
  snprintf(what, sizeof what, "mapping the %sGPU arena of rank %d (pid %d, GPU %s)", kind, p,
           (int)r->pid, r->bus_id);
  return chorus_gpu_cuda_error(what);
}

ncclResult_t chorus_gpu_arenas_need_staging(chorus_bootstrap *bs, int rank, int nranks, int device,
                                            int *staged) {
  *staged = chorus_param_int(CHORUS_P_P2P_DISABLE) != 0;
  if (*staged || nranks < 2) return ncclSuccess;
  typedef struct reach {
    char bus_id[32];
    int32_t blocked; /* a rank this rank's GPU sees but cannot access, or -1 */
  } reach;
  reach *r = chorus_calloc((size_t)nranks, sizeof *r);
  if (!r) return chorus_error(ncclSystemError, "out of memory setting up a GPU communicator");
  bus_id_of(device, r[rank].bus_id);
  ncclResult_t res = chorus_bootstrap_allgather(bs, r, sizeof *r);
  int32_t blocked = -1;
  for (int p = 0; p < nranks && res == ncclSuccess && blocked < 0; p++)
    if (p != rank && chorus_dev_can_reach(r[p].bus_id) == 0) blocked = p;
  for (int p = 0; p < nranks; p++) r[p].blocked = -1;
  r[rank].blocked = blocked;
  if (res == ncclSuccess) res = chorus_bootstrap_allgather(bs, r, sizeof *r);
  for (int p = 0; p < nranks && res == ncclSuccess && !*staged; p++)
    if (r[p].blocked >= 0) {
      *staged = 1;
      INFO(CHORUS_INIT,
           "rank %d: GPU %s (rank %d) cannot access GPU %s (rank %d) directly: every GPU of the "
           "communicator stages through pinned host memory",
           rank, r[p].bus_id, p, r[r[p].blocked].bus_id, (int)r[p].blocked);
    }
  chorus_free(r);
  return res;
}

/* Staged: maps rank p's segment here (its own is already mapped) and pins
 * it for the GPUs; *dev receives the address they reach it at. */
static ncclResult_t pin_segment(chorus_gpu_arenas *w, int p, const char *shm, size_t bytes, int pid,
                                void **dev) {
  char err[256];
  if (p != w->rank) {
    ncclResult_t r = chorus_shm_open(&w->seg[p], shm, bytes, err, sizeof err);
    if (r != ncclSuccess)
      return chorus_error(r, "mapping the staged GPU arena of rank %d (pid %d): %s", p, pid, err);
  }
  if (chorus_dev_host_register(w->seg[p].base, bytes, dev) != 0) {
    char what[128];
    snprintf(what, sizeof what, "pinning the staged GPU arena of rank %d (%zu bytes)", p, bytes);
    return chorus_gpu_cuda_error(what);
  }
  w->pinned[p] = w->seg[p].base;
  return ncclSuccess;
}

/* cumem: the arena and its descriptor; 0, or -1 (the reason recorded)
 * with nothing left allocated. */
static int make_cumem(chorus_gpu_arenas *w, size_t bytes) {
  size_t mapped = 0;
  void *p = NULL;
  if (chorus_dev_vmm_alloc(bytes, &p, &mapped) != 0) return -1;
  int fd = -1;
  if (chorus_dev_zero(p, mapped) != 0 || chorus_dev_vmm_export(p, &fd) != 0) {
    chorus_dev_vmm_free(p, mapped);
    return -1;
  }
  w->own = p;
  w->own_bytes = mapped;
  w->own_fd = fd;
  return 0;
}

ncclResult_t chorus_gpu_arenas_create(chorus_gpu_arenas *w, int rank, int nranks, int device,
                                      size_t bytes, int staged, int cumem,
                                      chorus_gpu_arena_rec *mine) {
  memset(w, 0, sizeof *w);
  w->rank = rank;
  w->nranks = nranks;
  w->device = device;
  w->own_fd = -1;
  memset(mine, 0, sizeof *mine);
  mine->device = device;
  mine->pid = (int32_t)getpid();
  bus_id_of(device, mine->bus_id);
  char err[256];
  if (staged) {
    ncclResult_t res = chorus_shm_create(&w->seg[rank], "gpuwin", bytes, err, sizeof err);
    if (res != ncclSuccess)
      return chorus_error(res, "rank %d: the staged GPU arena (NCCL_P2P_DISABLE=1, %zu bytes): %s",
                          rank, bytes, err);
    w->kind = CHORUS_ARENA_STAGED;
    w->own_bytes = bytes;
    CHECK(pin_segment(w, rank, NULL, bytes, (int)getpid(), &w->own));
    snprintf(mine->name, sizeof mine->name, "%s", w->seg[rank].name);
  } else if (cumem && make_cumem(w, bytes) == 0) {
    w->kind = CHORUS_ARENA_CUMEM;
    ncclResult_t res = chorus_fdpass_listen(&w->fp, err, sizeof err);
    if (res != ncclSuccess)
      return chorus_error(res, "rank %d: a Unix socket to hand out the GPU arena: %s", rank, err);
    snprintf(mine->name, sizeof mine->name, "%s", w->fp.name);
  } else {
    if (cumem)
      INFO(CHORUS_INIT, "rank %d: no cuMem arena with a POSIX descriptor here (%s); using CUDA IPC",
           rank, chorus_dev_error());
    if (chorus_dev_alloc(bytes, &w->own) != 0)
      return chorus_gpu_cuda_error("allocating the GPU arena");
    w->kind = CHORUS_ARENA_DEVICE;
    w->own_bytes = bytes;
    mine->ipc_ok = chorus_dev_ipc_get(w->own, mine->ipc) == 0;
  }
  mine->kind = w->kind;
  mine->addr = (uint64_t)(uintptr_t)w->own;
  mine->bytes = w->own_bytes;
  return ncclSuccess;
}

/* cumem: fetches the descriptors of the other processes' cuMem arenas
 * (and hands ours out) in one round, then maps them. */
static ncclResult_t import_peers(chorus_gpu_arenas *w, const chorus_gpu_arena_rec *rec,
                                 const chorus_topo *topo) {
  chorus_fdpass_peer peers[CHORUS_KERN_MAX_RANKS];
  int rank_of[CHORUS_KERN_MAX_RANKS], fds[CHORUS_KERN_MAX_RANKS], np = 0;
  for (int p = 0; p < w->nranks; p++) {
    if (p == w->rank || chorus_topo_same_proc(topo, p, w->rank)) continue;
    const int fetch = rec[p].kind == CHORUS_ARENA_CUMEM, serve = w->kind == CHORUS_ARENA_CUMEM;
    if (!fetch && !serve) continue;
    peers[np] = (chorus_fdpass_peer){rec[p].name, rec[p].pid, p, fetch, serve};
    rank_of[np++] = p;
  }
  if (np == 0) return ncclSuccess;
  const int64_t tmo = chorus_param_int(CHORUS_P_OP_TIMEOUT);
  char err[256];
  ncclResult_t res = chorus_fdpass_exchange(
      w->kind == CHORUS_ARENA_CUMEM ? &w->fp : NULL, w->own_fd, w->rank, peers, np, fds,
      chorus_deadline_in_s(tmo > 0 ? tmo : 120), err, sizeof err);
  if (res != ncclSuccess)
    return chorus_error(res, "rank %d: handing out cuMem GPU arenas: %s", w->rank, err);
  for (int i = 0; i < np; i++) {
    if (fds[i] < 0) continue;
    const int p = rank_of[i];
    void *ptr = NULL;
    const int bad = chorus_dev_vmm_import(fds[i], (size_t)rec[p].bytes, &ptr);
    close(fds[i]);
    fds[i] = -1;
    if (bad) {
      for (int j = i + 1; j < np; j++)
        if (fds[j] >= 0) close(fds[j]);
      return map_error("cuMem ", p, &rec[p]);
    }
    w->imported[p] = ptr;
    w->imported_bytes[p] = (size_t)rec[p].bytes;
  }
  return ncclSuccess;
}

ncclResult_t chorus_gpu_arenas_map(chorus_gpu_arenas *w, const chorus_gpu_arena_rec *rec,
                                   const chorus_topo *topo, size_t test_off) {
  if (w->kind != CHORUS_ARENA_STAGED) CHECK(import_peers(w, rec, topo));
  for (int p = 0; p < w->nranks; p++) {
    char *base;
    if (p == w->rank) {
      base = w->own;
    } else if (w->kind == CHORUS_ARENA_STAGED) { /* pinned once per process, by its owner there */
      void *dev = (void *)(uintptr_t)rec[p].addr;
      if (!chorus_topo_same_proc(topo, p, w->rank))
        CHECK(pin_segment(w, p, rec[p].name, (size_t)rec[p].bytes, rec[p].pid, &dev));
      base = dev;
    } else if (chorus_topo_same_proc(topo, p, w->rank)) {
      int ok = chorus_dev_peer_enable(rec[p].device);
      if (ok < 0) return chorus_gpu_cuda_error("enabling peer access");
      if (ok == 0)
        return chorus_error(ncclInvalidUsage,
                            "GPU %d (rank %d) cannot access GPU %d (rank %d) directly; set "
                            "NCCL_P2P_DISABLE=1 to stage GPU data through host memory",
                            w->device, w->rank, rec[p].device, p);
      base = (char *)(uintptr_t)rec[p].addr;
    } else if (w->imported[p]) {
      base = w->imported[p];
    } else {
      if (!rec[p].ipc_ok)
        return chorus_error(ncclInvalidUsage,
                            "rank %d (pid %d) could not export its GPU arena through CUDA IPC", p,
                            (int)rec[p].pid);
      void *ptr = NULL;
      if (chorus_dev_ipc_open(rec[p].ipc, &ptr) != 0) return map_error("", p, &rec[p]);
      w->ipc[p] = ptr;
      base = ptr;
    }
    w->base[p] = base;
    if (p != w->rank && chorus_dev_peer_verify(base + test_off + 4 * (size_t)w->rank) != 0)
      return chorus_error(ncclSystemError,
                          "GPU %d (rank %d) cannot write to the memory of rank %d (GPU %s): %s; "
                          "check the GPUs' peer-to-peer support, or set NCCL_P2P_DISABLE=1 to "
                          "stage GPU data through host memory",
                          w->device, w->rank, p, rec[p].bus_id, chorus_dev_error());
  }
  return ncclSuccess;
}

void chorus_gpu_arenas_settled(chorus_gpu_arenas *w) {
  chorus_shm_unlink(&w->seg[w->rank]);
  chorus_fdpass_close(&w->fp);
  if (w->kind == CHORUS_ARENA_CUMEM && w->own_fd >= 0) close(w->own_fd);
  w->own_fd = -1;
}

/* The arenas of ranks of one communicator in this process that went while
 * others of them still run (chorus_gpu_arenas_share). */
typedef struct arena_group {
  uint64_t key;
  int live; /* ranks that shared and are not freed yet */
  int nheld;
  chorus_gpu_arenas held[CHORUS_KERN_MAX_RANKS];
  struct arena_group *next;
} arena_group;
static arena_group *groups;
static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;

void chorus_gpu_arenas_share(chorus_gpu_arenas *w, uint64_t key) {
  pthread_mutex_lock(&groups_lock);
  arena_group *g = groups;
  while (g && g->key != key) g = g->next;
  if (!g && (g = chorus_calloc(1, sizeof *g))) {
    g->key = key;
    g->next = groups;
    groups = g;
  }
  if (g) { /* else (no memory): freed alone, as before sharing existed */
    g->live++;
    w->shared_key = key;
  }
  pthread_mutex_unlock(&groups_lock);
}

static void free_now(chorus_gpu_arenas *w);

void chorus_gpu_arenas_free(chorus_gpu_arenas *w) {
  if (!w->shared_key) {
    free_now(w);
    return;
  }
  chorus_gpu_arenas_settled(w);
  pthread_mutex_lock(&groups_lock);
  arena_group **link = &groups;
  while (*link && (*link)->key != w->shared_key) link = &(*link)->next;
  arena_group *g = *link;
  w->shared_key = 0;
  if (g && --g->live > 0 && g->nheld < CHORUS_KERN_MAX_RANKS) {
    g->held[g->nheld++] = *w; /* its peers' kernels may still touch it */
    memset(w, 0, sizeof *w);
    pthread_mutex_unlock(&groups_lock);
    return;
  }
  if (g && g->live <= 0) *link = g->next;
  pthread_mutex_unlock(&groups_lock);
  free_now(w);
  if (g && g->live <= 0) {
    for (int i = 0; i < g->nheld; i++) {
      chorus_dev_use(g->held[i].device);
      free_now(&g->held[i]);
    }
    chorus_dev_use(w->device);
    chorus_free(g);
  }
}

static void free_now(chorus_gpu_arenas *w) {
  chorus_gpu_arenas_settled(w);
  for (int p = 0; p < CHORUS_KERN_MAX_RANKS; p++) {
    if (w->ipc[p]) chorus_dev_ipc_close(w->ipc[p]);
    if (w->imported[p]) chorus_dev_vmm_free(w->imported[p], w->imported_bytes[p]);
    if (w->pinned[p]) chorus_dev_host_unregister(w->pinned[p]);
    chorus_shm_close(&w->seg[p]);
    w->ipc[p] = w->imported[p] = w->pinned[p] = NULL;
  }
  if (w->kind == CHORUS_ARENA_CUMEM && w->own) chorus_dev_vmm_free(w->own, w->own_bytes);
  if (w->kind == CHORUS_ARENA_DEVICE && w->own) chorus_dev_free(w->own);
  w->own = NULL;
}

const char *chorus_gpu_arenas_kind(const chorus_gpu_arenas *w) {
  switch (w->kind) {
  case CHORUS_ARENA_CUMEM:
    return "cuMem device memory";
  case CHORUS_ARENA_STAGED:
    return "pinned host memory (staged)";
  default:
    return "device memory";
  }
}
