/*
 * prof_plugin.c - a profiler plugin as a third party builds one, compiled
 * once per interface version (PROF_VERSION 1..5) into
 * libnccl-profiler-testN.so, depending only on the ABI header and libc.
 *
 * It writes every call the library makes into CHORUS_TEST_PROF_LOG (one
 * line each, under a lock): init with its arguments, start with the event
 * and the fields of its descriptor, record with the state and time, stop,
 * finalize; handles are numbered in start order (parent 0: none); a "%d"
 * in the path is the process's id (a log per process). Its
 * activation mask is CHORUS_TEST_PROF_MASK (default: every event).
 * CHORUS_TEST_PROF_FAIL=1 makes init fail.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/profiler_abi.h"

typedef struct handle {
  int id;
  int type;
} handle;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static int next_id = 1, contexts;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (out) {
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    fflush(out);
  }
  va_end(ap);
}

static int parent_id(void *p) {
  return p ? ((handle *)p)->id : 0;
}

/* A ProxyOp's, ProxyStep's or (net: from version 3) NetPlugin's fields into f. */
static void proxy_fields(int type, const prof_proxy_op *op, const prof_proxy_step *step,
                         const prof_net_plugin *net, char *f, size_t size) {
  if (type == PROF_NET_PLUGIN && net)
    snprintf(f, size, "netid %lld", (long long)net->id);
  else if (type == PROF_PROXY_OP)
    snprintf(f, size, "pid %d channel %d peer %d nsteps %d chunk %d send %d", (int)op->pid,
             op->channel, op->peer, op->nsteps, op->chunk, op->is_send);
  else if (type == PROF_PROXY_STEP)
    snprintf(f, size, "step %d", step->step);
}

static ncclResult_t open_log(void **ctx, int *mask) {
  const char *path = getenv("CHORUS_TEST_PROF_LOG"), *m = getenv("CHORUS_TEST_PROF_MASK");
  if (getenv("CHORUS_TEST_PROF_FAIL")) return ncclInternalError;
  pthread_mutex_lock(&lock);
  if (!out && path) {
    char own[4096]; /* a "%d" in the path: the process's own log */
    const char *at = strstr(path, "%d");
    if (at) snprintf(own, sizeof own, "%.*s%d%s", (int)(at - path), path, (int)getpid(), at + 2);
    out = fopen(at ? own : path, "a");
  }
  contexts++;
  pthread_mutex_unlock(&lock);
  __atomic_store_n(mask, m ? atoi(m) : 4095, __ATOMIC_RELAXED); /* NCCL reads it as it runs */
  *ctx = malloc(1);
  return ncclSuccess;
}

#if PROF_VERSION >= 4
/* Versions 4 and 5: the same arguments, in their own orders. */
static ncclResult_t open_named(void **ctx, int *mask, uint64_t id, const char *name, int nnodes,
                               int nranks, int rank, int has_log) {
  ncclResult_t r = open_log(ctx, mask);
  if (r != ncclSuccess) return r;
  pthread_mutex_lock(&lock);
  say("init v%d id %llx name %s nnodes %d nranks %d rank %d log %d", PROF_VERSION,
      (unsigned long long)id, name ? name : "(null)", nnodes, nranks, rank, has_log);
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}
#endif

/* Handles outlive their stop (a stopped API event is its call's parent):
 * a pool, never freed, whose last slot is shared once it runs out. */
#define POOL 65536
static handle pool[POOL];

static handle *new_handle(int type) {
  handle *h = &pool[next_id < POOL ? next_id : POOL - 1];
  h->id = next_id++;
  h->type = type;
  return h;
}

