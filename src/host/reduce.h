/*
 * reduce.h - host reduction kernels: element-wise reduce of N inputs into one
 * output, for every NCCL data type and reduction.
 *
 * Schedules (src/coll) call these on chunks of user buffers and transport
 * slots. They never allocate, never fail, and run at memory bandwidth for the
 * native types.
 */
#ifndef CHORUS_HOST_REDUCE_H
#define CHORUS_HOST_REDUCE_H

#include <stddef.h>
#include <stdint.h>

/* How elements combine. ncclAvg becomes PREMULSUM (1/nranks in the type) for
 * floating types and SUMPOSTDIV (sum, then divide by nranks) for integers,
 * as NCCL does. */
typedef enum {
  CHORUS_RED_SUM = 0,
  CHORUS_RED_PROD,
  CHORUS_RED_MAX,
  CHORUS_RED_MIN,
  CHORUS_RED_PREMULSUM,
  CHORUS_RED_SUMPOSTDIV
} chorus_red_kind;

#define CHORUS_REDUCE_MAX_SRCS 64

typedef struct chorus_red {
  chorus_red_kind kind;
  int dtype;               /* ncclDataType_t */
  unsigned char scalar[8]; /* PREMULSUM: the multiplier, stored in dtype's format */
  uint64_t divisor;        /* SUMPOSTDIV: the divisor (> 0) */
  const void *scalar_dev;  /* GPU communicators: PREMULSUM multiplier in device memory */
} chorus_red;

/*
 * dst[i] = R over s < nsrc of f_s(src[s][i]), for i < count, where
 *   R is + for SUM, PREMULSUM and SUMPOSTDIV, * for PROD, max for MAX, min for MIN;
 *   f_s(x) = x * scalar when kind is PREMULSUM and bit s of scale_mask is set,
 *            x otherwise;
 * then, when flags has CHORUS_RED_FINALIZE and kind is SUMPOSTDIV,
 * dst[i] = dst[i] / divisor. With CHORUS_RED_NT, dst is written with
 * non-temporal stores (host/copy.h), for outputs too big to stay cached.
 *
 * 1 <= nsrc <= CHORUS_REDUCE_MAX_SRCS. dst may be the same pointer as any
 * src (in place); partial overlap is not allowed. Integers wrap modulo 2^bits
 * (no undefined behaviour); signed division truncates toward zero. float16,
 * bfloat16 and the two fp8 types are computed in float and rounded to the
 * type once per call (round to nearest even; fp8 saturates to the largest
 * finite value as CUDA's __NV_SATFINITE conversions do; NaN stays NaN).
 * MAX/MIN on floating types: if either operand is NaN the result is NaN.
 */
#define CHORUS_RED_FINALIZE 1u
#define CHORUS_RED_NT       2u
void chorus_reduce(const chorus_red *op, void *dst, const void *const *src, int nsrc, size_t count,
                   uint64_t scale_mask, unsigned flags);

/* Stores v converted to dtype at out (size of one element). Used to build
 * PREMULSUM scalars, e.g. 1/nranks for ncclAvg. */
void chorus_scalar_from_double(int dtype, double v, void *out);
/* Reads one element of dtype as a double. */
double chorus_scalar_to_double(int dtype, const void *in);

#endif
