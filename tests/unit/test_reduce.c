/*
 * test_reduce.c - host/reduce.h against a reference computed element by
 * element: integers exactly (uint64 arithmetic, truncated to the type once),
 * floating types in long double with an error bound derived from how the
 * kernel computes (in the type for float/double, in float then rounded once
 * for half, bfloat16 and fp8). Every kernel table this CPU can run is tested,
 * in place and out of place, across block boundaries.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/fp.h"
#include "host/reduce.h"
#include "host/reduce_impl.h"
#include "nccl.h"
#include "unit.h"

#define NTYPES 12

static const size_t type_size[NTYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static const char *const type_name[NTYPES] = {"int8",   "uint8",  "int32", "uint32",
                                              "int64",  "uint64", "half",  "float",
                                              "double", "bf16",   "e4m3",  "e5m2"};
static const char *const kind_name[] = {"sum", "prod", "max", "min", "premulsum", "sumpostdiv"};

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) {
  return (double)(rng_next(s) >> 11) / 0x1p53;
}

static int is_int(int t) {
  return t <= ncclUint64;
}
static int is_signed_int(int t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}
static int is_narrow(int t) {
  return t == ncclFloat16 || t >= ncclBfloat16;
}

/* ---- element access ----------------------------------------------------- */

static uint64_t get_bits(int t, const void *buf, size_t i) {
  const char *p = (const char *)buf + i * type_size[t];
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (type_size[t]) {
  case 1:
    memcpy(&u8, p, 1);
    return u8;
  case 2:
    memcpy(&u16, p, 2);
    return u16;
  case 4:
    memcpy(&u32, p, 4);
    return u32;
  default:
    memcpy(&u64, p, 8);
    return u64;
  }
}

/* The low bytes of u (little endian). */
static void put_bits(int t, void *buf, size_t i, uint64_t u) {
  memcpy((char *)buf + i * type_size[t], &u, type_size[t]);
}

/* The integer's value as a 64-bit two's complement pattern. */
static uint64_t get_int(int t, const void *buf, size_t i) {
  uint64_t u = get_bits(t, buf, i);
  unsigned bits = (unsigned)type_size[t] * 8;
  if (is_signed_int(t) && bits < 64 && (u >> (bits - 1)) & 1) u |= ~UINT64_C(0) << bits;
  return u;
}

static long double get_float(int t, const void *buf, size_t i) {
  union {
    uint32_t u;
    float f;
  } f32;
  union {
    uint64_t u;
    double d;
  } f64;
  if (t == ncclFloat32) return f32.u = (uint32_t)get_bits(t, buf, i), f32.f;
  if (t == ncclFloat64) return f64.u = get_bits(t, buf, i), f64.d;
  return chorus_scalar_to_double(t, (const char *)buf + i * type_size[t]);
}

static uint64_t width_mask(int t) {
  return type_size[t] == 8 ? ~UINT64_C(0) : (UINT64_C(1) << (type_size[t] * 8)) - 1;
}

/* Position of a narrow code on the number line: adjacent values differ by 1
 * and +0 / -0 coincide. */
static long code_rank(int t, uint64_t code) {
  unsigned bits = (unsigned)type_size[t] * 8;
  long mag = (long)(code & ((UINT64_C(1) << (bits - 1)) - 1));
  return (code >> (bits - 1)) & 1 ? -mag : mag;
}

/* Spacing of the narrow type at magnitude x (the last finite gap beyond). */
static long double narrow_ulp(int t, long double x) {
  unsigned char c[8] = {0}, n[8] = {0};
  chorus_scalar_from_double(t, (double)fabsl(x), c);
  uint64_t code = get_bits(t, c, 0), next = code + 1;
  memcpy(n, &next, type_size[t]);
  long double a = get_float(t, c, 0), b = get_float(t, n, 0);
  if (isnan(b) || isinf(b)) {
    uint64_t prev = code - 1;
    memcpy(n, &prev, type_size[t]);
    return a - get_float(t, n, 0);
  }
  return b - a;
}

/* ---- one configuration -------------------------------------------------- */

/* A reduction to check: everything but the count and where dst lives. */
typedef struct tcase {
  int dtype, kind, nsrc;
  size_t count; /* elements generated; runs use prefixes */
  uint64_t mask;
  int finalize;
  uint64_t divisor;
  double scalar; /* PREMULSUM, floating types */
  uint64_t seed;
  const uint16_t *codes; /* narrow types: the codes inputs are drawn from */
  size_t ncodes;
} tcase;

/* What each element may be: exact bits for integers, otherwise the exact
 * value, a bound on the kernel's error before any final rounding, and for
 * narrow types the position of the code nearest to the exact value. */
typedef struct expect {
  uint64_t *bits;
  long double *want, *bound;
  long *rank;
} expect;

/* Inputs keep float results finite and mostly clear of underflow: products
 * of values near 1, everything else in [-2, 2]. */