static ncclResult_t stop_event(void *h) {
  pthread_mutex_lock(&lock);
  say("stop %d", parent_id(h));
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

static ncclResult_t finalize(void *ctx) {
  pthread_mutex_lock(&lock);
  say("finalize");
  free(ctx);
  if (--contexts == 0 && out) {
    fclose(out);
    out = NULL;
  }
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

#if PROF_VERSION == 5 || PROF_VERSION == 4
static ncclResult_t record(void *h, int state, prof_args_v45 *a) {
  pthread_mutex_lock(&lock);
  say("record %d state %d ptimer %llu", parent_id(h), state,
      a ? (unsigned long long)a->ptimer : 0ull);
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}
#else
static ncclResult_t record(void *h, int state, prof_args_v123 *a) {
  pthread_mutex_lock(&lock);
  say("record %d state %d bytes %zu", parent_id(h), state, a ? a->proxy_op.trans_size : 0);
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}
#endif

#if PROF_VERSION == 5
static ncclResult_t init(void **ctx, uint64_t id, int *mask, const char *name, int nnodes,
                         int nranks, int rank, prof_logger_t log) {
  return open_named(ctx, mask, id, name, nnodes, nranks, rank, log != NULL);
}

static ncclResult_t start(void *ctx, void **out_h, prof_descr_v5 *d) {
  (void)ctx;
  pthread_mutex_lock(&lock);
  handle *h = new_handle((int)d->type);
  *out_h = h;
  char f[256] = "";
  switch (d->type) {
  case PROF_GROUP_API:
    snprintf(f, sizeof f, "depth %d graph %d", d->group_api.depth, d->group_api.graph_captured);
    break;
  case PROF_COLL_API:
    snprintf(f, sizeof f, "func %s count %zu dtype %s root %d graph %d", d->coll_api.func,
             d->coll_api.count, d->coll_api.datatype, d->coll_api.root, d->coll_api.graph_captured);
    break;
  case PROF_P2P_API:
    snprintf(f, sizeof f, "func %s count %zu dtype %s graph %d", d->p2p_api.func, d->p2p_api.count,
             d->p2p_api.datatype, d->p2p_api.graph_captured);
    break;
  case PROF_COLL:
    snprintf(f, sizeof f,
             "func %s seq %llu count %zu root %d dtype %s nch %d algo %s proto %s group %d",
             d->coll.func, (unsigned long long)d->coll.seq, d->coll.count, d->coll.root,
             d->coll.datatype, d->coll.nchannels, d->coll.algo, d->coll.proto,
             parent_id(d->coll.parent_group));
    break;
  case PROF_P2P:
    snprintf(f, sizeof f, "func %s count %zu dtype %s peer %d nch %d group %d", d->p2p.func,
             d->p2p.count, d->p2p.datatype, d->p2p.peer, d->p2p.nchannels,
             parent_id(d->p2p.parent_group));
    break;
  case PROF_KERNEL_CH:
    snprintf(f, sizeof f, "channel %d ptimer %llu", d->kernel_ch.channel,
             (unsigned long long)d->kernel_ch.ptimer);
    break;
  default:
    proxy_fields((int)d->type, &d->proxy_op, &d->proxy_step, &d->net_plugin, f, sizeof f);
    break;
  }
  say("start %d type %d parent %d rank %d %s", h->id, (int)d->type, parent_id(d->parent), d->rank,
      f);
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

__attribute__((visibility("default")))
prof_v5 ncclProfiler_v5 = {"chorus-test-v5", init, start, stop_event, record, finalize};

#elif PROF_VERSION == 4
static ncclResult_t init(void **ctx, int *mask, const char *name, uint64_t id, int nnodes,
                         int nranks, int rank, prof_logger_t log) {
  return open_named(ctx, mask, id, name, nnodes, nranks, rank, log != NULL);
}

static ncclResult_t start(void *ctx, void **out_h, prof_descr_v4 *d) {
  (void)ctx;
  pthread_mutex_lock(&lock);
  handle *h = new_handle(d->type);
  *out_h = h;
  char f[256] = "";
  if (d->type == PROF_COLL)
    snprintf(f, sizeof f, "func %s seq %llu count %zu root %d dtype %s nch %d algo %s proto %s",
             d->coll.func, (unsigned long long)d->coll.seq, d->coll.count, d->coll.root,
             d->coll.datatype, d->coll.nchannels, d->coll.algo, d->coll.proto);
  else if (d->type == PROF_P2P)
    snprintf(f, sizeof f, "func %s count %zu dtype %s peer %d nch %d", d->p2p.func, d->p2p.count,
             d->p2p.datatype, d->p2p.peer, d->p2p.nchannels);
  else if (d->type == PROF_KERNEL_CH)
    snprintf(f, sizeof f, "channel %d ptimer %llu", d->kernel_ch.channel,
             (unsigned long long)d->kernel_ch.ptimer);
  else
    proxy_fields(d->type, &d->proxy_op, &d->proxy_step, &d->net_plugin, f, sizeof f);
  say("start %d type %d parent %d rank %d %s", h->id, d->type, parent_id(d->parent), d->rank, f);
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

__attribute__((visibility("default")))
prof_v4 ncclProfiler_v4 = {"chorus-test-v4", init, start, stop_event, record, finalize};

#else
static ncclResult_t init(void **ctx, int *mask) {
  ncclResult_t r = open_log(ctx, mask);
  if (r != ncclSuccess) return r;
  pthread_mutex_lock(&lock);
  say("init v%d", PROF_VERSION);
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

static ncclResult_t start(void *ctx, void **out_h, void *descr) {
  (void)ctx;
  pthread_mutex_lock(&lock);
#if PROF_VERSION == 3
  prof_descr_v3 *d = descr;
#elif PROF_VERSION == 2
  prof_descr_v2 *d = descr;
#else
  prof_descr_v1 *d = descr;
#endif
  handle *h = new_handle(d->type);
  *out_h = h;
  char f[256] = "";
#if PROF_VERSION >= 2
  if (d->type == PROF_COLL)
    snprintf(f, sizeof f, "func %s seq %llu count %zu root %d dtype %s name %s algo %s",
             d->coll.func, (unsigned long long)d->coll.seq, d->coll.count, d->coll.root,
             d->coll.datatype, d->coll.name, d->coll.algo);
  else if (d->type == PROF_P2P)
    snprintf(f, sizeof f, "func %s count %zu dtype %s peer %d name %s", d->p2p.func, d->p2p.count,
             d->p2p.datatype, d->p2p.peer, d->p2p.name);
#else
  if (d->type == PROF_COLL)
    snprintf(f, sizeof f, "func %d seq %llu count %zu root %d dtype %d op %u bytes %zu name %s",
             d->coll.func, (unsigned long long)d->coll.seq, d->coll.count, d->coll.root,
             d->coll.datatype, d->coll.op, d->coll.traffic_bytes, d->coll.name);
  else if (d->type == PROF_P2P)
    snprintf(f, sizeof f, "func %d count %zu dtype %d peer %d name %s", d->p2p.func, d->p2p.count,
             d->p2p.datatype, d->p2p.peer, d->p2p.name);
#endif
#if PROF_VERSION == 3
  const prof_net_plugin *net = &d->net_plugin;
#else
  const prof_net_plugin *net = NULL;
#endif
  if (d->type == PROF_PROXY_OP || d->type == PROF_PROXY_STEP || d->type == PROF_NET_PLUGIN)
    proxy_fields(d->type, &d->proxy_op, &d->proxy_step, net, f, sizeof f);
  say("start %d type %d parent %d rank %d %s", h->id, d->type, parent_id(d->parent), d->rank, f);
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

#if PROF_VERSION == 3
__attribute__((visibility("default")))
prof_v123 ncclProfiler_v3 = {"chorus-test-v3", init, start, stop_event, record, finalize};
#elif PROF_VERSION == 2
__attribute__((visibility("default")))
prof_v123 ncclProfiler_v2 = {"chorus-test-v2", init, start, stop_event, record, finalize};
#else
__attribute__((visibility("default")))
prof_v123 ncclProfiler_v1 = {"chorus-test-v1", init, start, stop_event, record, finalize};
#endif
#endif
