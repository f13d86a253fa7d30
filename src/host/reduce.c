/*
 * reduce.c - see reduce.h. Drives the block kernels of reduce_kernels.h.
 *
 * Buffers are cut into blocks small enough that a block of the accumulator
 * stays in L1. Within a block, sources are combined up to four at a time
 * (each kernel call is a long vectorisable loop over a few streams, rather
 * than a loop over sources per element): the first group into the
 * accumulator, each later group together with the accumulator, the last
 * group straight into dst. Only that last step writes dst, and it reads
 * element i of every operand before writing element i, so dst may be any
 * one of the sources. Sources are always combined in index order whatever
 * the aliasing or grouping, so every caller gets the same bits for the same
 * inputs (ranks computing the same reduction must agree).
 *
 * half, bfloat16 and fp8 are decoded block by block into float, reduced with
 * the float kernels and rounded once when the block is stored.
 */
#include "host/reduce.h"

#include <stdalign.h>
#include <string.h>

#include "host/copy.h"
#include "host/fp.h"
#include "host/reduce_impl.h"
#include "nccl.h"
#include "util/misc.h"

/* Bytes of accumulator per block: big enough to amortise the start-up of
 * each pass, small enough to stay in L1 next to the blocks being read
 * (4-32 KiB measured within noise of each other; the narrow path splits it
 * into half-size float blocks). */
#define BLOCK_BYTES 8192

/* One call, with the operator reduced to what the kernels need. */
typedef struct plan {
  const chorus_red_arith *arith; /* the type's kernels; float's for narrow types */
  const chorus_red_codec *codec; /* narrow types only */
  char *dst;
  const void *const *src;
  int nsrc;
  size_t esz;
  int binary;    /* index of the binary operator: SUM, PROD, MAX or MIN */
  int scaled;    /* PREMULSUM with at least one source scaled */
  uint64_t mask; /* which sources are scaled */
  int divide;    /* SUMPOSTDIV's final division is due */
  int nt;        /* dst takes non-temporal stores: blocks end in L1, then stream out */
  uint64_t divisor;
  alignas(8) unsigned char scalar[8]; /* multiplier of scaled sources, in the kernel's type */
  alignas(8) unsigned char one[8];    /* multiplier of the others */
} plan;

static int is_narrow(int dtype) {
  return dtype == ncclFloat16 || dtype == ncclBfloat16 || dtype == ncclFloat8e4m3 ||
         dtype == ncclFloat8e5m2;
}

static const char *src_at(const plan *p, int s, size_t off) {
  return (const char *)p->src[s] + off * p->esz;
}

static const void *multiplier(const plan *p, int s) {
  return (p->mask >> s) & 1 ? p->scalar : p->one;
}

/* Combines k operands into out (left to right) with the plan's operator;
 * mult holds each operand's multiplier for PREMULSUM, esz bytes apart. */
static void apply(const plan *p, void *out, const void *const *ops, const unsigned char *mult,
                  int k, size_t n) {
  if (p->scaled)
    p->arith->multi_scaled(out, ops, mult, k, n);
  else
    p->arith->multi[p->binary](out, ops, k, n);
}

/* ---- native types ------------------------------------------------------- */

/* One source: a copy, or a scaling (PREMULSUM with bit 0 set). */
static void native_single(const plan *p, void *d, size_t off, size_t n) {
  if (p->scaled)
    p->arith->scale(d, src_at(p, 0, off), p->scalar, n);
  else if (d != src_at(p, 0, off))
    memcpy(d, src_at(p, 0, off), n * p->esz);
}

/* Sources are taken CHORUS_RED_GROUP at a time: the first group into the
 * accumulator, each later one together with the accumulator, and the last
 * group straight into dst. */
