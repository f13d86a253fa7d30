/*
 * stats.c - see stats.h.
 *
 * Counters are added to with relaxed atomics by whichever thread calls,
 * and read the same way by the writer: a line may catch a call counted in
 * one field and not yet in the next, never a torn number. The registry
 * (the counted communicators) and the files are the writer's lock's.
 */
#include "core/stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algo/func.h"
#include "core/comm.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/param.h"
#include "util/siphash.h"

struct chorus_stats {
  chorus_stats_cell cell[CHORUS_FUNC_COUNT][CHORUS_STATS_SIZES];
  uint64_t errors;
  uint64_t id; /* alike on every rank of the communicator */
};

static const char *const size_names[CHORUS_STATS_SIZES] = {"0-1K",   "1K-64K",   "64K-1M",
                                                           "1M-16M", "16M-256M", "256M+"};

static int size_class(uint64_t bytes) {
  static const uint64_t top[CHORUS_STATS_SIZES - 1] = {1ull << 10, 64ull << 10, 1ull << 20,
                                                       16ull << 20, 256ull << 20};
  int k = 0;
  while (k < CHORUS_STATS_SIZES - 1 && bytes > top[k]) k++;
  return k;
}

void chorus_stats_count(chorus_stats *st, int func, uint64_t bytes, int64_t ns) {
  if (!st || func <= 0 || func >= CHORUS_FUNC_COUNT) return;
  chorus_stats_cell *c = &st->cell[func][size_class(bytes)];
  __atomic_add_fetch(&c->calls, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->bytes, bytes, __ATOMIC_RELAXED);
  if (ns >= 0) {
    __atomic_add_fetch(&c->timed, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->ns, (uint64_t)ns, __ATOMIC_RELAXED);
  }
}

void chorus_stats_time(chorus_stats *st, int func, uint64_t bytes, int64_t ns) {
  if (!st || func <= 0 || func >= CHORUS_FUNC_COUNT || ns < 0) return;
  chorus_stats_cell *c = &st->cell[func][size_class(bytes)];
  __atomic_add_fetch(&c->timed, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->ns, (uint64_t)ns, __ATOMIC_RELAXED);
}

void chorus_stats_error(chorus_stats *st) {
  if (st) __atomic_add_fetch(&st->errors, 1, __ATOMIC_RELAXED);
}

/* ---- the writer ------------------------------------------------------------------ */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static ncclComm_t *comms; /* counted, [0, ncomms) */
static int ncomms, cap;
static FILE *jsonl;
static char prom_path[4096];
static pthread_t writer;
static unsigned gen; /* bumped when the writer must stop */
static int running;

static chorus_stats_cell load(const chorus_stats_cell *c) {
  return (chorus_stats_cell){
      __atomic_load_n(&c->calls, __ATOMIC_RELAXED), __atomic_load_n(&c->bytes, __ATOMIC_RELAXED),
      __atomic_load_n(&c->timed, __ATOMIC_RELAXED), __atomic_load_n(&c->ns, __ATOMIC_RELAXED)};
}

static void json_cell(FILE *f, const chorus_stats_cell *c) {
  fprintf(f, "{\"calls\":%llu,\"bytes\":%llu,\"timed\":%llu,\"time_us\":%.3f",
          (unsigned long long)c->calls, (unsigned long long)c->bytes, (unsigned long long)c->timed,
          (double)c->ns / 1e3);
}

/* One JSON line: comm's counters now. */
static void write_line(ncclComm_t comm, int last) {
  const chorus_stats *st = comm->stats;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(jsonl,
          "{\"time\":%lld.%03ld,\"host\":\"%s\",\"pid\":%d,\"comm\":\"%016llx\",\"rank\":%d,"
          "\"nranks\":%d,\"device\":%d,\"last\":%s,\"errors\":%llu,\"funcs\":{",
          (long long)ts.tv_sec, ts.tv_nsec / 1000000, comm->topo.info[comm->rank].hostname,
          (int)getpid(), (unsigned long long)st->id, comm->rank, comm->nranks, comm->device,
          last ? "true" : "false",
          (unsigned long long)__atomic_load_n(&st->errors, __ATOMIC_RELAXED));
  int nf = 0;
  for (int f = 1; f < CHORUS_FUNC_COUNT; f++) {
    chorus_stats_cell sum = {0, 0, 0, 0}, c[CHORUS_STATS_SIZES];
    for (int k = 0; k < CHORUS_STATS_SIZES; k++) {
      c[k] = load(&st->cell[f][k]);
      sum.calls += c[k].calls, sum.bytes += c[k].bytes, sum.timed += c[k].timed, sum.ns += c[k].ns;
    }
    if (!sum.calls) continue;
    fprintf(jsonl, "%s\"%s\":", nf++ ? "," : "", chorus_func_name(f));
    json_cell(jsonl, &sum);
    fprintf(jsonl, ",\"sizes\":{");
    int ns = 0;
    for (int k = 0; k < CHORUS_STATS_SIZES; k++) {
      if (!c[k].calls) continue;
      fprintf(jsonl, "%s\"%s\":", ns++ ? "," : "", size_names[k]);
      json_cell(jsonl, &c[k]);
      fputc('}', jsonl);
    }
    fprintf(jsonl, "}}");
  }
  fprintf(jsonl, "}}\n");
  fflush(jsonl);
}

/* The Prometheus text file: every counted communicator, written aside and
 * renamed, so a reader never sees half of it. */
