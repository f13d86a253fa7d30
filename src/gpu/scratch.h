/*
 * scratch.h - device scratch between the steps of GPU calls (a call staged
 * across hosts, a reduction in rank order), on one GPU.
 *
 * Calls launched eagerly share one buffer, grown as needed: a growth first
 * waits for the last eager call that used it (an event its owner keeps).
 * A call captured into a CUDA graph gets a buffer of its own, kept until
 * the scratch is freed, since the graph may replay until then. Made and
 * freed while the thread may be capturing (chorus_dev_scratch_alloc).
 */
#ifndef CHORUS_GPU_SCRATCH_H
#define CHORUS_GPU_SCRATCH_H

#include <stddef.h>

#include "nccl.h"

typedef struct chorus_gpu_scratch {
  char *buf; /* the eager calls' */
  size_t cap;
  void **kept; /* the captured calls' */
  int nkept, kept_cap;
} chorus_gpu_scratch;

/* Scratch of `bytes` on the current device, for a captured call
 * (captured) or an eager one; last_event: recorded after the last eager
 * call that used the shared buffer (NULL: none did). `what` names the
 * calls in errors. */
ncclResult_t chorus_gpu_scratch_get(chorus_gpu_scratch *s, size_t bytes, int captured,
                                    void *last_event, const char *what, char **out);
/* Frees all of it (after the device went idle; its device current). */
void chorus_gpu_scratch_free(chorus_gpu_scratch *s);

#endif
