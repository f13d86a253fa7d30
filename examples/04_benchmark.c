/*
 * 04_benchmark.c - how fast is communication, and what model explains it?
 *
 *   chorusrun -n 4 build/examples/04_benchmark [--max-bytes N] [--quick] [--json FILE]
 *
 * Measures, over message sizes growing 4x from 8 bytes:
 *   - ping-pong between ranks 0 and 1 (Send, then Recv of the echo): the
 *     one-way time is half the round trip;
 *   - AllReduce, AllGather and Broadcast on all ranks, reported as bus
 *     bandwidth, the figure that can be compared to the link's speed
 *     whatever the rank count (see busbw_factor below).
 * Then it fits the alpha-beta model to each series:
 *     T(n) = alpha + n / beta
 * alpha is the fixed cost of a message (latency: launching, synchronising,
 * the first byte's trip), beta the bandwidth that large messages approach.
 * How well the straight line fits shows where the model holds (often not
 * at mid sizes, where protocols change). Finally the best bandwidths are
 * compared with the link's nominal speed, looked up at run time: NVLink or
 * PCIe generation and width for a GPU, the measured memcpy speed for host
 * memory (host communicators copy through shared memory).
 *
 * Each result is checked once after its timing loop (exit 1 if wrong);
 * timings themselves never fail the program. --json writes the rows as
 * JSON lines in the perf tools' layout, for 06_visualization.
 */
#include "common.h"

#include <math.h>

#define WARMUP 3

typedef struct bench {
  const ex_world *w;
  ncclComm_t comm;
  size_t max_bytes;
  int quick;
  FILE *json;
  int wrong;
} bench;

/* Calls per size: many for small messages (their time is tiny and noisy),
 * fewer for large ones, so each size takes a similar time. */
static int iterations(const bench *b, size_t bytes) {
  int it = bytes <= (64 << 10) ? 50 : (int)(50.0 * (64 << 10) / (double)bytes);
  if (b->quick) it /= 5;
  return it < 3 ? 3 : it;
}

/* All ranks start a timed loop together: a one-element AllReduce. */
static void barrier(const bench *b, float *scratch) {
  NCCL_CHECK(ncclAllReduce(scratch, scratch, 1, ncclFloat, ncclSum, b->comm, b->w->stream));
  ex_wait(b->w);
}

/* ---- the alpha-beta fit ------------------------------------------------------ */

typedef struct series {
  const char *name;
  int count;
  double bytes[32], time_us[32];
  double factor; /* bus bandwidth = algorithm bandwidth x factor */
} series;

/* Least squares of T = alpha + n / beta, each point weighted by 1/T^2: the
 * sizes span six decades, and an unweighted fit would let the largest
 * ones decide everything; this one minimises relative errors instead. */
static void fit(const series *s, double *alpha_us, double *beta_gbs, double *worst) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < s->count; i++) {
    double wt = 1 / (s->time_us[i] * s->time_us[i]), x = s->bytes[i], y = s->time_us[i];
    sw += wt, sx += wt * x, sy += wt * y, sxx += wt * x * x, sxy += wt * x * y;
  }
  double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx); /* us per byte */
  *alpha_us = (sy - slope * sx) / sw;
  /* Noisy times (a busy machine) can tilt the line below zero at n = 0; a
   * cost cannot be negative, so then fit the line through the origin. */
  if (*alpha_us < 0) *alpha_us = 0, slope = sxy / sxx;
  if (slope < 0) slope = 0;                        /* no growth with size measurable */
  *beta_gbs = slope > 0 ? 1e-3 / slope : INFINITY; /* bytes/us = MB/s; /1000: GB/s */
  *worst = 0;
  for (int i = 0; i < s->count; i++) {
    double model = *alpha_us + slope * s->bytes[i];
    double err = fabs(model - s->time_us[i]) / s->time_us[i];
    if (err > *worst) *worst = err;
  }
}

/* The measurements beside the fitted line, then alpha and beta. */
static void print_series(const bench *b, const series *s, const char *json_name) {
  double alpha, beta, worst;
  fit(s, &alpha, &beta, &worst);
  printf("  %10s %10s %10s %12s %12s\n", "bytes", "time(us)", "fit(us)", "algbw(GB/s)",
         "busbw(GB/s)");
  for (int i = 0; i < s->count; i++) {
    double algbw = s->bytes[i] / s->time_us[i] * 1e-3;
    printf("  %10.0f %10.2f %10.2f %12.3f %12.3f\n", s->bytes[i], s->time_us[i],
           alpha + (isinf(beta) ? 0 : s->bytes[i] / (beta * 1e3)), algbw, algbw * s->factor);
    if (b->json)
      fprintf(b->json,
              "{\"collective\":\"%s\",\"size\":%.0f,\"nranks\":%d,\"out_of_place\":{"
              "\"time_us\":%.6g,\"algbw_gbs\":%.6g,\"busbw_gbs\":%.6g,\"wrong\":0}}\n",
              json_name, s->bytes[i], b->w->nranks, s->time_us[i], algbw, algbw * s->factor);
  }
  printf("  alpha-beta fit T(n) = alpha + n/beta: alpha = %.2f us, beta = %.2f GB/s", alpha, beta);
  if (s->factor != 1) printf(" (bus: %.2f GB/s)", beta * s->factor);
  printf("\n  the fit is within %.0f%% of every measurement%s\n\n", 100 * worst,
         worst < 0.25 ? ": the model holds"
                      : ": a rough model here (latency and protocol change with the size)");
}

