/*
 * reduce_kernels.h - the block kernels of the host reduction, as a template.
 *
 * Not a normal header: a translation unit defines KATTR (a function
 * attribute such as a target ISA, or nothing), includes this file, defines
 * half_decode/half_encode its own way, then instantiates its table with
 * CHORUS_RED_KERNEL_TABLE. Every function here is static, so each unit gets
 * its own copy compiled for its ISA.
 *
 * The loops are written for the auto-vectoriser: one simple statement per
 * element, selects written as masks rather than branches, and no restrict
 * where dst may be one of the inputs (the compiler's run-time overlap check
 * accepts exact aliasing, so in-place calls stay vectorised). Integer arithmetic is done
 * in unsigned types (two's complement wrap is the same bits, and unsigned
 * overflow is defined); only MAX/MIN look at signedness.
 */
#ifndef KATTR
#error "define KATTR before including reduce_kernels.h"
#endif

#include <string.h>

#include "host/reduce_impl.h"

#define KERNEL static KATTR
/* Helpers are inlined even in unoptimised builds, where the tests (and
 * every collective) spend their time in these loops. */
#define KINLINE static inline __attribute__((always_inline))

/* ---- binary operators over 2 to 4 operands ------------------------------- */

/* One loop per operand count, so each is a plain streaming loop. */
#define DEF_MULTI_LOOPS(NAME, T, COMBINE2)                                                         \
  KERNEL void NAME(void *dv, const void *const *sv, int k, size_t n) {                             \
    T *d = dv;                                                                                     \
    const T *a = sv[0], *b = sv[1], *c = k > 2 ? sv[2] : NULL, *e = k > 3 ? sv[3] : NULL;          \
    if (k == 2) {                                                                                  \
      for (size_t i = 0; i < n; i++) d[i] = COMBINE2(a[i], b[i]);                                  \
    } else if (k == 3) {                                                                           \
      for (size_t i = 0; i < n; i++) d[i] = COMBINE2(COMBINE2(a[i], b[i]), c[i]);                  \
    } else {                                                                                       \
      for (size_t i = 0; i < n; i++) d[i] = COMBINE2(COMBINE2(COMBINE2(a[i], b[i]), c[i]), e[i]);  \
    }                                                                                              \
  }

