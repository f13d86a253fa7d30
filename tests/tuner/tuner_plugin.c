/*
 * tuner_plugin.c - a tuner plugin as a third party writes one, built once
 * per interface version (TUNER_VERSION 2..5) into libnccl-tuner-testV.so,
 * depending only on the ABI header and libc. What it does comes from the
 * environment:
 *   TUNER_LOG      a file it appends a line to per init, query and
 *                  finalize (written whole, so ranks as threads interleave
 *                  lines, not bytes)
 *   TUNER_FORCE    ring, tree, pat or nvls: the Simple cell of that NCCL
 *                  algorithm costs 0 (version 2 names it); ring, tree and
 *                  pat only where the table offers the cell, nvls always
 *                  (a careless tuner: nothing runs there)
 *   TUNER_FAIL     init or query: that function returns ncclInternalError
 *   TUNER_CHANNELS the channel cap it answers with
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tuner_abi.h"

#ifndef TUNER_VERSION
#error "TUNER_VERSION must be set"
#endif

enum { TREE = 0, RING = 1, NVLS = 4, PAT = 6, SIMPLE = 2 };

typedef struct ctx {
  size_t nranks, nnodes;
} ctx;

static void logf_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_line(const char *fmt, ...) {
  const char *path = getenv("TUNER_LOG");
  if (!path) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  if (n > 0) (void)!write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  close(fd);
}

static int fails(const char *what) {
  const char *f = getenv("TUNER_FAIL");
  return f && strcmp(f, what) == 0;
}

static int forced(void) {
  const char *f = getenv("TUNER_FORCE");
  if (!f) return -1;
  return !strcmp(f, "ring")   ? RING
         : !strcmp(f, "tree") ? TREE
         : !strcmp(f, "pat")  ? PAT
         : !strcmp(f, "nvls") ? NVLS
                              : -1;
}

static int channels(void) {
  const char *c = getenv("TUNER_CHANNELS");
  return c ? atoi(c) : 0;
}

static ncclResult_t make(size_t nranks, size_t nnodes, void **out) {
  if (fails("init")) return ncclInternalError;
  ctx *c = calloc(1, sizeof *c);
  if (!c) return ncclSystemError;
  c->nranks = nranks, c->nnodes = nnodes;
  *out = c;
  return ncclSuccess;
}

static ncclResult_t done(void *c) {
  logf_line("finalize nranks %zu\n", c ? ((ctx *)c)->nranks : 0);
  free(c);
  return ncclSuccess;
}

/* The table versions 3-5 edit. */
__attribute__((unused)) static ncclResult_t edit(void *c, int func, size_t bytes, int npipe,
                                                 float **table, int nalgo, int nproto, int reg,
                                                 int *nchannels) {
  float(*t)[3] = (float(*)[3])(void *)table;
  logf_line("query v%d func %d bytes %zu npipe %d nalgo %d nproto %d reg %d nranks %zu ring %g "
            "tree %g pat %g\n",
            TUNER_VERSION, func, bytes, npipe, nalgo, nproto, reg, ((ctx *)c)->nranks,
            (double)t[RING][SIMPLE], (double)t[TREE][SIMPLE], (double)t[PAT][SIMPLE]);
  if (fails("query")) return ncclInternalError;
  const int a = forced();
  if (a >= 0 && nalgo == 7 && nproto == 3 && (a == NVLS || t[a][SIMPLE] >= 0)) t[a][SIMPLE] = 0;
  if (channels()) *nchannels = channels();
  return ncclSuccess;
}

#if TUNER_VERSION < 5
/* The init of versions 2-4, one signature. */
static ncclResult_t init_v234(size_t nranks, size_t nnodes, tuner_logger_t log, void **out) {
  logf_line("init v%d nranks %zu nnodes %zu log %d\n", TUNER_VERSION, nranks, nnodes, log != NULL);
  return make(nranks, nnodes, out);
}
#endif

#if TUNER_VERSION == 2
static ncclResult_t query2(void *c, int func, size_t bytes, int collnet, int nvls, int npipe,
                           int *algo, int *proto, int *nchannels) {
  logf_line("query v2 func %d bytes %zu collnet %d nvls %d npipe %d algo %d proto %d nranks %zu\n",
            func, bytes, collnet, nvls, npipe, *algo, *proto, ((ctx *)c)->nranks);
  if (fails("query")) return ncclInternalError;
  if (forced() >= 0) *algo = forced(), *proto = SIMPLE;
  if (channels()) *nchannels = channels();
  return ncclSuccess;
}
__attribute__((visibility("default")))
const tuner_v2 ncclTunerPlugin_v2 = {"test2", init_v234, query2, done};
#elif TUNER_VERSION == 3
static ncclResult_t query3(void *c, int func, size_t bytes, int npipe, float **table, int nalgo,
                           int nproto, int *nchannels) {
  return edit(c, func, bytes, npipe, table, nalgo, nproto, -1, nchannels);
}
__attribute__((visibility("default")))
const tuner_v3 ncclTunerPlugin_v3 = {"test3", init_v234, query3, done};
#elif TUNER_VERSION == 4
__attribute__((visibility("default")))
const tuner_v4 ncclTunerPlugin_v4 = {"test4", init_v234, edit, done};
#else
static ncclResult_t init5(void **out, uint64_t id, size_t nranks, size_t nnodes, tuner_logger_t log,
                          tuner_nvl_domains_v5 *nvl, tuner_constants_v5 *k) {
  logf_line("init v5 nranks %zu nnodes %zu log %d id %d domains %d min %d max %d constants %d\n",
            nranks, nnodes, log != NULL, id != 0, nvl ? nvl->ndomains : -1,
            nvl ? nvl->min_ranks : -1, nvl ? nvl->max_ranks : -1, k != NULL);
  if (log) log(3, 0x40, __FILE__, __LINE__, "test5 tuner: init of %zu ranks", nranks);
  if (k) k->base_latency[RING][SIMPLE] = 1e9; /* written, not read back */
  return make(nranks, nnodes, out);
}
__attribute__((visibility("default")))
const tuner_v5 ncclTunerPlugin_v5 = {"test5", init5, edit, done};
#endif