static void native_groups(const plan *p, void *d, void *acc, size_t off, size_t n) {
  size_t esz = p->esz;
  for (int s = 0; s < p->nsrc;) {
    const void *ops[CHORUS_RED_GROUP];
    unsigned char mult[CHORUS_RED_GROUP * 8];
    int k = 0;
    if (s > 0) {
      ops[k] = acc;
      memcpy(mult, p->one, esz);
      k++;
    }
    for (; k < CHORUS_RED_GROUP && s < p->nsrc; k++, s++) {
      ops[k] = src_at(p, s, off);
      memcpy(mult + (size_t)k * esz, multiplier(p, s), esz);
    }
    apply(p, s == p->nsrc ? d : acc, ops, mult, k, n);
  }
}

static void native_block(const plan *p, void *acc, size_t off, size_t n) {
  char *d = p->dst + off * p->esz;
  /* Streaming: the whole block is finished in the accumulator (in L1) and
   * leaves it in one streamed copy; dst may still be a source, since every
   * source is read before the block is written. */
  char *out = p->nt ? acc : d;
  if (p->nsrc == 1)
    native_single(p, out, off, n);
  else
    native_groups(p, out, acc, off, n);
  if (p->divide) p->arith->div(out, p->divisor, n);
  if (p->nt) chorus_copy_nt_nofence(d, acc, n * p->esz);
}

static void reduce_native(const plan *p, size_t count) {
  alignas(64) unsigned char acc[BLOCK_BYTES];
  size_t block = BLOCK_BYTES / p->esz;
  for (size_t off = 0; off < count; off += block)
    native_block(p, acc, off, count - off < block ? count - off : block);
}

/* ---- types computed in float --------------------------------------------- */

/* Floats per block: the accumulator and one decoded block per operand of a
 * group fit in L1 together. */
#define NARROW_BLOCK (BLOCK_BYTES / sizeof(float) / 2)

typedef struct narrow_bufs {
  alignas(64) float acc[NARROW_BLOCK];
  alignas(64) float tmp[CHORUS_RED_GROUP][NARROW_BLOCK];
} narrow_bufs;

/* native_groups, with each group's sources decoded to float first (in one
 * pass over all of them). */
static void narrow_groups(const plan *p, narrow_bufs *b, size_t off, size_t n) {
  for (int s = 0; s < p->nsrc;) {
    const void *ops[CHORUS_RED_GROUP], *raw[CHORUS_RED_GROUP];
    float *decoded[CHORUS_RED_GROUP];
    float mult[CHORUS_RED_GROUP];
    int k = 0, first;
    if (s > 0) {
      ops[k] = b->acc;
      memcpy(&mult[k], p->one, sizeof(float));
      k++;
    }
    for (first = k; k < CHORUS_RED_GROUP && s < p->nsrc; k++, s++) {
      raw[k - first] = src_at(p, s, off);
      decoded[k - first] = b->tmp[k];
      ops[k] = b->tmp[k];
      memcpy(&mult[k], multiplier(p, s), sizeof(float));
    }
    p->codec->decode(decoded, raw, k - first, n);
    apply(p, b->acc, ops, (const unsigned char *)mult, k, n);
  }
}

/* Like native_block, computing in float; dst is written once, rounded from
 * the float result. */
static void narrow_block(const plan *p, narrow_bufs *b, size_t off, size_t n) {
  if (p->nsrc == 1) {
    float *acc = b->acc;
    const void *raw = src_at(p, 0, off);
    p->codec->decode(&acc, &raw, 1, n);
    if (p->scaled) p->arith->scale(b->acc, b->acc, p->scalar, n);
  } else {
    narrow_groups(p, b, off, n);
  }
  if (p->divide) p->arith->div(b->acc, p->divisor, n);
  if (p->nt) {
    /* Encoded into a free decode buffer, then streamed out. */
    p->codec->encode(b->tmp[0], b->acc, n);
    chorus_copy_nt_nofence(p->dst + off * p->esz, b->tmp[0], n * p->esz);
  } else {
    p->codec->encode(p->dst + off * p->esz, b->acc, n);
  }
}

static void reduce_narrow(const plan *p, size_t count) {
  narrow_bufs b;
  for (size_t off = 0; off < count; off += NARROW_BLOCK)
    narrow_block(p, &b, off, count - off < NARROW_BLOCK ? count - off : NARROW_BLOCK);
}

