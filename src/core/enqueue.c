/*
 * enqueue.c - see enqueue.h.
 */
#include "core/enqueue.h"

#include <stddef.h>
#include <string.h>

#include "algo/func.h"
#include "coll/coll.h"
#include "coll/exec.h"
#include "coll/lanes.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/profiler.h"
#include "core/status.h"
#include "core/trace.h"
#include "gpu/gpu.h"
#include "gpu/ordered.h"
#include "gpu/proxy.h"
#include "util/affinity.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/log.h"
#include "util/misc.h"

#define MAX_QUEUES_ON_STACK 16
#define MAX_OPS_ON_STACK    64

/* Finds op's queue, adding one if needed. -1 when out of memory. */
static int queue_of(chorus_exec_queue **qs, chorus_op ***tails, int *nq, int *cap,
                    const chorus_exec_queue *stackq, chorus_coll_comm *cc) {
  for (int i = 0; i < *nq; i++)
    if ((*qs)[i].cc == cc) return i;
  if (*nq == *cap) {
    int ncap = 2 * *cap;
    chorus_exec_queue *nqs = chorus_malloc((size_t)ncap * sizeof *nqs);
    chorus_op **nts = chorus_malloc((size_t)(2 * ncap) * sizeof *nts);
    if (!nqs || !nts) {
      chorus_free(nqs);
      chorus_free(nts);
      return -1;
    }
    memcpy(nqs, *qs, (size_t)*nq * sizeof **qs);
    memcpy(nts, *tails, (size_t)(2 * *nq) * sizeof **tails);
    if (*qs != stackq) {
      chorus_free(*qs);
      chorus_free(*tails);
    }
    *qs = nqs;
    *tails = nts;
    *cap = ncap;
  }
  (*qs)[*nq] = (chorus_exec_queue){.cc = cc, .result = ncclSuccess};
  (*tails)[2 * *nq] = (*tails)[2 * *nq + 1] = NULL;
  return (*nq)++;
}

/* GPU calls: those of communicators within one host as kernels, those of
 * communicators across hosts staged through the host (gpu/proxy.h). A
 * group holding both queues the kernels first. */
static ncclResult_t run_gpu_ops(chorus_op **gpu, size_t n) {
  size_t nk = 0;
  for (size_t i = 0; i < n; i++) nk += gpu[i]->cc->gpu != NULL;
  if (nk == n) return chorus_gpu_run_ops(gpu, n);
  if (nk == 0) return chorus_proxy_run_ops(gpu, n);
  /* Stable partition: kernels' calls first, in call order. */
  chorus_op **tmp = chorus_malloc(n * sizeof *tmp);
  if (!tmp) return chorus_error(ncclSystemError, "out of memory running %zu grouped calls", n);
  size_t a = 0, b = nk;
  for (size_t i = 0; i < n; i++) tmp[gpu[i]->cc->gpu ? a++ : b++] = gpu[i];
  ncclResult_t res = chorus_gpu_run_ops(tmp, nk);
  if (res == ncclSuccess) res = chorus_proxy_run_ops(tmp + nk, n - nk);
  chorus_free(tmp);
  return res;
}

/* The GPU calls, reductions in rank order (CHORUS_REPRODUCIBLE) launched
 * as their gatherings followed by their additions (gpu/ordered.h). */
static ncclResult_t launch_gpu_ops(chorus_op **gpu, size_t n) {
  ncclResult_t res = chorus_gpu_ordered_begin(gpu, n);
  if (res == ncclSuccess) res = run_gpu_ops(gpu, n);
  const ncclResult_t end = chorus_gpu_ordered_end(gpu, n, res == ncclSuccess);
  return res != ncclSuccess ? res : end;
}

static ncclComm_t comm_of(const chorus_coll_comm *cc) {
  return (ncclComm_t)(void *)((char *)cc - offsetof(struct ncclComm, cc));
}

