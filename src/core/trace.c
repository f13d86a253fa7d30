/*
 * trace.c - see trace.h.
 *
 * One file per process, under `lock`: events are whole lines, so a file
 * cut short by a crash still opens (the array's closing bracket is
 * optional in the format). GPU calls leave a pair of timing events per
 * launch in their communicator's queue; a thread of this module writes
 * them once the second completes, placing them on the host's clock
 * through an anchor event (recorded, waited for, and the host clock
 * read), renewed every ANCHOR_NS so the float milliseconds CUDA measures
 * in stay precise. Events cannot time the replays of a CUDA graph (a
 * graph records its events once), so launches captured into one are
 * timed by the GPU itself: a timestamp kernel before and after them
 * writes the GPU's timer into a ring in host memory at every replay
 * (device/kernels.h, chorus_kern_stamp), which the same thread reads and
 * places on the host's clock by an offset measured at init; each replay's
 * calls become events of their own, numbered by replay, and count in the
 * statistics then (the stamps are taken for them too).
 */
#include "core/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/func.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/profiler.h"
#include "core/stats.h"
#include "device/device.h"
#include "device/kernels.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/misc.h"
#include "util/param.h"
#include "util/siphash.h"
#include "util/socket.h"

#define CLOCK_TAG   0x636c6f636b6f6666ull /* "clockoff": the offset's round trips */
#define ROUNDS      8
#define GPU_PENDING 1024 /* launches waiting for their GPU times, per communicator */
#define ANCHOR_NS   (10ll * 1000000000)
#define LABEL_MAX   48
#define STAMPS      (1u << 14) /* GPU timestamps in flight, per communicator (a power of 2) */

typedef struct gpu_launch {
  void *start, *end; /* timing events around the launch */
  chorus_call_desc d[8];
  int64_t t_enq[8];
  void *prof[8]; /* the profiler plugin's Coll/P2p handles */
  int n, more;   /* descriptions kept (n), calls beyond them (more) */
  double bytes;  /* of all its calls, for the bus bandwidth */
} gpu_launch;

/* A call of a captured launch, as the statistics count it. */
typedef struct graph_call {
  int func;
  uint64_t bytes;
} graph_call;

/* A launch captured into a graph: its calls (described, and for the
 * statistics every one), and its replays so far. */
typedef struct graph_launch {
  chorus_call_desc d[8];
  int n, more;
  double bytes;
  graph_call *calls; /* with statistics on: all n + more */
  int64_t begun;     /* the GPU time at which the replay under way began (ns) */
  uint32_t replays;  /* those that ended */
} graph_launch;