static int in_range(int t, int kind, double v) {
  double a = fabs(v);
  if (kind != CHORUS_RED_PROD) return a <= 2;
  return is_narrow(t) ? a >= 0.8 && a <= 1.25 : a >= 0.5 && a <= 2;
}

/* The codes of a narrow type that in_range accepts. */
static uint16_t *narrow_codes(int t, int kind, size_t *n) {
  size_t ncodes = (size_t)1 << (8 * type_size[t]);
  uint16_t *codes = malloc(ncodes * sizeof *codes);
  *n = 0;
  for (size_t c = 0; c < ncodes; c++) {
    uint16_t code = (uint16_t)c;
    unsigned char b[2];
    memcpy(b, &code, sizeof b);
    double v = chorus_scalar_to_double(t, b);
    if (!isnan(v) && in_range(t, kind, v)) codes[(*n)++] = code;
  }
  return codes;
}

static void fill(const tcase *tc, void *buf, uint64_t *s) {
  int t = tc->dtype;
  for (size_t i = 0; i < tc->count; i++) {
    uint64_t r = rng_next(s);
    if (is_int(t)) {
      put_bits(t, buf, i, r);
    } else if (is_narrow(t)) {
      put_bits(t, buf, i, tc->codes[r % tc->ncodes]);
    } else {
      double v;
      do v = 4 * rng_unit(s) - 2;
      while (!in_range(t, tc->kind, v));
      if (t == ncclFloat32)
        ((float *)buf)[i] = (float)v;
      else
        ((double *)buf)[i] = v;
    }
  }
}

static int scaled(const tcase *tc, int s) {
  return tc->kind == CHORUS_RED_PREMULSUM && ((tc->mask >> s) & 1);
}

static uint64_t int_expected(const tcase *tc, void *const *src, size_t i, uint64_t scalar) {
  int t = tc->dtype, sgn = is_signed_int(t);
  uint64_t acc = tc->kind == CHORUS_RED_PROD ? 1 : 0;
  for (int s = 0; s < tc->nsrc; s++) {
    uint64_t x = get_int(t, src[s], i);
    int64_t xs = (int64_t)x, as = (int64_t)acc;
    switch (tc->kind) {
    case CHORUS_RED_PROD:
      acc *= x;
      break;
    case CHORUS_RED_MAX:
      if (s == 0 || (sgn ? xs > as : x > acc)) acc = x;
      break;
    case CHORUS_RED_MIN:
      if (s == 0 || (sgn ? xs < as : x < acc)) acc = x;
      break;
    default:
      acc += scaled(tc, s) ? x * scalar : x;
    }
  }
  if (tc->kind == CHORUS_RED_SUMPOSTDIV && tc->finalize) {
    unsigned bits = (unsigned)type_size[t] * 8;
    if (sgn) {
      int64_t v = (int64_t)(acc << (64 - bits)) >> (64 - bits); /* the wrapped sum */
      acc = (uint64_t)(v / (int64_t)tc->divisor);               /* C truncates to 0 */
    } else {
      acc = (acc & width_mask(t)) / tc->divisor;
    }
  }
  return acc & width_mask(t);
}

/* Exact result (long double is exact for these sums of narrow values and
 * within 2^-64 for float/double) and a bound on the kernel's error before
 * any final rounding to a narrow type. */
static long double float_expected(const tcase *tc, void *const *src, size_t i, long double scalar,
                                  long double *bound) {
  int t = tc->dtype;
  long double eps = t == ncclFloat64 ? DBL_EPSILON : FLT_EPSILON;
  long double acc = tc->kind == CHORUS_RED_PROD ? 1 : 0, mag = 0;
  for (int s = 0; s < tc->nsrc; s++) {
    long double x = get_float(t, src[s], i);
    switch (tc->kind) {
    case CHORUS_RED_PROD:
      acc *= x;
      break;
    case CHORUS_RED_MAX:
      if (s == 0 || x > acc) acc = x;
      break;
    case CHORUS_RED_MIN:
      if (s == 0 || x < acc) acc = x;
      break;
    default:
      x = scaled(tc, s) ? x * scalar : x;
      acc += x;
      mag += fabsl(x);
    }
  }
  /* Each of the n-1 operations and each premultiply errs by at most eps/2
   * of the magnitudes involved: (n+1)*eps*sum|terms| covers them all. */
  *bound = (tc->nsrc + 1) * eps * (tc->kind == CHORUS_RED_PROD ? fabsl(acc) : mag);
  if (tc->kind == CHORUS_RED_MAX || tc->kind == CHORUS_RED_MIN) *bound = 0;
  if (tc->kind == CHORUS_RED_SUMPOSTDIV && tc->finalize) {
    acc /= tc->divisor;
    *bound = *bound / tc->divisor + eps * fabsl(acc);
  }
  return acc;
}