/* ---- entry points -------------------------------------------------------- */

/* Fills the multipliers in the type the kernels compute in: 1 for unscaled
 * sources, op->scalar for scaled ones (PREMULSUM only). */
static void set_multipliers(plan *p, const chorus_red *op) {
  int narrow = is_narrow(op->dtype);
  if (narrow) {
    float one = 1.0f;
    memcpy(p->one, &one, sizeof one);
  } else {
    chorus_scalar_from_double(op->dtype, 1.0, p->one);
  }
  if (op->kind != CHORUS_RED_PREMULSUM) {
    memcpy(p->scalar, p->one, sizeof p->one);
  } else if (narrow) {
    float s = (float)chorus_scalar_to_double(op->dtype, op->scalar); /* exact */
    memcpy(p->scalar, &s, sizeof s);
  } else {
    memcpy(p->scalar, op->scalar, p->esz);
  }
}

void chorus_reduce_with(const chorus_red_kernels *k, const chorus_red *op, void *dst,
                        const void *const *src, int nsrc, size_t count, uint64_t scale_mask,
                        unsigned flags) {
  int dtype = op->dtype;
  if (count == 0 || nsrc < 1 || nsrc > CHORUS_REDUCE_MAX_SRCS || dtype < 0 ||
      dtype >= CHORUS_RED_NTYPES)
    return;
  int narrow = is_narrow(dtype);
  if (!narrow && op->kind <= CHORUS_RED_MIN && nsrc > 1 && nsrc <= CHORUS_RED_GROUP &&
      !(flags & CHORUS_RED_NT)) {
    /* One kernel call does it all (what the plan below comes to): without
     * the plan's set-up, AllReduce of up to 4 KiB on 2 ranks ran 1.2-1.3x
     * faster. */
    k->arith[dtype].multi[op->kind](dst, src, nsrc, count);
    return;
  }
  plan p = {.dst = dst, .src = src, .nsrc = nsrc, .esz = chorus_type_size(dtype)};
  p.arith = &k->arith[narrow ? ncclFloat32 : dtype];
  p.codec = &k->codec[dtype];
  p.binary = op->kind <= CHORUS_RED_MIN ? (int)op->kind : CHORUS_RED_SUM;
  if (op->kind == CHORUS_RED_PREMULSUM) {
    p.mask = nsrc < 64 ? scale_mask & ((UINT64_C(1) << nsrc) - 1) : scale_mask;
    p.scaled = p.mask != 0;
  }
  set_multipliers(&p, op);
  p.divide = op->kind == CHORUS_RED_SUMPOSTDIV && (flags & CHORUS_RED_FINALIZE) && op->divisor != 1;
  p.divisor = op->divisor ? op->divisor : 1;
  int nt = (flags & CHORUS_RED_NT) != 0;
  if (nsrc == 1 && !p.scaled && !p.divide) {
    /* A plain copy: bit exact for every type, NaN payloads included. */
    if (dst != src[0]) chorus_copy(dst, src[0], count * p.esz, nt);
    return;
  }
  p.nt = nt;
  if (narrow)
    reduce_narrow(&p, count);
  else
    reduce_native(&p, count);
  if (nt) chorus_copy_fence();
}

/* __builtin_cpu_supports reads flags the runtime filled in at start-up, so
 * asking on every call costs a load and a test. */
const chorus_red_kernels *chorus_red_kernels_best(void) {
#if defined(CHORUS_RED_HAVE_AVX2) && defined(__clang__)
  /* clang does not know "f16c" here; every CPU with AVX2 also has F16C. */
  if (__builtin_cpu_supports("avx2")) return &chorus_red_kernels_avx2;
#elif defined(CHORUS_RED_HAVE_AVX2)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
    return &chorus_red_kernels_avx2;
#endif
  return &chorus_red_kernels_generic;
}