static double best_busbw(const series *s) {
  double best = 0;
  for (int i = 0; i < s->count; i++) {
    double bw = s->bytes[i] / s->time_us[i] * 1e-3 * s->factor;
    if (bw > best) best = bw;
  }
  return best;
}

/* ---- ping-pong ------------------------------------------------------------------ */

static void ping_pong(bench *b, series *s) {
  const ex_world *w = b->w;
  const int me = w->rank;
  char *buf = ex_alloc(w, b->max_bytes), *host = malloc(b->max_bytes);
  float *scratch = ex_alloc(w, sizeof(float));
  if (!host) exit(1);
  *s = (series){"ping-pong", 0, {0}, {0}, 1};
  for (size_t bytes = 8; bytes <= b->max_bytes; bytes *= 4) {
    /* Rank 0 sends bytes with value 1 + (size index); rank 1 adds nothing
     * and echoes them; rank 0 checks what came back. */
    memset(host, (int)(s->count + 1), bytes);
    ex_put(w, buf, host, bytes);
    int iters = iterations(b, bytes);
    barrier(b, scratch);
    double t0 = 0;
    for (int i = -WARMUP; i < iters; i++) {
      if (i == 0) t0 = ex_now();
      if (me == 0) {
        NCCL_CHECK(ncclSend(buf, bytes, ncclChar, 1, b->comm, w->stream));
        NCCL_CHECK(ncclRecv(buf, bytes, ncclChar, 1, b->comm, w->stream));
      } else if (me == 1) {
        NCCL_CHECK(ncclRecv(buf, bytes, ncclChar, 0, b->comm, w->stream));
        NCCL_CHECK(ncclSend(buf, bytes, ncclChar, 0, b->comm, w->stream));
      }
    }
    ex_wait(w);
    double us = (ex_now() - t0) * 1e6 / iters / 2;
    if (me <= 1) {
      ex_get(w, host, buf, bytes);
      for (size_t k = 0; k < bytes; k++)
        if (host[k] != (char)(s->count + 1)) {
          fprintf(stderr, "[Rank %d] ping-pong WRONG at %zu bytes\n", me, bytes);
          b->wrong++;
          break;
        }
    }
    if (s->count < 32) s->bytes[s->count] = (double)bytes, s->time_us[s->count++] = us;
  }
  if (me == 0) {
    printf("Ping-pong, rank 0 <-> rank 1 (one-way time = round trip / 2)\n");
    print_series(b, s, "ping_pong");
  }
  ex_free(w, buf);
  ex_free(w, scratch);
  free(host);
}

/* ---- collectives ------------------------------------------------------------------ */

typedef enum { ALLREDUCE, ALLGATHER, BROADCAST } coll;

/* Bus bandwidth: the bytes each rank's busiest link carries, per second.
 * A ring AllReduce sends 2(n-1)/n of the data over each link, AllGather
 * (n-1)/n, Broadcast all of it once; scaling the algorithm bandwidth
 * (size / time) by that factor gives a number comparable to the link's
 * speed for any rank count. */
static double busbw_factor(coll c, int n) {
  if (c == ALLREDUCE) return 2.0 * (n - 1) / n;
  if (c == ALLGATHER) return (double)(n - 1) / n;
  return 1;
}

/* Runs collective c on `bytes` bytes (the total result size), as floats. */
static void call(const bench *b, coll c, const float *send, float *recv, size_t bytes) {
  const ex_world *w = b->w;
  size_t count = bytes / sizeof(float);
  if (c == ALLREDUCE)
    NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, b->comm, w->stream));
  else if (c == ALLGATHER)
    NCCL_CHECK(ncclAllGather(send, recv, count / w->nranks, ncclFloat, b->comm, w->stream));
  else
    NCCL_CHECK(ncclBroadcast(send, recv, count, ncclFloat, 0, b->comm, w->stream));
}

