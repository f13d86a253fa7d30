/*
 * stuck.c - the stuck report on GPU communicators: the last rank comes
 * late to AllReduce #3, and every other rank's report must name it.
 *
 * One process per GPU (chorusrun; also as hosts, NCCL_HOSTID). Each rank
 * logs to its own NCCL_DEBUG_FILE (set here, in a fresh folder), runs
 * AllReduce #0-#2 on 1024 floats (checked), then #3: the last rank first
 * sleeps LATE_S (default 6) seconds; the others launch it and, while their
 * GPU waits, watch their log for the report. CHORUS_STUCK_WARN must be
 * set (the check sets 2). A waiting rank passes when its report appears
 * within CHORUS_STUCK_WARN + 2 s of its launch, says the call has not
 * finished on the GPU (or not been seen to: launched within a millisecond
 * of the call before, no event followed it), and names the last rank with its pid as having not
 * issued AllReduce #3; every rank's #3 must then end right. With
 * CHORUS_TRACE set, each rank's trace must then hold its four AllReduces
 * as GPU calls; with CHORUS_STATS_INTERVAL, its statistics must count them
 * with their GPU times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_test.h"

#define COUNT 1024

static float *dev;
static float host[COUNT];

static void allreduce(ncclComm_t comm, cudaStream_t s, int rank, int n, int k, double *launched) {
  for (int i = 0; i < COUNT; i++) host[i] = (float)(rank + k);
  CUDA(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
  if (launched) *launched = now();
  NCCL(ncclAllReduce(dev, dev, COUNT, ncclFloat, ncclSum, comm, s));
  if (launched) return;
  CUDA(cudaStreamSynchronize(s));
  CUDA(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
  const float want = (float)(n * (n - 1) / 2 + n * k);
  for (int i = 0; i < COUNT; i++)
    EXPECT(host[i] == want, "rank %d: AllReduce #%d: element %d is %g, want %g", rank, k, i,
           host[i], want);
}

/* The file a setting names, its %p this process; its text in `text`. */
static size_t read_named(const char *pattern, char *path, size_t cap, char *text, size_t tcap) {
  char *o = path;
  for (const char *p = pattern; *p && o < path + cap - 16; p++)
    if (p[0] == '%' && p[1] == 'p') {
      o += snprintf(o, 16, "%d", (int)getpid());
      p++;
    } else {
      *o++ = *p;
    }
  *o = '\0';
  FILE *f = fopen(path, "r");
  const size_t got = f ? fread(text, 1, tcap - 1, f) : 0;
  if (f) fclose(f);
  text[got] = '\0';
  return got;
}

/* With CHORUS_STATS_INTERVAL and CHORUS_STATS_FILE (its %p this process):
 * the line written when the communicator ended counts the four AllReduces,
 * each alone in its launch, so each timed on the GPU. */
static void check_stats(int rank) {
  const char *pattern = getenv("CHORUS_STATS_FILE");
  if (!pattern || !getenv("CHORUS_STATS_INTERVAL")) return;
  char path[512];
  static char text[1 << 16];
  read_named(pattern, path, sizeof path, text, sizeof text);
  const char *last = NULL;
  for (const char *at = text; (at = strstr(at, "\"AllReduce\":{\"calls\":4,")); at++) last = at;
  unsigned long long timed = 0;
  double us = 0;
  const char *t = last ? strstr(last, "\"timed\":") : NULL;
  EXPECT(t && sscanf(t, "\"timed\":%llu,\"time_us\":%lf", &timed, &us) == 2 && timed == 4 && us > 0,
         "rank %d: %s does not count 4 AllReduces timed on the GPU (timed %llu, %.3f us)", rank,
         path, timed, us);
  unlink(path);
  char prom[512];
  snprintf(prom, sizeof prom, "%.*s.prom", (int)(strlen(path) - 6), path);
  unlink(prom);
}

/* With CHORUS_TRACE (its %p this process): the file, closed with the
 * communicator, holds AllReduce #0-#3 of this rank, timed on the GPU. */
