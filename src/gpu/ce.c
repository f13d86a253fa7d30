/*
 * ce.c - which calls of a group run on the copy engine, and running the
 * programs that move them (ce.h; the programs: ce_plan.c).
 *
 * Both ends of every transfer are in the group, so the group decides for
 * all of them at once and they agree; what is left (small, mismatched, a
 * peer outside the group, buffers that overlap another transfer's) runs in
 * the kernels as before. Nothing waits on the host.
 */
#include <stdint.h>
#include <string.h>

#include "device/device.h"
#include "algo/algos.h"
#include "gpu/ce.h"
#include "gpu/gpu.h"
#include "gpu/gpu_impl.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/log.h"

ncclResult_t chorus_gpu_ce_exec(const chorus_gpu_ce_step *steps, size_t nsteps,
                                void *const *streams, const int *devices, const char *what) {
  const int saved = chorus_dev_current();
  size_t k = 0;
  for (; k < nsteps; k++) {
    const chorus_gpu_ce_step *s = &steps[k];
    /* an event belongs to the GPU of the stream it is recorded on */
    const int dev = devices[s->of < 0 ? s->on : s->of];
    if (chorus_dev_use(dev) != 0) break;
    if (s->of < 0 ? chorus_dev_copy(s->dst, s->src, s->bytes, streams[s->on]) != 0
                  : chorus_dev_stream_wait(streams[s->on], streams[s->of]) != 0)
      break;
  }
  if (saved >= 0) chorus_dev_use(saved);
  if (k == nsteps) return ncclSuccess;
  return chorus_error(ncclUnhandledCudaError, "%s on the copy engine (%s, GPU %d): %s", what,
                      steps[k].of < 0 ? "a copy" : "joining two GPUs' streams",
                      devices[steps[k].of < 0 ? steps[k].on : steps[k].of], chorus_dev_error());
}

/* ---- Send/Recv ------------------------------------------------------------ */

/* Call i as a copy program sees it: its stream is its own index
 * (streams_of), so calls on one stream name it twice, which the joins
 * allow (a stream waiting for itself is nothing). */
static chorus_gpu_ce_call call_of(chorus_op **ops, size_t i) {
  const chorus_op *op = ops[i];
  const int send = op->func == CHORUS_FUNC_SEND;
  return (chorus_gpu_ce_call){send, op->count * op->esize, send ? op->sendbuff : op->recvbuff,
                              (int)i};
}

/* The streams and GPUs of ops[] by index: i, ops[i]'s stream; n + i, the
 * side stream of its communicator's GPU (NULL until side_stream made it). */
static int streams_of(chorus_op **ops, size_t n, void ***streams, int **devices) {
  *streams = chorus_calloc(2 * n, sizeof **streams);
  *devices = chorus_calloc(2 * n, sizeof **devices);
  if (!*streams || !*devices) return -1;
  for (size_t i = 0; i < n; i++) {
    (*streams)[i] = ops[i]->cuda_stream;
    (*streams)[n + i] = ops[i]->cc->gpu->side_stream;
    (*devices)[i] = (*devices)[n + i] = chorus_gpu_device(ops[i]->cc->gpu);
  }
  return 0;
}

/* Makes g's side stream, once. */
static ncclResult_t side_stream(chorus_gpu *g) {
  if (g->side_stream) return ncclSuccess;
  const int saved = chorus_dev_current();
  int rc = chorus_dev_use(chorus_gpu_device(g));
  if (rc == 0) rc = chorus_dev_stream_new(&g->side_stream);
  if (saved >= 0) chorus_dev_use(saved);
  if (rc == 0) return ncclSuccess;
  return chorus_error(ncclUnhandledCudaError,
                      "rank %d: creating a second stream on GPU %d for the copy engine: %s",
                      g->rank, chorus_gpu_device(g), chorus_dev_error());
}

ncclResult_t chorus_gpu_ce_run(chorus_op **ops, size_t n, const chorus_task *tasks) {
  for (size_t i = 0; i < n; i++)
    if (tasks[i].pair >= 0) CHECK(chorus_gpu_async_error(ops[i]->cc->gpu));
  chorus_gpu_ce_call *c = chorus_calloc(n, sizeof *c);
  chorus_gpu_ce_step *steps = chorus_calloc(3 * n, sizeof *steps);
  long *pair = chorus_calloc(n, sizeof *pair);
  void **streams = NULL;
  int *devices = NULL;
  ncclResult_t res = ncclSuccess;
  if (!c || !steps || !pair || streams_of(ops, n, &streams, &devices) != 0) {
    res = chorus_error(ncclSystemError, "out of memory queueing %zu Send/Recv", n);
    goto out;
  }
  for (size_t i = 0; i < n; i++) { /* the pairs, as the planner matched them */
    pair[i] = tasks[i].pair;
    if (pair[i] >= 0) c[i] = call_of(ops, i);
  }
  const size_t nsteps = chorus_gpu_ce_plan_pairs(c, n, pair, steps);
  res = chorus_gpu_ce_exec(steps, nsteps, streams, devices, "ncclSend/ncclRecv");
  for (size_t i = 0; i < n && res == ncclSuccess; i++) /* each pair's bytes, at both ends */
    if (pair[i] >= 0 && ops[i]->func == CHORUS_FUNC_SEND) {
      chorus_op *r = ops[pair[i]];
      chorus_gpu_moved(ops[i]->cc->gpu, ops[i]->root, c[i].bytes, 0);
      chorus_gpu_moved(r->cc->gpu, r->root, 0, c[i].bytes);
    }
  for (size_t i = 0; i < n && res == ncclSuccess; i++) {
    chorus_gpu *g = ops[i]->cc->gpu;
    if (pair[i] < 0 || ops[i]->func != CHORUS_FUNC_SEND || g->ce_told) continue;
    g->ce_told = 1;
    INFO(CHORUS_P2P | CHORUS_TUNING,
         "rank %d: ncclSend of %zu bytes to rank %d (GPU %d, this process) runs on the copy "
         "engine; so do later ones where the rules say so with both ends in one group "
         "(NCCL_ALGO=sendrecv:^copyengine: never)",
         g->rank, c[i].bytes, ops[i]->root, devices[pair[i]]);
  }
out:
  chorus_free(pair);
  chorus_free(c);
  chorus_free(steps);
  chorus_free(streams);
  chorus_free(devices);
  return res;
}

