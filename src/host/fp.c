/*
 * fp.c - see fp.h.
 *
 * Everything here is integer bit manipulation, with no float arithmetic, so
 * the results do not depend on the caller's rounding mode or on FTZ/DAZ (an
 * application built with -ffast-math flushes subnormals in float code, which
 * would break subnormal conversions done with float multiplies). The one
 * float operation is widening float to double, which is exact; under DAZ a
 * float subnormal reads as zero, which is what binary16 and fp8 round it to
 * anyway (bfloat16, which can hold it, converts from float by bits alone).
 *
 * All four narrow formats are sign / exponent / mantissa layouts that differ
 * only in field widths, bias and what the top exponent means, so one encoder
 * and one decoder serve them, driven by a format description. Encoding works
 * from a double: a float widens to double exactly, and a double source
 * (chorus_double_to_*) then rounds once, with no double rounding.
 */
#include "host/fp.h"

#include <string.h>

/* How the largest exponent field is used. */
enum top_exp {
  TOP_IEEE, /* all ones = infinity (mantissa 0) or NaN */
  TOP_E4M3  /* a normal exponent; only S.1111.111 is NaN */
};

typedef struct narrow_fmt {
  unsigned ebits, mbits;
  int bias;
  enum top_exp top;
  uint32_t overflow; /* magnitude code for too-large values: inf or max finite */
  uint32_t nan;      /* magnitude code of the NaN we produce */
} narrow_fmt;

static const narrow_fmt fmt_half = {5, 10, 15, TOP_IEEE, 0x7c00, 0x7e00};
static const narrow_fmt fmt_bf16 = {8, 7, 127, TOP_IEEE, 0x7f80, 0x7fc0};
static const narrow_fmt fmt_e4m3 = {4, 3, 7, TOP_E4M3, 0x7e, 0x7f};
static const narrow_fmt fmt_e5m2 = {5, 2, 15, TOP_IEEE, 0x7b, 0x7f};

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* x / 2^s rounded to nearest, ties to even; 1 <= s <= 63. */
static uint64_t shift_round_even(uint64_t x, unsigned s) {
  uint64_t q = x >> s;
  uint64_t rem = x & ((UINT64_C(1) << s) - 1);
  uint64_t half = UINT64_C(1) << (s - 1);
  return q + (rem > half || (rem == half && (q & 1)));
}

/* The code, without its sign, nearest to the double whose magnitude bits
 * are a (finite or infinite, not NaN), in format f. */
static uint32_t encode_magnitude(uint64_t a, const narrow_fmt *f) {
  unsigned e = (unsigned)(a >> 52);
  uint64_t m = a & ((UINT64_C(1) << 52) - 1);
  unsigned min_normal_e = (unsigned)(1023 + 1 - f->bias); /* double exponent field */
  uint64_t r;
  if (e < min_normal_e) {
    /* Subnormal (or zero) in the target: count units of 2^(1-bias-mbits).
     * The value is m' * 2^(e'-1075) with the implicit bit made explicit. */
    unsigned eff = e ? e : 1;
    uint64_t mfull = e ? m | (UINT64_C(1) << 52) : m;
    unsigned shift = 1076u - (unsigned)f->bias - f->mbits - eff;
    if (shift > 53) return 0; /* below half the smallest subnormal */
    r = shift_round_even(mfull, shift);
  } else {
    /* Rebias the exponent in place and drop surplus mantissa bits; a carry
     * out of the mantissa correctly bumps the exponent. */
    uint64_t t = a - ((uint64_t)(1023 - f->bias) << 52);
    r = shift_round_even(t, 52 - f->mbits);
  }
  return r > f->overflow ? f->overflow : (uint32_t)r;
}

static uint32_t encode_double(double d, const narrow_fmt *f) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  uint32_t sign = (uint32_t)(u >> 63) << (f->ebits + f->mbits);
  uint64_t a = u & ~(UINT64_C(1) << 63);
  if (a > UINT64_C(0x7ff0000000000000)) return sign | f->nan;
  return sign | encode_magnitude(a, f);
}

static float decode(uint32_t v, const narrow_fmt *f) {
  unsigned width = f->ebits + f->mbits;
  uint32_t sign = ((v >> width) & 1u) << 31;
  uint32_t emax = (1u << f->ebits) - 1;
  uint32_t e = (v >> f->mbits) & emax;
  uint32_t m = v & ((1u << f->mbits) - 1);
  uint32_t mshift = 23 - f->mbits;
  if (f->top == TOP_IEEE && e == emax)
    return bits_float(sign | 0x7f800000u | (m ? 0x400000u | (m << mshift) : 0));
  if (f->top == TOP_E4M3 && e == emax && m == (1u << f->mbits) - 1)
    return bits_float(sign | 0x7fc00000u);
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    /* Subnormal: normalise so the top set bit of m becomes the implicit 1. */
    int fe = 1 - f->bias + 127;
    while (!(m & (1u << f->mbits))) {
      m <<= 1;
      fe--;
    }
    m &= (1u << f->mbits) - 1;
    return bits_float(sign | ((uint32_t)fe << 23) | (m << mshift));
  }
  return bits_float(sign | ((e + (uint32_t)(127 - f->bias)) << 23) | (m << mshift));
}

float chorus_half_to_float(uint16_t h) {
  return decode(h, &fmt_half);
}
uint16_t chorus_float_to_half(float f) {
  return (uint16_t)encode_double(f, &fmt_half);
}
uint16_t chorus_double_to_half(double d) {
  return (uint16_t)encode_double(d, &fmt_half);
}

/* bfloat16 is the top half of a float, so both directions are cheap. */
float chorus_bf16_to_float(uint16_t b) {
  return bits_float((uint32_t)b << 16);
}

uint16_t chorus_float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* keep quiet */
  /* Adding just under half an ulp, plus one when the kept part is odd, makes
   * the truncation round to nearest even; overflow carries into infinity. */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

uint16_t chorus_double_to_bf16(double d) {
  return (uint16_t)encode_double(d, &fmt_bf16);
}

float chorus_e4m3_to_float(uint8_t v) {
  return decode(v, &fmt_e4m3);
}
uint8_t chorus_float_to_e4m3(float f) {
  return (uint8_t)encode_double(f, &fmt_e4m3);
}
uint8_t chorus_double_to_e4m3(double d) {
  return (uint8_t)encode_double(d, &fmt_e4m3);
}

float chorus_e5m2_to_float(uint8_t v) {
  return decode(v, &fmt_e5m2);
}
uint8_t chorus_float_to_e5m2(float f) {
  return (uint8_t)encode_double(f, &fmt_e5m2);
}
uint8_t chorus_double_to_e5m2(double d) {
  return (uint8_t)encode_double(d, &fmt_e5m2);
}