/* How many lanes a call of a host-memory communicator with lanes is cut
 * across (coll/lanes.h), by the call's size (chorus_func_size; a Send's
 * or Recv's its own bytes, which the peer's matching call has too): 256
 * KiB a lane at least. A call that only moves bytes where socket threads
 * would move its messages (its connections have several sockets) is cut
 * from 2 MiB, 512 KiB a lane, its shares then moved by the lanes' own
 * threads (coll/exec.c); below, whole, the socket threads move it. All
 * measured on 16 cores, every rank a host over loopback. 256 KiB against
 * 512 KiB, two calls of 3 rounds
 * (bench/results/host_lanes_min_ab_16c_2026-12-02.txt): 4 ranks (2
 * lanes) at 512 KiB 1.04-1.54x faster for every collective in both but
 * Gather (0.95x) in one and Send/Recv (0.66x) in the other; 2 ranks (4
 * lanes), AllReduce, ReduceScatter and Reduce at 512 KiB-1 MiB 1.2-2.2x
 * in one, 0.55-1.43x in the other, noisier (calls cut alike there varied
 * 0.54-1.78x). Byte moves on 2 ranks with socket threads, against 1 MiB
 * a lane with lane 0's share left to them, 4 rounds
 * (bench/results/host_lanes_moves_ab_16c_2026-12-02.txt): 1.16-1.54x
 * faster at 2 MiB (4 lanes, not 2), 1.03-1.47x at 4 MiB but Gather
 * (0.83x); cut on two lanes at 1 MiB, 0.65-0.69x for 4 of the 6 calls.
 * The same on every rank: a call's own fields and the communicator's
 * agreed lanes and sockets. A share is one range of elements of each
 * block (lane_share). A reproducible ReduceScatter keeps its ordered
 * schedule, which takes whole blocks. */
static int cut_lanes(const chorus_op *op) {
  const int f = op->func;
  if (!op->cc->lanes || (f == CHORUS_FUNC_REDUCESCATTER && op->cc->reproducible)) return 1;
  const size_t bytes = chorus_func_size(f, op->count, op->esize, op->cc->nranks);
  const int pumped = !chorus_func_reduces(f) && op->cc->lanes_streams > 1;
  if (pumped && bytes < ((size_t)2 << 20)) return 1;
  const size_t k = bytes / (pumped ? (size_t)512 << 10 : (size_t)256 << 10);
  const int most = chorus_lanes_count(op->cc->lanes);
  return k < 2 ? 1 : k < (size_t)most ? (int)k : most;
}

/* Share k of n of op, on cc: the same range of elements of each of its
 * blocks (chorus_op.pitch), the buffers' first blocks' range here. */
static chorus_op lane_share(const chorus_op *op, int k, int n, chorus_coll_comm *cc) {
  const size_t first =
      op->count / (size_t)n * (size_t)k + CHORUS_MIN((size_t)k, op->count % (size_t)n);
  chorus_op s = *op;
  s.cc = cc;
  s.scratch = NULL; /* the whole call's (a Send's copy), which share 0 gives back */
  s.scratch_bytes = 0;
  s.whole_count = op->count;
  s.pitch = op->count; /* blocks of the whole call: the same range of each */
  /* The call's profiler events begin after the cut, before the lanes run. */
  s.prof_whole = &op->prof_coll;
  s.count = op->count / (size_t)n + ((size_t)k < op->count % (size_t)n);
  s.sendbuff = op->sendbuff ? (const char *)op->sendbuff + first * op->esize : NULL;
  s.recvbuff = op->recvbuff ? (char *)op->recvbuff + first * op->esize : NULL;
  return s;
}

/* Cuts op across its communicator's lanes where it goes on more than one
 * (cut_lanes): shares 1..n-1 join lanes 1..n-1's lists (emptied at q's
 * first cut call of the run, with room for `room` calls), and op becomes
 * share 0, run here with q's other calls. */
static ncclResult_t cut_across_lanes(chorus_exec_queue *q, chorus_op *op, int room) {
  const int n = cut_lanes(op);
  if (n < 2) return ncclSuccess;
  chorus_lanes *ln = op->cc->lanes;
  for (int k = 1; k < chorus_lanes_count(ln) && !q->lanes; k++)
    CHECK(chorus_lanes_clear(ln, k, room));
  q->lanes = CHORUS_MAX(q->lanes, n);
  for (int k = 1; k < n; k++) {
    const chorus_op s = lane_share(op, k, n, chorus_lanes_comm(ln, k));
    chorus_lanes_push(ln, k, &s);
  }
  void *scratch = op->scratch; /* share 0 gives it back, after the lanes ended */
  const size_t scratch_bytes = op->scratch_bytes;
  *op = lane_share(op, 0, n, op->cc);
  op->scratch = scratch;
  op->scratch_bytes = scratch_bytes;
  return ncclSuccess;
}

