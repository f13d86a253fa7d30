/*
 * data.c - element values of every ncclDataType_t, and the input generator.
 *
 * The perf programs encode and decode the 16- and 8-bit float formats
 * themselves (from the format definitions), so checking never relies on the
 * library's conversions.
 *
 * Inputs are small integers chosen so that every correct result, and every
 * partial result in whatever order the library reduces, is exactly
 * representable: sums stay within `limit` (e5m2 holds integers up to 8
 * exactly, e4m3 up to 16, bfloat16 up to 256, half up to 2048), products are
 * +-2^k with k <= prod_bits. Only avg on floats rounds (it multiplies by
 * 1/nranks): see pt_tolerance().
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const struct {
  size_t size;
  int64_t move_lo, move_hi; /* min, max and data movement */
  int64_t limit;            /* largest exact |partial sum| we allow */
  int64_t amp;              /* sums: largest |x_i| and |c[p]| (see below) */
  int prod_bits;            /* largest power of two a product may reach */
  double eps;               /* float types: 2^-mantissa bits */
} T[ncclNumTypes] = {
    [ncclInt8] = {1, -100, 100, 120, 100, 6, 0},
    [ncclUint8] = {1, 0, 200, 250, 200, 7, 0},
    [ncclInt32] = {4, -1000000, 1000000, 1ll << 30, 1000, 30, 0},
    [ncclUint32] = {4, 0, 2000000, 1ll << 31, 1000, 31, 0},
    [ncclInt64] = {8, -1000000, 1000000, 1ll << 52, 1000, 62, 0},
    [ncclUint64] = {8, 0, 2000000, 1ll << 52, 1000, 62, 0},
    [ncclFloat16] = {2, -2048, 2048, 2048, 8, 15, 0x1p-10},
    [ncclFloat32] = {4, -1000000, 1000000, 1ll << 24, 1000, 100, 0x1p-23},
    [ncclFloat64] = {8, -1000000, 1000000, 1ll << 52, 1000, 1000, 0x1p-52},
    [ncclBfloat16] = {2, -256, 256, 256, 8, 100, 0x1p-7},
    [ncclFloat8e4m3] = {1, -16, 16, 16, 2, 8, 0x1p-3},
    [ncclFloat8e5m2] = {1, -8, 8, 8, 1, 15, 0x1p-2},
};

size_t pt_type_size(ncclDataType_t t) {
  return (t >= 0 && t < ncclNumTypes) ? T[t].size : 0;
}
int pt_type_is_float(ncclDataType_t t) {
  return t >= ncclFloat16;
}
int pt_type_is_signed(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64 || pt_type_is_float(t);
}

/* ---- small floats: 1 sign bit, eb exponent bits, mb mantissa bits ---------- */
static unsigned enc_mini(double v, int eb, int mb, int has_inf) {
  unsigned sign = signbit(v) ? 1u << (eb + mb) : 0;
  unsigned all = (1u << (eb + mb)) - 1;
  if (isnan(v)) return sign | all;
  v = fabs(v);
  if (v == 0) return sign;
  int bias = (1 << (eb - 1)) - 1, e;
  frexp(v, &e); /* v = f * 2^e, f in [0.5, 1) */
  int E = e - 1 + bias;
  if (E <= 0) /* subnormal; rounding up to 1 << mb lands on the first normal */
    return sign | (unsigned)nearbyint(ldexp(v, bias - 1 + mb));
  unsigned m = (unsigned)nearbyint(ldexp(ldexp(v, 1 - e) - 1.0, mb));
  if (m == 1u << mb) m = 0, E++;
  int maxE = has_inf ? (1 << eb) - 2 : (1 << eb) - 1;
  if (E > maxE || (!has_inf && E == maxE && m == (1u << mb) - 1))
    return has_inf ? sign | (unsigned)(maxE + 1) << mb : sign | all; /* inf / NaN */
  return sign | (unsigned)E << mb | m;
}