static void compute_expect(const tcase *tc, void *const *src, const chorus_red *op, expect *e) {
  int t = tc->dtype;
  uint64_t int_scalar = is_int(t) ? get_int(t, op->scalar, 0) : 0;
  long double fscalar = is_int(t) ? 0 : get_float(t, op->scalar, 0);
  for (size_t i = 0; i < tc->count; i++) {
    if (is_int(t)) {
      e->bits[i] = int_expected(tc, src, i, int_scalar);
      continue;
    }
    e->want[i] = float_expected(tc, src, i, fscalar, &e->bound[i]);
    if (is_narrow(t)) {
      unsigned char w[8];
      chorus_scalar_from_double(t, (double)e->want[i], w);
      e->rank[i] = code_rank(t, get_bits(t, w, 0));
    }
  }
}

static int element_ok(int t, const expect *e, const void *dst, size_t i) {
  if (is_int(t)) return get_bits(t, dst, i) == e->bits[i];
  long double tol = e->bound[i];
  if (is_narrow(t)) {
    /* Rounded once from a float within `bound` of the exact value: on a
     * code next to the exact value's nearest, or within bound + one ulp. */
    if (labs(code_rank(t, get_bits(t, dst, i)) - e->rank[i]) <= 1) return 1;
    tol += narrow_ulp(t, fabsl(e->want[i]) + tol);
  }
  return fabsl(get_float(t, dst, i) - e->want[i]) <= tol;
}

/* Runs one table on the first `count` elements with dst at src[alias] (or
 * separate when alias < 0); restores the sources afterwards. */
static int run_one(const chorus_red_kernels *k, const tcase *tc, const chorus_red *op, void **src,
                   void *const *orig, void *sep, const expect *e, size_t count, int alias,
                   int stream) {
  int t = tc->dtype, n = tc->nsrc, bad = 0;
  size_t bytes = count * type_size[t];
  void *dst = alias < 0 ? sep : src[alias];
  unsigned flags = (tc->finalize ? CHORUS_RED_FINALIZE : 0) | (stream ? CHORUS_RED_NT : 0);
  chorus_reduce_with(k, op, dst, (const void *const *)src, n, count, tc->mask, flags);
  for (size_t i = 0; i < count; i++)
    if (!element_ok(t, e, dst, i)) {
      if (bad++ < 3)
        fprintf(stderr, "  [%zu] got %Lg (0x%llx) want %Lg (0x%llx)\n", i, get_float(t, dst, i),
                (unsigned long long)get_bits(t, dst, i), e->want ? e->want[i] : 0,
                e->bits ? (unsigned long long)e->bits[i] : 0);
    }
  for (int s = 0; s < n; s++) /* sources other than dst must be untouched */
    if (src[s] != dst && memcmp(src[s], orig[s], bytes) != 0) bad++;
  if (bad)
    fprintf(stderr,
            "  ^ %s %s %s nsrc=%d count=%zu alias=%d mask=0x%llx fin=%d div=%llu stream=%d\n",
            k->name, type_name[t], kind_name[tc->kind], n, count, alias,
            (unsigned long long)tc->mask, tc->finalize, (unsigned long long)tc->divisor, stream);
  if (alias >= 0) memcpy(src[alias], orig[alias], bytes);
  return bad == 0;
}

/* Sources are combined up to 4 at a time, the accumulator counting as one
 * after the first group: 4..7 and 9 (which has a middle group) cover every
 * group shape; 64 checks every mask bit and the longest chain. */
static const int nsrcs[] = {1, 2, 3, 4, 5, 6, 7, 9, 64};
/* 9000 crosses a block boundary for every type (at most 8192 per block);
 * 65537 crosses many; 1000 and below fit in one. */
static const size_t counts[] = {0, 1, 3, 17, 1000, 9000, 65537};
#define NCOUNTS (sizeof counts / sizeof counts[0])
/* The largest count run for each entry of nsrcs, to keep the run short:
 * many blocks with 2 sources; several with 1, 3 (one group) and 5 (two
 * groups); one block otherwise, and 17 elements for 64 sources. */
static const size_t max_count[] = {9000, 65537, 9000, 1000, 9000, 1000, 1000, 1000, 17};

/* Buffers for every configuration, allocated once at their largest. */
typedef struct buffers {
  void *src[CHORUS_REDUCE_MAX_SRCS], *orig[CHORUS_REDUCE_MAX_SRCS], *sep;
  expect e;
} buffers;

static void buffers_init(buffers *b) {
  size_t most = 0;
  for (int i = 0; i < CHORUS_REDUCE_MAX_SRCS; i++) {
    size_t cap = 0; /* elements source i ever holds */
    for (size_t ni = 0; ni < sizeof nsrcs / sizeof nsrcs[0]; ni++)
      if (nsrcs[ni] > i && max_count[ni] > cap) cap = max_count[ni];
    b->src[i] = malloc(cap * 8 + 1);
    b->orig[i] = malloc(cap * 8 + 1);
    most = cap > most ? cap : most;
  }
  b->sep = malloc(most * 8 + 1);
  b->e.bits = malloc(most * sizeof *b->e.bits);
  b->e.want = malloc(most * sizeof *b->e.want);
  b->e.bound = malloc(most * sizeof *b->e.bound);
  b->e.rank = malloc(most * sizeof *b->e.rank);
}