/* Element i of the result: rank r sends r + 1 everywhere, so an AllReduce
 * gives n(n+1)/2, an AllGather r + 1 in rank r's block, a Broadcast 1. */
static float expected(coll c, int n, size_t i, size_t count) {
  if (c == ALLREDUCE) return (float)n * (float)(n + 1) / 2;
  if (c == ALLGATHER) return (float)(i / (count / (size_t)n) + 1);
  return 1;
}

static void collective(bench *b, coll c, series *s) {
  static const char *const names[] = {"AllReduce", "AllGather", "Broadcast"};
  static const char *const json_names[] = {"all_reduce", "all_gather", "broadcast"};
  const ex_world *w = b->w;
  const int n = w->nranks;
  *s = (series){names[c], 0, {0}, {0}, busbw_factor(c, n)};
  float *send = ex_alloc(w, b->max_bytes), *recv = ex_alloc(w, b->max_bytes);
  float *scratch = ex_alloc(w, sizeof(float)), *host = malloc(b->max_bytes);
  if (!host) exit(1);
  for (size_t i = 0; i < b->max_bytes / sizeof(float); i++) host[i] = (float)(w->rank + 1);
  ex_put(w, send, host, b->max_bytes);
  /* Smallest size: one float per rank, so AllGather has whole blocks. */
  for (size_t bytes = sizeof(float) * (size_t)n; bytes <= b->max_bytes; bytes *= 4) {
    int iters = iterations(b, bytes);
    barrier(b, scratch);
    double t0 = 0;
    for (int i = -WARMUP; i < iters; i++) {
      if (i == 0) t0 = ex_now();
      call(b, c, send, recv, bytes);
    }
    ex_wait(w);
    double us = (ex_now() - t0) * 1e6 / iters;
    size_t count = bytes / sizeof(float);
    ex_get(w, host, recv, bytes);
    for (size_t i = 0; i < count; i++)
      if (host[i] != expected(c, n, i, count)) {
        fprintf(stderr, "[Rank %d] %s WRONG at %zu bytes, element %zu: %g\n", w->rank, names[c],
                bytes, i, (double)host[i]);
        b->wrong++;
        break;
      }
    if (s->count < 32) s->bytes[s->count] = (double)bytes, s->time_us[s->count++] = us;
  }
  if (w->rank == 0) {
    printf("%s on %d ranks (bus bandwidth = algbw x %.2f)\n", names[c], n, s->factor);
    print_series(b, s, json_names[c]);
  }
  ex_free(w, send);
  ex_free(w, recv);
  ex_free(w, scratch);
  free(host);
}

/* ---- the link's nominal speed ------------------------------------------------------ */

/* Host memory: what one memcpy of the same size moves per second (best of
 * 5). Host communicators copy through shared memory, so this bounds them. */
static double memcpy_gbs(size_t bytes) {
  char *a = malloc(bytes), *c = malloc(bytes);
  if (!a || !c) exit(1);
  memset(a, 1, bytes);
  memset(c, 2, bytes);
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = ex_now();
    memcpy(c, a, bytes);
    double gbs = (double)bytes / (ex_now() - t0) * 1e-9;
    if (gbs > best) best = gbs;
    a[rep] = c[bytes - 1 - (size_t)rep]; /* keep the copies from being optimised away */
  }
  free(a);
  free(c);
  return best;
}

#ifdef EX_CUDA
/* NVLink: the sum of the link speeds nvidia-smi lists for the GPU (one
 * direction); 0 when there is no NVLink or no nvidia-smi. */
static double nvlink_gbs(int dev) {
  char cmd[96], line[256];
  snprintf(cmd, sizeof cmd, "nvidia-smi nvlink -s -i %d 2>/dev/null", dev);
  FILE *p = popen(cmd, "r");
  if (!p) return 0;
  double total = 0;
  for (int lines = 0; lines < 256 && fgets(line, sizeof line, p); lines++) {
    const char *colon = strchr(line, ':');
    double gbs = 0;
    if (strstr(line, "Link") && colon && strstr(line, "GB/s") &&
        sscanf(colon + 1, "%lf", &gbs) == 1)
      total += gbs;
  }
  pclose(p);
  return total;
}

/* PCIe: transfer rate x lanes x encoding efficiency / 8 bits, from sysfs. */
static double pcie_gbs(int dev, int *gen, int *width) {
  char bus[32], path[160];
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
  for (char *c = bus; *c; c++)
    if (*c >= 'A' && *c <= 'F') *c = (char)(*c - 'A' + 'a');
  double gts = 0;
  *width = 0;
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/current_link_speed", bus);
  FILE *f = fopen(path, "r");
  if (f) {
    if (fscanf(f, "%lf", &gts) != 1) gts = 0;
    fclose(f);
  }
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/current_link_width", bus);
  f = fopen(path, "r");
  if (f) {
    if (fscanf(f, "%d", width) != 1) *width = 0;
    fclose(f);
  }
  /* 2.5 GT/s is generation 1; each generation doubles it. */
  *gen = gts > 0 ? 1 + (int)lround(log2(gts / 2.5)) : 0;
  double encoding = *gen >= 3 ? 128.0 / 130 : 0.8;
  return gts * *width * encoding / 8;
}
#endif

