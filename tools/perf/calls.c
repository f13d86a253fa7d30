/*
 * calls.c - the NCCL calls of one thread, and what happens when one fails.
 *
 * A thread drives its ranks together: with several ranks per thread (-g),
 * each operation is issued for all of them inside ncclGroupStart/End.
 * Barriers and cross-rank reductions of timings and error counts are
 * ncclAllReduce calls on the communicators under test (there is no MPI).
 *
 * Failures are fatal: the first failing NCCL call prints one line with the
 * error string and ncclGetLastError() and the process exits with status 1,
 * so that peers blocked in a collective with this rank never hang the run
 * (a launcher such as chorusrun or mpirun then stops the other processes).
 * -T <seconds> arms a watchdog that does the same for a call that takes
 * longer than that.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

double pt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t now_ns(void) {
  return (int64_t)(pt_now() * 1e9);
}

void pt_fail(const pt_thread *t, int rank, const char *fmt, ...) {
  (void)t;
  pthread_mutex_lock(&fail_lock);
  char host[256] = "?", msg[2048];
  gethostname(host, sizeof host - 1);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pt_report_newline_if_open();
  printf("%s: Test failure on rank %d: %s\n", host, rank, msg);
  fflush(NULL);
  pt_rdv_cleanup();
  _exit(EXIT_FAILURE); /* other threads may be blocked in NCCL calls */
}

static void fail_nccl(const pt_thread *t, int li, ncclResult_t res, const char *what) {
  const pt_rank *r = &t->ranks[li];
  const char *last = ncclGetLastError(r->comm);
  pt_fail(t, r->rank, "%s failed: '%s' / '%s'", what, ncclGetErrorString(res),
          last && *last ? last : "(no details)");
}

/* Nonblocking communicators (-z 0): waits until every local one is idle. */
static void wait_async(pt_thread *t, const char *what) {
  for (int i = 0; i < t->nlocal; i++) {
    ncclResult_t st;
    for (;;) {
      ncclResult_t res = ncclCommGetAsyncError(t->ranks[i].comm, &st);
      if (res != ncclSuccess) fail_nccl(t, i, res, "ncclCommGetAsyncError");
      if (st != ncclInProgress) break;
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
    if (st != ncclSuccess) fail_nccl(t, i, st, what);
  }
}

void pt_check_nccl(pt_thread *t, int li, ncclResult_t res, const char *what) {
  if (res == ncclSuccess) return;
  if (res == ncclInProgress) return wait_async(t, what);
  fail_nccl(t, li, res, what);
}

void pt_wait_comms(pt_thread *t, ncclResult_t res, const char *what) {
  if (res != ncclSuccess && res != ncclInProgress) fail_nccl(t, 0, res, what);
  if (res == ncclInProgress || t->args->blocking == 0) wait_async(t, what);
}

/* A count, not a clock: a timestamp per call was about 6% of the samples
 * of a host 2-rank 8 B AllReduce, which other libraries' benchmarks do not pay. */
void pt_call_begin(pt_thread *t) {
  __atomic_store_n(&t->calls, t->calls + 1, __ATOMIC_RELAXED);
}
void pt_call_end(pt_thread *t) {
  __atomic_store_n(&t->calls, t->calls + 1, __ATOMIC_RELAXED);
}

static void group_start(pt_thread *t) {
  ncclResult_t res = ncclGroupStart();
  if (res != ncclSuccess) fail_nccl(t, 0, res, "ncclGroupStart");
}

void pt_issue(pt_thread *t, const pt_case *k, int inplace) {
  const pt_coll *coll = t->coll;
  pt_call_begin(t);
  if (t->nlocal > 1) group_start(t);
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    pt_call c = {pt_send_ptr(t, r, k, inplace),
                 pt_recv_ptr(t, r, k, inplace),
                 k->c.param,
                 k->type,
                 ncclSum,
                 k->root,
                 r->rank,
                 t->world->nranks,
                 r->comm,
                 r->stream};
    if (k->op == PT_MULSUM)
      c.op = r->mulsum;
    else if (k->op != PT_NONE)
      c.op = (ncclRedOp_t)k->op;
    pt_check_nccl(t, i, coll->run(&c), coll->func);
  }
  if (t->nlocal > 1) pt_wait_comms(t, ncclGroupEnd(), coll->func);
  pt_call_end(t);
}

