/*
 * test_fp.c - the narrow float conversions of host/fp.h against independent
 * references: the compiler's _Float16 for binary16, and for bfloat16 and the
 * fp8 formats a value formula evaluated in double plus a brute-force search
 * for the nearest code (ties to even, fp8 saturating).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "host/fp.h"
#include "unit.h"

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Equal bits, or both NaN with the same sign. */
static int same_float(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) && !signbit(a) == !signbit(b);
  return fbits(a) == fbits(b);
}

/* ---- binary16 against _Float16 --------------------------------------------- */

#ifdef __FLT16_MAX__
static float ref_half_to_float(uint16_t h) {
  _Float16 x;
  memcpy(&x, &h, sizeof x);
  return (float)x;
}

static uint16_t ref_half_bits(_Float16 x) {
  uint16_t h;
  memcpy(&h, &x, sizeof h);
  return h;
}

static int half_is_nan(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static void test_half_decode_exhaustive(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++)
    if (!same_float(chorus_half_to_float((uint16_t)h), ref_half_to_float((uint16_t)h))) {
      if (bad++ < 5) fprintf(stderr, "half 0x%04x: got %a\n", h, chorus_half_to_float((uint16_t)h));
    }
  EXPECT_EQ_INT(bad, 0);
}

/* One float through both conversions; NaN only needs to stay NaN and signed. */
static int half_encode_ok(float f) {
  uint16_t got = chorus_float_to_half(f), want = ref_half_bits((_Float16)f);
  if (isnan(f)) return half_is_nan(got) && (got >> 15) == (want >> 15);
  return got == want;
}

static int half_encode_double_ok(double d) {
  return chorus_double_to_half(d) == ref_half_bits((_Float16)d);
}

