/*
 * reduce_generic.c - the reduction kernels compiled for the baseline ISA
 * (SSE2 on x86-64), correct on every CPU; see reduce_kernels.h.
 */
#define KATTR
#include "host/reduce_kernels.h"

DEF_DECODE(half_decode, uint16_t, half_decode_one)

KERNEL void half_encode(void *dv, const float *restrict s, size_t n) {
  uint16_t *restrict d = dv;
  for (size_t i = 0; i < n; i++) d[i] = half_encode_one(s[i]);
}

const chorus_red_kernels chorus_red_kernels_generic = CHORUS_RED_KERNEL_TABLE("generic");
