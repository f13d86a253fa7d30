/*
 * profiler.c - see profiler.h.
 *
 * Events are described once (an `ev`), then written into the descriptor of
 * the plugin's version. Strings handed to a plugin are static: plugins
 * keep the pointers (NCCL's example prints them at finalize). Calls into
 * the plugin come from the threads that issue and run calls and from the
 * thread that reads GPU times (core/trace.c), as NCCL's come from its
 * proxy thread too: plugins expect that.
 */
#include "core/profiler.h"

#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "algo/algos.h"
#include "algo/func.h"
#include "coll/steps.h"
#include "transport/plugin/netplug.h"
#include "core/comm.h"
#include "core/profiler_abi.h"
#include "device/device.h"
#include "util/alloc.h"
#include "util/dl.h"
#include "util/log.h"
#include "util/param.h"
#include "util/siphash.h"

struct chorus_prof_state {
  void *ctx;
  int rank;
  uint64_t seq[CHORUS_FUNC_COUNT]; /* Coll sequence numbers per function */
  /* The application's ranks of its cross-host parts' (coll/steps.h), or NULL. */
  int *cross_ranks;
  uint64_t hash;
  char name[64];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *dl;
static int version, tried;
static const void *table;
static char lib_path[4096];
/* The activation mask plugins set (and may change): one per process. */
static int mask;

static const char *const type_names[ncclNumTypes] = {
    "ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
    "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
    "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
static char algo_names[CHORUS_ALGO_COUNT][24];
/* The thread's open GroupApi, as NCCL keeps it: one per outermost group of
 * the thread, in the context of its first profiled communicator; the API
 * events of every communicator in the group hang under it. */
static _Thread_local void *group_api;
static _Thread_local int group_open;
static _Thread_local ncclComm_t group_owner;

/* ---- one event, in every version ------------------------------------------------------ */

typedef struct ev {
  int type;
  void *parent;
  int rank;
  int func, dtype, redop, root; /* root or peer */
  size_t count, bytes;
  const void *send;
  void *recv;
  uint64_t seq;
  int algo;
  void *stream;
  int depth;
  uint8_t graph;
  uint64_t ptimer;
  void *parent_group;
  prof_proxy_op proxy_op;
  int step;
  prof_net_plugin net;
} ev;

static const char *func_str(int f) {
  return chorus_func_name(f);
}
static const char *type_str(int t) {
  return t >= 0 && t < ncclNumTypes ? type_names[t] : "ncclUnknown";
}
static const char *algo_str(int a) {
  return a >= 0 && a < CHORUS_ALGO_COUNT ? algo_names[a] : "GPU";
}

static void fill_v5(const ev *e, prof_descr_v5 *d) {
  memset(d, 0, sizeof *d);
  d->type = (uint64_t)e->type;
  d->parent = e->parent;
  d->rank = e->rank;
  switch (e->type) {
  case PROF_GROUP_API:
    d->group_api.graph_captured = e->graph;
    d->group_api.depth = e->depth;
    break;
  case PROF_COLL_API:
    d->coll_api.func = func_str(e->func);
    d->coll_api.count = e->count;
    d->coll_api.datatype = type_str(e->dtype);
    d->coll_api.root = e->root;
    d->coll_api.stream = e->stream;
    d->coll_api.graph_captured = e->graph;
    break;
  case PROF_P2P_API:
    d->p2p_api.func = func_str(e->func);
    d->p2p_api.count = e->count;
    d->p2p_api.datatype = type_str(e->dtype);
    d->p2p_api.stream = e->stream;
    d->p2p_api.graph_captured = e->graph;
    break;
  case PROF_KERNEL_LAUNCH:
    d->kernel_launch.stream = e->stream;
    break;
  case PROF_COLL:
    d->coll.seq = e->seq;
    d->coll.func = func_str(e->func);
    d->coll.send = e->send;
    d->coll.recv = e->recv;
    d->coll.count = e->count;
    d->coll.root = e->root;
    d->coll.datatype = type_str(e->dtype);
    d->coll.nchannels = 1;
    d->coll.algo = algo_str(e->algo);
    d->coll.proto = "SIMPLE";
    d->coll.parent_group = e->parent_group;
    break;
  case PROF_P2P:
    d->p2p.func = func_str(e->func);
    d->p2p.buff = e->func == CHORUS_FUNC_SEND ? (void *)e->send : e->recv;
    d->p2p.datatype = type_str(e->dtype);
    d->p2p.count = e->count;
    d->p2p.peer = e->root;
    d->p2p.nchannels = 1;
    d->p2p.parent_group = e->parent_group;
    break;
  case PROF_KERNEL_CH:
    d->kernel_ch.channel = 0;
    d->kernel_ch.ptimer = e->ptimer;
    break;
  case PROF_PROXY_OP:
    d->proxy_op = e->proxy_op;
    break;
  case PROF_PROXY_STEP:
    d->proxy_step.step = e->step;
    break;
  case PROF_NET_PLUGIN:
    d->net_plugin = e->net;
    break;
  default:
    break;
  }
}

/* The descriptor of an older version, from v5's; 0 when that version has
 * no such event. */
static int fill_old(const ev *e, const struct chorus_prof_state *s, const prof_descr_v5 *n,
                    void *out) {
  const int api = e->type >= PROF_GROUP_API;
  if (api || ((e->type == PROF_KERNEL_CH || e->type == PROF_NET_PLUGIN) && version < 3)) return 0;
  if (version == 4) {
    prof_descr_v4 *d = out;
    memset(d, 0, sizeof *d);
    d->type = (uint8_t)e->type, d->parent = e->parent, d->rank = e->rank;
    if (e->type == PROF_COLL)
      memcpy(&d->coll, &n->coll, sizeof d->coll);
    else if (e->type == PROF_P2P)
      memcpy(&d->p2p, &n->p2p, sizeof d->p2p);
    else if (e->type == PROF_KERNEL_CH)
      d->kernel_ch.channel = 0, d->kernel_ch.ptimer = e->ptimer;
    else if (e->type == PROF_NET_PLUGIN)
      d->net_plugin = e->net;
    else if (e->type == PROF_PROXY_OP)
      d->proxy_op = e->proxy_op;
    else if (e->type == PROF_PROXY_STEP)
      d->proxy_step.step = e->step;
    return 1;
  }
  if (version == 3 || version == 2) {
    prof_descr_v3 d3;
    prof_descr_v2 d2;
    memset(&d3, 0, sizeof d3);
    memset(&d2, 0, sizeof d2);
    d3.type = d2.type = (uint8_t)e->type;
    d3.parent = d2.parent = e->parent;
    d3.rank = d2.rank = e->rank;
    if (e->type == PROF_NET_PLUGIN) d3.net_plugin = e->net; /* version 3 only */
    if (e->type == PROF_PROXY_OP) d3.proxy_op = d2.proxy_op = e->proxy_op;
    if (e->type == PROF_PROXY_STEP) d3.proxy_step.step = d2.proxy_step.step = e->step;
    if (e->type == PROF_COLL) {
      d3.coll.name = d2.coll.name = s->name;
      d3.coll.comm_hash = d2.coll.comm_hash = s->hash;
      d3.coll.seq = d2.coll.seq = e->seq;
      d3.coll.func = d2.coll.func = n->coll.func;
      d3.coll.send = d2.coll.send = e->send;
      d3.coll.recv = d2.coll.recv = e->recv;
      d3.coll.count = d2.coll.count = e->count;
      d3.coll.root = d2.coll.root = e->root;
      d3.coll.datatype = d2.coll.datatype = n->coll.datatype;
      d2.coll.traffic_bytes = e->bytes;
      d3.coll.nchannels = d2.coll.nchannels = 1;
      d3.coll.algo = d2.coll.algo = n->coll.algo;
      d3.coll.proto = d2.coll.proto = n->coll.proto;
    } else if (e->type == PROF_P2P) {
      d3.p2p.name = d2.p2p.name = s->name;
      d3.p2p.comm_hash = d2.p2p.comm_hash = s->hash;
      d3.p2p.func = d2.p2p.func = n->p2p.func;
      d3.p2p.buff = d2.p2p.buff = n->p2p.buff;
      d3.p2p.datatype = d2.p2p.datatype = n->p2p.datatype;
      d3.p2p.count = d2.p2p.count = e->count;
      d3.p2p.peer = d2.p2p.peer = e->root;
    }
    if (version == 3)
      memcpy(out, &d3, sizeof d3);
    else
      memcpy(out, &d2, sizeof d2);
    return 1;
  }
  prof_descr_v1 *d = out;
  memset(d, 0, sizeof *d);
  d->type = (uint8_t)e->type, d->parent = e->parent, d->rank = e->rank;
  if (e->type == PROF_COLL) {
    d->coll.name = s->name;
    d->coll.comm_hash = s->hash;
    d->coll.seq = e->seq;
    d->coll.func = (uint8_t)chorus_func_nccl_code(e->func);
    d->coll.send = e->send;
    d->coll.recv = e->recv;
    d->coll.count = e->count;
    d->coll.root = e->root;
    d->coll.datatype = (uint8_t)e->dtype;
    d->coll.op = (uint32_t)(e->redop < 0 ? 0 : e->redop);
    d->coll.traffic_bytes = e->bytes;
    d->coll.nchannels = 1;
    d->coll.algo = 1;  /* NCCL's code for a ring */
    d->coll.proto = 2; /* and for Simple */
  } else if (e->type == PROF_P2P) {
    d->p2p.name = s->name;
    d->p2p.comm_hash = s->hash;
    d->p2p.func = (uint8_t)chorus_func_nccl_code(e->func);
    d->p2p.buff = n->p2p.buff;
    d->p2p.datatype = (uint8_t)e->dtype;
    d->p2p.count = e->count;
    d->p2p.peer = e->root;
  } else if (e->type == PROF_PROXY_OP) {
    d->proxy_op = e->proxy_op;
  } else if (e->type == PROF_PROXY_STEP) {
    d->proxy_step.step = e->step;
  }
  return 1;
}

/* The bits that make NCCL emit an event of `type`: its own and those of
 * the events below it. */
static int wanted(int type) {
  const int m = __atomic_load_n(&mask, __ATOMIC_RELAXED);
  const int below = PROF_PROXY_OP | PROF_PROXY_STEP | PROF_KERNEL_CH | PROF_NET_PLUGIN;
  switch (type) {
  case PROF_GROUP_API:
    return m & ~PROF_PROXY_CTRL;
  case PROF_COLL_API:
    return m & (PROF_COLL_API | PROF_COLL | below);
  case PROF_P2P_API:
    return m & (PROF_P2P_API | PROF_P2P | below);
  case PROF_GROUP:
    return m & (PROF_GROUP | PROF_COLL | PROF_P2P | below);
  case PROF_COLL:
    return m & (PROF_COLL | below);
  case PROF_P2P:
    return m & (PROF_P2P | below);
  case PROF_PROXY_OP:
    return m & (PROF_PROXY_OP | PROF_PROXY_STEP | PROF_NET_PLUGIN);
  case PROF_PROXY_STEP:
    return m & (PROF_PROXY_STEP | PROF_NET_PLUGIN);
  default:
    return m & type;
  }
}

/* Starts event e in context s: the plugin's handle, or NULL. */
static void *start_in(const struct chorus_prof_state *s, const ev *e) {
  if (!s || !wanted(e->type)) return NULL;
  prof_descr_v5 d5;
  fill_v5(e, &d5);
  void *handle = NULL;
  if (version == 5) {
    (void)((const prof_v5 *)table)->start(s->ctx, &handle, &d5);
  } else if (version == 4) {
    prof_descr_v4 d;
    if (fill_old(e, s, &d5, &d)) (void)((const prof_v4 *)table)->start(s->ctx, &handle, &d);
  } else {
    union {
      prof_descr_v1 v1;
      prof_descr_v2 v2;
      prof_descr_v3 v3;
    } d;
    if (fill_old(e, s, &d5, &d)) (void)((const prof_v123 *)table)->start(s->ctx, &handle, &d);
  }
  return handle;
}

static void *start(ncclComm_t comm, const ev *e) {
  return start_in(comm->prof, e);
}

static void stop(void *handle) {
  if (!handle) return;
  if (version == 5)
    (void)((const prof_v5 *)table)->stop(handle);
  else if (version == 4)
    (void)((const prof_v4 *)table)->stop(handle);
  else
    (void)((const prof_v123 *)table)->stop(handle);
}

/* ---- the events ---------------------------------------------------------------------- */

static ev base_of(int rank, int type, void *parent) {
  ev e;
  memset(&e, 0, sizeof e);
  e.type = type;
  e.parent = parent;
  e.rank = rank;
  e.redop = -1;
  e.root = -1;
  e.algo = -1;
  return e;
}

static ev base(ncclComm_t comm, int type, void *parent) {
  return base_of(comm->rank, type, parent);
}

void chorus_prof_issue(ncclComm_t comm, chorus_op *op, int depth) {
  struct chorus_prof_state *s = comm->prof;
  if (!s) return;
  /* Issued under stream capture: it runs at the graph's replays. */
  const uint8_t graph = comm->device >= 0 && chorus_dev_stream_capturing(op->cuda_stream) == 1;
  if (!group_open) {
    ev g = base(comm, PROF_GROUP_API, NULL);
    g.depth = depth + 1;
    g.graph = graph;
    group_api = start(comm, &g);
    group_open = 1;
    group_owner = comm;
  }
  const int p2p = chorus_func_p2p(op->func);
  ev e = base(comm, p2p ? PROF_P2P_API : PROF_COLL_API, group_api);
  e.func = op->func;
  e.count = op->count;
  e.dtype = op->dtype;
  e.root = op->root;
  e.stream = op->cuda_stream;
  e.graph = graph;
  op->prof_api = start(comm, &e);
  stop(op->prof_api);
}

void *chorus_prof_launch_start(ncclComm_t comm, void *stream) {
  struct chorus_prof_state *s = comm->prof;
  if (!s) return NULL;
  ev e = base(comm, PROF_KERNEL_LAUNCH, group_api);
  e.stream = stream;
  return start(comm, &e);
}

void chorus_prof_launch_stop(ncclComm_t comm, void *handle) {
  if (comm->prof) stop(handle);
}

void chorus_prof_hand(ncclComm_t comm, chorus_op *const *ops, int n) {
  struct chorus_prof_state *s = comm->prof;
  if (!s || n <= 0) return;
  ev g = base(comm, PROF_GROUP, NULL);
  void *group = start(comm, &g);
  for (int i = 0; i < n; i++) {
    chorus_op *op = ops[i];
    const int p2p = chorus_func_p2p(op->func);
    ev e = base(comm, p2p ? PROF_P2P : PROF_COLL, op->prof_api);
    e.func = op->func;
    e.count = chorus_op_whole_count(op);
    e.dtype = op->dtype;
    e.redop = chorus_func_reduces(op->func) ? op->nccl_op : -1;
    e.root = op->root;
    e.send = op->sendbuff;
    e.recv = op->recvbuff;
    e.bytes = chorus_func_size(op->func, e.count, op->esize, comm->nranks);
    e.seq = p2p ? 0 : s->seq[op->func]++;
    e.algo = op->cc->gpu || op->cc->proxy ? -1 : op->algo;
    e.parent_group = group;
    op->prof_coll = start(comm, &e);
    stop(op->prof_coll);
  }
  stop(group);
}

/* Records state on event h with its arguments: a for versions 4 and 5,
 * old for 1-3 (NULL: those versions have no such state). */
static void record_in(void *h, int state, prof_args_v45 a, const prof_args_v123 *old) {
  if (version == 5) {
    (void)((const prof_v5 *)table)->record(h, state, &a);
  } else if (version == 4) {
    (void)((const prof_v4 *)table)->record(h, state, &a);
  } else if (old) {
    prof_args_v123 o = *old;
    (void)((const prof_v123 *)table)->record(h, state, &o);
  }
}

void chorus_prof_ran(ncclComm_t comm, void *coll, int64_t start_ns, int64_t end_ns) {
  struct chorus_prof_state *s = comm->prof;
  if (!s || !coll || version < 3) return;
  ev e = base(comm, PROF_KERNEL_CH, coll);
  e.ptimer = (uint64_t)start_ns;
  void *h = start(comm, &e);
  if (!h) return;
  record_in(h, PROF_STATE_KERNEL_CH_STOP, (prof_args_v45){.ptimer = (uint64_t)end_ns}, NULL);
  stop(h);
}

void chorus_prof_group_end(void) {
  if (!group_open) return;
  stop(group_api);
  group_api = NULL;
  group_open = 0;
  group_owner = NULL;
}

/* ---- messages across the network (coll/steps.h) --------------------------------------- */

static pid_t pid;

/* Records state on event h, with a step's bytes. */
static void record(void *h, int state, size_t bytes) {
  prof_args_v123 old;
  memset(&old, 0, sizeof old);
  old.proxy_op.trans_size = bytes;
  record_in(h, state, (prof_args_v45){.trans_size = bytes}, &old);
}

static int steps_wanted(void *ctx) {
  (void)ctx;
  return wanted(PROF_PROXY_OP) != 0;
}

static void *steps_op_start(void *ctx, void *parent, int lane, int peer, int send, size_t chunk,
                            int nsteps) {
  const struct chorus_prof_state *s = ctx;
  ev e = base_of(s->rank, PROF_PROXY_OP, parent);
  e.proxy_op = (prof_proxy_op){.pid = pid,
                               .channel = (uint8_t)lane,
                               .peer = peer,
                               .nsteps = nsteps,
                               .chunk = chunk > INT_MAX ? INT_MAX : (int)chunk,
                               .is_send = send};
  void *h = start_in(s, &e);
  if (h && version >= 4) record(h, PROF_STATE_PROXY_OP_IN_PROGRESS, 0);
  return h;
}

static void *steps_step_start(void *ctx, void *pop, int step) {
  const struct chorus_prof_state *s = ctx;
  ev e = base_of(s->rank, PROF_PROXY_STEP, pop);
  e.step = step;
  return start_in(s, &e);
}

static void steps_record(void *ctx, void *h, int state, size_t bytes) {
  (void)ctx;
  /* NCCL's steps pass through every state of their direction in order,
   * and plugins time each from the next one's start: Chorus's have no
   * wait of their own for the peer's credit once the message is ready
   * (a slot is that credit, taken before it is filled) nor for a flush
   * (data lands in host memory), so those states begin and end at once. */
  switch (state) {
  case CHORUS_STEP_SEND_FILL:
    record(h, PROF_STATE_STEP_SEND_GPU_WAIT, 0);
    break;
  case CHORUS_STEP_SEND_WAIT:
    if (version >= 4) record(h, PROF_STATE_STEP_SEND_PEER_WAIT, bytes);
    record(h, PROF_STATE_STEP_SEND_WAIT, bytes);
    break;
  case CHORUS_STEP_RECV_WAIT:
    record(h, PROF_STATE_STEP_RECV_WAIT, 0);
    break;
  default:
    record(h, PROF_STATE_STEP_RECV_FLUSH_WAIT, bytes);
    record(h, PROF_STATE_STEP_RECV_GPU_WAIT, bytes);
    break;
  }
}

static void steps_stop(void *ctx, void *h) {
  (void)ctx;
  stop(h);
}

static const int ctrl_states[] = {
    [CHORUS_CTRL_IDLE] = PROF_STATE_CTRL_IDLE,
    [CHORUS_CTRL_ACTIVE] = PROF_STATE_CTRL_ACTIVE,
    [CHORUS_CTRL_SLEEP] = PROF_STATE_CTRL_SLEEP,
    [CHORUS_CTRL_WAKEUP] = PROF_STATE_CTRL_WAKEUP,
    [CHORUS_CTRL_APPEND] = PROF_STATE_CTRL_APPEND,
    [CHORUS_CTRL_APPEND_END] = PROF_STATE_CTRL_APPEND_END,
};

static void ctrl_record(void *ctx, void *h, int state, int appended) {
  (void)ctx;
  prof_args_v123 old;
  memset(&old, 0, sizeof old);
  old.appended = appended;
  record_in(h, ctrl_states[state], (prof_args_v45){.appended = appended}, &old);
}

static void *ctrl_start(void *ctx, int state) {
  const struct chorus_prof_state *s = ctx;
  const ev e = base_of(s->rank, PROF_PROXY_CTRL, NULL);
  void *h = start_in(s, &e);
  if (h) ctrl_record(ctx, h, state, 0);
  return h;
}

/* A network plugin's own events (transport/plugin/netplug.h), under the
 * step its message came with. */
static void *net_start(const chorus_step_ref *ref, int64_t id, void *data) {
  const struct chorus_prof_state *s = ref->ctx;
  ev e = base_of(s->rank, PROF_NET_PLUGIN, ref->step);
  e.net = (prof_net_plugin){id, data};
  return start_in(s, &e);
}

static void net_update(void *h, void *data) {
  record_in(h, PROF_STATE_NET_PLUGIN_UPDATE, (prof_args_v45){.data = data}, NULL);
}

static const chorus_net_prof net_prof = {net_start, net_update, stop};

static const struct chorus_step_hooks step_hooks = {
    .wanted = steps_wanted,
    .op_start = steps_op_start,
    .step_start = steps_step_start,
    .record = steps_record,
    .stop = steps_stop,
    .ctrl_start = ctrl_start,
    .ctrl_record = ctrl_record,
};

static void watch(chorus_coll_comm *cc, struct chorus_prof_state *s, int lane, const int *ranks) {
  cc->step_ctx = s;
  cc->step_lane = lane;
  cc->step_ranks = ranks;
  /* Helper threads already run: they read the hooks, then the rest. */
  __atomic_store_n(&cc->step_hooks, &step_hooks, __ATOMIC_RELEASE);
}

/* Hooks comm's messages across the network, and its parts' (their lanes,
 * and where a GPU communicator's parts renumber the ranks, their ranks). */
static void watch_comm(ncclComm_t comm, struct chorus_prof_state *s) {
  const chorus_topo *t = &comm->topo;
  for (int k = 0; k < comm->nlanes; k++) {
    ncclComm_t part = comm->part_cross[k];
    if (!part) continue;
    if (!part->is_lane && !s->cross_ranks) {
      s->cross_ranks = chorus_calloc((size_t)part->nranks, sizeof *s->cross_ranks);
      if (!s->cross_ranks) break; /* no events for the parts */
      const int li = t->local_index[comm->rank];
      for (int r = 0, j = 0; r < comm->nranks && j < part->nranks; r++)
        if (t->local_index[r] == li) s->cross_ranks[j++] = r;
    }
    watch(&part->cc, s, k, part->is_lane ? NULL : s->cross_ranks);
  }
  watch(&comm->cc, s, 0, NULL);
}

static void unwatch(ncclComm_t comm) {
  __atomic_store_n(&comm->cc.step_hooks, NULL, __ATOMIC_RELEASE);
  for (int k = 0; k < comm->nlanes; k++)
    if (comm->part_cross[k])
      __atomic_store_n(&comm->part_cross[k]->cc.step_hooks, NULL, __ATOMIC_RELEASE);
}

/* ---- loading and contexts ------------------------------------------------------------ */

/* Loads the library (under lock): 0, or -1 (none, or passed over: said). */
static int load(void) {
  if (dl) return 0;
  if (tried) return -1;
  tried = 1;
  const char *want = chorus_param_str(CHORUS_P_PROFILER_PLUGIN);
  if (want && !strcasecmp(want, "none")) return -1;
  char why[512] = "";
  void *h = chorus_dl_open_named("libnccl-profiler-", want && *want ? want : "libnccl-profiler.so",
                                 lib_path, sizeof lib_path, why, sizeof why);
  if (!h) {
    if (want && *want)
      WARN("NCCL_PROFILER_PLUGIN=%s: cannot load it (%s); no profiler", want, why);
    else
      INFO(CHORUS_INIT, "no profiler plugin (libnccl-profiler.so: %s)", why);
    return -1;
  }
  table = chorus_dl_newest(h, "ncclProfiler_v", 5, 1, &version);
  /* Every version's table has one shape: a name and five functions. */
  const prof_v5 *t = table;
  if (!t || !t->name || !t->init || !t->start || !t->stop || !t->record || !t->finalize) {
    WARN("profiler plugin %s: %s; not used", lib_path,
         !t ? "it exports no ncclProfiler_v5 .. _v1 table" : "its table lacks a function or name");
    dlclose(h);
    table = NULL;
    return -1;
  }
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
    snprintf(algo_names[a], sizeof algo_names[a], "%s", chorus_algo_name(a));
    for (char *c = algo_names[a]; *c; c++) *c = (char)toupper((unsigned char)*c);
  }
  dl = h;
  pid = getpid();
  chorus_net_prof_set(&net_prof); /* the library stays loaded from here on */
  INFO(CHORUS_INIT, "profiler plugin %s (%s, ncclProfiler_v%d)", lib_path, t->name, version);
  return 0;
}

void chorus_prof_open(ncclComm_t comm) {
  if (comm->is_part) return;
  pthread_mutex_lock(&lock);
  if (load() != 0) {
    pthread_mutex_unlock(&lock);
    return;
  }
  struct chorus_prof_state *s = chorus_calloc(1, sizeof *s);
  if (!s) {
    pthread_mutex_unlock(&lock);
    return;
  }
  const uint64_t key[2] = {comm->init.uids[0].secret[0], comm->init.uids[0].secret[1]};
  s->hash = chorus_siphash(key, "profiler comm id", 16);
  snprintf(s->name, sizeof s->name, "%s", comm->config.commName ? comm->config.commName : "");
  ncclResult_t res;
  if (version == 5)
    res = ((const prof_v5 *)table)
              ->init(&s->ctx, s->hash, &mask, s->name, comm->topo.nhosts, comm->nranks, comm->rank,
                     chorus_log_plugin);
  else if (version == 4)
    res = ((const prof_v4 *)table)
              ->init(&s->ctx, &mask, s->name, s->hash, comm->topo.nhosts, comm->nranks, comm->rank,
                     chorus_log_plugin);
  else
    res = ((const prof_v123 *)table)->init(&s->ctx, &mask);
  if (res != ncclSuccess) {
    INFO(CHORUS_INIT, "profiler plugin %s: init returned %d for rank %d; not used there", lib_path,
         (int)res, comm->rank);
    chorus_free(s);
  } else {
    comm->prof = s;
    s->rank = comm->rank;
    watch_comm(comm, s);
  }
  pthread_mutex_unlock(&lock);
}

void chorus_prof_close(ncclComm_t comm) {
  struct chorus_prof_state *s = comm->prof;
  if (!s) return;
  if (group_owner == comm) chorus_prof_group_end(); /* destroyed inside its group */
  pthread_mutex_lock(&lock);
  /* Its calls ended (chorus_comm_join) and its helper threads (lanes, the
   * GPU proxy) are gone: nothing more to report. */
  unwatch(comm);
  (void)((const prof_v5 *)table)->finalize(s->ctx); /* the same slot in every version */
  comm->prof = NULL;
  chorus_free(s->cross_ranks);
  chorus_free(s);
  /* The library stays loaded after its last communicator: a plugin may
   * leave a thread running past finalize (NVIDIA's Inspector stops its
   * dump thread without joining it), which would run unmapped code. */
  pthread_mutex_unlock(&lock);
}
