/*
 * regwin.h - what a registered window holds, for the gpu/ files that
 * reach the peers' buffers through it (zerocopy.c); the calls that make
 * and drop windows are in gpu.h.
 */
#ifndef CHORUS_GPU_REGWIN_H
#define CHORUS_GPU_REGWIN_H

#include <stddef.h>

#include "gpu/gpu.h"

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

/* The usable symmetric window holding [p, p + len) at an offset every
 * rank's window has room for (*off), or NULL. */
const chorus_gpu_window *chorus_gpu_window_find(const chorus_gpu *g, const void *p, size_t len,
                                                size_t *off);

#endif
