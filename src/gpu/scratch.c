/*
 * scratch.c - see scratch.h.
 */
#include "gpu/scratch.h"

#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "gpu/arena.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/misc.h"

#define MIN_SHARED ((size_t)1 << 20)

ncclResult_t chorus_gpu_scratch_get(chorus_gpu_scratch *s, size_t bytes, int captured,
                                    void *last_event, const char *what, char **out) {
  void *p;
  char err[160];
  if (captured) {
    if (s->nkept == s->kept_cap) {
      const int cap = s->kept_cap ? 2 * s->kept_cap : 8;
      void **k = chorus_malloc((size_t)cap * sizeof *k);
      if (!k) return chorus_error(ncclSystemError, "out of memory keeping a graph's scratch");
      if (s->nkept) memcpy(k, s->kept, (size_t)s->nkept * sizeof *k);
      chorus_free(s->kept);
      s->kept = k;
      s->kept_cap = cap;
    }
    if (chorus_dev_scratch_alloc(bytes, &p) != 0) {
      snprintf(err, sizeof err, "allocating device scratch (%s, captured)", what);
      return chorus_gpu_cuda_error(err);
    }
    s->kept[s->nkept++] = p;
    *out = p;
    return ncclSuccess;
  }
  if (s->cap < bytes) {
    if (s->buf && last_event && chorus_dev_event_wait(last_event) != 0) {
      snprintf(err, sizeof err, "waiting for earlier %s", what);
      return chorus_gpu_cuda_error(err);
    }
    if (chorus_dev_scratch_free(s->buf) != 0) {
      snprintf(err, sizeof err, "freeing device scratch (%s)", what);
      return chorus_gpu_cuda_error(err);
    }
    s->buf = NULL;
    s->cap = 0;
    const size_t cap = CHORUS_MAX(bytes, MIN_SHARED);
    if (chorus_dev_scratch_alloc(cap, &p) != 0) {
      snprintf(err, sizeof err, "allocating device scratch (%s)", what);
      return chorus_gpu_cuda_error(err);
    }
    s->buf = p;
    s->cap = cap;
  }
  *out = s->buf;
  return ncclSuccess;
}

void chorus_gpu_scratch_free(chorus_gpu_scratch *s) {
  chorus_dev_scratch_free(s->buf);
  for (int i = 0; i < s->nkept; i++) chorus_dev_scratch_free(s->kept[i]);
  chorus_free(s->kept);
  memset(s, 0, sizeof *s);
}
