/*
 * mpi_bench.c - Open MPI reference numbers for the Chorus comparison.
 *
 * Times the MPI counterparts of the nine Chorus perf programs on float data
 * and prints, for each collective, an nccl-tests-like table plus (with -J) one
 * JSON object per row in the schema of tools/perf/report.c, so that
 * bench/compare.py reads Chorus and MPI results with one parser:
 *
 *   collective      MPI call                          size (B)      busbw factor
 *   all_reduce      MPI_Allreduce, sum                count*4       2(n-1)/n
 *   all_gather      MPI_Allgather                     total output  (n-1)/n
 *   broadcast       MPI_Bcast, root 0                 count*4       1
 *   reduce_scatter  MPI_Reduce_scatter_block, sum     total input   (n-1)/n
 *   alltoall        MPI_Alltoall                      send buffer   (n-1)/n
 *   reduce          MPI_Reduce, sum, root 0           count*4       1
 *   gather          MPI_Gather, root 0                total output  1
 *   scatter         MPI_Scatter, root 0               root's input  1
 *   sendrecv        MPI_Sendrecv to rank+1 from rank-1 count*4      1
 *
 * Element counts are derived from the requested size exactly as the Chorus
 * perf programs derive them (per-rank count = bytes/4/n, rounded down), so the
 * rows of both line up by their "size" field (e.g. an 8 B all_gather on 4
 * ranks is a 0 B row in both).
 *
 * Method per size (the one used for the CPU anchors, /work/shared/anchors):
 *   1. check: every rank fills its input with a rank- and index-dependent
 *      pattern of small integers (sums stay exact in float) and its output
 *      with a sentinel; one operation; every result element that the
 *      collective defines on that rank is compared with the expected value;
 *      the wrong counts are summed over ranks (#wrong);
 *   2. inputs and outputs are zeroed (repeating an operation then never
 *      changes the data), barrier;
 *   3. calibrate: 3 operations, then as many as fit ~20 ms (-C), the
 *      per-operation time is the maximum over ranks;
 *   4. iterations = max(-m, target / calibrated time) (target -D, 0.2 s),
 *      warm-up = max(2, iterations / 10);
 *   5. barrier, timed loop of back-to-back operations (no barrier between
 *      them, as nccl-tests), CLOCK_MONOTONIC around the loop; the reported
 *      time is the per-operation average of the slowest rank.
 * Operations are out of place (MPI_Bcast is in place by definition).
 * algbw = size / time, busbw = algbw * factor; GB/s = 1e9 B/s.
 *
 * Every size runs under an alarm (-T seconds, default 600): if one size takes
 * longer the process prints why and exits non-zero, and mpirun stops the rest.
 *
 * Usage: mpirun -np N mpi_bench [-c coll[,coll...]|all] [-b 8] [-e 256M]
 *          [-f 2] [-D 0.2] [-C 0.02] [-m 5] [-T 600] [-J file]
 * Build: mpicc.openmpi -std=c11 -O2 -Wall -Wextra -o mpi_bench mpi_bench.c
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

#define BENCH_VERSION "1"
#define SENTINEL      (-12345.0f) /* never a valid result: inputs are >= 0 */

/* ---- the collectives -------------------------------------------------- */

/* ---- the process ------------------------------------------------------ */

