/*
 * agree.c - the settings every rank of a GPU communicator must share
 * (gpu.h): the ones that shape the windows, the kernels' protocols and the
 * plans. Ranks that read them differently would cut FIFOs or pick
 * algorithms differently and exchange garbage or wait forever, so init
 * compares them and names the first that differs.
 */
#include <stdio.h>
#include <string.h>

#include "gpu/gpu.h"
#include "util/misc.h"
#include "util/param.h"

static const chorus_param_id shared[] = {
    CHORUS_P_GPU_LL_BYTES,
    CHORUS_P_GPU_P2P_LL_BYTES,
    CHORUS_P_GPU_P2P_PULL,
    CHORUS_P_GPU_P2P_SLOTS,
    CHORUS_P_GPU_PIPE_BYTES,
    CHORUS_P_GPU_PIPE_BYTES_PAIR,
    CHORUS_P_GPU_TWOSHOT_BYTES,
    CHORUS_P_GPU_TWOSHOT_BYTES_PAIR,
    CHORUS_P_GPU_TWOSHOT_LL_BYTES,
    CHORUS_P_GPU_LL_CTA_LINES,
    CHORUS_P_GPU_TWOSHOT_CHANNELS,
    CHORUS_P_GPU_TWOSHOT_CHUNK_BYTES,
    CHORUS_P_GPU_CHAIN_BYTES,
    CHORUS_P_GPU_CHAIN_BYTES_PAIR,
    CHORUS_P_GPU_CHUNK_BYTES_PAIR,
    CHORUS_P_GPU_RING_BYTES,
    CHORUS_P_GPU_RING_CHANNELS,
    CHORUS_P_GPU_RING_CHUNK_BYTES,
    CHORUS_P_GPU_DIRECT,
    CHORUS_P_GPU_DIRECT_BYTES,
    CHORUS_P_GPU_DIRECT_MAX,
    CHORUS_P_GPU_DIRECT_AGRS_MAX,
    CHORUS_P_GPU_DIRECT_CHANNELS,
    CHORUS_P_GPU_DIRECT_CTA_BYTES,
    CHORUS_P_GPU_CHANNELS,
    CHORUS_P_GPU_CHUNK_BYTES,
    CHORUS_P_GPU_FIFO_BYTES,
    CHORUS_P_GPU_FIFO_BYTES_PAIR,
    CHORUS_P_ALGO,
    CHORUS_P_PROTO,
};
_Static_assert(sizeof shared / sizeof shared[0] <= CHORUS_GPU_AGREE_MAX, "too many settings");

/* A string setting as a number (0 when unset). */
static int64_t text_hash(const char *s) {
  return s ? (int64_t)(chorus_hash64(s, strlen(s), 0) >> 1) | 1 : 0; /* set: never 0 */
}

void chorus_gpu_agree_read(chorus_gpu_agree *a) {
  memset(a, 0, sizeof *a);
  a->count = (int32_t)(sizeof shared / sizeof shared[0]);
  for (int i = 0; i < a->count; i++) {
    const chorus_param_desc *d = chorus_param_desc_get(shared[i]);
    a->value[i] = d->type == CHORUS_PARAM_STR ? text_hash(chorus_param_str(shared[i]))
                                              : chorus_param_int(shared[i]);
  }
}

int chorus_gpu_agree_check(const chorus_gpu_agree *all, int nranks, char *err, size_t errlen) {
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
      if (d->type == CHORUS_PARAM_STR)
        snprintf(err, errlen,
                 "%s differs between ranks 0 and %d; every rank of a GPU "
                 "communicator must set it alike",
                 d->name, p);
      else
        snprintf(err, errlen,
                 "%s is %lld on rank 0 but %lld on rank %d; every rank of a GPU "
                 "communicator must set it alike",
                 d->name, (long long)all[0].value[i], (long long)all[p].value[i], p);
      return i;
    }
  }
  return -1;
}
