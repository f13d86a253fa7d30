/*
 * gpu_impl.h - the GPU communicator object, shared by the gpu/ files that
 * need its insides. Everything else goes through gpu.h.
 */
#ifndef CHORUS_GPU_GPU_IMPL_H
#define CHORUS_GPU_GPU_IMPL_H

#include "gpu/gpu.h"
#include "gpu/arena.h"
#include "util/watch.h"

struct chorus_gpu {
  int rank, nranks, device;
  chorus_gpu_arenas arenas; /* every rank's arena, as this GPU reaches it */
  void *ctl_host, *ctl_dev; /* abort, status, status peer (host-mapped) */
  chorus_kern_comm kc;
  size_t ll_bytes;                       /* payload per slot */
  int reported;                          /* a kernel's error was logged (atomic) */
  chorus_watch *watch;                   /* the peers' processes (NULL: all in this one) */
  size_t p2p_ll_bytes;                   /* the largest Send/Recv its LL slots carry (0: none) */
  int devices[CHORUS_KERN_MAX_RANKS];    /* each rank's GPU ordinal in its process */
  int holds_launchers;                   /* chorus_launchers_hold was called for it */
  uint64_t p2p_send_desc, p2p_recv_desc; /* chorus_gpu_p2p_descs, for every FIFO round */
  int staged;                            /* windows in pinned host memory */
  /* Zero-copy (zerocopy.c): every rank in this process, or each in its own;
   * the communicator's name among this process's (equal on all its ranks);
   * the settings; the windows registered on it. */
  int all_local, all_remote;
  uint64_t key;
  int zc_told;           /* the first zero-copy call was logged */
  int ce_told;           /* the first Send on the copy engine was logged (ce.c) */
  unsigned ce_coll_told; /* bit per function: its first call on the copy engine was logged */
  void *side_stream;     /* a second stream of its GPU for the copy engine (ce.c; at first use) */
  size_t ce_chunk;       /* bytes per copy of a copy-engine Broadcast chain on 3+ GPUs */
  /* Collectives planned so far (equal on every rank): counted by the
   * thread that plans a group (group.c), never by launcher threads, so
   * that reading it costs the planning thread no cache miss. */
  uint64_t coll_seq;
  /* The last task per function whose choice looked at no fact and no
   * partner (group.c): calls repeat their shapes, and this spares the rule
   * walk. */
  struct {
    uint64_t key; /* 0: none */
    chorus_task task;
  } memo[CHORUS_FUNC_COUNT];
  struct chorus_gpu_window *windows;
  /* Payload bytes the kernels launched so far move from this rank's GPU to
   * each peer's and back (gpu.c; atomic, read by the state dump). */
  uint64_t peer_sent[CHORUS_KERN_MAX_RANKS], peer_got[CHORUS_KERN_MAX_RANKS];
};

/* Counts bytes moved between g's GPU and peer p's (sent to it, got from
 * it; gpu.h chorus_gpu_peer_bytes). */
void chorus_gpu_moved(chorus_gpu *g, int p, uint64_t sent, uint64_t got);

/* Frees every window still registered on g (regwin.c). */
void chorus_gpu_windows_free(chorus_gpu *g);
/* Fills *d for op (task t) from the symmetric windows holding its
 * buffers; 0 (d cleared) when they are not in such windows. */
int chorus_gpu_zc_from_windows(const chorus_gpu *g, const chorus_op *op, const chorus_task *t,
                               chorus_kern_zc *d);
/* Whether op's buffers lie in symmetric windows every rank mapped, at
 * offsets every rank's window has room for (the planner's fact). */
int chorus_gpu_in_windows(const chorus_gpu *g, const chorus_op *op);

#endif