/* ---- Broadcast, AllGather, AlltoAll ----------------------------------------- */

/* The program of the collective whose ranks' calls are ops[i..]: steps
 * (allocated) and their number, or an error. */
static ncclResult_t coll_program(chorus_op **ops, size_t n, const chorus_task *tasks, size_t i,
                                 chorus_gpu_ce_step **steps, size_t *nsteps) {
  const chorus_op *first = ops[i];
  const int np = first->cc->gpu->nranks;
  chorus_gpu_ce_bcast b;
  chorus_gpu_ce_xchg x;
  memset(&b, 0, sizeof b);
  memset(&x, 0, sizeof x);
  b.nranks = x.nranks = np;
  b.root = first->root;
  b.bytes = x.block = first->count * first->esize;
  b.chunk = first->cc->gpu->ce_chunk;
  x.alltoall = first->func == CHORUS_FUNC_ALLTOALL;
  for (size_t j = i; j < n && j < i + (size_t)np; j++) {
    const int p = ops[j]->cc->gpu->rank;
    if (tasks[j].lead != (int32_t)i)
      return chorus_error(ncclInternalError, "copy-engine plan mixed up");
    CHECK(chorus_gpu_async_error(ops[j]->cc->gpu));
    b.stream[p] = x.stream[p] = (int)j;
    x.side[p] = -1;
    if (first->func != CHORUS_FUNC_BROADCAST) {
      CHECK(side_stream(ops[j]->cc->gpu)); /* for the own block, unless in place */
      x.side[p] = (int)(n + j);
    }
    b.recv[p] = x.recv[p] = ops[j]->recvbuff;
    x.send[p] = ops[j]->sendbuff;
    if (p == b.root) b.send = ops[j]->sendbuff;
  }
  const int bcast = first->func == CHORUS_FUNC_BROADCAST;
  *nsteps = bcast ? chorus_gpu_ce_plan_bcast(&b, NULL) : chorus_gpu_ce_plan_xchg(&x, NULL);
  *steps = chorus_calloc(*nsteps ? *nsteps : 1, sizeof **steps);
  if (!*steps) return chorus_error(ncclSystemError, "out of memory queueing a copy-engine program");
  if (bcast)
    chorus_gpu_ce_plan_bcast(&b, *steps);
  else
    chorus_gpu_ce_plan_xchg(&x, *steps);
  return ncclSuccess;
}

/* The bytes of the collective whose ranks' calls are ops[i..], at both
 * ends of every copy: a Broadcast's buffer along its chain from the root,
 * an AllGather's or AlltoAll's block between every two ranks. */
static void count_coll(chorus_op **ops, size_t n, size_t i) {
  const chorus_op *first = ops[i];
  const int np = first->cc->gpu->nranks;
  const uint64_t bytes = first->count * first->esize;
  chorus_gpu *g[CHORUS_KERN_MAX_RANKS] = {NULL};
  for (size_t j = i; j < n && j < i + (size_t)np; j++) g[ops[j]->cc->gpu->rank] = ops[j]->cc->gpu;
  for (int r = 0; r < np; r++) {
    if (!g[r]) return;
    if (first->func != CHORUS_FUNC_BROADCAST) {
      for (int p = 0; p < np; p++) chorus_gpu_moved(g[r], p, bytes, bytes);
      continue;
    }
    const int h = (r - first->root + np) % np; /* its hop along the chain */
    if (h < np - 1) chorus_gpu_moved(g[r], (r + 1) % np, bytes, 0);
    if (h > 0) chorus_gpu_moved(g[r], (r + np - 1) % np, 0, bytes);
  }
}

ncclResult_t chorus_gpu_ce_coll_run(chorus_op **ops, size_t n, const chorus_task *tasks, size_t i) {
  chorus_op *first = ops[i];
  chorus_gpu *g0 = first->cc->gpu;
  const char *name = chorus_func_name(first->func);
  chorus_gpu_ce_step *steps = NULL;
  size_t nsteps = 0;
  void **streams = NULL;
  int *devices = NULL;
  ncclResult_t res = coll_program(ops, n, tasks, i, &steps, &nsteps);
  if (res == ncclSuccess && streams_of(ops, n, &streams, &devices) != 0)
    res = chorus_error(ncclSystemError, "out of memory queueing a %s", name);
  if (res == ncclSuccess) res = chorus_gpu_ce_exec(steps, nsteps, streams, devices, name);
  if (res == ncclSuccess) count_coll(ops, n, i);
  const unsigned bit = 1u << first->func;
  if (res == ncclSuccess && !(g0->ce_coll_told & bit)) {
    g0->ce_coll_told |= bit;
    INFO(CHORUS_COLL | CHORUS_TUNING,
         "rank %d: nccl%s of %zu bytes per rank runs on the copy engine (%d GPUs of this "
         "process); so do later ones where the rules say so with every rank's call in one group "
         "(NCCL_ALGO=^copyengine: never)",
         g0->rank, name, first->count * first->esize, g0->nranks);
  }
  chorus_free(steps);
  chorus_free(streams);
  chorus_free(devices);
  return res;
}