typedef struct bench {
  int rank, n;
  float *send, *recv; /* each holds the largest size, touched once */
  size_t cap;         /* elements per buffer */
  double target_s, calib_s;
  long min_iters;
  int timeout_s;
  FILE *json;
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
} bench;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One operation of collective id on the first elements of the buffers. */
static void run_op(const bench *b, int id, const bench_counts *c) {
  int p = (int)c->param; /* counts are below 2^31 for sizes up to 8 GiB */
  int next = (b->rank + 1) % b->n, prev = (b->rank + b->n - 1) % b->n;
  switch (id) {
  case ALLREDUCE:
    MPI_Allreduce(b->send, b->recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    break;
  case ALLGATHER:
    MPI_Allgather(b->send, p, MPI_FLOAT, b->recv, p, MPI_FLOAT, MPI_COMM_WORLD);
    break;
  case BROADCAST:
    MPI_Bcast(b->recv, p, MPI_FLOAT, 0, MPI_COMM_WORLD);
    break;
  case REDUCESCATTER:
    MPI_Reduce_scatter_block(b->send, b->recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    break;
  case ALLTOALL:
    MPI_Alltoall(b->send, p, MPI_FLOAT, b->recv, p, MPI_FLOAT, MPI_COMM_WORLD);
    break;
  case REDUCE:
    MPI_Reduce(b->send, b->recv, p, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    break;
  case GATHER:
    MPI_Gather(b->send, p, MPI_FLOAT, b->recv, p, MPI_FLOAT, 0, MPI_COMM_WORLD);
    break;
  case SCATTER:
    MPI_Scatter(b->send, p, MPI_FLOAT, b->recv, p, MPI_FLOAT, 0, MPI_COMM_WORLD);
    break;
  case SENDRECV:
    MPI_Sendrecv(b->send, p, MPI_FLOAT, next, 7, b->recv, p, MPI_FLOAT, prev, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    break;
  }
}

/* ---- checking --------------------------------------------------------- */

/* Expected value of result element j on this rank; 0 when the collective
 * leaves this rank's result undefined (non-root of reduce and gather). */
static int expected(const bench *b, int id, const bench_counts *c, size_t j, float *v) {
  size_t per = c->param;
  int me = b->rank, n = b->n;
  switch (id) {
  case ALLREDUCE:
    *v = bench_sum_over_ranks(n, j);
    return 1;
  case ALLGATHER:
    *v = bench_pattern((int)(j / per), j % per);
    return 1;
  case BROADCAST:
    *v = bench_pattern(0, j);
    return 1;
  case REDUCESCATTER:
    *v = bench_sum_over_ranks(n, (size_t)me * per + j);
    return 1;
  case ALLTOALL:
    *v = bench_pattern((int)(j / per), (size_t)me * per + j % per);
    return 1;
  case REDUCE:
    *v = bench_sum_over_ranks(n, j);
    return me == 0;
  case GATHER:
    *v = bench_pattern((int)(j / per), j % per);
    return me == 0;
  case SCATTER:
    *v = bench_pattern(0, (size_t)me * per + j);
    return 1;
  case SENDRECV:
    *v = bench_pattern((me + n - 1) % n, j);
    return 1;
  }
  return 0;
}

/* Runs one checked operation; returns the wrong elements summed over ranks. */
static long long check_op(const bench *b, int id, const bench_counts *c) {
  for (size_t i = 0; i < c->send; i++) b->send[i] = bench_pattern(b->rank, i);
  for (size_t i = 0; i < c->recv; i++) b->recv[i] = SENTINEL;
  if (id == BROADCAST && b->rank == 0) /* MPI_Bcast works in place */
    for (size_t i = 0; i < c->recv; i++) b->recv[i] = bench_pattern(0, i);
  run_op(b, id, c);
  long long wrong = 0, total = 0;
  for (size_t j = 0; j < c->recv; j++) {
    float want;
    if (expected(b, id, c, j, &want) && b->recv[j] != want) wrong++;
  }
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

/* ---- timing ----------------------------------------------------------- */

/* Seconds per operation of k back-to-back operations, slowest rank. */
static double timed_loop(const bench *b, int id, const bench_counts *c, long k) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_s();
  for (long i = 0; i < k; i++) run_op(b, id, c);
  double per = (now_s() - t0) / (double)k, slowest = 0;
  MPI_Allreduce(&per, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

/* Steps 2-5 of the method; returns the time per operation, sets *iters. */
static double measure(const bench *b, int id, const bench_counts *c, long *iters) {
  memset(b->send, 0, c->send * sizeof(float));
  memset(b->recv, 0, c->recv * sizeof(float));
  double t = timed_loop(b, id, c, 3);
  if (t < b->calib_s) {
    long k = (long)(b->calib_s / (t > 1e-9 ? t : 1e-9));
    if (k > 1000000) k = 1000000;
    if (k > 3) t = timed_loop(b, id, c, k);
  }
  long n = (long)(b->target_s / (t > 1e-9 ? t : 1e-9));
  if (n < b->min_iters) n = b->min_iters;
  if (n > 10000000) n = 10000000;
  long warm = n / 10 > 2 ? n / 10 : 2;
  for (long i = 0; i < warm; i++) run_op(b, id, c);
  *iters = n;
  return timed_loop(b, id, c, n);
}

/* ---- output ----------------------------------------------------------- */

static void print_header(const bench *b, const bench_coll *c, size_t minb, size_t maxb) {
  printf("# mpi_bench %s: %s (%s) on %d ranks, %s\n", BENCH_VERSION, c->name, c->opt, b->n,
         b->library);
  printf("# minBytes %zu maxBytes %zu, target %.3f s per size, calibration %.3f s, "
         "min iters %ld; time = slowest rank, out of place\n",
         minb, maxb, b->target_s, b->calib_s, b->min_iters);
  printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s  %8s\n", "size", "count", "type", "redop",
         "root", "time", "algbw", "busbw", "#wrong", "iters");
  printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s  %8s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", "");
  fflush(stdout);
}

static void print_row(const bench *b, const bench_coll *c, size_t bytes, const bench_counts *k,
                      double sec, long long wrong, long iters) {
  double algbw = sec > 0 ? (double)bytes / 1e9 / sec : 0;
  double busbw = algbw * bench_bus_factor(c, b->n);
  const char *redop = c->reduces ? "sum" : "none";
  int root = c->rooted ? 0 : -1;
  printf("%12zu  %12zu  %8s  %6s  %6d  %9.2f  %7.3f  %7.3f  %6lld  %8ld\n", bytes, k->param,
         "float", redop, root, sec * 1e6, algbw, busbw, wrong, iters);
  fflush(stdout);
  if (!b->json) return;
  fprintf(b->json,
          "{\"collective\":\"%s\",\"size\":%zu,\"count\":%zu,\"type\":\"float\",\"redop\":\"%s\","
          "\"root\":%d,\"nranks\":%d,\"out_of_place\":{\"time_us\":%.9g,\"algbw_gbs\":%.9g,"
          "\"busbw_gbs\":%.9g,\"wrong\":%lld},\"in_place\":null,\"nccl_library\":null,"
          "\"nccl_headers\":null,\"chorus_perf\":null,\"library\":\"%s\",\"bench\":\"mpi_bench "
          "%s\",\"iters\":%ld}\n",
          c->name, bytes, k->param, redop, root, b->n, sec * 1e6, algbw, busbw, wrong, b->library,
          BENCH_VERSION, iters);
  fflush(b->json);
}

/* ---- command line ----------------------------------------------------- */

/* Marks the collectives named in a comma-separated list ("all": every one);
 * returns -1 naming the first unknown one. */
static int parse_colls(const char *list, int *want) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int i = 0; i < NCOLLS; i++)
      if (!strcmp(tok, "all") || !strcmp(tok, bench_colls[i].opt) ||
          !strcmp(tok, bench_colls[i].name))
        want[i] = found = 1;
    if (!found) {
      fprintf(stderr, "mpi_bench: unknown collective '%s'\n", tok);
      return -1;
    }
  }
  return 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: mpirun -np N mpi_bench [-c coll[,coll..]|all] [-b minbytes] [-e maxbytes]\n"
          "         [-f factor] [-D target_s] [-C calib_s] [-m min_iters] [-T timeout_s]\n"
          "         [-J json_file]\n"
          "collectives: allreduce allgather broadcast reducescatter alltoall reduce gather\n"
          "             scatter sendrecv (or the Chorus program names, e.g. all_reduce_perf)\n");
}

typedef struct opts {
  int want[NCOLLS];
  size_t minb, maxb, factor;
  const char *json_path;
} opts;

/* Returns 0 to run, -1 on a bad command line. */
static int parse_args(int argc, char **argv, bench *b, opts *o) {
  memset(o, 0, sizeof *o);
  o->minb = 8;
  o->maxb = 256u << 20;
  o->factor = 2;
  b->target_s = 0.2;
  b->calib_s = 0.02;
  b->min_iters = 5;
  b->timeout_s = 600;
  int any = 0, opt;
  while ((opt = getopt(argc, argv, "c:b:e:f:D:C:m:T:J:h")) != -1) {
    switch (opt) {
    case 'c':
      if (parse_colls(optarg, o->want)) return -1;
      any = 1;
      break;
    case 'b':
      o->minb = bench_parse_size(optarg);
      break;
    case 'e':
      o->maxb = bench_parse_size(optarg);
      break;
    case 'f':
      o->factor = (size_t)atol(optarg);
      break;
    case 'D':
      b->target_s = atof(optarg);
      break;
    case 'C':
      b->calib_s = atof(optarg);
      break;
    case 'm':
      b->min_iters = atol(optarg);
      break;
    case 'T':
      b->timeout_s = atoi(optarg);
      break;
    case 'J':
      o->json_path = optarg;
      break;
    default:
      return -1;
    }
  }
  if (!any) parse_colls("all", o->want);
  if (o->minb == 0 || o->maxb < o->minb || o->factor < 2 || b->min_iters < 1 || b->target_s <= 0) {
    fprintf(stderr, "mpi_bench: bad size range, factor, target or iterations\n");
    return -1;
  }
  return 0;
}

/* ---- main ------------------------------------------------------------- */

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "mpi_bench: one size took longer than -T seconds; giving up\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(124);
}