static double dec_mini(unsigned bits, int eb, int mb, int has_inf) {
  unsigned sign = bits >> (eb + mb) & 1, e = bits >> mb & ((1u << eb) - 1);
  unsigned m = bits & ((1u << mb) - 1);
  int bias = (1 << (eb - 1)) - 1;
  double v;
  if (e == 0)
    v = ldexp((double)m, 1 - bias - mb);
  else if (has_inf && e == (1u << eb) - 1)
    v = m ? NAN : INFINITY;
  else if (!has_inf && e == (1u << eb) - 1 && m == (1u << mb) - 1)
    v = NAN;
  else
    v = ldexp((double)(m | 1u << mb), (int)e - bias - mb);
  return sign ? -v : v;
}

void pt_set(ncclDataType_t t, void *buf, size_t i, double v) {
  switch (t) {
  case ncclInt8:
    ((int8_t *)buf)[i] = (int8_t)v;
    break;
  case ncclUint8:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case ncclInt32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case ncclUint32:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  case ncclInt64:
    ((int64_t *)buf)[i] = (int64_t)v;
    break;
  case ncclUint64:
    ((uint64_t *)buf)[i] = (uint64_t)v;
    break;
  case ncclFloat16:
    ((uint16_t *)buf)[i] = (uint16_t)enc_mini(v, 5, 10, 1);
    break;
  case ncclFloat32:
    ((float *)buf)[i] = (float)v;
    break;
  case ncclFloat64:
    ((double *)buf)[i] = v;
    break;
  case ncclBfloat16:
    ((uint16_t *)buf)[i] = (uint16_t)enc_mini(v, 8, 7, 1);
    break;
  case ncclFloat8e4m3:
    ((uint8_t *)buf)[i] = (uint8_t)enc_mini(v, 4, 3, 0);
    break;
  case ncclFloat8e5m2:
    ((uint8_t *)buf)[i] = (uint8_t)enc_mini(v, 5, 2, 1);
    break;
  default:
    break;
  }
}

/* Decoding tables for the 16- and 8-bit float formats, and encoding tables
 * for the integers the generator produces (|v| <= ENC_MAX). */
#define ENC_MAX 2048
static float dec_half[65536], dec_bf16[65536], dec_e4m3[256], dec_e5m2[256];
static uint16_t enc_tab[4][2 * ENC_MAX + 1]; /* half, bfloat16, e4m3, e5m2 */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static const struct { int eb, mb, inf; } mini[4] = {{5, 10, 1}, {8, 7, 1}, {4, 3, 0}, {5, 2, 1}};

static void init_tables(void) {
  for (unsigned b = 0; b < 65536; b++) {
    dec_half[b] = (float)dec_mini(b, 5, 10, 1);
    dec_bf16[b] = (float)dec_mini(b, 8, 7, 1);
  }
  for (unsigned b = 0; b < 256; b++) {
    dec_e4m3[b] = (float)dec_mini(b, 4, 3, 0);
    dec_e5m2[b] = (float)dec_mini(b, 5, 2, 1);
  }
  for (int f = 0; f < 4; f++)
    for (int v = -ENC_MAX; v <= ENC_MAX; v++)
      enc_tab[f][v + ENC_MAX] = (uint16_t)enc_mini(v, mini[f].eb, mini[f].mb, mini[f].inf);
}

double pt_get(ncclDataType_t t, const void *buf, size_t i) {
  switch (t) {
  case ncclFloat16:
    return dec_half[((const uint16_t *)buf)[i]];
  case ncclFloat32:
    return ((const float *)buf)[i];
  case ncclFloat64:
    return ((const double *)buf)[i];
  case ncclBfloat16:
    return dec_bf16[((const uint16_t *)buf)[i]];
  case ncclFloat8e4m3:
    return dec_e4m3[((const uint8_t *)buf)[i]];
  case ncclFloat8e5m2:
    return dec_e5m2[((const uint8_t *)buf)[i]];
  default:
    return (double)pt_get_int(t, buf, i);
  }
}

