/*
 * group.c - the GPU calls of one group (or one call) onto their streams.
 *
 * Per GPU, in call order: the collectives, then each communicator's
 * Send/Recv together (p2p.c), communicators in order of first call. Calls
 * whose every end is in the group may go on the copy engine (ce.h): a
 * Broadcast, AllGather or AlltoAll at its first rank's call, Send/Recv
 * pairs before the kernels' Send/Recv; then the calling thread launches
 * for all GPUs. GPUs are independent, so a group spanning several GPUs of
 * this process gives each GPU's share to its launcher thread
 * (launchers.h) and all launch at once; the calling thread takes the
 * first GPU's share. While any stream of the group is being captured
 * into a CUDA graph, the calling thread launches everything itself:
 * capture then records one thread's launches, and graph replays cost no
 * launches anyway.
 */
#include <string.h>

#include "device/device.h"
#include "gpu/ce.h"
#include "gpu/gpu.h"
#include "gpu/launchers.h"
#include "util/alloc.h"
#include "util/check.h"

/* The share of one GPU: ops[i] whose device is `device` (-1: every op);
 * dir[i]: how op i runs zero-copy (NULL: none does); on the copy engine
 * (NULL: none goes; else the share holds every op): pair[i], the partner
 * of Send/Recv i, and lead[i], the first rank's call of collective i, or
 * -1. */
typedef struct share {
  chorus_op **ops;
  size_t n;
  int device;
  const chorus_kern_direct *dir;
  const long *pair, *lead;
} share;

static int in_share(const share *s, const chorus_op *op) {
  return s->device < 0 || chorus_gpu_device(op->cc->gpu) == s->device;
}

/* Whether op i is a Send/Recv for the kernels. */
static int kernel_p2p(const share *s, size_t i) {
  return chorus_gpu_is_p2p(s->ops[i]) && !(s->pair && s->pair[i] >= 0);
}

/* The Send/Recv of each communicator of the share, all of one
 * communicator at once. */
static ncclResult_t run_p2p(const share *s) {
  chorus_op *stacksel[64], **sel = stacksel;
  ncclResult_t res = ncclSuccess;
  for (size_t i = 0; i < s->n && res == ncclSuccess; i++) {
    chorus_op *op = s->ops[i];
    if (!kernel_p2p(s, i) || !in_share(s, op)) continue;
    int first = 1;
    for (size_t j = 0; j < i && first; j++)
      if (kernel_p2p(s, j) && s->ops[j]->cc == op->cc) first = 0;
    if (!first) continue;
    if (sel == stacksel && s->n > 64 && !(sel = chorus_malloc(s->n * sizeof *sel)))
      return chorus_error(ncclSystemError, "out of memory running %zu grouped calls", s->n);
    int nsel = 0;
    for (size_t j = i; j < s->n; j++)
      if (kernel_p2p(s, j) && s->ops[j]->cc == op->cc) sel[nsel++] = s->ops[j];
    chorus_log_ctx old = chorus_log_ctx_set(op->cc->log_ctx);
    res = chorus_gpu_enqueue_p2p(op->cc->gpu, sel, nsel);
    chorus_log_ctx_set(old);
  }
  if (sel != stacksel) chorus_free(sel);
  return res;
}

static ncclResult_t run_share(void *arg) {
  const share *s = arg;
  for (size_t i = 0; i < s->n; i++) {
    chorus_op *op = s->ops[i];
    if (chorus_gpu_is_p2p(op) || !in_share(s, op)) continue;
    chorus_log_ctx old = chorus_log_ctx_set(op->cc->log_ctx);
    ncclResult_t res;
    if (s->lead && s->lead[i] >= 0) {
      res = chorus_gpu_enqueue_elsewhere(op->cc->gpu);
      if (res == ncclSuccess && s->lead[i] == (long)i)
        res = chorus_gpu_ce_coll_run(s->ops, s->n, s->lead, i);
    } else {
      res = chorus_gpu_enqueue(op->cc->gpu, op, s->dir ? &s->dir[i] : NULL);
    }
    chorus_log_ctx_set(old);
    if (res != ncclSuccess) return res;
  }
  if (s->pair) CHECK(chorus_gpu_ce_run(s->ops, s->n, s->pair));
  return run_p2p(s);
}

ncclResult_t chorus_gpu_run_ops(chorus_op **ops, size_t n) {
  int devices[CHORUS_LAUNCHERS_MAX], ndev = 0, spread = 1;
  for (size_t i = 0; i < n && spread; i++) {
    const int d = chorus_gpu_device(ops[i]->cc->gpu);
    int known = 0;
    for (int k = 0; k < ndev && !known; k++) known = devices[k] == d;
    if (known) continue;
    if (ndev == CHORUS_LAUNCHERS_MAX)
      spread = 0;
    else
      devices[ndev++] = d;
  }
  /* Several GPUs of this process: calls that every rank of their
   * communicator makes in this group may go zero-copy. */
  chorus_kern_direct stackdir[8], *dir = NULL;
  if (ndev > 1 && (dir = n <= 8 ? stackdir : chorus_malloc(n * sizeof *dir)))
    chorus_gpu_direct_group(ops, n, dir);
  /* Copy-engine programs join streams of several GPUs in an order that one
   * thread keeps (ce.h); they move large calls, so one thread's launches
   * cost nothing that counts. */
  long stackce[16], *pair = NULL, *lead = NULL;
  if (ndev > 1 && (pair = 2 * n <= 16 ? stackce : chorus_malloc(2 * n * sizeof *pair))) {
    lead = pair + n;
    const size_t pairs = chorus_gpu_ce_group(ops, n, pair);
    if (pairs + chorus_gpu_ce_coll_group(ops, n, lead) == 0) {
      if (pair != stackce) chorus_free(pair);
      pair = lead = NULL;
    }
  }
  spread = spread && ndev > 1 && !pair && chorus_launchers_enabled();
  for (size_t i = 0; i < n && spread; i++)
    if (chorus_dev_stream_capturing(ops[i]->cuda_stream) != 0) spread = 0;
  ncclResult_t res;
  if (!spread) {
    share all = {ops, n, -1, dir, pair, lead};
    res = run_share(&all);
  } else {
    share shares[CHORUS_LAUNCHERS_MAX];
    chorus_launch_job jobs[CHORUS_LAUNCHERS_MAX];
    memset(jobs, 0, sizeof jobs);
    for (int k = 0; k < ndev; k++) {
      shares[k] = (share){ops, n, devices[k], dir, NULL, NULL};
      jobs[k].device = devices[k];
      jobs[k].run = run_share;
      jobs[k].arg = &shares[k];
    }
    res = chorus_launchers_run(jobs, ndev);
  }
  if (dir != stackdir) chorus_free(dir);
  if (pair != stackce) chorus_free(pair);
  return res;
}