void pt_allreduce_bufs(pt_thread *t, void *const *bufs, size_t count, ncclDataType_t type,
                       ncclRedOp_t op) {
  pt_call_begin(t);
  if (t->nlocal > 1) group_start(t);
  for (int i = 0; i < t->nlocal; i++)
    pt_check_nccl(
        t, i,
        ncclAllReduce(bufs[i], bufs[i], count, type, op, t->ranks[i].comm, t->ranks[i].stream),
        "ncclAllReduce (aggregation)");
  if (t->nlocal > 1) pt_wait_comms(t, ncclGroupEnd(), "ncclAllReduce (aggregation)");
  pt_call_end(t);
}

void pt_allreduce_scalar(pt_thread *t, void *vals, ncclDataType_t type, ncclRedOp_t op) {
  size_t es = pt_type_size(type);
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    void *view = pt_mem_begin(r->comm, r->scratch, es, 0);
    memcpy(view, (char *)vals + i * es, es);
    pt_mem_end(r->comm, r->scratch, view, es, 1);
    t->bufs[i] = r->scratch;
  }
  pt_allreduce_bufs(t, t->bufs, 1, type, op);
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    void *view = pt_mem_begin(r->comm, r->scratch, es, 1);
    memcpy((char *)vals + i * es, view, es);
    pt_mem_end(r->comm, r->scratch, view, es, 0);
  }
}

void pt_barrier(pt_thread *t) {
  for (int i = 0; i < t->nlocal; i++) t->ivals[i] = 0;
  pt_allreduce_scalar(t, t->ivals, ncclInt64, ncclSum);
}

/* ---- watchdog (-T) ---------------------------------------------------------- */
/* Every 100 ms the watchdog looks at each thread's call count: a count
 * that is odd (a call in flight) and has not moved for timeout_s seconds
 * is a call that took too long. */
static struct {
  pt_thread *threads;
  int n, timeout_s;
  uint64_t *seen; /* [n] the count last looked at */
  int64_t *since; /* [n] when it was first seen */
} wd;

static void *watchdog(void *arg) {
  (void)arg;
  for (;;) {
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    int64_t now = now_ns();
    for (int i = 0; i < wd.n; i++) {
      pt_thread *t = &wd.threads[i];
      uint64_t c = __atomic_load_n(&t->calls, __ATOMIC_RELAXED);
      if (c != wd.seen[i]) {
        wd.seen[i] = c;
        wd.since[i] = now;
      } else if ((c & 1) && now - wd.since[i] > (int64_t)wd.timeout_s * 1000000000) {
        pt_fail(t, t->ranks[0].rank, "Test timeout: an NCCL call took more than %d s (-T)",
                wd.timeout_s);
      }
    }
  }
  return NULL;
}

void pt_watchdog_start(pt_thread *threads, int n, int timeout_s) {
  if (timeout_s <= 0) return;
  wd.seen = calloc((size_t)n, sizeof *wd.seen);
  wd.since = calloc((size_t)n, sizeof *wd.since);
  if (!wd.seen || !wd.since) {
    free(wd.seen);
    free(wd.since);
    return;
  }
  int64_t now = now_ns();
  for (int i = 0; i < n; i++) wd.since[i] = now;
  wd.threads = threads;
  wd.n = n;
  wd.timeout_s = timeout_s;
  pthread_t th;
  if (pthread_create(&th, NULL, watchdog, NULL) == 0) pthread_detach(th);
}