struct chorus_trace_state {
  int to_file; /* CHORUS_TRACE (else GPU times for a profiler plugin alone) */
  int slot;    /* "tid": the communicator's place in this process */
  char label[LABEL_MAX];
  double offset_us; /* rank 0's clock minus this one's */
  /* GPU communicators: launches in flight, a ring. */
  gpu_launch *ring;
  unsigned head, tail; /* under lock */
  void *anchor, *anchor_stream;
  int64_t anchor_ns; /* host time of the anchor event */
  unsigned dropped;
  /* Launches captured into graphs: the timestamps' ring (host view, device
   * view), its counter (device memory), the next entry to read, the host
   * clock minus the GPU's timer, and a record per captured launch (index
   * k: its stamps are tagged 2k, before, and 2k + 1, after). */
  volatile uint64_t *stamps;
  void *stamps_dev;
  uint32_t *stamp_counter;
  uint32_t stamp_next;
  int64_t gpu_offset_ns;
  graph_launch *graphs;
  int ngraphs, cap_graphs;
  unsigned stamps_lost;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static FILE *file;
static int users, next_slot;
static ncclComm_t *gpu_comms; /* those with launches to read */
static int ngpu, cap_gpu;
static pthread_t reader;
static int reader_running;
static unsigned reader_gen; /* bumped to stop the reader running with it */

/* ---- the clock offset ----------------------------------------------------------------- */

/* Rank 0's clock minus this rank's, in ns: the round trip of ROUNDS whose
 * reply came back soonest, halved. Rank 0 answers every other rank in
 * turn. */
static ncclResult_t measure_offset(ncclComm_t comm, int64_t *offset) {
  *offset = 0;
  if (comm->nranks == 1) return ncclSuccess;
  chorus_bootstrap *bs = comm->bs;
  const int64_t dl = chorus_now_ns() + 30ll * 1000000000;
  char err[256] = "";
  ncclResult_t res = ncclSuccess;
  if (comm->rank == 0) {
    for (int r = 1; r < comm->nranks && res == ncclSuccess; r++) {
      int fd = -1;
      CHECK(chorus_bootstrap_accept(bs, r, CLOCK_TAG, &fd));
      for (int k = 0; k < ROUNDS && res == ncclSuccess; k++) {
        int64_t t;
        res = chorus_sock_recv_all(fd, &t, sizeof t, dl, err, sizeof err);
        t = chorus_now_ns();
        if (res == ncclSuccess) res = chorus_sock_send_all(fd, &t, sizeof t, dl, err, sizeof err);
      }
      close(fd);
    }
  } else {
    int fd = -1;
    CHECK(chorus_bootstrap_connect(bs, 0, CLOCK_TAG, &fd));
    int64_t best = INT64_MAX;
    for (int k = 0; k < ROUNDS && res == ncclSuccess; k++) {
      int64_t t0 = chorus_now_ns(), theirs = 0;
      res = chorus_sock_send_all(fd, &t0, sizeof t0, dl, err, sizeof err);
      if (res == ncclSuccess)
        res = chorus_sock_recv_all(fd, &theirs, sizeof theirs, dl, err, sizeof err);
      const int64_t t1 = chorus_now_ns();
      if (res == ncclSuccess && t1 - t0 < best) {
        best = t1 - t0;
        *offset = theirs - (t0 + t1) / 2;
      }
    }
    close(fd);
  }
  if (res != ncclSuccess)
    return chorus_error(res, "CHORUS_TRACE: measuring the clock offset to rank 0: %s", err);
  return ncclSuccess;
}

/* ---- events ----------------------------------------------------------------------- */

static void write_event(ncclComm_t comm, const chorus_call_desc *d, int64_t t_enq, double start_us,
                        double end_us, int algo, double bytes, int more, int replay) {
  const struct chorus_trace_state *t = comm->trace;
  const double dur = end_us > start_us ? end_us - start_us : 0;
  const double bus =
      dur > 0 ? bytes / dur / 1e3 * chorus_func_bus_factor(d->func, comm->nranks) : 0;
  fprintf(file,
          "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
          "\"dur\":%.3f,\"args\":{\"comm\":\"%s\",\"index\":%llu,\"count\":%llu,\"type\":\"%s\"",
          chorus_func_name(d->func), chorus_func_p2p(d->func) ? "p2p" : "collective", comm->rank,
          t->slot, start_us, dur, t->label, (unsigned long long)d->index,
          (unsigned long long)d->count, chorus_type_name(d->dtype));
  if (chorus_func_reduces(d->func)) fprintf(file, ",\"op\":\"%s\"", chorus_redop_name(d->redop));
  if (d->root >= 0)
    fprintf(file, ",\"%s\":%d", chorus_func_p2p(d->func) ? "peer" : "root", d->root);
  fprintf(file, ",\"bytes\":%.0f,\"algorithm\":\"%s\",\"enqueue_ts\":%.3f,\"busbw_GBps\":%.6g",
          bytes, algo >= 0 ? chorus_algo_name(algo) : "gpu", (double)t_enq / 1e3, bus);
  if (more) fprintf(file, ",\"grouped_with\":%d", more);
  if (replay >= 0) fprintf(file, ",\"graph\":true,\"replay\":%d", replay);
  fprintf(file, ",\"device\":%s}},\n", comm->device >= 0 ? "true" : "false");
}

static chorus_call_desc desc_of(const chorus_op *op) {
  return (chorus_call_desc){chorus_func_p2p(op->func) ? op->ticket : op->app_index,
                            chorus_op_whole_count(op),
                            op->func,
                            op->dtype,
                            chorus_func_reduces(op->func) ? op->nccl_op : -1,
                            op->root};
}

static double op_bytes(const ncclComm_t comm, const chorus_op *op) {
  return (double)chorus_func_size(op->func, chorus_op_whole_count(op), op->esize, comm->nranks);
}

void chorus_trace_host(ncclComm_t comm, const chorus_op *op) {
  if (!comm->trace || !comm->trace->to_file) return;
  const chorus_call_desc d = desc_of(op);
  pthread_mutex_lock(&lock);
  if (file)
    write_event(comm, &d, op->t_enq, (double)op->t_start / 1e3, (double)op->t_end / 1e3, op->algo,
                op_bytes(comm, op), 0, -1);
  pthread_mutex_unlock(&lock);
}

/* ---- GPU calls -------------------------------------------------------------------- */

/* Host time (ns) of GPU event ev of t's device: its distance from the
 * anchor. */
static int gpu_time(const struct chorus_trace_state *t, void *ev, int64_t *ns) {
  float ms = 0;
  if (chorus_dev_event_elapsed(t->anchor, ev, &ms) != 0) return -1;
  *ns = t->anchor_ns + (int64_t)((double)ms * 1e6);
  return 0;
}

/* A fresh anchor on the communicator's device (its own stream). */
static int anchor(struct chorus_trace_state *t) {
  if (chorus_dev_event_record(t->anchor, t->anchor_stream) != 0 ||
      chorus_dev_event_wait(t->anchor) != 0)
    return -1;
  t->anchor_ns = chorus_now_ns();
  return 0;
}

static void free_stamps(struct chorus_trace_state *t) {
  if (t->stamps) (void)chorus_dev_host_free((void *)t->stamps);
  t->stamps = NULL;
  (void)chorus_dev_free(t->stamp_counter);
  t->stamp_counter = NULL;
  for (int k = 0; k < t->ngraphs; k++) free(t->graphs[k].calls);
  free(t->graphs);
  t->graphs = NULL;
}

/* The ring of GPU timestamps, and the host clock minus the GPU's timer:
 * of four timestamps taken on an idle stream, the one whose host times
 * around it lie closest, placed midway (its device current). */
static int setup_stamps(struct chorus_trace_state *t) {
  void *h = NULL, *c = NULL;
  if (chorus_dev_host_alloc((size_t)STAMPS * 2 * sizeof(uint64_t), &h, &t->stamps_dev) != 0)
    return -1;
  t->stamps = h;
  if (chorus_dev_alloc(sizeof(uint32_t), &c) != 0) return -1;
  t->stamp_counter = c;
  int64_t best = INT64_MAX;
  for (uint32_t k = 0; k < 4; k++) {
    const int64_t t0 = chorus_now_ns();
    if (chorus_kern_stamp(t->stamps_dev, t->stamp_counter, STAMPS, UINT32_MAX, t->anchor_stream) !=
            0 ||
        chorus_dev_stream_sync(t->anchor_stream) != 0)
      return -1;
    const int64_t t1 = chorus_now_ns(), gpu = (int64_t)t->stamps[2 * k + 1];
    if (t1 - t0 < best) {
      best = t1 - t0;
      t->gpu_offset_ns = t0 + (t1 - t0) / 2 - gpu;
    }
  }
  t->stamp_next = 4;
  return 0;
}

/* Frees t's GPU side (its device current). */
static void free_gpu(struct chorus_trace_state *t) {
  if (t->ring)
    for (int i = 0; i < GPU_PENDING; i++) {
      (void)chorus_dev_event_free(t->ring[i].start);
      (void)chorus_dev_event_free(t->ring[i].end);
    }
  chorus_free(t->ring);
  t->ring = NULL;
  (void)chorus_dev_event_free(t->anchor);
  t->anchor = NULL;
  free_stamps(t);
  if (t->anchor_stream) (void)chorus_dev_stream_free(t->anchor_stream);
  t->anchor_stream = NULL;
}

/* A stamp read: the beginning or the end of a replay of captured launch k. */
static void stamped(ncclComm_t comm, uint32_t tag, int64_t gpu_ns) {
  struct chorus_trace_state *t = comm->trace;
  const uint32_t k = tag >> 1;
  if (k >= (uint32_t)t->ngraphs) return;
  graph_launch *g = &t->graphs[k];
  if (!(tag & 1)) {
    g->begun = gpu_ns;
    return;
  }
  const double s = (double)(g->begun + t->gpu_offset_ns), e = (double)(gpu_ns + t->gpu_offset_ns);
  for (int i = 0; i < g->n && file && t->to_file; i++)
    write_event(comm, &g->d[i], (int64_t)s, s / 1e3, e / 1e3, -1, g->bytes, g->n + g->more - 1,
                (int)g->replays);
  /* Each replay runs the calls again: they count now, not at capture. */
  const int ncalls = g->n + g->more;
  for (int i = 0; i < ncalls && g->calls; i++)
    chorus_stats_count(comm->stats, g->calls[i].func, g->calls[i].bytes,
                       ncalls == 1 ? gpu_ns - g->begun : -1);
  g->replays++;
}

/* Reads the timestamps the GPU wrote since the last time (under lock). An
 * entry is whole when its header, read before and after its time, names
 * the entry expected; one already a lap ahead means the entries between
 * were overwritten unread. */
static void drain_stamps(ncclComm_t comm) {
  struct chorus_trace_state *t = comm->trace;
  for (int guard = 0; guard < (int)STAMPS; guard++) {
    volatile uint64_t *e = t->stamps + 2 * (size_t)(t->stamp_next & (STAMPS - 1));
    /* Acquire loads order the time between the two header reads (a fence
     * would too, but ThreadSanitizer builds refuse fences). */
    const uint64_t h = __atomic_load_n(&e[0], __ATOMIC_ACQUIRE);
    const uint64_t ns = __atomic_load_n(&e[1], __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&e[0], __ATOMIC_ACQUIRE) != h) break; /* being written */
    const uint32_t seq = (uint32_t)(h >> 32), want = t->stamp_next + 1;
    if (seq != want) {
      if ((int32_t)(seq - want) <= 0) break; /* not written yet */
      t->stamps_lost += seq - want;
      t->stamp_next = seq - 1;
    }
    stamped(comm, (uint32_t)h, (int64_t)ns);
    t->stamp_next++;
  }
}

