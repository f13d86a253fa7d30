/*
 * group.c - the GPU calls of one group (or one call) onto their streams.
 *
 * The planner (plan/plan.h) decides how every call runs; this file gathers
 * what it asks (facts only the device can tell: which buffers every GPU
 * reaches, whether a stream may be joined, whether buffers lie in
 * symmetric windows) and carries the tasks out. Per GPU, in call order:
 * the collectives (a copy-engine collective at its first rank's call, its
 * other calls only counted), then the copy-engine Send/Recv pairs, then
 * each communicator's Send/Recv in kernels, together, communicators in
 * order of first call. GPUs are independent, so a group spanning several
 * GPUs of this process gives each GPU's share to its launcher thread
 * (launchers.h) and all launch at once; the calling thread takes the first
 * GPU's share. Copy-engine programs join streams of several GPUs in an
 * order one thread keeps, and while any stream of the group is being
 * captured into a CUDA graph capture records one thread's launches: then
 * the calling thread launches everything itself.
 */
#include <stdint.h>
#include <string.h>

#include "device/device.h"
#include "gpu/ce.h"
#include "gpu/gpu.h"
#include "gpu/gpu_impl.h"
#include "gpu/launchers.h"
#include "util/alloc.h"
#include "util/check.h"

/* ---- facts ------------------------------------------------------------------ */

/* Streams that name a device's default stream (NULL, cudaStreamLegacy,
 * cudaStreamPerThread) are a different stream on each GPU, which the
 * joins cannot tell apart; a stream being captured would need the joins
 * inside its graph. */
static int stream_ok(void *s) {
  return (uintptr_t)s > 2 && chorus_dev_stream_capturing(s) == 0;
}

static uint32_t probe_facts(void *arg, const chorus_plan_call *c, uint32_t want) {
  (void)arg;
  const chorus_op *op = c->user;
  const chorus_gpu *g = op->cc->gpu;
  uint32_t have = 0;
  if ((want & CHORUS_FACT_STREAM_OK) && stream_ok(op->cuda_stream)) have |= CHORUS_FACT_STREAM_OK;
  if ((want & CHORUS_FACT_SYM_WINDOWS) && chorus_gpu_in_windows(g, op))
    have |= CHORUS_FACT_SYM_WINDOWS;
  /* cudaMalloc or cuMem memory mapped for every GPU of the communicator
   * (pools and host memory are not). */
  if ((want & CHORUS_FACT_SEND_REACH) &&
      chorus_dev_reachable(op->sendbuff, g->devices, g->nranks) == 1)
    have |= CHORUS_FACT_SEND_REACH;
  if ((want & CHORUS_FACT_RECV_REACH) &&
      chorus_dev_reachable(op->recvbuff, g->devices, g->nranks) == 1)
    have |= CHORUS_FACT_RECV_REACH;
  return have;
}

/* The calls as the planner sees them. */
static void describe(chorus_op **ops, size_t n, chorus_plan_call *calls) {
  for (size_t i = 0; i < n; i++) {
    chorus_op *op = ops[i];
    chorus_gpu *g = op->cc->gpu;
    /* The call's number among its communicator's collectives (every rank
     * counts them alike, before anything can fail): the planner matches
     * calls by it, the kernels post it on the call board (a Send/Recv
     * carries the number of the next collective). */
    const uint64_t seq = g->coll_seq;
    if (!chorus_gpu_is_p2p(op)) g->coll_seq++;
    op->meta.seq = seq;
    calls[i] = (chorus_plan_call){&op->cc->plan,
                                  op->func,
                                  op->count,
                                  op->esize,
                                  op->root,
                                  chorus_gpu_call_desc(op),
                                  seq,
                                  op->sendbuff,
                                  op->recvbuff,
                                  op->red.kind == CHORUS_RED_PREMULSUM ? CHORUS_FACT_PREMULSUM : 0,
                                  CHORUS_FACT_PREMULSUM,
                                  op};
  }
}

/* ---- carrying the tasks out --------------------------------------------------- */

/* The share of one GPU: ops[i] whose device is `device` (-1: every op). */
typedef struct share {
  chorus_op **ops;
  const chorus_task *tasks;
  size_t n;
  int device;
  const chorus_kern_zc *zc; /* per call: zero-copy buffers through the group (kind 0: none) */
  int ce;                   /* the share holds copy-engine work (then: every op) */
} share;

static int in_share(const share *s, const chorus_op *op) {
  return s->device < 0 || chorus_gpu_device(op->cc->gpu) == s->device;
}

/* Whether op i is a Send/Recv for the kernels. */
static int kernel_p2p(const share *s, size_t i) {
  return chorus_gpu_is_p2p(s->ops[i]) && s->tasks[i].algo != CHORUS_ALGO_CE;
}