int64_t pt_get_int(ncclDataType_t t, const void *buf, size_t i) {
  switch (t) {
  case ncclInt8:
    return ((const int8_t *)buf)[i];
  case ncclUint8:
    return ((const uint8_t *)buf)[i];
  case ncclInt32:
    return ((const int32_t *)buf)[i];
  case ncclUint32:
    return ((const uint32_t *)buf)[i];
  case ncclInt64:
    return ((const int64_t *)buf)[i];
  case ncclUint64:
    return (int64_t)((const uint64_t *)buf)[i];
  default:
    return 0;
  }
}

/* The most negative value for signed integers, all ones otherwise (the
 * largest unsigned value; NaN for every float format). */
void pt_set_sentinel(ncclDataType_t t, void *buf, size_t n) {
  switch (t) {
  case ncclInt8:
    memset(buf, 0x80, n);
    break;
  case ncclInt32:
    for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] = INT32_MIN;
    break;
  case ncclInt64:
    for (size_t i = 0; i < n; i++) ((int64_t *)buf)[i] = INT64_MIN;
    break;
  default:
    memset(buf, 0xff, n * pt_type_size(t));
    break;
  }
}

/* ---- the generator --------------------------------------------------------------
 *
 * Data movement: the value of (rank, element) is a hash of both, in the
 * type's range. Reductions use a shape whose result is known in O(1) per
 * element whatever the number of ranks: element i has a base x_i, an extra
 * y_i and a rotation k_i; rank r sits at position p = (r + k_i) mod n of a
 * per-run table c[0..n) and holds
 *     x_i + c[p] (+ y_i at p == 0)         for sum, avg, mulsum, min, max;
 *     c[p] (* y_i at p == 0)               for prod (c and y: +-1, +-2).
 * So the sum is n*x_i + sum(c) + y_i, the product prod(c) * y_i, and so on.
 * With too many ranks for the type's exact range, x_i = 0 and only a few
 * table entries are non-zero (or 2 for products).
 */
enum { GEN_MOVE, GEN_ADD, GEN_MUL };

static uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 32;
  return x;
}

/* A uniform integer in [lo, lo + range) from 32 random bits. */
static int64_t pick(uint64_t bits32, int64_t lo, uint64_t range) {
  return lo + (int64_t)(((bits32 & 0xffffffffu) * range) >> 32);
}

static void set_range(int64_t *lo, uint64_t *range, int64_t a, int sign) {
  *lo = sign ? -a : 0;
  *range = (uint64_t)(a - *lo + 1);
}

/* Sums (weight w: mulsum doubles rank 0): every partial sum within limit. */
static void plan_add(pt_gen *g, int64_t w) {
  int64_t n = g->nranks, budget = T[g->type].limit / w;
  int64_t a = (budget - 1) / (2 * n);
  if (a > T[g->type].amp) a = T[g->type].amp;
  set_range(&g->ylo, &g->yrange, 1, g->sign);
  if (a >= 1) {
    set_range(&g->xlo, &g->xrange, a, g->sign);
    set_range(&g->clo, &g->crange, a, g->sign);
    g->cnonzero = g->nranks;
  } else { /* x = 0, at most budget - 1 entries of c are +-1 */
    set_range(&g->xlo, &g->xrange, 0, g->sign);
    set_range(&g->clo, &g->crange, 1, g->sign);
    g->cnonzero = (int)(budget - 1 < n ? budget - 1 : n);
  }
}

