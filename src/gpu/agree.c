/*
 * agree.c - the settings every rank of a GPU communicator must share
 * (gpu.h): those param_table.h marks AGREE, which shape the arenas, the
 * kernels' protocols and the plans. Ranks that read them differently would
 * cut FIFOs or choose algorithms differently and exchange garbage or wait
 * forever, so init compares them and names the first that differs.
 */
#include <stdio.h>
#include <string.h>

#include "gpu/gpu.h"
#include "util/misc.h"
#include "util/param.h"

/* The settings marked AGREE in param_table.h, in table order. */
static int shared_settings(chorus_param_id *out) {
  int n = 0;
  for (int i = 0; i < CHORUS_P_COUNT; i++)
    if (chorus_param_desc_get((chorus_param_id)i)->flags & CHORUS_PARAM_AGREE)
      out[n++] = (chorus_param_id)i;
  return n;
}

/* A value as a user writes it. */
static const char *show(int64_t v, char *buf, size_t len) {
  if (v == CHORUS_AUTO)
    snprintf(buf, len, "auto");
  else
    snprintf(buf, len, "%lld", (long long)v);
  return buf;
}

/* A string setting as a number (0 when unset). */
static int64_t text_hash(const char *s) {
  return s ? (int64_t)(chorus_hash64(s, strlen(s), 0) >> 1) | 1 : 0; /* set: never 0 */
}

void chorus_gpu_agree_read(chorus_gpu_agree *a) {
  chorus_param_id shared[CHORUS_P_COUNT];
  memset(a, 0, sizeof *a);
  a->count = (int32_t)shared_settings(shared);
  if (a->count > CHORUS_GPU_AGREE_MAX)
    a->count = CHORUS_GPU_AGREE_MAX; /* the table test says not */
  for (int i = 0; i < a->count; i++) {
    const chorus_param_desc *d = chorus_param_desc_get(shared[i]);
    a->value[i] = d->type == CHORUS_PARAM_STR ? text_hash(chorus_param_str(shared[i]))
                                              : chorus_param_int(shared[i]);
  }
}

int chorus_gpu_agree_check(const chorus_gpu_agree *all, int nranks, char *err, size_t errlen) {
  chorus_param_id shared[CHORUS_P_COUNT];
  shared_settings(shared);
  for (int p = 1; p < nranks; p++) {
    if (all[p].count != all[0].count) {
      snprintf(err, errlen,
               "ranks 0 and %d run different builds of Chorus (%d and %d shared "
               "settings)",
               p, all[0].count, all[p].count);
      return 0;
    }
    for (int i = 0; i < all[0].count; i++) {
      if (all[p].value[i] == all[0].value[i]) continue;
      const chorus_param_desc *d = chorus_param_desc_get(shared[i]);
      char a0[32], ap[32];
      if (d->type == CHORUS_PARAM_STR)
        snprintf(err, errlen,
                 "%s differs between ranks 0 and %d; every rank of a GPU "
                 "communicator must set it alike",
                 d->name, p);
      else
        snprintf(err, errlen,
                 "%s is %s on rank 0 but %s on rank %d; every rank of a GPU communicator must "
                 "set it alike",
                 d->name, show(all[0].value[i], a0, sizeof a0),
                 show(all[p].value[i], ap, sizeof ap), p);
      return i;
    }
  }
  return -1;
}