/* The Send/Recv of each communicator of the share, all of one
 * communicator at once, communicators in order of first call. */
static ncclResult_t run_p2p(const share *s) {
  chorus_op *stacksel[64], **sel = stacksel;
  const chorus_task *stackt[64], **tsel = stackt;
  size_t m = 0;
  for (size_t i = 0; i < s->n; i++)
    if (kernel_p2p(s, i) && in_share(s, s->ops[i])) {
      if (m == 64 && sel == stacksel) {
        sel = chorus_malloc(s->n * sizeof *sel);
        tsel = chorus_malloc(s->n * sizeof *tsel);
        if (!sel || !tsel) {
          chorus_free(sel);
          chorus_free(tsel);
          return chorus_error(ncclSystemError, "out of memory running %zu grouped calls", s->n);
        }
        memcpy(sel, stacksel, sizeof stacksel);
        memcpy(tsel, stackt, sizeof stackt);
      }
      tsel[m] = &s->tasks[i];
      sel[m++] = s->ops[i];
    }
  /* Most shares hold one communicator's calls; otherwise each
   * communicator's are moved to the front in turn, in call order. */
  ncclResult_t res = ncclSuccess;
  for (size_t first = 0; first < m && res == ncclSuccess;) {
    const chorus_coll_comm *cc = sel[first]->cc;
    size_t end = first;
    for (size_t j = first; j < m; j++)
      if (sel[j]->cc == cc) {
        chorus_op *o = sel[j];
        const chorus_task *t = tsel[j];
        memmove(&sel[end + 1], &sel[end], (j - end) * sizeof *sel);
        memmove(&tsel[end + 1], &tsel[end], (j - end) * sizeof *tsel);
        sel[end] = o;
        tsel[end++] = t;
      }
    chorus_log_ctx old = chorus_log_ctx_set(cc->log_ctx);
    res = chorus_gpu_enqueue_p2p(cc->gpu, &sel[first], &tsel[first], (int)(end - first));
    chorus_log_ctx_set(old);
    first = end;
  }
  if (sel != stacksel) {
    chorus_free(sel);
    chorus_free(tsel);
  }
  return res;
}

static ncclResult_t run_share(void *arg) {
  const share *s = arg;
  for (size_t i = 0; i < s->n; i++) {
    chorus_op *op = s->ops[i];
    const chorus_task *t = &s->tasks[i];
    if (chorus_gpu_is_p2p(op) || !in_share(s, op)) continue;
    chorus_log_ctx old = chorus_log_ctx_set(op->cc->log_ctx);
    ncclResult_t res;
    if (t->algo == CHORUS_ALGO_CE) {
      res = chorus_gpu_async_error(op->cc->gpu); /* its program runs at its lead */
      if (res == ncclSuccess && t->lead == (int32_t)i)
        res = chorus_gpu_ce_coll_run(s->ops, s->n, s->tasks, i);
    } else {
      res = chorus_gpu_enqueue(op->cc->gpu, op, t, s->zc && s->zc[i].kind ? &s->zc[i] : NULL);
    }
    chorus_log_ctx_set(old);
    if (res != ncclSuccess) return res;
  }
  if (s->ce) CHECK(chorus_gpu_ce_run(s->ops, s->n, s->tasks));
  return run_p2p(s);
}

/* The buffers of every zero-copy call through the group: its partners'. */
static void zerocopy_buffers(chorus_op **ops, const chorus_task *tasks, size_t n,
                             chorus_kern_zc *zc) {
  for (size_t i = 0; i < n; i++) {
    chorus_kern_zc *d = &zc[i];
    memset(d, 0, sizeof *d);
    if (tasks[i].algo != CHORUS_ALGO_ZEROCOPY || tasks[i].peer_call[0] < 0) continue;
    const chorus_gpu *g = ops[i]->cc->gpu;
    chorus_gpu_zc_shape(ops[i], &tasks[i], g->nranks, d);
    for (int p = 0; p < g->nranks; p++) {
      const chorus_op *o = ops[tasks[i].peer_call[p]];
      d->send[p] = o->sendbuff;
      d->recv[p] = o->recvbuff;
    }
  }
}

/* What the planner's choice for a call depends on, besides the
 * communicator's settings, when it looked at no fact and no partner
 * (chorus_task.depends): its size and shape, what its buffers are
 * (alignment, in place, PreMulSum), and whether it was planned with a
 * group. Never 0. */
static uint64_t memo_key(const chorus_plan_call *c, int group) {
  uint64_t k = (uint64_t)c->count * 131 + c->esize;
  k = k * 32 + ((uintptr_t)c->send & 15 ? 1 : 0) + ((uintptr_t)c->recv & 15 ? 2 : 0) +
      (c->send == c->recv ? 4 : 0) + (c->facts & CHORUS_FACT_PREMULSUM ? 8 : 0) + (group ? 16 : 0);
  return k | 1ull << 63;
}