static void buffers_free(buffers *b) {
  for (int i = 0; i < CHORUS_REDUCE_MAX_SRCS; i++) {
    free(b->src[i]);
    free(b->orig[i]);
  }
  free(b->sep);
  free(b->e.bits);
  free(b->e.want);
  free(b->e.bound);
  free(b->e.rank);
}

/* Generates inputs for the largest count allowed, computes the reference
 * once, then checks every table, count and aliasing against it (a
 * reduction of a prefix is the prefix of the reduction). */
static int run_config(const chorus_red_kernels *const *tables, int ntables, buffers *b, tcase *tc,
                      size_t limit) {
  int t = tc->dtype, n = tc->nsrc, ok = 1;
  size_t ncounts = 0;
  while (ncounts < NCOUNTS && counts[ncounts] <= limit) ncounts++;
  tc->count = counts[ncounts - 1];
  uint64_t s = tc->seed;
  for (int i = 0; i < n; i++) {
    fill(tc, b->src[i], &s);
    memcpy(b->orig[i], b->src[i], tc->count * type_size[t]);
  }
  chorus_red op = {.kind = (chorus_red_kind)tc->kind, .dtype = t, .divisor = tc->divisor};
  if (is_int(t)) {
    uint64_t r = rng_next(&s);
    memcpy(op.scalar, &r, type_size[t]);
  } else {
    chorus_scalar_from_double(t, tc->scalar, op.scalar);
  }
  compute_expect(tc, b->orig, &op, &b->e);

  /* The table chorus_reduce uses runs everything (in place up to 9000
   * elements: several blocks). The others, whose kernels are the same
   * source built for another ISA behind the same driver, run within one
   * block, where every kernel shape, vector body and tail is exercised. */
  int aliases[3] = {-1, 0, n - 1};
  for (int ti = 0; ti < ntables; ti++) {
    int best = tables[ti] == chorus_red_kernels_best();
    for (size_t ci = 0; ci < ncounts; ci++)
      for (int ai = 0; ai < (n > 1 ? 3 : 2); ai++) {
        if (counts[ci] > (best ? (aliases[ai] < 0 ? SIZE_MAX : 9000) : 1000)) continue;
        /* Non-temporal stores (large outputs) take another path out of
         * every block: run it too, with the table chorus_reduce uses. */
        for (int st = 0; st <= best; st++)
          ok &= run_one(tables[ti], tc, &op, b->src, b->orig, b->sep, &b->e, counts[ci],
                        aliases[ai], st);
      }
  }
  return ok;
}

static int tables_to_test(const chorus_red_kernels **tables) {
  int n = 0;
  tables[n++] = &chorus_red_kernels_generic;
  if (chorus_red_kernels_best() != &chorus_red_kernels_generic)
    tables[n++] = chorus_red_kernels_best();
  else
    fprintf(stderr, "  (only the generic kernels run on this CPU)\n");
  return n;
}

/* Every type, operator, source count and PREMULSUM mask pattern. */
static void test_matrix(void) {
  const chorus_red_kernels *tables[2];
  int ntables = tables_to_test(tables), failed = 0;
  uint64_t seed = 12345;
  buffers b;
  buffers_init(&b);
  for (int t = 0; t < NTYPES; t++)
    for (int kind = 0; kind <= CHORUS_RED_SUMPOSTDIV; kind++) {
      size_t ncodes = 0;
      uint16_t *codes = is_narrow(t) ? narrow_codes(t, kind, &ncodes) : NULL;
      for (size_t ni = 0; ni < sizeof nsrcs / sizeof nsrcs[0]; ni++) {
        int n = nsrcs[ni];
        uint64_t masks[4] = {~UINT64_C(0), UINT64_C(0x5555555555555555), UINT64_C(1) << (n - 1), 0};
        /* PREMULSUM: four masks; SUMPOSTDIV: with and without finalize. */
        int variants = kind == CHORUS_RED_PREMULSUM ? 4 : kind == CHORUS_RED_SUMPOSTDIV ? 2 : 1;
        for (int v = 0; v < variants; v++) {
          tcase tc = {.dtype = t,
                      .kind = kind,
                      .nsrc = n,
                      .finalize = 1,
                      .divisor = (uint64_t)n + 2,
                      .scalar = 1.0 / 3,
                      .seed = ++seed,
                      .codes = codes,
                      .ncodes = ncodes};
          /* Other operators must ignore the mask: give them a random one. */
          tc.mask = kind == CHORUS_RED_PREMULSUM ? masks[v] : rng_next(&seed);
          if (kind == CHORUS_RED_SUMPOSTDIV) tc.finalize = v;
          /* 65537 elements (many blocks) once per operator, except for
           * PROD and MAX, whose kernels differ from MIN's and SUM's only
           * in the expression; the other variants over a few blocks. */
          int many = v == 0 && kind != CHORUS_RED_PROD && kind != CHORUS_RED_MAX;
          size_t limit = many || max_count[ni] < 9000 ? max_count[ni] : 9000;
          failed += !run_config(tables, ntables, &b, &tc, limit);
        }
      }
      free(codes);
    }
  buffers_free(&b);
  EXPECT_EQ_INT(failed, 0);
}