/* The stuck report follows what each GPU finished (core/status.h): one
 * event per communicator after its last collective here. */
static void follow_gpu_ops(chorus_op **gpu, size_t n) {
  for (size_t i = n; i-- > 0;) {
    const chorus_op *op = gpu[i];
    if (!op->cc->progress || chorus_func_p2p(op->func)) continue;
    int later = 0; /* a later collective of its communicator was followed */
    for (size_t j = i + 1; j < n && !later; j++)
      later = gpu[j]->cc == op->cc && !chorus_func_p2p(gpu[j]->func);
    if (later) continue;
    chorus_status_gpu_launched(comm_of(op->cc), op->app_index, op->cuda_stream);
  }
}

/* CHORUS_TRACE around a launch of GPU calls: per traced communicator (the
 * first TRACED_MAX), a timing event before them on its first call's stream
 * and one after them. */
#define TRACED_MAX 16
typedef struct traced_launch {
  int n, slot[TRACED_MAX], first[TRACED_MAX];
} traced_launch;

static void trace_gpu_begin(chorus_op **gpu, size_t n, traced_launch *t) {
  t->n = 0;
  for (size_t i = 0; i < n && t->n < TRACED_MAX; i++) {
    if (!gpu[i]->cc->tracing) continue;
    int seen = 0;
    for (int k = 0; k < t->n && !seen; k++) seen = gpu[t->first[k]]->cc == gpu[i]->cc;
    if (seen) continue;
    t->first[t->n] = (int)i;
    t->slot[t->n++] = chorus_trace_gpu_begin(comm_of(gpu[i]->cc), gpu[i]->cuda_stream);
  }
}

static void trace_gpu_end(chorus_op **gpu, size_t n, const traced_launch *t) {
  for (int k = 0; k < t->n; k++) {
    const chorus_op *first = gpu[t->first[k]];
    chorus_op *mine[64];
    int m = 0;
    for (size_t i = (size_t)t->first[k]; i < n && m < 64; i++)
      if (gpu[i]->cc == first->cc) mine[m++] = gpu[i];
    chorus_trace_gpu_end(comm_of(first->cc), t->slot[k], mine, m, first->cuda_stream);
  }
}

/* A profiler plugin's events for the calls all[0, n), per communicator
 * (the first PROFILED_MAX, 64 calls each): before they run (when = 0),
 * after (1: their times, host calls). */
#define PROFILED_MAX 16
static void prof_calls(chorus_op **all, size_t n, int when, ncclResult_t res) {
  const chorus_coll_comm *seen[PROFILED_MAX];
  int nseen = 0;
  for (size_t i = 0; i < n && nseen < PROFILED_MAX; i++) {
    const chorus_coll_comm *cc = all[i]->cc;
    ncclComm_t comm = comm_of(cc);
    if (!comm->prof || cc->progress == NULL) continue;
    int known = 0;
    for (int k = 0; k < nseen && !known; k++) known = seen[k] == cc;
    if (known) continue;
    seen[nseen++] = cc;
    chorus_op *mine[64];
    int m = 0;
    for (size_t j = i; j < n && m < 64; j++)
      if (all[j]->cc == cc) mine[m++] = all[j];
    if (!when) {
      chorus_prof_hand(comm, mine, m);
      continue;
    }
    for (int j = 0; j < m && res == ncclSuccess && !cc->gpu && !cc->proxy; j++)
      chorus_prof_ran(comm, mine[j]->prof_coll, mine[j]->t_start, mine[j]->t_end);
  }
}

/* The first call of a host-memory rank that shares its machine's CPUs
 * with more ranks than there are: its thread binds itself to one of them
 * (util/affinity.h). Here rather than at init, which may run on a thread
 * of its own. */
static void spread(chorus_coll_comm *cc) {
  const int cpu =
      chorus_affinity_spread(cc->spread - 1, cc->topo->nmachine, cc->topo->machine_cpus);
  cc->spread = 0;
  if (cpu >= 0)
    INFO(CHORUS_INIT,
         "rank %d: %d ranks share this machine's CPUs: its calls' thread bound to CPU %d", cc->rank,
         cc->topo->nmachine, cpu);
}

