/*
 * check.c - buffer pointers, data initialisation and result checking.
 *
 * Before timing, buffers hold a value that no number of repetitions changes
 * (0, or 1 for products), so in-place runs never drift into infinities or
 * denormals that would skew host timings. For the check, every rank writes
 * its generated input (data.c) and fills its result area with a sentinel
 * that is never a valid result; after one operation each rank compares every
 * result element with the value computed on the host from the inputs of all
 * ranks (each rank regenerates any rank's input from the shared seed).
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static size_t max_sz(size_t a, size_t b) {
  return a > b ? a : b;
}

void *pt_send_ptr(const pt_thread *t, const pt_rank *r, const pt_case *k, int inplace) {
  (void)t;
  if (!inplace) return r->send;
  return (char *)r->recv + k->c.send_inplace * (size_t)r->rank * pt_type_size(k->type);
}

void *pt_recv_ptr(const pt_thread *t, const pt_rank *r, const pt_case *k, int inplace) {
  (void)t;
  if (!inplace) return r->recv;
  return (char *)r->recv + k->c.recv_inplace * (size_t)r->rank * pt_type_size(k->type);
}

/* n elements of value v. */
static void fill_region(ncclComm_t comm, ncclDataType_t type, void *p, size_t n, double v) {
  unsigned char unit[16];
  pt_set(type, unit, 0, v);
  pt_mem_fill(comm, p, n * pt_type_size(type), unit, pt_type_size(type));
}

void pt_fill_stable(pt_thread *t, const pt_case *k) {
  double v = k->op == PT_PROD ? 1 : 0;
  size_t area = max_sz(k->c.send, k->c.recv);
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    fill_region(r->comm, k->type, r->send, k->c.send, v);
    fill_region(r->comm, k->type, r->recv, area, v);
  }
}

static void gen_for(const pt_thread *t, const pt_case *k, uint64_t seed, pt_gen *g) {
  if (pt_gen_init(g, k->type, t->coll->reduces ? k->op : PT_NONE, t->world->nranks, seed))
    pt_fail(t, t->ranks[0].rank, "out of memory preparing the check");
}

/* Runs fn(ctx, k) for every k in [0, n): k = 0 on the calling thread,
 * every other on a thread of its own (on the caller's too where none can
 * be had), then joins them. */
typedef struct thread_arg {
  void (*fn)(void *ctx, int k);
  void *ctx;
  int k;
} thread_arg;

static void *thread_main(void *arg) {
  const thread_arg *a = arg;
  a->fn(a->ctx, a->k);
  return NULL;
}

static void on_threads(int n, void (*fn)(void *, int), void *ctx) {
  thread_arg *args = calloc((size_t)n, sizeof *args);
  pthread_t *ids = calloc((size_t)n, sizeof *ids);
  char *started = calloc((size_t)n, 1);
  const int threads = args && ids && started;
  for (int k = 1; k < n && threads; k++) {
    args[k] = (thread_arg){fn, ctx, k};
    started[k] = pthread_create(&ids[k], NULL, thread_main, &args[k]) == 0;
  }
  for (int k = 0; k < n; k++)
    if (!threads || !started[k]) fn(ctx, k);
  for (int k = 1; k < n && threads; k++)
    if (started[k]) pthread_join(ids[k], NULL);
  free(args);
  free(ids);
  free(started);
}

/* Runs fn over [0, n) in parts of at least PART_MIN elements, one thread
 * each, up to PARTS_MAX and the CPUs there are: generating inputs and
 * checking results element by element is most of a large check's time. */
#define PART_MIN  ((size_t)1 << 20)
#define PARTS_MAX 8

typedef struct parts {
  void (*fn)(void *ctx, size_t i0, size_t i1, int part);
  void *ctx;
  size_t n;
  int count;
} parts;

static void run_part(void *arg, int k) {
  const parts *p = arg;
  const size_t n = p->n, c = (size_t)p->count;
  p->fn(p->ctx, n * (size_t)k / c, n * (size_t)(k + 1) / c, k);
}

static int parts_for(size_t n) {
  static int ncpu = 0; /* threads look at once: the same answer */
  int cpus = __atomic_load_n(&ncpu, __ATOMIC_RELAXED);
  if (cpus <= 0) {
    cpu_set_t set; /* the CPUs this thread may run on (a launcher may leave it few) */
    CPU_ZERO(&set);
    long c = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (c < 1) c = sysconf(_SC_NPROCESSORS_ONLN);
    cpus = c < 1 ? 1 : c > PARTS_MAX ? PARTS_MAX : (int)c;
    __atomic_store_n(&ncpu, cpus, __ATOMIC_RELAXED);
  }
  size_t count = n / PART_MIN;
  return count < 1 ? 1 : count > (size_t)cpus ? cpus : (int)count;
}

static void parallel(size_t n, void (*fn)(void *, size_t, size_t, int), void *ctx) {
  parts p = {fn, ctx, n, parts_for(n)};
  on_threads(p.count, run_part, &p);
}

typedef struct fill_ctx {
  const pt_gen *g;
  int rank;
  void *view;
} fill_ctx;

static void fill_part(void *arg, size_t i0, size_t i1, int part) {
  const fill_ctx *f = arg;
  (void)part;
  pt_gen_fill_range(f->g, f->rank, f->view, i0, i1);
}

static void write_input(const pt_gen *g, pt_rank *r, void *p, size_t n) {
  size_t bytes = n * pt_type_size(g->type);
  void *view = pt_mem_begin(r->comm, p, bytes, 0);
  fill_ctx f = {g, r->rank, view};
  parallel(n, fill_part, &f);
  pt_mem_end(r->comm, p, view, bytes, 1);
}