static void test_half_encode(void) {
  int bad = 0;
  /* Every midpoint between adjacent finite halves (including the one
   * between 65504 and the overflow threshold 65536), and a float ulp either
   * side: the exact ties must go to even, the neighbours must not tie. */
  for (uint32_t h = 0; h < 0x7c00; h++) {
    double lo = ref_half_to_float((uint16_t)h);
    double hi = h + 1 < 0x7c00 ? ref_half_to_float((uint16_t)(h + 1)) : 65536.0;
    float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
    float probes[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
    for (int k = 0; k < 3; k++) {
      bad += !half_encode_ok(probes[k]) + !half_encode_ok(-probes[k]);
      bad += !half_encode_ok(bitsf(fbits(probes[k]) + 1)); /* +1 ulp beyond */
    }
  }
  /* Random bit patterns: every exponent, subnormals, NaNs, infinities. */
  uint64_t s = 1;
  for (int i = 0; i < 300000; i++) bad += !half_encode_ok(bitsf((uint32_t)rng_next(&s)));
  float special[] = {0.0f,          -0.0f,         INFINITY, -INFINITY, NAN,
                     -NAN,          FLT_MAX,       FLT_MIN,  65504.0f,  65519.99f,
                     65520.0f,      1e-8f,         5.96e-8f, 2.98e-8f,  2.9802322e-8f,
                     2.9802326e-8f, 6.1035156e-5f, 1e30f,    -1e30f,    1.0f / 3};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
    bad += !half_encode_ok(special[i]);
  EXPECT_EQ_INT(bad, 0);
}

/* Doubles must round once: a value just past a half midpoint that float
 * would round onto the midpoint itself. */
static void test_half_from_double(void) {
  int bad = 0;
  uint64_t s = 2;
  for (uint32_t h = 0; h < 0x7c00; h++) {
    double lo = ref_half_to_float((uint16_t)h);
    double hi = h + 1 < 0x7c00 ? ref_half_to_float((uint16_t)(h + 1)) : 65536.0;
    double mid = (lo + hi) / 2;
    bad += !half_encode_double_ok(mid) + !half_encode_double_ok(nextafter(mid, 0)) +
           !half_encode_double_ok(nextafter(mid, INFINITY)) + !half_encode_double_ok(-mid);
  }
  for (int i = 0; i < 100000; i++) {
    uint64_t u = rng_next(&s);
    double d;
    memcpy(&d, &u, sizeof d);
    if (!isnan(d)) bad += !half_encode_double_ok(d);
  }
  EXPECT_EQ_INT(chorus_double_to_half(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
  EXPECT_EQ_INT(bad, 0);
}
#endif

/* ---- bfloat16: formula and neighbour search --------------------------------- */

static double ref_bf16_value(uint16_t b) {
  int sign = b >> 15, e = (b >> 7) & 0xff, m = b & 0x7f;
  double v;
  if (e == 0xff)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp(m / 128.0, -126);
  else
    v = ldexp(1.0 + m / 128.0, e - 127);
  return sign ? -v : v;
}

/* Nearest bfloat16 to a finite non-zero double by looking at the codes
 * around its truncation; beyond the largest finite value the "next" value
 * is 2^128, where rounding goes to infinity. */
static uint16_t ref_bf16_nearest(double x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  if (isinf(a)) return sign | 0x7f80;
  float af = (float)a; /* only used to find the neighbourhood */
  int base = (int)(fbits(af) >> 16);
  int best = -1;
  double best_d = 0;
  for (int c = base - 2; c <= base + 2; c++) {
    if (c < 0 || c > 0x7f80) continue;
    double v = c == 0x7f80 ? 0x1p128 : ref_bf16_value((uint16_t)c);
    double d = fabs(v - a);
    if (best < 0 || d < best_d || (d == best_d && !(c & 1))) {
      best = c;
      best_d = d;
    }
  }
  return (uint16_t)(sign | best);
}

static void test_bf16_decode_exhaustive(void) {
  int bad = 0;
  for (uint32_t b = 0; b < 65536; b++)
    bad += !same_float(chorus_bf16_to_float((uint16_t)b), (float)ref_bf16_value((uint16_t)b));
  EXPECT_EQ_INT(bad, 0);
}

static int bf16_encode_ok(float f) {
  uint16_t got = chorus_float_to_bf16(f);
  if (isnan(f)) return isnan(ref_bf16_value(got)) && (got >> 15) == !!signbit(f);
  if (f == 0) return got == (signbit(f) ? 0x8000 : 0);
  return got == ref_bf16_nearest(f) && chorus_double_to_bf16(f) == got;
}

static void test_bf16_encode(void) {
  int bad = 0;
  for (uint32_t b = 0; b < 0x7f80; b++) {
    double lo = ref_bf16_value((uint16_t)b);
    double hi = b + 1 < 0x7f80 ? ref_bf16_value((uint16_t)(b + 1)) : 0x1p128;
    float mid = (float)((lo + hi) / 2);
    if (isinf(mid)) mid = FLT_MAX; /* the overflow midpoint exceeds float */
    bad += !bf16_encode_ok(mid) + !bf16_encode_ok(-mid) + !bf16_encode_ok(nextafterf(mid, 0)) +
           !bf16_encode_ok(nextafterf(mid, INFINITY));
  }
  uint64_t s = 3;
  for (int i = 0; i < 300000; i++) bad += !bf16_encode_ok(bitsf((uint32_t)rng_next(&s)));
  float special[] = {INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f, 0.0f};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
    bad += !bf16_encode_ok(special[i]);
  EXPECT_EQ_INT(chorus_float_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ_INT(chorus_float_to_bf16(FLT_MAX), 0x7f80); /* rounds past the largest bf16 */
  EXPECT_EQ_INT(bad, 0);
}

static void test_bf16_from_double(void) {
  int bad = 0;
  uint64_t s = 4;
  for (int i = 0; i < 100000; i++) {
    /* Doubles of bf16 magnitude with random low bits. */
    double d = ldexp((double)(rng_next(&s) >> 11) / 0x1p53 + 1.0, (int)(rng_next(&s) % 250) - 125);
    if (chorus_double_to_bf16(d) != ref_bf16_nearest(d)) bad++;
  }
  /* Just above a bf16 midpoint, below float precision: float would tie. */
  EXPECT_EQ_INT(chorus_double_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3f81);
  EXPECT_EQ_INT(chorus_double_to_bf16(1.0 + 0x1p-8), 0x3f80);
  EXPECT_EQ_INT(bad, 0);
}

/* ---- fp8: formula and search over all 256 codes ----------------------------- */

typedef struct fp8_ref {
  int e4m3; /* 1: e4m3, 0: e5m2 */
  double max;
} fp8_ref;

static double ref_fp8_value(const fp8_ref *t, uint8_t v) {
  int sign = v >> 7;
  double r;
  if (t->e4m3) {
    int e = (v >> 3) & 15, m = v & 7;
    if (e == 15 && m == 7)
      r = NAN;
    else
      r = e == 0 ? m / 8.0 * 0x1p-6 : (1 + m / 8.0) * ldexp(1, e - 7);
  } else {
    int e = (v >> 2) & 31, m = v & 3;
    if (e == 31)
      r = m ? NAN : INFINITY;
    else
      r = e == 0 ? m / 4.0 * 0x1p-14 : (1 + m / 4.0) * ldexp(1, e - 15);
  }
  return sign ? -r : r;
}

/* Nearest finite code of the same sign, ties to the even code; anything
 * beyond the largest finite value saturates to it (inf included). */
static uint8_t ref_fp8_nearest(const fp8_ref *t, double x) {
  int neg = signbit(x) != 0;
  if (fabs(x) >= t->max) x = neg ? -t->max : t->max;
  int best = -1;
  long double best_d = 0;
  for (int c = 0; c < 256; c++) {
    double v = ref_fp8_value(t, (uint8_t)c);
    if (isnan(v) || isinf(v) || (c >> 7) != neg) continue;
    long double d = fabsl((long double)v - x);
    if (best < 0 || d < best_d || (d == best_d && !(c & 1))) {
      best = c;
      best_d = d;
    }
  }
  return (uint8_t)best;
}

static void check_fp8(const fp8_ref *t, float (*dec)(uint8_t), uint8_t (*enc)(float),
                      uint8_t (*enc_d)(double)) {
  int bad = 0;
  for (int c = 0; c < 256; c++)
    bad += !same_float(dec((uint8_t)c), (float)ref_fp8_value(t, (uint8_t)c));
  EXPECT_EQ_INT(bad, 0);

  /* Sorted positive finite values, to walk the midpoints. */
  double vals[128];
  int nv = 0;
  for (int c = 0; c < 128; c++) {
    double v = ref_fp8_value(t, (uint8_t)c);
    if (!isnan(v) && !isinf(v)) vals[nv++] = v;
  }
  bad = 0;
  for (int i = 0; i + 1 < nv; i++) {
    float mid = (float)((vals[i] + vals[i + 1]) / 2);
    float probes[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
    for (int k = 0; k < 3; k++)
      for (int sgn = 0; sgn < 2; sgn++) {
        float f = sgn ? -probes[k] : probes[k];
        bad += enc(f) != ref_fp8_nearest(t, f);
        bad += enc_d(f) != ref_fp8_nearest(t, f);
      }
  }
  uint64_t s = 5;
  for (int i = 0; i < 20000; i++) {
    /* Random values in and just beyond the format's range. */
    double d = ldexp((double)(rng_next(&s) >> 11) / 0x1p53, (int)(rng_next(&s) % 40) - 24);
    if (rng_next(&s) & 1) d = -d;
    bad += enc((float)d) != ref_fp8_nearest(t, (float)d);
    bad += enc_d(d) != ref_fp8_nearest(t, d);
  }
  for (int i = 0; i < 20000; i++) {
    float f = bitsf((uint32_t)rng_next(&s));
    if (!isnan(f)) bad += enc(f) != ref_fp8_nearest(t, f);
  }
  float special[] = {0.0f,     -0.0f,    1e-30f,  -1e-30f,  1e-45f,   449.0f,
                     464.0f,   480.0f,   1e6f,    -1e6f,    57344.0f, 61439.0f,
                     61440.0f, 65536.0f, FLT_MAX, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
    bad += enc(special[i]) != ref_fp8_nearest(t, special[i]);
  EXPECT_EQ_INT(bad, 0);
  EXPECT(isnan(dec(enc(NAN))));
  EXPECT(isnan(dec(enc(-NAN))) && (enc(-NAN) & 0x80));
  EXPECT(isnan(dec(enc_d(NAN))));
}

static void test_e4m3(void) {
  fp8_ref t = {1, 448.0};
  check_fp8(&t, chorus_e4m3_to_float, chorus_float_to_e4m3, chorus_double_to_e4m3);
  /* Hand-checked anchors, so the test is not only self-consistent. */
  EXPECT_EQ_INT(chorus_float_to_e4m3(1.0f), 0x38);
  EXPECT_EQ_INT(chorus_float_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ_INT(chorus_float_to_e4m3(1e6f), 0x7e);
  EXPECT_EQ_INT(chorus_float_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ_INT(chorus_float_to_e4m3(0x1p-9f), 0x01);
  EXPECT_EQ_INT(chorus_float_to_e4m3(0x1p-10f), 0x00);  /* tie to even (zero) */
  EXPECT_EQ_INT(chorus_float_to_e4m3(0x1.8p-9f), 0x02); /* 1.5 units: tie to 2 */
  EXPECT(chorus_e4m3_to_float(0x7f) != chorus_e4m3_to_float(0x7f));
  EXPECT(chorus_e4m3_to_float(0x78) == 256.0f);
}

static void test_e5m2(void) {
  fp8_ref t = {0, 57344.0};
  check_fp8(&t, chorus_e5m2_to_float, chorus_float_to_e5m2, chorus_double_to_e5m2);
  EXPECT_EQ_INT(chorus_float_to_e5m2(1.0f), 0x3c);
  EXPECT_EQ_INT(chorus_float_to_e5m2(57344.0f), 0x7b);
  EXPECT_EQ_INT(chorus_float_to_e5m2(INFINITY), 0x7b);
  EXPECT_EQ_INT(chorus_float_to_e5m2(0x1p-16f), 0x01);
  EXPECT(isinf(chorus_e5m2_to_float(0x7c)));
  EXPECT(isnan(chorus_e5m2_to_float(0x7d)));
}

int main(void) {
#ifdef __FLT16_MAX__
  RUN(test_half_decode_exhaustive);
  RUN(test_half_encode);
  RUN(test_half_from_double);
#else
  fprintf(stderr, "no _Float16: binary16 reference tests skipped\n");
#endif
  RUN(test_bf16_decode_exhaustive);
  RUN(test_bf16_encode);
  RUN(test_bf16_from_double);
  RUN(test_e4m3);
  RUN(test_e5m2);
  return unit_report();
}
