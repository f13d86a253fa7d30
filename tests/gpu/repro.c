/*
 * repro.c - CHORUS_REPRODUCIBLE=1 on GPU communicators: every reduction's
 * bits are those of adding the ranks' values in rank order,
 * ((r0 + r1) + r2) + ..., rounded to the type after each pair.
 *
 * usage: gpu_repro [-g N]
 *   alone or under a launcher (RANK, WORLD_SIZE, LOCAL_RANK): one process
 *   per GPU; -g N: this process drives N GPUs (ncclCommInitAll, each call
 *   grouped over them).
 *
 * The reference is computed here on the host from the inputs every rank
 * can make (a hash of rank and index), with conversions to float16 and
 * bfloat16 written here: AllReduce (in and out of place), ReduceScatter
 * and Reduce, for float, double, float16 and bfloat16, with sum, prod,
 * max, min, avg and PreMulSum (host and device scalars, a different one
 * per rank), at 1, 1031 and 262147 elements. The inputs spread over many
 * binades, so another order of additions changes low bits. Then the
 * paths a call can take besides: two AllReduces in one group, calls
 * alternating between two streams, and AllReduces captured in a CUDA graph
 * and replayed with fresh inputs. The CHECKS lines run this under several
 * algorithm settings and rank layouts (processes, one process, hosts):
 * each must give the reference's bits, so all give the same.
 * Exit status 77 (skip) where no GPU is visible.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

#define MAXL 8

typedef struct {
  int n, nlocal, rank[MAXL];
  ncclComm_t comm[MAXL];
  cudaStream_t s[MAXL], s2[MAXL];
} ctx;

/* ---- the types, on the host ------------------------------------------------ */

static float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t f_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* float -> float16, rounded to nearest even. */
static uint16_t f2h(float f) {
  uint32_t x = f_bits(f);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x > 0x7f800000) return sign | 0x7e00;  /* NaN */
  if (x >= 0x47800000) return sign | 0x7c00; /* 2^16 and up: infinity */
  if (x >= 0x38800000) {                     /* a normal float16 */
    const uint32_t mant = x & 0x7fffff, rem = mant & 0x1fff;
    uint32_t h = (((x >> 23) - 127 + 15) << 10) | (mant >> 13);
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into infinity */
    return (uint16_t)(sign | h);
  }
  if (x < 0x33000000) return sign; /* under half the smallest subnormal */
  const uint32_t mant = (x & 0x7fffff) | 0x800000;
  const int shift = -((int)(x >> 23) - 127 + 1); /* 14..24 */
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static float h2f(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0) {
    float v = (float)m / 16777216.0f; /* m * 2^-24, exact */
    return sign ? -v : v;
  }
  if (e == 31) return bits_f(sign | 0x7f800000 | m << 13);
  return bits_f(sign | (e - 15 + 127) << 23 | m << 13);
}