static void write_sentinel(pt_rank *r, ncclDataType_t type, void *p, size_t n) {
  size_t bytes = n * pt_type_size(type);
  void *view = pt_mem_begin(r->comm, p, bytes, 0);
  pt_set_sentinel(type, view, n);
  pt_mem_end(r->comm, p, view, bytes, 1);
}

/* A fill or a check, which each local rank does for itself; with several
 * ranks per thread (-g) each gets a helper thread (on_threads), so that
 * generating and comparing on the host (most of a -g 4 check's time) runs
 * in parallel. */
typedef struct rank_job {
  pt_thread *t;
  const pt_case *k;
  const pt_gen *g;
  int inplace;
} rank_job;

static void fill_job(void *arg, int i) {
  const rank_job *j = arg;
  pt_rank *r = &j->t->ranks[i];
  const pt_case *k = j->k;
  /* In place, the input lies inside the result buffer: sentinel first. */
  write_sentinel(r, k->type, r->recv, j->inplace ? max_sz(k->c.send, k->c.recv) : k->c.recv);
  write_input(j->g, r, pt_send_ptr(j->t, r, k, j->inplace), k->c.send);
}

void pt_fill_check(pt_thread *t, const pt_case *k, int inplace, uint64_t seed) {
  pt_gen g;
  gen_for(t, k, seed, &g);
  rank_job job = {t, k, &g, inplace};
  on_threads(t->nlocal, fill_job, &job);
  pt_gen_free(&g);
}

static int is_wrong(const pt_gen *g, const void *buf, size_t j, double exp, double tol) {
  if (!pt_type_is_float(g->type)) return pt_get_int(g->type, buf, j) != (int64_t)exp;
  double got = pt_get(g->type, buf, j);
  return !(fabs(got - exp) <= tol); /* NaN (the sentinel) is always wrong */
}

static void report_first(const pt_thread *t, const pt_rank *r, const pt_case *k, size_t j,
                         const void *buf, double exp) {
  fprintf(stderr, "# rank %d: %s %s %s, %zu bytes: element %zu is %.9g, expected %.9g\n", r->rank,
          t->coll->name, pt_type_name(k->type), pt_op_name(k->op), k->bytes, j,
          pt_get(k->type, buf, j), exp);
}

/* Test hook: CHORUS_PERF_INJECT_ERROR=1 spoils rank 0's first result element,
 * to prove that the check and the exit status catch it. */
static void maybe_inject(const pt_rank *r, const pt_case *k, void *view) {
  static int cached = -1; /* rank threads look at once */
  int inject = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (inject < 0) {
    const char *e = getenv("CHORUS_PERF_INJECT_ERROR");
    inject = e && *e && *e != '0';
    __atomic_store_n(&cached, inject, __ATOMIC_RELAXED);
  }
  if (inject && r->rank == 0 && k->c.recv > 0) pt_set_sentinel(k->type, view, 1);
}

typedef struct check_ctx {
  const pt_thread *t;
  const pt_rank *r;
  const pt_case *k;
  const pt_gen *g;
  const void *view;
  double tol;
  int64_t wrong[PARTS_MAX];
  size_t first[PARTS_MAX]; /* each part's first wrong element */
} check_ctx;

/* What element j of rank r's result should be. */
static double expected(const check_ctx *c, size_t j) {
  pt_src src;
  c->t->coll->source(&c->k->c, c->r->rank, c->t->world->nranks, c->k->root, j, &src);
  return src.rank == PT_ALL_RANKS ? pt_gen_reduced(c->g, src.index)
                                  : (double)pt_gen_int(c->g, src.rank, src.index);
}

static void check_part(void *arg, size_t j0, size_t j1, int part) {
  check_ctx *c = arg;
  int64_t wrong = 0;
  size_t first = 0;
  for (size_t j = j0; j < j1; j++)
    if (is_wrong(c->g, c->view, j, expected(c, j), c->tol) && wrong++ == 0) first = j;
  c->wrong[part] = wrong;
  c->first[part] = first;
}

static int64_t check_rank(pt_thread *t, pt_rank *r, const pt_case *k, const pt_gen *g,
                          int inplace) {
  const pt_coll *coll = t->coll;
  pt_src src;
  if (k->c.recv == 0 || !coll->source(&k->c, r->rank, t->world->nranks, k->root, 0, &src)) return 0;
  void *p = pt_recv_ptr(t, r, k, inplace);
  size_t bytes = k->c.recv * pt_type_size(k->type);
  void *view = pt_mem_begin(r->comm, p, bytes, 1);
  maybe_inject(r, k, view);
  check_ctx c = {t, r, k, g, view, pt_tolerance(g), {0}, {0}};
  parallel(k->c.recv, check_part, &c);
  int64_t wrong = 0;
  int at = -1; /* the part with the first wrong element */
  for (int part = 0; part < PARTS_MAX; part++) {
    wrong += c.wrong[part];
    if (c.wrong[part] && at < 0) at = part;
  }
  if (at >= 0) report_first(t, r, k, c.first[at], view, expected(&c, c.first[at]));
  pt_mem_end(r->comm, p, view, bytes, 0);
  return wrong;
}

static void check_job(void *arg, int i) {
  const rank_job *j = arg;
  j->t->ranks[i].wrong = check_rank(j->t, &j->t->ranks[i], j->k, j->g, j->inplace);
}

int64_t pt_check(pt_thread *t, const pt_case *k, int inplace, uint64_t seed) {
  pt_gen g;
  gen_for(t, k, seed, &g);
  rank_job job = {t, k, &g, inplace};
  on_threads(t->nlocal, check_job, &job);
  int64_t total = 0;
  for (int i = 0; i < t->nlocal; i++) total += t->ranks[i].wrong;
  pt_gen_free(&g);
  return total;
}