/* EXPR combines x (left, earlier sources) and y (right). */
#define DEF_BINARY(NAME, T, EXPR)                                                                  \
  KINLINE T NAME##_op(T x, T y) {                                                                  \
    return (T)(EXPR);                                                                              \
  }                                                                                                \
  DEF_MULTI_LOOPS(NAME##_multi, T, NAME##_op)

#define ADD_EXPR (x + y)
#define MUL_EXPR (x * y)
/* Any NaN operand wins, so MAX/MIN propagate NaN like the other operators. */
#define FMAX_EXPR ((x != x || x > y) ? x : y)
#define FMIN_EXPR ((x != x || x < y) ? x : y)

DEF_BINARY(u8_add, uint8_t, ADD_EXPR)
DEF_BINARY(u8_mul, uint8_t, MUL_EXPR)
DEF_BINARY(u32_add, uint32_t, ADD_EXPR)
DEF_BINARY(u32_mul, uint32_t, MUL_EXPR)
DEF_BINARY(u64_add, uint64_t, ADD_EXPR)
DEF_BINARY(u64_mul, uint64_t, MUL_EXPR)
DEF_BINARY(f32_add, float, ADD_EXPR)
DEF_BINARY(f32_mul, float, MUL_EXPR)
DEF_BINARY(f64_add, double, ADD_EXPR)
DEF_BINARY(f64_mul, double, MUL_EXPR)

DEF_BINARY(i8_max, int8_t, x > y ? x : y)
DEF_BINARY(i8_min, int8_t, x < y ? x : y)
DEF_BINARY(u8_max, uint8_t, x > y ? x : y)
DEF_BINARY(u8_min, uint8_t, x < y ? x : y)
DEF_BINARY(i32_max, int32_t, x > y ? x : y)
DEF_BINARY(i32_min, int32_t, x < y ? x : y)
DEF_BINARY(u32_max, uint32_t, x > y ? x : y)
DEF_BINARY(u32_min, uint32_t, x < y ? x : y)
DEF_BINARY(i64_max, int64_t, x > y ? x : y)
DEF_BINARY(i64_min, int64_t, x < y ? x : y)
DEF_BINARY(u64_max, uint64_t, x > y ? x : y)
DEF_BINARY(u64_min, uint64_t, x < y ? x : y)
DEF_BINARY(f32_max, float, FMAX_EXPR)
DEF_BINARY(f32_min, float, FMIN_EXPR)
DEF_BINARY(f64_max, double, FMAX_EXPR)
DEF_BINARY(f64_min, double, FMIN_EXPR)

/* ---- PREMULSUM: operands multiplied by a scalar (1 for unscaled ones) ---- */

/* Multiplying by 1 is exact for every type, so one kernel covers every
 * combination of scaled and unscaled operands. */
#define DEF_SCALED(NAME, T)                                                                        \
  KERNEL void NAME##_multi_scaled(void *dv, const void *const *sv, const void *mv, int k,          \
                                  size_t n) {                                                      \
    T *d = dv, m[CHORUS_RED_GROUP] = {0};                                                          \
    const T *a = sv[0], *b = sv[1], *c = k > 2 ? sv[2] : NULL, *e = k > 3 ? sv[3] : NULL;          \
    memcpy(m, mv, (size_t)k * sizeof(T));                                                          \
    T m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3];                                                  \
    if (k == 2) {                                                                                  \
      for (size_t i = 0; i < n; i++) d[i] = (T)(a[i] * m0 + b[i] * m1);                            \
    } else if (k == 3) {                                                                           \
      for (size_t i = 0; i < n; i++) d[i] = (T)((T)(a[i] * m0 + b[i] * m1) + c[i] * m2);           \
    } else {                                                                                       \
      for (size_t i = 0; i < n; i++)                                                               \
        d[i] = (T)((T)((T)(a[i] * m0 + b[i] * m1) + c[i] * m2) + e[i] * m3);                       \
    }                                                                                              \
  }                                                                                                \
  KERNEL void NAME##_scale(void *dv, const void *av, const void *sv, size_t n) {                   \
    T *d = dv, s;                                                                                  \
    const T *a = av;                                                                               \
    memcpy(&s, sv, sizeof s);                                                                      \
    for (size_t i = 0; i < n; i++) d[i] = (T)(a[i] * s);                                           \
  }

DEF_SCALED(u8, uint8_t)
DEF_SCALED(u32, uint32_t)
DEF_SCALED(u64, uint64_t)
DEF_SCALED(f32, float)
DEF_SCALED(f64, double)

/* ---- SUMPOSTDIV's final division ---------------------------------------- */

#define DEF_UDIV(NAME, T)                                                                          \
  KERNEL void NAME##_div(void *dv, uint64_t q, size_t n) {                                         \
    T *d = dv;                                                                                     \
    for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] / q);                                           \
  }

/* Divide magnitudes so that truncation is toward zero and no value (not even
 * INT64_MIN, nor a divisor above INT64_MAX) can overflow a signed type. */
#define DEF_SDIV(NAME, T)                                                                          \
  KERNEL void NAME##_div(void *dv, uint64_t q, size_t n) {                                         \
    T *d = dv;                                                                                     \
    for (size_t i = 0; i < n; i++) {                                                               \
      int64_t x = d[i];                                                                            \
      uint64_t mag = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;                                        \
      mag /= q;                                                                                    \
      d[i] = (T)(x < 0 ? 0 - mag : mag);                                                           \
    }                                                                                              \
  }

#define DEF_FDIV(NAME, T)                                                                          \
  KERNEL void NAME##_div(void *dv, uint64_t q, size_t n) {                                         \
    T *d = dv, fq = (T)q;                                                                          \
    for (size_t i = 0; i < n; i++) d[i] = d[i] / fq;                                               \
  }

DEF_SDIV(i8, int8_t)
DEF_UDIV(u8, uint8_t)
DEF_SDIV(i32, int32_t)
DEF_UDIV(u32, uint32_t)
DEF_SDIV(i64, int64_t)
DEF_UDIV(u64, uint64_t)
DEF_FDIV(f32, float)
DEF_FDIV(f64, double)

/* ---- narrow floating types <-> float ------------------------------------ */

KINLINE float as_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

KINLINE uint32_t as_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* All ones when c holds, else zero: selects written as masks stay branch
 * free, so the loops below vectorise (the compiler will not if-convert a
 * select whose arms hold float arithmetic that might trap). */
