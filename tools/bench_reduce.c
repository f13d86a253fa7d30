/*
 * bench_reduce.c - single-threaded throughput of the host reduction kernels
 * (GB/s of output), for each kernel table. Built as build/tools/bench_reduce:
 *
 *   build/tools/bench_reduce [KiB of output, default 4096] [label filter]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host/reduce.h"
#include "host/reduce_impl.h"
#include "nccl.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct bench {
  const char *label;
  int dtype, kind, nsrc;
  int inplace; /* dst is src[0] */
} bench;

/* Best of several timed rounds, each long enough to dwarf timer overhead. */
static double run(const chorus_red_kernels *k, const bench *b, size_t out_bytes, size_t esz) {
  size_t count = out_bytes / esz;
  void *src[CHORUS_REDUCE_MAX_SRCS];
  for (int i = 0; i < b->nsrc; i++) {
    src[i] = aligned_alloc(64, out_bytes);
    memset(src[i], 0x3c - i, out_bytes); /* small finite values in every type */
  }
  void *dst = b->inplace ? src[0] : aligned_alloc(64, out_bytes);
  if (!b->inplace) memset(dst, 0, out_bytes);
  chorus_red op = {.kind = (chorus_red_kind)b->kind, .dtype = b->dtype, .divisor = 1};
  double best = 1e30;
  for (int round = 0; round < 7; round++) {
    int reps = 20;
    double t0 = now();
    for (int r = 0; r < reps; r++)
      chorus_reduce_with(k, &op, dst, (const void *const *)src, b->nsrc, count, 0, 1);
    double dt = (now() - t0) / reps;
    if (dt < best) best = dt;
  }
  for (int i = 0; i < b->nsrc; i++) free(src[i]);
  if (!b->inplace) free(dst);
  return (double)out_bytes / best / 1e9;
}

/* A straightforward single loop over elements, as a yardstick for float
 * SUM: what the machine gives without blocking. */
static void naive_sum(float *restrict d, float *const *s, int nsrc, size_t n) {
  const float *restrict a = s[0], *restrict b = s[1], *restrict c = s[2 % nsrc],
                        *restrict e = s[3 % nsrc];
  if (nsrc == 2) {
    for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
  } else if (nsrc == 4) {
    for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i] + c[i] + e[i];
  } else {
    const float *restrict f = s[4], *restrict g = s[5], *restrict h = s[6], *restrict k = s[7];
    for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i] + c[i] + e[i] + f[i] + g[i] + h[i] + k[i];
  }
}

static double run_naive(int nsrc, size_t out_bytes) {
  size_t count = out_bytes / sizeof(float);
  float *src[8], *dst = aligned_alloc(64, out_bytes);
  for (int i = 0; i < nsrc; i++) {
    src[i] = aligned_alloc(64, out_bytes);
    memset(src[i], 0x3c - i, out_bytes);
  }
  memset(dst, 0, out_bytes);
  double best = 1e30;
  for (int round = 0; round < 7; round++) {
    double t0 = now();
    for (int r = 0; r < 20; r++) naive_sum(dst, src, nsrc, count);
    double dt = (now() - t0) / 20;
    if (dt < best) best = dt;
  }
  for (int i = 0; i < nsrc; i++) free(src[i]);
  free(dst);
  return (double)out_bytes / best / 1e9;
}

int main(int argc, char **argv) {
  size_t bytes = (argc > 1 ? (size_t)atoi(argv[1]) : 4096) << 10;
  const char *filter = argc > 2 ? argv[2] : "";
  static const bench benches[] = {
      {"float sum nsrc=2", ncclFloat32, CHORUS_RED_SUM, 2, 0},
      {"float sum nsrc=2 in place", ncclFloat32, CHORUS_RED_SUM, 2, 1},
      {"float sum nsrc=4", ncclFloat32, CHORUS_RED_SUM, 4, 0},
      {"float sum nsrc=8", ncclFloat32, CHORUS_RED_SUM, 8, 0},
      {"float max nsrc=2", ncclFloat32, CHORUS_RED_MAX, 2, 0},
      {"double sum nsrc=2", ncclFloat64, CHORUS_RED_SUM, 2, 0},
      {"int32 sum nsrc=2", ncclInt32, CHORUS_RED_SUM, 2, 0},
      {"int8 max nsrc=2", ncclInt8, CHORUS_RED_MAX, 2, 0},
      {"half sum nsrc=2", ncclFloat16, CHORUS_RED_SUM, 2, 0},
      {"half sum nsrc=4", ncclFloat16, CHORUS_RED_SUM, 4, 0},
      {"bf16 sum nsrc=2", ncclBfloat16, CHORUS_RED_SUM, 2, 0},
      {"bf16 sum nsrc=4", ncclBfloat16, CHORUS_RED_SUM, 4, 0},
      {"e4m3 sum nsrc=2", ncclFloat8e4m3, CHORUS_RED_SUM, 2, 0},
      {"e5m2 sum nsrc=2", ncclFloat8e5m2, CHORUS_RED_SUM, 2, 0},
  };
  static const size_t esz[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  const chorus_red_kernels *tables[2] = {&chorus_red_kernels_generic, chorus_red_kernels_best()};
  int ntables = tables[1] == tables[0] ? 1 : 2;
  printf("%-28s", "GB/s of output");
  for (int t = 0; t < ntables; t++) printf("%10s", tables[t]->name);
  printf("\n");
  for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++) {
    if (!strstr(benches[i].label, filter)) continue;
    printf("%-28s", benches[i].label);
    for (int t = 0; t < ntables; t++)
      printf("%10.2f", run(tables[t], &benches[i], bytes, esz[benches[i].dtype]));
    printf("\n");
  }
  for (int n = 2; n <= 8 && strstr("naive float sum", filter); n *= 2)
    printf("naive float sum nsrc=%d      %10.2f\n", n, run_naive(n, bytes));
  return 0;
}