static void check_trace(int rank) {
  const char *pattern = getenv("CHORUS_TRACE");
  if (!pattern) return;
  char path[512];
  static char text[1 << 16];
  const size_t got = read_named(pattern, path, sizeof path, text, sizeof text);
  EXPECT(got > 0 && strstr(text, "\n]\n"), "rank %d: no finished trace at %s", rank, path);
  for (int k = 0; k < 4; k++) {
    char want[64];
    snprintf(want, sizeof want, "\"index\":%d,\"count\":1024,\"type\":\"float\"", k);
    const char *at = strstr(text, want), *gpu = at ? strstr(at, "\"device\":true") : NULL;
    const char *next = at ? strstr(at, "\n") : NULL;
    EXPECT(at && gpu && (!next || gpu < next), "rank %d: AllReduce #%d is not in %s as a GPU call",
           rank, k, path);
  }
  unlink(path);
}

int main(void) {
  const int warn = env_int("CHORUS_STUCK_WARN", 0), late = env_int("LATE_S", 6);
  if (warn <= 0 || warn + 2 >= late) {
    fprintf(stderr, "stuck: set CHORUS_STUCK_WARN (and LATE_S above it + 2)\n");
    return 2;
  }
  char dir[] = "/tmp/chorus-stuck.XXXXXX", log[256];
  const int rank_env = env_int("RANK", 0);
  if (!mkdtemp(dir)) return 1;
  snprintf(log, sizeof log, "%s/rank%d.log", dir, rank_env);
  setenv("NCCL_DEBUG_FILE", log, 1); /* before the library's first line */
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  const int joined = join_launched(&rank, &n, &comm, &s);
  if (joined) return joined;
  CUDA(cudaMalloc((void **)&dev, sizeof host));
  for (int k = 0; k < 3; k++) allreduce(comm, s, rank, n, k, NULL);
  const int culprit = rank == n - 1;
  if (culprit) sleep((unsigned)late);
  double launched = 0, seen = -1;
  allreduce(comm, s, rank, n, 3, &launched);
  char report[8192] = "";
  while (!culprit && cudaStreamQuery(s) == cudaErrorNotReady && now() - launched < late + 30) {
    FILE *f = fopen(log, "r");
    size_t got = f ? fread(report, 1, sizeof report - 1, f) : 0;
    if (f) fclose(f);
    report[got] = '\0';
    if (seen < 0 && strstr(report, "stuck: ")) seen = now() - launched;
    usleep(50000);
  }
  CUDA(cudaStreamSynchronize(s));
  CUDA(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
  const float want = (float)(n * (n - 1) / 2 + n * 3);
  for (int i = 0; i < COUNT; i++)
    EXPECT(host[i] == want, "rank %d: AllReduce #3: element %d is %g, want %g", rank, i, host[i],
           want);
  if (!culprit) {
    const char *at = strstr(report, "stuck: ");
    printf("rank %d: report after %.2f s:\n%s\n", rank, seen, at ? at : "(none)");
    EXPECT(seen >= 0 && seen <= warn + 2.0, "rank %d: no report within %d + 2 s (after %.2f s)",
           rank, warn, seen);
    char culprit_words[128];
    snprintf(culprit_words, sizeof culprit_words, "culprit: rank %d (host ", n - 1);
    EXPECT(at && strstr(at, "AllReduce(count=1024, float, sum) #3 on comm ") &&
               (strstr(at, "has not finished on the GPU for") ||
                strstr(at, "has not been seen to finish on the GPU for")),
           "rank %d: the report does not say AllReduce #3 has not finished on the GPU", rank);
    const char *c = at ? strstr(at, culprit_words) : NULL;
    EXPECT(c && strstr(c, ") has not issued AllReduce #3; its last call was AllReduce(count=1024, "
                          "float, sum) #2"),
           "rank %d: the report does not name rank %d as not having issued #3", rank, n - 1);
    /* The late rank sleeps on the host: nothing of it waits. */
    const char *eol = c ? strchr(c, '\n') : NULL, *waits = c ? strstr(c, "it waits in") : NULL;
    EXPECT(!waits || (eol && waits > eol), "rank %d: the report says the late rank waits", rank);
  }
  CUDA(cudaFree(dev));
  NCCL(ncclCommDestroy(comm));
  check_trace(rank);
  check_stats(rank);
  unlink(log);
  rmdir(dir);
  printf("rank %d: %s\n", rank, failures ? "FAIL" : "ok");
  return failures ? 1 : 0;
}