/* ---- dedicated cases ---------------------------------------------------- */

/* Reduces `count` elements of the given sources into dst with table k. */
static void reduce_small(const chorus_red_kernels *k, int dtype, int kind, const void *const *src,
                         int nsrc, void *dst, size_t count, uint64_t divisor) {
  chorus_red op = {.kind = (chorus_red_kind)kind, .dtype = dtype, .divisor = divisor};
  chorus_reduce_with(k, &op, dst, src, nsrc, count, 0, 1);
}

static const uint64_t nan_code[NTYPES] = {[ncclFloat16] = 0x7e00,
                                          [ncclBfloat16] = 0x7fc0,
                                          [ncclFloat8e4m3] = 0x7f,
                                          [ncclFloat8e5m2] = 0x7e};

static void store(int t, void *buf, size_t i, double v) {
  chorus_scalar_from_double(t, v, (char *)buf + i * type_size[t]);
}

static void store_nan(int t, void *buf, size_t i) {
  if (t == ncclFloat32)
    ((float *)buf)[i] = NAN;
  else if (t == ncclFloat64)
    ((double *)buf)[i] = NAN;
  else
    memcpy((char *)buf + i * type_size[t], &nan_code[t], type_size[t]);
}

/* NaN anywhere among the operands of MAX/MIN (or SUM) gives NaN; elsewhere
 * the ordinary result. 40 elements cover vector bodies and scalar tails;
 * 2, 3 and 4 sources cover the pair, last and fold kernels. */
static void check_nan(const chorus_red_kernels *k, int t, int kind, int nsrc) {
  enum { N = 40 };
  unsigned char bufs[4][N * 8], dst[N * 8];
  const void *src[4] = {bufs[0], bufs[1], bufs[2], bufs[3]};
  for (int s = 0; s < nsrc; s++)
    for (size_t i = 0; i < N; i++) {
      store(t, bufs[s], i, (double)((int)(i * 7 + (size_t)s * 3) % 11 - 5) / 4);
      if (i % (size_t)(nsrc + 2) == (size_t)s + 1) store_nan(t, bufs[s], i);
    }
  reduce_small(k, t, kind, src, nsrc, dst, N, 1);
  int bad = 0;
  for (size_t i = 0; i < N; i++) {
    int any_nan = 0;
    long double want = 0;
    for (int s = 0; s < nsrc; s++) {
      long double x = get_float(t, bufs[s], i);
      any_nan |= isnan(x);
      if (s == 0 || (kind == CHORUS_RED_MAX ? x > want : kind == CHORUS_RED_MIN ? x < want : 0))
        want = x;
      else if (kind == CHORUS_RED_SUM)
        want += x;
    }
    long double got = get_float(t, dst, i);
    if (any_nan ? !isnan(got) : got != want) bad++;
  }
  if (bad) fprintf(stderr, "  %s %s %s nsrc=%d\n", k->name, type_name[t], kind_name[kind], nsrc);
  EXPECT_EQ_INT(bad, 0);
}

static void test_nan(void) {
  const chorus_red_kernels *tables[2];
  int ntables = tables_to_test(tables);
  int types[] = {ncclFloat16,  ncclFloat32,    ncclFloat64,
                 ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  int kinds[] = {CHORUS_RED_MAX, CHORUS_RED_MIN, CHORUS_RED_SUM};
  for (int ti = 0; ti < ntables; ti++)
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
      for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++)
        for (int n = 2; n <= 4; n++) check_nan(tables[ti], types[i], kinds[j], n);
}

/* Reduces two (or three) one-element sources given as codes and returns the
 * result's code. */
static uint64_t reduce_codes(const chorus_red_kernels *k, int t, int kind, int nsrc, uint64_t a,
                             uint64_t b, uint64_t c) {
  uint64_t in[3] = {a, b, c}, out = 0;
  const void *src[3] = {&in[0], &in[1], &in[2]};
  reduce_small(k, t, kind, src, nsrc, &out, 1, 1);
  return out;
}

/* Overflow: IEEE types go to infinity, fp8 saturates; narrow types are
 * rounded once, not after every source. */