KINLINE uint32_t mask_if(int c) {
  return 0u - (uint32_t)(c != 0);
}

KINLINE uint32_t pick(uint32_t m, uint32_t a, uint32_t b) {
  return (a & m) | (b & ~m);
}

/* A branch-free decoder for the layouts with an IEEE-style top exponent
 * (binary16, e5m2), equal bit for bit to fp.c's. Normal values move their
 * fields into place and rebias; subnormals are m * 2^-k computed in float,
 * whose result is a normal float, so FTZ/DAZ cannot touch it. */
KINLINE float ieee_narrow_decode(uint32_t v, unsigned mbits, unsigned ebits, float sub_unit) {
  unsigned width = ebits + mbits;
  uint32_t sign = ((v >> width) & 1u) << 31;
  uint32_t emax = (1u << ebits) - 1;
  uint32_t e = (v >> mbits) & emax;
  uint32_t m = v & ((1u << mbits) - 1);
  uint32_t bias_shift = (uint32_t)(127 - ((1 << (ebits - 1)) - 1)) << 23;
  uint32_t normal = ((v & ((1u << width) - 1)) << (23 - mbits)) + bias_shift;
  uint32_t sub = as_bits((float)(int32_t)m * sub_unit);
  uint32_t special = 0x7f800000u | (m << (23 - mbits)) | (mask_if(m) & 0x400000u);
  uint32_t mag = pick(mask_if(e == 0), sub, pick(mask_if(e == emax), special, normal));
  return as_float(sign | mag);
}

KINLINE float e4m3_decode_one(uint8_t v) {
  uint32_t sign = (uint32_t)(v & 0x80u) << 24;
  uint32_t mag = v & 0x7fu;
  uint32_t normal = (mag << 20) + (120u << 23);
  uint32_t sub = as_bits((float)(int32_t)(mag & 7u) * 0x1p-9f);
  uint32_t bits = pick(mask_if(mag == 0x7f), 0x7fc00000u, pick(mask_if(mag < 8), sub, normal));
  return as_float(sign | bits);
}

/* binary16 for the generic kernels and the F16C kernels' tails. */
KINLINE float half_decode_one(uint16_t h) {
  return ieee_narrow_decode(h, 10, 5, 0x1p-24f);
}

KINLINE float bf16_decode_one(uint16_t b) {
  return as_float((uint32_t)b << 16);
}

KINLINE float e5m2_decode_one(uint8_t v) {
  return ieee_narrow_decode(v, 2, 5, 0x1p-16f);
}

/* One loop per stream count, each reading its k sources side by side. */
#define DEF_DECODE(NAME, T, DEC1)                                                                  \
  KERNEL void NAME(float *const *d, const void *const *sv, int k, size_t n) {                      \
    const T *restrict a = sv[0], *restrict b = k > 1 ? sv[1] : NULL;                               \
    const T *restrict c = k > 2 ? sv[2] : NULL, *restrict e = k > 3 ? sv[3] : NULL;                \
    float *restrict da = d[0], *restrict db = k > 1 ? d[1] : NULL;                                 \
    float *restrict dc = k > 2 ? d[2] : NULL, *restrict de = k > 3 ? d[3] : NULL;                  \
    if (k == 1) {                                                                                  \
      for (size_t i = 0; i < n; i++) da[i] = DEC1(a[i]);                                           \
    } else if (k == 2) {                                                                           \
      for (size_t i = 0; i < n; i++) da[i] = DEC1(a[i]), db[i] = DEC1(b[i]);                       \
    } else if (k == 3) {                                                                           \
      for (size_t i = 0; i < n; i++) da[i] = DEC1(a[i]), db[i] = DEC1(b[i]), dc[i] = DEC1(c[i]);   \
    } else {                                                                                       \
      for (size_t i = 0; i < n; i++)                                                               \
        da[i] = DEC1(a[i]), db[i] = DEC1(b[i]), dc[i] = DEC1(c[i]), de[i] = DEC1(e[i]);            \
    }                                                                                              \
  }

DEF_DECODE(bf16_decode, uint16_t, bf16_decode_one)
DEF_DECODE(e4m3_decode, uint8_t, e4m3_decode_one)
DEF_DECODE(e5m2_decode, uint8_t, e5m2_decode_one)

