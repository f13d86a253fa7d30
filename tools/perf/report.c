/*
 * report.c - output in the layout of nccl-tests 2.19, plus JSON lines.
 *
 * Only the main thread (thread 0 of process 0) prints; every value it prints
 * has already been combined over all ranks. -J writes one JSON object per
 * table row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static FILE *json;
static volatile int row_open; /* a table row is half printed */

/* v in exactly `width` characters, as precise as fits (as nccl-tests). */
static void fmt_fit(char *out, size_t cap, int width, double v) {
  for (int prec = 2; prec >= 0; prec--)
    if (snprintf(out, cap, "%*.*f", width, prec, v) <= width) return;
  snprintf(out, cap, "%*.*e", width, width >= 7 ? 1 : 0, v);
}

void pt_print_banner(const pt_args *a, const pt_coll *coll) {
  int lib = 0;
  ncclGetVersion(&lib);
  printf("# chorus perf tests %s nccl-headers=%d nccl-library=%d\n", PT_VERSION, NCCL_VERSION_CODE,
         lib);
  printf("# Collective test starting: %s\n", coll->name);
  printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
         "iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
         a->nthreads, a->ngpus, a->minbytes, a->maxbytes,
         a->stepfactor > 1 ? a->stepfactor : a->stepbytes, a->stepfactor > 1 ? "factor" : "bytes",
         a->warmup, a->iters, a->agg, a->check, 0, 0);
  if (a->blocking >= 0) printf("# Communicators: ncclConfig_t.blocking = %d \n", a->blocking);
  if (!a->inplace) printf("# In-place tests disabled (-I 0) \n");
  printf("#\n");
}

void pt_print_devices(pt_thread *t) {
  enum { LINE = 256 };
  int n = t->world->nranks;
  char host[128] = "?";
  gethostname(host, sizeof host - 1);
  /* Each rank writes its line in its own slot of a zeroed buffer; a byte sum
   * over all ranks then hands every rank all the lines. */
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    int dev = -1;
    ncclCommCuDevice(r->comm, &dev);
    char *buf = pt_mem_alloc(r->comm, (size_t)n * LINE, 0);
    if (!buf) pt_fail(t, r->rank, "out of memory listing the devices");
    void *view = pt_mem_begin(r->comm, buf, (size_t)n * LINE, 0);
    memset(view, 0, (size_t)n * LINE); /* a device buffer's window starts undefined */
    snprintf((char *)view + (size_t)r->rank * LINE, LINE,
             "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", r->rank, 0,
             (int)getpid(), host, dev, dev < 0 ? "host" : "cuda", dev < 0 ? "CPU" : "GPU");
    pt_mem_end(r->comm, buf, view, (size_t)n * LINE, 1);
    t->bufs[i] = buf;
  }
  pt_allreduce_bufs(t, t->bufs, (size_t)n * LINE, ncclUint8, ncclSum);
  if (t->main) {
    pt_rank *r = &t->ranks[0];
    char *view = pt_mem_begin(r->comm, t->bufs[0], (size_t)n * LINE, 1);
    printf("# Using devices\n");
    for (int k = 0; k < n; k++) printf("%.*s", LINE, view + (size_t)k * LINE);
    pt_mem_end(r->comm, t->bufs[0], view, (size_t)n * LINE, 0);
  }
  for (int i = 0; i < t->nlocal; i++) pt_mem_free(t->ranks[i].comm, t->bufs[i], 0);
}

void pt_print_table_header(const pt_args *a) {
  const char *tm = a->cputime ? "cputime" : "time";
  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place   "
         "       \n",
         "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "size", "count",
         "type", "redop", "root", tm, "algbw", "busbw", "#wrong", tm, "algbw", "busbw", "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

void pt_print_row_start(const pt_case *k, const pt_coll *coll) {
  row_open = 1;
  printf("%12zu  %12zu  %8s  %6s  %6d", k->bytes, k->c.param, pt_type_name(k->type),
         pt_op_name(coll->reduces ? k->op : PT_NONE), k->root);
}

void pt_print_cell(const pt_result *r) {
  char tm[32], alg[32], bus[32];
  fmt_fit(tm, sizeof tm, 7, r->time_us);
  fmt_fit(alg, sizeof alg, 6, r->algbw);
  fmt_fit(bus, sizeof bus, 6, r->busbw);
  if (r->wrong >= 0)
    printf("  %7s  %6s  %6s  %6g", tm, alg, bus, (double)r->wrong);
  else
    printf("  %7s  %6s  %6s     N/A", tm, alg, bus);
}

void pt_report_newline_if_open(void) {
  if (row_open) printf("\n");
  row_open = 0;
}

static void json_result(const pt_result *r) {
  fprintf(json, "{\"time_us\":%.9g,\"algbw_gbs\":%.9g,\"busbw_gbs\":%.9g,\"wrong\":", r->time_us,
          r->algbw, r->busbw);
  if (r->wrong >= 0)
    fprintf(json, "%lld}", (long long)r->wrong);
  else
    fprintf(json, "null}");
}

void pt_print_row_end(pt_thread *t, const pt_case *k, const pt_result res[2], int nres) {
  printf("\n");
  row_open = 0;
  if (!json) return;
  int lib = 0;
  ncclGetVersion(&lib);
  fprintf(json,
          "{\"collective\":\"%s\",\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\","
          "\"root\":%d,\"nranks\":%d,\"out_of_place\":",
          t->coll->name, k->bytes, k->c.param, pt_type_name(k->type),
          pt_op_name(t->coll->reduces ? k->op : PT_NONE), k->root, t->world->nranks);
  json_result(&res[0]);
  fprintf(json, ",\"in_place\":");
  if (nres > 1)
    json_result(&res[1]);
  else
    fprintf(json, "null");
  fprintf(json, ",\"nccl_library\":%d,\"nccl_headers\":%d,\"chorus_perf\":\"%s\"}\n", lib,
          NCCL_VERSION_CODE, PT_VERSION);
  fflush(json);
}

/* NCCL_TESTS_MIN_BW (as nccl-tests): the average must reach 90% of it. */
int pt_print_footer(pt_thread *t, const pt_coll *coll) {
  double bw = t->bw_count ? t->bw_sum / t->bw_count : 0;
  const char *env = getenv("NCCL_TESTS_MIN_BW");
  double min_bw = env && *env ? atof(env) : -1;
  int low = min_bw >= 0 && bw < min_bw * 0.9;
  if (t->main) {
    printf("# %-20s : %d %s\n", "Out of bounds values", t->errors, t->errors ? "FAILED" : "OK");
    printf("# %-20s : %g %s\n", "Avg bus bandwidth", bw, min_bw < 0 ? "" : low ? "FAILED" : "OK");
    printf("#\n");
    printf("# Collective test concluded: %s\n", coll->name);
  }
  return low;
}

int pt_json_open(const char *path) {
  json = fopen(path, "w");
  if (!json) {
    perror(path);
    return -1;
  }
  printf("# Writing JSON output to %s\n", path);
  return 0;
}

void pt_json_close(void) {
  if (json) fclose(json);
  json = NULL;
}