static void test_overflow_and_rounding(void) {
  const chorus_red_kernels *tables[2];
  int ntables = tables_to_test(tables);
  for (int ti = 0; ti < ntables; ti++) {
    const chorus_red_kernels *k = tables[ti];
    float fmax = FLT_MAX, fsum;
    const void *fsrc[2] = {&fmax, &fmax};
    reduce_small(k, ncclFloat32, CHORUS_RED_SUM, fsrc, 2, &fsum, 1, 1);
    EXPECT(isinf(fsum) && fsum > 0);
    double dmax = -DBL_MAX, dsum;
    const void *dsrc[2] = {&dmax, &dmax};
    reduce_small(k, ncclFloat64, CHORUS_RED_SUM, dsrc, 2, &dsum, 1, 1);
    EXPECT(isinf(dsum) && dsum < 0);

    EXPECT_EQ_INT(reduce_codes(k, ncclFloat16, CHORUS_RED_SUM, 2, 0x7bff, 0x7bff, 0), 0x7c00);
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat16, CHORUS_RED_SUM, 2, 0xfbff, 0xfbff, 0), 0xfc00);
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat16, CHORUS_RED_PROD, 2, 0x5c00, 0x5c00, 0), 0x7c00);
    EXPECT_EQ_INT(reduce_codes(k, ncclBfloat16, CHORUS_RED_SUM, 2, 0x7f7f, 0x7f7f, 0), 0x7f80);
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat8e4m3, CHORUS_RED_SUM, 2, 0x7e, 0x7e, 0), 0x7e);
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat8e4m3, CHORUS_RED_SUM, 2, 0xfe, 0xfe, 0), 0xfe);
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat8e5m2, CHORUS_RED_SUM, 2, 0x7b, 0x7b, 0), 0x7b);
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat8e5m2, CHORUS_RED_PROD, 2, 0x7b, 0xfb, 0), 0xfb);

    /* 1 + 2^-11 + 2^-11: rounding after each step would tie back to 1. */
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat16, CHORUS_RED_SUM, 3, 0x3c00, 0x1000, 0x1000), 0x3c01);
    /* bfloat16: 1 + 2^-8 + 2^-8 = 1 + 2^-7. */
    EXPECT_EQ_INT(reduce_codes(k, ncclBfloat16, CHORUS_RED_SUM, 3, 0x3f80, 0x3b80, 0x3b80), 0x3f81);
    /* Subnormals: e4m3 2^-9 + 2^-9 = 2^-8; half 2^-24 * 3. */
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat8e4m3, CHORUS_RED_SUM, 2, 0x01, 0x01, 0), 0x02);
    EXPECT_EQ_INT(reduce_codes(k, ncclFloat16, CHORUS_RED_SUM, 3, 0x0001, 0x0001, 0x0001), 0x0003);
  }
}

/* Integer wrap, signedness of MAX/MIN, and SUMPOSTDIV's truncation and
 * extreme divisors. */
static void test_int_edges(void) {
  const chorus_red_kernels *k = chorus_red_kernels_best();
  const int D = CHORUS_RED_SUMPOSTDIV;
  EXPECT_EQ_INT(reduce_codes(k, ncclInt32, CHORUS_RED_SUM, 2, 0x7fffffff, 1, 0), 0x80000000);
  EXPECT_EQ_INT(reduce_codes(k, ncclUint8, CHORUS_RED_PROD, 2, 16, 16, 0), 0);
  EXPECT_EQ_INT(reduce_codes(k, ncclInt8, CHORUS_RED_PROD, 2, 0x80, 0xff, 0), 0x80);
  EXPECT_EQ_INT(
      (int64_t)reduce_codes(k, ncclInt64, CHORUS_RED_PROD, 2, UINT64_C(1) << 63, ~UINT64_C(0), 0),
      INT64_MIN);
  EXPECT_EQ_INT(reduce_codes(k, ncclInt32, CHORUS_RED_MAX, 2, 0xffffffff, 1, 0), 1);
  EXPECT_EQ_INT(reduce_codes(k, ncclUint32, CHORUS_RED_MAX, 2, 0xffffffff, 1, 0), 0xffffffff);
  EXPECT_EQ_INT(reduce_codes(k, ncclInt8, CHORUS_RED_MIN, 3, 0x7f, 0x80, 0x00), 0x80);
  EXPECT_EQ_INT(reduce_codes(k, ncclUint8, CHORUS_RED_MIN, 3, 0x7f, 0x80, 0x00), 0);
  EXPECT_EQ_INT(reduce_codes(k, ncclInt64, CHORUS_RED_MIN, 2, UINT64_C(1) << 63, 5, 0) >> 63, 1);

  /* Truncation toward zero: -7/2 = -3 (not -4); (-128)/3 = -42. */
  uint64_t v;
  int8_t in8[2] = {-8, 1}, out8;
  const void *src8[2] = {&in8[0], &in8[1]};
  reduce_small(k, ncclInt8, D, src8, 2, &out8, 1, 2);
  EXPECT_EQ_INT(out8, -3);
  in8[0] = -128;
  in8[1] = 0;
  reduce_small(k, ncclInt8, D, src8, 2, &out8, 1, 3);
  EXPECT_EQ_INT(out8, -42);
  /* The sum wraps before the division: 100 + 100 = -56 in int8. */
  in8[0] = in8[1] = 100;
  reduce_small(k, ncclInt8, D, src8, 2, &out8, 1, 2);
  EXPECT_EQ_INT(out8, -28);

  int64_t in64[2] = {INT64_MIN, 0}, out64;
  const void *src64[2] = {&in64[0], &in64[1]};
  reduce_small(k, ncclInt64, D, src64, 2, &out64, 1, UINT64_C(1) << 63);
  EXPECT_EQ_INT(out64, -1);
  reduce_small(k, ncclInt64, D, src64, 2, &out64, 1, (UINT64_C(1) << 63) + 1);
  EXPECT_EQ_INT(out64, 0);
  reduce_small(k, ncclInt64, D, src64, 2, &out64, 1, 1);
  EXPECT_EQ_INT(out64, INT64_MIN);
  uint64_t inu[2] = {~UINT64_C(0), 0};
  const void *srcu[2] = {&inu[0], &inu[1]};
  reduce_small(k, ncclUint64, D, srcu, 2, &v, 1, ~UINT64_C(0));
  EXPECT_EQ_INT(v, 1);
  /* Without finalize SUMPOSTDIV is a plain sum. */
  chorus_red op = {.kind = CHORUS_RED_SUMPOSTDIV, .dtype = ncclInt8, .divisor = 2};
  in8[0] = -8;
  in8[1] = 1;
  chorus_reduce(&op, &out8, src8, 2, 1, 0, 0);
  EXPECT_EQ_INT(out8, -7);
}