/* Writes comm's launches that finished (under lock); with `all`, waits
 * for each. */
static void drain(ncclComm_t comm, int all) {
  struct chorus_trace_state *t = comm->trace;
  chorus_dev_use(comm->device);
  while (t->tail != t->head) {
    gpu_launch *g = &t->ring[t->tail % GPU_PENDING];
    if (!all && chorus_dev_event_done(g->end) == 0) break;
    if (all) (void)chorus_dev_event_wait(g->end);
    int64_t s = 0, e = 0;
    if (gpu_time(t, g->start, &s) == 0 && gpu_time(t, g->end, &e) == 0) {
      for (int i = 0; i < g->n; i++) {
        if (file && t->to_file)
          write_event(comm, &g->d[i], g->t_enq[i], (double)s / 1e3, (double)e / 1e3, -1, g->bytes,
                      g->n + g->more - 1, -1);
        chorus_prof_ran(comm, g->prof[i], s, e);
      }
      if (g->n == 1 && !g->more) /* alone in its launch: the time is its own */
        chorus_stats_time(comm->stats, g->d[0].func, (uint64_t)g->bytes, e - s);
    }
    t->tail++;
  }
  if (t->stamps) drain_stamps(comm);
  if (chorus_now_ns() - t->anchor_ns > ANCHOR_NS && t->tail == t->head) (void)anchor(t);
}

