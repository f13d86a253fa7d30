/*
 * ref.c - see ref.h.
 */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

size_t ref_type_size(ncclDataType_t t) {
  static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return (t >= 0 && t < ncclNumTypes) ? s[t] : 0;
}

const char *ref_type_name(ncclDataType_t t) {
  static const char *const n[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                  "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return (t >= 0 && t < ncclNumTypes) ? n[t] : "?";
}

int ref_is_float(ncclDataType_t t) {
  return t >= ncclFloat16;
}

/* Decoders written from the format definitions. */
static double dec_minifloat(unsigned bits, int ebits, int mbits, int has_inf) {
  unsigned sign = bits >> (ebits + mbits) & 1;
  unsigned e = bits >> mbits & ((1u << ebits) - 1);
  unsigned m = bits & ((1u << mbits) - 1);
  int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (e == 0) {
    v = ldexp((double)m, 1 - bias - mbits);
  } else if (e == (1u << ebits) - 1 && has_inf) {
    v = m ? NAN : INFINITY;
  } else if (!has_inf && e == (1u << ebits) - 1 && m == (1u << mbits) - 1) {
    v = NAN; /* e4m3: S.1111.111 */
  } else {
    v = ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
  }
  return sign ? -v : v;
}

/* Exhaustive search for the code of v, memoised: tests use few distinct
 * values, and a 16-bit search per element would dominate the run time. */
typedef struct memo_entry {
  double v;
  int ebits, mbits;
  unsigned code;
} memo_entry;

static unsigned enc_exact(double v, int ebits, int mbits, int has_inf) {
  enum { MEMO = 128 };
  static _Thread_local memo_entry memo[MEMO];
  static _Thread_local int nmemo;
  for (int k = 0; k < nmemo; k++)
    if (memo[k].v == v && memo[k].ebits == ebits && memo[k].mbits == mbits) return memo[k].code;
  unsigned n = 1u << (1 + ebits + mbits), code = 0;
  int found = 0;
  for (unsigned c = 0; c < n && !found; c++)
    if (dec_minifloat(c, ebits, mbits, has_inf) == v) code = c, found = 1;
  if (!found) fprintf(stderr, "ref: %g is not representable\n", v);
  if (nmemo < MEMO) memo[nmemo++] = (memo_entry){v, ebits, mbits, code};
  return code;
}

double ref_get(ncclDataType_t t, const void *buf, size_t i) {
  const unsigned char *b = buf;
  switch (t) {
  case ncclInt8:
    return ((const int8_t *)b)[i];
  case ncclUint8:
    return ((const uint8_t *)b)[i];
  case ncclInt32:
    return ((const int32_t *)b)[i];
  case ncclUint32:
    return ((const uint32_t *)b)[i];
  case ncclInt64:
    return (double)((const int64_t *)b)[i];
  case ncclUint64:
    return (double)((const uint64_t *)b)[i];
  case ncclFloat16:
    return dec_minifloat(((const uint16_t *)b)[i], 5, 10, 1);
  case ncclFloat32:
    return ((const float *)b)[i];
  case ncclFloat64:
    return ((const double *)b)[i];
  case ncclBfloat16:
    return dec_minifloat(((const uint16_t *)b)[i], 8, 7, 1);
  case ncclFloat8e4m3:
    return dec_minifloat(b[i], 4, 3, 0);
  case ncclFloat8e5m2:
    return dec_minifloat(b[i], 5, 2, 1);
  default:
    return NAN;
  }
}

uint64_t ref_get_u64(ncclDataType_t t, const void *buf, size_t i) {
  uint64_t v = 0;
  size_t s = ref_type_size(t);
  memcpy(&v, (const char *)buf + i * s, s);
  return v;
}

void ref_set_u64(ncclDataType_t t, void *buf, size_t i, uint64_t v) {
  size_t s = ref_type_size(t);
  memcpy((char *)buf + i * s, &v, s); /* little endian: low bytes */
}

void ref_set(ncclDataType_t t, void *buf, size_t i, double v) {
  unsigned char *b = buf;
  switch (t) {
  case ncclInt8:
    ((int8_t *)b)[i] = (int8_t)v;
    break;
  case ncclUint8:
    ((uint8_t *)b)[i] = (uint8_t)v;
    break;
  case ncclInt32:
    ((int32_t *)b)[i] = (int32_t)v;
    break;
  case ncclUint32:
    ((uint32_t *)b)[i] = (uint32_t)v;
    break;
  case ncclInt64:
    ((int64_t *)b)[i] = (int64_t)v;
    break;
  case ncclUint64:
    ((uint64_t *)b)[i] = (uint64_t)v;
    break;
  case ncclFloat16:
    ((uint16_t *)b)[i] = (uint16_t)enc_exact(v, 5, 10, 1);
    break;
  case ncclFloat32:
    ((float *)b)[i] = (float)v;
    break;
  case ncclFloat64:
    ((double *)b)[i] = v;
    break;
  case ncclBfloat16: {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    ((uint16_t *)b)[i] = (uint16_t)(u >> 16);
    break;
  }
  case ncclFloat8e4m3:
    b[i] = (unsigned char)enc_exact(v, 4, 3, 0);
    break;
  case ncclFloat8e5m2:
    b[i] = (unsigned char)enc_exact(v, 5, 2, 1);
    break;
  default:
    break;
  }
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return x;
}

double ref_input(ncclDataType_t t, int op, int r, size_t i) {
  uint64_t h = mix((uint64_t)r * 1000003u + i * 7919u + (uint64_t)op * 31u + 1);
  if (op == 1) { /* products: powers of two and -1, so no rounding anywhere */
    static const double f[] = {1, 2, 0.5, -1, 1, -2};
    double v = f[h % 6];
    if (!ref_is_float(t)) v = (double)(int)(h % 3); /* 0, 1, 2 */
    if (t == ncclUint8 || t == ncclUint32 || t == ncclUint64) v = (double)(h % 3);
    return v;
  }
  /* Small integers whose sums over 8 ranks (and every partial sum) stay
   * exact: e5m2 holds integers up to 8 exactly, e4m3 up to 16. */
  int lo = -8, hi = 8;
  if (t == ncclUint8 || t == ncclUint32 || t == ncclUint64)
    lo = 0, hi = 4;
  else if (t == ncclFloat8e4m3)
    lo = -2, hi = 2;
  else if (t == ncclFloat8e5m2)
    lo = -1, hi = 1;
  return (double)(lo + (int)(h % (uint64_t)(hi - lo + 1)));
}

double ref_premul_scalar(int r) {
  return r % 2 == 0 ? 2.0 : 1.0;
}

static int bits_of(ncclDataType_t t) {
  return (int)ref_type_size(t) * 8;
}
static int is_signed(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}

uint64_t ref_expected_u64(ncclDataType_t t, int op, int nranks, size_t i) {
  int bits = bits_of(t);
  uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
  uint64_t acc = 0;
  int64_t sacc = 0;
  for (int r = 0; r < nranks; r++) {
    int64_t v = (int64_t)ref_input(t, op, r, i);
    if (op == 5) v *= (int64_t)ref_premul_scalar(r);
    uint64_t u = (uint64_t)v & mask;
    if (r == 0) {
      acc = u, sacc = v;
      continue;
    }
    switch (op) {
    case 1:
      acc = (acc * u) & mask;
      break;
    case 2:
      if (is_signed(t) ? v > sacc : u > acc) acc = u, sacc = v;
      break;
    case 3:
      if (is_signed(t) ? v < sacc : u < acc) acc = u, sacc = v;
      break;
    default:
      acc = (acc + u) & mask;
      break;
    }
  }
  if (op == 4) { /* sum then divide, in the type's signedness */
    if (is_signed(t)) {
      int64_t s = (int64_t)(acc << (64 - bits)) >> (64 - bits);
      acc = (uint64_t)(s / nranks) & mask;
    } else {
      acc = acc / (uint64_t)nranks;
    }
  }
  return acc;
}

double ref_expected(ncclDataType_t t, int op, int nranks, size_t i, double scalar) {
  double acc = 0;
  for (int r = 0; r < nranks; r++) {
    double v = ref_input(t, op, r, i);
    if (op == 4) v *= scalar;
    if (op == 5) v *= ref_premul_scalar(r);
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (op) {
    case 1:
      acc *= v;
      break;
    case 2:
      acc = v > acc ? v : acc;
      break;
    case 3:
      acc = v < acc ? v : acc;
      break;
    default:
      acc += v;
      break;
    }
  }
  return acc;
}

double ref_tolerance(ncclDataType_t t, int op, double v) {
  /* Exact by construction, except: avg (1/n rounds), and PreMulSum on fp8,
   * whose per-rank scalars push sums past the integers fp8 holds exactly
   * (the other types still check PreMulSum exactly). */
  if (op != 4 && !(op == 5 && (t == ncclFloat8e4m3 || t == ncclFloat8e5m2))) return 0;
  double rel;
  switch (t) {
  case ncclFloat32:
    rel = 1e-6;
    break;
  case ncclFloat64:
    rel = 1e-14;
    break;
  case ncclFloat16:
    rel = 4e-3;
    break;
  case ncclBfloat16:
    rel = 3e-2;
    break;
  case ncclFloat8e4m3:
    rel = 0.25;
    break;
  case ncclFloat8e5m2:
    rel = 0.5;
    break;
  default:
    return 0;
  }
  return rel * (fabs(v) > 1 ? fabs(v) : 1);
}

size_t ref_check(ncclDataType_t t, int op, int nranks, const void *buf, size_t count, double scalar,
                 const char *what) {
  return ref_check_at(t, op, nranks, buf, 0, count, scalar, what);
}

void ref_fill(ncclDataType_t t, int op, int r, void *buf, size_t first, size_t count) {
  for (size_t i = 0; i < count; i++) {
    double v = ref_input(t, op, r, first + i);
    if (ref_is_float(t))
      ref_set(t, buf, i, v);
    else
      ref_set_u64(t, buf, i, (uint64_t)(int64_t)v);
  }
}

size_t ref_check_copy(ncclDataType_t t, int op, int r, const void *buf, size_t first, size_t count,
                      const char *what) {
  size_t wrong = 0, es = ref_type_size(t);
  unsigned char want[8];
  for (size_t i = 0; i < count; i++) {
    ref_fill(t, op, r, want, first + i, 1);
    if (memcmp(want, (const char *)buf + i * es, es) != 0 && wrong++ < 3)
      fprintf(stderr, "  %s: element %zu differs from rank %d's input %zu\n", what, i, r,
              first + i);
  }
  return wrong;
}

size_t ref_check_at(ncclDataType_t t, int op, int nranks, const void *buf, size_t first,
                    size_t count, double scalar, const char *what) {
  size_t wrong = 0;
  for (size_t k = 0; k < count; k++) {
    size_t i = first + k;
    char detail[160];
    /* The detail is formatted only for the elements reported: printing
       every element's values was most of a large check's time. */
    if (!ref_is_float(t)) {
      uint64_t got = ref_get_u64(t, buf, k), exp = ref_expected_u64(t, op, nranks, i);
      if (got == exp || wrong++ >= 3) continue;
      snprintf(detail, sizeof detail, "got %llu expected %llu", (unsigned long long)got,
               (unsigned long long)exp);
    } else {
      double got = ref_get(t, buf, k), exp = ref_expected(t, op, nranks, i, scalar);
      if (fabs(got - exp) <= ref_tolerance(t, op, exp) || wrong++ >= 3) continue;
      snprintf(detail, sizeof detail, "got %.9g expected %.9g", got, exp);
    }
    fprintf(stderr, "  %s: element %zu: %s\n", what, i, detail);
  }
  return wrong;
}