ncclResult_t chorus_run_ops(chorus_op *ops, int flags) {
  const int free_ops = flags & CHORUS_RUN_FREE;
  chorus_exec_queue stackq[MAX_QUEUES_ON_STACK];
  chorus_op *stackt[2 * MAX_QUEUES_ON_STACK], *stacko[MAX_OPS_ON_STACK], *stackg[MAX_OPS_ON_STACK];
  chorus_exec_queue *qs = stackq;
  chorus_op **tails = stackt, **all = stacko, **gpu = stackg;
  int nq = 0, cap = MAX_QUEUES_ON_STACK;
  ncclResult_t res = ncclSuccess;
  size_t nops = 0;
  for (chorus_op *op = ops; op; op = op->next_op) nops++;
  if (nops > MAX_OPS_ON_STACK &&
      (!(all = chorus_malloc(nops * sizeof *all)) || !(gpu = chorus_malloc(nops * sizeof *gpu)))) {
    if (all) chorus_free(all);
    chorus_op *next_op;
    for (chorus_op *op = ops; op; op = next_op) {
      next_op = op->next_op;
      if (free_ops) chorus_group_free_op(op);
    }
    return chorus_error(ncclSystemError, "out of memory running %zu grouped calls", nops);
  }
  /* A group's Sends that read what its Recvs write go from a copy
   * (chorus_p2p_snapshot, after the planning below); where they are cut
   * across lanes, the copy comes first, whole, and the shares read it;
   * after the planning, which resets it, only which Sends may go by
   * reference is marked again. */
  int cut_p2p = 0;
  for (chorus_op *op = ops; op && !cut_p2p; op = op->next_op)
    cut_p2p = op->cc->lanes && chorus_func_p2p(op->func);
  if (cut_p2p) {
    size_t j = 0;
    for (chorus_op *op = ops; op; op = op->next_op) all[j++] = op;
    res = chorus_p2p_snapshot(all, nops);
  }
  /* Plan in call order (this stamps sequence numbers and tickets) and link
   * each op to its communicator's queue: collectives in order, point-to-
   * point calls in the concurrent list. */
  size_t k = 0, ng = 0;
  chorus_op *next;
  for (chorus_op *op = ops; op; op = next) {
    next = op->next_op;
    op->next_op = NULL;
    all[k++] = op;
    if (res != ncclSuccess) continue;
    if (op->cc->gpu || op->cc->proxy) { /* GPU communicators: on the caller's streams, below */
      gpu[ng++] = op;
      continue;
    }
    if (op->cc->spread) spread(op->cc);
    int i = queue_of(&qs, &tails, &nq, &cap, stackq, op->cc);
    if (i < 0) {
      res = chorus_error(ncclSystemError, "out of memory grouping %d communicators", nq + 1);
      continue;
    }
    chorus_log_ctx old = chorus_log_ctx_set(op->cc->log_ctx);
    ncclResult_t pres = op->cc->lanes ? cut_across_lanes(&qs[i], op, (int)nops) : ncclSuccess;
    if (pres == ncclSuccess) pres = chorus_coll_prepare(op);
    chorus_log_ctx_set(old);
    if (pres != ncclSuccess) {
      res = pres;
      continue;
    }
    chorus_exec_queue_push(&qs[i], &tails[2 * i], op);
  }
  if (res == ncclSuccess && cut_p2p)
    chorus_p2p_mark_by_ref(all, k); /* planning reset it; the copies are taken */
  else if (res == ncclSuccess)
    res = chorus_p2p_snapshot(all, k);
  if (res == ncclSuccess) prof_calls(all, k, 0, res);
  traced_launch traced; /* trace_gpu_begin fills it; zeroing it all costs a small call 3% */
  traced.n = 0;
  void *launched = NULL; /* the KernelLaunch of the first profiled GPU communicator */
  ncclComm_t launcher = NULL;
  for (size_t i = 0; i < ng && !launcher && res == ncclSuccess; i++)
    if (comm_of(gpu[i]->cc)->prof) launcher = comm_of(gpu[i]->cc);
  if (launcher) launched = chorus_prof_launch_start(launcher, gpu[0]->cuda_stream);
  if (res == ncclSuccess && ng) trace_gpu_begin(gpu, ng, &traced);
  if (res == ncclSuccess && ng) res = launch_gpu_ops(gpu, ng);
  if (res == ncclSuccess && ng) trace_gpu_end(gpu, ng, &traced);
  if (launcher) chorus_prof_launch_stop(launcher, launched);
  if (res == ncclSuccess && ng) follow_gpu_ops(gpu, ng);
  if (res == ncclSuccess) {
    const int count = !(flags & CHORUS_RUN_COUNTED);
    for (int i = 0; i < nq && count; i++) __atomic_add_fetch(&qs[i].cc->busy, 1, __ATOMIC_ACQ_REL);
    for (int i = 0; i < nq; i++) chorus_lanes_begin(qs[i].cc->lanes, qs[i].lanes);
    res = chorus_exec_run(qs, nq);
    for (int i = 0; i < nq; i++) res = chorus_lanes_end(qs[i].cc->lanes, qs[i].lanes, res);
    for (int i = 0; i < nq && count; i++) __atomic_sub_fetch(&qs[i].cc->busy, 1, __ATOMIC_ACQ_REL);
  }
  for (size_t j = 0; j < k && res == ncclSuccess; j++)
    if (all[j]->cc->tracing && !all[j]->cc->gpu && !all[j]->cc->proxy)
      chorus_trace_host(comm_of(all[j]->cc), all[j]);
  prof_calls(all, k, 1, res);
  /* Calls handed to a GPU count as ended, host calls once they ran. */
  for (size_t j = 0; j < k && res == ncclSuccess; j++)
    if (all[j]->cc->progress)
      chorus_progress_end(all[j]->cc->progress, !chorus_func_p2p(all[j]->func),
                          chorus_func_p2p(all[j]->func) != 0);
  for (size_t j = 0; j < k; j++) {
    chorus_coll_release(all[j]);
    if (free_ops) chorus_group_free_op(all[j]);
  }
  if (all != stacko) chorus_free(all);
  if (gpu != stackg) chorus_free(gpu);
  if (qs != stackq) {
    chorus_free(qs);
    chorus_free(tails);
  }
  return res;
}

