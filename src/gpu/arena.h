/*
 * arena.h - where each rank's GPU arena (the device memory peers push
 * its slots, FIFOs and counters into) lives and how the other ranks' GPUs
 * reach it (its layout: layout.h).
 *
 * Three kinds:
 *   device   cudaMalloc'd device memory; peers in the same process use its
 *            address (peer access), other processes open a CUDA IPC handle;
 *   cumem    device memory from cuMem (CHORUS_GPU_CUMEM=1), exported as a
 *            POSIX file descriptor that same-host processes fetch over a
 *            Unix socket (util/fdpass) and map; where the driver cannot
 *            export one, the arena is made as `device` instead (CUDA IPC
 *            cannot open cuMem memory);
 *   staged   NCCL_P2P_DISABLE=1, or a GPU that cannot access another
 *            directly: a shared-memory segment pinned for every
 *            GPU of each process that maps it; the kernels reach it over PCIe.
 * Every peer's mapping is checked with a test write from this rank's GPU.
 */
#ifndef CHORUS_GPU_ARENA_H
#define CHORUS_GPU_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "device/device.h"
#include "device/kernels.h"
#include "nccl.h"
#include "topo/topo.h"
#include "util/fdpass.h"
#include "util/shm.h"

enum { CHORUS_ARENA_DEVICE = 0, CHORUS_ARENA_CUMEM = 1, CHORUS_ARENA_STAGED = 2 };

/* What every rank tells the others about its arena (through the
 * bootstrap; who shares a process with whom comes from the topology). */
typedef struct chorus_gpu_arena_rec {
  int32_t device; /* ordinal in its process */
  int32_t pid;
  int32_t kind;
  int32_t ipc_ok;
  uint64_t addr;  /* the arena's device address in its process */
  uint64_t bytes; /* its mapped size */
  char bus_id[32];
  unsigned char ipc[CHORUS_DEV_IPC_BYTES];
  char name[CHORUS_SHM_NAME_MAX > CHORUS_FDPASS_NAME ? CHORUS_SHM_NAME_MAX : CHORUS_FDPASS_NAME];
} chorus_gpu_arena_rec;

typedef struct chorus_gpu_arenas {
  int rank, nranks, device, kind;
  void *own; /* device address */
  size_t own_bytes;
  int own_fd;                            /* cumem: the exported descriptor, until settled */
  chorus_fdpass fp;                      /* cumem: where peers fetch it */
  chorus_shm seg[CHORUS_KERN_MAX_RANKS]; /* staged: own [rank], peers' of other processes */
  void *pinned[CHORUS_KERN_MAX_RANKS];   /* staged: segments pinned here */
  void *ipc[CHORUS_KERN_MAX_RANKS];      /* device: peers' arenas opened through IPC */
  void *imported[CHORUS_KERN_MAX_RANKS]; /* cumem: peers' arenas mapped from descriptors */
  size_t imported_bytes[CHORUS_KERN_MAX_RANKS];
  void *base[CHORUS_KERN_MAX_RANKS]; /* every arena as this rank's GPU reaches it */
  uint64_t shared_key;               /* chorus_gpu_arenas_share's key (0: not shared) */
} chorus_gpu_arenas;

/* A CUDA failure that device.h recorded, as ncclUnhandledCudaError with a
 * WARN line saying what was being done (for gpu.c too). */
ncclResult_t chorus_gpu_cuda_error(const char *what);

/* Whether the arenas must be staged (*staged): NCCL_P2P_DISABLE=1, or
 * some rank sees another rank's GPU but cannot access it directly (two
 * allgathers over bs; a GPU a rank cannot see does not decide it, CUDA IPC
 * is tried there). */
ncclResult_t chorus_gpu_arenas_need_staging(chorus_bootstrap *bs, int rank, int nranks, int device,
                                            int *staged);
/* Makes this rank's zeroed arena of `bytes` on the current device (kind
 * from staged / cumem) and describes it in *mine. */
ncclResult_t chorus_gpu_arenas_create(chorus_gpu_arenas *w, int rank, int nranks, int device,
                                      size_t bytes, int staged, int cumem,
                                      chorus_gpu_arena_rec *mine);
/* Reaches every rank's arena (rec: all ranks' records), each checked by
 * a test write at offset test_off + 4 * rank. */
ncclResult_t chorus_gpu_arenas_map(chorus_gpu_arenas *w, const chorus_gpu_arena_rec *rec,
                                   const chorus_topo *topo, size_t test_off);
/* After every rank has mapped (a barrier): drops the names peers used. */
void chorus_gpu_arenas_settled(chorus_gpu_arenas *w);
/* Ranks of one communicator in one process reach each other's arenas
 * directly, and a rank's kernel may run on after a peer's communicator is
 * aborted (until it notices, or its deadline passes): so their arenas go
 * together, when the last of them is freed. Each such rank calls this once
 * after mapping, before any of them can finish its init; key names the
 * communicator in this process (nonzero, the same on all its ranks here). */
void chorus_gpu_arenas_share(chorus_gpu_arenas *w, uint64_t key);
/* Unmaps the peers' arenas and frees this rank's (its device idle), or,
 * when shared, hands them to the last of its process's ranks to go. */
void chorus_gpu_arenas_free(chorus_gpu_arenas *w);
/* "device memory", "cuMem device memory", "pinned host memory (staged)". */
const char *chorus_gpu_arenas_kind(const chorus_gpu_arenas *w);

#endif