KERNEL void bf16_encode(void *dv, const float *restrict s, size_t n) {
  uint16_t *restrict d = dv;
  for (size_t i = 0; i < n; i++) {
    uint32_t u = as_bits(s[i]);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x40u;
    d[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

/* A branch-free encoder equal bit for bit to fp.c's (NaN payloads aside).
 * Normal results rebias the exponent and round the dropped mantissa bits
 * to nearest even with integer adds; the rounding may carry into the
 * exponent, which is what it should do, and anything past `overflow` (the
 * infinity code, or the largest finite one for saturating fp8) is clamped.
 * Subnormal results let the FPU round: adding 2^(24-bias-mbits), whose ulp
 * is the subnormal step, leaves the rounded count of steps in the low
 * mantissa bits. That sum is a normal float, so FTZ/DAZ do not matter
 * (a float subnormal input rounds to zero either way). */
KINLINE uint32_t narrow_encode_one(float f, unsigned mbits, unsigned width, int bias,
                                   uint32_t overflow, uint32_t nan, float sub_magic) {
  uint32_t u = as_bits(f), a = u & 0x7fffffffu;
  unsigned sh = 23 - mbits;
  uint32_t t = a - ((uint32_t)(127 - bias) << 23);
  uint32_t normal = (t + ((1u << (sh - 1)) - 1) + ((t >> sh) & 1u)) >> sh;
  normal = pick(mask_if(normal > overflow), overflow, normal);
  uint32_t sub = as_bits(as_float(a) + sub_magic) - as_bits(sub_magic);
  uint32_t min_normal = (uint32_t)(128 - bias) << 23;
  uint32_t mag = pick(mask_if(a > 0x7f800000u), nan, pick(mask_if(a >= min_normal), normal, sub));
  return ((u >> 31) << width) | mag;
}

KINLINE uint16_t half_encode_one(float f) {
  return (uint16_t)narrow_encode_one(f, 10, 15, 15, 0x7c00, 0x7e00, 0x1p-1f);
}

KERNEL void e4m3_encode(void *dv, const float *restrict s, size_t n) {
  uint8_t *restrict d = dv;
  for (size_t i = 0; i < n; i++)
    d[i] = (uint8_t)narrow_encode_one(s[i], 3, 7, 7, 0x7e, 0x7f, 0x1p14f);
}

KERNEL void e5m2_encode(void *dv, const float *restrict s, size_t n) {
  uint8_t *restrict d = dv;
  for (size_t i = 0; i < n; i++)
    d[i] = (uint8_t)narrow_encode_one(s[i], 2, 7, 15, 0x7b, 0x7f, 0x1p7f);
}

/* ---- the table ---------------------------------------------------------- */

#define ARITH_ROW(ADD, MUL, MAX, MIN, SCALED, DIV)                                                 \
  {                                                                                                \
    .multi = {ADD##_multi, MUL##_multi, MAX##_multi, MIN##_multi},                                 \
    .multi_scaled = SCALED##_multi_scaled, .scale = SCALED##_scale, .div = DIV##_div               \
  }

#define CHORUS_RED_KERNEL_TABLE(NAME)                                                              \
  {                                                                                                \
    .name = NAME,                                                                                  \
    .arith =                                                                                       \
        {                                                                                          \
            [0] = ARITH_ROW(u8_add, u8_mul, i8_max, i8_min, u8, i8),                               \
            [1] = ARITH_ROW(u8_add, u8_mul, u8_max, u8_min, u8, u8),                               \
            [2] = ARITH_ROW(u32_add, u32_mul, i32_max, i32_min, u32, i32),                         \
            [3] = ARITH_ROW(u32_add, u32_mul, u32_max, u32_min, u32, u32),                         \
            [4] = ARITH_ROW(u64_add, u64_mul, i64_max, i64_min, u64, i64),                         \
            [5] = ARITH_ROW(u64_add, u64_mul, u64_max, u64_min, u64, u64),                         \
            [7] = ARITH_ROW(f32_add, f32_mul, f32_max, f32_min, f32, f32),                         \
            [8] = ARITH_ROW(f64_add, f64_mul, f64_max, f64_min, f64, f64),                         \
        },                                                                                         \
    .codec = {                                                                                     \
        [6] = {half_decode, half_encode},                                                          \
        [9] = {bf16_decode, bf16_encode},                                                          \
        [10] = {e4m3_decode, e4m3_encode},                                                         \
        [11] = {e5m2_decode, e5m2_encode},                                                         \
    },                                                                                             \
  }