ncclResult_t chorus_enqueue(ncclComm_t comm, chorus_op *op) {
  op->cc = &comm->cc;
  op->next_op = NULL;
  if (chorus_group_depth() > 0) return chorus_group_add_op(op, comm);
  /* The call entered through chorus_comm_enter_call: counted already. */
  const ncclResult_t res = chorus_run_ops(op, CHORUS_RUN_COUNTED);
  chorus_prof_group_end();
  return res;
}

ncclResult_t chorus_estimate_ops(const chorus_op *ops, float *us) {
  /* The planner's tasks for the calls, priced by its cost model. Nothing
   * is asked of the device: what needs it (zero-copy through the group,
   * the copy engine) is priced as the kernels that would run otherwise. */
  size_t n = 0;
  *us = 0;
  for (const chorus_op *a = ops; a; a = a->next_op) n++;
  if (!n) return ncclSuccess;
  chorus_plan_call *calls = chorus_calloc(n, sizeof *calls);
  chorus_task *tasks = chorus_calloc(n, sizeof *tasks);
  ncclResult_t res = ncclSuccess;
  char err[256];
  if (!calls || !tasks) {
    res = chorus_error(ncclSystemError, "out of memory pricing %zu grouped calls", n);
  } else {
    size_t i = 0;
    for (const chorus_op *a = ops; a; a = a->next_op, i++)
      calls[i] = (chorus_plan_call){&a->cc->plan, a->func,     a->count, a->esize, a->root,  0, 0,
                                    a->sendbuff,  a->recvbuff, 0,        0,        (void *)a};
    if (chorus_plan_group(calls, n, NULL, tasks, err, sizeof err) == 0)
      *us = (float)chorus_plan_cost_us(calls, tasks, n);
    else
      res = chorus_error(ncclInvalidUsage, "ncclGroupSimulateEnd: %s", err);
  }
  chorus_free(calls);
  chorus_free(tasks);
  return res;
}
