/*
 * reduce_impl.h - private to the host reduction: the table of block kernels
 * that chorus_reduce drives.
 *
 * The kernels are compiled twice from one template (reduce_kernels.h): once
 * for baseline x86-64 / any target (reduce_generic.c) and once for AVX2+F16C
 * (reduce_avx2.c). chorus_reduce picks a table at run time; tests run both.
 * Each kernel handles one contiguous run of n elements; the driver cuts the
 * buffers into blocks that stay in L1 and calls kernels per block.
 */
#ifndef CHORUS_HOST_REDUCE_IMPL_H
#define CHORUS_HOST_REDUCE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "host/reduce.h"

#define CHORUS_RED_NTYPES  12 /* ncclNumTypes */
#define CHORUS_RED_NBINARY 4  /* SUM, PROD, MAX, MIN: the binary operators */
#define CHORUS_RED_GROUP   4  /* the most operands one kernel call combines */

/* d = s[0] OP s[1] OP ... OP s[k-1], left to right, for 2 <= k <=
 * CHORUS_RED_GROUP. d may be the same pointer as any s[j]. Reading several
 * streams per pass keeps more memory requests in flight than folding one
 * source at a time, and touches the accumulator fewer times. */
typedef void (*chorus_red_multi_fn)(void *d, const void *const *s, int k, size_t n);
/* d = s[0]*m[0] + s[1]*m[1] + ..., left to right; m holds k elements of the
 * type. */
typedef void (*chorus_red_multi_scaled_fn)(void *d, const void *const *s, const void *m, int k,
                                           size_t n);
/* d = a*s; d may be a. */
typedef void (*chorus_red_scale_fn)(void *d, const void *a, const void *s, size_t n);
/* d = d / divisor (integers truncate toward zero). */
typedef void (*chorus_red_div_fn)(void *d, uint64_t divisor, size_t n);
/* Narrow types: d[j] = to_float(s[j]) for j < k (1 <= k <= CHORUS_RED_GROUP),
 * all k streams in one pass so their memory requests overlap; and
 * d = from_float(s). Outputs overlap nothing. */
typedef void (*chorus_red_decode_fn)(float *const *d, const void *const *s, int k, size_t n);
typedef void (*chorus_red_encode_fn)(void *d, const float *s, size_t n);

/* Arithmetic on a type held natively (integers, float, double). */
typedef struct chorus_red_arith {
  chorus_red_multi_fn multi[CHORUS_RED_NBINARY]; /* by chorus_red_kind */
  chorus_red_multi_scaled_fn multi_scaled;
  chorus_red_scale_fn scale;
  chorus_red_div_fn div;
} chorus_red_arith;

/* Conversions for a type computed in float (half, bfloat16, fp8). */
typedef struct chorus_red_codec {
  chorus_red_decode_fn decode;
  chorus_red_encode_fn encode;
} chorus_red_codec;

typedef struct chorus_red_kernels {
  const char *name;
  chorus_red_arith arith[CHORUS_RED_NTYPES]; /* rows of narrow types are empty */
  chorus_red_codec codec[CHORUS_RED_NTYPES]; /* rows of native types are empty */
} chorus_red_kernels;

extern const chorus_red_kernels chorus_red_kernels_generic;
#if defined(__x86_64__) && defined(__GNUC__)
#define CHORUS_RED_HAVE_AVX2 1
extern const chorus_red_kernels chorus_red_kernels_avx2;
#endif

/* The fastest table this CPU runs. */
const chorus_red_kernels *chorus_red_kernels_best(void);

/* chorus_reduce with an explicit kernel table. */
void chorus_reduce_with(const chorus_red_kernels *k, const chorus_red *op, void *dst,
                        const void *const *src, int nsrc, size_t count, uint64_t scale_mask,
                        unsigned flags);

#endif