static void write_prom(void) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", prom_path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  static const struct {
    const char *name, *help;
  } metric[4] = {
      {"chorus_calls_total", "Calls issued, per communicator, function and size class."},
      {"chorus_bytes_total", "Bytes of the calls (nccl-tests' size), per class."},
      {"chorus_timed_calls_total", "Calls run alone, whose time is taken (on GPUs by events)."},
      {"chorus_call_seconds_total", "Time of the timed calls."},
  };
  for (int m = 0; m < 4; m++) {
    fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", metric[m].name, metric[m].help, metric[m].name);
    for (int i = 0; i < ncomms; i++) {
      const ncclComm_t comm = comms[i];
      for (int fn = 1; fn < CHORUS_FUNC_COUNT; fn++)
        for (int k = 0; k < CHORUS_STATS_SIZES; k++) {
          const chorus_stats_cell c = load(&comm->stats->cell[fn][k]);
          if (!c.calls) continue;
          fprintf(
              f, "%s{host=\"%s\",pid=\"%d\",comm=\"%016llx\",rank=\"%d\",func=\"%s\",size=\"%s\"} ",
              metric[m].name, comm->topo.info[comm->rank].hostname, (int)getpid(),
              (unsigned long long)comm->stats->id, comm->rank, chorus_func_name(fn), size_names[k]);
          if (m == 3)
            fprintf(f, "%.9f\n", (double)c.ns / 1e9);
          else
            fprintf(f, "%llu\n",
                    (unsigned long long)(m == 0   ? c.calls
                                         : m == 1 ? c.bytes
                                                  : c.timed));
        }
    }
  }
  fprintf(f, "# HELP chorus_errors_total Calls that returned an error.\n"
             "# TYPE chorus_errors_total counter\n");
  for (int i = 0; i < ncomms; i++)
    fprintf(f, "chorus_errors_total{host=\"%s\",pid=\"%d\",comm=\"%016llx\",rank=\"%d\"} %llu\n",
            comms[i]->topo.info[comms[i]->rank].hostname, (int)getpid(),
            (unsigned long long)comms[i]->stats->id, comms[i]->rank,
            (unsigned long long)__atomic_load_n(&comms[i]->stats->errors, __ATOMIC_RELAXED));
  if (fclose(f) == 0) rename(tmp, prom_path);
}

static void *writer_main(void *arg) {
  const unsigned mine = (unsigned)(uintptr_t)arg;
  const int64_t interval = chorus_param_int(CHORUS_P_STATS_INTERVAL);
  pthread_mutex_lock(&lock);
  while (gen == mine) {
    const struct timespec until = chorus_realtime_in_ms(interval * 1000);
    while (gen == mine && pthread_cond_timedwait(&wake, &lock, &until) != ETIMEDOUT) {
    }
    if (gen != mine) break;
    for (int i = 0; i < ncomms; i++) write_line(comms[i], 0);
    write_prom();
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* The JSON file, its Prometheus sibling, and the writer (under lock). */
static int open_files(void) {
  char path[4096];
  const char *pattern = chorus_param_str(CHORUS_P_STATS_FILE); /* has a default */
  chorus_log_expand_path(pattern ? pattern : "", path, sizeof path);
  if (!(jsonl = fopen(path, "a"))) {
    WARN("CHORUS_STATS_FILE: cannot open %s: %s; no statistics", path, strerror(errno));
    return -1;
  }
  const size_t n = strlen(path);
  const size_t stem = n > 6 && !strcmp(path + n - 6, ".jsonl") ? n - 6 : n;
  snprintf(prom_path, sizeof prom_path, "%.*s.prom", (int)stem, path);
  INFO(CHORUS_INIT, "statistics every %lld s to %s and %s",
       (long long)chorus_param_int(CHORUS_P_STATS_INTERVAL), path, prom_path);
  return 0;
}

void chorus_stats_register(ncclComm_t comm) {
  if (chorus_param_int(CHORUS_P_STATS_INTERVAL) <= 0) return;
  chorus_stats *st = calloc(1, sizeof *st);
  if (!st) {
    WARN("out of memory for statistics; rank %d's calls are not counted", comm->rank);
    return;
  }
  const uint64_t key[2] = {comm->init.uids[0].secret[0], comm->init.uids[0].secret[1]};
  st->id = chorus_siphash(key, "statistics comm id", 18);
  pthread_mutex_lock(&lock);
  int ok = ncomms < cap;
  if (!ok) {
    const int ncap = cap ? 2 * cap : 16;
    ncclComm_t *t = realloc(comms, (size_t)ncap * sizeof *t);
    if (t) comms = t, cap = ncap, ok = 1;
  }
  if (ok && !jsonl) ok = open_files() == 0;
  if (ok && !running) {
    ok = pthread_create(&writer, NULL, writer_main, (void *)(uintptr_t)gen) == 0;
    running = ok;
  }
  if (ok) {
    comm->stats = st;
    comms[ncomms++] = comm;
  }
  pthread_mutex_unlock(&lock);
  if (!ok) free(st);
}

void chorus_stats_unregister(ncclComm_t comm) {
  if (!comm->stats) return;
  pthread_t join = 0;
  int stop = 0;
  pthread_mutex_lock(&lock);
  write_line(comm, 1);
  write_prom(); /* with it, a last time */
  for (int i = 0; i < ncomms; i++)
    if (comms[i] == comm) comms[i] = comms[--ncomms];
  if (ncomms == 0) {
    gen++;
    pthread_cond_broadcast(&wake);
    join = writer;
    stop = running;
    running = 0;
    fclose(jsonl);
    jsonl = NULL;
    free(comms);
    comms = NULL;
    cap = 0;
  }
  pthread_mutex_unlock(&lock);
  if (stop) pthread_join(join, NULL);
  free(comm->stats);
  comm->stats = NULL;
}