static void *reader_main(void *arg) {
  const unsigned mine = (unsigned)(uintptr_t)arg;
  pthread_mutex_lock(&lock);
  while (reader_gen == mine) {
    for (int i = 0; i < ngpu; i++) drain(gpu_comms[i], 0);
    const struct timespec until = chorus_realtime_in_ms(20);
    (void)pthread_cond_timedwait(&wake, &lock, &until);
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* comm has GPU times to read: the reader thread reads them (under lock). */
static void follow(ncclComm_t comm) {
  int listed = 0;
  for (int i = 0; i < ngpu && !listed; i++) listed = gpu_comms[i] == comm;
  if (!listed && ngpu == cap_gpu) {
    const int ncap = cap_gpu ? 2 * cap_gpu : 8;
    ncclComm_t *c = realloc(gpu_comms, (size_t)ncap * sizeof *c);
    if (c) gpu_comms = c, cap_gpu = ncap;
  }
  if (!listed && ngpu < cap_gpu) gpu_comms[ngpu++] = comm;
  if (!reader_running)
    reader_running = pthread_create(&reader, NULL, reader_main, (void *)(uintptr_t)reader_gen) == 0;
}

/* A timestamp of comm's GPU on stream, tagged. */
static int stamp(ncclComm_t comm, uint32_t tag, void *stream) {
  const struct chorus_trace_state *t = comm->trace;
  const int was = chorus_dev_current();
  if (was != comm->device) chorus_dev_use(comm->device);
  const int rc = chorus_kern_stamp(t->stamps_dev, t->stamp_counter, STAMPS, tag, stream);
  if (was >= 0 && was != comm->device) chorus_dev_use(was);
  return rc;
}

/* Launches captured into a graph: a record, and the GPU's timestamp
 * before them. Slots -2, -3, ... name records 0, 1, ... */
static int graph_begin(ncclComm_t comm, void *stream) {
  struct chorus_trace_state *t = comm->trace;
  if (!t->stamps) return -1;
  pthread_mutex_lock(&lock);
  if (t->ngraphs == t->cap_graphs) {
    const int ncap = t->cap_graphs ? 2 * t->cap_graphs : 16;
    graph_launch *g = realloc(t->graphs, (size_t)ncap * sizeof *g);
    if (g) t->graphs = g, t->cap_graphs = ncap;
  }
  const int k = t->ngraphs < t->cap_graphs ? t->ngraphs++ : -1;
  if (k >= 0) memset(&t->graphs[k], 0, sizeof t->graphs[k]);
  pthread_mutex_unlock(&lock);
  if (k < 0 || stamp(comm, (uint32_t)k << 1, stream) != 0) return -1;
  return -2 - k;
}

int chorus_trace_gpu_begin(ncclComm_t comm, void *stream) {
  struct chorus_trace_state *t = comm->trace;
  if (!t || !t->ring) return -1;
  const int captured = chorus_dev_stream_capturing(stream);
  if (captured == 1) return graph_begin(comm, stream);
  if (captured != 0) return -1;
  pthread_mutex_lock(&lock);
  const int full = t->head - t->tail >= GPU_PENDING;
  const unsigned slot = t->head;
  if (full) t->dropped++;
  pthread_mutex_unlock(&lock);
  if (full) return -1;
  gpu_launch *g = &t->ring[slot % GPU_PENDING];
  const int was = chorus_dev_current(); /* events belong to the stream's device */
  if (was != comm->device) chorus_dev_use(comm->device);
  const int ok = (g->start || chorus_dev_event_new_timed(&g->start) == 0) &&
                 (g->end || chorus_dev_event_new_timed(&g->end) == 0) &&
                 chorus_dev_event_record(g->start, stream) == 0;
  if (was >= 0 && was != comm->device) chorus_dev_use(was);
  return ok ? (int)(slot % GPU_PENDING) : -1;
}

/* The calls ops[0, n) of a launch: the first `cap` described in d[] (with
 * their profiler handles and issue times where prof is given), how many
 * more (*more), and all their bytes (*bytes). Returns how many d[] holds. */
static int describe_launch(ncclComm_t comm, chorus_op *const *ops, int n, chorus_call_desc *d,
                           int cap, void **prof, int64_t *t_enq, int *more, double *bytes) {
  int kept = 0;
  *more = 0;
  *bytes = 0;
  for (int i = 0; i < n; i++) {
    if (kept < cap) {
      if (prof) {
        prof[kept] = ops[i]->prof_coll;
        t_enq[kept] = ops[i]->t_enq;
      }
      d[kept++] = desc_of(ops[i]);
    } else {
      (*more)++;
    }
    *bytes += op_bytes(comm, ops[i]);
  }
  return kept;
}

static void graph_end(ncclComm_t comm, int k, chorus_op *const *ops, int n, void *stream) {
  struct chorus_trace_state *t = comm->trace;
  if (stamp(comm, (uint32_t)k << 1 | 1, stream) != 0) return;
  graph_launch rec;
  memset(&rec, 0, sizeof rec);
  rec.n = describe_launch(comm, ops, n, rec.d, 8, NULL, NULL, &rec.more, &rec.bytes);
  if (comm->stats && (rec.calls = malloc((size_t)n * sizeof *rec.calls)) != NULL)
    for (int i = 0; i < n; i++)
      rec.calls[i] = (graph_call){ops[i]->func, (uint64_t)op_bytes(comm, ops[i])};
  pthread_mutex_lock(&lock);
  t->graphs[k] = rec; /* before any replay: the graph is still being captured */
  follow(comm);
  pthread_mutex_unlock(&lock);
}

void chorus_trace_gpu_end(ncclComm_t comm, int slot, chorus_op *const *ops, int n, void *stream) {
  struct chorus_trace_state *t = comm->trace;
  if (!t || slot == -1) return;
  if (slot <= -2) {
    graph_end(comm, -2 - slot, ops, n, stream);
    return;
  }
  gpu_launch *g = &t->ring[slot];
  const int was = chorus_dev_current();
  if (was != comm->device) chorus_dev_use(comm->device);
  const int recorded = chorus_dev_event_record(g->end, stream) == 0;
  if (was >= 0 && was != comm->device) chorus_dev_use(was);
  if (!recorded) return;
  g->n = describe_launch(comm, ops, n, g->d, 8, g->prof, g->t_enq, &g->more, &g->bytes);
  pthread_mutex_lock(&lock);
  t->head++;
  follow(comm);
  pthread_mutex_unlock(&lock);
}

/* ---- life --------------------------------------------------------------------------- */

ncclResult_t chorus_trace_open(ncclComm_t comm) {
  const char *pattern = chorus_param_str(CHORUS_P_TRACE);
  const int to_file = comm->traced_by_all && pattern && *pattern && !comm->is_part;
  /* A profiler plugin's KernelCh events and the statistics take GPU calls'
   * times from this file's events too. */
  const int gpu_timed = comm->device >= 0 && (comm->prof || comm->stats);
  if (comm->prof || gpu_timed) comm->cc.tracing = 1;
  if (!to_file && !gpu_timed) return ncclSuccess;
  int64_t offset = 0;
  if (to_file) CHECK(measure_offset(comm, &offset));
  struct chorus_trace_state *t = chorus_calloc(1, sizeof *t);
  if (!t) return chorus_error(ncclSystemError, "CHORUS_TRACE: out of memory");
  t->offset_us = (double)offset / 1e3;
  const uint64_t key[2] = {comm->init.uids[0].secret[0], comm->init.uids[0].secret[1]};
  if (comm->config.commName && comm->config.commName[0])
    snprintf(t->label, sizeof t->label, "%.40s", comm->config.commName);
  else
    snprintf(t->label, sizeof t->label, "%016llx",
             (unsigned long long)chorus_siphash(key, "status label", 12));
  if (comm->device >= 0) {
    const int was = chorus_dev_current();
    chorus_dev_use(comm->device);
    int ok = (t->ring = chorus_calloc(GPU_PENDING, sizeof *t->ring)) != NULL;
    ok = ok && chorus_dev_stream_new(&t->anchor_stream) == 0;
    ok = ok && chorus_dev_event_new_timed(&t->anchor) == 0 && anchor(t) == 0;
    if (!ok) {
      WARN("CHORUS_TRACE: cannot time rank %d's GPU calls (%s); no GPU events", comm->rank,
           chorus_dev_error());
      free_gpu(t);
    } else if ((to_file || comm->stats) && setup_stamps(t) != 0) {
      WARN("CHORUS_TRACE: cannot time rank %d's calls in CUDA graphs (%s); their replays stay "
           "off the timeline and out of the statistics",
           comm->rank, chorus_dev_error());
      free_stamps(t);
    }
    if (was >= 0) chorus_dev_use(was);
  }
  comm->trace = t;
  if (!to_file) return ncclSuccess;
  pthread_mutex_lock(&lock);
  if (!file) {
    char path[4096];
    chorus_log_expand_path(pattern, path, sizeof path);
    if (!(file = fopen(path, "w"))) {
      pthread_mutex_unlock(&lock);
      WARN("CHORUS_TRACE: cannot write %s: %s; no timeline", path, strerror(errno));
      return ncclSuccess;
    }
    fprintf(file, "[\n");
    INFO(CHORUS_INIT, "CHORUS_TRACE: the timeline goes to %s", path);
  }
  users++;
  t->to_file = 1;
  t->slot = next_slot++;
  const chorus_rank_info *me = &comm->topo.info[comm->rank];
  fprintf(file,
          "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n"
          "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"comm "
          "%s\"}},\n"
          "{\"name\":\"chorus_clock\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"comm\":\"%s\","
          "\"rank\":%d,\"nranks\":%d,\"host\":\"%s\",\"os_pid\":%d,\"device\":%d,\"offset_us\":%."
          "3f}},\n",
          comm->rank, comm->rank, comm->rank, t->slot, t->label, comm->rank, t->slot, t->label,
          comm->rank, comm->nranks, me->hostname, (int)me->pid, comm->device, t->offset_us);
  fflush(file);
  pthread_mutex_unlock(&lock);
  comm->cc.tracing = 1;
  return ncclSuccess;
}

void chorus_trace_close(ncclComm_t comm) {
  struct chorus_trace_state *t = comm->trace;
  if (!t) return;
  pthread_t join = 0;
  int stop = 0;
  pthread_mutex_lock(&lock);
  if (t->ring) {
    drain(comm, 1);
    for (int i = 0; i < ngpu; i++)
      if (gpu_comms[i] == comm) gpu_comms[i] = gpu_comms[--ngpu];
  }
  if (t->to_file && --users == 0) {
    if (file) {
      fprintf(file, "{\"name\":\"chorus_end\",\"ph\":\"M\",\"pid\":0,\"args\":{}}\n]\n");
      fclose(file);
      file = NULL;
    }
    next_slot = 0;
  } else if (t->to_file && file) {
    fflush(file);
  }
  if (!ngpu && reader_running) {
    reader_gen++;
    pthread_cond_broadcast(&wake);
    join = reader;
    stop = 1;
    reader_running = 0;
  }
  if (!ngpu) {
    free(gpu_comms);
    gpu_comms = NULL;
    cap_gpu = 0;
  }
  pthread_mutex_unlock(&lock);
  if (stop) pthread_join(join, NULL);
  if (t->dropped)
    WARN("CHORUS_TRACE: %u GPU launches of rank %d were not traced (more than %d in flight)",
         t->dropped, comm->rank, GPU_PENDING);
  if (t->stamps_lost)
    WARN("CHORUS_TRACE: %u GPU timestamps of rank %d's graph replays were overwritten unread "
         "(more than %u in flight)",
         t->stamps_lost, comm->rank, STAMPS);
  comm->trace = NULL;
  comm->cc.tracing = 0;
  if (t->ring) {
    const int was = chorus_dev_current();
    chorus_dev_use(comm->device);
    free_gpu(t);
    if (was >= 0) chorus_dev_use(was);
  }
  chorus_free(t);
}