/* Largest buffer (elements) any collective needs for sizes up to maxb. */
static size_t buffer_elems(size_t maxb) {
  return maxb / sizeof(float) + 1;
}

static void library_name(char *out, size_t cap) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  v[strcspn(v, ",\n")] = '\0'; /* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
  snprintf(out, cap, "%s", v);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  bench b;
  memset(&b, 0, sizeof b);
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.n);
  opts o;
  if (parse_args(argc, argv, &b, &o)) {
    if (b.rank == 0) usage();
    MPI_Finalize();
    return 2;
  }
  library_name(b.library, sizeof b.library);
  if (b.rank == 0 && o.json_path) {
    b.json = fopen(o.json_path, "w");
    if (!b.json) perror(o.json_path);
  }
  b.cap = buffer_elems(o.maxb);
  if (posix_memalign((void **)&b.send, 4096, b.cap * sizeof(float)) ||
      posix_memalign((void **)&b.recv, 4096, b.cap * sizeof(float))) {
    fprintf(stderr, "mpi_bench: rank %d: out of memory for %zu B buffers\n", b.rank,
            b.cap * sizeof(float));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(b.send, 0, b.cap * sizeof(float)); /* fault the pages in before any timing */
  memset(b.recv, 0, b.cap * sizeof(float));
  signal(SIGALRM, on_alarm);

  long long failures = 0;
  for (int id = 0; id < NCOLLS; id++) {
    if (!o.want[id]) continue;
    const bench_coll *c = &bench_colls[id];
    if (b.rank == 0) print_header(&b, c, o.minb, o.maxb);
    for (size_t s = o.minb; s <= o.maxb; s *= o.factor) {
      bench_counts k = bench_counts_of(c, s / sizeof(float), b.n);
      size_t bytes = (k.send > k.recv ? k.send : k.recv) * sizeof(float);
      alarm((unsigned)b.timeout_s);
      long long wrong = check_op(&b, id, &k);
      long iters = 0;
      double sec = measure(&b, id, &k, &iters);
      alarm(0);
      failures += wrong;
      if (b.rank == 0) print_row(&b, c, bytes, &k, sec, wrong, iters);
      if (s > o.maxb / o.factor) break; /* the next step would overflow */
    }
    if (b.rank == 0) printf("#\n");
  }
  if (b.rank == 0) {
    printf("# Out of bounds values : %lld %s\n", failures, failures ? "FAILED" : "OK");
    if (b.json) fclose(b.json);
  }
  free(b.send);
  free(b.recv);
  MPI_Finalize();
  return failures ? 1 : 0;
}