static uint16_t f2bf(float f) {
  uint32_t u = f_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

static float bf2f(uint16_t b) {
  return bits_f((uint32_t)b << 16);
}

typedef struct {
  ncclDataType_t t;
  const char *name;
  size_t size;
} type;
static const type TYPES[] = {{ncclFloat32, "float", 4},
                             {ncclFloat64, "double", 8},
                             {ncclFloat16, "half", 2},
                             {ncclBfloat16, "bfloat16", 2}};

/* Element i of buf as its accumulator type (float, or double). */
static double ld(ncclDataType_t t, const void *buf, size_t i) {
  switch (t) {
  case ncclFloat32:
    return ((const float *)buf)[i];
  case ncclFloat64:
    return ((const double *)buf)[i];
  case ncclFloat16:
    return h2f(((const uint16_t *)buf)[i]);
  default:
    return bf2f(((const uint16_t *)buf)[i]);
  }
}

/* v (a float unless t is double) stored as t. */
static void st(ncclDataType_t t, void *buf, size_t i, double v) {
  switch (t) {
  case ncclFloat32:
    ((float *)buf)[i] = (float)v;
    break;
  case ncclFloat64:
    ((double *)buf)[i] = v;
    break;
  case ncclFloat16:
    ((uint16_t *)buf)[i] = f2h((float)v);
    break;
  default:
    ((uint16_t *)buf)[i] = f2bf((float)v);
  }
}

/* a op b in t's accumulator: float arithmetic for all but double. */
static double combine(ncclDataType_t t, int kind, double a, double b) {
  if (t == ncclFloat64) {
    switch (kind) {
    case 1:
      return a * b;
    case 2:
      return b > a ? b : a;
    case 3:
      return b < a ? b : a;
    default:
      return a + b;
    }
  }
  const float x = (float)a, y = (float)b;
  switch (kind) {
  case 1:
    return x * y;
  case 2:
    return y > x ? y : x;
  case 3:
    return y < x ? y : x;
  default:
    return (float)(x + y);
  }
}

/* Rounded to t and back. */
static double round_to(ncclDataType_t t, double v) {
  unsigned char b[8];
  st(t, b, 0, v);
  return ld(t, b, 0);
}

/* Rank r's input element i: m * 2^e, exact in t, over many binades. */
static double input(ncclDataType_t t, int seed, int r, size_t i) {
  uint64_t h = (uint64_t)seed * 0x9e3779b97f4a7c15ull ^ (uint64_t)r * 0xbf58476d1ce4e5b9ull ^
               (uint64_t)i * 0x94d049bb133111ebull;
  h ^= h >> 31;
  h *= 0xd6e8feb96994d011ull;
  h ^= h >> 29;
  const int bits = t == ncclFloat64 ? 48 : t == ncclFloat32 ? 24 : t == ncclFloat16 ? 11 : 8;
  const int64_t m = (int64_t)(h & ((1ull << (bits - 1)) - 1)) * ((h >> 62) & 1 ? -1 : 1);
  const int e = (int)((h >> 52) % 7); /* the value's scale: 2^-6 .. 2^0 of 2^bits */
  double v = (double)m;
  for (int k = 0; k < bits - 1 + e; k++) v /= 2; /* |v| < 2^-e */
  return v;
}

/* ---- the operators ---------------------------------------------------------- */

enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMUL_HOST, OP_PREMUL_DEV, NOPS };
static const char *OPNAME[] = {"sum", "prod", "max", "min", "avg", "premul(host)", "premul(dev)"};

/* Rank r's PreMulSum scalar: (5 + r) / 8, exact in every type. */
static double scalar_of(int op, int r, int n) {
  if (op == OP_AVG) return 1.0 / n;
  return (5.0 + r) / 8.0;
}

/* The operator as rank (local index l) passes it; *dev holds a device
 * scalar to free. */
static ncclRedOp_t make_op(const ctx *c, int l, int op, ncclDataType_t t, void **dev) {
  *dev = NULL;
  switch (op) {
  case OP_SUM:
    return ncclSum;
  case OP_PROD:
    return ncclProd;
  case OP_MAX:
    return ncclMax;
  case OP_MIN:
    return ncclMin;
  case OP_AVG:
    return ncclAvg;
  default:
    break;
  }
  unsigned char s[8];
  st(t, s, 0, round_to(t, scalar_of(op, c->rank[l], c->n)));
  ncclRedOp_t o;
  if (op == OP_PREMUL_HOST) {
    NCCL(ncclRedOpCreatePreMulSum(&o, s, t, ncclScalarHostImmediate, c->comm[l]));
  } else {
    CUDA(cudaMalloc(dev, 8));
    CUDA(cudaMemcpy(*dev, s, 8, cudaMemcpyHostToDevice));
    NCCL(ncclRedOpCreatePreMulSum(&o, *dev, t, ncclScalarDevice, c->comm[l]));
  }
  return o;
}

/* Rank r's contribution element i as the reduction sees it (a PreMulSum's
 * scaled by its owner, rounded to t). */
static double contribution(ncclDataType_t t, int op, int seed, int r, int n, size_t i) {
  const double x = input(t, seed, r, i);
  if (op != OP_AVG && op != OP_PREMUL_HOST && op != OP_PREMUL_DEV) return x;
  const double s = round_to(t, scalar_of(op, r, n));
  return round_to(t, t == ncclFloat64 ? x * s : (double)((float)x * (float)s));
}

/* The reference: element i of the ranks' contributions at index base + i,
 * added in rank order, into out (as t). */