static void plan(pt_gen *g) {
  const int64_t quarter = T[g->type].move_hi / 4; /* min/max: x + c + y stays in range */
  switch (g->op) {
  case PT_NONE:
    g->kind = GEN_MOVE;
    g->xlo = T[g->type].move_lo;
    g->xrange = (uint64_t)(T[g->type].move_hi - g->xlo + 1);
    break;
  case PT_PROD: /* c: at most prod_bits - 1 twos; y: one more */
    g->kind = GEN_MUL;
    g->cnonzero = T[g->type].prod_bits - 1 < g->nranks ? T[g->type].prod_bits - 1 : g->nranks;
    break;
  case PT_MIN:
  case PT_MAX:
    g->kind = GEN_ADD;
    set_range(&g->xlo, &g->xrange, quarter, g->sign);
    set_range(&g->clo, &g->crange, quarter, g->sign);
    set_range(&g->ylo, &g->yrange, 1, g->sign);
    g->cnonzero = g->nranks;
    break;
  default:
    g->kind = GEN_ADD;
    plan_add(g, g->op == PT_MULSUM ? 2 : 1);
    break;
  }
}

/* The table c and its aggregates (over positions 1.. for min and max). */
static void fill_table(pt_gen *g) {
  int n = g->nranks;
  g->csum = 0, g->cprod = 1, g->cmax1 = -INFINITY, g->cmin1 = INFINITY;
  for (int p = 0; p < n; p++) {
    uint64_t h = mix(g->seed + 0x51ed27ull * (uint64_t)(p + 1));
    int64_t v;
    if (g->kind == GEN_MUL)
      v = (g->sign && (h >> 40 & 1) ? -1 : 1) * (p < g->cnonzero && (h >> 41 & 1) ? 2 : 1);
    else
      v = p < g->cnonzero ? pick(h, g->clo, g->crange) : 0;
    g->c[p] = v;
    g->csum += (double)v;
    g->cprod *= (double)v;
    if (p > 0 && v > g->cmax1) g->cmax1 = (double)v;
    if (p > 0 && v < g->cmin1) g->cmin1 = (double)v;
  }
}

int pt_gen_init(pt_gen *g, ncclDataType_t type, int op, int nranks, uint64_t seed) {
  pthread_once(&tables_once, init_tables);
  memset(g, 0, sizeof *g);
  g->type = type;
  g->op = op;
  g->nranks = nranks;
  g->seed = mix(seed + 0x632be59bd9b4e019ull);
  g->sign = pt_type_is_signed(type);
  plan(g);
  if (g->kind == GEN_MOVE) return 0;
  g->c = malloc((size_t)nranks * sizeof *g->c);
  if (!g->c) return -1;
  fill_table(g);
  return 0;
}

void pt_gen_free(pt_gen *g) {
  free(g->c);
  g->c = NULL;
}

typedef struct elem {
  int64_t x, y;
  int k;
} elem;

static inline elem elem_of(const pt_gen *g, size_t i) {
  uint64_t e = mix(g->seed ^ (uint64_t)i), f = e * 0xd6e8feb86659fd93ull;
  elem el = {pick(e, g->xlo, g->xrange), 0, (int)(((e >> 32) * (uint64_t)g->nranks) >> 32)};
  if (g->kind == GEN_MUL) /* +-1 or +-2 */
    el.y = (g->sign && (f >> 62 & 1) ? -1 : 1) * ((f >> 63) ? 2 : 1);
  else
    el.y = pick(f >> 32, g->ylo, g->yrange);
  return el;
}

static inline int64_t value_at(const pt_gen *g, const elem *el, int rank, size_t i) {
  if (g->kind == GEN_MOVE) {
    uint64_t h = mix(g->seed ^ (uint64_t)i ^ ((uint64_t)(rank + 1) << 40));
    return pick(h, g->xlo, g->xrange);
  }
  int p = el->k + rank;
  if (p >= g->nranks) p -= g->nranks;
  if (g->kind == GEN_MUL) return g->c[p] * (p == 0 ? el->y : 1);
  return el->x + g->c[p] + (p == 0 ? el->y : 0);
}

