/*
 * bench.c - the timing loop.
 *
 * For every data type, operator and root (-d, -o, -r; "all" loops), the
 * sizes go from -b to -e (times -f, or plus -i). Each size is measured out
 * of place and then in place; for each placement:
 *
 *   1. the buffers are filled with a value that repeating the operation does
 *      not change (check.c), and all ranks meet in a barrier;
 *   2. -w warmup operations, then a second barrier;
 *   3. timing: -n iterations, each of -m operations (inside
 *      ncclGroupStart/End when -m > 1; a thread with several ranks always
 *      issues each operation for all of them in one group), measured with
 *      CLOCK_MONOTONIC around the whole loop by every thread. Host
 *      collectives complete before the call returns, so the wall time of
 *      the loop is the time of the operations. Time per operation = elapsed
 *      / (n * m);
 *   4. the per-operation time is combined over all ranks through the library
 *      (-a: 0 rank 0's, 1 the average, 2 the minimum, 3 the maximum, as
 *      nccl-tests does across its processes and threads);
 *   5. with -c N (default 1): up to N times, fresh inputs, one operation,
 *      every result element compared on the host (check.c); #wrong is the
 *      number of wrong elements summed over all ranks.
 *
 * algbw = bytes / time, with bytes the larger of the send and receive
 * buffers of one rank (nccl-tests' "size"); busbw = algbw * the collective's
 * factor; GB/s are 1e9 bytes per second.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static double op_seconds(pt_thread *t, const pt_case *k, int inplace) {
  const pt_args *a = t->args;
  for (int w = 0; w < a->warmup; w++) pt_issue(t, k, inplace);
  pt_barrier(t);
  double t0 = pt_now();
  for (int it = 0; it < a->iters; it++) {
    if (a->agg > 1) pt_check_nccl(t, 0, ncclGroupStart(), "ncclGroupStart");
    for (int m = 0; m < a->agg; m++) pt_issue(t, k, inplace);
    if (a->agg > 1) {
      pt_call_begin(t); /* the operations run in ncclGroupEnd */
      pt_wait_comms(t, ncclGroupEnd(), t->coll->func);
      pt_call_end(t);
    }
  }
  pt_dev_sync(t); /* GPU calls return once queued */
  double dt = pt_now() - t0;
  long nops = (long)a->iters * a->agg;
  return nops > 0 ? dt / (double)nops : 0;
}

/* Combines one thread's seconds per operation over all ranks (-a). */
static double combine_time(pt_thread *t, double sec) {
  int mode = t->args->average;
  static const ncclRedOp_t ops[4] = {ncclSum, ncclSum, ncclMin, ncclMax};
  for (int i = 0; i < t->nlocal; i++) t->dvals[i] = (mode == 0 && t->ranks[i].rank != 0) ? 0 : sec;
  pt_allreduce_scalar(t, t->dvals, ncclFloat64, ops[mode]);
  double v = t->dvals[0];
  return mode == 1 ? v / t->world->nranks : v;
}

static int64_t checked_wrong(pt_thread *t, const pt_case *k, int inplace) {
  int64_t wrong = -1;
  for (int c = 0; c < t->args->check; c++) {
    uint64_t seed = ++t->rep; /* the same sequence on every thread */
    pt_fill_check(t, k, inplace, seed);
    pt_issue(t, k, inplace);
    pt_check(t, k, inplace, seed);
    for (int i = 0; i < t->nlocal; i++) t->ivals[i] = t->ranks[i].wrong;
    pt_allreduce_scalar(t, t->ivals, ncclInt64, ncclSum);
    wrong = t->ivals[0];
    if (wrong) break;
  }
  return wrong;
}

static void bench_placement(pt_thread *t, const pt_case *k, int inplace, pt_result *res) {
  pt_fill_stable(t, k);
  pt_barrier(t);
  double sec = combine_time(t, op_seconds(t, k, inplace));
  res->time_us = sec * 1e6;
  res->algbw = sec > 0 ? (double)k->bytes / 1e9 / sec : 0;
  res->busbw = res->algbw * t->coll->bus_factor(t->world->nranks);
  res->wrong = checked_wrong(t, k, inplace);
  t->bw_sum += res->busbw;
  t->bw_count++;
  if (res->wrong > 0) t->errors++;
}

static void setup_case(const pt_thread *t, pt_case *k, ncclDataType_t type, int op, int root,
                       size_t bytes) {
  size_t es = pt_type_size(type);
  k->type = type;
  k->op = op;
  k->root = root;
  t->coll->counts(bytes / es, t->world->nranks, &k->c);
  k->bytes = (k->c.send > k->c.recv ? k->c.send : k->c.recv) * es;
}

static void run_size(pt_thread *t, ncclDataType_t type, int op, int root, size_t bytes) {
  pt_case k;
  setup_case(t, &k, type, op, root, bytes);
  pt_result res[2];
  int nres = 0;
  if (t->main) pt_print_row_start(&k, t->coll);
  for (int inplace = 0; inplace <= t->args->inplace; inplace++) {
    bench_placement(t, &k, inplace, &res[nres]);
    if (t->main) pt_print_cell(&res[nres]);
    nres++;
  }
  if (t->main) pt_print_row_end(t, &k, res, nres);
}

static size_t next_size(const pt_args *a, size_t size) {
  size_t next = a->stepfactor > 1 ? (size ? size * a->stepfactor : 1) : size + a->stepbytes;
  return next > size ? next : (size_t)-1; /* overflow ends the loop */
}

/* PreMulSum operators, one per rank, with that rank's scalar. */
static void mulsum_ops(pt_thread *t, ncclDataType_t type, int create) {
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    if (!create) {
      pt_check_nccl(t, i, ncclRedOpDestroy(r->mulsum, r->comm), "ncclRedOpDestroy");
      continue;
    }
    unsigned char scalar[8];
    pt_set(type, scalar, 0, pt_mulsum_scalar(r->rank));
    pt_check_nccl(
        t, i, ncclRedOpCreatePreMulSum(&r->mulsum, scalar, type, ncclScalarHostImmediate, r->comm),
        "ncclRedOpCreatePreMulSum");
  }
}

static void run_sizes(pt_thread *t, ncclDataType_t type, int op, int root) {
  const pt_args *a = t->args;
  if (op == PT_MULSUM) mulsum_ops(t, type, 1);
  for (long cycle = 0; a->cycles == 0 || cycle < a->cycles; cycle++)
    for (size_t s = a->minbytes; s <= a->maxbytes; s = next_size(a, s))
      run_size(t, type, op, root, s);
  if (op == PT_MULSUM) mulsum_ops(t, type, 0);
}

void pt_run_tests(pt_thread *t) {
  const pt_args *a = t->args;
  const pt_coll *coll = t->coll;
  int nops = coll->reduces ? a->nops : 1;
  int r0 = -1, r1 = -1; /* roots: -1 for collectives without one */
  if (coll->rooted) {
    r0 = a->root < 0 ? 0 : a->root;
    r1 = a->root < 0 ? t->world->nranks - 1 : a->root;
  }
  for (int ti = 0; ti < a->ntypes; ti++)
    for (int oi = 0; oi < nops; oi++)
      for (int root = r0; root <= r1; root++)
        run_sizes(t, a->types[ti], coll->reduces ? a->ops[oi] : PT_NONE, root);
}