static void reference(ncclDataType_t t, int op, int seed, int n, size_t base, size_t count,
                      void *out) {
  const int kind = op == OP_PROD ? 1 : op == OP_MAX ? 2 : op == OP_MIN ? 3 : 0;
  for (size_t i = 0; i < count; i++) {
    double acc = contribution(t, op, seed, 0, n, base + i);
    for (int r = 1; r < n; r++) {
      acc = combine(t, kind, acc, contribution(t, op, seed, r, n, base + i));
      if (r < n - 1) acc = round_to(t, acc);
    }
    st(t, out, i, acc);
  }
}

/* ---- one call, every local rank -------------------------------------------- */

enum { F_ALLREDUCE, F_ALLREDUCE_INPLACE, F_REDUCESCATTER, F_REDUCE, NFUNCS };
static const char *FNAME[] = {"AllReduce", "AllReduce(in place)", "ReduceScatter", "Reduce"};

/* Runs func over count elements (per rank's output) on every local rank
 * and compares each output with the reference bit for bit; returns the
 * number of ranks that differ. */
static int check_call(const ctx *c, int func, const type *ty, int op, size_t count, int seed,
                      int alt_stream) {
  const ncclDataType_t t = ty->t;
  const size_t in_elems = func == F_REDUCESCATTER ? count * (size_t)c->n : count;
  const size_t out_elems = func == F_ALLREDUCE_INPLACE ? in_elems : count;
  void *in[MAXL], *out[MAXL], *dev[MAXL];
  ncclRedOp_t ops[MAXL];
  unsigned char *host = malloc(in_elems * ty->size), *want = malloc(out_elems * ty->size);
  const int root = c->n - 1;
  for (int l = 0; l < c->nlocal; l++) {
    int d;
    NCCL(ncclCommCuDevice(c->comm[l], &d));
    CUDA(cudaSetDevice(d));
    for (size_t i = 0; i < in_elems; i++) st(t, host, i, input(t, seed, c->rank[l], i));
    CUDA(cudaMalloc(&in[l], in_elems * ty->size));
    CUDA(cudaMemcpy(in[l], host, in_elems * ty->size, cudaMemcpyHostToDevice));
    out[l] = in[l];
    if (func != F_ALLREDUCE_INPLACE) {
      CUDA(cudaMalloc(&out[l], out_elems * ty->size));
      CUDA(cudaMemset(out[l], 0xff, out_elems * ty->size));
    }
    ops[l] = make_op(c, l, op, t, &dev[l]);
    /* The copies and the memset above run on the legacy stream (a pageable
     * copy may still be under way when cudaMemcpy returns), the calls on
     * streams that do not wait for it. */
    CUDA(cudaDeviceSynchronize());
  }
  NCCL(ncclGroupStart());
  for (int l = 0; l < c->nlocal; l++) {
    cudaStream_t s = alt_stream ? c->s2[l] : c->s[l];
    switch (func) {
    case F_ALLREDUCE:
    case F_ALLREDUCE_INPLACE:
      NCCL(ncclAllReduce(in[l], out[l], count, t, ops[l], c->comm[l], s));
      break;
    case F_REDUCESCATTER:
      NCCL(ncclReduceScatter(in[l], out[l], count, t, ops[l], c->comm[l], s));
      break;
    default:
      NCCL(ncclReduce(in[l], out[l], count, t, ops[l], root, c->comm[l], s));
    }
  }
  NCCL(ncclGroupEnd());
  int bad = 0;
  unsigned char *got = malloc(out_elems * ty->size);
  for (int l = 0; l < c->nlocal; l++) {
    const int r = c->rank[l];
    CUDA(cudaStreamSynchronize(alt_stream ? c->s2[l] : c->s[l]));
    if (func == F_REDUCE && r != root) continue;
    reference(t, op, seed, c->n, func == F_REDUCESCATTER ? (size_t)r * count : 0, out_elems, want);
    CUDA(cudaMemcpy(got, out[l], out_elems * ty->size, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < out_elems; i++)
      if (memcmp(got + i * ty->size, want + i * ty->size, ty->size) != 0) {
        fprintf(stderr, "FAIL rank %d: %s(%zu %s, %s): element %zu is %.17g, in rank order %.17g\n",
                r, FNAME[func], count, ty->name, OPNAME[op], i, ld(t, got, i), ld(t, want, i));
        bad++;
        break;
      }
  }
  for (int l = 0; l < c->nlocal; l++) {
    if (op >= OP_PREMUL_HOST) NCCL(ncclRedOpDestroy(ops[l], c->comm[l]));
    CUDA(cudaFree(in[l]));
    if (out[l] != in[l]) CUDA(cudaFree(out[l]));
    if (dev[l]) CUDA(cudaFree(dev[l]));
  }
  free(host);
  free(want);
  free(got);
  return bad;
}

/* Two AllReduces of different sizes in one group (their scratch apart),
 * and K in-place AllReduces captured in a graph, replayed R times with
 * fresh inputs. */
static int check_group_and_graph(const ctx *c) {
  enum { K = 3, R = 3 };
  const size_t na = 4099, nb = 70001;
  int bad = 0;
  float *a[MAXL], *b[MAXL], *ha = malloc(nb * 4), *want = malloc(nb * 4);
  for (int l = 0; l < c->nlocal; l++) {
    int d;
    NCCL(ncclCommCuDevice(c->comm[l], &d));
    CUDA(cudaSetDevice(d));
    CUDA(cudaMalloc((void **)&a[l], na * 4));
    CUDA(cudaMalloc((void **)&b[l], nb * 4));
    for (size_t i = 0; i < na; i++) ha[i] = (float)input(ncclFloat32, 11, c->rank[l], i);
    CUDA(cudaMemcpy(a[l], ha, na * 4, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < nb; i++) ha[i] = (float)input(ncclFloat32, 12, c->rank[l], i);
    CUDA(cudaMemcpy(b[l], ha, nb * 4, cudaMemcpyHostToDevice));
    CUDA(cudaDeviceSynchronize()); /* before calls on streams that do not wait for the copies */
  }
  NCCL(ncclGroupStart());
  for (int l = 0; l < c->nlocal; l++) {
    NCCL(ncclAllReduce(a[l], a[l], na, ncclFloat32, ncclSum, c->comm[l], c->s[l]));
    NCCL(ncclAllReduce(b[l], b[l], nb, ncclFloat32, ncclSum, c->comm[l], c->s[l]));
  }
  NCCL(ncclGroupEnd());
  for (int l = 0; l < c->nlocal; l++) {
    CUDA(cudaStreamSynchronize(c->s[l]));
    reference(ncclFloat32, OP_SUM, 11, c->n, 0, na, want);
    CUDA(cudaMemcpy(ha, a[l], na * 4, cudaMemcpyDeviceToHost));
    if (memcmp(ha, want, na * 4) != 0) {
      fprintf(stderr, "FAIL rank %d: the first of two grouped AllReduces\n", c->rank[l]);
      bad++;
    }
    reference(ncclFloat32, OP_SUM, 12, c->n, 0, nb, want);
    CUDA(cudaMemcpy(ha, b[l], nb * 4, cudaMemcpyDeviceToHost));
    if (memcmp(ha, want, nb * 4) != 0) {
      fprintf(stderr, "FAIL rank %d: the second of two grouped AllReduces\n", c->rank[l]);
      bad++;
    }
  }
  /* The graph: each replay adds K times in place; input seed 20 + rep. */
  cudaGraphExec_t exec[MAXL];
  for (int l = 0; l < c->nlocal; l++) {
    int d;
    NCCL(ncclCommCuDevice(c->comm[l], &d));
    CUDA(cudaSetDevice(d));
    CUDA(cudaStreamBeginCapture(c->s[l], cudaStreamCaptureModeGlobal));
  }
  for (int k = 0; k < K; k++) {
    NCCL(ncclGroupStart());
    for (int l = 0; l < c->nlocal; l++)
      NCCL(ncclAllReduce(b[l], b[l], nb, ncclFloat32, ncclSum, c->comm[l], c->s[l]));
    NCCL(ncclGroupEnd());
  }
  cudaGraph_t graph[MAXL];
  for (int l = 0; l < c->nlocal; l++) CUDA(cudaStreamEndCapture(c->s[l], &graph[l]));
  for (int l = 0; l < c->nlocal; l++) { /* once no stream of this thread captures */
    int d;
    NCCL(ncclCommCuDevice(c->comm[l], &d));
    CUDA(cudaSetDevice(d));
    CUDA(cudaGraphInstantiate(&exec[l], graph[l], 0));
    CUDA(cudaGraphDestroy(graph[l]));
  }
  for (int rep = 0; rep < R; rep++) {
    for (int l = 0; l < c->nlocal; l++) {
      int d;
      NCCL(ncclCommCuDevice(c->comm[l], &d));
      CUDA(cudaSetDevice(d));
      for (size_t i = 0; i < nb; i++) ha[i] = (float)input(ncclFloat32, 20 + rep, c->rank[l], i);
      CUDA(cudaMemcpy(b[l], ha, nb * 4, cudaMemcpyHostToDevice));
      CUDA(cudaDeviceSynchronize());
      CUDA(cudaGraphLaunch(exec[l], c->s[l]));
    }
    /* K rounds: the first adds the inputs in rank order, each later one
     * adds n equal values (every rank holds the same sum) in rank order. */
    reference(ncclFloat32, OP_SUM, 20 + rep, c->n, 0, nb, want);
    for (int k = 1; k < K; k++)
      for (size_t i = 0; i < nb; i++) {
        float acc = want[i];
        for (int r = 1; r < c->n; r++) acc = acc + want[i];
        want[i] = acc;
      }
    for (int l = 0; l < c->nlocal; l++) {
      CUDA(cudaStreamSynchronize(c->s[l]));
      CUDA(cudaMemcpy(ha, b[l], nb * 4, cudaMemcpyDeviceToHost));
      if (memcmp(ha, want, nb * 4) != 0) {
        fprintf(stderr, "FAIL rank %d: replay %d of a graph of %d AllReduces\n", c->rank[l], rep,
                K);
        bad++;
      }
    }
  }
  for (int l = 0; l < c->nlocal; l++) {
    CUDA(cudaGraphExecDestroy(exec[l]));
    CUDA(cudaFree(a[l]));
    CUDA(cudaFree(b[l]));
  }
  free(ha);
  free(want);
  return bad;
}

int main(int argc, char **argv) {
  ctx c;
  memset(&c, 0, sizeof c);
  if (argc == 3 && strcmp(argv[1], "-g") == 0) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
      printf("no GPU visible: skipped\n");
      return 77;
    }
    c.n = c.nlocal = atoi(argv[2]);
    if (c.n < 1 || c.n > MAXL || c.n > ndev) {
      fprintf(stderr, "-g %s: between 1 and %d GPUs\n", argv[2], ndev < MAXL ? ndev : MAXL);
      return 2;
    }
    NCCL(ncclCommInitAll(c.comm, c.n, NULL));
    for (int l = 0; l < c.n; l++) {
      c.rank[l] = l;
      CUDA(cudaSetDevice(l));
      CUDA(cudaStreamCreateWithFlags(&c.s[l], cudaStreamNonBlocking));
      CUDA(cudaStreamCreateWithFlags(&c.s2[l], cudaStreamNonBlocking));
    }
  } else {
    c.nlocal = 1;
    int rc = join_launched(&c.rank[0], &c.n, &c.comm[0], &c.s[0]);
    if (rc) return rc;
    CUDA(cudaStreamCreateWithFlags(&c.s2[0], cudaStreamNonBlocking));
  }
  const size_t counts[] = {1, 1031, 262147};
  int calls = 0, bad = 0, seed = 1;
  for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++)
    for (int op = 0; op < NOPS; op++)
      for (int f = 0; f < NFUNCS; f++)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++, seed++) {
          bad += check_call(&c, f, &TYPES[ti], op, counts[k], seed, seed % 5 == 0);
          calls++;
        }
  bad += check_group_and_graph(&c);
  for (int l = 0; l < c.nlocal; l++) NCCL(ncclCommDestroy(c.comm[l]));
  if (c.rank[0] == 0)
    printf("%s: %d calls (%d ranks, %d in this process), grouped and captured calls: %s\n",
           bad ? "FAIL" : "ok", calls, c.n, c.nlocal,
           bad ? "results differ" : "bits as added in rank order");
  return bad ? 1 : 0;
}