/* The same buffer given as every source and as dst. */
static void test_repeated_source(void) {
  enum { N = 3000 };
  static float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)i;
  const void *src[3] = {x, x, x};
  chorus_red op = {.kind = CHORUS_RED_SUM, .dtype = ncclFloat32};
  chorus_reduce(&op, x, src, 3, N, 0, 1);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += x[i] != 3.0f * (float)i;
  EXPECT_EQ_INT(bad, 0);
}

static void test_scalars(void) {
  int8_t i8;
  uint8_t u8;
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  uint16_t h;
  chorus_scalar_from_double(ncclInt8, 1000, &i8);
  EXPECT_EQ_INT(i8, 127);
  chorus_scalar_from_double(ncclInt8, -1000, &i8);
  EXPECT_EQ_INT(i8, -128);
  chorus_scalar_from_double(ncclInt8, -3.9, &i8);
  EXPECT_EQ_INT(i8, -3);
  chorus_scalar_from_double(ncclInt8, NAN, &i8);
  EXPECT_EQ_INT(i8, 0);
  chorus_scalar_from_double(ncclUint8, -5, &u8);
  EXPECT_EQ_INT(u8, 0);
  chorus_scalar_from_double(ncclUint8, 300.5, &u8);
  EXPECT_EQ_INT(u8, 255);
  chorus_scalar_from_double(ncclInt32, 3.99, &i32);
  EXPECT_EQ_INT(i32, 3);
  chorus_scalar_from_double(ncclInt32, -1e20, &i32);
  EXPECT_EQ_INT(i32, INT32_MIN);
  chorus_scalar_from_double(ncclUint32, 1e20, &u32);
  EXPECT_EQ_INT(u32, UINT32_MAX);
  chorus_scalar_from_double(ncclInt64, 1e30, &i64);
  EXPECT_EQ_INT(i64, INT64_MAX);
  chorus_scalar_from_double(ncclInt64, -0x1p63, &i64);
  EXPECT_EQ_INT(i64, INT64_MIN);
  chorus_scalar_from_double(ncclUint64, 0x1p63, &u64);
  EXPECT(u64 == UINT64_C(1) << 63);
  chorus_scalar_from_double(ncclUint64, 1e30, &u64);
  EXPECT(u64 == UINT64_MAX);
  chorus_scalar_from_double(ncclUint64, INFINITY, &u64);
  EXPECT(u64 == UINT64_MAX);
  chorus_scalar_from_double(ncclFloat16, 1.0 / 3, &h);
  EXPECT_EQ_INT(h, 0x3555);
  /* Straight from double: float would round this onto a tie. */
  chorus_scalar_from_double(ncclFloat16, 1.0 + 0x1p-11 + 0x1p-40, &h);
  EXPECT_EQ_INT(h, 0x3c01);
  chorus_scalar_from_double(ncclBfloat16, 1.0 / 3, &h);
  EXPECT_EQ_INT(h, 0x3eab);
  chorus_scalar_from_double(ncclFloat8e4m3, 1.0 / 3, &u8);
  EXPECT_EQ_INT(u8, 0x2b); /* 0.34375 = 1.375 * 2^-2 */
  chorus_scalar_from_double(ncclFloat8e5m2, 1.0 / 3, &u8);
  EXPECT_EQ_INT(u8, 0x35); /* 0.3125 = 1.25 * 2^-2 */
  float f;
  double d;
  chorus_scalar_from_double(ncclFloat32, 0.1, &f);
  EXPECT(f == 0.1f);
  chorus_scalar_from_double(ncclFloat64, 0.1, &d);
  EXPECT(d == 0.1);

  for (int t = 0; t < NTYPES; t++) {
    unsigned char buf[8];
    chorus_scalar_from_double(t, -2.5, buf);
    double want = is_int(t) ? (is_signed_int(t) ? -2 : 0) : -2.5;
    EXPECT(chorus_scalar_to_double(t, buf) == want);
  }
  i64 = INT64_MIN;
  EXPECT(chorus_scalar_to_double(ncclInt64, &i64) == -0x1p63);
  u64 = UINT64_MAX;
  EXPECT(chorus_scalar_to_double(ncclUint64, &u64) == 0x1p64);
}