/* Plans the calls, from each communicator's memo of its last task per
 * function where every call has one: calls repeat their shapes, and this
 * spares the rule walks. */
static int plan(chorus_plan_call *calls, size_t n, const chorus_plan_probe *probe,
                chorus_task *tasks, char *err, size_t errlen) {
  const int group = n >= 2 && n <= 1024; /* as chorus_plan_group decides */
  size_t hits = 0;
  for (size_t i = 0; i < n && hits == i; i++) {
    const chorus_gpu *g = ((chorus_op *)calls[i].user)->cc->gpu;
    if (g->memo[calls[i].func].key != memo_key(&calls[i], group)) break;
    tasks[i] = g->memo[calls[i].func].task;
    hits++;
  }
  if (hits == n) {
    chorus_plan_rounds(calls, n, tasks);
    return 0;
  }
  if (chorus_plan_group(calls, n, probe, tasks, err, errlen) != 0) return -1;
  for (size_t i = 0; i < n; i++) {
    chorus_gpu *g = ((chorus_op *)calls[i].user)->cc->gpu;
    g->memo[calls[i].func].key = tasks[i].depends ? 0 : memo_key(&calls[i], group);
    g->memo[calls[i].func].task = tasks[i];
  }
  return 0;
}

#define STACK_OPS 8

ncclResult_t chorus_gpu_run_ops(chorus_op **ops, size_t n) {
  chorus_plan_call stackc[STACK_OPS] = {{0}}, *calls = stackc; /* (all written by describe) */
  chorus_task stackt[STACK_OPS], *tasks = stackt;
  chorus_kern_zc *zc = NULL;
  ncclResult_t res = ncclSuccess;
  if (n > STACK_OPS) {
    calls = chorus_malloc(n * sizeof *calls);
    tasks = chorus_malloc(n * sizeof *tasks);
    if (!calls || !tasks) {
      res = chorus_error(ncclSystemError, "out of memory planning %zu grouped calls", n);
      goto out;
    }
  }
  describe(ops, n, calls);
  const chorus_plan_probe probe = {probe_facts, NULL};
  char err[320];
  if (plan(calls, n, &probe, tasks, err, sizeof err) != 0) {
    res = chorus_error(ncclInvalidUsage, "rank %d: %s", chorus_gpu_rank(ops[0]->cc->gpu), err);
    goto out;
  }
  int devices[CHORUS_LAUNCHERS_MAX], ndev = 0, spread = 1, ce = 0, by_group = 0;
  for (size_t i = 0; i < n; i++) {
    ce |= tasks[i].algo == CHORUS_ALGO_CE;
    by_group |= tasks[i].algo == CHORUS_ALGO_ZEROCOPY && tasks[i].peer_call[0] >= 0;
    const int d = chorus_gpu_device(ops[i]->cc->gpu);
    int known = 0;
    for (int k = 0; k < ndev && !known; k++) known = devices[k] == d;
    if (known || !spread) continue;
    if (ndev == CHORUS_LAUNCHERS_MAX)
      spread = 0;
    else
      devices[ndev++] = d;
  }
  if (by_group) {
    if (!(zc = chorus_malloc(n * sizeof *zc))) {
      res = chorus_error(ncclSystemError, "out of memory running %zu grouped calls", n);
      goto out;
    }
    zerocopy_buffers(ops, tasks, n, zc);
  }
  spread = spread && ndev > 1 && !ce && chorus_launchers_enabled();
  for (size_t i = 0; i < n && spread; i++) /* once per stream where calls share one */
    if ((i == 0 || ops[i]->cuda_stream != ops[i - 1]->cuda_stream) &&
        chorus_dev_stream_capturing(ops[i]->cuda_stream) != 0)
      spread = 0;
  if (!spread) {
    share all = {ops, tasks, n, -1, zc, ce};
    res = run_share(&all);
  } else {
    share shares[CHORUS_LAUNCHERS_MAX];
    chorus_launch_job jobs[CHORUS_LAUNCHERS_MAX];
    memset(jobs, 0, sizeof jobs);
    for (int k = 0; k < ndev; k++) {
      shares[k] = (share){ops, tasks, n, devices[k], zc, 0};
      jobs[k].device = devices[k];
      jobs[k].run = run_share;
      jobs[k].arg = &shares[k];
    }
    res = chorus_launchers_run(jobs, ndev);
  }
out:
  if (calls != stackc) chorus_free(calls);
  if (tasks != stackt) chorus_free(tasks);
  chorus_free(zc);
  return res;
}