/* The speed the measurements should approach, and what it is. */
static double nominal(const bench *b, char *what, size_t cap) {
#ifdef EX_CUDA
  if (b->w->gpu) {
    double nv = nvlink_gbs(b->w->device);
    if (nv > 0) {
      snprintf(what, cap, "NVLink of GPU %d, %.0f GB/s per direction (nvidia-smi)", b->w->device,
               nv);
      return nv;
    }
    int gen = 0, width = 0;
    double pcie = pcie_gbs(b->w->device, &gen, &width);
    snprintf(what, cap, "PCIe gen %d x%d of GPU %d, %.1f GB/s per direction (sysfs)", gen, width,
             b->w->device, pcie);
    return pcie;
  }
#endif
  double gbs = memcpy_gbs(b->max_bytes);
  snprintf(what, cap, "host memory copy of %zu bytes, %.1f GB/s (memcpy, measured now)",
           b->max_bytes, gbs);
  return gbs;
}

/* "4M" -> 4194304; 0 when not a size. */
static size_t parse_size(const char *s) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || v <= 0) return 0;
  if (*end == 'K' || *end == 'k') v *= 1 << 10, end++;
  if (*end == 'M' || *end == 'm') v *= 1 << 20, end++;
  if (*end == 'G' || *end == 'g') v *= 1 << 30, end++;
  return *end ? 0 : (size_t)v;
}

int main(int argc, char **argv) {
  ex_world w;
  int rc = ex_start(&argc, argv, &w);
  if (rc != 0) return rc;
  bench b = {&w, NULL, w.gpu ? (size_t)512 << 20 : (size_t)8 << 20, 0, NULL, 0};
  const char *json_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      b.quick = 1, b.max_bytes = 512 << 10;
    } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
      b.max_bytes = parse_size(argv[++i]);
    } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--host|--gpu] [--quick] [--max-bytes N[K|M|G]] [--json FILE]\n",
              argv[0]);
      return 2;
    }
  }
  if (b.max_bytes < 64 * sizeof(float) * (size_t)w.nranks) {
    fprintf(stderr, "--max-bytes: at least %zu\n", 64 * sizeof(float) * (size_t)w.nranks);
    return 2;
  }
  if (w.rank == 0 && json_path && !(b.json = fopen(json_path, "w"))) {
    fprintf(stderr, "cannot write %s: %s\n", json_path, strerror(errno));
    return 2;
  }
  ex_comm_init(&w, &b.comm);
  if (w.rank == 0)
    printf("04_benchmark: %d ranks on %s; sizes 8 B to %zu B; each time is the mean of many "
           "calls after %d warm-up calls\n\n",
           w.nranks, ex_where(&w), b.max_bytes, WARMUP);

  series s[4];
  int ns = 0;
  if (w.nranks >= 2) ping_pong(&b, &s[ns++]);
  collective(&b, ALLREDUCE, &s[ns++]);
  collective(&b, ALLGATHER, &s[ns++]);
  collective(&b, BROADCAST, &s[ns++]);

  if (w.rank == 0) {
    char what[200];
    double link = nominal(&b, what, sizeof what);
    printf("Nominal link: %s\n", what);
    for (int i = 0; i < ns; i++) {
      double best = best_busbw(&s[i]);
      printf("  %-10s best %s %7.2f GB/s = %3.0f%% of it\n", s[i].name,
             s[i].factor == 1 && i == 0 && w.nranks >= 2 ? "one-way" : "bus    ", best,
             100 * best / link);
    }
  }

  int *d_wrong = ex_alloc(&w, sizeof(int)), total = 0;
  ex_put(&w, d_wrong, &b.wrong, sizeof b.wrong);
  NCCL_CHECK(ncclAllReduce(d_wrong, d_wrong, 1, ncclInt, ncclSum, b.comm, w.stream));
  ex_get(&w, &total, d_wrong, sizeof total);
  if (w.rank == 0)
    printf("04_benchmark: %s\n", total ? "WRONG results (see above)" : "every result right");
  ex_free(&w, d_wrong);
  if (b.json) fclose(b.json);
  NCCL_CHECK(ncclCommDestroy(b.comm));
  ex_end(&w);
  return total ? 1 : 0;
}