int64_t pt_gen_int(const pt_gen *g, int rank, size_t i) {
  elem el = {0, 0, 0};
  if (g->kind != GEN_MOVE) el = elem_of(g, i);
  return value_at(g, &el, rank, i);
}

#define FILL(ctype, expr)                                                                          \
  for (size_t i = i0; i < i1; i++) ((ctype *)buf)[i] = (ctype)(expr)

void pt_gen_fill(const pt_gen *g, int rank, void *buf, size_t n) {
  pt_gen_fill_range(g, rank, buf, 0, n);
}

void pt_gen_fill_range(const pt_gen *g, int rank, void *buf, size_t i0, size_t i1) {
  switch (g->type) {
  case ncclInt8:
    FILL(int8_t, pt_gen_int(g, rank, i));
    break;
  case ncclUint8:
    FILL(uint8_t, pt_gen_int(g, rank, i));
    break;
  case ncclInt32:
    FILL(int32_t, pt_gen_int(g, rank, i));
    break;
  case ncclUint32:
    FILL(uint32_t, pt_gen_int(g, rank, i));
    break;
  case ncclInt64:
    FILL(int64_t, pt_gen_int(g, rank, i));
    break;
  case ncclUint64:
    FILL(uint64_t, pt_gen_int(g, rank, i));
    break;
  case ncclFloat32:
    FILL(float, pt_gen_int(g, rank, i));
    break;
  case ncclFloat64:
    FILL(double, pt_gen_int(g, rank, i));
    break;
  case ncclFloat16:
    FILL(uint16_t, enc_tab[0][pt_gen_int(g, rank, i) + ENC_MAX]);
    break;
  case ncclBfloat16:
    FILL(uint16_t, enc_tab[1][pt_gen_int(g, rank, i) + ENC_MAX]);
    break;
  case ncclFloat8e4m3:
    FILL(uint8_t, enc_tab[2][pt_gen_int(g, rank, i) + ENC_MAX]);
    break;
  case ncclFloat8e5m2:
    FILL(uint8_t, enc_tab[3][pt_gen_int(g, rank, i) + ENC_MAX]);
    break;
  default:
    break;
  }
}

/* Rank 0 scales by 2, every other rank by 1: a rank that used another
 * rank's scalar changes the result. */
double pt_mulsum_scalar(int rank) {
  return rank == 0 ? 2 : 1;
}

/* Integers stay exact in double: sums stay below 2^52 and products are
 * powers of two. */
double pt_gen_reduced(const pt_gen *g, size_t idx) {
  elem el = elem_of(g, idx);
  int n = g->nranks;
  double x = (double)el.x, y = (double)el.y, c0y = (double)g->c[0] + y;
  double sum = n * x + g->csum + y;
  switch (g->op) {
  case PT_PROD:
    return g->cprod * y;
  case PT_MAX:
    return x + (c0y > g->cmax1 ? c0y : g->cmax1);
  case PT_MIN:
    return x + (c0y < g->cmin1 ? c0y : g->cmin1);
  case PT_MULSUM:
    return sum + (double)value_at(g, &el, 0, idx); /* rank 0 counts twice */
  case PT_AVG: /* integers: sum, then divide truncating (as NCCL) */
    return pt_type_is_float(g->type) ? sum / n : (double)((int64_t)sum / (int64_t)n);
  default:
    return sum;
  }
}

static double max_abs(int64_t lo, uint64_t range) {
  double hi = (double)lo + (double)range - 1;
  return fabs((double)lo) > fabs(hi) ? fabs((double)lo) : fabs(hi);
}

/* avg on floats multiplies by a rounded 1/nranks and rounds every partial
 * sum: allow (nranks + 2) roundings of the largest input. */
double pt_tolerance(const pt_gen *g) {
  if (g->op != PT_AVG || !pt_type_is_float(g->type)) return 0;
  double amp = max_abs(g->xlo, g->xrange) + max_abs(g->clo, g->crange) + 1;
  return (g->nranks + 2) * T[g->type].eps * amp;
}
