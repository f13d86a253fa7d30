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

/* Streams that name a device's default stream (NULL, cudaStreamLegacy,
 * cudaStreamPerThread) are a different stream on each GPU, which the
 * joins cannot tell apart; a stream being captured would need the joins
 * inside its graph. */
static int stream_ok(void *s) {
  return (uintptr_t)s > 2 && chorus_dev_stream_capturing(s) == 0;
}

/* A call of a communicator whose ranks are all GPUs of this process,
 * reaching each other directly. */
static int local_gpus(const chorus_op *op) {
  const chorus_gpu *g = op->cc->gpu;
  return g->all_local && !g->staged && g->nranks > 1;
}

ncclResult_t chorus_gpu_ce_exec(const chorus_gpu_ce_step *steps, size_t nsteps,
                                void *const *streams, const int *devices, const char *what) {
  const int saved = chorus_device_current();
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

/* Send/Recv ops[i] as programs see it: its stream is named by the call's
 * index (streams_of), so calls on one stream name it twice, which the
 * joins allow (a stream waiting for itself is nothing). */
static chorus_gpu_ce_call call_of(chorus_op **ops, size_t i) {
  const chorus_op *op = ops[i];
  const chorus_gpu *g = op->cc->gpu;
  const int send = op->func == CHORUS_FUNC_SEND;
  return (chorus_gpu_ce_call){
      g->key, g->rank, op->root, send, op->count * op->esize, send ? op->sendbuff : op->recvbuff,
      (int)i};
}

/* The calls of ops[] as the matching sees them (the Send/Recv; others
 * zeroed); 0 when none may pair. */
static size_t p2p_calls(chorus_op **ops, size_t n, chorus_gpu_ce_call *c) {
  size_t any = 0;
  for (size_t i = 0; i < n; i++) {
    const chorus_op *op = ops[i];
    if (!chorus_gpu_is_p2p(op)) continue;
    const chorus_gpu *g = op->cc->gpu;
    /* Every call of the communicator is described (its number among the
     * calls to a peer counts them all); only ones that may pair get a
     * key. */
    c[i] = call_of(ops, i);
    if (local_gpus(op) && g->tune.p2p_ce_bytes && stream_ok(op->cuda_stream))
      any++;
    else
      c[i].key = 0;
  }
  /* A communicator with calls that may not gets none: its calls to one
   * peer would otherwise be numbered differently at the two ends. */
  for (size_t i = 0; i < n && any; i++)
    if (chorus_gpu_is_p2p(ops[i]) && !c[i].key)
      for (size_t j = 0; j < n; j++)
        if (ops[j]->cc->gpu->key == ops[i]->cc->gpu->key) c[j].key = 0;
  return any;
}

size_t chorus_gpu_ce_group(chorus_op **ops, size_t n, long *pair) {
  for (size_t i = 0; i < n; i++) pair[i] = -1;
  if (n < 2 || n > 1024) return 0; /* thousands: not worth the quadratic matching */
  /* Groups of small calls (the latency-bound ones) stop here. */
  int large = 0;
  for (size_t i = 0; i < n && !large; i++) {
    const chorus_gpu *g = ops[i]->cc->gpu;
    large = chorus_gpu_is_p2p(ops[i]) && g->tune.p2p_ce_bytes &&
            ops[i]->count * ops[i]->esize >= g->tune.p2p_ce_bytes && local_gpus(ops[i]);
  }
  if (!large) return 0;
  chorus_gpu_ce_call *c = chorus_calloc(n, sizeof *c);
  if (!c) return 0;
  size_t pairs = 0;
  /* Settings are read alike on every rank of the process. */
  if (p2p_calls(ops, n, c))
    pairs = chorus_gpu_ce_match(c, n, ops[0]->cc->gpu->tune.p2p_ce_bytes, pair);
  chorus_free(c);
  return pairs;
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
  const int saved = chorus_device_current();
  int rc = chorus_dev_use(chorus_gpu_device(g));
  if (rc == 0) rc = chorus_dev_stream_new(&g->side_stream);
  if (saved >= 0) chorus_dev_use(saved);
  if (rc == 0) return ncclSuccess;
  return chorus_error(ncclUnhandledCudaError,
                      "rank %d: creating a second stream on GPU %d for the copy engine: %s",
                      g->rank, chorus_gpu_device(g), chorus_dev_error());
}

ncclResult_t chorus_gpu_ce_run(chorus_op **ops, size_t n, const long *pair) {
  for (size_t i = 0; i < n; i++)
    if (pair[i] >= 0) CHECK(chorus_gpu_async_error(ops[i]->cc->gpu));
  chorus_gpu_ce_call *c = chorus_calloc(n, sizeof *c);
  chorus_gpu_ce_step *steps = chorus_calloc(3 * n, sizeof *steps);
  void **streams = NULL;
  int *devices = NULL;
  ncclResult_t res = ncclSuccess;
  if (!c || !steps || streams_of(ops, n, &streams, &devices) != 0) {
    res = chorus_error(ncclSystemError, "out of memory queueing %zu Send/Recv", n);
    goto out;
  }
  for (size_t i = 0; i < n; i++) /* the pairs, as chorus_gpu_ce_group matched them */
    if (pair[i] >= 0) c[i] = call_of(ops, i);
  const size_t nsteps = chorus_gpu_ce_plan_pairs(c, n, pair, steps);
  res = chorus_gpu_ce_exec(steps, nsteps, streams, devices, "ncclSend/ncclRecv");
  for (size_t i = 0; i < n && res == ncclSuccess; i++) {
    chorus_gpu *g = ops[i]->cc->gpu;
    if (pair[i] < 0 || ops[i]->func != CHORUS_FUNC_SEND || g->ce_told) continue;
    g->ce_told = 1;
    INFO(CHORUS_P2P | CHORUS_TUNING,
         "rank %d: ncclSend of %zu bytes to rank %d (GPU %d, this process) runs on the copy "
         "engine; so do later ones from %zu bytes with both ends in one group "
         "(CHORUS_GPU_P2P_CE_BYTES; 0: never)",
         g->rank, c[i].bytes, ops[i]->root, devices[pair[i]], g->tune.p2p_ce_bytes);
  }
out:
  chorus_free(c);
  chorus_free(steps);
  chorus_free(streams);
  chorus_free(devices);
  return res;
}

/* ---- Broadcast, AllGather, AlltoAll ----------------------------------------- */

/* The least size (of the larger buffer) at which op's collective goes on
 * the copy engine; 0: never. */
static size_t coll_min(const chorus_op *op) {
  const chorus_gpu *g = op->cc->gpu;
  return chorus_gpu_ce_coll_min(&g->tune, op->func, g->nranks);
}

static const char *coll_setting(const chorus_op *op) {
  const int pair = op->cc->gpu->nranks == 2;
  if (op->func != CHORUS_FUNC_BROADCAST)
    return pair ? "CHORUS_GPU_XCHG_CE_BYTES_PAIR" : "CHORUS_GPU_XCHG_CE_BYTES";
  return pair ? "CHORUS_GPU_BCAST_CE_BYTES_PAIR" : "CHORUS_GPU_BCAST_CE_BYTES";
}

/* The kind and size permit it (ce_plan.c), and the ranks and stream. */
static int coll_candidate(const chorus_op *op) {
  const chorus_gpu *g = op->cc->gpu;
  return chorus_gpu_ce_coll_fits(&g->tune, op->func, g->nranks, op->count * op->esize,
                                 op->sendbuff == op->recvbuff) &&
         local_gpus(op) && stream_ok(op->cuda_stream);
}

size_t chorus_gpu_ce_coll_group(chorus_op **ops, size_t n, long *lead) {
  for (size_t i = 0; i < n; i++) lead[i] = -1;
  if (n < 2 || n > 1024) return 0;
  size_t first = 0; /* groups without a candidate (small calls) stop here */
  while (first < n && !coll_candidate(ops[first])) first++;
  if (first == n) return 0;
  uint8_t *cand = chorus_calloc(n, 1);
  uint64_t *desc = chorus_calloc(n, sizeof *desc);
  int *nranks = chorus_calloc(n, sizeof *nranks);
  int *match = chorus_calloc(n * CHORUS_KERN_MAX_RANKS, sizeof *match);
  size_t calls = 0;
  if (cand && desc && nranks && match) {
    for (size_t i = 0; i < n; i++) {
      cand[i] = (uint8_t)(i == first || (i > first && coll_candidate(ops[i])));
      desc[i] = chorus_gpu_call_desc(ops[i]);
      nranks[i] = ops[i]->cc->gpu->nranks;
    }
    if (chorus_gpu_group_match(ops, n, cand, match) == 0)
      calls = chorus_gpu_ce_coll_leads(cand, desc, nranks, match, n, lead);
  }
  chorus_free(cand);
  chorus_free(desc);
  chorus_free(nranks);
  chorus_free(match);
  return calls;
}

/* The program of the collective whose ranks' calls are ops[i..]: steps
 * (allocated) and their number, or an error. */
static ncclResult_t coll_program(chorus_op **ops, size_t n, const long *lead, size_t i,
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
  b.chunk = first->cc->gpu->tune.bcast_ce_chunk;
  x.alltoall = first->func == CHORUS_FUNC_ALLTOALL;
  for (size_t j = i; j < n && j < i + (size_t)np; j++) {
    const int p = ops[j]->cc->gpu->rank;
    if (lead[j] != (long)i) return chorus_error(ncclInternalError, "copy-engine plan mixed up");
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

ncclResult_t chorus_gpu_ce_coll_run(chorus_op **ops, size_t n, const long *lead, size_t i) {
  chorus_op *first = ops[i];
  chorus_gpu *g0 = first->cc->gpu;
  const char *name = chorus_func_name(first->func);
  chorus_gpu_ce_step *steps = NULL;
  size_t nsteps = 0;
  void **streams = NULL;
  int *devices = NULL;
  ncclResult_t res = coll_program(ops, n, lead, i, &steps, &nsteps);
  if (res == ncclSuccess && streams_of(ops, n, &streams, &devices) != 0)
    res = chorus_error(ncclSystemError, "out of memory queueing a %s", name);
  if (res == ncclSuccess) res = chorus_gpu_ce_exec(steps, nsteps, streams, devices, name);
  const unsigned bit = 1u << first->func;
  if (res == ncclSuccess && !(g0->ce_coll_told & bit)) {
    g0->ce_coll_told |= bit;
    INFO(CHORUS_COLL | CHORUS_TUNING,
         "rank %d: nccl%s of %zu bytes per rank runs on the copy engine (%d GPUs of this "
         "process); so do later ones from %zu bytes with every rank's call in one group (%s; "
         "0: never)",
         g0->rank, name, first->count * first->esize, g0->nranks, coll_min(first),
         coll_setting(first));
  }
  chorus_free(steps);
  chorus_free(streams);
  chorus_free(devices);
  return res;
}