/* The block codecs of every table against fp.c's scalar conversions, which
 * test_fp checks against independent references. */
static void check_codec(const chorus_red_kernels *k, int t) {
  enum { N = 65536 + 7 }; /* every code, then a tail */
  static float f[N], back[N], want[N], spare[CHORUS_RED_GROUP - 1][N];
  static uint16_t codes[N], out[N];
  size_t ncodes = (size_t)1 << (8 * type_size[t]);
  for (size_t i = 0; i < N; i++) codes[i] = (uint16_t)(i % ncodes);
  unsigned char *c8 = (unsigned char *)codes;
  if (type_size[t] == 1)
    for (size_t i = 0; i < N; i++) c8[i] = (unsigned char)(i % ncodes);
  /* Decode 1 to 4 streams at once; f keeps the last result for the encode
   * test below. */
  for (size_t i = 0; i < N; i++) want[i] = (float)get_float(t, codes, i); /* exact */
  int bad = 0;
  for (int nstreams = CHORUS_RED_GROUP; nstreams >= 1; nstreams--) {
    float *outs[CHORUS_RED_GROUP] = {spare[0], spare[1], spare[2], f};
    const void *ins[CHORUS_RED_GROUP] = {codes, codes, codes, codes};
    outs[nstreams - 1] = f;
    k->codec[t].decode(outs, ins, nstreams, N);
    for (int j = 0; j < nstreams; j++)
      for (size_t i = 0; i < N; i++) {
        float got = outs[j][i];
        if (isnan(want[i]) ? !isnan(got) : memcmp(&got, &want[i], sizeof got) != 0) bad++;
      }
  }
  EXPECT_EQ_INT(bad, 0);

  /* Encode: random bit patterns, random values of the type's magnitude,
   * neighbours of representable values and midpoints between adjacent
   * ones (exact in float: they need one bit more than the type). */
  uint64_t s = 99;
  for (size_t i = 0; i < N; i++) {
    uint32_t r = (uint32_t)rng_next(&s);
    float x;
    memcpy(&x, &r, sizeof x);
    if (i % 4 == 1) x = nextafterf(f[i], INFINITY);
    if (i % 4 == 2) x = ldexpf((float)(r & 0xffffff) / 0x1p24f, (int)(r >> 27) - 16);
    if (i % 4 == 3 && i + 1 < N) x = f[i] / 2 + f[i + 1] / 2;
    back[i] = x;
  }
  k->codec[t].encode(out, back, N);
  bad = 0;
  for (size_t i = 0; i < N; i++) {
    unsigned char code[8];
    chorus_scalar_from_double(t, back[i], code);
    uint64_t got = get_bits(t, out, i), w = get_bits(t, code, 0);
    unsigned char g[8];
    memcpy(g, &got, sizeof g);
    if (isnan(back[i]) ? !isnan(chorus_scalar_to_double(t, g)) : got != w) {
      if (bad++ < 3)
        fprintf(stderr, "  %s %s %a -> 0x%llx\n", k->name, type_name[t], (double)back[i],
                (unsigned long long)got);
    }
  }
  EXPECT_EQ_INT(bad, 0);
}

static void test_codecs(void) {
  const chorus_red_kernels *tables[2];
  int ntables = tables_to_test(tables);
  int types[] = {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  for (int ti = 0; ti < ntables; ti++)
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_codec(tables[ti], types[i]);
}

int main(void) {
  RUN(test_scalars);
  RUN(test_codecs);
  RUN(test_nan);
  RUN(test_overflow_and_rounding);
  RUN(test_int_edges);
  RUN(test_repeated_source);
  RUN(test_matrix);
  return unit_report();
}