void chorus_reduce(const chorus_red *op, void *dst, const void *const *src, int nsrc, size_t count,
                   uint64_t scale_mask, unsigned flags) {
  chorus_reduce_with(chorus_red_kernels_best(), op, dst, src, nsrc, count, scale_mask, flags);
}

/* ---- scalars ------------------------------------------------------------- */

/* C conversion (truncation toward zero) where it is defined, saturation
 * beyond the range, 0 for NaN. */
static int64_t to_int64_sat(double v, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v >= 9223372036854775808.0) return hi;
  if (v < -9223372036854775808.0) return lo;
  int64_t x = (int64_t)v;
  return x < lo ? lo : x > hi ? hi : x;
}

static uint64_t to_uint64_sat(double v, uint64_t hi) {
  if (!(v > 0)) return 0; /* negative, zero or NaN */
  if (v >= 18446744073709551616.0) return hi;
  uint64_t x = (uint64_t)v;
  return x > hi ? hi : x;
}

#define STORE(T, expr)                                                                             \
  do {                                                                                             \
    T x_ = (T)(expr);                                                                              \
    memcpy(out, &x_, sizeof x_);                                                                   \
  } while (0)

void chorus_scalar_from_double(int dtype, double v, void *out) {
  switch (dtype) {
  case ncclInt8:
    STORE(int8_t, to_int64_sat(v, INT8_MIN, INT8_MAX));
    break;
  case ncclUint8:
    STORE(uint8_t, to_uint64_sat(v, UINT8_MAX));
    break;
  case ncclInt32:
    STORE(int32_t, to_int64_sat(v, INT32_MIN, INT32_MAX));
    break;
  case ncclUint32:
    STORE(uint32_t, to_uint64_sat(v, UINT32_MAX));
    break;
  case ncclInt64:
    STORE(int64_t, to_int64_sat(v, INT64_MIN, INT64_MAX));
    break;
  case ncclUint64:
    STORE(uint64_t, to_uint64_sat(v, UINT64_MAX));
    break;
  case ncclFloat16:
    STORE(uint16_t, chorus_double_to_half(v));
    break;
  case ncclFloat32:
    STORE(float, v);
    break;
  case ncclFloat64:
    STORE(double, v);
    break;
  case ncclBfloat16:
    STORE(uint16_t, chorus_double_to_bf16(v));
    break;
  case ncclFloat8e4m3:
    STORE(uint8_t, chorus_double_to_e4m3(v));
    break;
  case ncclFloat8e5m2:
    STORE(uint8_t, chorus_double_to_e5m2(v));
    break;
  default:
    break;
  }
}

#define LOAD(T)                                                                                    \
  do {                                                                                             \
    T x_;                                                                                          \
    memcpy(&x_, in, sizeof x_);                                                                    \
    value = (double)x_;                                                                            \
  } while (0)

double chorus_scalar_to_double(int dtype, const void *in) {
  double value = 0;
  uint16_t h;
  uint8_t b;
  switch (dtype) {
  case ncclInt8:
    LOAD(int8_t);
    break;
  case ncclUint8:
    LOAD(uint8_t);
    break;
  case ncclInt32:
    LOAD(int32_t);
    break;
  case ncclUint32:
    LOAD(uint32_t);
    break;
  case ncclInt64:
    LOAD(int64_t);
    break;
  case ncclUint64:
    LOAD(uint64_t);
    break;
  case ncclFloat32:
    LOAD(float);
    break;
  case ncclFloat64:
    LOAD(double);
    break;
  case ncclFloat16:
    memcpy(&h, in, 2);
    value = chorus_half_to_float(h);
    break;
  case ncclBfloat16:
    memcpy(&h, in, 2);
    value = chorus_bf16_to_float(h);
    break;
  case ncclFloat8e4m3:
    memcpy(&b, in, 1);
    value = chorus_e4m3_to_float(b);
    break;
  case ncclFloat8e5m2:
    memcpy(&b, in, 1);
    value = chorus_e5m2_to_float(b);
    break;
  default:
    break;
  }
  return value;
}
